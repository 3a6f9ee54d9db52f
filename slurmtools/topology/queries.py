"""Questions the planner, renderers and checks ask of a `Topology`.

Inside a host: NVLink islands, PCIe switch groups, nearest NICs and local CPUs per GPU. Across hosts: a host's
leaf and spine path, hops and bottleneck bandwidth between two hosts, hosts under a switch, NVLink domains with
free capacity, and oversubscription per switch level. Fabric questions run on a small "fabric view" (hosts and
switches only, parallel cables summed into one capacity) that is built once per topology and cached.
Pure: no I/O.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Mapping

import networkx as nx

from slurmtools.topology import fabric_index as _fabric_index
from slurmtools.topology.fabric_index import FabricIndex
from slurmtools.gc_pause import gc_paused
from slurmtools.topology.graph import FABRIC_KINDS, Gpu, Topology, _natural
from slurmtools.topology.pci import pci_key

INTERNAL = ("pcie", "smp")


# ------------------------------------------------------------------------------------------- inside a host

def nvlink_islands(t: Topology, host: str) -> list[list[int]]:
    """GPU indices of `host` grouped by what NVLink (directly or through NVSwitches) connects; singletons for
    PCIe-only GPUs. Ordered by lowest index."""
    gpus = {g.vid: g.index for g in t.gpus(host)}
    seen: set[str] = set()
    out: list[list[int]] = []
    for start in gpus:
        if start in seen:
            continue
        comp: list[int] = []
        queue = deque([start])
        seen.add(start)
        while queue:
            u = queue.popleft()
            if u in gpus:
                comp.append(gpus[u])
            for w, d in t.g.adj[u].items():
                if w not in seen and d["e"].kind == "nvlink" and t.kind(w) in ("gpu", "nvswitch"):
                    seen.add(w)
                    queue.append(w)
        out.append(sorted(comp))
    return sorted(out)


def nvlink_count(t: Topology, a: str, b: str) -> int:
    """NVLinks between two GPUs (vertex ids): a direct edge's links, or through shared NVSwitches the smaller
    of the two GPUs' link counts to each switch (on NVSwitch boards every GPU reaches every peer with all its
    links, which is what Slurm's gres.conf Links= states for them)."""
    n = 0
    if t.g.has_edge(a, b) and t.edge(a, b).kind == "nvlink":
        n += t.edge(a, b).links
    for s, d in t.g.adj[a].items():
        if d["e"].kind == "nvlink" and t.kind(s) == "nvswitch" and t.g.has_edge(s, b):
            eb = t.edge(s, b)
            if eb.kind == "nvlink":
                n += min(d["e"].links, eb.links)
    return n


def nvlink_matrix(t: Topology, host: str) -> list[list[int]]:
    """Links per GPU pair in index order, -1 on the diagonal (Slurm's gres.conf Links= rows)."""
    gpus = t.gpus(host)
    return [[-1 if i == j else nvlink_count(t, a.vid, b.vid) for j, b in enumerate(gpus)]
            for i, a in enumerate(gpus)]


def slurm_gpu_order(t: Topology, host: str) -> list[Gpu]:
    """A node's GPUs as Slurm numbers them in gres.conf Links= (gres.conf(5): sorted by PCI bus ID, NVML's own
    enumeration; slurmd's AutoDetect writes its Links in that order and refuses a file's line whose Links differ
    from it). By bus ID where the source states one for every GPU (an NCCL dump numbers GPUs by CUDA ordinal, which
    need not follow the bus); otherwise by index, which for NVML and `nvidia-smi topo -m` is that same enumeration."""
    gpus = t.gpus(host)
    keys = [pci_key(g.pci_bus_id) if g.pci_bus_id else None for g in gpus]
    if gpus and all(keys) and len(set(keys)) == len(keys):
        return [g for _, g in sorted(zip(keys, gpus), key=lambda kg: kg[0])]
    return gpus


def slurm_links_rows(t: Topology, host: str) -> dict[int, list[int]]:
    """Each GPU's gres.conf Links= row, by GPU index: NVLinks to each GPU in Slurm's numbering
    (`slurm_gpu_order`), -1 at its own place."""
    order = slurm_gpu_order(t, host)
    return {a.index: [-1 if a is b else nvlink_count(t, a.vid, b.vid) for b in order] for a in order}


