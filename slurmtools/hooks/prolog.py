"""Node prolog: note the job's start, check its GPUs and the node's links, drain the node only for a real fault.

The checks are `hooks.nodecheck`: GPU health (ECC, retired pages, row remapping, GPUs gone) of the job's GPUs,
and topology drift of the whole node (GPU count, NVLinks up, PCIe and HCA links against the installed node
expectations), within a time budget. Exit 1 (Slurm then drains the node and requeues the job held) ONLY when a
check found a fault, after draining the node ourselves with a reason that names the GPU, link or HCA. Anything
else (our own bug, no NVML, an odd environment, an unsafe spool folder, a malformed expectations file) is logged
and the prolog succeeds: a false alarm costs a whole node.

The health check depends on no bookkeeping: each environment variable is read on its own (a bad one leaves that
field unknown), and reading the environment, the start mark and the decision log each fail alone. A prolog that
skipped its check because of a bookkeeping error would let a node with a failing GPU take jobs (issue 12).

For jobs with GPUs the prolog also switches NVML accounting mode on where the site's `[telemetry]
gpu_utilization` says "accounting" (`hooks.telemetry`) and notes each GPU's energy counter in the start mark
(`hooks.energy`), for the epilog; both are bookkeeping and fail alone (docs/telemetry.md).
"""

from __future__ import annotations

import os
import time

from slurmtools.hooks import safefs
from slurmtools.hooks.common import (UNKNOWN_GPUS, HookLog, JobEnv, drain, hook_writer, other_context, read_job,
                                     shared_gpus, spool_dir, unknown_gpus)

RUNNING = "running"


def main() -> int:
    log = HookLog("prolog")
    if other_context("prolog_slurmd", log):  # PrologSlurmctld, an Epilog, a TaskProlog: not this node's prolog
        return 0
    job = read_job(log)
    nv, counters, notes = None, {}, []
    try:
        nv, counters, notes = _telemetry_start(job)
    except Exception as e:  # bookkeeping only, like the start mark
        notes = [f"GPU telemetry failed (ignored): {type(e).__name__}: {e}"]
    try:
        try:
            _note_start(job, log, counters)
        except Exception as e:  # bookkeeping only: never fail a job for it, never skip the check for it
            log(f"start mark failed (ignored): {type(e).__name__}: {e}")
        for n in notes:
            log(n)
        try:
            faults = _health(job, log)
        except Exception as e:
            log(f"health check crashed (ignored, node kept): {type(e).__name__}: {e}")
            return 0
    finally:
        if nv is not None:
            from slurmtools.hooks.nvml import close_nvml

            close_nvml(nv)
    if not faults:
        return 0
    node = job.node
    reason = "slurmtools prolog: " + "; ".join(faults)
    log(f"NODE FAULT: {reason}")
    if node:  # without a usable node name the exit status alone makes slurmd drain this node
        ok, said = drain(node, reason)
        log(f"drain {node}: {'done' if ok else 'failed'} {said}")
    try:
        _audit_drain(job, faults, log)
    except Exception as e:
        log(f"decision log not written: {e}")
    return 1


def _audit_drain(job: JobEnv, faults: list[str], log: HookLog) -> None:
    """The drain in the decision log, only inside a spool folder the hooks accept (root's, not writable by
    others): a folder refused for the start mark is no safer for root's log and its sequence files."""
    try:
        os.close(safefs.open_secure_dir(spool_dir()))
    except (safefs.UnsafePath, OSError) as e:
        log(f"decision log not written: spool folder refused: {e}")
        return
    from slurmtools import audit

    audit.record("node_drained", job=job.job_id, user=job.user, details={"node": job.node, "faults": faults},
                 path=os.path.join(spool_dir(), audit.LOG_NAME), writer=hook_writer("prolog", job))


