"""Differential test: `view.from_declared(fabric)` (the planner's view straight from the fabric file) equals
`view.from_topology(build_site(fabric))` (the view through the whole topology graph) on every fabric it accepts,
idle and with live node states, filtered by GPU type and by partition; and it declines the fabrics it cannot
promise that for."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmtools.planner.live import gather
from slurmtools.planner.view import from_declared, from_topology
from slurmtools.resources import example_site
from slurmtools.site import load_site
from slurmtools.slurm.model import NodeInfo
from slurmtools.topology.build_site import build_site
from slurmtools.topology.sitefile import Fabric, Leaf, NodeType, RailLeaf, Spine, load_fabric

DGX = NodeType(name="dgx", gpu_type="h100", gpus=8, sockets=2, cores_per_socket=56, threads_per_core=1,
               memory_mb=2_000_000, nvlink="nvswitch", nvlinks_per_gpu=18, nics=tuple(f"mlx5_{i}" for i in range(8)),
               pcie_switches=4, features=("h100",), nvswitches=4, nvlink_gbytes_per_link=25.0)
PCIE = NodeType(name="l40", gpu_type="l40s", gpus=4, sockets=2, cores_per_socket=32, threads_per_core=2,
                memory_mb=500_000, nvlink="none", nvlinks_per_gpu=0, nics=("mlx5_0", "mlx5_1"), pcie_switches=0,
                features=())
CPU = NodeType(name="cpu", gpu_type="", gpus=0, sockets=2, cores_per_socket=64, threads_per_core=1,
               memory_mb=1_000_000, nvlink="none", nvlinks_per_gpu=0, nics=(), pcie_switches=0, features=())


def _both(fabric: Fabric, nodes=None, **kw):
    return from_declared(fabric, nodes, **kw), from_topology(build_site(fabric), fabric.node_types, nodes, **kw)


def _nodes(fabric: Fabric, draw_state) -> list[NodeInfo]:
    out = []
    for i, h in enumerate(fabric.hosts):
        nt = fabric.node_type_of(h)
        used = draw_state(i) % (nt.gpus + 1) if nt.gpus else 0
        state = ("idle", "mixed", "allocated", "drained", "down")[draw_state(i + 7) % 5]
        out.append(NodeInfo(name=h, state=state, flags=("DRAIN",) if state == "drained" else (), cpus=nt.cpus,
                            cpus_alloc=used, memory_mb=nt.memory_mb, memory_alloc_mb=used * 1000,
                            gpus_by_type={nt.gpu_type: nt.gpus} if nt.gpus else {},
                            gpus_used_by_type={nt.gpu_type: used} if nt.gpus else {}, gpus_used_idx=tuple(range(used)),
                            features=(), partitions=("gpu",)))
    return out


def test_example_site_fabric_same_view_idle_and_live():
    fabric = load_fabric(load_site(example_site()).fabric_path)
    declared, graph = _both(fabric)
    assert declared is not None and declared == graph
    assert declared.nearest == graph.nearest and declared.nearest["dgx-h100"][0]   # compared, not empty
    assert len(declared.hosts) == 16 and len(declared.leaves) == 4
    nodes = _nodes(fabric, lambda i: i * 3)
    declared, graph = _both(fabric, nodes)
    assert declared == graph and declared.live
    assert sorted(s.gpus_free for s in declared.hosts.values()) == sorted(s.gpus_free for s in graph.hosts.values())


def test_gather_plans_on_the_declared_view_and_builds_the_graph_only_when_asked():
    site = load_site(example_site())
    st_ = gather(site, idle=True)
    assert st_._graph == {}   # the plan needs no graph
    assert st_.view == from_topology(build_site(st_.fabric), st_.fabric.node_types)
    g = st_.graph
    assert g is st_.graph and len(g.host_names()) == 16


NAMES = st.sampled_from(["n", "node", "gpu", "a-", "x0"])


@st.composite
def fabrics(draw) -> Fabric:
    """Random declared fabrics: mixed node types, leaves of random sizes and names (natural-order traps like
    n9/n10), spines over random leaf subsets with random uplink counts, NVLink domains over random hosts, racks,
    and sometimes what from_declared must decline (rail leaves, a host under two leaves)."""
    types = {nt.name: nt for nt in draw(st.lists(st.sampled_from([DGX, PCIE, CPU]), min_size=1, max_size=3,
                                                   unique_by=lambda n: n.name))}
    leaves: dict[str, Leaf] = {}
    for i in range(draw(st.integers(1, 6))):
        prefix = draw(NAMES)
        hosts = []
        for _ in range(draw(st.integers(0, 5))):
            n = draw(st.integers(1, 40))
            hosts.append(f"{prefix}{n:0{draw(st.integers(1, 3))}d}")   # n7, n07: equal under natural order
        name = f"leaf{draw(st.integers(0, 30))}" if draw(st.booleans()) else f"sw{i}"
        if name in leaves:
            continue
        taken = {h for lf in leaves.values() for h in lf.hosts}
        hosts = [h for h in hosts if h not in taken]
        leaves[name] = Leaf(name, tuple(dict.fromkeys(hosts)), draw(st.sampled_from(sorted(types))),
                            draw(st.sampled_from([None, "r1", "r2"])))
    spines = {}
    for s in range(draw(st.integers(0, 3))):
        sub = draw(st.lists(st.sampled_from(sorted(leaves)), unique=True))
        spines[f"spine{s}"] = Spine(f"spine{s}", tuple(sub), draw(st.sampled_from([None, 1, 2, 16])))
    all_hosts = [h for lf in leaves.values() for h in lf.hosts]
    domains = {}
    if all_hosts and draw(st.booleans()):
        for d in range(draw(st.integers(1, 3))):
            domains[f"nvl{d}"] = tuple(draw(st.lists(st.sampled_from(all_hosts), unique=True, max_size=4)))
    rails = {}
    if draw(st.integers(0, 9)) == 0 and leaves:
        first = next(iter(leaves))
        rails["rail0"] = RailLeaf("rail0", first, ("mlx5_0",))
    if draw(st.integers(0, 9)) == 0 and len(leaves) > 1 and all_hosts:
        a, b = list(leaves)[:2]
        leaves[b] = replace(leaves[b], hosts=leaves[b].hosts + (all_hosts[0],))
    link = draw(st.sampled_from(["4xNDR", "4xHDR", "2xNDR", "4xEDR"]))
    return Fabric(name="rnd", source=Path("rnd.toml"), link=link, node_types=types, leaves=leaves, spines=spines,
                  racks={}, nvlink_domains=domains, rail_leaves=rails)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabrics(), st.integers(0, 1000), st.sampled_from([None, "h100", "l40s"]), st.booleans())
def test_random_fabrics_same_view_or_declined(fabric, seed, gpu_type, partition):
    hosts = fabric.hosts
    only = hosts[seed % 3::2] if partition else None
    nodes = _nodes(fabric, lambda i: (i + 1) * (seed + 5)) if seed % 2 else None
    declared, graph = _both(fabric, nodes, gpu_type=gpu_type, only_hosts=only)
    duplicated = len(set(hosts)) != len(hosts)
    if fabric.rail_leaves or duplicated:
        assert declared is None
        return
    assert declared is not None
    assert declared == graph
    assert dict(declared.leaves) == dict(graph.leaves) and list(declared.leaves) == list(graph.leaves)
    assert list(declared.hosts) == list(graph.hosts)


def test_names_any_provider_accepts_sort_in_both_views():
    """Host and switch names with a superscript digit, and a digit run past int()'s limit, sort by the graph's own
    key (`topology.names.natural`) in the planner too: both views are built and agree (the planner's own sort
    key used to pass `²` and 5000-digit runs to int(), a traceback)."""
    long = "9" * 5000
    leaves = {"sw²": Leaf("sw²", ("h²", "h1²", f"h{long}"), "dgx"), "sw1": Leaf("sw1", ("h2", "h10"), "dgx")}
    fabric = Fabric(name="odd", source=Path("odd.toml"), link="4xNDR", node_types={"dgx": DGX}, leaves=leaves,
                    spines={"core": Spine("core", ("sw²", "sw1"), None)}, racks={}, nvlink_domains={}, rail_leaves={})
    declared, graph = _both(fabric, None)
    assert declared is not None and declared == graph
    assert list(declared.leaves) == ["sw1", "sw²"]
    assert list(declared.hosts) == ["h1²", "h2", "h10", f"h{long}", "h²"]   # a run too long for int() sorts as text
