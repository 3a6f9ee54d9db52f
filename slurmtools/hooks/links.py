"""What a node's links report now: NVLink and PCIe per GPU (NVML), rate and state per HCA port (sysfs).

The observed side of the topology drift check (`hooks.drift` compares it with the declared graph). Cheap reads
only, because the prolog runs them at every job start: NVML calls on an NVML session that the GPU health check
already opened, and a few small sysfs files. The GPU reads stop at a deadline; GPUs not read by then are
returned as skipped, never guessed. `root` lets tests point the sysfs reader at a folder of real-format files.
"""

from __future__ import annotations

import os
import time

from slurmtools.hooks.nvml import is_lost, is_not_supported

TYPE_CHECKING = False  # typing and types cost the prolog start-up time
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Collection

IB_CLASS = "sys/class/infiniband"
PSTATE_UNKNOWN = 32


class GpuLinks:
    """One GPU's links as NVML reports them; None where NVML did not say (a plain class: start-up time)."""

    __slots__ = ("index", "nvlinks_up", "nvlinks_down", "nvlink_note", "pcie_gen", "pcie_width", "pcie_max_gen",
                 "pcie_max_width", "pstate", "error")

    def __init__(self, index: int, nvlinks_up: int | None = None, nvlinks_down: tuple[int, ...] = (),
                 nvlink_note: str = "", pcie_gen: int | None = None, pcie_width: int | None = None,
                 pcie_max_gen: int | None = None, pcie_max_width: int | None = None, pstate: int | None = None,
                 error: str = ""):
        self.index = index
        self.nvlinks_up = nvlinks_up          # active NVLinks; None: not read
        self.nvlinks_down = nvlinks_down      # link numbers the GPU has but reports inactive
        self.nvlink_note = nvlink_note        # e.g. "NVML: Not Supported" (a GPU without NVLink)
        self.pcie_gen = pcie_gen              # current link generation (drops at idle to save power)
        self.pcie_width = pcie_width          # current link width (lanes)
        self.pcie_max_gen = pcie_max_gen      # what the link (GPU and slot together) can do
        self.pcie_max_width = pcie_max_width
        self.pstate = pstate                  # performance state: 0 is full speed, 8 and up idle
        self.error = error                    # why nothing could be read (e.g. the GPU is lost)


def read_gpu_links(nv: ModuleType, count: int, nvlink_for: Collection[int], until: float | None = None
                   ) -> tuple[dict[int, GpuLinks], list[int]]:
    """Links of GPUs 0..count-1 through an initialised pynvml `nv`; NVLink state only for GPUs in `nvlink_for`
    (those the graph declares NVLinks for). Stops before a GPU once time.monotonic() passes `until`: returns
    (what was read, indices skipped)."""
    out: dict[int, GpuLinks] = {}
    for i in range(count):
        if until is not None and time.monotonic() > until:
            return out, list(range(i, count))
        out[i] = _gpu_links(nv, i, i in nvlink_for)
    return out, []


def _gpu_links(nv: ModuleType, i: int, nvlink: bool) -> GpuLinks:
    try:
        h = nv.nvmlDeviceGetHandleByIndex(i)
    except nv.NVMLError as e:
        return GpuLinks(i, error="GPU is lost" if is_lost(nv, e) else f"NVML: {e}")

    def opt(fn_name: str):
        fn = getattr(nv, fn_name, None)
        if fn is None:
            return None
        try:
            return fn(h)
        except nv.NVMLError:
            return None

    g = GpuLinks(i, pcie_gen=opt("nvmlDeviceGetCurrPcieLinkGeneration"),
                 pcie_width=opt("nvmlDeviceGetCurrPcieLinkWidth"),
                 pcie_max_gen=opt("nvmlDeviceGetMaxPcieLinkGeneration"),
                 pcie_max_width=opt("nvmlDeviceGetMaxPcieLinkWidth"))
    ps = opt("nvmlDeviceGetPerformanceState")
    g.pstate = ps if ps is not None and ps != PSTATE_UNKNOWN else None
    if nvlink:
        _read_nvlinks(nv, h, g)
    return g


def _read_nvlinks(nv: ModuleType, h, g: GpuLinks) -> None:
    """Count active links. Link numbers the GPU does not have answer "Invalid Argument" and are skipped; a GPU
    without NVLink answers "Not Supported" (no link is up); any other error leaves the count unknown."""
    up = 0
    down: list[int] = []
    first_error = None
    for k in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            state = nv.nvmlDeviceGetNvLinkState(h, k)
        except nv.NVMLError as e:
            if is_lost(nv, e):
                g.error = "GPU is lost"
                return
            if is_not_supported(nv, e) and k == 0:
                g.nvlinks_up, g.nvlink_note = 0, f"NVML: {e}"
                return
            if first_error is None and getattr(e, "value", None) != getattr(nv, "NVML_ERROR_INVALID_ARGUMENT", -1):
                first_error = e
            continue
        if state == nv.NVML_FEATURE_ENABLED:
            up += 1
        else:
            down.append(k)
    if up or down:
        g.nvlinks_up, g.nvlinks_down = up, tuple(down)
    elif first_error is not None:
        g.nvlink_note = f"NVML: {first_error}"
    else:
        g.nvlinks_up = 0


