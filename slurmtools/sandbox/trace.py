"""The recorded history a sandbox replays: one `TraceJob` per job, rebuilt from what sacct kept.

Pure: accounting records in (`slurmtools.slurm.commands.parse_sacct` or a backend's `accounting`), a `Trace` out.
A job that never started in history (cancelled while pending) is not replayed: it held no resources and sacct does
not say how long it would have run; jobs still pending or running when the history was taken are left out too.
Both are counted in `Trace.notes`. A requeued job (`sacct -D` lists each run) is one job: its first submission,
its GPUs, and the run time of the run that ended it (what a job that resumes from a checkpoint still had to do is
not recorded anywhere, so the replayed job does that last run's work).

sacct prints local wall-clock times; a history's (a file, or the backend's sacct text for `--since`) are read in
this machine's zone as the report reads a dump (`reports.zone`): the autumn change's repeated hour by ElapsedRaw or
Elapsed, else so that End is not before Start, else as its first pass (counted in a note), and a time the spring
change skipped is refused (`slurm.sacct_times`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timezone
from typing import Iterable

from slurmtools.errors import ParseError
from slurmtools.slurm.tres import GPU_SHARE_NAME

#: the sacct fields a trace is rebuilt from (a tuple: any one of them); `sacct -o` with these and `-D -X`
TRACE_FIELDS = (("JobID", "JobIDRaw"), "User", "Account", "QOS", "State", "Submit", "Start", "End",
                ("TimelimitRaw", "Timelimit"), ("ReqTRES", "AllocTRES"))
SACCT_OPTIONS = ("-X", "-D", "--parsable2",
                 "-o", "JobID,JobIDRaw,JobName,User,Account,Partition,QOS,State,ExitCode,Submit,Eligible,Start,"
                       "End,ElapsedRaw,TimelimitRaw,NodeList,AllocTRES,ReqTRES,AllocCPUS")
#: final states of a job that ran and will not run again
ENDED = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                   "DEADLINE", "BOOT_FAIL"})

#: states of a record slurmdbd has not closed yet (REQUEUED is not one: `-D` prints an earlier run so, with its end)
_OPEN = frozenset({"PENDING", "RUNNING", "SUSPENDED", "RESIZING", "CONFIGURING", "COMPLETING"})


def unsettled(records: Iterable, job_ids: Iterable[str]) -> set[str]:
    """The jobs of `job_ids` (sacct's JobID: `123`, `123_4`) whose accounting is not whole yet among `records`
    (`parse_sacct` of a `SACCT_OPTIONS` dump): no record, one still open (no end, an open state), or one slurmdbd
    made from a step before the job's own record came (no partition: 22.05 keeps one for a moment). slurmctld hands
    records to slurmdbd on its own agent, after the job has left the queue, so a drained queue does not mean a
    finished sacct."""
    runs: dict[str, list] = {}
    for r in records:
        if r.step is None:
            runs.setdefault(r.job_id, []).append(r)
    return {jid for jid in job_ids
            if not runs.get(jid) or any(r.end is None or not r.partition or r.state in _OPEN for r in runs[jid])}


@dataclass(frozen=True)
class TraceJob:
    """One recorded job, as the sandbox will submit it. Times are seconds since the epoch (UTC)."""

    key: str                    # the job's id in the history: "1234", or "1200_3" for an array task
    submit: float
    user: str
    account: str
    tier: str                   # the QoS it ran under
    partition: str | None       # None: the history does not say; Slurm's default partition then
    nodes: int
    gpus: int                   # GPUs of the whole job
    gpu_type: str | None        # None: untyped request
    cpus: int | None            # CPUs of the whole job, None when sacct did not keep them
    run_s: float                # how long its last run ran
    limit_s: float | None       # its time limit; None: the partition's (sacct printed Partition_Limit/UNLIMITED)
    array_job: str | None = None
    array_task: int | None = None
    state: str = ""             # how it ended in history
    start: float | None = None  # when its last run started in history (the 1x reference for accuracy)
    synthetic: str | None = None  # the campaign or forecast that added it; None for recorded jobs
    exclusive: bool = False     # it held whole nodes: more GPUs allocated than asked (--exclusive, or a partition
    #                             that gives whole nodes), so it is submitted with --exclusive

    @property
    def gpus_per_node(self) -> int:
        return -(-self.gpus // self.nodes) if self.nodes else self.gpus

    @property
    def history_wait_s(self) -> float | None:
        return None if self.start is None else self.start - self.submit


@dataclass(frozen=True)
class Trace:
    jobs: tuple[TraceJob, ...]
    source: str
    notes: tuple[str, ...] = field(default=())

    @property
    def first_submit(self) -> float:
        return min(j.submit for j in self.jobs)

    @property
    def span_s(self) -> float:
        """From the first submission to the last end as recorded (what a 1x replay takes at least)."""
        if not self.jobs:
            return 0.0
        last = max((j.start if j.start is not None else j.submit) + j.run_s for j in self.jobs)
        return last - self.first_submit

    def with_jobs(self, extra: Iterable[TraceJob], note: str | None = None) -> "Trace":
        jobs = tuple(sorted((*self.jobs, *extra), key=lambda j: (j.submit, j.key)))
        return Trace(jobs, self.source, self.notes + ((note,) if note else ()))

    def replayed_from(self, t: float) -> "Trace":
        """The history as a replay that begins at `t` (seconds since the epoch) sees it: recorded jobs that ended
        by then are left out; jobs running at `t` are submitted at `t` with the run time they had left, jobs queued
        at `t` are submitted at `t`, so the sandbox starts about as loaded as the cluster was. (Slurm decides
        again where and in which order they start: they fit, as they ran side by side on the recorded cluster.)
        Added jobs (campaigns, the forecast) submitted before `t` have no recorded run to carry: left out.
        Raises ParseError when nothing is left to replay."""
        kept: list[TraceJob] = []
        ended = carried = dropped_added = 0
        for j in self.jobs:
            if j.submit >= t:
                kept.append(j)
            elif j.synthetic is not None or j.start is None:
                dropped_added += 1
            elif j.start + j.run_s <= t:
                ended += 1
            elif j.start < t:   # running at t: the rest of its run
                kept.append(replace(j, submit=t, start=t, run_s=j.start + j.run_s - t))
                carried += 1
            else:               # queued at t
                kept.append(replace(j, submit=t))
                carried += 1
        when = datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        if not kept:
            raise ParseError(self.source, None, f"no job submitted, queued or running at or after {when}: nothing "
                                                f"to replay from there")
        note = (f"replayed from {when}: {ended} recorded job(s) that ended before it left out; {carried} running "
                f"or queued then submitted at it (the running ones with the run time they had left)")
        if dropped_added:
            note += f"; {dropped_added} added job(s) submitted before it left out"
        jobs = tuple(sorted(kept, key=lambda j: (j.submit, j.key)))
        return Trace(jobs, self.source, self.notes + (note,))


_OFFSET = re.compile(r"^\s*\+\s*(.+)$")


def moment(t, history_t0: float) -> float:
    """Seconds since the epoch from a time as a site file or option gives it: a date-time (UTC when it names no
    zone), a date, or an offset like "+2h" after the history's first submission (`history_t0`). ValueError
    saying what was expected."""
    from slurmtools.durations import parse_duration_with_unit

    if isinstance(t, datetime):
        return _in_range((t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp(), t)
    if isinstance(t, date):
        return datetime(t.year, t.month, t.day, tzinfo=timezone.utc).timestamp()
    if isinstance(t, str) and t.isascii():   # not `+٣h`: digits of other scripts are not read as numbers
        m = _OFFSET.match(t)
        if m:
            offset = parse_duration_with_unit(m.group(1).strip())   # an int of any size: compared before adding
            return _in_range(history_t0 + offset if offset <= LAST_S - history_t0 else math.inf, t)
        try:
            dt = datetime.fromisoformat(t.strip().replace("Z", "+00:00"))
        except ValueError:
            dt = None
        if dt is not None:
            return moment(dt, history_t0)
    raise ValueError(f'expected a date-time like 2026-12-01T00:00:00 or an offset like "+2h" (after the '
                     f"history's first submission), got {str(t)[:60]!r}")


#: the first and last second a datetime can show (every time the sandbox reads is printed in its notes and reports)
FIRST_S = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
LAST_S = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()


def _in_range(seconds: float, given) -> float:
    """`seconds` when a datetime can show it (years 1 to 9999, UTC), else ValueError naming what was `given`."""
    if not FIRST_S <= seconds <= LAST_S:
        raise ValueError(f"{str(given)[:60]!r} is out of range (years 1 to 9999, UTC)")
    return float(seconds)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(dt) -> float | None:
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def trace_from_records(records: Iterable, source: str, *, partition_limits: dict[str, float] | None = None,
                       cluster: str | None = None) -> Trace:
    """Jobs from sacct allocation records (`AcctRecord`, steps ignored). `partition_limits` (seconds by partition)
    gives the limit of a job whose own was Partition_Limit. Raises ParseError (one line naming `source` and the
    job) for a job the sandbox cannot submit faithfully: no user, account or QoS, or no GPU/node shape; a
    heterogeneous job, a job resized while it ran, a job holding shares of a GPU (gres/shard, gres/mps).

    A history of several clusters (sacct's Cluster field) keeps `cluster`'s jobs (the site's; job ids are per
    cluster), and is refused in one line without it. A federation's REVOKED records (a sibling job withdrawn
    because the job ran on another cluster) are not runs: left out and counted."""
    from slurmtools.slurm.commands import one_cluster
    from slurmtools.slurm.tres import parse_tres, record_tres, with_gres_requests

    allocs = [r for r in records if r.step is None]
    ran, cluster_notes = one_cluster([r for r in allocs if r.state != "REVOKED"], cluster, source, "--site")
    ran, gres_notes = with_gres_requests(ran)
    mine = {r.extra.get("Cluster", "") for r in ran} if cluster_notes else None
    revoked = sum(r.state == "REVOKED" and (mine is None or r.extra.get("Cluster", "") in mine) for r in allocs)
    allocs = ran
    by_key: dict[str, list] = {}
    for r in allocs:
        by_key.setdefault(r.job_id, []).append(r)
    jobs, skipped_pending, skipped_never, skipped_running = [], 0, 0, 0
    wider, whole = [], []    # jobs that ran on more nodes than they asked; jobs that held more GPUs than asked
    for key, runs in by_key.items():
        runs.sort(key=lambda r: (_epoch(r.start) or float("inf")))
        last = runs[-1]
        if last.start is None:
            if last.state in ("PENDING", "REQUEUED"):
                skipped_pending += 1
            else:
                skipped_never += 1
            continue
        if last.end is None or last.state in ("RUNNING", "REQUEUED", "SUSPENDED", "PENDING"):
            skipped_running += 1
            continue
        if runs[0].submit is None:
            raise ParseError(source, None, f"job {key}: Submit is unknown, and the sandbox submits every job at its "
                                           f"recorded submission")
        if "+" in key:
            raise ParseError(source, None, f"job {key.partition('+')[0]}: a heterogeneous job (component {key}); "
                                           f"the sandbox replays single jobs and would start its components apart")
        if any(r.state == "RESIZING" for r in runs):
            raise ParseError(source, None, f"job {key}: resized while it ran (a run of it ended RESIZING); the "
                                           f"sandbox replays a job at one size")
        for what, value in (("User", last.user), ("Account", last.account), ("QOS", last.qos)):
            if not value:
                raise ParseError(source, None, f"job {key}: {what} is empty; the sandbox submits every job as its "
                                               f"user, account and QoS")
        try:
            asked = record_tres(last)
        except ValueError as exc:
            raise ParseError(source, None, f"job {key}: {exc}") from None
        if asked is None:
            # a record from before Slurm kept TRES (15.08), or fields emptied: its GPUs would read as none
            raise ParseError(source, None, f"job {key}: ReqTRES and AllocTRES are both empty and no GRES column "
                                           "says its GPUs, so they are not known (a record from before Slurm kept "
                                           "TRES?)")
        req = parse_tres(asked)
        alloc = parse_tres(last.alloc_tres) if last.alloc_tres else req
        shares = [f"{k}={v}" for k, v in {**alloc.other, **req.other}.items()
                  if _SHARE.fullmatch(k) and v.strip("0")]
        if shares:
            raise ParseError(source, None, f"job {key}: {', '.join(shares)} is a share of a GPU; the sandbox replays "
                                           f"whole GPUs")
        # ReqTRES node= is the fewest nodes asked for: a job Slurm spread wider (`-n 24` on 12-CPU nodes) is
        # replayed on the nodes it ran on, or its shape would fit nowhere
        ran_on = max(alloc.nodes, len(last.nodelist))
        nodes = max(req.nodes, ran_on)
        gpus = req.gpus
        if ran_on > req.nodes > 0:
            wider.append(key)
        # more GPUs per node than it asked per node: Slurm adds GPUs to none but a whole-node allocation. (ReqTRES
        # counts GPUs asked per node over the nodes asked, so a --gres=gpu:2 job spread over 2 nodes holds 4 and
        # asked 2 per node: not exclusive, and replayed with the 4 it held)
        exclusive = req.nodes > 0 and alloc.gpus * req.nodes > req.gpus * ran_on
        if exclusive:
            whole.append(key)
        elif ran_on > req.nodes > 0 and alloc.gpus > req.gpus:
            gpus = alloc.gpus
        if nodes <= 0:
            raise ParseError(source, None, f"job {key}: no node count (ReqTRES node=, NodeList)")
        types = {t: n for t, n in req.gpus_by_type.items() if t != "untyped"}
        if len(types) > 1:
            raise ParseError(source, None, f"job {key}: GPUs of several types ({', '.join(sorted(types))}); "
                                           f"the sandbox replays one type per job")
        gpu_type = next(iter(types), None)
        limit = last.timelimit_s
        if limit is None:
            part = last.partition.split(",")[0] if last.partition else None
            limit = (partition_limits or {}).get(part) if part else None
            if limit is None:
                raise ParseError(source, None, f"job {key}: time limit is {last.extra.get('Timelimit') or 'unknown'}"
                                               f" and partition {part or '(none)'} has no max_time in the site")
        submit, start, end = _epoch(runs[0].submit), _epoch(last.start), _epoch(last.end)
        if start < submit:
            raise ParseError(source, None, f"job {key}: Start {_iso(start)} is before its Submit {_iso(submit)}")
        if end < start:
            raise ParseError(source, None, f"job {key}: End {_iso(end)} is before its Start {_iso(start)}")
        if limit <= 0:
            raise ParseError(source, None, f"job {key}: a time limit of 0 (sacct writes UNLIMITED for none)")
        array_job = array_task = None
        if "_" in key:
            a, _, t = key.partition("_")
            if t.isdigit():
                array_job, array_task = a, int(t)
        jobs.append(TraceJob(key=key, submit=submit, user=last.user, account=last.account, tier=last.qos,
                             partition=(last.partition.split(",")[0] or None) if last.partition else None,
                             nodes=nodes, gpus=gpus, gpu_type=gpu_type, cpus=req.cpu or None,
                             run_s=end - start, limit_s=float(limit), array_job=array_job,
                             array_task=array_task, state=last.state, start=start, exclusive=exclusive))
    notes = list(cluster_notes) + gres_notes
    if wider:
        notes.append(f"{len(wider)} job(s) ran on more nodes than they asked for (NodeList or AllocTRES node= above "
                     f"ReqTRES node=; first: job {wider[0]}): replayed on the nodes they ran on")
    if whole:
        notes.append(f"{len(whole)} job(s) held more GPUs than they asked for (AllocTRES above ReqTRES: --exclusive "
                     f"or a whole-node partition; first: job {whole[0]}): replayed with --exclusive")
    if revoked:
        notes.append(f"{revoked} federation sibling record(s) REVOKED (the job ran on another cluster): not replayed")
    if skipped_never:
        notes.append(f"{skipped_never} job(s) never started in history (cancelled while pending): not replayed")
    if skipped_pending or skipped_running:
        notes.append(f"{skipped_pending + skipped_running} job(s) still pending or running when the history was "
                     f"taken: not replayed")
    if not jobs:
        raise ParseError(source, None, "no job that ran and ended: nothing to replay")
    jobs.sort(key=lambda j: (j.submit, j.key))
    return Trace(tuple(jobs), source, tuple(notes))


def load_trace(path: str, *, partition_limits: dict[str, float] | None = None, cluster: str | None = None
               ) -> Trace:
    """A `sacct --parsable2` dump with the TRACE_FIELDS (one line naming the file and what it lacks otherwise);
    `cluster`: the one kept of a history of several (`trace_from_records`)."""
    from slurmtools.slurm.parsable import decode_dump

    try:
        with open(path, "rb") as fh:
            text, text_notes = decode_dump(fh.read(), path)
    except OSError as exc:
        raise ParseError(path, None, f"cannot read: {exc.strerror or exc}") from None
    trace = trace_from_text(text, path, partition_limits=partition_limits, cluster=cluster)
    return Trace(trace.jobs, trace.source, trace.notes + tuple(text_notes)) if text_notes else trace


def trace_from_text(text: str, source: str, *, partition_limits: dict[str, float] | None = None,
                    cluster: str | None = None) -> Trace:
    """`load_trace` of a history's text (a file's, or the backend's `accounting_dump` for `--since`): every job
    line checked (`_row_checker`), and its times read in this machine's zone (`_zone`)."""
    from slurmtools.slurm.sacct_times import parse_in_zone

    if not text.strip():
        raise ParseError(source, 1, "empty; expected `sacct " + " ".join(SACCT_OPTIONS[:3]) + " -o ...` output "
                                    "with its header line")
    records, notes = parse_in_zone(text, source, TRACE_FIELDS, _zone(), check=_row_checker(source),
                                   what="the history", hint=f"dump with `sacct {' '.join(SACCT_OPTIONS)}`")
    trace = trace_from_records(records, source, partition_limits=partition_limits, cluster=cluster)
    return Trace(trace.jobs, trace.source, trace.notes + notes) if notes else trace


def _zone():
    """The zone sacct printed the history in: this machine's, as the report takes it (`reports.zone.local`: TZ,
    else /etc/localtime). A TZ that module refuses (a path to a zone file) is the C library's reading of it: the
    one the times were parsed with. None without clock changes: the times read as parsed, as before."""
    import os
    import time

    from slurmtools.reports import zone as zones

    try:
        z = zones.local()
    except zones.ZoneError:
        z = zones.Zone(os.environ.get("TZ", "local"), lambda t: time.localtime(t).tm_gmtoff)
    return None if z.fixed else z


# ------------------------------------------------------------------------------------------ what a dump must hold
#
# parse_sacct reads what it can of every line and leaves the rest unset (the reports count what they cannot read);
# the sandbox submits every job it reads, so a value it would otherwise read as unset, as another number or as a
# default (a Submit of 2026-02-30, a TimelimitRaw of `٣`, gres/gpu=-1, a tab in Account) is refused in one line
# naming the file, the line and the field. Only job lines are checked: steps are not replayed. (parse_sacct itself
# refuses a NodeList that is not a hostlist, on every line.)

#: sacct's form of a time (ASCII digits), or the same with a blank (a site's SLURM_TIME_FORMAT="%F %T"); `Unknown`
#: or `None` when unset
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}")
#: a job's id as sacct writes it: 123, 123_4 (array task), 123_[0-3%2] (pending array), 123+1 (het job), .step
_JOBID = re.compile(r"[0-9]+(?:_(?:[0-9]+|\[[0-9,%-]+\]))?(?:\+[0-9]+)?(?:\.[A-Za-z0-9_+-]+)?")
_JOBIDRAW = re.compile(r"[0-9]+(?:\.[A-Za-z0-9_+-]+)?")
#: a job state: Slurm's names are upper-case words (`CANCELLED by 0` names who cancelled)
_STATE = re.compile(r"[A-Z][A-Z_]*(?: by [0-9]+)?")
#: a share of a GPU in a TRES list (gres/shard, gres/mps, typed or not)
_SHARE = re.compile(GPU_SHARE_NAME)
#: Slurm's largest finite time limit in minutes (INFINITE, 0xffffffff, is written UNLIMITED)
MAX_LIMIT_MIN = 0xFFFFFFFE
#: TRES items whose value is a count the trace reads (gres/gpu:TYPE too)
_COUNTS = ("node", "cpu", "billing", "gres/gpu")
def _row_checker(source: str):
    """The `check` parse_sacct runs on each line of a trace (the comment above)."""
    from slurmtools.durations import parse_duration
    from slurmtools.errors import whole_number

    def check(row: dict[str, str], lineno: int) -> None:
        def bad(name: str, what: str, got: bool = True) -> ParseError:
            return ParseError(source, lineno, f"{name}: {what}" + (f", got {row[name][:40]!r}" if got else ""))

        for name, form in (("JobID", _JOBID), ("JobIDRaw", _JOBIDRAW)):
            if name in row and not form.fullmatch(row[name]):
                raise bad(name, "not a job id as sacct writes it (123, 123_4, 123.batch)")
        if "." in row.get("JobID", row.get("JobIDRaw", "")):
            return   # a step: not replayed
        for name in ("User", "Account", "QOS", "Partition"):
            v = row.get(name, "")
            if not v.isprintable() or any(c.isspace() for c in v):
                raise bad(name, "a blank or control character in a Slurm name")
        if "State" in row and not _STATE.fullmatch(row["State"]):
            raise bad("State", "not a Slurm job state (COMPLETED, CANCELLED by 0, ...)")
        for name in ("Submit", "Start", "End"):
            v = row.get(name)
            if v in (None, "Unknown", "None"):
                continue
            try:
                if not _TIME.fullmatch(v):
                    raise ValueError(v)
                dt = datetime.fromisoformat(v)   # 2026-02-30 is not
            except ValueError:
                raise bad(name, "not a date-time like 2026-11-02T08:00:00 (sacct's form)") from None
            try:
                dt.astimezone(timezone.utc)
            except (ValueError, OverflowError, OSError):
                raise bad(name, "out of range in this time zone (sacct writes local times)") from None
        for name in ("TimelimitRaw", "Timelimit"):
            v = row.get(name)
            if v is None or v in ("UNLIMITED", "Partition_Limit"):
                continue
            try:
                if not v.isascii():   # durations read `٣` as 3
                    raise ValueError(v)
                seconds = whole_number(v) * 60 if name == "TimelimitRaw" else parse_duration(v)
            except ValueError:
                raise bad(name, "not a time limit (minutes, UNLIMITED or Partition_Limit)") from None
            if seconds > MAX_LIMIT_MIN * 60:
                raise bad(name, f"longer than Slurm's largest time limit ({MAX_LIMIT_MIN} minutes)")
        for name in ("ReqTRES", "AllocTRES"):
            v = row.get(name, "")
            if v in ("", "(null)", "None"):
                continue
            seen = set()
            for item in v.split(","):
                key, eq, value = item.partition("=")
                if not (eq and key and value and item.isprintable()) or any(c.isspace() for c in item):
                    raise bad(name, f"item {item[:40]!r} is not name=value", got=False)
                if key in seen:
                    raise bad(name, f"{key[:40]!r} twice", got=False)
                seen.add(key)
                if key in _COUNTS or key.startswith("gres/gpu:"):
                    try:
                        whole_number(value)
                    except ValueError:
                        raise bad(name, f"{key}={value[:40]!r} is not a count", got=False) from None

    return check
