"""Node epilog: one JSON record per job and node in the spool folder, decision-log events, scratch clean-up.

The record is written atomically (O_EXCL temporary + rename through a directory descriptor) into
`<spool>/jobs/<job>.<restart>.<node>.json`; the spool folder must be root's and not group/world-writable, else
nothing is written there (logged). The epilog exits 0 whatever happens: a failing epilog drains the node. Every
step around the record (start mark, Slurm's fields, GPU telemetry, stop report, slack windows, scratch) fails
alone: the record is written with that part unknown.
Slurm facts (22.05): no SLURM_JOB_QOS or start time in the node epilog's environment, so the QoS (tier) and the
preemption/requeue state come from `scontrol show job` (disable with SLURMTOOLS_EPILOG_SCONTROL=0), read by
`slurm.show_job` (a job's name may hold ` JobState=...`). What slurmd hands the epilog, per release, and how each
variable is read: docs/node-health.md. Run as anything but slurmd's Epilog (SLURM_SCRIPT_CONTEXT), it does nothing.
The record names its cluster (`cluster`, from SLURM_CLUSTER_NAME, which slurmd gives the epilog in 22.05 and
25.11; null, logged, without it): job ids are per cluster, and records gathered from several clusters would
otherwise join one cluster's jobs to another's GPU use.
Which run this is, and its start, come from Slurm (`hooks.run_identity`): slurmd skips the prolog on some quick
restarts, so the prolog's start mark is used only where it agrees with Slurm, and a start Slurm's job record no
longer holds (a requeued run on 22.05) is asked of sacct.
GPU telemetry (docs/telemetry.md): utilisation from NVML accounting mode (`hooks.telemetry`), each GPU's energy
from its counter at the prolog's mark of this run and now (`hooks.energy`), unknown with the reason where either
is missing; the training-loop helper's slack windows are copied from the scratch folder before it is cleaned.
"""

from __future__ import annotations

import os
import time

from slurmtools.hooks import safefs
from slurmtools.hooks.common import (MAX_STEP, RECORD_T_MAX, RECORD_T_MIN, UNKNOWN_GPUS, HookLog, JobEnv, dumps,
                                     hook_writer, in_extern_step, job_fields, other_context, read_job, sacct,
                                     shared_gpus, spool_dir, unknown_gpus)

JOBS = "jobs"
RUNNING = "running"
DEFAULT_SCRATCH = "/tmp/slurmtools-job-{job_id}"
#: records of one job, run and node kept side by side at most (`_free_name`)
MAX_SAME_NAME = 1000
_REQUEUE_STATES = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT"}


def main() -> int:
    log = HookLog("epilog")
    try:
        run(log)
    except Exception as e:
        log(f"internal error (ignored): {type(e).__name__}: {e}")
    return 0


