"""Parallel cables that do not all run at one rate (one trained down to 4xHDR, or to 1x width) are each taken at
their own rate: the graph's capacity between the two ends, which the planner, `topo show` and the oversubscription
query sum, is the sum of the cables' rates as ibnetdiscover prints them (width x speed), never all of them at the
rate most of them run at. Switch to switch and switch to host, whichever end the dump lists first.

The dumps are composed by the helpers of test_ibnet_warnings, in the layout infiniband-diags writes, every cable
listed from both ends."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.errors import ParseError
from slurmtools.topology import queries as q
from slurmtools.topology import graph
from slurmtools.topology.graph import IbLink, Topology
from slurmtools.topology.ibnet import _read_lines, compute_fabric, parse_ibnetdiscover, to_topology
from slurmtools.topology.render_graph import render_graphml
from slurmtools.topology.render_slurm import render_topology_conf

from .test_ibnet_warnings import GPU01, GPU02, S_LEAF, S_SPINE, Node, dump, fabric, warnings_of

UP = ("switch:leaf01", "switch:spine01")


def imported(text: str, lines: bool = False) -> Topology:
    """The graph `topo import` builds from a dump; `lines`: through the line-by-line reader."""
    f = _read_lines(text, "m.out") if lines else parse_ibnetdiscover(text, "m.out")
    return to_topology(compute_fabric(f))


def spine_first(nodes: list[Node], cables: list) -> tuple[list[Node], list]:
    """The same fabric with the spine's entry before the leaf's and every cable named from its other end."""
    order = [S_SPINE] + [n for n in nodes if n != S_SPINE]
    return order, [(b, bp, a, ap, r) for a, ap, b, bp, r in cables]


@pytest.mark.parametrize("uplinks, gbytes", [
    (("4xNDR", "4xNDR", "4xNDR", "4xHDR"), 175.0),           # one cable trained down a speed: 3 x 50 + 25
    (("4xNDR", "1xNDR", "4xNDR", "4xNDR"), 162.5),           # ... or to one lane: 3 x 50 + 12.5
    (("4xHDR", "2xHDR", "4xHDR"), 62.5),                     # 25 + 12.5 + 25
    (("12xEDR", "8xEDR"), 62.5),                             # a tie (the slower names the bundle): 37.5 + 25
    (("1xSDR", "4xQDR", "4xQDR"), 8.25),                     # 0.25 + 4 + 4
    (("4xFDR10", "4xFDR", "4xFDR"), 18.6),                   # 5 + 6.8 + 6.8
    (("4xXDR", "4xNDR", "4xXDR", "2xXDR"), 300.0),           # 100 + 50 + 100 + 50
    (("4xDDR", "4xEDR", "4xEDR"), 27.0),                     # 2 + 12.5 + 12.5
])
@pytest.mark.parametrize("order", ["leaf first", "spine first"])
@pytest.mark.parametrize("lines", [False, True], ids=["entry reader", "line reader"])
def test_a_switch_bundle_at_mixed_rates_is_the_sum_of_its_cables(uplinks, gbytes, order, lines):
    nodes, cables = fabric(uplinks=uplinks, rate="4xNDR")
    if order == "spine first":
        nodes, cables = spine_first(nodes, cables)
    t = imported(dump(nodes, cables), lines)
    e = t.edge(*UP)
    assert e.gbytes == pytest.approx(gbytes)
    assert e.count == len(uplinks) and sorted(e.cables) == sorted(uplinks)     # each cable at its own rate
    assert q.fabric_view(t).edges[UP]["gbytes"] == pytest.approx(gbytes)
    assert Topology.from_json(t.to_json()).same_as(t)                         # and JSON keeps every rate


@pytest.mark.parametrize("slow", ["4xHDR", "1xNDR", "2xNDR"])
@pytest.mark.parametrize("slow_port", [1, 2])
@pytest.mark.parametrize("order", ["switch first", "adapter first"])
def test_a_host_adapter_with_a_slow_port_counts_each_port_at_its_rate(slow, slow_port, order):
    """A dual-port adapter with both ports on one leaf, one port trained down: the NIC's one edge to the leaf kept
    whichever port the dump listed last (the other cable was lost, whatever its rate); now both, each at its own
    rate, and the slow port is still told."""
    dual = Node("ca", "0c42a10300aa0011", "gpu01 mlx5_0", 2)
    rate = {1: "4xNDR", 2: "4xNDR", slow_port: slow}
    nodes = [S_LEAF, S_SPINE, dual, GPU02]
    cables = [(S_LEAF, 1, dual, 1, rate[1]), (S_LEAF, 3, dual, 2, rate[2]), (S_LEAF, 2, GPU02, 1, "4xNDR"),
              (S_LEAF, 21, S_SPINE, 1, "4xNDR"), (S_LEAF, 22, S_SPINE, 2, "4xNDR")]
    if order == "adapter first":
        nodes = [dual, GPU02, S_SPINE, S_LEAF]
        cables = [(b, bp, a, ap, r) for a, ap, b, bp, r in cables]
    text = dump(nodes, cables)
    cf = compute_fabric(parse_ibnetdiscover(text, "h.out"))
    assert [(h.host, h.name, h.link) for h, _ in cf.slow_ports] == [("gpu01", "mlx5_0", slow)]
    t = to_topology(cf)
    want = 50 + IbLink(int(slow[0]), slow[2:]).gbytes
    e = t.edge("nic:gpu01:mlx5_0", "switch:leaf01")
    assert e.gbytes == want and e.count == 2 and sorted(e.cables) == sorted(["4xNDR", slow])
    assert q.fabric_view(t).edges["host:gpu01", "switch:leaf01"]["gbytes"] == want
    assert q.oversubscription(t)[0].down_gbytes == want + 50


def test_separate_adapters_of_a_host_keep_their_own_rates():
    """Two adapters of one host on one leaf, one slower: two NIC edges, summed for the host (as before)."""
    gpu01_1 = Node("ca", "0c42a10300aa0021", "gpu01 mlx5_1", 1)
    t = imported(dump(*fabric([gpu01_1], [(S_LEAF, 3, gpu01_1, 1, "4xHDR")], rate="4xNDR")))
    assert t.edge("nic:gpu01:mlx5_1", "switch:leaf01") == IbLink(4, "HDR", 1)
    assert q.fabric_view(t).edges["host:gpu01", "switch:leaf01"]["gbytes"] == 75.0


def test_oversubscription_and_topo_show_report_the_real_capacity(tmp_path):
    """A leaf with 100 GB/s of hosts under it and uplinks at 4xNDR and 4xHDR: 75 GB/s up, 1.33:1, not the
    2 x 4xHDR = 50 GB/s (2:1) the bundle was taken as."""
    p = tmp_path / "fabric.out"
    p.write_text(dump(*fabric(uplinks=("4xNDR", "4xHDR"), rate="4xNDR")))
    t = imported(p.read_text())
    leaf = q.oversubscription(t)[0]
    assert (leaf.level, leaf.down_gbytes, leaf.up_gbytes) == (0, 100.0, 75.0)
    assert leaf.ratio == pytest.approx(4 / 3) and leaf.worst == pytest.approx(4 / 3)
    r = CliRunner().invoke(app, ["topo", "show", str(p), "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)["levels"][0]
    assert (got["down_gbytes"], got["up_gbytes"]) == (100.0, 75.0)
    r = CliRunner().invoke(app, ["topo", "show", str(p)])
    assert "level 0: 1 switches, 100 GB/s down, 75 GB/s up, 1.33:1 oversubscribed" in r.stdout


def test_a_path_through_a_degraded_bundle_is_as_wide_as_its_cables():
    """Hosts on two leaves, each leaf to the spine over 4xNDR + 2 x 1xNDR: 75 GB/s a side, so the hosts' own
    50 GB/s links are the bottleneck (the bundle was taken as 3 x 1xNDR = 37.5)."""
    leaf2 = Node("switch", "fc6a1c0300e1a002", "MF0;leaf02:MQM8700/U1")
    nodes = [S_LEAF, leaf2, S_SPINE, GPU01, GPU02]
    cables = [(S_LEAF, 1, GPU01, 1, "4xNDR"), (leaf2, 1, GPU02, 1, "4xNDR")]
    for i, (lf, r) in enumerate([(lf, r) for lf in (S_LEAF, leaf2) for r in ("4xNDR", "1xNDR", "1xNDR")]):
        cables.append((lf, 21 + i, S_SPINE, 1 + i, r))
    t = imported(dump(nodes, cables))
    p = q.path_between(t, "gpu01", "gpu02")
    assert (p.hops, p.gbytes) == (4, 50.0)


def test_the_warning_says_the_capacity_taken(tmp_path):
    said = warnings_of(tmp_path, dump(*fabric(uplinks=("4xNDR", "4xNDR", "4xHDR", "4xNDR"), rate="4xNDR")))
    assert said == ["cables between leaf01 and spine01 run at 4xNDR (3) and 4xHDR (1): a degraded cable? the link "
                    "is taken as 3+1 cables at their own rates, 175 GB/s in all"]


def test_uniform_bundles_are_written_as_before(tmp_path):
    """A bundle at one rate is the same edge, JSON, GraphML and topology.conf as before bundles had rates; a mixed
    one changes the edge only (topology.conf names no rates)."""
    t = imported(dump(*fabric(uplinks=("4xNDR",) * 4, rate="4xNDR")))
    assert t.edge(*UP) == IbLink(4, "NDR", 4) and getattr(t.edge(*UP), "cables", None) is None
    edge = next(e for e in t.to_dict()["edges"] if {e["a"], e["b"]} == set(UP))
    assert set(edge) == {"a", "b", "kind", "width", "speed", "count"}
    assert "cables" not in render_graphml(t)
    mixed = imported(dump(*fabric(uplinks=("4xNDR",) * 3 + ("4xHDR",), rate="4xNDR")))
    assert render_topology_conf(mixed) == render_topology_conf(t)


def test_graphml_lists_each_cable_of_a_mixed_bundle():
    mixed = imported(dump(*fabric(uplinks=("4xNDR",) * 3 + ("4xHDR",), rate="4xNDR")))
    assert "4xNDR,4xNDR,4xNDR,4xHDR" in render_graphml(mixed)


# ------------------------------------------------------------------------------------------------ the graph

def test_linking_a_cable_at_another_rate_adds_it_at_its_own_rate():
    """`Topology.link` on two linked vertices with an IB cable at another rate replaced the bundle with that one
    cable; now it joins the bundle, in any order, in `link` and the bulk `add_many` alike."""
    t = Topology()
    a, b = t.add_switch("leaf1", 0), t.add_switch("spine1", 1)
    t.link_ib(a, b, 4, "NDR", count=2)
    t.link_ib(a, b, 1, "NDR")
    t.link_ib(a, b, 4, "NDR")
    assert t.edge(a, b) == IbLink(4, "NDR", 4, ("4xNDR", "4xNDR", "4xNDR", "1xNDR"))
    assert t.edge(a, b).gbytes == 162.5 and t.edge(a, b).rates() == ((4, "NDR", 3), (1, "NDR", 1))
    bulk = Topology()
    bulk.add_many([t.vertex(a), t.vertex(b)], [(b, a, IbLink(4, "NDR")), (a, b, IbLink(1, "NDR")),
                                               (a, b, IbLink(4, "NDR", 2))])
    assert bulk.same_as(t)


def test_a_bundle_is_named_the_same_whatever_order_its_cables_come_in():
    ib_bundle = graph.ib_bundle
    one = ib_bundle([(4, "HDR", 1), (4, "NDR", 3)])
    assert one == ib_bundle([(4, "NDR", 2), (4, "HDR", 1), (4, "NDR", 1)])
    assert one == IbLink(4, "NDR", 4, ("4xHDR", "4xNDR", "4xNDR", "4xndr"))
    assert one.cables == ("4xNDR", "4xNDR", "4xNDR", "4xHDR")
    assert ib_bundle([(4, "NDR", 2)]) == IbLink(4, "NDR", 2) == IbLink(4, "NDR", 2, ("4xNDR", "4xNDR"))
    assert ib_bundle([(4, "NDR", 1), (4, "HDR", 1)]) == IbLink(4, "HDR", 2, ("4xNDR", "4xHDR"))   # tie: slower


@pytest.mark.parametrize("cables, why", [
    ('["4xNDR", "4xNDR"]', "count 2"),                      # count 3 says otherwise
    ('["4xNDR", "4xHDR", "4xHDR"]', "speed HDR"),           # most cables run at 4xHDR, the edge says 4xNDR
    ('[]', "empty"),
    ('["4xfast", "4xNDR", "4xNDR"]', "4xNDR"),
    ('["3xNDR", "4xNDR", "4xNDR"]', "widths"),
    ('"4xNDR"', "one per cable"),
    ('[4, 4, 4]', "one per cable"),
])
def test_a_topology_json_with_a_bundle_its_cables_contradict_is_refused(cables, why):
    doc = ('{"format": "slurmtools.topology/1", "name": "x", "vertices": [{"kind": "switch", "name": "a"}, '
           '{"kind": "switch", "name": "b"}], "edges": [{"a": "switch:a", "b": "switch:b", "kind": "ib", "width": 4, '
           f'"speed": "NDR", "count": 3, "cables": {cables}}}]}}')
    with pytest.raises(ParseError, match=f"x.json: edges\\[0\\]: .*{why}"):
        Topology.from_json(doc, "x.json")