def _telemetry_start(job: JobEnv):
    """(open NVML session or None, the job's GPUs' energy counters at the run's start, lines to log).

    Jobs with GPUs only. The site's `[telemetry] gpu_utilization` (hooks.telemetry) decides whether accounting
    mode is switched on; the NVML session stays open through the health check, which then re-opens NVML at the
    cost of a reference count, not a second driver initialisation."""
    if not job.gpus_given:
        return None, {}, []
    if job.gpus is None:  # never every GPU of the node: the epilog measures nothing for such a job either
        return None, {}, [f"GPU telemetry skipped: {UNKNOWN_GPUS}"]
    if job.shared:  # a GPU other jobs use too: the epilog measures nothing for such a job either
        return None, {}, [f"GPU telemetry skipped: {shared_gpus(job.shared)}"]
    from slurmtools.hooks import energy, labfake

    fp = labfake.fake_path()
    if fp is not None:  # the lab: fake GPUs with a fixed power, no accounting mode to switch
        spec, why = labfake.node_spec_why(fp[0], job.node)
        if spec is None:
            return None, {}, [f"lab fault file not used ({why}): no energy counters noted"]
        return None, energy.read_fake(spec, job.gpus, time.time()), []
    from slurmtools.hooks import telemetry
    from slurmtools.hooks.nvml import NvmlUnavailable, open_nvml
    from slurmtools.hooks.nvml import index_order_trouble as nvml_order_trouble

    try:
        nv = open_nvml()
    except NvmlUnavailable as e:
        return None, {}, [f"GPU telemetry skipped: {e}"]
    notes: list[str] = []
    try:
        why = nvml_order_trouble(nv)
        if why:  # the job's indices name no GPU for sure here: neither switched on nor counted
            return nv, {}, [f"GPU telemetry skipped: {unknown_gpus(why)}"]
        mode, where = telemetry.site_mode()
        if mode == "accounting":
            notes += telemetry.enable_accounting(nv, job.gpus)
        elif mode is None:
            notes.append(f"accounting mode left as it is: the site's telemetry.gpu_utilization is unknown ({where})")
        counters = energy.read_nvml(nv, job.gpus)
    except Exception as e:  # noqa: BLE001 -- the session is still handed back to be closed
        return nv, {}, notes + [f"GPU telemetry failed (ignored): {type(e).__name__}: {e}"]
    return nv, counters, notes


def _note_start(job: JobEnv, log: HookLog, counters: dict | None = None) -> None:
    """Start time for the epilog's record (the node epilog has no start time in its environment), and the job's
    GPUs' energy counters at that time (`hooks.energy.mark_token`)."""
    try:
        dfd = safefs.open_secure_dir(spool_dir(), create=True)
    except (safefs.UnsafePath, OSError) as e:
        log(f"spool folder refused, no start mark: {e}")
        return
    log.attach(dfd)
    if job.job_id is None or job.node is None:
        log("no usable SLURM_JOB_ID/SLURMD_NODENAME; start not noted")
        return
    try:
        rfd = safefs.open_secure_dir(os.path.join(spool_dir(), RUNNING), create=True)
    except (safefs.UnsafePath, OSError) as e:
        log(f"running folder refused, no start mark: {e}")
        return
    try:
        count = "-" if job.restart_count is None else job.restart_count  # "-": unknown
        tok = ""
        if counters:
            from slurmtools.hooks.energy import mark_token

            tok = mark_token(counters)
        body = f"{time.time():.3f} {count}{' ' + tok if tok else ''}\n".encode()  # "start restart_count [e=...]"
        safefs.write_atomic_at(rfd, f"{job.job_id}.{job.node}", body)
    finally:
        os.close(rfd)


def _health(job: JobEnv, log: HookLog) -> list[str]:
    from slurmtools.hooks import labfake, nodecheck

    # NVML only for jobs with GPUs (its import and init cost every other job start); the lab fakes GPUs always.
    # GPUs given but unreadable: every GPU is checked (job.gpus None), never none.
    gpus_wanted = job.gpus_given or labfake.fake_path() is not None
    return nodecheck.check(job.node, job.gpus, gpus_wanted, log)
