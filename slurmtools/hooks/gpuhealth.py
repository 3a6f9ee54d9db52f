"""GPU health for the prolog: ECC, retired/pending pages, row remapping, and whether the GPUs are visible at all.

Two sources with one shape (`list[GpuStatus]`): NVML (pynvml, imported only here and only when a job has GPUs)
and, for the Slurm lab which has no GPUs, a fault file `slurmtools-fake-gpu-health.json` in the lab's etc folder.
The fake is honoured only when that file and every folder above it are owned by root and not writable by group
or others (see `safefs.open_secure_dir`), so no job user can make a node look sick or healthy.
`problems()` is pure: it turns statuses into one-line reasons that name the GPU.
"""

from __future__ import annotations

import os

from slurmtools.hooks import safefs

FAKE_NAME = "slurmtools-fake-gpu-health.json"


class NvmlUnavailable(Exception):
    """No NVML here (library or driver missing): not a GPU fault, the check is skipped."""


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
        """Slurm numbers a node's GPUs by device minor (/dev/nvidiaN); NVML's own order is by PCI bus."""
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


def from_nvml() -> list[GpuStatus]:
    if not os.path.exists("/dev/nvidiactl"):  # no NVIDIA driver here: skip pynvml's costly import
        raise NvmlUnavailable("no NVIDIA driver (/dev/nvidiactl absent)")
    try:
        import pynvml
    except Exception as e:
        raise NvmlUnavailable(f"pynvml not importable ({type(e).__name__})") from None
    try:
        pynvml.nvmlInit()
    except Exception as e:
        raise NvmlUnavailable(f"NVML init failed: {e}") from None
    try:
        n = pynvml.nvmlDeviceGetCount()
        return [_nvml_status(pynvml, i) for i in range(n)]
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _nvml_status(nv, i: int) -> GpuStatus:
    try:
        h = nv.nvmlDeviceGetHandleByIndex(i)
    except nv.NVMLError as e:
        return GpuStatus(index=i, lost="lost" in str(e).lower())

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
        retired_pages_pending=bool(pending), retired_pages_dbe=len(dbe) if dbe is not None else None,
        remap_pending=bool(remap and remap[2]), remap_failure=bool(remap and remap[3]),
    )


def fake_path() -> tuple[str, str] | None:
    """(etc folder, file name) of the lab's fault file when the lab wrapper named an etc folder."""
    etc = os.environ.get("SLURMTOOLS_LAB_ETC")
    return (etc, FAKE_NAME) if etc else None


def from_fake(etc: str, node: str | None) -> list[GpuStatus] | None:
    """Statuses from the root-owned lab fault file, or None when there is none (or it is not root's).

    Format: {"nodes": {"gpu03": {"count": 8, "faults": {"5": {"ecc_uncorrected": 2}}}}}; nodes not named get the
    default {"count": 8} healthy GPUs unless "default" says otherwise.
    """
    try:
        dfd = safefs.open_secure_dir(etc)
    except (safefs.UnsafePath, OSError):
        return None
    try:
        fd = os.open(FAKE_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
    except OSError:
        os.close(dfd)
        return None
    try:
        st = os.fstat(fd)
        import stat as _st
        if not _st.S_ISREG(st.st_mode) or st.st_uid not in (0, os.geteuid()) or st.st_mode & 0o022:
            return None
        import json

        doc = json.loads(os.read(fd, 1 << 20))
    finally:
        os.close(fd)
        os.close(dfd)
    spec = (doc.get("nodes") or {}).get(node or "", doc.get("default", {"count": 8}))
    faults = spec.get("faults") or {}
    out = []
    for i in range(int(spec.get("count", 8))):
        f = faults.get(str(i), {})
        out.append(GpuStatus(index=i, uuid=f"GPU-fake-{node}-{i}", minor=i,
                             ecc_uncorrected=int(f.get("ecc_uncorrected", 0)),
                             retired_pages_pending=bool(f.get("retired_pages_pending")),
                             remap_pending=bool(f.get("remap_pending")), remap_failure=bool(f.get("remap_failure")),
                             lost=bool(f.get("lost"))))
    return out


def statuses(node: str | None) -> tuple[list[GpuStatus], str]:
    """The GPUs of this node and where the answer came from ("lab-fake" or "nvml"); raises NvmlUnavailable."""
    fp = fake_path()
    if fp:
        fake = from_fake(fp[0], node)
        if fake is not None:
            return fake, "lab-fake"
    return from_nvml(), "nvml"