def pcie_groups(t: Topology, host: str) -> dict[str | None, list[int]]:
    """GPU indices of `host` by the PCIe switch directly above them (None: attached to a bridge or CPU)."""
    out: dict[str | None, list[int]] = {}
    for g in t.gpus(host):
        sw = next((n for n in t.neighbours(g.vid, "pcie_switch", "pcie")), None)
        out.setdefault(sw, []).append(g.index)
    return out


def _internal_distances(t: Topology, start: str, kinds: tuple[str, ...]) -> dict[str, int]:
    """BFS over PCIe/SMP edges of one host from `start`."""
    dist = {start: 0}
    queue = deque([start])
    while queue:
        u = queue.popleft()
        for w, d in t.g.adj[u].items():
            if w not in dist and d["e"].kind in kinds:
                dist[w] = dist[u] + 1
                queue.append(w)
    return dist


# How far apart two devices of one host are, nearest first, named as `nvidia-smi topo -m` and NCCL name them.
PATH_CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS")
PATH_MEANING = {
    "PIX": "through one PCIe switch",
    "PXB": "through several PCIe switches, not the CPU",
    "PHB": "through the CPU's PCIe host bridge",
    "NODE": "between host bridges of one NUMA node",
    "SYS": "across the socket link (far)",
}
PATH_RANK = {c: i for i, c in enumerate(PATH_CLASSES)}


def _internal_path(t: Topology, a: str, b: str) -> list[tuple[str, str]] | None:
    """The vertices and edge kinds on the PCIe/SMP path from `a` to `b` [(vertex, kind of the edge into it)],
    or None when nothing connects them. PCIe trees hang off CPU vertices, so the path is the tree path."""
    prev: dict[str, tuple[str, str] | None] = {a: None}
    queue = deque([a])
    while queue:
        u = queue.popleft()
        if u == b:
            break
        for w, d in t.g.adj[u].items():
            k = d["e"].kind
            if w not in prev and k in INTERNAL:
                prev[w] = (u, k)
                queue.append(w)
    if b not in prev:
        return None
    out = []
    x = b
    while prev[x] is not None:
        u, k = prev[x]
        out.append((x, k))
        x = u
    return out[::-1]


def path_class(t: Topology, a: str, b: str) -> str | None:
    """How the PCIe path between devices `a` and `b` (vertex ids) runs, as a class of `PATH_CLASSES`; None when the
    graph does not connect them. Ranked by what the path crosses, never by counting edges: a NIC under the CPU is
    farther than one two PCIe switches away. A path through a CPU vertex is NODE when that NUMA node's host
    bridges are in the graph (so the path left one), PHB when the source did not state host bridges (NCCL XML)."""
    path = _internal_path(t, a, b)
    if path is None:
        return None
    hops = [(u, v) for (u, _), (v, k) in zip([(a, "")] + path[:-1], path) if k == "smp"]
    if any(not t.edge(u, v).within_socket for u, v in hops):
        return "SYS"
    if hops:
        return "NODE"
    inner = [v for v, _ in path[:-1]]
    kinds = [t.kind(v) for v in inner]
    if "cpu" in kinds:
        cpu = inner[kinds.index("cpu")]
        bridges = any(t.kind(w) == "pcie_bridge" for w in t.neighbours(cpu, edge_kind="pcie"))
        return "NODE" if bridges else "PHB"
    if "pcie_bridge" in kinds:
        return "PHB"
    return "PIX" if kinds.count("pcie_switch") <= 1 else "PXB"


@dataclass(frozen=True)
class NicPath:
    """A NIC as seen from one GPU: its name and how the path to it runs (None: not connected in the graph)."""
    nic: str
    path: str | None

    @property
    def far(self) -> bool:
        return self.path == "SYS"


def nic_paths(t: Topology, host: str, compute_only: bool = True) -> dict[int, list[NicPath]]:
    """For each GPU index, every NIC of the host with its path class, nearest first (unconnected last)."""
    nics = [n for n in t.nics(host) if n.compute or not compute_only]
    out: dict[int, list[NicPath]] = {}
    for g in t.gpus(host):
        paths = [NicPath(n.name, path_class(t, g.vid, n.vid)) for n in nics]
        out[g.index] = sorted(paths, key=lambda p: (PATH_RANK.get(p.path, len(PATH_RANK)), _natural(p.nic)))
    return out


