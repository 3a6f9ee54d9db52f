"""topology.yaml variants, read as Slurm 25.11 reads them (serializer/yaml: every scalar a string;
data_parser v0.0.44 `TOPOLOGY_*` parsers; hostlist.c `hostlist_create`, which splits at "\\t, \\n";
block/block_record.c `_list_to_bitmap`, a bitmap of levels)."""

from __future__ import annotations

from slurmtools.topology.slurm_topology_yaml import parse_topology_yaml


def test_blanks_in_a_hostlist_separate_hosts():
    """`nodes: gpu[01-02], gpu03` made a host named ' gpu03' and `nodes: n1 n2` one host 'n1 n2'."""
    doc = parse_topology_yaml("- topology: fabric\n  cluster_default: true\n  tree:\n    switches:\n"
                              "      - switch: leaf1\n        nodes: gpu[01-02], gpu03\n"
                              "      - switch: leaf2\n        nodes: gpu04 gpu05\n"
                              "      - switch: spine\n        children: leaf1, leaf2\n", "t.yaml")
    sw = doc.select().conf.switches
    assert sw["leaf1"].nodes == ("gpu01", "gpu02", "gpu03") and sw["leaf2"].nodes == ("gpu04", "gpu05")
    assert sw["spine"].switches == ("leaf1", "leaf2")


def test_block_sizes_in_any_order_after_the_base():
    """Slurm sets one level bit per size; [4, 16, 8] is the topology of [4, 8, 16] (it was refused)."""
    doc = parse_topology_yaml("- topology: nvl\n  block:\n    block_sizes: [4, 16, 8, 8]\n    blocks:\n"
                              "      - {block: b1, nodes: 'n[01-04]'}\n", "t.yaml")
    assert doc.select().conf.block_sizes == (4, 8, 16)
