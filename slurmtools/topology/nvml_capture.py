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

from slurmtools.errors import ParseError, unknown_key
from slurmtools.topology.cpu_layout import CPU_ID_LIMIT
from slurmtools.topology.pci import pci_key

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
        """Rebuild a capture from its JSON form. Every value is checked against what `capture()` writes, and a
        wrong one refused naming its key: read as it came, a list for a number, a string for a list of CPUs or an
        unknown PCIe class would pass into the graph as some other fact, or fail there with a traceback."""
        top = _Json(source)
        fmt = top.need(data, "", "format", str)
        if fmt not in (FORMAT, FORMAT_V1):
            raise ParseError(source, None, f"format: expected {FORMAT!r}, found {fmt!r}")
        top.keys(data, "", _CAPTURE_KEYS)
        gpu_keys = _GPU_KEYS_V1 if fmt == FORMAT_V1 else _GPU_KEYS
        gpus: list[GpuRecord] = []
        for i, g in enumerate(top.need(data, "", "gpus", list)):
            w = f"gpus[{i}]."
            top.keys(g, w, gpu_keys)
            links = []
            for k, ln in enumerate(top.need(g, w, "nvlinks", list)):
                at = f"{w}nvlinks[{k}]."
                top.keys(ln, at, _NVLINK_KEYS)
                links.append(NvLinkEnd(top.count(ln, at, "link"), top.pci(ln, at, "remote_pci"),
                                       top.word(ln, at, "remote_type", REMOTE_TYPE.values(), "unknown"),
                                       top.count(ln, at, "version", optional=True)))
            cpus = top.need(g, w, "cpu_affinity", list, optional=True) or []
            for k in range(len(cpus)):
                top.count(cpus, f"{w}cpu_affinity", k, below=CPU_ID_LIMIT)
            numa = top.count(g, w, "numa", optional=True)
            gpus.append(GpuRecord(top.count(g, w, "index"), top.need(g, w, "name", str), top.need(g, w, "uuid", str),
                                  top.pci(g, w, "pci_bus_id"), top.count(g, w, "memory_mb"),
                                  top.count(g, w, "minor", optional=True), tuple(cpus),
                                  None if fmt == FORMAT_V1 else numa, tuple(links),
                                  top.need(g, w, "fabric_cluster_uuid", str, optional=True),
                                  top.count(g, w, "fabric_clique_id", optional=True),
                                  numa if fmt == FORMAT_V1 else top.count(g, w, "gpu_numa_id", optional=True)))
        # a minor twice would be one device file for two GPUs in gres.conf (an absent minor is no claim)
        for what, key in (("index", lambda g: g.index), ("pci_bus_id", lambda g: pci_key(g.pci_bus_id)),
                          ("minor", lambda g: g.minor)):
            firsts: dict = {}
            for i, g in enumerate(gpus):
                if key(g) is None:
                    continue
                if key(g) in firsts:
                    raise ParseError(source, None, f"gpus[{i}].{what}: the same as gpus[{firsts[key(g)]}]'s")
                firsts[key(g)] = i
        anc = top.need(data, "", "ancestor", list)
        n = len(gpus)
        if len(anc) != n or any(not isinstance(r, list) or len(r) != n for r in anc):
            raise ParseError(source, None, f"ancestor: expected a {n}x{n} matrix")
        for a in range(n):
            for b in range(n):
                cell = anc[a][b]
                if (cell == "X") != (a == b) or cell not in _ANCESTOR_WORDS:
                    want = "X (the GPU itself)" if a == b else f"one of {', '.join(_ANCESTOR_WORDS[1:])}"
                    raise ParseError(source, None, f"ancestor[{a}][{b}]: expected {want}, found {_shown(cell)}")
                if cell != anc[b][a]:
                    raise ParseError(source, None, f"ancestor[{a}][{b}]: {cell}, but ancestor[{b}][{a}] is "
                                                   f"{_shown(anc[b][a])}: the matrix is not symmetric")
        notes = top.need(data, "", "notes", list, optional=True) or []
        for k, note in enumerate(notes):
            top.need(notes, "notes", k, str)
        hostname = top.need(data, "", "hostname", str)
        if not is_host_name(hostname):
            raise ParseError(source, None, f"hostname: expected a host name, found {_shown(hostname)}")
        return cls(hostname, top.need(data, "", "driver", str), tuple(gpus), tuple(tuple(r) for r in anc), FORMAT,
                   tuple(notes))


def parse_capture(text: str, source: str = "<capture>") -> NvmlCapture:
    """Read a capture file. Python's json also takes NaN and Infinity, and keeps the last of a key given twice;
    `capture()` writes neither, so both are refused rather than read as some value."""
    def constant(word: str):
        raise ParseError(source, None, f"{word} is not JSON (a capture holds only whole numbers)")

    def once(pairs: list[tuple[str, Any]]) -> dict:
        out: dict = {}
        for key, value in pairs:
            if key in out:
                raise ParseError(source, None, f"key {_shown(key)} given twice in one object")
            out[key] = value
        return out

    def whole(digits: str) -> int:
        if len(digits) > 100:   # int() refuses past 4300 digits with a ValueError json does not turn into its own
            raise ParseError(source, None, f"a number of {len(digits)} digits: no value of a capture has so many")
        return int(digits)

    try:
        data = json.loads(text, parse_constant=constant, object_pairs_hook=once, parse_int=whole)
    except json.JSONDecodeError as exc:
        raise ParseError(source, exc.lineno, f"not JSON: {exc.msg}", exc.colno) from None
    except RecursionError:
        raise ParseError(source, None, "not read: nested too deeply") from None
    return NvmlCapture.from_dict(data, source)


