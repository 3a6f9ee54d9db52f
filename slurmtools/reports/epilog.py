"""The epilog's per-job GPU records -> a frame with one row per job run.

The node epilog (`slurmtools/hooks/epilog.py`) writes `<spool>/jobs/<job>.<restart>.<node>.json` per job, run and
node, with `job`, `user`, `qos`, `gpus` (indexes), `start`/`end` (epoch s), `restart_count` and `gpu_accounting`
(per GPU: `gpu_util_pct`, `max_memory_bytes`; None where NVML accounting is off). Records of the nodes of one run
are merged here: utilisation is the mean over all their GPUs, memory the peak.

The reader is tolerant: flat spellings (`job_id`, `gpu_util_pct` as a number or a list per GPU, `gpu_mem_mb`,
ISO times) are read too. A record that cannot be read (a torn file) or holds what the epilog never writes (a GPU
utilisation outside 0-100 %, a negative count, a time outside 1970-2200, an end before the start) is skipped and
listed in `bad` with its reason (`slurmtools.reports.badrows`); it never ends the report on its own. So is a value
of a type the epilog never writes (text or true/false where it writes numbers, a fraction where it writes a whole
number, a GPU listed twice: read as it was, each changed the run's GPUs, energy or utilisation unseen), a
second record of one job, run and node (`<stem>.2.json`, a copy or a symlink: counted twice it doubled the run's
GPUs and energy), a file that is no record (a symlink, a FIFO that hung the report, a file larger than any
record), and, given the site's cluster_name, a record whose `cluster` names another cluster (job ids are per
cluster: records collected from several clusters joined one's GPU use to another's jobs of the same id). A record
without `cluster` (an older epilog, or one that did not know) cannot be told apart and is used. A folder is
searched, not counted.
"""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from slurmtools.hooks.common import MAX_JOB_ID, MAX_RUN
from slurmtools.reports.badrows import BadRow, BadRows
from slurmtools.reports.energy import merge_energy, record_energy, record_windows

#: the times a record may hold (the sacct reader's bounds): 1970 .. 2200
_T_MIN, _T_MAX = pd.Timestamp(1, unit="s"), pd.Timestamp("2200-01-01")
# MAX_JOB_ID (Slurm's job ids are 32-bit: ids above wrapped the frame's int64 or named no Slurm job) and MAX_RUN (a
# run's index, int32) are the hooks': one definition, so the epilog never writes a record this reader refuses
#: a job's GPUs, as the sacct reader bounds a `gres/gpu` count: above it the run's int32 sum wrapped negative
MAX_GPUS = 999_999_999
#: the epilog's record is a few KiB (its slack windows at most 256 KiB): a larger file is no record
MAX_RECORD_BYTES = 4 << 20

_ALIASES = {
    "job_id": ("job", "job_id", "jobid", "SLURM_JOB_ID"),
    "user": ("user", "SLURM_JOB_USER"),
    "account": ("account",),
    "tier": ("tier", "qos"),
    "hosts": ("node", "hosts", "nodes", "nodelist"),
    "run": ("run", "restart_count"),  # `run` (the run index) when the epilog writes it; restart_count may be ahead
    "gpus": ("gpus", "gpu_count", "ngpus"),
    "start": ("start", "start_time"),
    "end": ("end", "end_time"),
    "exit": ("exit_code", "exit"),
    "gpu_util_pct": ("gpu_util_pct", "gpu_util", "util_pct"),
    "gpu_mem_mb": ("gpu_mem_mb", "gpu_mem_max_mb", "gpu_mem"),
    "last_checkpoint": ("last_checkpoint", "checkpoint_time"),
}


@dataclass
class EpilogRecords:
    frame: pd.DataFrame  # job_id_raw int64, start datetime64[s], gpus int32, gpu_util_pct float32, gpu_mem_mb float32
    files: int = 0
    problems: list[str] = field(default_factory=list)
    bad: BadRows | None = None


