"""One NVML session for a hook: pynvml imported only here, only when a check needs the GPUs, initialised once.

Why one session: `nvmlInit` is the costly part of every NVML read (hundreds of milliseconds on an 8-GPU node
without persistence mode), and the prolog reads both GPU health and link state between one `open_nvml()` and
its `close_nvml()`.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing and types cost the prolog start-up time
if TYPE_CHECKING:
    from types import ModuleType

NVIDIACTL = "/dev/nvidiactl"
#: the open session (module, users): a hook's steps that each open NVML share one init (the prolog holds a session
#: for its telemetry while the health check opens and closes its own)
_session: list = [None, 0]


class NvmlUnavailable(Exception):
    """No NVML here (library or driver missing): not a GPU fault, the check is skipped."""


def open_nvml(device: str | None = None) -> ModuleType:
    """The initialised pynvml module; raises NvmlUnavailable naming why there is none. Close with `close_nvml`.
    `device`: the driver's control file that must exist first (default NVIDIACTL). While a session is open in
    this process, the same module is handed out again without a second init."""
    if _session[1]:
        _session[1] += 1
        return _session[0]
    device = device or NVIDIACTL
    if not os.path.exists(device):  # no NVIDIA driver here: skip pynvml's costly import
        raise NvmlUnavailable(f"no NVIDIA driver ({device} absent)")
    try:
        import pynvml
    except Exception as e:
        raise NvmlUnavailable(f"pynvml not importable ({type(e).__name__})") from None
    try:
        pynvml.nvmlInit()
    except Exception as e:
        raise NvmlUnavailable(f"NVML init failed: {e}") from None
    _session[0], _session[1] = pynvml, 1
    return pynvml


def close_nvml(nv: ModuleType) -> None:
    """Hand a session back; NVML is shut down when its last user closes it."""
    if _session[1] > 1 and nv is _session[0]:
        _session[1] -= 1
        return
    _session[0], _session[1] = None, 0
    try:
        nv.nvmlShutdown()
    except Exception:
        pass


def job_handles(nv: ModuleType, wanted: tuple[int, ...] | None):
    """(Slurm's GPU index = the device minor, handle) of the wanted GPUs (None: all); GPUs NVML cannot name are
    left out (the health check reports those)."""
    for i in range(nv.nvmlDeviceGetCount()):
        try:
            h = nv.nvmlDeviceGetHandleByIndex(i)
            minor = nv.nvmlDeviceGetMinorNumber(h)
        except nv.NVMLError:
            continue
        if wanted is None or minor in wanted:
            yield minor, h


def order_why(index: int, minor: int) -> str:
    """Why Slurm's GRES indices (SLURM_JOB_GPUS) name no GPU for sure on a node where NVML's GPU `index` is
    /dev/nvidia`minor`: slurmd numbers a node's GPUs in gres.conf's File= order, or under AutoDetect in NVML's
    (PCI bus) order (25.11 gres_gpu.c `_sort_gpu_by_links_order`; gres.conf(5): the minor number "is not
    necessarily the same as the device number/index"). The hooks match them by minor, which is both orders only
    where every GPU's minor is its NVML index."""
    return (f"NVML's GPU {index} is /dev/nvidia{minor}: slurmd numbers GPUs in PCI order under AutoDetect and in "
            "gres.conf's File= order otherwise, so which GPUs SLURM_JOB_GPUS names is not known here")


def index_order_trouble(nv: ModuleType) -> str:
    """`order_why` for the first GPU whose device minor is not its NVML index, "" when there is none (GPUs NVML
    cannot name are left to the health check)."""
    for i in range(nv.nvmlDeviceGetCount()):
        try:
            minor = nv.nvmlDeviceGetMinorNumber(nv.nvmlDeviceGetHandleByIndex(i))
        except nv.NVMLError:
            continue
        if minor != i:
            return order_why(i, minor)
    return ""


def is_lost(nv: ModuleType, e: BaseException) -> bool:
    """Whether an NVML error says the GPU fell off the bus (NVML_ERROR_GPU_IS_LOST)."""
    code = getattr(nv, "NVML_ERROR_GPU_IS_LOST", None)
    return (code is not None and getattr(e, "value", None) == code) or "lost" in str(e).lower()


def is_not_supported(nv: ModuleType, e: BaseException) -> bool:
    code = getattr(nv, "NVML_ERROR_NOT_SUPPORTED", None)
    return code is not None and getattr(e, "value", None) == code
