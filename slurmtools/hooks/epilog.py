"""Node epilog: one JSON record per job and node in the spool folder, decision-log events, scratch clean-up.

The record is written atomically (O_EXCL temporary + rename through a directory descriptor) into
`<spool>/jobs/<job>.<restart>.<node>.json`; the spool folder must be root's and not group/world-writable, else
nothing is written there (logged). The epilog exits 0 whatever happens: a failing epilog drains the node. Every
step around the record (start mark, Slurm's fields, GPU accounting, stop report, scratch) fails alone: the record
is written with that part unknown.
Slurm facts (22.05): no SLURM_JOB_QOS or start time in the node epilog's environment, so the QoS (tier) and the
preemption/requeue state come from `scontrol show job` (disable with SLURMTOOLS_EPILOG_SCONTROL=0).
Which run this is, and its start, come from Slurm (`hooks.run_identity`): slurmd skips the prolog on some quick
restarts, so the prolog's start mark is used only where it agrees with Slurm, and a start Slurm's job record no
longer holds (a requeued run on 22.05) is asked of sacct.
"""

from __future__ import annotations

import os
import time

from slurmtools.hooks import safefs
from slurmtools.hooks.common import HookLog, JobEnv, read_job, dumps, job_fields, sacct, spool_dir

JOBS = "jobs"
RUNNING = "running"
DEFAULT_SCRATCH = "/tmp/slurmtools-job-{job_id}"
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
    job = read_job(log)
    end = time.time() if now is None else now
    try:
        dfd = safefs.open_secure_dir(spool_dir(), create=True)
    except (safefs.UnsafePath, OSError) as e:
        log(f"spool folder refused, no record written: {e}")
        dfd = None
    log.attach(dfd)
    if job.job_id is None:
        log("no usable SLURM_JOB_ID; nothing recorded")
        return None
    mark_start, mark_restart = _guarded(log, "start mark", _take_start, job, log, default=(None, None))
    fields = None
    if os.environ.get("SLURMTOOLS_EPILOG_SCONTROL", "1") != "0":
        fields = _guarded(log, "Slurm's job record", job_fields, job.job_id)
    ident = _guarded(log, "run identity", _identify, job, fields, mark_start, mark_restart, end, log)
    run_no, start, start_source, requeued = ident.as_tuple() if ident else (None, None, None, None)
    rec = {
        "job": job.job_id,
        "user": job.user,
        "uid": job.uid,
        "account": job.account,
        "partition": job.partition,
        "qos": fields.get("QOS") if fields else None,
        "node": job.node,
        "nodes": job.nodelist,
        "gpus": list(job.gpus) if job.gpus is not None else None,
        "start": start,
        "end": round(end, 3),
        "exit_code": job.exit_code,
        "derived_exit_code": job.derived_exit,
        "run": run_no,
        "start_source": start_source,
        "requeued": requeued,
        "restart_count": job.restart_count,
        "job_state": fields.get("JobState") if fields else None,
        "preempt_time": _set(fields.get("PreemptTime")) if fields else None,
        "gpu_accounting": _guarded(log, "GPU accounting", _gpu_accounting, job, start, log),
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


def _identify(job: JobEnv, fields: dict | None, mark_start: float | None, mark_restart: int | None, now: float,
              log: HookLog):
    """The run's index and start from Slurm (`run_identity.identify`); a start only sacct still knows is asked of
    sacct (a requeued run on 22.05 whose prolog did not run)."""
    from slurmtools.hooks import run_identity

    ident = run_identity.identify(fields, job.restart_count, job.start_time, mark_start, mark_restart, now)
    for n in ident.notes:
        log(n)
    if ident.start is None and ident.run is not None and os.environ.get("SLURMTOOLS_EPILOG_SCONTROL", "1") != "0":
        r = sacct(["-j", str(job.job_id), "-D", "-X", "-n", "-P", "-o", "Start"])
        if r is not None and r[0] == 0:
            ident.start = run_identity.start_from_sacct(r[1], ident.run)
            ident.start_source = "sacct" if ident.start is not None else None
        if ident.start is None:
            log(f"start of run {ident.run} unknown to Slurm's job record and to sacct; left empty")
    return ident


def _free_name(jfd: int, stem: str, log: HookLog) -> str:
    """`stem.json`, or `stem.2.json`, ... when a record of that name exists: a second record for one run and node
    (which Slurm's run identity should make impossible) is kept beside the first, never written over it."""
    name = f"{stem}.json"
    k = 1
    while _exists_at(jfd, name) and k < 100:
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


def _take_start(job: JobEnv, log: HookLog) -> tuple[float | None, int | None]:
    """Read and remove the prolog's start mark for this job on this node."""
    if job.node is None:
        return None, None
    try:
        rfd = safefs.open_secure_dir(os.path.join(spool_dir(), RUNNING))
    except (safefs.UnsafePath, OSError):
        return None, None
    try:
        name = f"{job.job_id}.{job.node}"
        raw = safefs.read_small_at(rfd, name)
        if raw is None:
            return None, None
        try:
            os.unlink(name, dir_fd=rfd)
        except OSError:
            pass
        try:
            start, restarts = raw.decode().split()
            return float(start), (None if restarts == "-" else int(restarts))  # "-": the prolog did not know
        except (ValueError, UnicodeDecodeError):
            log("start mark unreadable; start left empty")
            return None, None
    finally:
        os.close(rfd)


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
                         path=path)
        elif kind in ("preempted", "time_limit") and requeued:
            audit.record(kind, job=job.job_id, user=job.user,
                         details={**details, "reported_by": "job", "evidence": str(report.get("evidence"))[:500]},
                         path=path)
        if requeued:
            audit.record("requeued", job=job.job_id, user=job.user, details=details, path=path)
    except Exception as e:
        log(f"decision log not written: {e}")


