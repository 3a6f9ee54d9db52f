"""What an ibnetdiscover import leaves out of the graph, or cannot show in it, is told: a bundle of switch cables
at mixed rates (a degraded cable), a host port slower than its siblings, adapters cabled back to back beside a
switch fabric, routers, switches no leaf reaches, hosts cut off by --exclude-switch, switches that leave with
--exclude-hca, loopback cables. `compute_fabric` records each as a fact; the CLI says each in one line.

The dumps are composed here in the layout infiniband-diags writes (out_switch, out_ca, out_switch_port,
out_ca_port in rdma-core infiniband-diags/ibnetdiscover.c), every cable listed from both ends."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.cli.topo_providers import build
from slurmtools.errors import ParseError
from slurmtools.topology.ibnet import compute_fabric, parse_ibnetdiscover

LEAF, LEAF2, SPINE, ISLAND = "fc6a1c0300e1a001", "fc6a1c0300e1a002", "fc6a1c0300e1b001", "fc6a1c0300e1c001"
ROUTER = "0002c90300ff0001"
PREFIX = {"switch": "S", "ca": "H", "router": "R"}
HEAD = {"switch": "Switch", "ca": "Ca", "router": "Rt"}


class Node(NamedTuple):
    kind: str
    guid: str
    desc: str
    ports: int = 41


def ca(n: int, desc: str) -> Node:
    return Node("ca", f"0c42a10300aa{n:04x}", desc, 1)


def dump(nodes: list[Node], cables: list[tuple[Node, int, Node, int, str]]) -> str:
    """The dump ibnetdiscover writes for these nodes and cables (a, a_port, b, b_port, rate): an entry per node,
    blank line before each, its port lines in port order, each cable from both ends."""
    ends: dict[str, list[tuple[int, Node, int, str]]] = {n.guid: [] for n in nodes}
    for a, ap, b, bp, rate in cables:
        ends[a.guid].append((ap, b, bp, rate))
        ends[b.guid].append((bp, a, ap, rate))
    lid = {n.guid: i + 1 for i, n in enumerate(nodes)}
    out = ["#\n# Topology file: generated on Mon Dec 18 12:34:08 2023\n#\n"]
    for n in nodes:
        g = n.guid
        idline = {"switch": f"switchguid=0x{g}({g})", "ca": f"caguid=0x{g}", "router": f"rtguid=0x{g}"}[n.kind]
        extra = " enhanced port 0 lid {} lmc 0".format(lid[g]) if n.kind == "switch" else ""
        out.append(f'\nvendid=0x2c9\ndevid=0xd2f0\nsysimgguid=0x{g}\n{idline}\n'
                   f'{HEAD[n.kind]}\t{n.ports} "{PREFIX[n.kind]}-{g}"\t\t# "{n.desc}"{extra}\n')
        for port, far, fport, rate in sorted(ends[g], key=lambda e: e[0]):
            fguid = f"({far.guid.lstrip('0')})" if far.kind == "ca" else ""
            far_end = f'"{PREFIX[far.kind]}-{far.guid}"[{fport}]{fguid}'
            if n.kind == "ca":
                out.append(f'[{port}]({g.lstrip("0")}) \t{far_end}\t\t# lid {lid[g]} lmc 0 "{far.desc}" '
                           f'lid {lid[far.guid]} {rate}\n')
            else:
                out.append(f'[{port}]\t{far_end} \t\t# "{far.desc}" lid {lid[far.guid]} {rate}\n')
    return "".join(out)


S_LEAF = Node("switch", LEAF, "MF0;leaf01:MQM8700/U1")
S_LEAF2 = Node("switch", LEAF2, "MF0;leaf02:MQM8700/U1")
S_SPINE = Node("switch", SPINE, "MF0;spine01:MQM8700/U1")
GPU01, GPU02 = ca(1, "gpu01 mlx5_0"), ca(2, "gpu02 mlx5_0")


def fabric(extra_nodes=(), extra_cables=(), uplinks=("4xEDR", "4xEDR"), rate="4xEDR") -> tuple[list, list]:
    """A leaf with two hosts and parallel uplinks to a spine, plus what a case adds."""
    nodes = [S_LEAF, S_SPINE, GPU01, GPU02, *extra_nodes]
    cables = [(S_LEAF, 1, GPU01, 1, rate), (S_LEAF, 2, GPU02, 1, rate),
              *[(S_LEAF, 21 + i, S_SPINE, 1 + i, r) for i, r in enumerate(uplinks)], *extra_cables]
    return nodes, cables


def warnings_of(tmp_path, text: str, **kw) -> list[str]:
    p = tmp_path / "fabric.out"
    p.write_text(text)
    said: list[str] = []
    build("ibnetdiscover", str(p), warn=said.append, **kw)
    return [w.removeprefix(f"{p}: ") for w in said]


def test_a_clean_fabric_says_nothing(tmp_path):
    text = dump(*fabric())
    cf = compute_fabric(parse_ibnetdiscover(text, "f.out"))
    assert cf.hosts == ["gpu01", "gpu02"] and cf.switch_links == {(LEAF, SPINE): (4, "EDR", 2)}
    assert not (cf.mixed_bundles or cf.slow_ports or cf.back_to_back or cf.cut_off or cf.routers or cf.unreachable
                or cf.with_excluded or cf.loops)
    assert warnings_of(tmp_path, text) == []


@pytest.mark.parametrize("uplinks, rates, main, gbytes", [
    (("4xEDR", "4xDDR", "4xEDR", "4xEDR"), (("4xEDR", 3), ("4xDDR", 1)), "4xEDR", "39.5"),
    (("2xEDR", "4xEDR", "4xEDR", "4xEDR"), (("4xEDR", 3), ("2xEDR", 1)), "4xEDR", "43.75"),
    (("4xEDR", "4xDDR"), (("4xEDR", 1), ("4xDDR", 1)), "4xDDR", "14.5"),          # a tie: the slower, as before
])
def test_a_degraded_cable_in_a_bundle_is_told(tmp_path, uplinks, rates, main, gbytes):
    """A degraded cable in a bundle is a fact of the result and one warning line naming both switches, every rate
    and the capacity the graph takes (each cable at its own rate: 3 x 12.5 + 2 GB/s, not 4 x 12.5)."""
    text = dump(*fabric(uplinks=uplinks))
    cf = compute_fabric(parse_ibnetdiscover(text, "d.out"))
    w, _, sp = main.partition("x")
    assert cf.switch_links == {(LEAF, SPINE): (int(w), sp, len(uplinks))}     # all cables, the main rate
    taken = f"their own rates, {gbytes} GB/s in all"
    assert [(b.lo, b.hi, b.rates, b.taken) for b in cf.mixed_bundles] == [(LEAF, SPINE, rates, taken)]
    assert cf.mixed_bundles[0].link.gbytes == float(gbytes)
    said = " and ".join(f"{r} ({n})" for r, n in rates)
    assert warnings_of(tmp_path, text) == [
        f"cables between leaf01 and spine01 run at {said}: a degraded cable? the link is taken as "
        f"{'+'.join(str(n) for _, n in rates)} cables at {taken}"]


def test_many_mixed_bundles_say_the_first_few_and_how_many_more(tmp_path):
    leaves = [Node("switch", f"fc6a1c0300e1d{i:03x}", f"MF0;leaf1{i:02d}:MQM8700/U1") for i in range(5)]
    hosts = [ca(16 + i, f"gpu1{i:02d} mlx5_0") for i in range(5)]
    cables = [c for i, (lf, h) in enumerate(zip(leaves, hosts))
              for c in ((lf, 1, h, 1, "4xEDR"), (lf, 21, S_SPINE, 1 + 2 * i, "4xEDR"),
                        (lf, 22, S_SPINE, 2 + 2 * i, "4xDDR"))]
    said = warnings_of(tmp_path, dump([*leaves, S_SPINE, *hosts], cables))
    assert [w.split(" run at")[0] for w in said[:3]] == [f"cables between leaf1{i:02d} and spine01" for i in range(3)]
    assert said[3:] == ["and 2 more switch-to-switch bundle(s) whose cables run at mixed rates, each cable taken "
                        "at its own rate"]


def test_a_host_port_slower_than_its_siblings_is_told(tmp_path):
    gpu01_1 = ca(11, "gpu01 mlx5_1")
    nodes, cables = fabric([gpu01_1], [(S_LEAF, 3, gpu01_1, 1, "4xHDR")], rate="4xNDR")
    cf = compute_fabric(parse_ibnetdiscover(dump(nodes, cables), "s.out"))
    assert [(h.host, h.name, h.link, best) for h, best in cf.slow_ports] == [("gpu01", "mlx5_1", "4xHDR", "4xNDR")]
    assert warnings_of(tmp_path, dump(nodes, cables)) == [
        "1 adapter port(s) run slower than the fastest port of their host: gpu01 mlx5_1 at 4xHDR (fastest 4xNDR): "
        "a degraded cable, or a slower card to leave out with --exclude-hca?"]
    # hosts at different rates from one another, each at one rate, are no news
    _, cables = fabric(rate="4xNDR")
    cables[1] = (S_LEAF, 2, GPU02, 1, "4xHDR")
    assert compute_fabric(parse_ibnetdiscover(dump(fabric()[0], cables), "s.out")).slow_ports == ()


def test_back_to_back_adapters_beside_a_switch_fabric_are_told(tmp_path):
    """Two hosts cabled straight together next to a real fabric: left out without a word before (only a dump
    with no switch at all was refused)."""
    a, b = ca(0xA1, "nodeA mlx5_0"), ca(0xB1, "nodeB mlx5_0")
    text = dump(*fabric([a, b], [(a, 1, b, 1, "4xEDR")]))
    cf = compute_fabric(parse_ibnetdiscover(text, "b.out"))
    assert cf.hosts == ["gpu01", "gpu02"]
    assert [(x.guid, y.guid, c.spec) for x, y, c in cf.back_to_back] == [(a.guid, b.guid, "4xEDR")]
    assert cf.cut_off == ()      # told once, as the cable, not again as adapters without a switch
    assert warnings_of(tmp_path, text) == [
        '1 cable(s) join two adapters straight (back to back, no switch between) and are not in the graph: '
        '"nodeA mlx5_0" - "nodeB mlx5_0"; an adapter with no cable to a switch was left out']


def test_routers_are_told(tmp_path):
    rt = Node("router", ROUTER, "ib-router01", 2)
    gw = ca(0x71, "gw01 mlx5_0")              # a host cabled to the router only
    text = dump(*fabric([rt, gw], [(S_LEAF, 30, rt, 1, "4xEDR"), (rt, 2, gw, 1, "4xEDR")]))
    cf = compute_fabric(parse_ibnetdiscover(text, "r.out"))
    assert [n.guid for n in cf.routers] == [ROUTER] and cf.hosts == ["gpu01", "gpu02"]
    assert [(n.guid, host, why) for n, host, why in cf.cut_off] == [(gw.guid, "gw01", "no switch")]
    assert warnings_of(tmp_path, text) == [
        "1 host adapter(s) have no cable to a switch (a router only, or nothing) and were left out, and with them "
        "1 host(s) entirely: gw01 mlx5_0",
        "1 router(s) left out with their cables (the graph holds one subnet's switches and hosts): \"ib-router01\""]


def test_switches_no_leaf_reaches_are_told(tmp_path):
    island = Node("switch", ISLAND, "MF0;island01:MQM8700/U1")
    island2 = Node("switch", "fc6a1c0300e1c002", "")
    text = dump(*fabric([island, island2], [(island, 1, island2, 1, "4xEDR")]))
    cf = compute_fabric(parse_ibnetdiscover(text, "u.out"))
    assert [n.guid for n in cf.unreachable] == [ISLAND, "fc6a1c0300e1c002"] and set(cf.switches) == {LEAF, SPINE}
    assert warnings_of(tmp_path, text) == ["2 switch(es) that no path from a host's leaf switch reaches were left "
                                           'out: "MF0;island01:MQM8700/U1", fc6a1c0300e1c002']


def test_a_leaf_left_out_by_exclude_switch_tells_the_hosts_it_cuts_off(tmp_path):
    gpu03, gpu01_1 = ca(3, "gpu03 mlx5_0"), ca(11, "gpu01 mlx5_1")
    nodes, cables = fabric([S_LEAF2, gpu03, gpu01_1], [(S_LEAF2, 1, gpu03, 1, "4xEDR"),
                                                       (S_LEAF2, 2, gpu01_1, 1, "4xEDR"),
                                                       (S_LEAF2, 21, S_SPINE, 11, "4xEDR")])
    text = dump(nodes, cables)
    cf = compute_fabric(parse_ibnetdiscover(text, "x.out"), exclude_switch=("*leaf02*",))
    assert cf.hosts == ["gpu01", "gpu02"]
    assert [(n.guid, host, why) for n, host, why in cf.cut_off] == [(gpu03.guid, "gpu03", "excluded switch"),
                                                                    (gpu01_1.guid, "gpu01", "excluded switch")]
    assert warnings_of(tmp_path, text, exclude_switch=("*leaf02*",)) == [
        "2 host adapter(s) are cabled only to switches left out by --exclude-switch and were left out, and with "
        "them 1 host(s) entirely: gpu03 mlx5_0, gpu01 mlx5_1"]
    # excluding the only leaf: every host cut off, so nothing to import, said in one line (it was an empty graph)
    with pytest.raises(ParseError, match=r"fabric.out: no host to import: --exclude-switch left out the switches "
                                         r"all its 2 adapter\(s\) are cabled to\Z"):
        warnings_of(tmp_path, dump(*fabric()), exclude_switch=(LEAF,))


def test_a_storage_leaf_that_leaves_with_exclude_hca_is_told(tmp_path):
    store = ca(0x51, "gpu01 mlx5_8")
    nodes, cables = fabric([S_LEAF2, store], [(S_LEAF2, 1, store, 1, "4xEDR"), (S_LEAF2, 21, S_SPINE, 11, "4xEDR")])
    text = dump(nodes, cables)
    cf = compute_fabric(parse_ibnetdiscover(text, "e.out"), exclude_hca=("mlx5_8",))
    assert [n.guid for n in cf.with_excluded] == [LEAF2] and cf.unreachable == ()
    assert warnings_of(tmp_path, text, exclude_hca=("mlx5_8",)) == [
        '1 switch(es) cabled only to adapters left out by --exclude-hca were left out with them: '
        '"MF0;leaf02:MQM8700/U1"']


def test_a_loopback_cable_is_told(tmp_path):
    text = dump(*fabric(extra_cables=[(S_LEAF, 30, S_LEAF, 31, "4xEDR")]))
    cf = compute_fabric(parse_ibnetdiscover(text, "l.out"))
    assert [(n.guid, c.a_port, c.b_port) for n, c in cf.loops] == [(LEAF, 30, 31)]
    assert warnings_of(tmp_path, text) == ['1 cable(s) from a node back to itself (a loopback plug?) were left out: '
                                           '"MF0;leaf01:MQM8700/U1" port 30 - port 31']


def test_the_cli_prints_each_warning_on_one_line(tmp_path):
    a, b = ca(0xA1, "nodeA mlx5_0"), ca(0xB1, "nodeB mlx5_0")
    p = tmp_path / "fabric.out"
    p.write_text(dump(*fabric([a, b], [(a, 1, b, 1, "4xEDR")], uplinks=("4xEDR", "4xDDR", "4xEDR"))))
    r = CliRunner().invoke(app, ["topo", "import", "--from", "ibnetdiscover", str(p), "--json"])
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    assert lines == [f"slurmtools: warning: {p}: cables between leaf01 and spine01 run at 4xEDR (2) and 4xDDR (1): "
                     "a degraded cable? the link is taken as 2+1 cables at their own rates, 27 GB/s in all",
                     f"slurmtools: warning: {p}: 1 cable(s) join two adapters straight (back to back, no switch "
                     'between) and are not in the graph: "nodeA mlx5_0" - "nodeB mlx5_0"; an adapter with no cable '
                     "to a switch was left out"]
