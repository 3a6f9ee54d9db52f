"""Provider: what NVML reports about a node's GPUs, recorded once as a JSON capture, built into the graph anywhere.

`capture()` is the only I/O (it talks to the driver through nvidia-ml-py); everything else reads the capture,
so discovery runs once per node type and the cluster graph can be built on a laptop.

NVSwitch boards: NVML gives, per NVLink, the PCI id of the far end. On NVSwitch systems every link of every GPU
ends at a switch, and drivers report either the switch's id or one dummy id shared by all links, never the peer
GPU. Reading those ids as GPU peers would give a wrong (empty or fully wrong) mesh, so a link counts as
GPU-to-GPU only when its far end is another captured GPU; links whose far end is a switch (by device type, or by
being shared by several GPUs) become NVSwitch links.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass, field
from typing import Any

from slurmtools.errors import ParseError

FORMAT = "slurmtools.nvml-capture/2"
# /1 stored nvmlDeviceGetNumaNodeId as `numa`: that is the NUMA node of the GPU's own memory (Grace Hopper and the
# like; "GPU NUMA ID" in nvidia-smi), not the node of the CPUs near the GPU. A /1 file is read with it moved to
# `gpu_numa_id` and the CPU-side node unknown.
FORMAT_V1 = "slurmtools.nvml-capture/1"
# nvmlDeviceGetTopologyCommonAncestor levels, named like the nvidia-smi classes they print as
ANCESTOR = {0: "internal", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
REMOTE_TYPE = {0: "gpu", 1: "npu", 2: "switch", 0xFF: "unknown"}


@dataclass(frozen=True)
class NvLinkEnd:
    """One active NVLink of a GPU and what is at its far end."""

    link: int
    remote_pci: str
    remote_type: str = "unknown"   # gpu | switch | npu | unknown (older drivers cannot tell)
    version: int | None = None


@dataclass(frozen=True)
class GpuRecord:
    index: int
    name: str
    uuid: str
    pci_bus_id: str
    memory_mb: int
    minor: int | None = None
    cpu_affinity: tuple[int, ...] = ()
    numa: int | None = None            # the CPU-side NUMA node (nvidia-smi's NUMA Affinity, when one node)
    nvlinks: tuple[NvLinkEnd, ...] = ()
    fabric_cluster_uuid: str | None = None
    fabric_clique_id: int | None = None
    gpu_numa_id: int | None = None     # the GPU memory's own NUMA node, on platforms where GPUs are NUMA nodes


@dataclass(frozen=True)
class NvmlCapture:
    """One node as NVML saw it. `ancestor[i][j]` is the PCIe class between GPU i and j ("X" on the diagonal)."""

    hostname: str
    driver: str
    gpus: tuple[GpuRecord, ...]
    ancestor: tuple[tuple[str, ...], ...]
    format: str = FORMAT
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        """Plain JSON types (lists, not tuples), so the dict equals what json.load gives back."""
        return json.loads(json.dumps(asdict(self)))

    @classmethod
    def from_dict(cls, data: Any, source: str = "<capture>") -> "NvmlCapture":
        """Rebuild a capture from its JSON form. Raises ParseError naming the key that is wrong."""
        def need(d: Any, key: str, typ, where: str):
            if not isinstance(d, dict) or key not in d:
                raise ParseError(source, None, f"{where}{key}: missing")
            v = d[key]
            if typ is not None and not isinstance(v, typ):
                raise ParseError(source, None, f"{where}{key}: expected {typ.__name__ if isinstance(typ, type) else typ}"
                                               f", found {type(v).__name__}")
            return v

        fmt = need(data, "format", str, "")
        if fmt not in (FORMAT, FORMAT_V1):
            raise ParseError(source, None, f"format: expected {FORMAT!r}, found {fmt!r}")
        gpus = []
        for i, g in enumerate(need(data, "gpus", list, "")):
            w = f"gpus[{i}]."
            links = tuple(NvLinkEnd(need(ln, "link", int, f"{w}nvlinks[{k}]."),
                                    need(ln, "remote_pci", str, f"{w}nvlinks[{k}]."),
                                    ln.get("remote_type", "unknown"), ln.get("version"))
                          for k, ln in enumerate(need(g, "nvlinks", list, w)))
            gpus.append(GpuRecord(need(g, "index", int, w), need(g, "name", str, w), need(g, "uuid", str, w),
                                  need(g, "pci_bus_id", str, w), need(g, "memory_mb", int, w), g.get("minor"),
                                  tuple(g.get("cpu_affinity") or ()), None if fmt == FORMAT_V1 else g.get("numa"),
                                  links, g.get("fabric_cluster_uuid"), g.get("fabric_clique_id"),
                                  g.get("numa") if fmt == FORMAT_V1 else g.get("gpu_numa_id")))
        anc = need(data, "ancestor", list, "")
        if len(anc) != len(gpus) or any(not isinstance(r, list) or len(r) != len(gpus) for r in anc):
            raise ParseError(source, None, f"ancestor: expected a {len(gpus)}x{len(gpus)} matrix")
        return cls(need(data, "hostname", str, ""), need(data, "driver", str, ""), tuple(gpus),
                   tuple(tuple(r) for r in anc), FORMAT, tuple(data.get("notes") or ()))


# -------------------------------------------------------------------------------------------- capture (I/O)

def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _bits(mask, width: int = 64) -> tuple[int, ...]:
    return tuple(w * width + b for w, word in enumerate(mask) for b in range(width) if int(word) >> b & 1)


def capture(hostname: str | None = None) -> NvmlCapture:
    """Ask NVML about every GPU of this node. Features an older driver lacks (NUMA id, remote device type,
    fabric info) are left empty and named in `notes`, never guessed."""
    import pynvml as nv

    notes: list[str] = []
    nv.nvmlInit()
    try:
        driver = _text(nv.nvmlSystemGetDriverVersion())
        count = nv.nvmlDeviceGetCount()
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        words = max(16, ((os.cpu_count() or 64) + 63) // 64)   # room for 1024 CPUs at least
        max_links = getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)
        gpus = []
        for i, h in enumerate(handles):
            def opt(fn_name: str, *args, _h=h):
                fn = getattr(nv, fn_name, None)
                if fn is None:
                    return None
                try:
                    return fn(_h, *args)
                except nv.NVMLError:
                    return None

            links = []
            for k in range(max_links):
                try:
                    if nv.nvmlDeviceGetNvLinkState(h, k) != nv.NVML_FEATURE_ENABLED:
                        continue
                except nv.NVMLError:
                    continue  # link not present on this GPU
                remote = _text(nv.nvmlDeviceGetNvLinkRemotePciInfo(h, k).busId)
                rtype = opt("nvmlDeviceGetNvLinkRemoteDeviceType", k)
                links.append(NvLinkEnd(k, remote, REMOTE_TYPE.get(rtype, "unknown") if rtype is not None
                                       else "unknown", opt("nvmlDeviceGetNvLinkVersion", k)))
            gpu_numa = opt("nvmlDeviceGetNumaNodeId")
            nodes = opt("nvmlDeviceGetMemoryAffinity", 4, getattr(nv, "NVML_AFFINITY_SCOPE_NODE", 0))
            nodes = _bits(nodes) if nodes is not None else ()
            numa = nodes[0] if len(nodes) == 1 else None
            if len(nodes) > 1:
                notes.append(f"GPU {i}: memory affinity spans NUMA nodes {list(nodes)}; its CPU-side node unknown")
            mask = opt("nvmlDeviceGetCpuAffinity", words)
            cluster, clique = _fabric(nv, h)
            gpus.append(GpuRecord(i, _text(nv.nvmlDeviceGetName(h)), _text(nv.nvmlDeviceGetUUID(h)),
                                  _text(nv.nvmlDeviceGetPciInfo(h).busId),
                                  int(nv.nvmlDeviceGetMemoryInfo(h).total) // (1024 * 1024),
                                  opt("nvmlDeviceGetMinorNumber"), _bits(mask) if mask is not None else (),
                                  numa, tuple(links), cluster, clique, gpu_numa))
        if gpus and all(g.numa is None for g in gpus):
            notes.append("driver reports no NUMA memory affinity (nvmlDeviceGetMemoryAffinity)")
        if any(ln.remote_type == "unknown" for g in gpus for ln in g.nvlinks):
            notes.append("driver does not report NVLink remote device types; switches recognised by shared ids")
        anc = []
        for a in range(count):
            row = []
            for b in range(count):
                if a == b:
                    row.append("X")
                    continue
                try:
                    row.append(ANCESTOR.get(nv.nvmlDeviceGetTopologyCommonAncestor(handles[a], handles[b]), "SYS"))
                except nv.NVMLError:
                    row.append("unknown")
            anc.append(tuple(row))
    finally:
        nv.nvmlShutdown()
    return NvmlCapture(hostname or socket.gethostname().split(".")[0], driver, tuple(gpus), tuple(anc),
                       FORMAT, tuple(notes))


def _fabric(nv, h) -> tuple[str | None, int | None]:
    """GPU fabric cluster UUID and clique id (multi-node NVLink, driver R550+); (None, None) where absent."""
    import ctypes

    struct = getattr(nv, "c_nvmlGpuFabricInfo_t", None)
    fn = getattr(nv, "nvmlDeviceGetGpuFabricInfo", None)
    if struct is None or fn is None:
        return None, None
    info = struct()
    try:
        fn(h, ctypes.byref(info))
    except Exception:  # NVMLError_NotSupported on boards without a fabric manager, or an old driver
        return None, None
    # read the 16 raw bytes: a c_char array field would stop at the first zero byte
    raw = ctypes.string_at(ctypes.addressof(info) + type(info).clusterUuid.offset, 16)
    if not any(raw):
        return None, None
    hexs = raw.hex()
    uuid = f"{hexs[:8]}-{hexs[8:12]}-{hexs[12:16]}-{hexs[16:20]}-{hexs[20:32]}"
    return uuid, int(info.cliqueId)


# ----------------------------------------------------------------------------------------------- decisions

def _pci_key(bus_id: str) -> tuple[int, int, int, int] | None:
    """'00000000:07:00.0' and '0000:07:00.0' are the same device."""
    try:
        dom, bus, rest = bus_id.strip().lower().split(":")
        dev, fn = rest.split(".")
        return int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)
    except ValueError:
        return None


@dataclass(frozen=True)
class NvlinkLayout:
    """How a capture's NVLinks connect: GPU pairs with their link counts, and links into NVSwitches."""

    peers: dict[tuple[int, int], int]          # (gpu a < gpu b) -> links
    switch_links: dict[tuple[int, int], int]   # (gpu, switch number) -> links
    switches: tuple[str, ...]                  # far-end ids read as NVSwitches
    unknown: tuple[tuple[int, int, str], ...]  # (gpu, link, remote id) not resolved

    @property
    def nvswitch_board(self) -> bool:
        return bool(self.switches)


