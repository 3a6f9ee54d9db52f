"""GPU health for the prolog: ECC, retired/pending pages, row remapping, and whether the GPUs are visible at all.

Two sources with one shape (`list[GpuStatus]`): NVML (`read_statuses` over the session `hooks.nodecheck` opens
with `hooks.nvml`, pynvml imported only when a job has GPUs) and, for the Slurm lab which has no GPUs, the lab's
root-owned fault file (`from_fake_spec`, `hooks.labfake`). `problems()` is pure: it turns statuses into one-line
reasons that name the GPU.
"""

from __future__ import annotations

from slurmtools.hooks import labfake
from slurmtools.hooks.labfake import FAKE_NAME  # noqa: F401  (where the lab tests have always found it)
from slurmtools.hooks.nvml import is_lost, order_why

TYPE_CHECKING = False  # typing and types cost the prolog start-up time
if TYPE_CHECKING:
    from types import ModuleType


class GpuStatus:
    """One GPU's health facts (a plain class: dataclasses would cost the prolog start-up time)."""

    __slots__ = ("index", "uuid", "minor", "ecc_uncorrected", "retired_pages_pending", "retired_pages_dbe",
                 "remap_pending", "remap_failure", "lost")

    def __init__(self, index: int, uuid: str = "", minor: int | None = None, ecc_uncorrected: int | None = None,
                 retired_pages_pending: bool = False, retired_pages_dbe: int | None = None,
                 remap_pending: bool = False, remap_failure: bool = False, lost: bool = False):
        self.index = index
        self.uuid = uuid
        self.minor = minor
        self.ecc_uncorrected = ecc_uncorrected  # volatile (since driver load)
        self.retired_pages_pending = retired_pages_pending
        self.retired_pages_dbe = retired_pages_dbe
        self.remap_pending = remap_pending
        self.remap_failure = remap_failure
        self.lost = lost

    @property
    def slurm_index(self) -> int:
        """The GPU as the hooks match SLURM_JOB_GPUS: by device minor (/dev/nvidiaN), which is Slurm's GRES index
        where gres.conf lists File=/dev/nvidia0... in order; NVML's own order is by PCI bus, Slurm's under
        AutoDetect. Where the two differ on a node the match is not made (`order_trouble`)."""
        return self.minor if self.minor is not None else self.index

    def label(self) -> str:
        return f"GPU {self.slurm_index}" + (f" ({self.uuid})" if self.uuid else "")


def problems(statuses: list[GpuStatus], expected: tuple[int, ...] | None) -> list[str]:
    """Reasons to drain, one per fault; empty when healthy. `expected`: the job's GPU indices (SLURM_JOB_GPUS)."""
    out: list[str] = []
    seen = {s.slurm_index: s for s in statuses}
    if expected:
        missing = [i for i in expected if i not in seen]
        if missing:
            out.append(f"GPU {','.join(map(str, missing))} not visible (NVML sees {len(statuses)} GPUs)")
    check = [seen[i] for i in expected if i in seen] if expected else statuses
    for s in check:
        if s.lost:
            out.append(f"{s.label()} fell off the bus (NVML: GPU is lost)")
        if s.ecc_uncorrected:
            out.append(f"{s.label()} has {s.ecc_uncorrected} uncorrected ECC errors")
        if s.retired_pages_pending:
            out.append(f"{s.label()} has retired pages pending (reset needed)")
        if s.remap_failure:
            out.append(f"{s.label()} row remapping failed")
        elif s.remap_pending:
            out.append(f"{s.label()} has row remapping pending (reset needed)")
    return out


def order_trouble(statuses: list[GpuStatus]) -> str:
    """Why the job's GRES indices cannot be matched to these GPUs (`nvml.order_why`), or "": a GPU whose device
    minor is not its NVML index. The fake GPUs of the lab have none."""
    for s in statuses:
        if s.minor is not None and s.minor != s.index:
            return order_why(s.index, s.minor)
    return ""


def read_statuses(nv: ModuleType) -> list[GpuStatus]:
    """Every GPU's health through an initialised pynvml module `nv` (the real one, or a test's NVML-shaped fake)."""
    return [_nvml_status(nv, i) for i in range(nv.nvmlDeviceGetCount())]


def _nvml_status(nv: ModuleType, i: int) -> GpuStatus:
    try:
        h = nv.nvmlDeviceGetHandleByIndex(i)
    except nv.NVMLError as e:
        return GpuStatus(index=i, lost=is_lost(nv, e))

    def opt(fn, *a):
        try:
            return fn(h, *a)
        except nv.NVMLError:
            return None

    uuid = opt(nv.nvmlDeviceGetUUID) or ""
    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
    ecc = opt(nv.nvmlDeviceGetTotalEccErrors, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)
    pending = opt(nv.nvmlDeviceGetRetiredPagesPendingStatus)
    dbe = opt(nv.nvmlDeviceGetRetiredPages, nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
    remap = opt(nv.nvmlDeviceGetRemappedRows)  # (corrected, uncorrected, pending, failure) on A100 and later
    return GpuStatus(
        index=i, uuid=uuid, minor=opt(nv.nvmlDeviceGetMinorNumber), ecc_uncorrected=ecc,
        retired_pages_pending=bool(pending),
        retired_pages_dbe=len(dbe) if dbe is not None else None,
        remap_pending=bool(remap and remap[2]), remap_failure=bool(remap and remap[3]),
    )


def from_fake_spec(spec: dict, node: str | None) -> list[GpuStatus]:
    """Statuses from one node's part of the lab fault file (format in `hooks.labfake`)."""
    out = []
    for i in range(int(spec.get("count", 8))):
        f = labfake.gpu_faults(spec, i)
        out.append(GpuStatus(index=i, uuid=f"GPU-fake-{node}-{i}", minor=i,
                             ecc_uncorrected=int(f.get("ecc_uncorrected", 0)),
                             retired_pages_pending=bool(f.get("retired_pages_pending")),
                             remap_pending=bool(f.get("remap_pending")), remap_failure=bool(f.get("remap_failure")),
                             lost=bool(f.get("lost"))))
    return out