def _get(d: dict, key: str):
    for k in _ALIASES[key]:
        if k in d and d[k] is not None:
            return d[k]
    return None


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _whole(v, key: str, what: str) -> int:
    """A whole number the epilog writes as one (an int, or ASCII digits from an older hook); else ValueError."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str) and v.isascii() and v.isdigit():
        return int(v)
    raise ValueError(f"field {key}: {v!r} is not {what}")


def _numbers(v, key: str) -> list[float]:
    """`v` (a number, or a list or object of numbers and nulls: nulls are unknown GPUs) as floats; text,
    true/false or a nested value is not a measurement: ValueError naming the field."""
    vals = list(v.values()) if isinstance(v, dict) else list(v) if isinstance(v, (list, tuple)) else [v]
    for x in vals:
        if x is not None and not _is_num(x):
            raise ValueError(f"field {key}: {x!r} is not a number")
    return [float(x) for x in vals if x is not None]


def _gpu_ids(rows: list, key: str) -> None:
    """Each GPU at most once in a per-GPU list: a GPU listed twice counted its energy twice."""
    seen = set()
    for g in rows:
        i = g.get("gpu")
        if i is None:
            continue
        k = repr(i)
        if k in seen:
            raise ValueError(f"field {key}: GPU {i!r} listed twice")
        seen.add(k)


def _mean(v) -> float:
    if v is None:
        return np.nan
    if isinstance(v, dict):
        v = list(v.values())
    if isinstance(v, (list, tuple)):
        nums = [float(x) for x in v if isinstance(x, (int, float)) and not isinstance(x, bool)]
        return float(np.mean(nums)) if nums else np.nan
    return float(v)


def _time(v, zone=None):
    """A record's time: epoch seconds, or an ISO time (with an offset, or local). Without `zone`, epoch seconds
    become this process's local time; with it (the report's `reports.zone.Zone`) every time becomes a naive UTC
    instant, a local ISO time read in that zone (a repeated one as its first pass; one the clocks skipped is a
    ValueError)."""
    if v is None or v == "":
        return pd.NaT
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if zone is None:
            t = pd.Timestamp(datetime.fromtimestamp(float(v))).floor("s")
        else:
            t = pd.Timestamp(float(v), unit="s").floor("s")
    else:
        t = pd.Timestamp(str(v))
        local = t.tzinfo is None
        t = (t.tz_localize(None) if local else t.tz_convert(None)).floor("s")
        if zone is not None and local and not zone.is_utc:
            first, _, skipped = zone.from_local(np.array([t.value // 10**9], dtype=np.int64))
            if skipped[0]:
                raise ValueError(f"{t} is no time in {zone.name}")
            t = pd.Timestamp(int(first[0]), unit="s")
    if not _T_MIN <= t < _T_MAX:
        raise ValueError("outside 1970-2200")
    return t


def _checked(values: list[float], key: str, top: float | None) -> list[float]:
    """`values` when each is a finite number in [0, top]; else ValueError naming the field and the value."""
    for x in values:
        if not np.isfinite(x) or x < 0 or (top is not None and x > top):
            limit = f"0 to {top:g}" if top is not None else "a number of 0 or more"
            raise ValueError(f"field {key}: {x:g} is not {limit}")
    return values


def _other_cluster(d: dict, job_id: int, cluster: str | None) -> None:
    """ValueError when the record names a cluster other than `cluster` (the site's cluster_name): job ids are per
    cluster, so its GPU use would be joined to another cluster's job of the same id. A record without `cluster`
    (an epilog before the field, or one that did not know) cannot be told apart and is used. Slurm lower-cases
    ClusterName, so case is not compared."""
    c = d.get("cluster")
    if c is None:
        return
    if not isinstance(c, str) or not c:
        raise ValueError(f"field cluster: {c!r} is not a cluster name")
    if cluster is not None and c.lower() != cluster.lower():
        raise ValueError(f"field cluster: job {job_id}'s record is of cluster {c}, not of {cluster} (the site's "
                         f"cluster_name): job ids are per cluster; not joined to {cluster}'s job {job_id}")


def parse_record(d: dict, cluster: str | None = None, zone=None) -> dict:
    """One record -> typed fields, utilisation kept per GPU so several nodes' records can be merged. With
    `cluster` (the site's cluster_name), a record of another cluster is refused. With `zone` (the report's), its
    times are UTC instants (`_time`).

    Raises ValueError naming the field that is wrong."""
    jid = _get(d, "job_id")
    if jid is None:
        raise ValueError("field job (job_id) is missing")
    head = jid.split("_")[0].split(".")[0].strip() if isinstance(jid, str) else jid
    if isinstance(jid, str) and not (head.isascii() and head.isdigit()) or \
            not isinstance(jid, str) and not (isinstance(jid, int) and not isinstance(jid, bool)):
        raise ValueError(f"field job: expected a number, got {jid!r}")
    job_id = int(head)
    if not 0 < job_id <= MAX_JOB_ID:
        raise ValueError(f"field job: {jid!r} is not a job id")
    _other_cluster(d, job_id, cluster)
    out = {"job_id_raw": job_id}
    run_key = next((k for k in _ALIASES["run"] if d.get(k) is not None), None)
    out["run"] = 0 if run_key is None else _whole(d[run_key], run_key, "a run index")
    if not 0 <= out["run"] <= MAX_RUN:
        raise ValueError(f"field {run_key}: {out['run']} is not a run index")
    utils: list[float] = []
    mem = np.nan
    acc = d.get("gpu_accounting")
    if isinstance(acc, list):
        for g in acc:
            if not isinstance(g, dict):
                raise ValueError("field gpu_accounting: expected a list of objects")
            for k in ("gpu_util_pct", "max_memory_bytes"):  # null: unknown for that GPU; else a number
                if g.get(k) is not None and not _is_num(g[k]):
                    raise ValueError(f"field gpu_accounting.{k}: {g[k]!r} is not a number")
            u = g.get("gpu_util_pct")
            if u is not None:
                utils.append(float(u))
            m = g.get("max_memory_bytes")
            if m is not None:
                mem = float(np.fmax(mem, m / 2**20))
        _gpu_ids(acc, "gpu_accounting")
    elif acc is not None:
        raise ValueError("field gpu_accounting: expected a list of objects")
    flat = _get(d, "gpu_util_pct")
    if flat is not None and not utils:
        try:
            utils = _numbers(flat, "gpu_util_pct")
        except ValueError as exc:
            raise ValueError(f"{exc}; expected a number or a list of numbers") from None
    fm = _get(d, "gpu_mem_mb")
    if fm is not None:
        try:
            fms = _numbers(fm, "gpu_mem_mb")
        except ValueError as exc:
            raise ValueError(f"{exc}; expected a number or a list of numbers") from None
        if fms:  # a list: the peak over the GPUs; an object (older records): their mean, as it was read
            mem = float(np.fmax(mem, max(fms) if isinstance(fm, (list, tuple)) else _mean(fms)))
    # NVML reports each GPU's utilisation in percent: above 100 (or below 0) is not a measurement
    out["utils"] = _checked(utils, "gpu_util_pct", 100.0)
    out["gpu_mem_mb"] = mem if np.isnan(mem) else _checked([mem], "gpu_mem_mb", None)[0]
    g = _get(d, "gpus")
    if isinstance(g, (list, tuple)):
        if any(not (isinstance(i, int) and not isinstance(i, bool) and i >= 0) for i in g) or len(set(g)) < len(g):
            raise ValueError(f"field gpus: {g!r} is not a list of distinct GPU indexes")
        out["gpus"] = len(g)
    elif g is None or isinstance(g, int) and not isinstance(g, bool):
        out["gpus"] = g or 0
    else:
        raise ValueError(f"field gpus: expected a count or a list of GPU indexes, got {g!r}")
    if not 0 <= out["gpus"] <= MAX_GPUS:
        raise ValueError(f"field gpus: {out['gpus']} is not a count of GPUs")
    for key in ("start", "end", "last_checkpoint"):
        try:
            out[key] = _time(_get(d, key), zone)
        except (TypeError, ValueError, OverflowError, OSError):
            raise ValueError(f"field {key}: expected epoch seconds or an ISO time between 1970 and 2200, got "
                             f"{_get(d, key)!r}") from None
    if not pd.isna(out["start"]) and not pd.isna(out["end"]) and out["end"] < out["start"]:
        raise ValueError(f"field end: {out['end']} is before start {out['start']}")
    for key in ("user", "tier"):
        v = _get(d, key)
        if v is not None and not isinstance(v, str):
            raise ValueError(f"field {key}: {v!r} is not a name")
        out[key] = v or ""
    out.update(record_energy(d))  # GPU energy (issue 13): energy_mj, idle_energy_mj, energy_(unknown_)gpus
    out["slack_windows"] = record_windows(d)
    return out


COLUMNS = {"job_id_raw": "int64", "run": "int32", "start": "datetime64[s]", "end": "datetime64[s]", "gpus": "int32",
           "gpu_util_pct": "float32", "gpu_mem_mb": "float32", "user": "str", "tier": "str", "nodes": "int32",
           "last_checkpoint": "datetime64[s]", "preempted_reported": "bool", "time_limit_reported": "bool",
           "energy_mj": "float64", "idle_energy_mj": "float64", "energy_gpus": "int32", "energy_unknown_gpus": "int32",
           "slack_windows": "object"}


#: node epilogs of one run start within seconds of each other; records of one (job, run) further apart than this
#: are different runs that a hook numbered alike (a skipped prolog, before issue 16), kept apart for the report to
#: place on sacct's runs by time (`runmatch`)
SAME_RUN_GAP_S = 60


def merge_records(recs: list[dict]) -> pd.DataFrame:
    """Records of the nodes of one run -> one row: GPUs summed, utilisation averaged over every GPU, memory peak."""
    runs: dict[tuple[int, int, int], dict] = {}
    last_end: dict[tuple[int, int], tuple[int, object]] = {}
    for r in sorted(recs, key=lambda r: (r["end"].value if not pd.isna(r["end"]) else 0)):
        jr = (r["job_id_raw"], r["run"])
        part, prev = last_end.get(jr, (0, None))
        if prev is not None and not pd.isna(prev) and not pd.isna(r["end"]) and \
                (r["end"] - prev).total_seconds() > SAME_RUN_GAP_S:
            part += 1
        last_end[jr] = (part, r["end"] if not pd.isna(r["end"]) else prev)
        k = (*jr, part)
        m = runs.get(k)
        if m is None:
            runs[k] = {**r, "utils": list(r["utils"]), "nodes": 1}
            continue
        m["utils"] += r["utils"]
        m["gpus"] += r["gpus"]
        m["nodes"] += 1
        m["gpu_mem_mb"] = float(np.fmax(m["gpu_mem_mb"], r["gpu_mem_mb"]))
        merge_energy(m, r)
        m["slack_windows"] = m["slack_windows"] or r["slack_windows"]
        for key, pick in (("start", min), ("end", max), ("last_checkpoint", max)):
            vals = [v for v in (m[key], r[key]) if not pd.isna(v)]
            m[key] = pick(vals) if vals else pd.NaT
    rows = []
    for m in runs.values():
        u = m.pop("utils")
        m["gpu_util_pct"] = float(np.mean(u)) if u else np.nan
        rows.append(m)
    frame = pd.DataFrame(rows, columns=list(COLUMNS)) if rows else pd.DataFrame(columns=list(COLUMNS))
    for c in ("preempted_reported", "time_limit_reported"):
        frame[c] = frame[c].astype(object).fillna(False).astype(bool)
    return frame.astype(COLUMNS)


def _record_bytes(f: Path) -> bytes | None:
    """The bytes of record file `f`; None for a folder (searched, not a record). ValueError for what the epilog
    never writes there: a symlink (it writes plain files; a link to a record counted it twice), a FIFO or device
    (reading one hung the report), a file larger than any record."""
    st = f.lstat()
    if stat.S_ISDIR(st.st_mode):
        return None
    if stat.S_ISLNK(st.st_mode):
        raise ValueError("a symlink, not a record (the epilog writes plain files); not followed")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("not a plain file (the epilog writes plain files); not read")
    if st.st_size > MAX_RECORD_BYTES:
        raise ValueError(f"{st.st_size:,} bytes, more than a record holds ({MAX_RECORD_BYTES:,}); not read")
    return f.read_bytes()


def _node(d: dict) -> str | None:
    """The node a record is of (`node`, as every epilog version writes it); None when it names none."""
    v = d.get("node")
    return v if isinstance(v, str) and v else None


def read_epilog_dir(path: str | Path, cluster: str | None = None, zone=None) -> EpilogRecords:
    """Every `*.json` under `path` (recursively: the spool folder or its `jobs/`). A missing folder: no records.
    With `cluster` (the site's cluster_name), a record naming another cluster is listed, not joined: records
    gathered from several clusters hold the same job ids.

    Records of one job, run and node whose ends are within SAME_RUN_GAP_S are one record written twice (the epilog
    names the second `<stem>.2.json`; a copy, a restored backup): the first written (the earlier end, then the
    name) counts and each other is listed, never added to the run's GPUs and energy. `zone`: times as UTC
    instants (`parse_record`)."""
    root = Path(path)
    recs, problems, files = [], [], 0
    bad = BadRows(str(root), "records")
    if not root.is_dir():
        return EpilogRecords(merge_records([]), 0, [f"{root}: no epilog GPU records (folder missing)"], bad)

    def skip(f: Path, why: str, text: str, line: int | None = None) -> None:
        problems.append(f"{f}: {why}")
        bad.rows.append(BadRow(str(f), line, why, text))

    parsed: list[tuple[Path, str, str | None, dict]] = []
    for f in sorted(root.rglob("*.json")):
        text, line = "", None
        try:
            raw = _record_bytes(f)
        except (OSError, ValueError) as exc:
            files += 1
            skip(f, str(exc).splitlines()[0] if str(exc) else type(exc).__name__, "")
            continue
        if raw is None:
            continue
        files += 1
        try:
            text = raw.decode(errors="replace")
            d = json.loads(raw.decode())
            if not isinstance(d, dict):
                raise ValueError("expected a JSON object")
            parsed.append((f, text, _node(d), parse_record(d, cluster, zone)))
        except (ValueError, RecursionError) as exc:
            if isinstance(exc, json.JSONDecodeError):
                line = exc.lineno
            skip(f, str(exc).splitlines()[0] if str(exc) else type(exc).__name__, text, line)
    first: dict[tuple, tuple[Path, pd.Timestamp]] = {}
    job_gpus: dict[int, int] = {}
    for f, text, node, r in sorted(parsed, key=lambda p: (p[3]["end"].value if not pd.isna(p[3]["end"]) else 0,
                                                          str(p[0]))):
        if node is not None:
            k = (r["job_id_raw"], r["run"], node)
            seen = first.get(k)
            if seen is not None and (pd.isna(seen[1]) or pd.isna(r["end"])
                                     or (r["end"] - seen[1]).total_seconds() <= SAME_RUN_GAP_S):
                skip(f, f"a second record of job {r['job_id_raw']} run {r['run']} on node {node} (the first: "
                        f"{seen[0]}); not counted: its GPUs and energy would count twice", text)
                continue
            first[k] = (f, r["end"])
        total = job_gpus.get(r["job_id_raw"], 0) + r["gpus"]
        if total > MAX_GPUS:
            skip(f, f"field gpus: {r['gpus']} more GPUs give job {r['job_id_raw']} more than {MAX_GPUS:,}", text)
            continue
        job_gpus[r["job_id_raw"]] = total
        recs.append(r)
    bad.rows.sort(key=lambda b: b.source)
    bad.total = files
    return EpilogRecords(merge_records(recs), files, problems, bad)


STOP_EVENTS = ("preempted", "requeued", "time_limit")


def checkpoints_from_decisions(path: str | Path, bad: BadRows | None = None, zone=None
                               ) -> tuple[pd.DataFrame, list[str]]:
    """What the decision log (`slurmtools.audit`) knows of job runs: the last-checkpoint time from events
    `preempted`, `requeued` and `time_limit` whose details carry `last_checkpoint` (epoch seconds or an ISO time)
    and `run`, and whether a `preempted` or a `time_limit` event was logged for the run (a job that checkpoints
    and requeues itself ends REQUEUED in sacct whichever the cause; only the log tells them apart).
    -> frame (job_id_raw, run, last_checkpoint, preempted, time_limit), one row per run; a missing log gives no
    rows.

    A bad line (torn, not UTF-8, not a record; or such an event whose job, run or last_checkpoint is unreadable:
    text in a number, a time outside 1970-2200) is skipped: with `bad`, listed there with its line and reason
    (`bad.total` counts the log's lines), else described in the returned problems. `zone`: times as UTC instants
    (`_time`)."""
    from slurmtools import audit

    rows, problems = [], []
    skipped: list = []
    lines = 0
    try:
        for n, text, ev in audit.read_lines(path, skipped=skipped):
            lines += 1
            det = ev.get("details")
            kind = ev.get("event")
            if kind not in STOP_EVENTS or not isinstance(det, dict):
                continue
            if det.get("last_checkpoint") is None and kind not in ("preempted", "time_limit"):
                continue
            try:
                job = _decision_job(ev.get("job"))
                run = _decision_run(det.get("run"))
                try:
                    ck = _time(det["last_checkpoint"], zone) if det.get("last_checkpoint") is not None else pd.NaT
                except (TypeError, ValueError, OverflowError, OSError) as exc:
                    raise ValueError(f"field details.last_checkpoint: expected epoch seconds or an ISO time between "
                                     f"1970 and 2200, got {det['last_checkpoint']!r}") from exc
                # when the epilog wrote it (the run's end, else the event's own time): matches it to sacct's run
                try:
                    when = _time(det.get("run_end") if det.get("run_end") is not None else ev.get("time"), zone)
                except (TypeError, ValueError, OverflowError, OSError):
                    when = pd.NaT  # the time only helps the match; the run number still places the event
                rows.append((job, run, ck, kind == "preempted", kind == "time_limit", when))
            except ValueError as exc:
                if bad is not None:
                    bad.rows.append(BadRow(str(path), n, f"event {kind}: {exc}", text))
                else:
                    problems.append(f"{path}:{n}: event {kind} of job {ev.get('job')!r}: {exc}; ignored")
    except audit.AuditError as exc:
        problems.append(str(exc))
    if bad is not None:
        bad.rows.extend(BadRow(str(path), n, why, text) for n, why, text in skipped)
        bad.rows.sort(key=lambda b: b.line or 0)
        bad.total += lines + len(skipped)
    types = {"job_id_raw": "int64", "run": "int32", "last_checkpoint": "datetime64[s]", "preempted": "bool",
             "time_limit": "bool", "end": "datetime64[s]"}
    f = pd.DataFrame(rows, columns=list(types)).astype(types)
    f["_part"] = run_parts(f)  # events of two runs a hook numbered alike stay apart
    f = f.groupby(["job_id_raw", "run", "_part"], as_index=False).agg(last_checkpoint=("last_checkpoint", "max"),
                                                                      preempted=("preempted", "any"),
                                                                      time_limit=("time_limit", "any"),
                                                                      end=("end", "max"))
    return f.drop(columns="_part").astype(types), problems


def run_parts(f: pd.DataFrame) -> np.ndarray:
    """For rows (job_id_raw, run, end): 0, 1, 2 ... per (job, run), a new part where the time since the previous
    row of that (job, run) exceeds SAME_RUN_GAP_S. Rows without a time are part 0."""
    if not len(f):
        return np.zeros(0, dtype=np.int64)
    end = f["end"].to_numpy(dtype="datetime64[s]")
    t = np.where(pd.isna(end), np.int64(-1), end.astype(np.int64))
    order = np.lexsort((t, f["run"].to_numpy(), f["job_id_raw"].to_numpy()))
    job, run, ts = f["job_id_raw"].to_numpy()[order], f["run"].to_numpy()[order], t[order]
    same = np.r_[False, (job[1:] == job[:-1]) & (run[1:] == run[:-1])]
    gap = np.r_[0, np.diff(ts)]
    jump = same & (ts >= 0) & (np.r_[-1, ts[:-1]] >= 0) & (gap > SAME_RUN_GAP_S)
    # part number = jumps so far within the (job, run) group
    csum = np.cumsum(jump)
    start_of_group = ~same
    base = np.maximum.accumulate(np.where(start_of_group, csum, 0))
    parts = np.empty(len(f), dtype=np.int64)
    parts[order] = csum - base
    return parts


def _decision_job(v) -> int:
    """The allocation's id of a decision record's `job` (123, "123", "123_4" of an array, "123.batch")."""
    if isinstance(v, bool):
        raise ValueError(f"field job: {v!r} is not a job id")
    s = str(v).split("_")[0].split(".")[0].strip()
    if not s.isascii() or not s.isdigit() or int(s) <= 0 or int(s) > 0xFFFFFFFF:
        raise ValueError(f"field job: {v!r} is not a job id")
    return int(s)


def _decision_run(v) -> int:
    """The run's index (0 for the first run) of a decision record's `details.run`; absent is 0."""
    if v is None:
        return 0
    if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, str) and v.isascii() and v.isdigit())):
        raise ValueError(f"field details.run: {v!r} is not a run index")
    if not 0 <= int(v) < 2**31:
        raise ValueError(f"field details.run: {v!r} is not a run index")
    return int(v)


def add_checkpoints(frame: pd.DataFrame, ck: pd.DataFrame) -> pd.DataFrame:
    """Epilog runs with the decision log's last-checkpoint times: the later of the two where both exist; runs only
    the log knows get a row of their own (no utilisation)."""
    if not len(ck):
        return frame
    ck = ck.rename(columns={"last_checkpoint": "_ck", "preempted": "_pre", "time_limit": "_tl", "end": "_end"})
    for c in ("_pre", "_tl"):
        if c not in ck.columns:
            ck[c] = False
    if "_end" not in ck.columns:
        ck["_end"] = pd.NaT
    # parts as in `run_parts` over both frames together: an event joins the epilog row of its own time
    both = pd.concat([frame[["job_id_raw", "run", "end"]], ck[["job_id_raw", "run", "_end"]].rename(
        columns={"_end": "end"})], ignore_index=True)
    parts = run_parts(both)
    frame = frame.assign(_part=parts[:len(frame)])
    ck = ck.assign(_part=parts[len(frame):])
    m = frame.merge(ck, on=["job_id_raw", "run", "_part"], how="outer").drop(columns="_part")
    m["last_checkpoint"] = m[["last_checkpoint", "_ck"]].max(axis=1)
    m["end"] = m["end"].fillna(m["_end"])  # a run only the log knows: the log's time places it
    m["preempted_reported"] = (m["preempted_reported"].astype(object).fillna(False).astype(bool)
                               | m["_pre"].astype(object).fillna(False).astype(bool))
    m["time_limit_reported"] = (m["time_limit_reported"].astype(object).fillna(False).astype(bool)
                                | m["_tl"].astype(object).fillna(False).astype(bool))
    m = m.drop(columns=["_ck", "_pre", "_tl", "_end"])
    m = m.fillna({"gpus": 0, "nodes": 0, "user": "", "tier": "", "energy_gpus": 0, "energy_unknown_gpus": 0})
    return m[list(COLUMNS)].astype(COLUMNS)