def _stop_report(job: JobEnv, log: HookLog) -> dict | None:
    """The checkpoint library's `stop.json` from the job's scratch folder, read without trusting the folder:
    no symlinks, a regular file owned by the job's user, at most 4 KiB, JSON object or nothing."""
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
            if os.fstat(dfd).st_uid != job.uid:
                return None
            try:
                if os.stat("stop.json", dir_fd=dfd, follow_symlinks=False).st_uid != job.uid:
                    return None
            except OSError:
                return None
            raw = safefs.read_small_at(dfd, "stop.json", 4096)
        finally:
            os.close(dfd)
    finally:
        os.close(pfd)
    import json  # only when a stop report exists (a preempted or warned run)

    try:
        doc = json.loads(raw) if raw else None
    except ValueError:
        log("stop report unreadable; ignored")
        return None
    return doc if isinstance(doc, dict) else None


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


def _gpu_accounting(job: JobEnv, start: float | None, log: HookLog) -> list[dict] | None:
    """Per-GPU utilization and peak memory of the job's processes from NVML accounting mode, when available."""
    if not job.gpus or os.environ.get("SLURMTOOLS_LAB_ETC") or not os.path.exists("/dev/nvidiactl"):
        return None  # no NVIDIA driver here: do not pay for importing pynvml
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:
        return None
    out = []
    try:
        for h in _handles(pynvml, job.gpus):
            try:
                pids = pynvml.nvmlDeviceGetAccountingPids(h)
            except pynvml.NVMLError:
                continue
            stats = []
            for pid in pids:
                try:
                    s = pynvml.nvmlDeviceGetAccountingStats(h, pid)
                except pynvml.NVMLError:
                    continue
                if start is not None and s.startTime / 1e6 < start - 5:
                    continue  # an earlier job's process on this GPU
                stats.append(s)
            minor = pynvml.nvmlDeviceGetMinorNumber(h)
            out.append({"gpu": minor, "processes": len(stats),
                        "gpu_util_pct": max((s.gpuUtilization for s in stats), default=None),
                        "mem_util_pct": max((s.memoryUtilization for s in stats), default=None),
                        "max_memory_bytes": max((s.maxMemoryUsage for s in stats), default=None)})
    except Exception as e:
        log(f"NVML accounting failed (ignored): {e}")
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return out


def _handles(nv, wanted: tuple[int, ...]):
    for i in range(nv.nvmlDeviceGetCount()):
        try:
            h = nv.nvmlDeviceGetHandleByIndex(i)
            if nv.nvmlDeviceGetMinorNumber(h) in wanted:
                yield h
        except nv.NVMLError:
            continue


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
