"""The topology model: builders, typed access, JSON round trip, and the queries the planner asks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmtools.errors import ConfigError, ParseError
from slurmtools.resources import bundled
from slurmtools.topology import queries as q
from slurmtools.topology.build_site import build_site
from slurmtools.topology.graph import IbLink, NvLink, Topology, ib_link
from slurmtools.topology.sitefile import load_fabric

EXAMPLE = bundled("topology") / "example" / "fabric.toml"


@pytest.fixture(scope="module")
def example() -> Topology:
    return build_site(load_fabric(EXAMPLE))


def pcie_box() -> Topology:
    """A PCIe-only 4-GPU host across two sockets: GPU0/1 under switch 0 with nic mlx5_0 (socket 0), GPU2 under
    switch 1 (socket 1) with mlx5_1, GPU3 straight on socket 1; a storage NIC on socket 0; an NVLink bridge
    between GPU0 and GPU1 only (NV2)."""
    t = Topology("box")
    c0 = t.add_cpu("n1", 0, 0, cpus=range(0, 8), cores=range(0, 4))
    c1 = t.add_cpu("n1", 1, 1, cpus=range(8, 16), cores=range(4, 8))
    t.link_smp(c0, c1)
    s0 = t.add_pcie_switch("n1", 0, parent=c0)
    s1 = t.add_pcie_switch("n1", 1, parent=c1)
    g = [t.add_gpu("n1", 0, parent=s0), t.add_gpu("n1", 1, parent=s0), t.add_gpu("n1", 2, parent=s1),
         t.add_gpu("n1", 3, parent=c1)]
    t.add_nic("n1", "mlx5_0", parent=s0)
    t.add_nic("n1", "mlx5_1", parent=s1)
    t.add_nic("n1", "mlx5_9", parent=c0, compute=False)
    t.link_nvlink(g[0], g[1], 2)
    return t


def test_any_name_a_provider_accepts_sorts():
    """Names come from the providers' files: a host gpu² (str.isdigit passed ² to int()) or a NIC number past
    int()'s 4300 digits failed the natural sort with a traceback (`topo show`, `topo import` of such a file)."""
    t = Topology("odd")
    for h in ("gpu10", "gpu²", "gpu2", "gpu" + "1" * 5000, "gpu٣"):
        t.add_host(h)
    assert t.host_names()[:2] == ["gpu2", "gpu٣"] and t.host_names()[2] == "gpu10"


def test_ids_are_stable_strings():
    t = pcie_box()
    assert "gpu:n1:3" in t and "nic:n1:mlx5_1" in t and "cpu:n1:1" in t and "host:n1" in t
    assert t.vertex("gpu:n1:2").index == 2
    assert [g.index for g in t.gpus("n1")] == [0, 1, 2, 3]
    with pytest.raises(KeyError, match="gpu:n1:9"):
        t.vertex("gpu:n1:9")


def test_parallel_links_add_up():
    t = Topology()
    a, b = t.add_switch("leaf1", 0), t.add_switch("spine1", 1)
    t.link_ib(a, b, 4, "NDR")
    t.link_ib(a, b, 4, "NDR", count=3)
    assert t.edge(a, b) == IbLink(4, "NDR", 4)
    assert t.edge(a, b).gbytes == 200.0
    g0, g1 = t.add_gpu("h", 0), t.add_gpu("h", 1)
    t.link_nvlink(g0, g1, 6, 25.0)
    t.link_nvlink(g0, g1, 6, 25.0)
    assert t.edge(g0, g1) == NvLink(12, 25.0)
    assert NvLink(12).gbytes is None   # no speed stated: unknown, not 25 GB/s
    with pytest.raises(KeyError, match="nope"):
        t.link_ib(a, "switch:nope")
    with pytest.raises(ValueError, match="4xNDR"):
        ib_link("4xfast")