def nearest_nics(t: Topology, host: str, compute_only: bool = True) -> dict[int, list[str]]:
    """For each GPU index, the NIC name(s) of the nearest path class (ties all listed). A GPU whose NICs are all
    across the socket link gets those (`nearest_nic_paths` says they are far); [] when no NIC is connected."""
    return {g: [p.nic for p in ps] for g, ps in nearest_nic_paths(t, host, compute_only).items()}


def nearest_nic_paths(t: Topology, host: str, compute_only: bool = True) -> dict[int, list[NicPath]]:
    """`nearest_nics` with each NIC's path class."""
    out = {}
    for g, ps in nic_paths(t, host, compute_only).items():
        known = [p for p in ps if p.path is not None]
        out[g] = [p for p in known if p.path == known[0].path] if known else []
    return out


def _local_cpu_vertices(t: Topology, gpu_vid: str) -> list[str]:
    dist = _internal_distances(t, gpu_vid, ("pcie",))
    cpus = [(d, v) for v, d in dist.items() if t.kind(v) == "cpu"]
    if not cpus:
        return []
    m = min(d for d, _ in cpus)
    return sorted((v for d, v in cpus if d == m), key=_natural)


def local_cpus(t: Topology, host: str) -> dict[int, tuple[int, ...]]:
    """For each GPU index, the logical CPU ids of the NUMA node(s) its PCIe tree hangs from."""
    out = {}
    for g in t.gpus(host):
        ids: set[int] = set()
        for c in _local_cpu_vertices(t, g.vid):
            ids.update(t.vertex(c).cpus)
        out[g.index] = tuple(sorted(ids))
    return out


def local_cores(t: Topology, host: str) -> dict[int, tuple[int, ...]]:
    """For each GPU index, Slurm core ids local to it (gres.conf Cores=)."""
    out = {}
    for g in t.gpus(host):
        ids: set[int] = set()
        for c in _local_cpu_vertices(t, g.vid):
            ids.update(t.vertex(c).cores)
        out[g.index] = tuple(sorted(ids))
    return out


def gpu_numa(t: Topology, host: str) -> dict[int, list[int]]:
    """For each GPU index, the NUMA node number(s) it is local to ([] when the source did not say)."""
    return {g.index: [k for c in _local_cpu_vertices(t, g.vid) for k in t.vertex(c).numa_ids] for g in t.gpus(host)}


def nic_numa(t: Topology, host: str) -> dict[str, list[int]]:
    """For each NIC name, the NUMA node number(s) it is local to ([] when the source did not say)."""
    return {n.name: [k for c in _local_cpu_vertices(t, n.vid) for k in t.vertex(c).numa_ids] for n in t.nics(host)}


# ------------------------------------------------------------------------------------------- the fabric view

def fabric_view(t: Topology) -> nx.Graph:
    """Hosts and switches only; an edge's `gbytes` is the summed capacity of all cables between the two (a host's
    compute NICs count toward the host). Cached until the topology changes."""
    fv = t._cache.get("fabric")
    if fv is not None:
        return fv
    with gc_paused():
        fv = t._cache["fabric"] = _fabric_view(t)
    return fv


def _fabric_view(t: Topology) -> nx.Graph:
    # One pass over the adjacency in networkx's own edge order (each edge from the first of its ends in vertex
    # order), so the view's vertex and neighbour order, and the float sums, are those of iterating g.edges.
    ends_of: dict[str, str | None] = {}   # vertex -> its fabric end (a host or switch id), None if not one
    fabric_nodes: list[str] = []
    for x, v in t.g.nodes(data="v"):
        k = v.kind
        if k == "switch" or k == "host":
            ends_of[x] = x
            fabric_nodes.append(x)
        elif k == "nic" and v.compute:
            ends_of[x] = f"host:{v.host}"
        else:
            ends_of[x] = None
    cap: dict[tuple[str, str], float] = {}
    get = cap.get
    seen: set[str] = set()
    for a, nbrs in t.g.adjacency():
        x = ends_of[a]
        if x is not None:
            for b, d in nbrs.items():
                if b in seen:
                    continue
                e = d["e"]
                if e.kind not in FABRIC_KINDS:
                    continue
                y = ends_of[b]
                if y is None or x == y:
                    continue
                key = (x, y) if x < y else (y, x)
                cap[key] = get(key, 0.0) + e.gbytes
        seen.add(a)
    fv = nx.Graph()
    fv.add_nodes_from(fabric_nodes)
    adj = fv._adj   # a fresh graph: fill its adjacency as add_edges_from would, without its per-edge checks
    for (a, b), g in cap.items():
        nbrs = adj.get(a)
        if nbrs is None or b not in adj:   # a NIC whose host vertex is missing: networkx adds the host
            fv.add_edge(a, b, gbytes=g)
        else:
            nbrs[b] = adj[b][a] = {"gbytes": g}
    return fv


