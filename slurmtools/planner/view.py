"""The planner's input: a small pure "cluster view" of leaves, hosts and their free GPUs.

Why a view and not the topology graph itself: the optimiser runs on every plan over up to 16k hosts, so it
needs flat tables (leaf -> hosts, host -> free GPUs); deriving them once from the declared fabric (or the
topology graph) joined with the backend's live node state keeps the optimiser fast and easy to prove.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping, NamedTuple

from slurmtools.gc_pause import gc_paused
from slurmtools.slurm.model import UNSCHEDULABLE_FLAGS, UNSCHEDULABLE_STATES, NodeInfo
from slurmtools.topology.names import natural as _nat
from slurmtools.topology.sitefile import Fabric, NodeType, link_gbytes

# GB/s per NVLink link per direction (NVLink 4); PCIe gen5 x16 per direction for GPUs without NVLink.
PCIE_GPU_GBYTES = 63.0


class HostState(NamedTuple):
    """A host as the planner sees it. (A NamedTuple: the view of a 16k-host site builds one per host per plan,
    and tuples build in a third of a frozen dataclass's time; `_replace` instead of `dataclasses.replace`.)"""

    name: str
    leaf: str
    node_type: str
    gpus: int  # GPUs of the planned type on this host
    gpus_free: int
    cpus_free: int
    mem_free_mb: int


@dataclass(frozen=True)
class ClusterView:
    """Hosts grouped by leaf switch, with free resources and the bandwidths the quality score needs."""

    hosts: Mapping[str, HostState]
    leaves: Mapping[str, tuple[str, ...]]  # leaf -> hosts under it, in fabric order
    leaf_spines: Mapping[str, tuple[str, ...]]  # leaf -> spines it uplinks to
    node_types: Mapping[str, NodeType]
    link_gbytes: float  # one host<->leaf link, GB/s per direction
    leaf_uplink_gbytes: Mapping[str, float]  # leaf -> total uplink capacity to the spines, GB/s
    live: bool  # True: free GPUs from Slurm now; False: the declared fabric as if idle
    source: str = ""
    #: node type -> GPU index -> nearest HCAs, from the topology graph's query; empty: the fabric file's rule
    nearest: Mapping[str, Mapping[int, tuple[str, ...]]] = field(default_factory=dict)
    #: host -> the multi-node NVLink domain it belongs to (NVL72-style cliques); hosts of one-host domains are absent
    domain_of: Mapping[str, str] = field(default_factory=dict)
    #: memo of derived tables that depend only on the layout (never on free GPUs); fresh on every copy
    memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def nearest_nics(self, node_type: str, gpu: int) -> tuple[str, ...]:
        got = self.nearest.get(node_type, {}).get(gpu)
        return tuple(got) if got is not None else tuple(self.node_types[node_type].nearest_nics(gpu))

    def idle(self) -> "ClusterView":
        """The same cluster with every host free: the reference for "best the empty cluster allows"."""
        hosts = {h: s._replace(gpus_free=s.gpus, cpus_free=self.node_types[s.node_type].cpus,
                               mem_free_mb=self.node_types[s.node_type].memory_mb) for h, s in self.hosts.items()}
        return replace(self, hosts=hosts, live=False)

    def with_free(self, extra: Mapping[str, int]) -> "ClusterView":
        """The view with `extra` GPUs (and their CPU/memory share) given back on some hosts (a job's own)."""
        hosts = dict(self.hosts)
        for h, g in extra.items():
            if h in hosts:
                s = hosts[h]
                nt = self.node_types[s.node_type]
                free = min(s.gpus, s.gpus_free + g)
                hosts[h] = s._replace(gpus_free=free,
                                      cpus_free=min(nt.cpus, s.cpus_free + g * nt.cpus // max(nt.gpus, 1)),
                                      mem_free_mb=min(nt.memory_mb,
                                                      s.mem_free_mb + g * nt.memory_mb // max(nt.gpus, 1)))
        return replace(self, hosts=hosts)

    def with_taken(self, taken: Iterable[str]) -> "ClusterView":
        """The view with the hosts in `taken` wholly busy (planned for jobs queued ahead of a new one)."""
        taken = set(taken) & set(self.hosts)
        if not taken:
            return self
        hosts = dict(self.hosts)
        for h in taken:
            hosts[h] = hosts[h]._replace(gpus_free=0, cpus_free=0, mem_free_mb=0)
        return replace(self, hosts=hosts)

    def layout(self) -> dict[str, dict[str, list[str]]]:
        """leaf -> node type -> hosts (fabric order); derived once per view, it never depends on free GPUs."""
        lay = self.memo.get("layout")
        if lay is None:
            hosts = self.hosts
            lay = {}
            for leaf, members in self.leaves.items():
                types = [hosts[h].node_type for h in members]
                if types and types.count(types[0]) == len(types):  # the usual case: one node type per leaf
                    lay[leaf] = {types[0]: list(members)}
                    continue
                per: dict[str, list[str]] = {}
                for h, t in zip(members, types):
                    per.setdefault(t, []).append(h)
                lay[leaf] = per
            self.memo["layout"] = lay
        return lay

    def host_gbytes(self, host: str) -> float:
        """Network bandwidth of one host: its HCAs times the link rate."""
        nt = self.node_types[self.hosts[host].node_type]
        return max(len(nt.nics), 1) * self.link_gbytes

    def nvlink_gbytes(self, node_type: str) -> float:
        nt = self.node_types[node_type]
        # the site loader refuses an NVSwitch node type whose per-link speed it cannot know
        return nt.nvlinks_per_gpu * nt.nvlink_gbytes_per_link if nt.nvlink == "nvswitch" else PCIE_GPU_GBYTES

    def common_spine(self, a: str, b: str) -> bool:
        return bool(set(self.leaf_spines.get(a, ())) & set(self.leaf_spines.get(b, ())))


def from_fabric(fabric: Fabric, nodes: Iterable[NodeInfo] | None = None, *, gpu_type: str | None = None,
                only_hosts: Iterable[str] | None = None) -> ClusterView:
    """The view of a declared fabric; with `nodes` (the backend's live state) free GPUs come from Slurm.

    Hosts that Slurm does not report, or reports down/drained, count as having nothing free. `gpu_type`
    keeps only hosts whose node type carries that GPU; `only_hosts` keeps a partition's hosts.
    """
    live = {n.name: n for n in nodes} if nodes is not None else None
    keep = set(only_hosts) if only_hosts is not None else None
    link = link_gbytes(fabric.link)
    rows: list[tuple[str, str, NodeType]] = []
    leaves: dict[str, tuple[str, ...]] = {}
    for leaf in fabric.leaves.values():
        nt = fabric.node_types[leaf.node_type]
        if gpu_type is not None and nt.gpu_type != gpu_type:
            continue
        members = tuple(h for h in leaf.hosts if keep is None or h in keep)
        rows.extend((h, leaf.name, nt) for h in members)
        leaves[leaf.name] = members
    hosts = _host_states(rows, live)
    spines: dict[str, list[str]] = {name: [] for name in fabric.leaves}
    uplink: dict[str, float] = {name: 0.0 for name in fabric.leaves}
    for sp in fabric.spines.values():
        for leaf_name in sp.leaves:
            spines[leaf_name].append(sp.name)
            if sp.uplinks_per_leaf:
                uplink[leaf_name] += sp.uplinks_per_leaf * link
    for leaf in fabric.leaves.values():
        if not uplink[leaf.name]:  # not declared: assume a non-blocking leaf
            nt = fabric.node_types[leaf.node_type]
            uplink[leaf.name] = len(leaf.hosts) * max(len(nt.nics), 1) * link
    domains = {h: d for d, hs in getattr(fabric, "nvlink_domains", {}).items() if len(hs) > 1 for h in hs}
    return ClusterView(hosts=hosts, leaves=leaves, leaf_spines={k: tuple(v) for k, v in spines.items()},
                       node_types=dict(fabric.node_types), link_gbytes=link, leaf_uplink_gbytes=uplink,
                       live=live is not None, source=str(fabric.source), domain_of=domains)


def _host_states(rows: Iterable[tuple[str, str, NodeType]], live: Mapping[str, NodeInfo] | None
                 ) -> dict[str, HostState]:
    """host -> its state, for (host, leaf, node type) rows: all free without live state (idle); nothing free when
    Slurm does not report the host or it takes no new job (`NodeInfo.schedulable`); else the free GPUs of the node
    type's kind (capped at the type's count), CPUs and memory.

    Why one loop with the rule spelled out, not a call per host: a 16k-host view builds 16k states per plan,
    and calls, properties and `sum` over one-entry dicts were two thirds of its time (issue 15's 10 ms goal);
    the collector is paused as the states are acyclic tuples. tests/unit/planner/test_host_states.py holds the
    loop to `NodeInfo`'s own properties on every state and flag."""
    with gc_paused():
        return _states(rows, live)


def _states(rows: Iterable[tuple[str, str, NodeType]], live: Mapping[str, NodeInfo] | None
            ) -> dict[str, HostState]:
    new = tuple.__new__
    hosts: dict[str, HostState] = {}
    last = None
    if live is None:
        for h, leaf, nt in rows:
            hosts[h] = new(HostState, (h, leaf, nt.name, nt.gpus, nt.gpus, nt.cpus, nt.memory_mb))
        return hosts
    get = live.get
    down_states, down_flags = UNSCHEDULABLE_STATES, UNSCHEDULABLE_FLAGS
    for h, leaf, nt in rows:
        if nt is not last:
            last, name, gpus, kind = nt, nt.name, nt.gpus, nt.gpu_type
        n = get(h)
        if n is None or n.state in down_states or (n.flags and not down_flags.isdisjoint(n.flags)):
            hosts[h] = new(HostState, (h, leaf, name, gpus, 0, 0, 0))
            continue
        have, used = n.gpus_by_type, n.gpus_used_by_type
        free = have.get(kind)  # the common node: one GPU kind, the node type's, and only it in use
        if free is None or len(have) != 1 or (used and (len(used) != 1 or kind not in used)):
            free = _free_gpus(have, used, kind)
        elif used:
            free -= used[kind]
        cpus, mem = n.cpus - n.cpus_alloc, n.memory_mb - n.memory_alloc_mb
        if (cpus <= 0 or mem <= 0) and ((cpus <= 0 < n.cpus) or (mem <= 0 < n.memory_mb)):
            free = 0   # no CPU or memory left: its GPUs start no job
        hosts[h] = new(HostState, (h, leaf, name, gpus, (gpus if free > gpus else free) if free > 0 else 0,
                                   cpus if cpus > 0 else 0, mem if mem > 0 else 0))
    return hosts


def _free_gpus(have: Mapping[str, int], used: Mapping[str, int], kind: str | None) -> int:
    """Free GPUs of a node for a node type whose GPUs are `kind`: with one GPU kind, all the node's free GPUs,
    whatever Slurm calls them; with none or several, the free GPUs of `kind`, if the node has them."""
    if len(have) == 1:
        (free,) = have.values()
        return free - sum(used.values())
    free = sum(have.values()) - sum(used.values())
    typed = have.get(kind)
    return free if typed is None else min(typed - used.get(kind, 0), free)


def from_topology(t, node_types: Mapping[str, NodeType], nodes: Iterable[NodeInfo] | None = None, *,
                  gpu_type: str | None = None, only_hosts: Iterable[str] | None = None) -> ClusterView:
    """The view derived from the topology graph (`slurmtools.topology`): leaves are level-0 switches, a host
    belongs to its primary leaf, a leaf's uplink capacity is the summed cabling to level-1 switches, and the
    nearest HCAs per GPU come from the graph's PCIe distances. CPU and memory sizes come from `node_types`
    (the fabric file's node types), which the graph names on each host."""
    from slurmtools.topology import queries as q

    live = {n.name: n for n in nodes} if nodes is not None else None
    keep = set(only_hosts) if only_hosts is not None else None
    levels = q.switch_levels(t)
    fv = q.fabric_view(t)
    leaves: dict[str, list[str]] = {name: [] for name, lv in sorted(levels.items(), key=lambda kv: _nat(kv[0]))
                                    if lv == 0}
    rows: list[tuple[str, str, NodeType]] = []
    nearest: dict[str, dict[int, tuple[str, ...]]] = {}
    host_links: list[float] = []
    for hv in sorted(t.hosts(), key=lambda h: _nat(h.name)):
        nt = node_types.get(hv.node_type or "")
        if nt is None or (gpu_type is not None and nt.gpu_type != gpu_type):
            continue
        if keep is not None and hv.name not in keep:
            continue
        leaf = q.primary_leaf(t, hv.name)
        if leaf is None:
            continue
        rows.append((hv.name, leaf, nt))
        leaves[leaf].append(hv.name)
        if nt.name not in nearest:
            nearest[nt.name] = {g: tuple(v) for g, v in q.nearest_nics(t, hv.name).items()}
            host_links.append(fv.edges[f"host:{hv.name}", f"switch:{leaf}"]["gbytes"] / max(len(nt.nics), 1))
    hosts = _host_states(rows, live)
    spines: dict[str, tuple[str, ...]] = {}
    uplink: dict[str, float] = {}
    for leaf in leaves:
        ups = [(w[7:], d["gbytes"]) for w, d in fv.adj[f"switch:{leaf}"].items()
               if w.startswith("switch:") and levels.get(w[7:]) == 1]
        spines[leaf] = tuple(sorted((u for u, _ in ups), key=_nat))
        uplink[leaf] = sum(g for _, g in ups) or float("inf")
    link = host_links[0] if host_links else 0.0
    domains = {h: d.name for d in q.nvlink_domains(t) if d.multi_node for h in d.hosts}
    return ClusterView(hosts=hosts, leaves={k: tuple(v) for k, v in leaves.items() if v}, leaf_spines=spines,
                       node_types=dict(node_types), link_gbytes=link, leaf_uplink_gbytes=uplink,
                       live=live is not None, source=f"topology graph {t.name}", nearest=nearest,
                       domain_of=domains)


def from_declared(fabric: Fabric, nodes: Iterable[NodeInfo] | None = None, *, gpu_type: str | None = None,
                  only_hosts: Iterable[str] | None = None,
                  nearest_of: Callable[[NodeType], Mapping[int, tuple[str, ...]]] | None = None
                  ) -> ClusterView | None:
    """`from_topology(build_site(fabric), fabric.node_types, ...)` computed from the fabric file alone, or None
    where this shortcut cannot promise the same view (then build the graph).

    Why: building the graph of a 16k-host site (every host's CPUs, PCIe switches, GPUs, NICs and NVSwitches, half
    a million vertices) took seconds per `slurmtools plan`, and the view needs none of it but each node type's
    nearest HCAs, which one host's graph gives. The cases kept to the graph: rail leaves (a host's NICs on several
    switches), a host listed twice, a spine listing a leaf twice, an NVLink domain named like a host,
    and link speeds whose GB/s are not exact binary fractions (sums could round in another order).
    tests/unit/planner/test_declared_view.py compares both on every fabric it builds. `nearest_of(node type)`
    gives the nearest HCAs of its GPUs as `nearest_of_type` does (default: that function; the planner's I/O layer
    passes one that keeps its answers on disk)."""
    lay = _declared_layout(fabric)
    if lay is None:
        return None
    live = {n.name: n for n in nodes} if nodes is not None else None
    if gpu_type is None and only_hosts is None:  # the whole fabric: rows and leaves as the layout holds them
        rows, leaves, types = lay.order, lay.members, lay.types
    else:
        keep = set(only_hosts) if only_hosts is not None else None
        rows = tuple(r for r in lay.order
                     if (gpu_type is None or r[2].gpu_type == gpu_type) and (keep is None or r[0] in keep))
        leaves, types = _grouped(rows, lay.leaves)
    hosts = _host_states(rows, live)
    nearest = {nt.name: lay.nearest(nt, nearest_of) for nt in types}
    # one host's cabling to its leaf over n NICs is n cables: n x link / n is the link (exact for these speeds)
    return ClusterView(hosts=hosts, leaves=leaves, leaf_spines=lay.spines,
                       node_types=dict(fabric.node_types), link_gbytes=lay.link if hosts else 0.0,
                       leaf_uplink_gbytes=lay.uplink, live=live is not None, source=f"topology graph {fabric.name}",
                       nearest=nearest, domain_of=lay.domains)


@dataclass(frozen=True)
class _Layout:
    """What `from_declared` derives from the fabric alone, once per fabric: hosts in the graph's order with their
    leaf and node type, leaves in order, each leaf's spines and uplink capacity, multi-node NVLink domains."""
    order: tuple[tuple[str, str, NodeType], ...]
    leaves: tuple[str, ...]
    members: Mapping[str, tuple[str, ...]]  # leaf -> its hosts in `order`; leaves without hosts are absent
    types: tuple[NodeType, ...]  # the node types of `order`, in order of first appearance
    spines: Mapping[str, tuple[str, ...]]
    uplink: Mapping[str, float]
    domains: Mapping[str, str]
    link: float
    _nearest: dict = field(default_factory=dict, compare=False)

    def nearest(self, nt: NodeType, nearest_of=None) -> Mapping[int, tuple[str, ...]]:
        got = self._nearest.get(nt.name)
        if got is None:
            got = self._nearest[nt.name] = (nearest_of or nearest_of_type)(nt)
        return got


_LAYOUTS: dict[int, tuple[Fabric, _Layout | None]] = {}


def _declared_layout(fabric: Fabric) -> _Layout | None:
    got = _LAYOUTS.get(id(fabric))
    if got is not None and got[0] is fabric:
        return got[1]
    lay = _layout(fabric)
    if len(_LAYOUTS) > 8:
        _LAYOUTS.clear()
    _LAYOUTS[id(fabric)] = (fabric, lay)
    return lay


def _layout(fabric: Fabric) -> _Layout | None:
    from slurmtools.topology.links import IB_LANE_GBYTES, ib_link
    link = ib_link(fabric.link)
    if fabric.rail_leaves or (IB_LANE_GBYTES[link.speed] * 64) % 1 or set(fabric.leaves) & set(fabric.spines):
        return None
    if any(len(set(nt.nics)) != len(nt.nics) for nt in fabric.node_types.values()):
        return None
    leaf_of: dict[str, str] = {}
    for leaf in fabric.leaves.values():
        for h in leaf.hosts:
            if h in leaf_of or h in fabric.nvlink_domains:
                return None
            leaf_of[h] = leaf.name
    for sp in fabric.spines.values():
        if len(set(sp.leaves)) != len(sp.leaves) or not set(sp.leaves) <= set(fabric.leaves):
            return None
    node_types = fabric.node_types
    type_of = {leaf.name: node_types[leaf.node_type] for leaf in fabric.leaves.values()}
    # as the graph lists hosts (natural order), then as from_topology sorts them
    order = tuple((h, leaf_of[h], type_of[leaf_of[h]]) for h in sorted(leaf_of, key=_nat))
    leaves = tuple(sorted(fabric.leaves, key=_nat))
    ups: dict[str, list[tuple[str, float]]] = {name: [] for name in leaves}
    for sp in fabric.spines.values():
        g = ib_link(fabric.link, sp.uplinks_per_leaf or 1).gbytes
        for ln in sp.leaves:
            ups[ln].append((sp.name, g))
    spines = {leaf: tuple(sorted((u for u, _ in ups[leaf]), key=_nat)) for leaf in leaves}
    uplink = {leaf: sum(g for _, g in ups[leaf]) or float("inf") for leaf in leaves}
    domains: dict[str, str] = {}
    declared = fabric.nvlink_domain_of_host()
    for d in sorted(fabric.nvlink_domains, key=_nat):
        members = sorted({h for h in fabric.nvlink_domains[d] if declared.get(h) == d and h in leaf_of
                          and type_of[leaf_of[h]].gpus}, key=_nat)
        if len(members) > 1:
            domains.update({h: d for h in members})
    members, types = _grouped(order, leaves)
    return _Layout(order, leaves, members, types, spines, uplink, domains, link.gbytes)


def _grouped(rows: Iterable[tuple[str, str, NodeType]], leaves: Iterable[str]
             ) -> tuple[dict[str, tuple[str, ...]], tuple[NodeType, ...]]:
    """(leaf -> its hosts in row order, for `leaves` in their order, leaves without hosts left out; the rows' node
    types in order of first appearance), for (host, leaf, node type) rows."""
    grouped: dict[str, list[str]] = {name: [] for name in leaves}
    types: dict[str, NodeType] = {}
    for h, leaf, nt in rows:
        grouped[leaf].append(h)
        types.setdefault(nt.name, nt)
    return {k: tuple(v) for k, v in grouped.items() if v}, tuple(types.values())


def nearest_of_type(nt: NodeType) -> dict[int, tuple[str, ...]]:
    """Nearest HCAs per GPU of a node type, from the graph of one such host (what build_site builds for each; the
    host is named after the type)."""
    from slurmtools.topology import queries as q
    from slurmtools.topology.build_site import build_node
    from slurmtools.topology.graph import Topology

    t = Topology("one host")
    build_node(t, nt.name, nt)
    return {g: tuple(v) for g, v in q.nearest_nics(t, nt.name).items()}
