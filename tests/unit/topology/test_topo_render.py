"""Slurm renderers: topology.conf (tree and block), gres.conf and node features, from declared and built graphs."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmtools.errors import ConfigError
from slurmtools.hostlist import expand
from slurmtools.resources import bundled
from slurmtools.topology import queries as q
from slurmtools.topology.build_site import build_site
from slurmtools.topology.graph import Topology, ib_link
from slurmtools.topology.render_slurm import (int_ranges, node_features, render_block, render_features,
                                              render_gres_conf, render_topology_conf)
from slurmtools.topology.sitefile import load_fabric

EXAMPLE = bundled("topology") / "example" / "fabric.toml"


@pytest.fixture(scope="module")
def example() -> Topology:
    return build_site(load_fabric(EXAMPLE))


def test_int_ranges():
    assert int_ranges([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert int_ranges([3]) == "3"
    assert int_ranges([]) == ""


def test_topology_conf_of_the_example(example):
    text = render_topology_conf(example, header=False)
    assert text == ("SwitchName=leaf1 Nodes=gpu[01-04]\nSwitchName=leaf2 Nodes=gpu[05-08]\n"
                    "SwitchName=leaf3 Nodes=gpu[09-12]\nSwitchName=leaf4 Nodes=gpu[13-16]\n"
                    "SwitchName=spine1 Switches=leaf[1-4]\n")


def _parse_tree(text: str) -> dict[str, dict[str, list[str]]]:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        kv = dict(p.split("=", 1) for p in line.split())
        out[kv["SwitchName"]] = {"Nodes": expand(kv.get("Nodes", "")), "Switches": expand(kv.get("Switches", ""))}
    return out


def fat_tree(pods: int = 2, leaves_per_pod: int = 2, hosts_per_leaf: int = 3, rails: int = 1) -> Topology:
    """3-level tree: core switches over pod spines over leaves; `rails` NICs per host, NIC r to leaf r of its pod
    (rail-optimised when rails > 1)."""
    t = Topology("ft")
    t.add_switch("core1")
    n = 0
    for p in range(pods):
        sp = t.add_switch(f"p{p}spine")
        t.link(sp, "switch:core1", ib_link("4xNDR", 2))
        for lf in range(leaves_per_pod):
            leaf = t.add_switch(f"p{p}leaf{lf}")
            t.link(leaf, sp, ib_link("4xNDR", 2))
        for _ in range(hosts_per_leaf * leaves_per_pod // max(rails, 1)):
            n += 1
            for r in range(rails):
                nic = t.add_nic(f"node{n:03d}", f"mlx5_{r}")
                t.link(nic, f"switch:p{p}leaf{(r if rails > 1 else (n - 1) // hosts_per_leaf) % leaves_per_pod}",
                       ib_link("4xNDR"))
    return t


def test_topology_conf_of_a_three_level_tree_agrees_with_the_graph():
    t = fat_tree()
    tree = _parse_tree(render_topology_conf(t))
    assert set(tree) == {"core1", "p0spine", "p1spine", "p0leaf0", "p0leaf1", "p1leaf0", "p1leaf1"}
    assert tree["core1"]["Switches"] == ["p0spine", "p1spine"]
    assert tree["p1spine"]["Switches"] == ["p1leaf0", "p1leaf1"]
    assert tree["p0leaf1"]["Nodes"] == ["node004", "node005", "node006"]
    for name, row in tree.items():
        below = set(row["Nodes"])
        for s in row["Switches"]:
            below |= set(q.hosts_under(t, s))
        assert sorted(below) == q.hosts_under(t, name)


def test_rail_optimised_hosts_go_under_one_leaf_and_empty_rail_leaves_are_dropped():
    t = fat_tree(pods=1, leaves_per_pod=2, hosts_per_leaf=2, rails=2)
    tree = _parse_tree(render_topology_conf(t))
    assert tree["p0leaf0"]["Nodes"] == ["node001", "node002"]
    assert "p0leaf1" not in tree  # every host's primary leaf is its rail-0 leaf
    assert tree["p0spine"]["Switches"] == ["p0leaf0"]


def test_uncabled_host_or_bad_switch_name_is_a_config_error():
    t = fat_tree(pods=1)
    t.add_host("lonely")
    with pytest.raises(ConfigError, match="host lonely: not cabled to any switch"):
        render_topology_conf(t)
    t2 = Topology("x")
    t2.add_switch("MF0;ib-sw:MQM9700/U1", 0)
    t2.add_host("a")
    t2.link("host:a", "switch:MF0;ib-sw:MQM9700/U1", ib_link("4xNDR"))
    with pytest.raises(ConfigError, match="not usable in a Slurm config"):
        render_topology_conf(t2)


def test_gres_conf_of_the_example(example):
    text = render_gres_conf(example, "/lab/dev/nvidia{index}")
    lines = [ln for ln in text.splitlines() if ln.startswith("NodeName=")]
    assert "AutoDetect=off" in text.splitlines()
    assert len(lines) == 8
    assert lines[0] == ("NodeName=gpu[01-16] Name=gpu Type=h100 File=/lab/dev/nvidia0 Cores=0-55 "
                        "Links=-1,18,18,18,18,18,18,18")
    assert lines[5].endswith("File=/lab/dev/nvidia5 Cores=56-111 Links=18,18,18,18,18,-1,18,18")
    rows = [[int(x) for x in ln.rsplit("Links=", 1)[1].split(",")] for ln in lines]
    assert all(rows[i][j] == rows[j][i] for i in range(8) for j in range(8))
    with pytest.raises(ConfigError, match="pattern with {minor} or {index}"):
        render_gres_conf(example, "/dev/nvidia{n}")


def test_gres_conf_groups_hosts_by_identical_lines():
    t = Topology("mix")
    for h, links in (("a1", 2), ("a2", 2), ("a3", 1)):  # a3 has a degraded NVLink bridge
        c = t.add_cpu(h, 0, 0, cpus=range(4), cores=range(4))
        g0 = t.add_gpu(h, 0, gpu_type="a100", parent=c)
        g1 = t.add_gpu(h, 1, gpu_type="a100", parent=c)
        t.link_nvlink(g0, g1, links)
    lines = render_gres_conf(t, "/dev/nvidia{index}", autodetect=None, header=False).splitlines()
    assert lines == [
        "NodeName=a[1-2] Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-3 Links=-1,2",
        "NodeName=a[1-2] Name=gpu Type=a100 File=/dev/nvidia1 Cores=0-3 Links=2,-1",
        "NodeName=a3 Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-3 Links=-1,1",
        "NodeName=a3 Name=gpu Type=a100 File=/dev/nvidia1 Cores=0-3 Links=1,-1",
    ]


def test_features_and_block_topology_for_multi_node_domains(tmp_path: Path):
    p = tmp_path / "fabric.toml"
    p.write_text(EXAMPLE.read_text().replace('name = "leaf1"', 'name = "leaf1"\nrack = "r01"') + """
