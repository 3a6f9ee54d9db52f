"""Topology drift as node health: what a node's links report now against what the declared graph says.

Pure: `compare(expected, observed)` turns the host's expectations (`hooks.expectations`) and the observed facts
(`hooks.links`, gathered by `hooks.nodecheck`) into
- faults: one-line reasons that name the GPU, link or HCA, for draining the node (a link below what the graph
  declares, or below what the link itself can do);
- not_checked: every fact that could not be compared, and why (the graph does not state it, NVML or sysfs did
  not say, the time budget ran out). Nothing is ever compared with a default;
- notes: a node that has MORE than declared (the graph is out of date): logged, never a reason to drain.

PCIe generation: GPUs slow their link down when idle to save power (Gen1 at P8 is normal), so the current
generation is compared with the maximum only when the GPU reports full speed (performance state P0); the
maximum the link can do is compared with the declared generation at any time. Width does not change with load.
"""

from __future__ import annotations

from slurmtools.hooks.expectations import IB_SPEEDS

TYPE_CHECKING = False  # typing costs the prolog start-up time
if TYPE_CHECKING:
    from slurmtools.hooks.expectations import HcaExpect, HostExpectations
    from slurmtools.hooks.links import GpuLinks, HcaPort

SPEED_ORDER = IB_SPEEDS  # slowest first: a faster one than declared is a note, a slower one a fault
RATE_SLACK = 0.95  # sysfs gives signalling rate (56 Gb/s FDR), graphs data rate (54.5): only a real drop counts


class Observed:
    """What the node reported. None where a source was not read, with the reason in the matching *_why."""

    __slots__ = ("gpu_count", "gpus", "gpus_why", "skipped", "budget_s", "hcas", "hcas_why", "ib_class",
                 "ib_class_absent", "hca_names")

    def __init__(self, gpu_count: int | None = None, gpus: dict[int, GpuLinks] | None = None, gpus_why: str = "",
                 skipped: list[int] | None = None, budget_s: float | None = None,
                 hcas: dict[str, list[HcaPort]] | None = None, hcas_why: str = "",
                 ib_class: str = "/sys/class/infiniband", ib_class_absent: bool = False,
                 hca_names: list[str] | None = None):
        self.gpu_count = gpu_count        # NVML device count
        self.gpus = gpus                  # NVML index -> links
        self.gpus_why = gpus_why
        self.skipped = skipped or []      # GPUs not read: the time budget ran out
        self.budget_s = budget_s
        self.hcas = hcas                  # HCA name -> ports (HCAs not found left out)
        self.hcas_why = hcas_why
        self.ib_class = ib_class          # the folder read, for messages
        self.ib_class_absent = ib_class_absent  # no RDMA device at all: every declared HCA is missing
        self.hca_names = hca_names        # every RDMA device the node has (None: not listed)


class DriftReport:
    __slots__ = ("faults", "not_checked", "notes", "compared")

    def __init__(self) -> None:
        self.faults: list[str] = []
        self.not_checked: list[str] = []
        self.notes: list[str] = []
        self.compared = 0

    def summary(self) -> str:
        """One log line: how much was compared, what is wrong, what the graph has more of, what was not checked."""
        parts = [f"{self.compared} facts compared"]
        for title, items in (("FAULTS", self.faults), ("notes", self.notes), ("not checked", self.not_checked)):
            if items:
                parts.append(f"{title}: " + "; ".join(items))
        return " | ".join(parts)


def compare(exp: HostExpectations, obs: Observed) -> DriftReport:
    r = DriftReport()
    _gpu_count(exp, obs, r)
    _gpus(exp, obs, r)
    _hcas(exp, obs, r)
    return r


# ----------------------------------------------------------------------------------------------------- GPUs

def _gpu_count(exp: HostExpectations, obs: Observed, r: DriftReport) -> None:
    if exp.gpus is None:
        r.not_checked.append("GPU count: the graph has no GPUs for this host")
    elif obs.gpu_count is None:
        r.not_checked.append(f"GPU count: {obs.gpus_why or 'not read'}")
    else:
        r.compared += 1
        if obs.gpu_count < exp.gpus:
            r.faults.append(f"NVML sees {obs.gpu_count} GPUs, {exp.gpus} declared")
        elif obs.gpu_count > exp.gpus:
            r.notes.append(f"NVML sees {obs.gpu_count} GPUs, the graph declares {exp.gpus}")


