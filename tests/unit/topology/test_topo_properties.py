"""Property tests on random fabrics and random host layouts: round trips, and queries that must agree."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmtools.hostlist import expand
from slurmtools.topology import queries as q
from slurmtools.topology.checks import check_gres, diff, lint
from slurmtools.topology.graph import Topology, ib_link
from slurmtools.topology.render_slurm import render_gres_conf, render_topology_conf

SPEEDS = ("HDR", "NDR", "EDR")


@st.composite
def fabrics(draw) -> Topology:
    """A random two- or three-level tree: each leaf under a random non-empty set of spines, spines under cores."""
    t = Topology("rnd")
    n_leaves = draw(st.integers(1, 6))
    n_spines = draw(st.integers(0, 4))
    n_cores = draw(st.integers(0, 2)) if n_spines else 0
    host = 0
    for lf in range(n_leaves):
        t.add_switch(f"leaf{lf}")
        for _ in range(draw(st.integers(1, 5))):
            host += 1
            h = f"n{host:03d}"
            for r in range(draw(st.integers(1, 3))):
                nic = t.add_nic(h, f"mlx5_{r}")
                t.link(nic, f"switch:leaf{lf}", ib_link(f"4x{draw(st.sampled_from(SPEEDS))}"))
    for s in range(n_spines):
        t.add_switch(f"spine{s}")
    for lf in range(n_leaves):
        if n_spines:
            ups = draw(st.sets(st.integers(0, n_spines - 1), min_size=1))
            for s in ups:
                t.link(f"switch:leaf{lf}", f"switch:spine{s}", ib_link("4xNDR", draw(st.integers(1, 8))))
    for s in range(n_spines):  # no spine without a leaf: lint would rightly call it an orphan
        if not t.g.adj[f"switch:spine{s}"]:
            t.link("switch:leaf0", f"switch:spine{s}", ib_link("4xNDR"))
    for c in range(n_cores):
        t.add_switch(f"core{c}")
    for s in range(n_spines if n_cores else 0):
        for c in draw(st.sets(st.integers(0, n_cores - 1), min_size=1)):
            t.link(f"switch:spine{s}", f"switch:core{c}", ib_link("4xNDR", draw(st.integers(1, 4))))
    for c in range(n_cores):
        if not t.g.adj[f"switch:core{c}"]:
            t.link("switch:spine0", f"switch:core{c}", ib_link("4xNDR"))
    return t


@st.composite
def hosts_inside(draw) -> Topology:
    """One random host: sockets, PCIe switches under them, GPUs and NICs under switches or sockets, and either a
    random symmetric NVLink mesh or an NVSwitch board."""
    t = Topology("box")
    sockets = draw(st.integers(1, 4))
    cpus = []
    for s in range(sockets):
        cpus.append(t.add_cpu("h", s, s, cpus=range(s * 4, s * 4 + 4), cores=range(s * 4, s * 4 + 4)))
    for a in range(sockets):
        for b in range(a + 1, sockets):
            t.link_smp(cpus[a], cpus[b])
    parents = list(cpus)
    for i in range(draw(st.integers(0, 4))):
        parents.append(t.add_pcie_switch("h", i, parent=draw(st.sampled_from(cpus))))
    n_gpus = draw(st.integers(1, 8))
    # device minors as an NVML capture states them (the driver's numbering, not the index), or unknown
    minors = draw(st.one_of(st.none(), st.permutations(range(n_gpus)).map(lambda p: [2 * m + 1 for m in p])))
    gpus = [t.add_gpu("h", g, gpu_type="x", parent=draw(st.sampled_from(parents)),
                      minor=None if minors is None else minors[g]) for g in range(n_gpus)]
    for n in range(draw(st.integers(0, 4))):
        t.add_nic("h", f"mlx5_{n}", parent=draw(st.sampled_from(parents)))
    if draw(st.booleans()):
        sw = t.add_nvswitch("h", 0)
        links = draw(st.integers(1, 18))
        for g in gpus:
            t.link_nvlink(g, sw, links)
    else:
        for a in range(n_gpus):
            for b in range(a + 1, n_gpus):
                k = draw(st.integers(0, 4))
                if k:
                    t.link_nvlink(gpus[a], gpus[b], k)
    return t


def _tree(text: str) -> dict[str, tuple[list[str], list[str]]]:
    out = {}
    for line in text.splitlines():
        if line.startswith("SwitchName="):
            kv = dict(p.split("=", 1) for p in line.split())
            out[kv["SwitchName"]] = (expand(kv.get("Nodes", "")), expand(kv.get("Switches", "")))
    return out


settings.register_profile("topo", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(settings.get_profile("topo"))
@given(fabrics())
def test_random_fabric_round_trips_and_agrees_with_itself(t):
    back = Topology.from_json(t.to_json())
    assert back.same_as(t)
    assert diff(t, back) == [] and lint(t) == []
    tree = _tree(render_topology_conf(t))
    hosts = t.host_names()
    placed = [h for nodes, _ in tree.values() for h in nodes]
    assert sorted(placed) == sorted(hosts)  # every host under exactly one leaf
    for name, (nodes, children) in tree.items():
        below = set(nodes).union(*(set(q.hosts_under(t, c)) for c in children)) if children else set(nodes)
        # a switch covers at least what its listed children cover; rail/secondary leaves may add more hosts
        assert below <= set(q.hosts_under(t, name))
    for a in hosts[:4]:
        for b in hosts[-4:]:
            p, r = q.path_between(t, a, b), q.path_between(t, b, a)
            assert (p is None) == (r is None)
            if p is None:
                continue
            assert (p.hops, p.gbytes) == (r.hops, r.gbytes)
            if a != b:
                assert p.hops == len(p.via) + 1
                shared = set(q.leaves_of(t, a)) & set(q.leaves_of(t, b))
                assert (p.hops == 2) == bool(shared)
                fv = q.fabric_view(t)
                assert p.gbytes <= min(sum(d["gbytes"] for d in fv.adj[f"host:{x}"].values()) for x in (a, b))
    levels = q.oversubscription(t)
    for lo, hi in zip(levels, levels[1:]):
        if hi.level == lo.level + 1:
            assert abs(lo.up_gbytes - hi.down_gbytes) < 1e-6  # every uplink is the next level's downlink


@settings(settings.get_profile("topo"))
@given(hosts_inside())
def test_random_host_queries_and_gres_round_trip(t):
    gpus = t.gpus("h")
    m = q.nvlink_matrix(t, "h")
    assert all(m[i][i] == -1 for i in range(len(gpus)))
    assert all(m[i][j] == m[j][i] for i in range(len(gpus)) for j in range(len(gpus)))
    islands = q.nvlink_islands(t, "h")
    assert sorted(i for isl in islands for i in isl) == [g.index for g in gpus]
    for isl in islands:  # GPUs in different islands share no NVLink
        others = [g.index for g in gpus if g.index not in isl]
        assert all(m[a][b] == 0 for a in isl for b in others)
    cpus = q.local_cpus(t, "h")
    numa = q.gpu_numa(t, "h")
    for g in gpus:
        assert len(numa[g.index]) == 1
        assert cpus[g.index] == tuple(range(numa[g.index][0] * 4, numa[g.index][0] * 4 + 4))
    nics = q.nearest_nics(t, "h")
    names = {n.name for n in t.nics("h")}
    for g in gpus:
        assert set(nics[g.index]) <= names and (bool(nics[g.index]) == bool(names))
    # File= by minor where the graph knows them, else by index as the admin states
    known = all(g.minor is not None for g in gpus)
    text = render_gres_conf(t) if known else render_gres_conf(t, "/dev/nvidia{index}")
    assert check_gres(t, text) == []
    files = [int(f) for f in re.findall(r"File=/dev/nvidia(\d+)", text)]
    assert files == [g.minor if known else g.index for g in gpus]
    assert Topology.from_json(t.to_json()).same_as(t)


# ------------------------------------------------------------------------ nearest NIC by NCCL path class

@st.composite
def pcie_trees(draw):
    """A random host: NUMA nodes (pairs randomly on one socket), PCIe host bridges and nested switches under
    them, GPUs and NICs anywhere in the trees. Returns the graph and the tree as parent pointers."""
    t = Topology("box")
    n_cpu = draw(st.integers(1, 3))
    parent: dict[str, str | None] = {}
    kind: dict[str, str] = {}
    socket = [draw(st.integers(0, 1)) for _ in range(n_cpu)]
    for c in range(n_cpu):
        vid = t.add_cpu("h", c, cpus=range(c * 4, c * 4 + 4))
        parent[vid], kind[vid] = None, "cpu"
    cpus = [v for v in parent]
    for a in range(n_cpu):
        for b in range(a + 1, n_cpu):
            t.link_smp(cpus[a], cpus[b], within_socket=socket[a] == socket[b])
    inner = list(cpus)
    for i in range(draw(st.integers(0, 3))):
        up = draw(st.sampled_from(cpus))
        vid = t.add_pcie_bridge("h", i, parent=up)
        parent[vid], kind[vid] = up, "pcie_bridge"
        inner.append(vid)
    for i in range(draw(st.integers(0, 6))):
        up = draw(st.sampled_from(inner))
        vid = t.add_pcie_switch("h", i, parent=up)
        parent[vid], kind[vid] = up, "pcie_switch"
        inner.append(vid)
    for g in range(draw(st.integers(1, 6))):
        up = draw(st.sampled_from(inner))
        parent[t.add_gpu("h", g, parent=up)] = up
    for n in range(draw(st.integers(1, 6))):
        up = draw(st.sampled_from(inner))
        parent[t.add_nic("h", f"mlx5_{n}", parent=up)] = up
    return t, parent, kind, socket


def _brute_class(a: str, b: str, parent, kind, socket, cpus) -> str:
    """NCCL's path types read straight off the parent pointers: SYS across sockets, NODE between NUMA nodes of
    a socket or host bridges of a NUMA node, PHB through a host bridge (or a CPU with no bridges stated), PIX
    through one PCIe switch, PXB through more."""
    def up(x):
        out = []
        while parent[x] is not None:
            x = parent[x]
            out.append(x)
        return out
    ua, ub = up(a), up(b)
    if ua[-1] != ub[-1]:
        return "NODE" if socket[cpus.index(ua[-1])] == socket[cpus.index(ub[-1])] else "SYS"
    lca = next(x for x in ua if x in ub)
    path = ua[:ua.index(lca) + 1] + ub[:ub.index(lca)]
    if kind[lca] == "cpu":
        return "NODE" if any(kind.get(x) == "pcie_bridge" and parent[x] == lca for x in parent) else "PHB"
    if any(kind[x] == "pcie_bridge" for x in path):
        return "PHB"
    return "PIX" if sum(kind[x] == "pcie_switch" for x in path) <= 1 else "PXB"


@settings(settings.get_profile("topo"))
@given(pcie_trees())
def test_nearest_nic_is_the_brute_force_ranking_by_path_class(tree):
    t, parent, kind, socket = tree
    cpus = [v for v in parent if kind.get(v) == "cpu"]
    order = ("PIX", "PXB", "PHB", "NODE", "SYS")
    near = q.nearest_nic_paths(t, "h")
    for g in t.gpus("h"):
        classes = {n.name: _brute_class(g.vid, n.vid, parent, kind, socket, cpus) for n in t.nics("h")}
        best = min(classes.values(), key=order.index)
        assert sorted(p.nic for p in near[g.index]) == sorted(n for n, c in classes.items() if c == best)
        assert {p.path for p in near[g.index]} == {best}
        assert all(q.path_class(t, g.vid, f"nic:h:{n}") == c for n, c in classes.items())