[[nvlink_domains]]
name = "nvl1"
hosts = "gpu[01-04]"

[[nvlink_domains]]
name = "nvl2"
hosts = "gpu[05-08]"
""")
    t = build_site(load_fabric(p))
    feats = node_features(t)
    assert feats["gpu02"] == ("h100", "nvswitch", "leaf1", "r01", "nvl1")
    assert feats["gpu09"] == ("h100", "nvswitch", "leaf3")
    assert render_features(t).splitlines()[0] == "NodeName=gpu[01-04] Features=h100,nvswitch,leaf1,r01,nvl1"
    assert render_block(t, header=False) == ("BlockName=nvl1 Nodes=gpu[01-04]\nBlockName=nvl2 Nodes=gpu[05-08]\n"
                                             "BlockSizes=4\n")
    assert render_block(t, [4, 8], header=False).endswith("BlockSizes=4,8\n")


def test_block_without_multi_node_domains_is_a_clear_error(example):
    with pytest.raises(ConfigError, match="no multi-node NVLink domain"):
        render_block(example)


def test_render_topology_writes_a_file_slurmctld_can_read_whatever_the_umask(tmp_path: Path):
    """`admin render topology --out-dir` beside slurm.conf: slurmctld reads it as SlurmUser, so a hardened root's
    077 umask must not make it root's alone."""
    import os

    from typer.testing import CliRunner

    from slurmtools.cli.main import app

    old = os.umask(0o077)
    try:
        r = CliRunner().invoke(app, ["admin", "render", "topology", "--slurm-version", "25.11", "--out-dir",
                                     str(tmp_path)])
    finally:
        os.umask(old)
    assert r.exit_code == 0, r.output
    written = tmp_path / "topology.conf"
    assert r.output.strip() == str(written)
    assert oct(written.stat().st_mode & 0o777) == "0o644"
    assert "SwitchName=" in written.read_text()
