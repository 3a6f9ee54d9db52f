"""topology.yaml files a careless admin or a hostile one would give `topo import`: each ends in exactly one line
that names the file and the line, column and field where it can, exit 2, never a traceback, and nothing in the
file is run or expanded (PyYAML builds no object from it; aliases are refused as Slurm refuses them)."""

from __future__ import annotations

import pytest

from tests.hostile.site_check_support import cli, refusal

TREE = "- topology: ib\n  tree:\n    switches:\n"
BLOCK = "- topology: nvl\n  block:\n"


@pytest.mark.parametrize("text, where, words", [
    # malformed YAML: PyYAML's words, at the line and column it stopped
    (TREE + "      - switch: s1\n       nodes: n1\n", ":5:8:", "not YAML: while parsing a block collection, "
                                                               "expected <block end>, but found '<block mapping "
                                                               "start>'"),
    # a top level that is not a list (or one topology's mapping)
    ("leaf1 gpu[01-04]\n", ":1:1:", "top level: expected a list of topologies (- topology: NAME ...), found a single "
                                    "value"),
    # a key Slurm would warn about and skip, so the switch would silently hold no nodes
    (TREE + "      - switch: leaf1\n        node: gpu[01-04]\n", ":5:9:",
     "ib.tree.switches[0].node: unknown key (did you mean nodes?; keys here: switch, children, nodes)"),
    # a string where a list is expected, a list where Slurm wants a hostlist string
    ("- topology: ib\n  tree:\n    switches: leaf1\n", ":3:15:",
     "ib.tree.switches: expected a list of switches, found a single value"),
    (TREE + "      - switch: leaf1\n        nodes: [gpu01, gpu02]\n", ":5:16:",
     "ib.tree.switches[0].nodes: expected a hostlist string like gpu[01-04], found a list"),
    # none, or several, of tree / block / flat
    ("- topology: ib\n  cluster_default: true\n", ":1:3:",
     "ib: none of tree, block or flat: true (a topology is exactly one of them)"),
    (TREE + "      - {switch: leaf1, nodes: 'gpu[01-04]'}\n  flat: true\n", ":5:3:",
     "ib: both tree and flat (a topology is exactly one of tree, block or flat)"),
    # two cluster defaults: Slurm sorts them with qsort, so which one it uses is not in the file
    ("- topology: ib\n  cluster_default: true\n  flat: true\n- topology: nvl\n  cluster_default: true\n  flat: true\n",
     ":5:3:", "nvl.cluster_default: topology ib (line 1) is the cluster default already; mark only one"),
    # the tree's own rules, the same checks as topology.conf's
    (TREE + "      - {switch: leaf1, nodes: 'gpu[01-04]'}\n      - {switch: spine, children: 'leaf[1-2]'}\n", ":5:",
     "switch spine lists child switch leaf2, which no switch entry defines"),
    (TREE + "      - {switch: a, children: b}\n      - {switch: b, children: a}\n", ":5:", "switch loop: a -> b -> a"),
    (TREE + "      - {switch: leaf1, nodes: 'gpu[04-01]'}\n", ":4:32:",
     "ib.tree.switches[0].nodes: bad hostlist 'gpu[04-01]': start > stop"),
    # block sizes Slurm refuses (at start-up, with a fatal error)
    (BLOCK + "    block_sizes: [4, 12]\n    blocks:\n      - {block: b1, nodes: 'gpu[01-04]'}\n", ":3:",
     "block_sizes 12: must be the base size 4 times a power of two (Slurm aggregates 2, 4, 8, ... base blocks)"),
    (BLOCK + "    block_sizes: [0]\n    blocks:\n      - {block: b1, nodes: 'gpu[01-04]'}\n", ":3:",
     "block_sizes 0: block sizes must be positive node counts"),
    (BLOCK + "    block_sizes: [-4]\n    blocks:\n      - {block: b1, nodes: 'gpu[01-04]'}\n", ":3:19:",
     "nvl.block.block_sizes[0]: expected a whole number of nodes, found '-4'"),
    # hostile: a key that clears the screen and breaks the line is shown escaped, on the one line
    ('- topology: ib\n  "\\e[2J\\u2028x": 1\n  flat: true\n', ":2:3:",
     "[0].\\x1b[2J\\u2028x: unknown key (keys here: topology, cluster_default, tree, block, flat, ring, torus3d)"),
    # hostile: an alias bomb is refused at its first alias, before anything is expanded
    ("- topology: a\n  flat: &a [x, x]\n  tree: &b [*a, *a]\n", ":3:13:",
     "a YAML alias (*name): Slurm does not read aliases"),
    # hostile: a Python object tag builds nothing; the value is judged as the list it is
    ("- topology: !!python/object/apply:os.system [touch /tmp/owned]\n  flat: true\n", ":1:13:",
     "[0].topology: expected the topology's name, found a list"),
    ("- " + "[" * 20000 + "]" * 20000 + "\n", ":", "not read: nested too deeply"),
], ids=["malformed", "scalar-top", "unknown-key", "string-for-list", "list-for-string", "no-kind", "two-kinds",
        "two-defaults", "undefined-child", "loop", "bad-hostlist", "block-sizes-not-power", "block-size-zero",
        "block-size-negative", "control-characters", "alias-bomb", "python-tag", "deep-nesting"])
