"""What a node is checked for before a job starts (the prolog) and periodically (`scripts/node-health`, for
slurmd's HealthCheckProgram): GPU health, then topology drift against the installed node expectations.

One NVML session serves both (its init is the costly part). The drift reads run within a time budget
($SLURMTOOLS_DRIFT_BUDGET seconds, default 2): GPUs not read by then are reported as not checked, never guessed.
Our own trouble (no NVML, no or malformed expectations file, an unsafe path) is logged and never a fault: a false
alarm costs a whole node. Sources: the hardware (NVML, /sys/class/infiniband), or in the Slurm lab the
root-owned fault file (`hooks.labfake`).
"""

from __future__ import annotations

import os
import sys
import time

from slurmtools.hooks import drift, expectations, gpuhealth, labfake, links, safefs
from slurmtools.hooks.common import HookLog, JobEnv, drain, spool_dir
from slurmtools.hooks.nvml import NvmlUnavailable, close_nvml, open_nvml

BUDGET_ENV = "SLURMTOOLS_DRIFT_BUDGET"
DEFAULT_BUDGET_S = 2.0
MAX_BUDGET_S = 60.0


def budget_seconds() -> float:
    """The drift reads' budget: $SLURMTOOLS_DRIFT_BUDGET when it is a number in (0, 60], else the default."""
    try:
        v = float(os.environ.get(BUDGET_ENV, ""))
    except ValueError:
        return DEFAULT_BUDGET_S
    return v if 0 < v <= MAX_BUDGET_S else DEFAULT_BUDGET_S


def check(node: str | None, job_gpus: tuple[int, ...] | None, gpus_wanted: bool, log: HookLog, *,
          sysfs_root: str = "/", budget: float | None = None) -> list[str]:
    """Reasons to drain `node`: GPU health faults of the job's GPUs (`job_gpus`, None: all), then drift faults of
    the whole node. `gpus_wanted` False (a job without GPUs) leaves NVML closed: only the HCAs are compared."""
    start = time.monotonic()
    budget = budget_seconds() if budget is None else budget
    exp, exp_why = _expectations(node, log)
    fp = labfake.fake_path()
    spec, spec_why = labfake.node_spec_why(fp[0], node) if fp else (None, "")
    if spec_why:
        log(f"lab fault file not used: {spec_why}")
    faults: list[str] = []
    obs = drift.Observed(budget_s=budget, gpus_why="the job has no GPUs (NVML not opened)")
    if gpus_wanted:
        statuses, source = _gpus(node, spec, exp, obs, start + budget, log)
        if statuses is not None:
            why = gpuhealth.order_trouble(statuses) if job_gpus else ""
            if why:  # which GPUs the job's indices name is not known: every GPU is checked, as for MIG slices
                log(f"job GPUs {job_gpus} not matched to this node's: {why}; every GPU checked")
                job_gpus = None
            found = gpuhealth.problems(statuses, job_gpus)
            log(f"GPU health ({source}, {len(statuses)} GPUs, job GPUs {job_gpus}): {'; '.join(found) or 'ok'}")
            faults += found
    if exp is None:
        log(f"topology drift: not checked ({exp_why})")
        return faults
    if exp.hcas:
        _hcas([h.name for h in exp.hcas], spec, sysfs_root, obs)
    report = drift.compare(exp, obs)
    log(f"topology drift ({exp.source}, profile {exp.profile}, {time.monotonic() - start:.3f} s): "
        f"{report.summary()}")
    return faults + report.faults