def switch_levels(t: Topology) -> dict[str, int]:
    """Switch name -> level (0 = leaf). Declared levels win; the rest is the switch's distance from the nearest
    host minus one, which is the level in a tree or fat tree. Switches no host reaches are left out."""
    lv = t._cache.get("levels")
    if lv is not None:
        return lv
    switches = list(t.of_kind("switch"))
    if all(s.level is not None for s in switches):   # every provider declares them: no fabric walk needed
        lv = t._cache["levels"] = {s.name: s.level for s in switches}
        return lv
    fv = fabric_view(t)
    dist: dict[str, int] = {}
    queue: deque[str] = deque()
    for n in fv:
        if n.startswith("host:"):
            dist[n] = -1
            queue.append(n)
    while queue:
        u = queue.popleft()
        for w in fv.adj[u]:
            if w not in dist and w.startswith("switch:"):
                dist[w] = dist[u] + 1
                queue.append(w)
    lv = {}
    for s in t.of_kind("switch"):
        if s.level is not None:
            lv[s.name] = s.level
        elif s.vid in dist:
            lv[s.name] = dist[s.vid]
    t._cache["levels"] = lv
    return lv


def _need(t: Topology, vid: str, what: str) -> None:
    if vid not in t.g:
        raise ValueError(f"no {what} {vid.split(':', 1)[1]!r} in topology {t.name!r}")


def leaves_of(t: Topology, host: str) -> list[str]:
    """Leaf switches the host is cabled to, most capacity first (rail-optimised hosts have several)."""
    _need(t, f"host:{host}", "host")
    fv = fabric_view(t)
    hid = f"host:{host}"
    lv = switch_levels(t)
    leaves = [(-fv.edges[hid, s]["gbytes"], _natural(s[7:]), s[7:]) for s in fv.adj[hid]
              if s.startswith("switch:") and lv.get(s[7:]) == 0]
    return [n for *_, n in sorted(leaves)]


def primary_leaf(t: Topology, host: str) -> str | None:
    """The one leaf a tree-shaped config (topology.conf) puts the host under: the one with the most capacity."""
    ls = leaves_of(t, host)
    return ls[0] if ls else None


def primary_leaves(t: Topology) -> dict[str, str]:
    """`primary_leaf` of every cabled host in one pass (what topology.conf and node features need)."""
    fv = fabric_view(t)
    lv = switch_levels(t)
    out = {}
    for n in fv:
        if not n.startswith("host:"):
            continue
        best: tuple | None = None
        for s, d in fv.adj[n].items():
            if s.startswith("switch:") and lv.get(s[7:]) == 0:
                key = (-d["gbytes"], _natural(s[7:]))
                if best is None or key < best[0]:
                    best = (key, s[7:])
        if best is not None:
            out[n[5:]] = best[1]
    return out


def uplinks(t: Topology, host: str) -> list[list[str]]:
    """The host's switch path by level: [[leaves], [spines above them], [cores above those], ...]."""
    ix = fabric_index(t)
    level = leaves_of(t, host)
    out: list[list[str]] = []
    while level:
        out.append(level)
        up = {u for s in level for u in ix.switches[s].up}
        level = sorted(up, key=_natural)
    return out


def hosts_under(t: Topology, switch: str) -> list[str]:
    """Hosts reachable downward from a switch (through lower-level switches), in name order."""
    _need(t, f"switch:{switch}", "switch")
    memo = t._cache.setdefault("under", {})
    if switch in memo:
        return memo[switch]
    out = memo[switch] = fabric_index(t).hosts_under(switch)
    return out


def fabric_index(t: Topology) -> FabricIndex:
    """The precomputed fabric indexes (`fabric_index.py`), built once per topology like the fabric view."""
    ix = t._cache.get("index")
    if ix is None:
        with gc_paused():
            ix = t._cache["index"] = _fabric_index.build(fabric_view(t), switch_levels(t))
    return ix


