"""Differential test: the indexed fabric queries (fabric_index.py, queries.py) answer exactly as the plain walks
they replaced (reference_queries.py), on the real test fabric, the bundled site fabric, a generated rail-optimised
fat tree, and random irregular fabrics (cross links, cycles, hosts on several levels, islands, declared levels)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmtools.cli.topo import load_topology
from slurmtools.topology import queries as q
from slurmtools.topology.graph import Topology, _natural, ib_link
from tests.unit.topology import reference_queries as ref

REPO = Path(__file__).resolve().parents[3]
DUMP = REPO / "tests" / "data" / "topology" / "topograph_ibnetdiscover_example.out.gz"


def _bench_fat_tree(hosts: int) -> Topology:
    spec = importlib.util.spec_from_file_location("bench_topology", REPO / "benchmarks" / "bench_topology.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build_direct(hosts)


def assert_same_answers(t: Topology, pairs: list[tuple[str, str]] | None = None) -> int:
    """Every fabric query, indexed against reference; returns how many answers were compared."""
    n = 0
    hosts = t.host_names()
    for s in t.switches():
        assert q.hosts_under(t, s.name) == ref.hosts_under(t, s.name), s.name
        n += 1
    for h in hosts:
        assert q.uplinks(t, h) == ref.uplinks(t, h), h
        n += 1
    if pairs is None:
        pairs = [(a, b) for a in hosts for b in hosts]
    for a, b in pairs:
        assert q.path_between(t, a, b) == ref.path_between(t, a, b), (a, b)
        n += 1
    assert q.oversubscription(t) == ref.oversubscription(t)
    # the kind and name-order indexes under of_kind / hosts / switches, against a plain scan of the graph
    for kind in ("host", "switch", "nic", "gpu", "nvlink_domain"):
        assert list(t.of_kind(kind)) == [v for _, v in t.g.nodes(data="v") if v.kind == kind]
    assert t.host_names() == [h.name for h in sorted((v for _, v in t.g.nodes(data="v") if v.kind == "host"),
                                                     key=lambda h: _natural(h.name))]
    assert t.switches() == sorted((v for _, v in t.g.nodes(data="v") if v.kind == "switch"),
                                  key=lambda s: _natural(s.name))
    return n + 3


def test_real_superpod_fabric_answers_as_before():
    t = load_topology(str(DUMP))
    hosts = t.host_names()
    pairs = [(a, b) for i, a in enumerate(hosts) for b in hosts[i % 7::7]]   # every host, a seventh of partners
    assert assert_same_answers(t, pairs) > 2000
    # a known answer, so the comparison is not of two empty results
    p = q.path_between(t, "a07-p1-dgx-03-c01", "b05-p1-dgx-05-c01")
    assert (p.hops, p.gbytes, len(p.via)) == (4, 50.0, 3)


def test_bundled_site_fabric_answers_as_before():
    from slurmtools.resources import example_site
    from slurmtools.site import load_site
    from slurmtools.topology.build_site import build_site
    from slurmtools.topology.sitefile import load_fabric

    t = build_site(load_fabric(load_site(example_site()).fabric_path))
    assert len(t.host_names()) == 16
    assert assert_same_answers(t) == 16 * 16 + 16 + len(t.switches()) + 3


def test_generated_fat_tree_answers_as_before():
    t = _bench_fat_tree(512)   # 4 pods of 128 hosts x 8 rails, 32 spines per pod, 512 cores
    hosts = t.host_names()
    pairs = [(hosts[0], b) for b in hosts] + [(a, hosts[-1]) for a in hosts[::17]] + [(hosts[5], hosts[300])]
    assert assert_same_answers(t, pairs) > 1000
    p = q.path_between(t, hosts[0], hosts[-1])
    assert p.hops == 6 and len(p.via) == 5
    assert len(q.hosts_under(t, q.uplinks(t, hosts[0])[2][0])) == 512


SPEEDS = ("HDR", "NDR", "EDR")


@st.composite
def irregular_fabrics(draw) -> Topology:
    """Switches cabled at random (cross links, cycles, islands), some with declared levels; hosts on one or more
    switches of any level, through one or more NICs, at random speeds and cable counts."""
    t = Topology("irregular")
    n_sw = draw(st.integers(1, 9))
    for s in range(n_sw):
        t.add_switch(f"sw{s}", level=draw(st.one_of(st.none(), st.none(), st.integers(0, 3))))
    for a in range(n_sw):
        for b in range(a + 1, n_sw):
            if draw(st.integers(0, 9)) < 4:
                t.link(f"switch:sw{a}", f"switch:sw{b}",
                       ib_link(f"4x{draw(st.sampled_from(SPEEDS))}", draw(st.integers(1, 3))))
    for h in range(draw(st.integers(2, 9))):
        name = f"h{draw(st.sampled_from(['', '0', '00']))}{h}"
        if f"host:{name}" in t:
            continue
        t.add_host(name)
        for r, s in enumerate(draw(st.lists(st.integers(0, n_sw - 1), max_size=3))):
            nic = t.add_nic(name, f"mlx5_{r}")
            t.link(nic, f"switch:sw{s}", ib_link(f"4x{draw(st.sampled_from(SPEEDS))}"))
    return t


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(irregular_fabrics())
def test_random_irregular_fabrics_answer_as_before(t):
    assert assert_same_answers(t) >= len(t.host_names()) ** 2


def test_index_is_rebuilt_when_the_graph_changes():
    t = _bench_fat_tree(64)
    hosts = t.host_names()
    leaf = q.primary_leaf(t, hosts[0])
    before = q.hosts_under(t, leaf)
    t.add_host("zz-new")
    nic = t.add_nic("zz-new", "mlx5_0")
    t.link(nic, f"switch:{leaf}", ib_link("4xNDR"))
    assert q.hosts_under(t, leaf) == before + ["zz-new"] == ref.hosts_under(t, leaf)
    assert q.path_between(t, "zz-new", hosts[-1]) == ref.path_between(t, "zz-new", hosts[-1])


def test_unknown_names_still_fail_naming_them():
    t = _bench_fat_tree(32)
    with pytest.raises(ValueError, match="no switch 'nope'"):
        q.hosts_under(t, "nope")
    with pytest.raises(ValueError, match="no host 'nope'"):
        q.path_between(t, "nope", t.host_names()[0])