def test_bad_topology_yaml_is_one_line(tmp_path, text, where, words):
    p = tmp_path / "topology.yaml"
    p.write_text(text)
    assert refusal("topo", "import", "--from", "topology.yaml", str(p)) == f"{p}{where} {words}"


def test_other_topo_commands_refuse_it_alike(tmp_path):
    """`topo show|lint|export SOURCE` recognise the file by its content and refuse it with the same line."""
    p = tmp_path / "topology.yaml"
    p.write_text(TREE + "      - switch: leaf1\n        node: gpu[01-04]\n")
    line = f"{p}:5:9: ib.tree.switches[0].node: unknown key (did you mean nodes?; keys here: switch, children, nodes)"
    assert refusal("topo", "show", str(p)) == line
    assert refusal("topo", "export", str(p), "--format", "json") == line


def test_not_utf8(tmp_path):
    p = tmp_path / "topology.yaml"
    p.write_bytes(b"- topology: \xff\n  flat: true\n")
    assert refusal("topo", "import", "--from", "topology.yaml", str(p)) == (
        f"{p}: cannot read: 'utf-8' codec can't decode byte 0xff in position 12: invalid start byte (it seems to "
        "be text in a legacy 8-bit encoding such as Windows-1252 or Latin-1: save it as UTF-8)")


def test_a_node_under_two_leaves_is_one_warning_as_in_topology_conf(tmp_path):
    """Slurm accepts it (with a warning in its log), and the topology.conf reader warns too: one rule for both."""
    p = tmp_path / "topology.yaml"
    p.write_text(TREE + "      - {switch: leaf1, nodes: 'gpu[01-04]'}\n      - {switch: leaf2, nodes: 'gpu[04-08]'}\n")
    r = cli("topo", "import", "--from", "topology.yaml", str(p))
    assert r.code == 0, r.err
    assert r.err.splitlines() == [f"slurmtools: warning: {p}:5: host gpu04 is under several switches: leaf1, leaf2"]
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=leaf1 Nodes=gpu[01-04]\nSwitchName=leaf2 Nodes=gpu[04-08]\n")
    r = cli("topo", "import", "--from", "topology.conf", str(conf))
    assert r.err.splitlines() == [f"slurmtools: warning: {conf}:2: host gpu04 is under several switches: leaf1, leaf2"]


def test_choosing_a_topology_that_is_not_there(tmp_path):
    p = tmp_path / "topology.yaml"
    p.write_text("- topology: ib\n  flat: true\n- topology: nvl\n  flat: true\n")
    assert refusal("topo", "import", "--from", "topology.yaml", str(p)) == (
        f"{p}: cluster_default: none of the topologies (ib, nvl) is marked cluster_default: true; name one with "
        "--topology")
    assert refusal("topo", "import", "--from", "topology.yaml", str(p), "--topology", "tree") == (
        f"{p}: topology: no topology named 'tree' (the file has: ib, nvl)")
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=leaf1 Nodes=gpu[01-04]\n")
    assert refusal("topo", "import", "--from", "topology.conf", str(conf), "--topology", "ib") == (
        "--topology: only with --from topology.yaml (a topology.conf input holds one topology)")