def nvlink_layout(cap: NvmlCapture) -> NvlinkLayout:
    gpu_at = {_pci_key(g.pci_bus_id): g.index for g in cap.gpus}
    seen_by: dict[tuple, set[int]] = {}
    for g in cap.gpus:
        for ln in g.nvlinks:
            seen_by.setdefault(_pci_key(ln.remote_pci), set()).add(g.index)
    peers: dict[tuple[int, int], int] = {}
    to_switch: dict[tuple[int, str], int] = {}
    unknown = []
    for g in cap.gpus:
        for ln in g.nvlinks:
            key = _pci_key(ln.remote_pci)
            other = gpu_at.get(key)
            if ln.remote_type == "switch" or (ln.remote_type == "unknown" and other is None
                                              and len(seen_by.get(key, ())) > 1):
                to_switch[(g.index, ln.remote_pci.lower())] = to_switch.get((g.index, ln.remote_pci.lower()), 0) + 1
            elif other is not None and other != g.index and ln.remote_type in ("gpu", "unknown"):
                pair = (min(g.index, other), max(g.index, other))
                peers[pair] = peers.get(pair, 0) + 1
            else:
                unknown.append((g.index, ln.link, ln.remote_pci))
    # each GPU-GPU link was seen from both ends
    peers = {p: (n + 1) // 2 for p, n in peers.items()}
    switches = tuple(sorted({s for _, s in to_switch}, key=lambda s: _pci_key(s) or (0, 0, 0, 0)))
    return NvlinkLayout(peers, {(g, switches.index(s)): n for (g, s), n in to_switch.items()}, switches,
                        tuple(unknown))


# nvmlDeviceGetNvLinkVersion's values (NVML_NVLINK_VERSION_*) -> NVLink generation
NVML_NVLINK_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}