def _guarded(log: HookLog, what: str, fn, *args, default=None):
    """`fn(*args)`, or `default` when it raises: one bookkeeping step failing leaves its part of the record
    unknown and never costs the record (issue 12: an odd variable used to lose the whole record)."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001
        log(f"{what} failed (ignored): {type(e).__name__}: {e}")
        return default


def run(log: HookLog, now: float | None = None) -> dict | None:
    end = time.time() if now is None else now
    if other_context("epilog_slurmd", log):  # EpilogSlurmctld (the controller), a Prolog: no record of this node
        return None
    refused = None
    try:
        dfd = safefs.open_secure_dir(spool_dir(), create=True)
    except (safefs.UnsafePath, OSError) as e:
        refused, dfd = e, None
    # attached before the job is read, so why a variable is unknown reaches hooks.log: slurmd logs an epilog's
    # output only when it fails, and this one exits 0
    log.attach(dfd)
    job = read_job(log)
    if refused is not None:
        log(f"spool folder refused, no record written: {refused}")
    if job.job_id is None:
        log("no usable SLURM_JOB_ID; nothing recorded")
        return None
    _guarded(log, "cluster name", _say_no_cluster, job, log)
    _guarded(log, "exit code", _exit_codes_of_extern_step, job, log)
    mark_start, mark_restart, mark_energy, mark_why = _guarded(log, "start mark", _take_start, job, log,
                                                               default=(None, None, None, ""))
    fields = None
    if os.environ.get("SLURMTOOLS_EPILOG_SCONTROL", "1") != "0":
        fields = _guarded(log, "Slurm's job record", job_fields, job.slurm_ref, log)
    ident = _guarded(log, "run identity", _identify, job, fields, mark_start, mark_restart, end, log)
    run_no, start, start_source, requeued = ident.as_tuple() if ident else (None, None, None, None)
    # the prolog's energy counters count only when its mark is of this run (as for its start time)
    energy_start, energy_start_why = _energy_start(mark_start, mark_restart, mark_energy, run_no, mark_why)
    shared = job.shared or _guarded(log, "shared GPUs", shared_gres, fields, default="")
    if not shared and fields is None and job.gpus is not None:
        log("whether other jobs share the job's GPUs (gres/shard) is unknown: Slurm's job record not read; its "
            "GPUs' energy and processes are recorded as its own")
    tele = _guarded(log, "GPU telemetry", _gpu_telemetry, job, start, energy_start, energy_start_why, end, log,
                    shared, default={}) or {}
    rec_start, rec_end, start_why = record_times(start, end)
    if start_why:
        log(f"record's start left empty: {start_why}")
        start_source = None
    rec = {
        "job": job.job_id,
        "cluster": job.cluster,  # job ids are per cluster: the reports join the record to this cluster's jobs only
        "user": job.user,
        "uid": job.uid,
        "account": job.account,
        "partition": job.partition,
        "qos": fields.get("QOS") if fields else None,
        "node": job.node,
        "nodes": job.nodelist,
        "gpus": list(job.gpus) if job.gpus is not None else None,
        "start": rec_start,
        "start_why": start_why or None,
        "end": rec_end,
        "exit_code": job.exit_code,
        "derived_exit_code": job.derived_exit,
        "run": run_no,
        "start_source": start_source,
        "requeued": requeued,
        "restart_count": job.restart_count,
        "job_state": fields.get("JobState") if fields else None,
        "preempt_time": _set(fields.get("PreemptTime")) if fields else None,
        "gpu_accounting": tele.get("gpu_accounting"),
        "gpu_accounting_why": tele.get("gpu_accounting_why"),
        "gpu_utilization_mode": tele.get("gpu_utilization_mode"),
        "gpu_energy": tele.get("gpu_energy"),
        "energy_j": tele.get("energy_j"),
        "energy_why": tele.get("energy_why", "GPU telemetry failed"),
        "energy_source": tele.get("energy_source"),
        # the training-loop helper's mode windows, read before the scratch folder is cleaned
        "slack_windows": _guarded(log, "slack windows", _slack_windows, job, log),
    }
    if dfd is not None:
        try:
            jfd = safefs.open_secure_dir(os.path.join(spool_dir(), JOBS), create=True)
            try:
                node = job.node or "unknown-node"
                run_name = "unknown-run" if run_no is None else run_no
                name = _free_name(jfd, f"{job.job_id}.{run_name}.{node}", log)
                safefs.write_atomic_at(jfd, name, dumps(rec).encode() + b"\n")
            finally:
                os.close(jfd)
        except (safefs.UnsafePath, OSError) as e:
            log(f"record not written: {e}")
        if fields and job.is_first_node and run_no is not None:
            report = _guarded(log, "stop report", _stop_report, job, log)
            _guarded(log, "decision log", _audit, job, fields, run_no, report, log, start, end)
    _guarded(log, "scratch clean-up", _clean_scratch, job, log)
    return rec


def record_times(start: float | None, end: float) -> tuple[float | None, float | None, str]:
    """(start, end, why the start is left out) as the record may hold them: each within RECORD_T_MIN..RECORD_T_MAX
    and the start not after the end, which is what the reports read (a record with either past them was refused
    whole, its GPU use and energy with it). The start can pass the end: the prolog's mark may lie up to
    MARK_FUTURE_S ahead (a clock stepped by NTP), and 25.11's SLURM_JOB_START_TIME is the controller's clock.
    What is left out is unknown (null), never moved to a bound."""
    e = round(end, 3) if RECORD_T_MIN <= end <= RECORD_T_MAX else None
    why = ""
    if e is None:
        why = f"the epilog's clock ({end:.0f}) is outside the years 1971-2199, so the run's end is unknown"
    elif start is not None and start > e:
        why = f"its start {start:.3f} is {start - e:.0f} s after the run's end {e:.3f} (the clocks disagree)"
    if start is not None and not why and not RECORD_T_MIN <= start <= RECORD_T_MAX:
        why = f"its start {start:.0f} is outside the years 1971-2199"
    return (None if why or start is None else start), e, why


def _say_no_cluster(job: JobEnv, log: HookLog) -> None:
    """Log why the record's cluster is null when slurmd gave no SLURM_CLUSTER_NAME (an unreadable one is logged by
    `read_job`): the reports can then not tell this record from another cluster's job of the same id."""
    if job.cluster is None and not (os.environ.get("SLURM_CLUSTER_NAME") or "").strip():
        log("SLURM_CLUSTER_NAME absent or empty (slurmd 22.05 and 25.11 set it); the record's cluster is unknown "
            "(null)")


