"""topology.yaml variants, read as Slurm 25.11 reads them (serializer/yaml: every scalar a string;
data_parser v0.0.44 `TOPOLOGY_*` parsers; hostlist.c `hostlist_create`, which splits at "\\t, \\n";
block/block_record.c `_list_to_bitmap`, a bitmap of levels)."""

from __future__ import annotations

import pytest

from slurmtools.errors import ParseError
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


def _yaml_refusal(text: str) -> str:
    with pytest.raises(ParseError) as err:
        parse_topology_yaml(text, "t.yaml")
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_blank_slurm_does_not_split_at_is_refused():
    """hostlist_create splits at blanks, tabs, newlines and commas only: `n1<U+00A0>n2` is one name to Slurm; it was
    split into two hosts here."""
    text = "- topology: t\n  tree:\n    switches:\n      - switch: leaf1\n        nodes: n1\u00a0n2\n"
    assert _yaml_refusal(text) == ("t.yaml:5:16: t.tree.switches[0].nodes: U+00A0 (NO-BREAK SPACE) is no blank to "
                                   "Slurm, which reads it as part of the word beside it; write a space")


@pytest.mark.parametrize("tagged, shown", [("nodes: !!null n1", "!!null"), ("nodes: !!int 7", "!!int"),
                                           ("nodes: !!float 1", "!!float")])
def test_type_tags_slurm_converts_by_are_refused(tagged, shown):
    """Slurm's serializer converts a scalar to a yaml.org tag's type (`!!null n1` is no hostlist at all); the tag was
    dropped and the text read."""
    text = f"- topology: t\n  tree:\n    switches:\n      - switch: leaf1\n        {tagged}\n"
    assert _yaml_refusal(text) == (f"t.yaml:5:16: a YAML tag ({shown}): Slurm converts the value to the tag's type; "
                                   "write it untagged")


def test_other_tags_are_text_as_in_slurm():
    """`!!str` and tags Slurm does not know leave the scalar text, as here."""
    doc = parse_topology_yaml("- topology: !!str t\n  tree:\n    switches:\n      - switch: !site leaf1\n"
                              "        nodes: !!str n[1-2]\n", "t.yaml")
    assert doc.select().conf.switches["leaf1"].nodes == ("n1", "n2")