@dataclass(frozen=True)
class HostPath:
    """Shortest cabled path between two hosts: `hops` links, `gbytes` the narrowest hop on the widest such path
    (parallel cables and a host's several NICs to one switch summed), `via` the switches on that path."""
    hops: int
    gbytes: float | None
    via: tuple[str, ...]


def path_between(t: Topology, a: str, b: str) -> HostPath | None:
    """Hops and bottleneck bandwidth between hosts `a` and `b`; None when no cable path joins them. Other hosts
    are never transit points. This is a per-path bottleneck, not a max-flow over all rails.

    Which shortest path is reported (the widest; among equally wide ones, the first a breadth-first search from
    `a` meets) depends only on the switches that lie on some shortest path, so a search from both ends finds the
    distance and those switches first, and the breadth-first search runs over them alone: on a 16k-host fat tree
    a few hundred switches instead of all of them, with the same answer."""
    src, dst = f"host:{a}", f"host:{b}"
    _need(t, src, "host")
    _need(t, dst, "host")
    if a == b:
        return HostPath(0, None, ())
    adj = fabric_view(t)._adj   # networkx's own dicts: its read-only views cost a call per lookup
    on_path = _shortest_path_vertices(adj, src, dst)
    if on_path is None:
        return None
    # The breadth-first search, one level at a time over the switches on shortest paths: a vertex's width is the
    # widest of its predecessors' (each capped by the cable), its parent the first predecessor in queue order with
    # that width, and the queue order of a level is by (first predecessor's place, place in its adjacency).
    width = {src: float("inf")}
    parent: dict[str, str] = {}
    order = [src]
    for k in range(1, max(on_path) + 1):
        here = {u: i for i, u in enumerate(order)}
        nxt = on_path[k]
        preds: dict[str, list[str]] = {w: [] for w in nxt}
        if sum(len(adj[w]) for w in nxt) <= sum(len(adj[u]) for u in order):
            for w in nxt:
                preds[w] = sorted((u for u in adj[w] if u in here), key=here.__getitem__)
        else:
            for u in order:
                for w in adj[u]:
                    if w in preds:
                        preds[w].append(u)
        for w, ps in preds.items():
            best = None
            for u in ps:
                cap = min(width[u], adj[u][w]["gbytes"])
                if best is None or cap > best:
                    best, parent[w] = cap, u
            width[w] = best
        first: dict[str, list[str]] = {}
        for w, ps in preds.items():
            first.setdefault(ps[0], []).append(w)
        order = []
        for u in sorted(first, key=here.__getitem__):
            ws = first[u]
            if len(ws) > 1:
                rank = {x: i for i, x in enumerate(adj[u])}
                ws.sort(key=rank.__getitem__)
            order.extend(ws)
    dist = {dst: max(on_path)}
    via = []
    x = parent[dst]
    while x != src:
        via.append(x[7:])
        x = parent[x]
    return HostPath(dist[dst], width[dst], tuple(reversed(via)))


def _shortest_path_vertices(adj, src: str, dst: str) -> dict[int, set[str]] | None:
    """Distance from `src` -> the vertices at that distance on some shortest `src`-`dst` path (hosts other than
    the two ends are not transit points); None when none joins them. Two breadth-first balls grow level by level,
    the side whose next level touches fewer cables first, until they meet: the meeting level is exactly the
    middle of every shortest path, and walking back down each ball from it gives the rest."""
    balls = [{src: 0}, {dst: 0}]
    levels: list[list[list[str]]] = [[[src]], [[dst]]]
    ends = (src, dst)

    def expand(side: int) -> list[str]:
        ball, frontier, out = balls[side], levels[side][-1], []
        k = len(levels[side])
        for u in frontier:
            if u != ends[side] and u.startswith("host:"):
                continue
            for w in adj[u]:
                if w not in ball and (not w.startswith("host:") or w == ends[1 - side]):
                    ball[w] = k
                    out.append(w)
        levels[side].append(out)
        return out

    def cost(side: int) -> int:
        return sum(len(adj[u]) for u in levels[side][-1])

    while True:
        side = 0 if cost(0) <= cost(1) else 1
        new = expand(side)
        if not new:
            return None
        other = balls[1 - side]
        middle = [w for w in new if w in other]
        if middle:
            break
    a_lv, b_lv = len(levels[0]) - 1, len(levels[1]) - 1
    total = a_lv + b_lv
    on: dict[int, set[str]] = {a_lv: set(middle)}
    # down the source's ball: a vertex one level nearer the source cabled to one already on a path
    for k in range(a_lv - 1, -1, -1):
        later = on[k + 1]
        on[k] = {u for u in levels[0][k] if (u == src or not u.startswith("host:"))
                 and any(w in later for w in adj[u])} if len(levels[0][k]) > 1 else set(levels[0][k])
    # down the destination's ball, which is up the source's distances
    for j in range(b_lv - 1, -1, -1):
        k = total - j
        prev = on[k - 1]
        on[k] = {u for u in levels[1][j] if (u == dst or not u.startswith("host:"))
                 and any(w in prev for w in adj[u])} if len(levels[1][j]) > 1 else set(levels[1][j])
    return on