_CAPTURE_KEYS = ("format", "hostname", "driver", "gpus", "ancestor", "notes")
_GPU_KEYS = ("index", "name", "uuid", "pci_bus_id", "memory_mb", "minor", "cpu_affinity", "numa", "nvlinks",
             "fabric_cluster_uuid", "fabric_clique_id", "gpu_numa_id")
_GPU_KEYS_V1 = _GPU_KEYS[:-1]
_NVLINK_KEYS = ("link", "remote_pci", "remote_type", "version")
_ANCESTOR_WORDS = ("X", *ANCESTOR.values(), "unknown")   # what capture() writes: X on the diagonal


def _shown(value: Any) -> str:
    """A JSON value in a message: short, on one line."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


class _Json:
    """Checks of one capture's values; each refusal names the key's path (`gpus[3].nvlinks[2].link`)."""

    _SHAPES = {dict: "an object", list: "a list", str: "text", bool: "true or false", int: "a number",
               float: "a number", type(None): "null"}

    def __init__(self, source: str):
        self.source = source

    def fail(self, path: str, message: str):
        raise ParseError(self.source, None, f"{path}: {message}")

    def shape(self, value: Any) -> str:
        return self._SHAPES.get(type(value), type(value).__name__)

    def keys(self, d: Any, where: str, known: tuple[str, ...]) -> None:
        """`d` is an object whose keys are all among `known` (a typo would leave the real key unread)."""
        if not isinstance(d, dict):
            self.fail(where.rstrip(".") or "top level", f"expected an object, found {self.shape(d)}")
        for key in d:
            if key not in known:
                self.fail(f"{where}{key}", unknown_key(key, list(known)))

    def need(self, d: Any, where: str, key: str | int, kind: type, optional: bool = False):
        """d[key] of type `kind`: a key of an object, or a place in a list already checked; absent or null only
        where `optional` (None then)."""
        if isinstance(key, str):
            path = f"{where}{key}"
            if not isinstance(d, dict):
                self.fail(where.rstrip(".") or "top level", f"expected an object, found {self.shape(d)}")
            if key not in d:
                if optional:
                    return None
                self.fail(path, "missing")
        else:
            path = f"{where}[{key}]"
        v = d[key]
        if v is None and optional:
            return None
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            self.fail(path, f"expected {kind.__name__}, found {self.shape(v)}")
        return v

    def count(self, d: Any, where: str, key: str | int, optional: bool = False, below: int | None = None):
        """A whole number, 0 or more (and below `below`): ids, counts and sizes."""
        v = self.need(d, where, key, int, optional)
        if v is not None and (v < 0 or (below is not None and v >= below)):
            path = f"{where}{key}" if isinstance(key, str) else f"{where}[{key}]"
            limit = f" and below {below}" if below is not None else ""
            self.fail(path, f"expected int, 0 or more{limit}, found {v}")
        return v

    def pci(self, d: Any, where: str, key: str) -> str:
        """A PCI bus id such as 00000000:07:00.0, which NVML gives (GPUs are told apart and joined by it)."""
        v = self.need(d, where, key, str)
        if pci_key(v) is None:
            self.fail(f"{where}{key}", f"expected a PCI bus id like 00000000:07:00.0, found {_shown(v)}")
        return v

    def word(self, d: Any, where: str, key: str, words, default: str) -> str:
        v = self.need(d, where, key, str, optional=True)
        if v is None:
            return default
        if v not in words:
            self.fail(f"{where}{key}", f"expected one of {', '.join(words)}, found {_shown(v)}")
        return v


# -------------------------------------------------------------------------------------------- capture (I/O)

def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _bits(mask, width: int = 64) -> tuple[int, ...]:
    return tuple(w * width + b for w, word in enumerate(mask) for b in range(width) if int(word) >> b & 1)


def is_host_name(name: str) -> bool:
    """What a capture may name its host: one printable word (the reader refuses anything else, so `topo capture
    --hostname` must too, or it would write a capture no import reads)."""
    return bool(name) and name.isprintable() and not any(c.isspace() for c in name)


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
    gpu_at = {pci_key(g.pci_bus_id): g.index for g in cap.gpus}
    seen_by: dict[tuple, set[int]] = {}
    for g in cap.gpus:
        for ln in g.nvlinks:
            seen_by.setdefault(pci_key(ln.remote_pci), set()).add(g.index)
    peers: dict[tuple[int, int], int] = {}
    to_switch: dict[tuple[int, str], int] = {}
    unknown = []
    for g in cap.gpus:
        for ln in g.nvlinks:
            key = pci_key(ln.remote_pci)
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
    switches = tuple(sorted({s for _, s in to_switch}, key=lambda s: pci_key(s) or (0, 0, 0, 0)))
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
                                            parent=parent[g.index], minor=g.minor)
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
