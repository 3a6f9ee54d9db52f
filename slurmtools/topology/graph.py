"""The topology model: one typed graph from GPU to the top of the switch fabric.

Providers (nvidia-smi, NVML captures, ibnetdiscover, topology.conf, the site's fabric file) build a `Topology`
through the `add_*` / `link_*` methods below; renderers, checks and the planner only read it. Vertices and edges
carry frozen dataclasses, so every consumer sees the same typed fields, and ids are stable strings
(`host:gpu01`, `gpu:gpu01:3`, `nic:gpu01:mlx5_3`, `switch:leaf1`) so captures made on different machines join.

Pure: no I/O. The graph is an undirected `networkx.Graph`; parallel cables between two switches are one edge
with a `count`, which keeps 16k-host fabrics small.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar, Iterable, Iterator

import networkx as nx

from slurmtools.errors import ParseError
from slurmtools.gc_pause import gc_paused
from slurmtools.topology.links import IB_LANE_GBYTES, IbLink, ib_bundle, ib_link  # noqa: F401  (re-exported)
from slurmtools.topology.names import natural as _natural

FORMAT = "slurmtools.topology/1"

# PCIe lane rate in GB/s per direction after encoding, by generation.
PCIE_LANE_GBYTES = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


# Facts about a host's inside that a source may not state; `Host.unknown` lists the ones it did not.
UNKNOWN_FACTS = {
    "host_name": "the host's name (the input does not state it: named after the file; --host names it)",
    "nvlink": "which GPUs NVLink connects (the source lists no GPU links)",
    "nvlink_speed": "NVLink GB/s per link (no `nvidia-smi nvlink -s`, NVML reading or known GPU model, or a GPU's "
                    "links run at different rates: a degraded link?)",
    "gpu_model": "the GPU model (Slurm's gres Type=)",
    "local_cpus": "which CPUs are local to each GPU",
    "numa_ids": "which NUMA node ids the GPUs and NICs sit on",
    "cores": "Slurm core ids of the local CPUs (the thread layout is not stated)",
    "nic_link_layer": "whether each NIC is InfiniBand or Ethernet",
    "nic_names": "the NICs' device names (the file has no NIC legend: NIC0... are the matrix's labels)",
    "nics": "which network adapters the host has and where (the source sees GPUs only)",
    "nic_locality": "which GPUs and CPUs some NICs are near (an NCCL dump lists a NIC without a PCI device, such "
                    "as a socket NIC, under a CPU for its own search, not where it sits)",
    "devices": "which GPUs and NICs the host has beyond the file's (it lists PCI slots without devices, or NVLinks "
               "to GPUs it does not list)",
}

# Facts about the fabric as a whole that a source may not state; `Topology.fabric_unknown` lists the ones it did not.
FABRIC_UNKNOWN_FACTS = {
    "link_rates": "the cables' rates and counts (Slurm's topology files name neither: LinkSpeed= is a relative "
                  "weight), so the fabric's bandwidth and oversubscription are not known",
    "adapter_hosts": "which host some adapters belong to (their node descriptions name none; --hostname-pattern "
                     "reads them)",
}


# ---------------------------------------------------------------------------------------------- vertex kinds

@dataclass(frozen=True)
class Cluster:
    """The whole system; hosts are its members."""
    kind: ClassVar[str] = "cluster"
    name: str

    @property
    def vid(self) -> str:
        return f"cluster:{self.name}"


@dataclass(frozen=True)
class Switch:
    """An InfiniBand or Ethernet switch. `level` 0 is a leaf; None means "infer from the cabling".
    `link_speed` is Slurm's LinkSpeed= of the switch's links as a topology file gave it: a relative weight that
    Slurm's scheduler compares, not a rate (None: not given)."""
    kind: ClassVar[str] = "switch"
    name: str
    level: int | None = None
    guid: str | None = None
    description: str | None = None
    rack: str | None = None
    link_speed: int | None = None

    @property
    def vid(self) -> str:
        return f"switch:{self.name}"