def _gpus(exp: HostExpectations, obs: Observed, r: DriftReport) -> None:
    if not exp.gpu:
        return
    if obs.gpus is None:
        r.not_checked.append(f"GPU links: {obs.gpus_why or 'not read'}")
        return
    no_nvlink_decl: list[int] = []
    no_pcie_decl: list[int] = []
    idle: dict[str, list[int]] = {}
    skipped = set(obs.skipped)
    for e in exp.gpu:
        if e.index in skipped:
            continue
        g = obs.gpus.get(e.index)
        if g is None:
            continue  # NVML sees fewer GPUs: the count says so
        if g.error:
            r.not_checked.append(f"GPU {e.index} links: {g.error}")
            continue
        if e.nvlinks is None:
            no_nvlink_decl.append(e.index)
        else:
            _nvlink(e.index, e.nvlinks, g, r)
        if e.pcie_gen is None and e.pcie_width is None:
            no_pcie_decl.append(e.index)
        _pcie(e.index, e.pcie_gen, e.pcie_width, g, r, idle)
    if skipped:
        budget = f" ({obs.budget_s:g} s)" if obs.budget_s is not None else ""
        r.not_checked.append(f"GPU {_ids(sorted(skipped))} links: not read, the time budget{budget} was spent")
    if no_nvlink_decl:
        r.not_checked.append(f"GPU {_ids(no_nvlink_decl)} NVLinks: not declared")
    if no_pcie_decl:
        r.not_checked.append(f"GPU {_ids(no_pcie_decl)} PCIe generation and width: not declared (current "
                             f"link compared with its maximum only)")
    for state, ids in idle.items():
        r.not_checked.append(f"GPU {_ids(ids)} current PCIe generation: idle ({state}), the link slows down "
                             f"to save power")


def _nvlink(i: int, declared: int, g: GpuLinks, r: DriftReport) -> None:
    if g.nvlinks_up is None:
        r.not_checked.append(f"GPU {i} NVLinks: {g.nvlink_note or 'NVML did not say'}")
        return
    r.compared += 1
    up = g.nvlinks_up
    if up < declared:
        extra = f" (down: {_ids(list(g.nvlinks_down))})" if g.nvlinks_down else \
            (f" ({g.nvlink_note})" if g.nvlink_note else "")
        r.faults.append(f"GPU {i} NVLink {up}/{declared} up{extra}")
    elif up > declared:
        r.notes.append(f"GPU {i} has {up} NVLinks up, the graph declares {declared}")


def _pcie(i: int, decl_gen: int | None, decl_width: int | None, g: GpuLinks, r: DriftReport,
          idle: dict[str, list[int]]) -> None:
    parts: list[str] = []
    cur_w, max_w, cur_g, max_g = g.pcie_width, g.pcie_max_width, g.pcie_gen, g.pcie_max_gen
    if cur_w is None or max_w is None:
        r.not_checked.append(f"GPU {i} PCIe width: NVML did not say")
    else:
        r.compared += 1
        if cur_w < max_w:
            parts.append(f"x{cur_w} of max x{max_w}")
        if decl_width is not None:
            r.compared += 1
            if min(cur_w, max_w) < decl_width:
                parts.append(f"x{min(cur_w, max_w)}, declared x{decl_width}")
            elif max_w > decl_width:
                r.notes.append(f"GPU {i} PCIe link x{max_w}, the graph declares x{decl_width}")
    if cur_g is None or max_g is None:
        r.not_checked.append(f"GPU {i} PCIe generation: NVML did not say")
    else:
        if g.pstate == 0:
            r.compared += 1
            if cur_g < max_g:
                parts.append(f"Gen{cur_g} of max Gen{max_g} at full speed")
        else:
            idle.setdefault(f"P{g.pstate}" if g.pstate is not None else "performance state unknown", []).append(i)
        if decl_gen is not None:
            r.compared += 1
            if max_g < decl_gen:
                parts.append(f"max Gen{max_g}, declared Gen{decl_gen}")
            elif max_g > decl_gen:
                r.notes.append(f"GPU {i} PCIe link up to Gen{max_g}, the graph declares Gen{decl_gen}")
    if parts:
        r.faults.append(f"GPU {i} PCIe " + ", ".join(parts))


# ----------------------------------------------------------------------------------------------------- HCAs