def nvlink_gbytes_per_link(cap: NvmlCapture) -> float | None:
    """Per-link GB/s from the links' NVML version, else from the GPU model; None when neither says."""
    from slurmtools.topology import gpu_models

    versions = {ln.version for g in cap.gpus for ln in g.nvlinks if ln.version}
    gens = {NVML_NVLINK_GENERATION.get(v) for v in versions}
    if len(gens) == 1 and None not in gens:
        gen = gpu_models.NVLINK.get(gens.pop())
        if gen:
            return gen.gbytes_per_link
    names = {g.name for g in cap.gpus}
    gen = gpu_models.nvlink_generation(names.pop()) if len(names) == 1 else None
    return gen.gbytes_per_link if gen else None


def add_to(topology, cap: NvmlCapture, host: str | None = None, gpu_type: str | None = None,
           threads_per_core: int | None = None) -> str:
    """Add the captured node: NUMA nodes with their CPUs, PCIe switches from the common-ancestor classes, GPUs,
    NVLinks (mesh edges, or edges into NVSwitch vertices), and the NVLink domain: the GPU fabric clique when
    the driver reports one (it spans hosts), else one per NVSwitch board. Returns the host vertex id."""
    from slurmtools.topology import gpu_models
    from slurmtools.topology.cpu_layout import fill_cores
    from slurmtools.topology.graph import Member

    host = host or cap.hostname
    hid = topology.add_host(host) if f"host:{host}" not in topology else f"host:{host}"
    # a GPU's CPU group: its NUMA node where the driver reports it, else its CPU set (NUMA id unknown)
    key_of: dict[int, tuple] = {}
    for g in cap.gpus:
        if g.numa is not None:
            key_of[g.index] = ("numa", g.numa)
        elif g.cpu_affinity:
            key_of[g.index] = ("cpus", g.cpu_affinity)
    cpus: dict[tuple, set[int]] = {}
    for g in cap.gpus:
        if g.index in key_of:
            cpus.setdefault(key_of[g.index], set()).update(g.cpu_affinity)
    cpu_vid: dict[tuple, str] = {}
    for n, k in enumerate(sorted(cpus, key=lambda k: (k[0] != "numa", min(cpus[k], default=0)))):
        numa = k[1] if k[0] == "numa" else None
        cpu_vid[k] = topology.add_cpu(host, numa, cpus=sorted(cpus[k]), tag="" if numa is not None else f"?{n}")
    if any(k[0] != "numa" for k in cpu_vid) or len(key_of) < len(cap.gpus):
        topology.mark_unknown(host, "numa_ids")
    ks = list(cpu_vid.values())
    for i, a in enumerate(ks):
        for b in ks[i + 1:]:
            topology.link_smp(a, b)
    # PCIe: GPUs joined by PIX share a switch; PXB groups share a switch tree (one vertex for its top)
    parent = {g.index: cpu_vid.get(key_of.get(g.index)) for g in cap.gpus}
    n = len(cap.gpus)
    n_sw = 0
    for cls in ("PXB", "PIX"):
        seen: set[int] = set()
        for a in range(n):
            if a in seen:
                continue
            group = [a] + [b for b in range(n) if b != a and cap.ancestor[a][b] in
                           (("PIX", "PXB") if cls == "PXB" else ("PIX",))]
            if len(group) < 2 or (cls == "PXB" and all(cap.ancestor[x][y] == "PIX" for x in group
                                                        for y in group if x != y)):
                continue
            seen.update(group)
            sw = topology.add_pcie_switch(host, n_sw, parent=parent[a])
            n_sw += 1
            for b in group:
                parent[cap.gpus[b].index] = sw
    gpu_vid = {}
    for g in cap.gpus:
        gpu_vid[g.index] = topology.add_gpu(host, g.index, name=g.name, uuid=g.uuid, pci_bus_id=g.pci_bus_id,
                                            memory_mb=g.memory_mb, gpu_type=gpu_type or gpu_models.slurm_type(g.name),
                                            parent=parent[g.index])
    lay = nvlink_layout(cap)
    nvlink_gbytes = nvlink_gbytes_per_link(cap)
    if (lay.peers or lay.switch_links) and nvlink_gbytes is None:
        topology.mark_unknown(host, "nvlink_speed")
    topology.mark_unknown(host, "nics")   # NVML sees GPUs only
    for (a, b), links in lay.peers.items():
        topology.link_nvlink(gpu_vid[a], gpu_vid[b], links, nvlink_gbytes)
    nvs = [topology.add_nvswitch(host, k) for k in range(len(lay.switches))]
    for (g, k), links in lay.switch_links.items():
        topology.link_nvlink(gpu_vid[g], nvs[k], links, nvlink_gbytes)
    cliques = {(g.fabric_cluster_uuid, g.fabric_clique_id) for g in cap.gpus if g.fabric_cluster_uuid}
    for cluster, clique in sorted(cliques, key=str):
        name = f"{cluster}:{clique}"
        dvid = f"nvdomain:{name}"
        if dvid not in topology:
            topology.add_nvlink_domain(name, clique_id=clique, cluster_uuid=cluster)
        for g in cap.gpus:
            if (g.fabric_cluster_uuid, g.fabric_clique_id) == (cluster, clique):
                topology.link(gpu_vid[g.index], dvid, Member())
    if not cliques and lay.nvswitch_board:
        topology.add_nvlink_domain(host, list(gpu_vid.values()))
    fill_cores(topology, host, threads_per_core)
    return hid


def to_topology(cap: NvmlCapture, host: str | None = None, gpu_type: str | None = None,
                threads_per_core: int | None = None):
    from slurmtools.topology.graph import Topology

    t = Topology(host or cap.hostname)
    add_to(t, cap, host, gpu_type, threads_per_core)
    return t