@dataclass(frozen=True)
class Host:
    """A compute node, named as Slurm names it.

    `unknown` names the facts about its inside that the source did not state (see `UNKNOWN_FACTS`): a reader
    shows them as unknown and an export that needs one refuses, instead of writing a default as if measured."""
    kind: ClassVar[str] = "host"
    name: str
    node_type: str | None = None
    rack: str | None = None
    features: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()

    @property
    def vid(self) -> str:
        return f"host:{self.name}"


@dataclass(frozen=True)
class Cpu:
    """A NUMA node (with its socket): the CPUs a device's traffic is local to.

    `cpus` are logical CPU ids as the OS and NVML report them; `cores` are Slurm's core ids (gres.conf Cores=),
    empty when the source does not state the thread layout. `numa` is None when the source does not say which
    NUMA node this is: `nodes` then holds the NUMA ids it listed for the devices here (Grace Hopper GPUs list
    their CPU's node with CPU-less memory nodes, `0,5-11`). `tag`, when set, names the vertex instead of `numa`:
    for an unknown id, or for one NUMA node whose devices sit under two root complexes a SYS hop apart."""
    kind: ClassVar[str] = "cpu"
    host: str
    numa: int | None
    socket: int | None = None
    cpus: tuple[int, ...] = ()
    cores: tuple[int, ...] = ()
    nodes: tuple[int, ...] = ()
    tag: str = ""

    @property
    def vid(self) -> str:
        return f"cpu:{self.host}:{self.tag or self.numa}"

    @property
    def numa_ids(self) -> tuple[int, ...]:
        """The NUMA node ids the source gave for this CPU group (none: unknown)."""
        return (self.numa,) if self.numa is not None else self.nodes


@dataclass(frozen=True)
class PcieBridge:
    """A PCIe host bridge / root complex (PHB in `nvidia-smi topo -m`)."""
    kind: ClassVar[str] = "pcie_bridge"
    host: str
    index: int
    bus_id: str | None = None

    @property
    def vid(self) -> str:
        return f"pcibr:{self.host}:{self.index}"


@dataclass(frozen=True)
class PcieSwitch:
    """A PCIe switch (PIX/PXB); GPUs and NICs under one switch exchange traffic without the CPU."""
    kind: ClassVar[str] = "pcie_switch"
    host: str
    index: int
    bus_id: str | None = None

    @property
    def vid(self) -> str:
        return f"pcisw:{self.host}:{self.index}"


@dataclass(frozen=True)
class Gpu:
    """A GPU; `index` is its number in the source (nvidia-smi's and NVML's index, NCCL XML's CUDA ordinal).
    `minor` is its device minor, the N of /dev/nvidiaN that gres.conf File= names, where the source states it (an
    NVML capture); None otherwise. The driver assigns minors, which need not follow the index."""
    kind: ClassVar[str] = "gpu"
    host: str
    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_mb: int | None = None
    gpu_type: str | None = None  # Slurm GRES type, e.g. "h100"
    minor: int | None = None

    @property
    def vid(self) -> str:
        return f"gpu:{self.host}:{self.index}"


@dataclass(frozen=True)
class Nic:
    """A network adapter port set (HCA), e.g. mlx5_3. `compute` False marks storage/management adapters.
    `link_layer` is "ib" or "ethernet" (RoCE, EFA), None when the source does not say."""
    kind: ClassVar[str] = "nic"
    host: str
    name: str
    port_guids: tuple[str, ...] = ()
    rate_gbytes: float | None = None
    link_layer: str | None = None
    compute: bool = True

    @property
    def vid(self) -> str:
        return f"nic:{self.host}:{self.name}"


@dataclass(frozen=True)
class NvSwitch:
    kind: ClassVar[str] = "nvswitch"
    host: str
    index: int

    @property
    def vid(self) -> str:
        return f"nvswitch:{self.host}:{self.index}"