def test_islands_pcie_groups_nics_and_cpus_of_a_pcie_box():
    t = pcie_box()
    assert q.nvlink_islands(t, "n1") == [[0, 1], [2], [3]]
    assert q.pcie_groups(t, "n1") == {"pcisw:n1:0": [0, 1], "pcisw:n1:1": [2], None: [3]}
    # GPU3 sits on socket 1 directly: mlx5_1 (behind switch 1, 2 hops) beats mlx5_0 (other socket)
    assert q.nearest_nics(t, "n1") == {0: ["mlx5_0"], 1: ["mlx5_0"], 2: ["mlx5_1"], 3: ["mlx5_1"]}
    assert q.nearest_nics(t, "n1", compute_only=False)[0] == ["mlx5_0"]
    assert q.local_cpus(t, "n1") == {0: tuple(range(8)), 1: tuple(range(8)), 2: tuple(range(8, 16)),
                                     3: tuple(range(8, 16))}
    assert q.local_cores(t, "n1")[3] == (4, 5, 6, 7)
    assert q.gpu_numa(t, "n1") == {0: [0], 1: [0], 2: [1], 3: [1]}
    assert q.nic_numa(t, "n1") == {"mlx5_0": [0], "mlx5_1": [1], "mlx5_9": [0]}
    assert q.nvlink_matrix(t, "n1") == [[-1, 2, 0, 0], [2, -1, 0, 0], [0, 0, -1, 0], [0, 0, 0, -1]]


def test_example_site_inside(example):
    assert len(example.hosts()) == 16
    assert q.nvlink_islands(example, "gpu07") == [list(range(8))]
    m = q.nvlink_matrix(example, "gpu07")
    assert m[0] == [-1] + [18] * 7 and all(m[i][j] == m[j][i] for i in range(8) for j in range(8))
    assert q.nearest_nics(example, "gpu01")[5] == ["mlx5_4", "mlx5_5"]
    assert q.local_cores(example, "gpu01")[0] == tuple(range(56))
    assert q.local_cores(example, "gpu01")[4] == tuple(range(56, 112))


def test_example_site_fabric(example):
    assert q.uplinks(example, "gpu06") == [["leaf2"], ["spine1"]]
    assert q.hosts_under(example, "leaf3") == ["gpu09", "gpu10", "gpu11", "gpu12"]
    assert q.hosts_under(example, "spine1") == [f"gpu{i:02d}" for i in range(1, 17)]
    same = q.path_between(example, "gpu01", "gpu04")
    assert (same.hops, same.gbytes, same.via) == (2, 400.0, ("leaf1",))
    far = q.path_between(example, "gpu01", "gpu13")
    # 8 NDR host links (400 GB/s) each side; 16 NDR leaf-spine uplinks = 800 GB/s
    assert (far.hops, far.gbytes, far.via) == (4, 400.0, ("leaf1", "spine1", "leaf4"))
    assert q.path_between(example, "gpu01", "gpu01").hops == 0
    levels = q.oversubscription(example)
    assert [(lv.level, lv.switches, lv.ratio) for lv in levels] == [(0, 4, 2.0), (1, 1, None)]
    with pytest.raises(ValueError, match="no host 'gpu99'"):
        q.path_between(example, "gpu01", "gpu99")


def test_hosts_never_carry_transit_traffic():
    t = Topology()
    t.add_switch("a")
    t.add_switch("b")
    for h in ("x", "y", "z"):
        t.add_host(h)
    t.link("host:x", "switch:a", ib_link("4xHDR"))
    t.link("host:z", "switch:a", ib_link("4xHDR"))
    t.link("host:z", "switch:b", ib_link("4xHDR"))  # z is dual-homed, but no bridge
    t.link("host:y", "switch:b", ib_link("4xHDR"))
    assert q.path_between(t, "x", "y") is None
    t.link("switch:a", "switch:b", ib_link("1xHDR"))
    p = q.path_between(t, "x", "y")
    assert (p.hops, p.gbytes, p.via) == (3, 6.25, ("a", "b"))