@dataclass(frozen=True)
class LevelLoad:
    """Oversubscription of one switch level: capacity down (to hosts / lower switches) over capacity up."""
    level: int
    switches: int
    down_gbytes: float
    up_gbytes: float
    ratio: float | None  # down / up over the whole level; None at the top level
    worst: float | None  # the most oversubscribed single switch of the level


def oversubscription(t: Topology) -> list[LevelLoad]:
    """Per switch level: capacity down over capacity up, summed over the level and the worst single switch.
    Computed once per graph build from the per-switch capacities the fabric index holds."""
    got = t._cache.get("oversubscription")
    if got is None:
        got = t._cache["oversubscription"] = _oversubscription(switch_levels(t), fabric_index(t))
    return list(got)


def _oversubscription(lv: Mapping[str, int], ix: FabricIndex) -> list[LevelLoad]:
    per: dict[int, list[tuple[float, float]]] = {}
    for name, k in lv.items():
        s = ix.switches[name]
        per.setdefault(k, []).append((s.down_gbytes, s.up_gbytes))
    out = []
    for k in sorted(per):
        rows = per[k]
        down = sum(r[0] for r in rows)
        up = sum(r[1] for r in rows)
        ratios = [r[0] / r[1] for r in rows if r[1] > 0]
        out.append(LevelLoad(k, len(rows), down, up, down / up if up > 0 else None,
                             max(ratios) if ratios else None))
    return out


# ------------------------------------------------------------------------------------------- NVLink domains

@dataclass(frozen=True)
class DomainCapacity:
    name: str
    hosts: tuple[str, ...]
    gpus: int
    free_gpus: int
    free_hosts: int  # hosts whose every GPU in the domain is free

    @property
    def multi_node(self) -> bool:
        return len(self.hosts) > 1


def domain_gpus(t: Topology, domain: str) -> list[Gpu]:
    """GPUs in an NVLink domain (members may be GPUs or whole hosts)."""
    vid = f"nvdomain:{domain}"
    _need(t, vid, "NVLink domain")
    out: list[Gpu] = []
    for m in t.neighbours(vid, edge_kind="member"):
        v = t.vertex(m)
        if v.kind == "gpu":
            out.append(v)
        elif v.kind == "host":
            out.extend(t.gpus(v.name))
    return sorted(out, key=lambda g: (_natural(g.host), g.index))


def nvlink_domains(t: Topology, free: Mapping[str, int] | None = None) -> list[DomainCapacity]:
    """Every NVLink domain with its size and free capacity, given free GPUs per host (None: all free; a host
    missing from `free` has none free)."""
    out = []
    for d in sorted(t.of_kind("nvlink_domain"), key=lambda d: _natural(d.name)):
        per_host: dict[str, int] = {}
        for g in domain_gpus(t, d.name):
            per_host[g.host] = per_host.get(g.host, 0) + 1
        hosts = tuple(sorted(per_host, key=_natural))
        if free is None:
            fr = dict(per_host)
        else:
            fr = {h: min(max(free.get(h, 0), 0), n) for h, n in per_host.items()}
        out.append(DomainCapacity(d.name, hosts, sum(per_host.values()), sum(fr.values()),
                                  sum(1 for h in hosts if fr[h] == per_host[h])))
    return out


def domain_of(t: Topology, host: str) -> list[str]:
    """Names of the NVLink domains holding any GPU of `host`."""
    out = set()
    for g in t.gpus(host):
        for m in t.neighbours(g.vid, "nvlink_domain", "member"):
            out.add(m.split(":", 1)[1])
    for m in t.neighbours(f"host:{host}", "nvlink_domain", "member"):
        out.add(m.split(":", 1)[1])
    return sorted(out, key=_natural)