@dataclass(frozen=True)
class NvlinkDomain:
    """GPUs that reach each other over NVLink: one host's NVSwitch board, or a multi-node clique (NVL72).

    `clique_id` / `cluster_uuid` are NVML's GPU fabric ids where a capture provides them."""
    kind: ClassVar[str] = "nvlink_domain"
    name: str
    clique_id: int | None = None
    cluster_uuid: str | None = None

    @property
    def vid(self) -> str:
        return f"nvdomain:{self.name}"


@dataclass(frozen=True)
class Block:
    """A block of Slurm's topology/block as a topology file declares it: hosts (its members) the scheduler places a
    job's nodes within, and `position`, its place in the file, which Slurm aggregates by (block i joins the
    level-k block i // 2^k). It claims nothing about what joins its hosts (an NVLink domain, a leaf, a rack):
    the file does not say."""
    kind: ClassVar[str] = "block"
    name: str
    position: int

    @property
    def vid(self) -> str:
        return f"block:{self.name}"


VERTEX_TYPES: dict[str, type] = {t.kind: t for t in (Cluster, Switch, Host, Cpu, PcieBridge, PcieSwitch, Gpu, Nic,
                                                      NvSwitch, NvlinkDomain, Block)}
Vertex = Cluster | Switch | Host | Cpu | PcieBridge | PcieSwitch | Gpu | Nic | NvSwitch | NvlinkDomain | Block


# ------------------------------------------------------------------------------------------------ edge kinds

@dataclass(frozen=True)
class NvLink:
    """NVLink between two GPUs or a GPU and an NVSwitch: `links` lanes of `gbytes_per_link` GB/s each way.
    The per-link speed depends on the NVLink generation; None when the source does not state it."""
    kind: ClassVar[str] = "nvlink"
    links: int
    gbytes_per_link: float | None = None

    @property
    def gbytes(self) -> float | None:
        return None if self.gbytes_per_link is None else self.links * self.gbytes_per_link


@dataclass(frozen=True)
class Pcie:
    kind: ClassVar[str] = "pcie"
    gen: int | None = None
    width: int | None = None

    @property
    def gbytes(self) -> float | None:
        if self.gen in PCIE_LANE_GBYTES and self.width:
            return PCIE_LANE_GBYTES[self.gen] * self.width
        return None


@dataclass(frozen=True)
class Smp:
    """The interconnect between two NUMA nodes: across sockets (a SYS hop in `nvidia-smi topo -m`), or, with
    `within_socket`, between NUMA nodes of one package (sub-NUMA clustering, AMD NPS), which nvidia-smi reports
    as NODE."""
    kind: ClassVar[str] = "smp"
    gbytes: float | None = None
    within_socket: bool = False


@dataclass(frozen=True)
class EthLink:
    kind: ClassVar[str] = "ethernet"
    gbps: float = 100.0
    count: int = 1

    @property
    def gbytes(self) -> float:
        return self.count * self.gbps / 8


@dataclass(frozen=True)
class Member:
    """Membership: host in cluster, device in host, GPU in NVLink domain."""
    kind: ClassVar[str] = "member"


EDGE_TYPES: dict[str, type] = {t.kind: t for t in (NvLink, Pcie, Smp, IbLink, EthLink, Member)}
Edge = NvLink | Pcie | Smp | IbLink | EthLink | Member
FABRIC_KINDS = ("ib", "ethernet")