def _exit_codes_of_extern_step(job: JobEnv, log: HookLog) -> None:
    """With PrologFlags=RunInJob (24.05 and later) slurmstepd runs the epilog in the job's extern step and hands
    it SLURM_JOB_EXIT_CODE=0, EXIT_CODE2=0:0 and DERIVED_EC=0 whatever the job's end: unknown, not "0:0"."""
    if (job.exit_code is not None or job.derived_exit is not None) and in_extern_step():
        log("exit codes unknown: slurmstepd runs this epilog (PrologFlags=RunInJob) and gives 0 whatever the "
            f"job's end ({job.exit_code} and derived {job.derived_exit} not kept)")
        job.exit_code = job.derived_exit = None


#: the GRES that share a GPU among jobs (Slurm's shared GRES)
SHARED_GRES = ("shard", "mps")


def shared_gres(fields: dict | None) -> str:
    """`gres/shard` or `gres/mps` when Slurm's job record says the job asked for or holds a shared GRES (25.11
    prints `TresPerNode=gres/shard:2`, 22.05 `gres:shard:2`; AllocTRES and TRES `gres/shard=2` where tracked),
    else "". slurmd hands a shard job's prolog and epilog the index of the GPU it shares in SLURM_JOB_GPUS like a
    whole GPU's, and no variable of its own (gres/mps sets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)."""
    for key in ("TresPerNode", "TresPerJob", "TresPerSocket", "TresPerTask", "AllocTRES", "TRES"):
        for item in (fields or {}).get(key, "").split(","):
            item = item.strip()
            for kind in SHARED_GRES:
                for head in (f"gres/{kind}", f"gres:{kind}"):
                    if item == head or item.startswith((f"{head}:", f"{head}=")):
                        return f"gres/{kind}"
    return ""


def _identify(job: JobEnv, fields: dict | None, mark_start: float | None, mark_restart: int | None, now: float,
              log: HookLog):
    """The run's index and start from Slurm (`run_identity.identify`); a start only sacct still knows is asked of
    sacct (a requeued run on 22.05 whose prolog did not run)."""
    from slurmtools.hooks import run_identity

    ident = run_identity.identify(fields, job.restart_count, job.start_time, mark_start, mark_restart, now)
    for n in ident.notes:
        log(n)
    if ident.start is None and ident.run is not None and os.environ.get("SLURMTOOLS_EPILOG_SCONTROL", "1") != "0":
        # `sacct -j N` lists also the tasks of an array whose id is N and the components of a heterogeneous job
        # led by N: only the rows of this job's own id (JobIDRaw) are its runs
        r = sacct(["-j", str(job.job_id), "-D", "-X", "-n", "-P", "-o", "JobIDRaw,Start"])
        if r is not None and r[0] == 0:
            ident.start = run_identity.start_from_sacct(r[1], ident.run, job.job_id)
            ident.start_source = "sacct" if ident.start is not None else None
        if ident.start is None:
            log(f"start of run {ident.run} unknown to Slurm's job record and to sacct; left empty")
    return ident


def _free_name(jfd: int, stem: str, log: HookLog) -> str:
    """`stem.json`, or `stem.2.json`, ... when a record of that name exists: a second record for one run and node
    (which Slurm's run identity should make impossible) is kept beside the first, never written over it."""
    name = f"{stem}.json"
    k = 1
    while _exists_at(jfd, name):
        if k >= MAX_SAME_NAME:  # refused, never written over the last one (the rename would replace it)
            raise FileExistsError(f"{MAX_SAME_NAME} records named {stem}[.N].json exist; this one is not written")
        k += 1
        name = f"{stem}.{k}.json"
    if k > 1:
        log(f"a record {stem}.json exists already; this one is {name}")
    return name