def test_widest_of_the_shortest_paths():
    t = Topology()
    for s, lv in (("l1", 0), ("l2", 0), ("s1", 1), ("s2", 1)):
        t.add_switch(s, lv)
    t.add_host("x")
    t.add_host("y")
    t.link("host:x", "switch:l1", ib_link("4xNDR"))
    t.link("host:y", "switch:l2", ib_link("4xNDR"))
    t.link("switch:l1", "switch:s1", ib_link("1xNDR"))
    t.link("switch:l2", "switch:s1", ib_link("4xNDR"))
    t.link("switch:l1", "switch:s2", ib_link("4xNDR", 2))
    t.link("switch:l2", "switch:s2", ib_link("4xNDR", 2))
    p = q.path_between(t, "x", "y")
    assert (p.hops, p.gbytes, p.via) == (4, 50.0, ("l1", "s2", "l2"))


def test_rail_optimised_host_has_several_leaves():
    t = Topology()
    for r in range(2):
        t.add_switch(f"rail{r}")
    t.add_switch("spine")
    for h in ("a", "b"):
        for r in range(2):
            nic = t.add_nic(h, f"mlx5_{r}")
            t.link(nic, f"switch:rail{r}", ib_link("4xNDR"))
        t.add_nic(h, "mlx5_9", compute=False)  # storage HCA, not cabled to the compute fabric
    for r in range(2):
        t.link(f"switch:rail{r}", "switch:spine", ib_link("4xNDR"))
    assert q.switch_levels(t) == {"rail0": 0, "rail1": 0, "spine": 1}
    assert q.leaves_of(t, "a") == ["rail0", "rail1"]
    assert q.primary_leaf(t, "a") == "rail0"
    assert q.uplinks(t, "b") == [["rail0", "rail1"], ["spine"]]
    assert q.hosts_under(t, "spine") == ["a", "b"]


def test_multi_node_nvlink_domain_capacity():
    t = Topology()
    gpus = []
    for h in ("gb01", "gb02", "gb03"):
        for i in range(4):
            gpus.append(t.add_gpu(h, i))
    t.add_nvlink_domain("nvl1", gpus[:8], clique_id=7)
    t.add_nvlink_domain("nvl2", gpus[8:])
    caps = {d.name: d for d in q.nvlink_domains(t, {"gb01": 4, "gb02": 1, "gb03": 9})}
    assert (caps["nvl1"].hosts, caps["nvl1"].gpus, caps["nvl1"].free_gpus, caps["nvl1"].free_hosts) == \
        (("gb01", "gb02"), 8, 5, 1)
    assert caps["nvl1"].multi_node and not caps["nvl2"].multi_node
    assert (caps["nvl2"].free_gpus, caps["nvl2"].free_hosts) == (4, 1)
    assert q.nvlink_domains(t)[0].free_gpus == 8
    assert q.domain_of(t, "gb02") == ["nvl1"]


def test_json_round_trip_is_lossless(example):
    text = example.to_json()
    back = Topology.from_json(text)
    assert back.same_as(example)
    assert back.to_json() == text
    box = pcie_box()
    assert Topology.from_json(box.to_json(indent=1)).same_as(box)
    assert not back.same_as(box)


@pytest.mark.parametrize("doc, msg", [
    ("{", "x.json:1:2: invalid JSON"),
    ('{"format": "other"}', "not a slurmtools topology"),
    ('{"format": "slurmtools.topology/1", "vertices": [{"kind": "gpu", "host": "h"}]}', "vertices\\[0\\]"),
    ('{"format": "slurmtools.topology/1", "vertices": [{"kind": "toaster"}]}', "vertices\\[0\\].kind"),
    ('{"format": "slurmtools.topology/1", "vertices": [{"kind": "host", "name": "h", "colour": 1}]}', "colour"),
    ('{"format": "slurmtools.topology/1", "vertices": [], "edges": [{"a": "host:h", "b": "x", "kind": "pcie"}]}',
     "edges\\[0\\].a: unknown vertex"),
    ('{"format": "slurmtools.topology/1", "vertices": [{"kind": "host", "name": "h"}, {"kind": "host", "name": "h"}]}',
     "vertices\\[1\\]: duplicate vertex 'host:h'"),
])
def test_bad_json_fails_naming_the_item(doc, msg):
    with pytest.raises(ParseError, match=msg):
        Topology.from_json(doc, "x.json")