class Topology:
    """A typed topology graph. Vertex data is `g.nodes[vid]["v"]`, edge data `g.edges[u, v]["e"]`."""

    def __init__(self, name: str = "cluster"):
        self.name = name
        self.g = nx.Graph()
        self._cache: dict[str, Any] = {}
        #: facts about the whole fabric its source did not state (`FABRIC_UNKNOWN_FACTS`): a reader shows them as
        #: unknown, never the stand-in the graph's edges need (a cable of unknown rate is stored at 4xNDR)
        self.fabric_unknown: tuple[str, ...] = ()
        #: BlockSizes= of the declared blocks (`Block` vertices), as the topology file gave them; () when not given
        self.block_sizes: tuple[int, ...] = ()

    def mark_fabric_unknown(self, *facts: str) -> None:
        """Record facts about the whole fabric that its source does not state (names from `FABRIC_UNKNOWN_FACTS`)."""
        for f in facts:
            if f not in FABRIC_UNKNOWN_FACTS:
                raise ValueError(f"unknown fabric fact {f!r} (known: {', '.join(FABRIC_UNKNOWN_FACTS)})")
        self.fabric_unknown = tuple(sorted(set(self.fabric_unknown) | set(facts),
                                           key=list(FABRIC_UNKNOWN_FACTS).index))

    # -- builders (what providers call) ------------------------------------------------------------------

    def add(self, v: Vertex) -> str:
        """Add a vertex (or replace its data when the id exists, keeping its edges). Returns its id."""
        vid = v.vid
        self.g.add_node(vid, v=v)
        self._cache.clear()
        return vid

    def add_cluster(self, name: str) -> str:
        return self.add(Cluster(name))

    def add_host(self, name: str, node_type: str | None = None, rack: str | None = None,
                 features: Iterable[str] = (), cluster: str | None = None) -> str:
        """Add a host; with `cluster`, also its membership in that cluster vertex."""
        vid = self.add(Host(name, node_type, rack, tuple(features)))
        if cluster is not None:
            cid = f"cluster:{cluster}"
            if cid not in self.g:
                self.add_cluster(cluster)
            self.g.add_edge(vid, cid, e=Member())
        return vid

    def add_switch(self, name: str, level: int | None = None, guid: str | None = None,
                   description: str | None = None, rack: str | None = None, link_speed: int | None = None) -> str:
        return self.add(Switch(name, level, guid, description, rack, link_speed))

    def _need_host(self, host: str) -> str:
        hid = f"host:{host}"
        if hid not in self.g:
            self.add_host(host)
        return hid

    def add_cpu(self, host: str, numa: int | None, socket: int | None = None, cpus: Iterable[int] = (),
                cores: Iterable[int] = (), nodes: Iterable[int] = (), tag: str = "") -> str:
        """A NUMA node of `host` (created if missing), a member of the host. With `numa` None (the source does
        not say which node), `tag` names the vertex and `nodes` keeps the NUMA ids the source did list."""
        if numa is None and not tag:
            raise ValueError("a CPU group of unknown NUMA id needs a tag")
        if tag and tag.isdigit():
            raise ValueError(f"tag {tag!r} would read as a NUMA id")
        hid = self._need_host(host)
        vid = self.add(Cpu(host, numa, socket, tuple(cpus), tuple(cores), tuple(nodes), tag))
        self.g.add_edge(vid, hid, e=Member())
        return vid

    def mark_unknown(self, host: str, *facts: str) -> None:
        """Record facts about `host` that its source does not state (names from `UNKNOWN_FACTS`)."""
        for f in facts:
            if f not in UNKNOWN_FACTS:
                raise ValueError(f"unknown fact name {f!r} (known: {', '.join(UNKNOWN_FACTS)})")
        h = self.vertex(self._need_host(host))
        merged = tuple(sorted(set(h.unknown) | set(facts), key=list(UNKNOWN_FACTS).index))
        if merged != h.unknown:
            self.g.nodes[h.vid]["v"] = replace(h, unknown=merged)
            self._cache.clear()

    def unknown(self, host: str) -> tuple[str, ...]:
        return self.vertex(f"host:{host}").unknown

    def add_pcie_bridge(self, host: str, index: int, bus_id: str | None = None, parent: str | None = None) -> str:
        vid = self.add(PcieBridge(host, index, bus_id))
        self._attach(host, vid, parent)
        return vid

    def add_pcie_switch(self, host: str, index: int, bus_id: str | None = None, parent: str | None = None) -> str:
        vid = self.add(PcieSwitch(host, index, bus_id))
        self._attach(host, vid, parent)
        return vid

    def add_gpu(self, host: str, index: int, name: str | None = None, uuid: str | None = None,
                pci_bus_id: str | None = None, memory_mb: int | None = None, gpu_type: str | None = None,
                parent: str | None = None, minor: int | None = None) -> str:
        """A GPU of `host`; `parent` (a cpu/pcie vertex id) gets a PCIe edge to it. `minor`: its device minor
        where the source states it (see `Gpu`)."""
        vid = self.add(Gpu(host, index, name, uuid, pci_bus_id, memory_mb, gpu_type, minor))
        self._attach(host, vid, parent)
        return vid

    def add_nic(self, host: str, name: str, port_guids: Iterable[str] = (), rate_gbytes: float | None = None,
                link_layer: str | None = None, compute: bool = True, parent: str | None = None) -> str:
        vid = self.add(Nic(host, name, tuple(port_guids), rate_gbytes, link_layer, compute))
        self._attach(host, vid, parent)
        return vid

    def add_nvswitch(self, host: str, index: int) -> str:
        vid = self.add(NvSwitch(host, index))
        self.g.add_edge(vid, self._need_host(host), e=Member())
        return vid

    def add_nvlink_domain(self, name: str, members: Iterable[str] = (), clique_id: int | None = None,
                          cluster_uuid: str | None = None) -> str:
        """An NVLink domain and the GPUs (vertex ids) in it."""
        vid = self.add(NvlinkDomain(name, clique_id, cluster_uuid))
        for m in members:
            self.link(m, vid, Member())
        return vid

    def _attach(self, host: str, vid: str, parent: str | None) -> None:
        hid = self._need_host(host)
        self.g.add_edge(vid, hid, e=Member())
        if parent is not None:
            self.link(parent, vid, Pcie())

    def link(self, a: str, b: str, edge: Edge) -> None:
        """Connect two existing vertices. A second IB/Ethernet link adds to the cable count (an IB cable at another
        rate joins the bundle at its own rate: `IbLink.cables`) and a second NVLink edge adds to the link count; any
        other duplicate replaces the edge data."""
        for x in (a, b):
            if x not in self.g:
                raise KeyError(f"no vertex {x!r} in topology {self.name!r}")
        if a == b:
            raise ValueError(f"cannot link {a!r} to itself")
        old = self.g.edges[a, b]["e"] if self.g.has_edge(a, b) else None
        if old is not None:
            edge = _merged(old, edge)
            if edge is None:
                return
        self.g.add_edge(a, b, e=edge)
        self._cache.clear()

    def add_many(self, vertices: Iterable[Vertex] = (), links: Iterable[tuple[str, str, Edge]] = ()) -> None:
        """Bulk form of `add` for every vertex, then `link` for every (a, b, edge), in order: the same graph (same
        vertex and edge order, same merged cable counts, same errors) without a networkx call and a cache clear
        per item, for providers that load fabrics of many thousands of vertices."""
        with gc_paused():
            self._add_many(vertices, links)

    def _add_many(self, vertices: Iterable[Vertex], links: Iterable[tuple[str, str, Edge]]) -> None:
        g = self.g
        # What `add` does through g.add_node, and `link` through g.add_edge, written straight into networkx's
        # node and adjacency dicts (the same dicts those write: a vertex's data dict updated in place when it is
        # there already; one shared data dict per edge, kept in place when the edge is there already).
        node = g._node
        adj = g._adj
        try:
            for v in vertices:
                vid = v.vid
                d = node.get(vid)
                if d is None:
                    node[vid] = {"v": v}
                    adj[vid] = {}
                else:
                    d["v"] = v
        finally:
            self._cache.clear()
        try:
            for a, b, edge in links:
                nbrs = adj.get(a)
                if nbrs is None or b not in adj:
                    raise KeyError(f"no vertex {a if nbrs is None else b!r} in topology {self.name!r}")
                if a == b:
                    raise ValueError(f"cannot link {a!r} to itself")
                d = nbrs.get(b)
                if d is None:
                    nbrs[b] = adj[b][a] = {"e": edge}
                else:
                    edge = _merged(d["e"], edge)
                    if edge is not None:
                        d["e"] = edge
        finally:
            self._cache.clear()
            cache = getattr(g, "__networkx_cache__", None)   # what networkx's own add_edge clears
            if cache:
                cache.clear()

    def link_nvlink(self, a: str, b: str, links: int, gbytes_per_link: float | None = None) -> None:
        self.link(a, b, NvLink(links, gbytes_per_link))

    def link_pcie(self, a: str, b: str, gen: int | None = None, width: int | None = None) -> None:
        self.link(a, b, Pcie(gen, width))

    def link_smp(self, a: str, b: str, gbytes: float | None = None, within_socket: bool = False) -> None:
        self.link(a, b, Smp(gbytes, within_socket))

    def link_ib(self, a: str, b: str, width: int = 4, speed: str = "NDR", count: int = 1) -> None:
        if speed not in IB_LANE_GBYTES:
            raise ValueError(f"unknown IB speed {speed!r} (known: {', '.join(IB_LANE_GBYTES)})")
        self.link(a, b, IbLink(width, speed, count))

    def link_ethernet(self, a: str, b: str, gbps: float, count: int = 1) -> None:
        self.link(a, b, EthLink(gbps, count))

    # -- typed access ------------------------------------------------------------------------------------

    def __contains__(self, vid: str) -> bool:
        return vid in self.g

    def vertex(self, vid: str) -> Vertex:
        try:
            return self.g.nodes[vid]["v"]
        except KeyError:
            raise KeyError(f"no vertex {vid!r} in topology {self.name!r}") from None

    def edge(self, a: str, b: str) -> Edge:
        return self.g.edges[a, b]["e"]

    def kind(self, vid: str) -> str:
        return self.g.nodes[vid]["v"].kind

    def of_kind(self, kind: str) -> Iterator[Vertex]:
        """Vertices of one kind in graph order, from an index built once per change of the graph (a 16k-host
        fabric has about 150,000 vertices; the fabric summary asks for several kinds)."""
        by_kind = self._cache.get("by_kind")
        if by_kind is None:
            by_kind = {}
            for _, d in self.g.nodes(data="v"):
                by_kind.setdefault(d.kind, []).append(d)
            self._cache["by_kind"] = by_kind
        return iter(by_kind.get(kind, ()))

    def neighbours(self, vid: str, kind: str | None = None, edge_kind: str | None = None) -> Iterator[str]:
        for n, d in self.g.adj[vid].items():
            if kind is not None and self.g.nodes[n]["v"].kind != kind:
                continue
            if edge_kind is not None and d["e"].kind != edge_kind:
                continue
            yield n

    def hosts(self) -> list[Host]:
        """Hosts in name order (sorted once per change of the graph)."""
        return list(self._sorted("host"))

    def declared_blocks(self) -> list[tuple[str, list[str]]]:
        """(name, hosts in name order) of the blocks a topology file declared (`Block`), in the file's order."""
        out = []
        for b in sorted(self.of_kind("block"), key=lambda b: b.position):
            hosts = [w[5:] for w, d in self.g.adj[b.vid].items() if w.startswith("host:")]
            out.append((b.name, sorted(hosts, key=_natural)))
        return out

    def host_names(self) -> list[str]:
        names = self._cache.get("host_names")
        if names is None:
            names = self._cache["host_names"] = [h.name for h in self._sorted("host")]
        return list(names)

    def switches(self) -> list[Switch]:
        return list(self._sorted("switch"))

    def count(self, kind: str) -> int:
        """How many vertices of one kind (from the kind index)."""
        self.of_kind(kind)
        return len(self._cache["by_kind"].get(kind, ()))

    def _sorted(self, kind: str) -> list[Any]:
        key = f"sorted:{kind}"
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = sorted(self.of_kind(kind), key=lambda v: _natural(v.name))
        return got

    def devices(self, host: str, kind: str) -> list[Any]:
        """The GPUs / NICs / CPUs / ... of one host, in index (or name) order."""
        out = [self.g.nodes[n]["v"] for n in self.g.adj[f"host:{host}"] if self.g.nodes[n]["v"].kind == kind]
        return sorted(out, key=_order)

    def gpus(self, host: str) -> list[Gpu]:
        return self.devices(host, "gpu")

    def nics(self, host: str) -> list[Nic]:
        return self.devices(host, "nic")

    # -- JSON --------------------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        vertices = []
        for vid, v in self.g.nodes(data="v"):
            d = {"kind": v.kind, **_plain(asdict(v))}
            if d.get("link_speed", 0) is None:    # a switch without LinkSpeed= is written as before it had one
                del d["link_speed"]
            if d.get("minor", 0) is None:         # a GPU of unknown minor likewise: an old graph reads as unknown
                del d["minor"]
            vertices.append(d)
        edges = []
        for a, b, e in self.g.edges(data="e"):
            d = {"a": a, "b": b, "kind": e.kind, **_plain(asdict(e))}
            if d.get("cables", 0) is None:        # an IB bundle at one rate is written as before bundles had rates
                del d["cables"]
            edges.append(d)
        out = {"format": FORMAT, "name": self.name, "vertices": vertices, "edges": edges}
        if self.fabric_unknown:
            out["fabric_unknown"] = list(self.fabric_unknown)
        if self.block_sizes:
            out["block_sizes"] = list(self.block_sizes)
        return out

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<json>") -> "Topology":
        """Rebuild a topology written by `to_dict`; a malformed document fails naming the item at fault."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ParseError(source, None, f'not a slurmtools topology (expected "format": "{FORMAT}")')
        t = cls(str(data.get("name", "cluster")))
        facts = data.get("fabric_unknown", [])
        if not isinstance(facts, list) or any(not isinstance(f, str) or f not in FABRIC_UNKNOWN_FACTS for f in facts):
            raise ParseError(source, None, f"fabric_unknown: expected a list of {', '.join(FABRIC_UNKNOWN_FACTS)}, "
                                           f"got {facts!r}")
        t.fabric_unknown = tuple(dict.fromkeys(facts))
        sizes = data.get("block_sizes", [])
        if not isinstance(sizes, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                                                  for n in sizes):
            raise ParseError(source, None, f"block_sizes: expected a list of node counts, got {sizes!r}")
        t.block_sizes = tuple(sizes)
        minors: dict[tuple[str, int], int] = {}
        for i, d in enumerate(data.get("vertices", [])):
            v = _decode(VERTEX_TYPES, d, source, f"vertices[{i}]")
            if v.vid in t.g:
                raise ParseError(source, None, f"vertices[{i}]: duplicate vertex {v.vid!r}")
            why = _field_types(v)
            if why:
                raise ParseError(source, None, f"vertices[{i}].{why}")
            if isinstance(v, Gpu) and v.minor is not None:
                other = minors.setdefault((v.host, v.minor), i)
                if other != i:   # gres.conf would name one device file for two GPUs: slurmd stops at it
                    raise ParseError(source, None, f"vertices[{i}].minor: {v.minor}, the same as "
                                                   f"vertices[{other}]'s (GPUs of host {v.host!r})")
            t.g.add_node(v.vid, v=v)
        for i, d in enumerate(data.get("edges", [])):
            where = f"edges[{i}]"
            if not isinstance(d, dict) or "a" not in d or "b" not in d:
                raise ParseError(source, None, f"{where}: expected an object with a, b and kind")
            for end in ("a", "b"):
                if d[end] not in t.g:
                    raise ParseError(source, None, f"{where}.{end}: unknown vertex {d[end]!r}")
            e = _decode(EDGE_TYPES, {k: v for k, v in d.items() if k not in ("a", "b")}, source, where)
            t.g.add_edge(d["a"], d["b"], e=e)
        return t

    @classmethod
    def from_json(cls, text: str, source: str = "<json>") -> "Topology":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParseError(source, exc.lineno, f"invalid JSON: {exc.msg}", exc.colno) from None
        return cls.from_dict(data, source)

    def same_as(self, other: "Topology") -> bool:
        """Same vertices with the same data and the same edges with the same data."""
        if self.name != other.name or dict(self.g.nodes(data="v")) != dict(other.g.nodes(data="v")):
            return False
        if set(self.fabric_unknown) != set(other.fabric_unknown) or self.block_sizes != other.block_sizes:
            return False
        if self.g.number_of_edges() != other.g.number_of_edges():
            return False
        return all(other.g.has_edge(a, b) and other.g.edges[a, b]["e"] == e for a, b, e in self.g.edges(data="e"))


def _merged(old: Edge, edge: Edge) -> Edge | None:
    """What `Topology.link` stores when an edge `old` is already there: cable / link counts added for the same
    kind of link, `edge` for other duplicates, None to keep `old` (a member edge never hides a physical one)."""
    if type(old) is type(edge):
        if isinstance(edge, IbLink):
            if old.cables is None and edge.cables is None and (old.width, old.speed) == (edge.width, edge.speed):
                return IbLink(edge.width, edge.speed, old.count + edge.count)
            return ib_bundle(old.rates() + edge.rates())      # cables at other rates: each at its own
        if isinstance(edge, EthLink) and old.gbps == edge.gbps:
            return EthLink(edge.gbps, old.count + edge.count)
        if isinstance(edge, NvLink) and old.gbytes_per_link == edge.gbytes_per_link:
            return NvLink(old.links + edge.links, edge.gbytes_per_link)
    elif isinstance(old, Member) is not isinstance(edge, Member) and isinstance(edge, Member):
        return None
    return edge


def _plain(d: dict) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def _field_types(v: Vertex) -> str | None:
    """What is wrong with the fields a reader computes with (a block's place, a switch's level and LinkSpeed=, a
    GPU's device minor), as `field: why`; None when they are what the dataclass says. A JSON document can hold
    anything there."""
    def whole(x) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    if isinstance(v, Block) and not whole(v.position):
        return f"position: expected a whole number, got {v.position!r}"
    if isinstance(v, Switch):
        for name in ("level", "link_speed"):
            x = getattr(v, name)
            if x is not None and not whole(x):
                return f"{name}: expected a whole number or null, got {x!r}"
    if isinstance(v, Gpu) and v.minor is not None and not whole(v.minor):
        return f"minor: expected a whole number or null, got {v.minor!r}"
    return None


def _decode(types: dict[str, type], d: Any, source: str, where: str):
    if not isinstance(d, dict):
        raise ParseError(source, None, f"{where}: expected an object, got {type(d).__name__}")
    kind = d.get("kind")
    if kind not in types:
        raise ParseError(source, None, f"{where}.kind: expected one of {', '.join(types)}, got {kind!r}")
    cls = types[kind]
    names = {f.name for f in fields(cls)}
    extra = set(d) - names - {"kind"}
    if extra:
        raise ParseError(source, None, f"{where}: unknown field(s) {', '.join(sorted(extra))} for a {kind}")
    kw = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k != "kind"}
    try:
        return cls(**kw)
    except (TypeError, ValueError) as exc:
        raise ParseError(source, None, f"{where}: {exc}") from None


def _order(v: Any) -> tuple:
    if hasattr(v, "index"):
        return (v.index,)
    if hasattr(v, "numa"):
        return (v.numa is None, v.numa if v.numa is not None else 0, _natural(v.tag))
    return _natural(getattr(v, "name", ""))
