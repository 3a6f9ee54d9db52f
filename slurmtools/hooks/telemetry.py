"""How the hooks get each job's GPU utilisation: NVML per-process accounting, switched on by the prolog.

Why accounting mode: NVML keeps, per process that used a GPU, the share of its lifetime a kernel ran, the memory
controller's busy share and the peak memory, with no daemon and no sampling in the hooks; the epilog reads the
job's processes (started after the run's start) at the end. It is off by default and only root may switch it on,
so the prolog (root) does, on the job's GPUs. It holds while the driver stays loaded: without persistence mode
(nvidia-persistenced) the driver unloads when its last client exits and the mode falls back to off, which the
prolog logs and the epilog records (utilisation unknown, with the reason). DCGM job statistics and sampling are
not implemented (docs/telemetry.md).

The site's choice is `[telemetry] gpu_utilization` in the site file ($SLURMTOOLS_SITE, else
/etc/slurmtools/site.toml): "accounting" (the default) or "off" (the prolog changes no GPU setting, the epilog
reads no accounting). The hooks read it only for jobs with GPUs, only from a root-owned file
(`safefs.read_trusted`). When the site's wish cannot be read (file refused, not TOML, a value not in MODES) it is
unknown: the prolog changes nothing and the epilog still reads what accounting mode gives, and both log why.
"""

from __future__ import annotations

import os

from slurmtools.hooks import safefs
from slurmtools.hooks.nvml import is_not_supported, job_handles

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

MODES = ("accounting", "off")
DEFAULT_MODE = "accounting"
SYSTEM_SITE = "/etc/slurmtools/site.toml"


def site_mode() -> tuple[str | None, str]:
    """(the site's `[telemetry] gpu_utilization`, where it came from), or (None, why it is unknown)."""
    path = os.environ.get("SLURMTOOLS_SITE") or SYSTEM_SITE
    try:
        raw = safefs.read_trusted(path, 1 << 20)
    except FileNotFoundError:
        return DEFAULT_MODE, f"default ({path} absent)"
    except (safefs.UnsafePath, OSError) as e:
        return None, f"site file refused: {e}"
    import tomllib  # only for GPU jobs: it costs several milliseconds

    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        return None, f"{path}: not readable TOML ({e})"
    except RecursionError:  # tomllib recurses per nested array or inline table
        return None, f"{path}: not readable TOML (arrays or tables nested too deeply)"
    tele = doc.get("telemetry", {})
    value = tele.get("gpu_utilization", DEFAULT_MODE) if isinstance(tele, dict) else None
    if value not in MODES:
        return None, f"{path}: telemetry.gpu_utilization = {value!r} is not one of {', '.join(MODES)}"
    return value, path


def enable_accounting(nv: ModuleType, wanted: tuple[int, ...] | None) -> list[str]:
    """Switch accounting mode on for the wanted GPUs (the prolog, root); one log line per GPU where it is not on
    afterwards or may not stay on (persistence mode off)."""
    notes: list[str] = []
    for g, h in job_handles(nv, wanted):
        try:
            if nv.nvmlDeviceGetAccountingMode(h) != nv.NVML_FEATURE_ENABLED:
                nv.nvmlDeviceSetAccountingMode(h, nv.NVML_FEATURE_ENABLED)
        except nv.NVMLError as e:
            why = "not supported" if is_not_supported(nv, e) else str(e)
            notes.append(f"GPU {g}: accounting mode not switched on ({why}); its utilisation will be unknown")
            continue
        try:
            if nv.nvmlDeviceGetPersistenceMode(h) != nv.NVML_FEATURE_ENABLED:
                notes.append(f"GPU {g}: persistence mode off: accounting mode lasts only while the driver stays "
                             "loaded (run nvidia-persistenced)")
        except nv.NVMLError:
            pass
    return notes


def read_accounting(nv: ModuleType, wanted: tuple[int, ...] | None, start: float | None) -> list[dict]:
    """Per wanted GPU: the job's processes (those started since the run's start, less 5 s) and the peak of their
    utilisation and memory (0 when none of the job's processes used the GPU); `why` says when accounting mode was
    off or unreadable (values None)."""
    out = []
    for g, h in job_handles(nv, wanted):
        row = {"gpu": g, "processes": None, "gpu_util_pct": None, "mem_util_pct": None, "max_memory_bytes": None,
               "why": None}
        out.append(row)
        try:
            if nv.nvmlDeviceGetAccountingMode(h) != nv.NVML_FEATURE_ENABLED:
                row["why"] = "accounting mode off at the run's end"
                continue
            pids = nv.nvmlDeviceGetAccountingPids(h)
        except nv.NVMLError as e:
            row["why"] = "accounting not supported" if is_not_supported(nv, e) else f"NVML: {e}"
            continue
        stats = []
        for pid in pids:
            try:
                s = nv.nvmlDeviceGetAccountingStats(h, pid)
            except nv.NVMLError:
                continue
            if start is not None and s.startTime / 1e6 < start - 5:
                continue  # an earlier job's process on this GPU
            stats.append(s)
        # accounting on and no process of the job on the GPU: it sat idle (0 %), a measurement, not unknown
        row["processes"] = len(stats)
        row["gpu_util_pct"] = max((s.gpuUtilization for s in stats), default=0)
        row["mem_util_pct"] = max((s.memoryUtilization for s in stats), default=0)
        row["max_memory_bytes"] = max((s.maxMemoryUsage for s in stats), default=0)
    return out