def _exists_at(dfd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dfd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def _take_start(job: JobEnv, log: HookLog) -> tuple[float | None, int | None, dict | None, str]:
    """Read and remove the prolog's start mark for this job on this node: (start, restart count, the GPUs' energy
    counters at the start or None, why a mark that was there is not used). Marks of older prologs hold only
    "start restarts"."""
    if job.node is None:
        return None, None, None, ""
    try:
        rfd = safefs.open_secure_dir(os.path.join(spool_dir(), RUNNING))
    except (safefs.UnsafePath, OSError):
        return None, None, None, ""
    try:
        name = f"{job.job_id}.{job.node}"
        raw = safefs.read_small_at(rfd, name)
        if raw is None:
            return None, None, None, ""
        try:
            os.unlink(name, dir_fd=rfd)
        except OSError:
            pass
        why = ""
        try:
            start_text, restarts, *more = raw.decode().split()
            start, why = mark_time(start_text, time.time())
            if restarts != "-" and not (restarts.isascii() and restarts.isdigit() and len(restarts) < 10):
                why = why or f"its restart count {ascii(restarts)[:40]} is not a whole number"
        except (ValueError, UnicodeDecodeError):
            why = "not \"start restarts [counters]\" text"
        if why:  # a mark that cannot be this run's start is not one: the start comes from Slurm, or is unknown
            log(f"start mark refused ({why}); its start, run and energy counters are not used")
            return None, None, None, why
        energy = None
        if more:
            from slurmtools.hooks.energy import parse_mark

            energy = parse_mark(more)
        # "-": the prolog did not know the restart count
        return start, (None if restarts == "-" else int(restarts)), energy, ""
    finally:
        os.close(rfd)


#: how far past the epilog's clock a prolog's start may lie (the same node's clock, stepped by NTP at most)
MARK_FUTURE_S = 300.0


def mark_time(text: str, now: float) -> tuple[float | None, str]:
    """The start time of a mark as the prolog writes it (`1790000000.123`), or (None, why it is not one): only
    ASCII digits with at most one point; not 0, and not after `now` by more than MARK_FUTURE_S. float() alone
    would take `nan`, `inf`, `-5`, `1e300` and `1_0`, and a start of nan or inf becomes a null start the
    record still says the prolog gave, a negative or far-future one a record the reports refuse."""
    whole, _, frac = text.partition(".")
    if not (whole.isascii() and whole.isdigit() and len(whole) <= 12 and (not frac or frac.isascii() and
                                                                           frac.isdigit() and len(frac) <= 9)):
        return None, f"its start {ascii(text)[:40]} is not epoch seconds"
    t = float(text)
    if t <= 0:
        return None, f"its start {text} is not after 1970"
    if t > now + MARK_FUTURE_S:
        return None, f"its start {text} is {t - now:.0f} s after this epilog's clock"
    return t, ""


def _energy_start(mark_start: float | None, mark_restart: int | None, mark_energy: dict | None,
                  run_no: int | None, mark_why: str = "") -> tuple[dict | None, str]:
    """The GPUs' energy counters at this run's start from the prolog's mark, or (None, why there are none)."""
    if mark_why:
        return None, f"the prolog's start mark was refused ({mark_why})"
    if mark_start is None:
        return None, "no prolog start mark for this run (the prolog did not run, or its mark was lost)"
    if mark_restart is not None and run_no is not None and mark_restart != run_no:
        return None, f"the prolog's start mark is of run {mark_restart}, not of this run {run_no}"
    if mark_energy is None:
        return None, "the prolog's start mark holds no energy counters (an older prolog, or none were read)"
    return mark_energy, ""


def _audit(job: JobEnv, fields: dict[str, str], run_no: int, report: dict | None, log: HookLog,
           start: float | None = None, end: float | None = None) -> None:
    """Preemption and requeue as Slurm's own record tells them, once per job run (first node only).

    Requeued: Slurm's Restarts counter is above the run's own count (measured: at epilog time a requeued job
    shows JobState=COMPLETING with Restarts already incremented). Preempted: PreemptTime is set, or the
    checkpoint library reported it (after `scontrol requeue` Slurm resets PreemptTime) AND Slurm confirms the
    requeue; such events say `"reported_by": "job"`.
    """
    from slurmtools import audit

    path = os.path.join(spool_dir(), audit.LOG_NAME)
    writer = hook_writer("epilog", job)
    state = fields.get("JobState", "")
    preempt = _set(fields.get("PreemptTime"))
    restarts = fields.get("Restarts", "0")
    details = {"qos": fields.get("QOS"), "state": state, "restarts": restarts, "reason": fields.get("Reason"),
               "run": run_no, "node": job.node, "exit_code": job.exit_code,
               # the run's times, so the reports match this event to sacct's row of the run by time as well
               "run_start": start, "run_end": round(end, 3) if end is not None else None}
    requeued = state in _REQUEUE_STATES or (restarts.isdigit() and int(restarts) > run_no)
    kind = report.get("kind") if report else None
    saved = report.get("last_checkpoint") if report else None
    if isinstance(saved, (int, float)) and not isinstance(saved, bool) and saved > 0:
        details["last_checkpoint"] = float(saved)  # the reports count GPU-hours lost after it
    try:
        if preempt:
            audit.record("preempted", job=job.job_id, user=job.user, details={**details, "preempt_time": preempt},
                         path=path, writer=writer)
        elif kind in ("preempted", "time_limit") and requeued:
            audit.record(kind, job=job.job_id, user=job.user,
                         details={**details, "reported_by": "job", "evidence": str(report.get("evidence"))[:500]},
                         path=path, writer=writer)
        if requeued:
            audit.record("requeued", job=job.job_id, user=job.user, details=details, path=path, writer=writer)
    except Exception as e:
        log(f"decision log not written: {e}")


def _stop_report(job: JobEnv, log: HookLog) -> dict | None:
    """The checkpoint library's `stop.json` from the job's scratch folder (`_scratch_file`: at most 4 KiB), a
    JSON object or nothing."""
    raw = _scratch_file(job, "stop.json", 4096)
    import json  # only when a stop report exists (a preempted or warned run)

    try:
        doc = json.loads(raw) if raw else None
    except (ValueError, RecursionError):  # the job's own file: nested past the recursion limit is unreadable too
        log("stop report unreadable; ignored")
        return None
    return doc if isinstance(doc, dict) else None


#: what a slack window may hold in the record (slurmtools.slack_loop.Window), and at most how many are copied; a
#: number past what the report reads (a time outside RECORD_T_MIN..RECORD_T_MAX, a step past int64) is unknown
_WINDOW_KEYS = {"mode": str, "start_step": int, "end_step": int, "start_time": float, "end_time": float, "run": int,
                "why": str, "ended": str}
MAX_WINDOWS = 500


def _slack_windows(job: JobEnv, log: HookLog) -> list[dict] | None:
    """The training-loop helper's `slack-windows.json` (slurmtools.slack_loop) from the job's scratch folder, read
    as `stop.json` is (the user's own folder, not group/other-writable, and file, no symlinks, at most 256 KiB),
    of this job and format:
    its windows with known keys and types only, texts cut at 200 characters; None when there is none."""
    raw = _scratch_file(job, "slack-windows.json", 256 << 10, private=True)
    if not raw:
        return None
    from slurmtools.hooks.common import loads

    try:
        doc = loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        log("slack windows file unreadable; ignored")
        return None
    if not isinstance(doc, dict) or doc.get("format") != "slurmtools-slack-windows/1" or \
            str(doc.get("job_id")) != str(job.job_id) or not isinstance(doc.get("windows"), list):
        log("slack windows file not of this job or format; ignored")
        return None
    out = []
    for w in doc["windows"][:MAX_WINDOWS]:
        if not isinstance(w, dict):
            continue
        row = {}
        for k, typ in _WINDOW_KEYS.items():
            v = w.get(k)
            if typ is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            ok = isinstance(v, typ) and not isinstance(v, bool) and (
                typ is str or (RECORD_T_MIN <= v <= RECORD_T_MAX if typ is float else -MAX_STEP - 1 <= v <= MAX_STEP))
            row[k] = (v[:200] if typ is str else v) if ok else None
        if row["mode"] in ("light", "moderate", "heavy"):
            out.append(row)
    return out


def _scratch_file(job: JobEnv, file: str, limit: int, private: bool = False) -> bytes | None:
    """A file the job's code left in its scratch folder, read without trusting the folder: no symlinks, the
    folder and a regular file owned by the job's user (`private`: the folder also not group/other-writable, as
    its writer demands), at most `limit` bytes; None otherwise."""
    path = _scratch_path(job)
    if path is None or job.uid is None:
        return None
    parent, name = os.path.split(path)
    try:
        pfd = safefs.open_secure_dir(parent, sticky_ok=True)
    except (safefs.UnsafePath, OSError):
        return None
    try:
        try:
            dfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
        except OSError:
            return None
        try:
            st = os.fstat(dfd)
            if st.st_uid != job.uid or (private and st.st_mode & 0o022):
                return None
            try:
                if os.stat(file, dir_fd=dfd, follow_symlinks=False).st_uid != job.uid:
                    return None
            except OSError:
                return None
            return safefs.read_small_at(dfd, file, limit)
        finally:
            os.close(dfd)
    finally:
        os.close(pfd)


def _scratch_path(job: JobEnv) -> str | None:
    pattern = os.environ.get("SLURMTOOLS_SCRATCH_PATTERN", DEFAULT_SCRATCH)
    if not pattern or pattern == "none" or "{job_id}" not in pattern or job.job_id is None:
        return None
    path = pattern.replace("{job_id}", str(job.job_id))
    if "{job_id}" in os.path.dirname(pattern):
        return None
    return path


def _set(v: str | None) -> str | None:
    return None if v in (None, "", "None", "Unknown", "0") else v


def _gpu_telemetry(job: JobEnv, start: float | None, energy_start: dict | None, energy_start_why: str,
                   now: float, log: HookLog, shared: str = "") -> dict:
    """The record's GPU fields: per-GPU utilisation from NVML accounting (`hooks.telemetry`, as the site's
    `[telemetry] gpu_utilization` says) and energy over the run (`hooks.energy`), each None with its reason
    where unknown. One NVML session; pynvml is imported only where an NVIDIA driver is."""
    out: dict = {"gpu_accounting": None, "gpu_energy": None, "energy_j": None, "energy_source": None}
    if not job.gpus_given:
        out["gpu_accounting_why"] = out["energy_why"] = "the job has no GPUs"
        return out
    if job.gpus is None:
        out["gpu_accounting_why"] = out["energy_why"] = UNKNOWN_GPUS
        return out
    if shared:
        out["gpu_accounting_why"] = out["energy_why"] = shared_gpus(shared)
        return out
    from slurmtools.hooks import energy, labfake

    fp = labfake.fake_path()
    if fp is not None:
        out["gpu_accounting_why"] = "the lab's fake GPUs run no processes (no NVML accounting)"
        spec, why = labfake.node_spec_why(fp[0], job.node)
        if spec is None:
            out["energy_why"] = f"lab fault file not used: {why}"
            return out
        end, out["energy_source"] = energy.read_fake(spec, job.gpus, now), "lab-fake"
    else:
        from slurmtools.hooks import telemetry
        from slurmtools.hooks.nvml import NvmlUnavailable, close_nvml, index_order_trouble, open_nvml

        try:
            nv = open_nvml()
        except NvmlUnavailable as e:
            out["gpu_accounting_why"] = out["energy_why"] = str(e)
            return out
        try:
            why = index_order_trouble(nv)
            if why:  # the job's indices name no GPU for sure here
                out["gpu_accounting_why"] = out["energy_why"] = unknown_gpus(why)
                return out
            mode, where = telemetry.site_mode()
            out["gpu_utilization_mode"] = mode
            if mode == "off":
                out["gpu_accounting_why"] = f"off by the site ({where}: telemetry.gpu_utilization)"
            else:
                if mode is None:
                    log(f"site's telemetry.gpu_utilization unknown ({where}); accounting read as found")
                acc = telemetry.read_accounting(nv, job.gpus, start)
                out["gpu_accounting"] = acc
                whys = sorted({f"GPU {r['gpu']}: {r['why']}" for r in acc if r["why"]})
                out["gpu_accounting_why"] = "; ".join(whys) or None
            end, out["energy_source"] = energy.read_nvml(nv, job.gpus), "nvml"
        finally:
            close_nvml(nv)
    per, total, why = energy.deltas(job.gpus, energy_start, end, energy_start_why)
    out.update(gpu_energy=per, energy_j=total, energy_why=why)
    return out


def _clean_scratch(job: JobEnv, log: HookLog) -> None:
    """Remove the job's scratch folder (pattern from SLURMTOOLS_SCRATCH_PATTERN, `{job_id}` filled in)."""
    path = _scratch_path(job)
    if path is None:
        return
    parent, name = os.path.split(path)
    try:
        what = safefs.remove_user_tree(parent, name, job.uid)
        if what != "absent":
            log(f"scratch {path}: {what}")
    except (safefs.UnsafePath, OSError) as e:
        log(f"scratch {path} not removed: {e}")