def _hcas(exp: HostExpectations, obs: Observed, r: DriftReport) -> None:
    if exp.hcas is None:
        r.not_checked.append("HCAs: the graph does not state which this host has")
        return
    if not exp.hcas:
        r.not_checked.append("HCAs: the graph has none for this host")
        return
    if obs.ib_class_absent:
        r.compared += 1
        r.faults.append(f"{len(exp.hcas)} declared HCAs missing ({obs.ib_class} absent)")
        return
    if obs.hcas is None:
        r.not_checked.append(f"HCAs: {obs.hcas_why or 'not read'}")
        return
    missing = [h.name for h in exp.hcas if not obs.hcas.get(h.name)]
    others = [n for n in obs.hca_names or () if n not in {h.name for h in exp.hcas}]
    if len(missing) == len(exp.hcas) and others:
        # not one declared name is here, but other devices are: the graph's source names HCAs differently
        # (an ibnetdiscover node description, a renamed device), which says nothing about their links
        r.not_checked.append(f"HCAs: none of {','.join(missing)} is on this node, which has {','.join(others)}: "
                             f"the graph names them differently")
        return
    r.compared += len(missing)
    if missing:
        r.faults.append(f"HCA {','.join(missing)} missing" if len(missing) == 1 else
                        f"HCAs {','.join(missing)} missing")
    no_rate: list[str] = []
    no_state: list[str] = []
    for h in exp.hcas:
        ports = obs.hcas.get(h.name)
        if ports:
            _hca(h, ports, r, no_rate, no_state)
    if no_state:
        r.not_checked.append(f"HCA {','.join(no_state)} link state: not declared as cabled to a switch")
    if no_rate:
        r.not_checked.append(f"HCA {','.join(no_rate)} rate, width and speed: not declared")


def _hca(h: HcaExpect, ports: list[HcaPort], r: DriftReport, no_rate: list[str], no_state: list[str]) -> None:
    active = [p for p in ports if p.active]
    if not active:
        p = ports[0]
        if h.cabled:
            r.compared += 1
            r.faults.append(f"HCA {h.name} port {p.port} {p.state or 'state unknown'}"
                            + (f" ({p.phys_state})" if p.phys_state else ""))
        else:
            no_state.append(h.name)
        return
    if h.cabled:
        r.compared += 1
    elif h.cabled is None:
        no_state.append(h.name)
    best = max(active, key=lambda p: p.gbps or 0.0)
    # width and speed are InfiniBand facts (sysfs makes some up for Ethernet ports): compared on IB ports only,
    # the port's own link layer deciding where the graph does not state it
    ib = best.link_layer == "InfiniBand" if h.link_layer is None else h.link_layer == "ib"
    if h.link_layer == "ib" and best.link_layer == "Ethernet":
        r.notes.append(f"HCA {h.name} is Ethernet, the graph declares InfiniBand")
        ib = False
    declared_speed = h.speed if ib else None
    declared_width = h.width if ib else None
    if h.rate_gbytes is None and declared_speed is None and declared_width is None:
        no_rate.append(h.name)
        return
    if best.gbps is None:
        r.not_checked.append(f"HCA {h.name} port {best.port} rate: unreadable ({best.rate!r})")
        return
    slower = faster = False
    if h.rate_gbytes is not None:
        r.compared += 1
        have = best.gbps / 8
        slower |= have < h.rate_gbytes * RATE_SLACK
        faster |= have > h.rate_gbytes / RATE_SLACK
    if declared_width is not None:
        r.compared += 1
        slower |= best.width < declared_width
        faster |= best.width > declared_width
    if declared_speed is not None:
        r.compared += 1
        have_rank = SPEED_ORDER.index(best.speed) if best.speed in SPEED_ORDER else -1
        want_rank = SPEED_ORDER.index(declared_speed)
        slower |= have_rank < want_rank
        faster |= have_rank > want_rank
    said = " ".join(_declared(h, ib))
    if slower:
        r.faults.append(f"HCA {h.name} port {best.port} at {best.rate}, declared {said}")
    elif faster:
        r.notes.append(f"HCA {h.name} port {best.port} at {best.rate}, the graph declares {said}")


def _declared(h: HcaExpect, ib: bool) -> list[str]:
    out = []
    if ib and h.width is not None and h.speed is not None:
        out.append(f"{h.width}X {h.speed}")
    elif ib and (h.width is not None or h.speed is not None):
        out.append(f"{h.width}X" if h.width is not None else str(h.speed))
    if h.rate_gbytes is not None:
        out.append(f"{h.rate_gbytes * 8:g} Gb/s")
    return out


def _ids(ids: list[int]) -> str:
    """[0, 1, 2, 3, 5] -> '0-3,5'."""
    out: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)