def test_fabric_file_extensions(tmp_path: Path):
    text = EXAMPLE.read_text() + """
[[racks]]
name = "r1"
hosts = "gpu[01-08]"

[[nvlink_domains]]
name = "nvl1"
hosts = "gpu[01-02]"
"""
    p = tmp_path / "fabric.toml"
    p.write_text(text)
    f = load_fabric(p)
    assert f.rack_of_host("gpu05") == "r1" and f.rack_of_host("gpu09") is None
    t = build_site(f)
    assert t.vertex("host:gpu03").rack == "r1"
    caps = {d.name: d for d in q.nvlink_domains(t)}
    assert caps["nvl1"].hosts == ("gpu01", "gpu02") and caps["nvl1"].gpus == 16
    assert "gpu01" not in caps and "gpu03" in caps
    p.write_text(text.replace('hosts = "gpu[01-02]"', 'hosts = "gpu[01-02],zz1"'))
    with pytest.raises(ConfigError, match=r"nvlink_domains\[0\].hosts: host zz1 is not under any leaf"):
        load_fabric(p)
    p.write_text(EXAMPLE.read_text().replace("nvlinks_per_gpu = 18", "nvlinks_per_gpu = 18\nnvswitches = 4"))
    t4 = build_site(load_fabric(p))
    assert sorted(t4.edge("gpu:gpu01:0", f"nvswitch:gpu01:{k}").links for k in range(4)) == [4, 4, 5, 5]
    assert q.nvlink_matrix(t4, "gpu01")[2] == [18, 18, -1, 18, 18, 18, 18, 18]


def test_json_is_plain_data(example):
    d = json.loads(example.to_json())
    kinds = {v["kind"] for v in d["vertices"]}
    assert kinds == {"cluster", "switch", "host", "cpu", "pcie_switch", "gpu", "nic", "nvswitch", "nvlink_domain"}
    assert {e["kind"] for e in d["edges"]} == {"member", "pcie", "smp", "nvlink", "ib"}


def test_rail_leaves_in_the_fabric_file(tmp_path: Path):
    rails = """
[[rail_leaves]]
name = "leaf1-r1"
leaf = "leaf1"
nics = ["mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"]
"""
    base = EXAMPLE.read_text().replace('leaves = ["leaf1", "leaf2", "leaf3", "leaf4"]',
                                       'leaves = ["leaf1", "leaf1-r1", "leaf2", "leaf3", "leaf4"]')
    p = tmp_path / "fabric.toml"
    p.write_text(base + rails)
    f = load_fabric(p)
    assert f.nic_leaf("leaf1", "mlx5_5") == "leaf1-r1" and f.nic_leaf("leaf1", "mlx5_0") == "leaf1"
    assert f.hosts == [f"gpu{i:02d}" for i in range(1, 17)]  # hosts stay under their leaf, once
    t = build_site(f)
    assert q.leaves_of(t, "gpu02") == ["leaf1", "leaf1-r1"]
    assert q.leaves_of(t, "gpu05") == ["leaf2"]
    assert q.hosts_under(t, "leaf1-r1") == ["gpu01", "gpu02", "gpu03", "gpu04"]
    p12 = q.path_between(t, "gpu01", "gpu02")
    assert (p12.hops, p12.gbytes) == (2, 200.0)  # 4 of the 8 NICs on either leaf
    lv = {x.level: x for x in q.oversubscription(t)}
    assert lv[0].switches == 5 and lv[0].worst == 2.0
    for bad, msg in (('nics = ["mlx5_9"]', "'mlx5_9' is not a NIC of node type dgx-h100"),
                     ('leaf = "leaf9"', "rail_leaves\\[0\\].leaf: unknown leaf 'leaf9'"),
                     ('name = "leaf2"', "duplicate leaf name 'leaf2'")):
        key = bad.split(" = ")[0]
        text = "\n".join(bad if ln.startswith(key + " = ") else ln for ln in rails.splitlines())
        p.write_text(base + text)
        with pytest.raises(ConfigError, match=msg):
            load_fabric(p)
    p.write_text(base + rails + rails.replace('"leaf1-r1"', '"leaf1-r2"'))
    with pytest.raises(ConfigError, match="mlx5_4 of leaf1's hosts is already cabled to leaf1-r1"):
        load_fabric(p)
