"""Importing Slurm's topology.conf: the real Circe SuperPOD file, round trips through the graph, and errors."""

from __future__ import annotations

import pytest

from slurmtools.errors import ParseError
from slurmtools.topology import queries
from slurmtools.topology.render_slurm import render_topology_conf
from slurmtools.topology.slurm_topology_conf import parse_topology_conf, to_topology

from ._data import read_data, shared_files

CIRCE = "nvidia-circe-superpod_topology.conf"


def test_circe_superpod():
    c = parse_topology_conf(read_data(CIRCE), CIRCE)
    assert list(c.switches) == ["s0", "s1", "s2", "s3", "s4"]
    assert [len(s.nodes) for s in c.switches.values()] == [18, 18, 18, 18, 8]
    assert set(c.levels().values()) == {0}
    # The real file's defects, reported rather than hidden: a host under two leaves, a hostlist typo
    # (`n[019-020]` for circe-n019/020) and nodes of slurm.conf (circe-n[001-080]) under no switch.
    assert c.leaves_of("circe-n051") == ["s2", "s4"]
    assert c.switches["s0"].nodes[-2:] == ("n019", "n020")
    warns = c.warnings([f"circe-n{i:03d}" for i in range(1, 81)])
    assert f"{CIRCE}:5: host circe-n051 is under several switches: s2, s4" in warns
    assert f"{CIRCE}:1: switch s0 lists nodes that are not defined: n019, n020" in warns
    assert f"{CIRCE}: nodes under no switch: circe-n[019-020,059]" in warns


def test_circe_round_trip_through_the_graph():
    c = parse_topology_conf(read_data(CIRCE), CIRCE)
    again = parse_topology_conf(render_topology_conf(to_topology(c)), "rendered")
    assert list(again.switches) == list(c.switches)
    for name, sw in c.switches.items():
        # topology/tree wants each host under one leaf, so circe-n051 stays under the first switch only
        assert set(again.switches[name].nodes) == set(sw.nodes) - ({"circe-n051"} if name == "s4" else set())


TREE = """\
# two levels
SwitchName=leaf1 Nodes=gpu[01-04]   # rack 1
SwitchName=leaf2 Nodes=gpu[05-08] \\
    LinkSpeed=100
switchname=leaf3 nodes=gpu[09-10]
SwitchName=spine1 Switches=leaf[1-2]
SwitchName=spine2 Switches=leaf3
SwitchName=core Switches=spine[1-2]
"""


def test_three_levels_round_trip():
    c = parse_topology_conf(TREE, "tree.conf")
    assert c.levels() == {"leaf1": 0, "leaf2": 0, "leaf3": 0, "spine1": 1, "spine2": 1, "core": 2}
    assert c.switches["leaf2"].link_speed == 100 and c.switches["leaf2"].line == 3
    t = to_topology(c)
    assert queries.uplinks(t, "gpu05") == [["leaf2"], ["spine1"], ["core"]]
    assert queries.hosts_under(t, "spine2") == ["gpu09", "gpu10"]
    again = parse_topology_conf(render_topology_conf(t), "rendered")
    assert {n: (s.nodes, s.switches) for n, s in again.switches.items()} == \
           {n: (s.nodes, s.switches) for n, s in c.switches.items()}


def test_block_lines():
    c = parse_topology_conf("BlockName=b1 Nodes=gb[001-018]\nBlockName=b2 Nodes=gb[019-036]\nBlockSizes=9,18\n")
    assert [len(b.nodes) for b in c.blocks.values()] == [18, 18] and c.block_sizes == (9, 18)


def test_a_chain_thousands_of_switches_long():
    """Levels were found by recursion (RecursionError on a chain of 3000 switches written top first)."""
    text = "".join(f"SwitchName=s{i} Switches=s{i - 1}\n" for i in range(2999, 0, -1)) + "SwitchName=s0 Nodes=n1\n"
    levels = parse_topology_conf(text, "t.conf").levels()
    assert levels["s0"] == 0 and levels["s2999"] == 2999


@pytest.mark.parametrize("text, line, column, words", [
    ("SwitchName=s1 Nodez=n[1-2]\n", 1, 15, "expected Key=Value"),
    ("SwitchName=s1 Nodes=n[1-2]\nSwitchName=s2 Switches=s1,s9\n", 2, None, "child switch s9"),
    ("SwitchName=a Switches=b\nSwitchName=b Switches=c\nSwitchName=c Switches=a\n", 3, None,
     "switch loop: a -> b -> c -> a"),
    ("SwitchName=s1 Nodes=n[1-2\n", 1, 15, "Nodes="),
    ("SwitchName=s1 Nodes=n1\nSwitchName=s1 Nodes=n2\n", 2, 1, "already defined at line 1"),
    ("Nodes=n1 SwitchName=s1\n", 1, 1, "a line starts with"),
    ("BlockName=b1 Switches=s1\n", 1, 14, "does not belong"),
    ("SwitchName=s1 LinkSpeed=fast\n", 1, 15, "LinkSpeed"),
    ("SwitchName=s1 Nodes=\n", 1, 15, "has no value"),
    ("BlockSizes=4,x\n", 1, 1, "BlockSizes"),
])
def test_errors_name_line_and_column(text, line, column, words):
    with pytest.raises(ParseError) as err:
        parse_topology_conf(text, "t.conf")
    assert (err.value.line, err.value.column) == (line, column), str(err.value)
    assert words in str(err.value)


@pytest.mark.parametrize("text, words", [
    ("SwitchName=s1 Nodes=n1 LinkSpeed=²\n", "LinkSpeed= expects a number"),   # isdigit() passed it to int()
    ("SwitchName=s1 Nodes=n1 LinkSpeed=١٠\n", "LinkSpeed= expects a number"),
    ("BlockName=b1 Nodes=n[1-4]\nBlockSizes=1_6\n", "BlockSizes= expects numbers"),   # int() read 16
    ("BlockName=b1 Nodes=n[1-4]\nBlockSizes=٤\n", "BlockSizes= expects numbers"),
    ("BlockName=b1 Nodes=n[1-4]\nBlockSizes=+4\n", "BlockSizes= expects numbers"),
])
def test_numbers_are_ascii_digits(text, words):
    with pytest.raises(ParseError, match=words):
        parse_topology_conf(text, "t.conf")


@pytest.mark.parametrize("path", shared_files("slurm_conf", "*topology.conf"), ids=lambda p: p.name)
def test_shared_sweep(path):
    c = parse_topology_conf(path.read_text(), path.name)
    assert c.switches and c.hosts()