def from_fake_spec(spec: dict, count: int) -> dict[int, GpuLinks] | None:
    """GPU links from the lab fault file's node spec (`hooks.labfake`); None when it states no links."""
    from slurmtools.hooks.labfake import gpu_faults

    base = spec.get("links")
    if not isinstance(base, dict):
        return None
    out = {}
    for i in range(count):
        f = {**base, **gpu_faults(spec, i)}
        n = f.get("nvlinks")
        up = f.get("nvlinks_up", n)
        out[i] = GpuLinks(i, nvlinks_up=up, nvlinks_down=tuple(range(up, n)) if n is not None and up is not None
                          else (), pcie_gen=f.get("pcie_gen"), pcie_width=f.get("pcie_width"),
                          pcie_max_gen=base.get("pcie_gen"), pcie_max_width=base.get("pcie_width"),
                          pstate=f.get("pstate"))
    return out


# ---------------------------------------------------------------------------------------------------- HCAs

class HcaPort:
    """One port of an HCA as sysfs shows it (`ports/<n>/state`, `phys_state`, `rate`, `link_layer`)."""

    __slots__ = ("port", "state", "phys_state", "rate", "gbps", "width", "speed", "link_layer")

    def __init__(self, port: int, state: str | None = None, phys_state: str | None = None, rate: str | None = None,
                 link_layer: str | None = None):
        self.port = port
        self.state = state                 # "ACTIVE", "DOWN", "INIT", ... (the words after "4: ")
        self.phys_state = phys_state       # "LinkUp", "Polling", "Disabled", ...
        self.rate = rate                   # the file's text, e.g. "400 Gb/sec (4X NDR)"
        self.link_layer = link_layer       # "InfiniBand" | "Ethernet"
        parsed = parse_rate(rate) if rate is not None else None
        self.gbps, self.width, self.speed = parsed if parsed else (None, None, None)

    @property
    def active(self) -> bool:
        return self.state == "ACTIVE"


def parse_rate(text: str) -> tuple[float, int, str] | None:
    """'400 Gb/sec (4X NDR)' -> (400.0, 4, 'NDR'); '2.5 Gb/sec (1X SDR)' -> (2.5, 1, 'SDR'); None if not that
    shape (the kernel writes "%d%s Gb/sec (%dX%s)", drivers/infiniband/core/sysfs.c rate_show)."""
    num, sep, rest = text.strip().partition(" Gb/sec")
    if not sep:
        return None
    try:
        gbps = float(num)
    except ValueError:
        return None
    rest = rest.strip()
    if not (rest.startswith("(") and rest.endswith(")")):
        return None
    width, x, speed = rest[1:-1].partition("X ")
    if not x or not width.isdigit() or not speed.isalnum():
        return None
    return gbps, int(width), speed


def _state_word(text: str | None) -> str | None:
    """'4: ACTIVE' -> 'ACTIVE'; '5: LinkUp' -> 'LinkUp'."""
    if text is None:
        return None
    return text.partition(":")[2].strip() or text.strip()


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(256).decode("ascii", "replace").strip()
    except OSError:
        return None


def hca_names(root: str = "/") -> list[str] | None:
    """Every RDMA device under `<root>/sys/class/infiniband`, None when that folder is absent (no driver)."""
    try:
        return sorted(os.listdir(os.path.join(root, IB_CLASS)))
    except OSError:
        return None


def read_hcas(names: Collection[str], root: str = "/") -> dict[str, list[HcaPort]] | None:
    """Ports of the HCAs named (missing ones are left out) under `<root>/sys/class/infiniband`; None when that
    folder is absent (no RDMA driver loaded)."""
    base = os.path.join(root, IB_CLASS)
    if not os.path.isdir(base):
        return None
    out: dict[str, list[HcaPort]] = {}
    for name in names:
        ports_dir = os.path.join(base, name, "ports")
        try:
            entries = sorted(int(p) for p in os.listdir(ports_dir) if p.isdigit())
        except OSError:
            continue
        ports = []
        for p in entries:
            d = os.path.join(ports_dir, str(p))
            ports.append(HcaPort(p, _state_word(_read(os.path.join(d, "state"))),
                                 _state_word(_read(os.path.join(d, "phys_state"))), _read(os.path.join(d, "rate")),
                                 _read(os.path.join(d, "link_layer"))))
        out[name] = ports
    return out