def _expectations(node: str | None, log: HookLog | None = None) -> tuple[expectations.HostExpectations | None, str]:
    """(this node's expectations, "") or (None, why there are none: absent, refused, malformed, not listed).

    The places of `expectations.paths()` in order: only an absent file moves on to the next; a file that is
    there but refused or malformed is reported as such, never passed over for another copy. A second copy
    that is not read is logged (a stale one would otherwise mislead whoever edits it)."""
    from slurmtools.errors import ConfigError

    if not node:
        return None, "no node name"
    where = expectations.paths()
    for k, path in enumerate(where):
        try:
            exp = expectations.load(node, path)
        except FileNotFoundError:
            continue
        except (safefs.UnsafePath, OSError) as e:
            return None, f"file refused: {e}"
        except ConfigError as e:
            return None, f"malformed: {e}"
        except Exception as e:  # noqa: BLE001 -- the file read first must never cost the GPU health check after it
            return None, f"unreadable: {path}: {type(e).__name__}: {e}"
        if log is not None:
            for other in where[k + 1:]:
                if os.path.lexists(other):
                    log(f"expectations: {path} read; {other} is there too and not read")
        if exp is None:
            return None, f"{node} is not in {path}"
        return exp, ""
    return None, f"no {' nor '.join(where)}"


def _gpus(node, spec, exp, obs: drift.Observed, until: float, log: HookLog):
    """GPU health statuses (or None) and their source; fills `obs` with GPU count and links when `exp` wants them."""
    if spec is not None:
        statuses = gpuhealth.from_fake_spec(spec, node)
        obs.gpu_count = len(statuses)
        obs.gpus = links.from_fake_spec(spec, len(statuses))
        obs.gpus_why = "" if obs.gpus is not None else "the lab fault file states no links"
        return statuses, "lab-fake"
    try:
        nv = open_nvml()
    except NvmlUnavailable as e:
        log(f"GPU health skipped: {e}")
        obs.gpus_why = f"no NVML ({e})"
        return None, "nvml"
    try:
        statuses = gpuhealth.read_statuses(nv)
        if exp is not None:
            obs.gpu_count = len(statuses)
            want = {g.index for g in exp.gpu if g.nvlinks is not None}
            obs.gpus, obs.skipped = links.read_gpu_links(nv, len(statuses), want, until)
    finally:
        close_nvml(nv)
    return statuses, "nvml"


def _hcas(names: list[str], spec, sysfs_root: str, obs: drift.Observed) -> None:
    if spec is not None:  # the lab: HCAs only from a fake sysfs tree the fault file names, never the host's own
        root = spec.get("sysfs_root")
        if not isinstance(root, str):
            obs.hcas_why = "the lab fault file names no sysfs_root"
            return
        try:
            os.close(safefs.open_secure_dir(root))
        except (safefs.UnsafePath, OSError) as e:
            obs.hcas_why = f"lab sysfs_root refused: {e}"
            return
        sysfs_root = root
    obs.ib_class = os.path.join(sysfs_root, links.IB_CLASS)
    obs.hca_names = links.hca_names(sysfs_root)
    obs.hcas = links.read_hcas(names, sysfs_root) if obs.hca_names is not None else None
    obs.ib_class_absent = obs.hca_names is None


def main(argv: list[str] | None = None) -> int:
    """`scripts/node-health [--dry-run]`: check the whole node (all GPUs, all HCAs) and drain it with the reasons;
    --dry-run only prints them. Exit 1 when a fault was found, else 0 (our own trouble included)."""
    args = sys.argv[1:] if argv is None else argv
    dry = "--dry-run" in args
    node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]
    log = HookLog("node-health", JobEnv(node=node))
    if not dry:
        try:
            log.attach(safefs.open_secure_dir(spool_dir()))
        except (safefs.UnsafePath, OSError):
            pass
    try:
        faults = check(node, None, True, log)
    except Exception as e:  # never drain for our own bug
        log(f"check crashed (ignored, node kept): {type(e).__name__}: {e}")
        return 0
    if not faults:
        return 0
    reason = "slurmtools node-health: " + "; ".join(faults)
    if dry:
        print(reason)
    else:
        ok, said = drain(node, reason)
        log(f"drain {node}: {'done' if ok else 'failed'} {said} ({reason})")
    return 1


if __name__ == "__main__":
    sys.exit(main())
