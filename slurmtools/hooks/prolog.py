"""Node prolog: note the job's start, check its GPUs and the node's links, drain the node only for a real fault.

The checks are `hooks.nodecheck`: GPU health (ECC, retired pages, row remapping, GPUs gone) of the job's GPUs,
and topology drift of the whole node (GPU count, NVLinks up, PCIe and HCA links against the installed node
expectations), within a time budget. Exit 1 (Slurm then drains the node and requeues the job held) ONLY when a
check found a fault, after draining the node ourselves with a reason that names the GPU, link or HCA. Anything
else (our own bug, no NVML, an odd environment, an unsafe spool folder, a malformed expectations file) is logged
and the prolog succeeds: a false alarm costs a whole node.
"""

from __future__ import annotations

import os
import time

from slurmtools.hooks import safefs
from slurmtools.hooks.common import HookLog, JobEnv, drain, spool_dir

RUNNING = "running"


def main() -> int:
    log = HookLog("prolog")
    try:
        job = JobEnv.from_environ()
        log.job = job
        _note_start(job, log)
    except Exception as e:  # never fail a job for our own trouble
        log(f"internal error before health check (ignored): {type(e).__name__}: {e}")
        job = None
    try:
        faults = _health(job, log)
    except Exception as e:
        log(f"health check crashed (ignored, node kept): {type(e).__name__}: {e}")
        return 0
    if not faults:
        return 0
    node = job.node if job else None
    reason = "slurmtools prolog: " + "; ".join(faults)
    log(f"NODE FAULT: {reason}")
    if node:
        ok, said = drain(node, reason)
        log(f"drain {node}: {'done' if ok else 'failed'} {said}")
    try:
        from slurmtools import audit
        audit.record("node_drained", job=job.job_id if job else None, user=job.user if job else None,
                     details={"node": node, "faults": faults},
                     path=os.path.join(spool_dir(), audit.LOG_NAME))
    except Exception as e:
        log(f"decision log not written: {e}")
    return 1


def _note_start(job: JobEnv, log: HookLog) -> None:
    """Start time for the epilog's record (the node epilog has no start time in its environment)."""
    try:
        dfd = safefs.open_secure_dir(spool_dir(), create=True)
    except (safefs.UnsafePath, OSError) as e:
        log(f"spool folder refused, no start mark: {e}")
        return
    log.attach(dfd)
    if job.job_id is None or job.node is None:
        log("no usable SLURM_JOB_ID/SLURMD_NODENAME; start not noted")
        return
    rfd = safefs.open_secure_dir(os.path.join(spool_dir(), RUNNING), create=True)
    try:
        body = f"{time.time():.3f} {job.restart_count}\n".encode()  # "start restart_count"
        safefs.write_atomic_at(rfd, f"{job.job_id}.{job.node}", body)
    finally:
        os.close(rfd)


def _health(job: JobEnv | None, log: HookLog) -> list[str]:
    from slurmtools.hooks import labfake, nodecheck

    if job is None:
        return []
    # NVML only for jobs with GPUs (its import and init cost every other job start); the lab fakes GPUs always
    gpus_wanted = job.gpus is not None or labfake.fake_path() is not None
    return nodecheck.check(job.node, job.gpus, gpus_wanted, log)
