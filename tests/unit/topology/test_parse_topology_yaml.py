"""Importing Slurm's topology.yaml: what the renderer writes reads back as the topology.conf of the same fabric
does (one model, one set of checks, one graph), files in Slurm's documented form, choosing among several
topologies, the errors, and `topo import` / auto-detection through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.cli.topo_providers import detect_kind
from slurmtools.errors import ConfigError, ParseError
from slurmtools.render.topology import block_layout, render_block_conf, render_topology_yaml
from slurmtools.resources import bundled
from slurmtools.slurm.releases import release_for
from slurmtools.topology import queries as q
from slurmtools.topology.build_site import build_site
from slurmtools.topology.graph import Topology
from slurmtools.topology.render_slurm import render_topology_conf
from slurmtools.topology.sitefile import load_fabric
from slurmtools.topology.slurm_topology_conf import parse_topology_conf, to_topology
from slurmtools.topology.slurm_topology_yaml import parse_topology_yaml

from .test_topo_render import fat_tree

runner = CliRunner()
R2511 = release_for("25.11")
EXAMPLE = bundled("topology") / "example" / "fabric.toml"


def _tree(conf) -> dict:
    return {n: (s.nodes, s.switches) for n, s in conf.switches.items()}


def _blocks(conf) -> dict:
    return {n: b.nodes for n, b in conf.blocks.items()}


@pytest.fixture(scope="module")
def nvl_fabric(tmp_path_factory) -> Topology:
    """The example fabric with multi-node NVLink domains: two under leaf1, one under leaf2 (so leaf2's group is
    padded with a placeholder block)."""
    p = tmp_path_factory.mktemp("nvl") / "fabric.toml"
    p.write_text(EXAMPLE.read_text() + "".join(f'\n[[nvlink_domains]]\nname = "nvl{i}"\nhosts = "{h}"\n' for i, h in
                                               enumerate(["gpu[01-02]", "gpu[03-04]", "gpu[05-06]"], start=1)))
    return build_site(load_fabric(p))


@pytest.mark.parametrize("make", [lambda: build_site(load_fabric(EXAMPLE)), fat_tree, lambda: fat_tree(3, 3, 2)],
                         ids=["example", "fat-tree", "fat-tree-3x3"])
def test_tree_yaml_reads_back_as_the_topology_conf_of_the_same_fabric(make):
    t = make()
    from_conf = parse_topology_conf(render_topology_conf(t), "topology.conf")
    doc = parse_topology_yaml(render_topology_yaml(t, R2511, {"p": "tree"}, "tree"), "topology.yaml")
    assert [(x.name, x.kind, x.cluster_default) for x in doc.topologies] == [("tree", "tree", True)]
    from_yaml = doc.select().conf
    assert _tree(from_yaml) == _tree(from_conf) and from_yaml.levels() == from_conf.levels()
    g_yaml, g_conf = to_topology(from_yaml, "g"), to_topology(from_conf, "g")
    assert g_yaml.same_as(g_conf)
    # and both are the fabric's own tree: the same hosts under every switch, at the same levels
    levels = q.switch_levels(t)
    assert {s: levels[s] for s in q.switch_levels(g_yaml)} == q.switch_levels(g_yaml)
    for s in q.switch_levels(g_yaml):
        assert q.hosts_under(g_yaml, s) == q.hosts_under(t, s), s


def test_block_yaml_reads_back_as_the_block_topology_conf_of_the_same_fabric(nvl_fabric):
    layout = block_layout(nvl_fabric, R2511)
    assert [b.name for b in layout.blocks] == ["nvl1", "nvl2", "nvl3", "leaf2-placeholder1"]
    from_conf = parse_topology_conf(render_block_conf(layout, "nvl"), "topology.conf")
    kinds = {"ib": "tree", "nvl": "block", "any": "flat"}
    doc = parse_topology_yaml(render_topology_yaml(nvl_fabric, R2511, kinds, "tree"), "topology.yaml")
    assert [(x.name, x.kind, x.cluster_default) for x in doc.topologies] == [
        ("tree", "tree", True), ("block", "block", False), ("flat", "flat", False)]
    from_yaml = doc.select("block").conf
    assert _blocks(from_yaml) == _blocks(from_conf) == {b.name: b.hosts for b in layout.blocks}
    assert from_yaml.block_sizes == from_conf.block_sizes == layout.sizes == (2, 4)
    g_yaml, g_conf = to_topology(from_yaml, "g"), to_topology(from_conf, "g")
    assert g_yaml.same_as(g_conf)
    # a block names its hosts and nothing of what joins them: hosts, no switch, no NVLink domain claimed
    assert g_yaml.host_names() == [f"gpu0{i}" for i in range(1, 7)]
    assert g_yaml.count("switch") == 0 and g_yaml.count("nvlink_domain") == 0
    # the same file's cluster default is its tree, and its flat topology declares nothing
    assert doc.select().name == "tree" and _tree(doc.select().conf) == _tree(
        parse_topology_conf(render_topology_conf(nvl_fabric), "c"))
    flat = doc.select("flat")
    assert (flat.kind, flat.conf.switches, flat.conf.blocks) == ("flat", {}, {})


# Slurm's documented form (topology.yaml(5)): a list of topologies, each with a name, cluster_default and one of
# tree / block / flat; switches and blocks as lists of mappings; hostlists as strings.
DOCUMENTED = """\
---
# three topologies of one cluster
- topology: fabric
  cluster_default: true
  tree:
    switches:
      - switch: core
        children: edge[1-2]
      - switch: edge1
        nodes: cn[001-004]
      - switch: edge2
        nodes: cn[005-008]    # second rack
- topology: racks
  cluster_default: false
  block:
    block_sizes:
      - 2
      - 4
    blocks:
      - block: r1
        nodes: cn[001-002]
      - block: r2
        nodes: cn[003-004]
      - block: r3
        nodes: cn[005-006]
      - block: r4
        nodes: cn[007-008]
- topology: anywhere
  cluster_default: false
  flat: true
"""


def test_documented_form():
    doc = parse_topology_yaml(DOCUMENTED, "topology.yaml")
    fabric, racks, anywhere = doc.topologies
    assert (fabric.name, fabric.kind, fabric.cluster_default, fabric.line) == ("fabric", "tree", True, 3)
    assert fabric.conf.levels() == {"core": 1, "edge1": 0, "edge2": 0}
    assert fabric.conf.switches["edge2"].nodes == tuple(f"cn{i:03d}" for i in range(5, 9))
    assert fabric.conf.switches["edge2"].line == 11
    assert (racks.kind, racks.conf.block_sizes, list(racks.conf.blocks)) == ("block", (2, 4), ["r1", "r2", "r3", "r4"])
    assert racks.conf.blocks["r3"] == racks.conf.blocks["r3"].__class__("r3", ("cn005", "cn006"), 24, 9)
    assert (anywhere.kind, anywhere.cluster_default) == ("flat", False)
    t = to_topology(doc.select().conf, "fabric")
    assert q.uplinks(t, "cn006") == [["edge2"], ["core"]]
    # the same tree written as topology.conf gives the same graph
    conf = parse_topology_conf("SwitchName=core Switches=edge[1-2]\nSwitchName=edge1 Nodes=cn[001-004]\n"
                               "SwitchName=edge2 Nodes=cn[005-008]\n", "topology.conf")
    assert t.same_as(to_topology(conf, "fabric"))


def test_forms_slurm_also_reads():
    """One topology as a mapping instead of a list, one switch as a mapping, one block size as a number, names
    and hostlists that YAML would take for numbers or booleans (Slurm reads every scalar as text), and Slurm's
    words for true and false."""
    doc = parse_topology_yaml("topology: 1\ncluster_default: Yes\ntree:\n  switches:\n    switch: 007\n"
                              "    nodes: 001,on\n", "t.yaml")
    (one,) = doc.topologies
    assert (one.name, one.cluster_default, list(one.conf.switches)) == ("1", True, ["007"])
    assert one.conf.switches["007"].nodes == ("001", "on")
    doc = parse_topology_yaml("- topology: b\n  cluster_default: 'off'\n  block:\n    block_sizes: 4\n"
                              "    blocks: [{block: b1, nodes: 'n[1-4]'}, {block: empty}]\n", "t.yaml")
    (b,) = doc.topologies
    assert (b.cluster_default, b.conf.block_sizes, _blocks(b.conf)) == (False, (4,), {"b1": ("n1", "n2", "n3", "n4"),
                                                                                     "empty": ()})
    assert doc.select() is b  # the only topology, though not marked cluster_default


TWO = "- topology: a\n  flat: true\n- topology: b\n  tree:\n    switches:\n      - {switch: s1, nodes: 'n[1-2]'}\n"


def test_choosing_among_several_topologies():
    assert parse_topology_yaml(DOCUMENTED, "t.yaml").select("racks").kind == "block"
    doc = parse_topology_yaml(TWO, "t.yaml")
    assert doc.select("b").conf.switches["s1"].nodes == ("n1", "n2")
    with pytest.raises(ConfigError) as err:
        doc.select()  # several topologies, none marked: Slurm's choice is not in the file, so none is guessed
    assert str(err.value) == ("t.yaml: cluster_default: none of the topologies (a, b) is marked cluster_default: "
                              "true; name one with --topology")
    with pytest.raises(ConfigError) as err:
        doc.select("c")
    assert str(err.value) == "t.yaml: topology: no topology named 'c' (the file has: a, b)"


TREE = "- topology: a\n  tree:\n    switches:\n"


@pytest.mark.parametrize("text, line, column, words", [
    ("- topology: a\n  flat: [true\n", 3, 1, "not YAML"),
    ("a: b\n  c: d\n", 2, 4, "not YAML"),
    ("# nothing\n", None, None, "no topology: the file holds no YAML document"),
    ("just words\n", 1, 1, "top level: expected a list of topologies"),
    ("- topology: a\n  flat: true\n  partition: gpu\n", 3, 3, "[0].partition: unknown key (keys here: topology, "
                                                               "cluster_default, tree, block, flat, ring, torus3d)"),
    ("- topology: a\n  tree:\n    switches:\n      - switch: s1\n        node: n1\n", 5, 9,
     "a.tree.switches[0].node: unknown key (did you mean nodes?; keys here: switch, children, nodes)"),
    ("- topology: a\n  tree:\n    switches:\n      - switch: s1\n        nodes: [n1, n2]\n", 5, 16,
     "a.tree.switches[0].nodes: expected a hostlist string like gpu[01-04], found a list"),
    ("- topology: a\n  tree:\n    switches: s1\n", 3, 15, "a.tree.switches: expected a list of switches, found a "
                                                          "single value"),
    ("- topology: a\n  block:\n    blocks: {block: b1, nodes: {n1: 1}}\n", 3, 32, "a.block.blocks[0].nodes: expected "
                                                                                  "a hostlist string"),
    ("- topology: a\n  cluster_default: maybe\n  flat: true\n", 2, 20, "a.cluster_default: expected true or false"),
    ("- topology: a\n  cluster_default: true\n", 1, 3, "a: none of tree, block or flat: true"),
    ("- topology: a\n  flat: false\n", 1, 3, "a: none of tree, block or flat: true"),
    ("- topology: a\n  flat: true\n  block: {blocks: [{block: b}]}\n", 3, 3, "a: both flat and block"),
    ("- topology: a\n  cluster_default: true\n  flat: true\n- topology: b\n  cluster_default: true\n  flat: true\n",
     5, 3, "b.cluster_default: topology a (line 1) is the cluster default already"),
    ("- topology: a\n  flat: true\n- topology: a\n  flat: true\n", 3, 3, "topology a is already defined at line 1"),
    (TREE + "      - {switch: s1, nodes: n1}\n      - {switch: s2, children: 's[1,9]'}\n", 5, None,
     "switch s2 lists child switch s9, which no switch entry defines"),
    ("- topology: a\n  tree:\n    switches:\n      - {switch: x, children: y}\n      - {switch: y, children: z}\n"
     "      - {switch: z, children: x}\n", 6, None, "switch loop: x -> y -> z -> x"),
    ("- topology: a\n  tree:\n    switches:\n      - {switch: s1, nodes: n1}\n      - {switch: s1, nodes: n2}\n",
     5, 10, "switch s1 is already defined at line 4"),
    (TREE + "      - {switch: s1, nodes: n1, children: s2}\n      - {switch: s2, nodes: n2}\n", 4, None,
     "switch s1 has both nodes and children"),
    ("- topology: a\n  tree:\n    switches:\n      - switch: s1\n        nodes: n[1-2\n", 5, 16,
     "a.tree.switches[0].nodes: bad hostlist 'n[1-2': unbalanced brackets"),
    ("- topology: a\n  tree:\n    switches:\n      - switch: s1\n        nodes:\n", 5, 15, "a.tree.switches[0].nodes: "
                                                                                       "has no value"),
    ("- topology: a\n  tree:\n    switches: []\n", 3, 15, "a.tree.switches: an empty list"),
    ("- topology: a\n  tree: {}\n", 2, 9, "a.tree: no switches"),
    ("- topology: a\n  block:\n    block_sizes: [4, 6]\n    blocks: [{block: b, nodes: 'n[1-4]'}]\n", 3, None,
     "block_sizes 6: must be the base size 4 times a power of two"),
    ("- topology: a\n  block:\n    block_sizes: [8, 4]\n    blocks: [{block: b, nodes: 'n[1-8]'}]\n", 3, None,
     "block_sizes 4: block sizes must grow (8 then 4)"),
    ("- topology: a\n  block:\n    block_sizes: '4,16'\n    blocks: [{block: b, nodes: 'n[1-4]'}]\n", 3, 18,
     "a.block.block_sizes[0]: expected a whole number of nodes, found '4,16'"),
    ("- topology: a\n  block:\n    block_sizes: []\n    blocks: [{block: b}]\n", 3, 18,
     "a.block.block_sizes: an empty"),
    # past 4300 digits int() refuses with a ValueError of its own, which escaped as a traceback
    ("- topology: a\n  block:\n    block_sizes: [" + "4" * 5000 + "]\n    blocks: [{block: b, nodes: n1}]\n", 3, 19,
     "a.block.block_sizes[0]: expected a whole number of nodes"),
    ("- topology: a\n  block:\n    blocks: [{block: b, nodes: n1}, {block: b}]\n", 3, 38,
     "block b is already defined at line 3"),
    ("- topology: a\n  block:\n    blocks: [{nodes: n1}]\n", 3, 14, "a.block.blocks[0]: no block: NAME"),
    ("- &t {topology: a, flat: true}\n- *t\n", 2, 3, "a YAML alias (*name): Slurm does not read aliases"),
    ("- topology: a\n  flat: true\n---\n- topology: b\n  flat: true\n", 3, 1, "expected a single document"),
    ("- topology: [a]\n  flat: true\n", 1, 13, "[0].topology: expected the topology's name, found a list"),
    ("- topology: a\n\x0c  flat: true\n", 2, None, "not YAML: character U+000C is not allowed"),
])
def test_errors_name_line_column_and_field(text, line, column, words):
    with pytest.raises(ParseError) as err:
        parse_topology_yaml(text, "t.yaml")
    assert (err.value.line, err.value.column) == (line, column), str(err.value)
    assert words in str(err.value), str(err.value)
    assert str(err.value).startswith("t.yaml")


def test_an_error_quoting_a_key_with_a_line_break_is_one_line():
    """A double-quoted YAML key may hold any character; quoted in the message it split the error's text in two
    (only the CLI escaped it)."""
    with pytest.raises(ParseError) as err:
        parse_topology_yaml('- topology: a\n  "x\\u2028y\\ny": 1\n  flat: true\n', "t.yaml")
    assert str(err.value) == ("t.yaml:2:3: [0].x\\u2028y\\ny: unknown key (keys here: topology, cluster_default, tree, "
                              "block, flat, ring, torus3d)")


def test_what_slurm_accepts_but_an_admin_should_hear_about():
    """The same warnings as topology.conf's: a host under two leaves, a switch with nothing below it; and a host
    in two blocks. Named at the line that lists the host again."""
    doc = parse_topology_yaml("- topology: a\n  tree:\n    switches:\n      - {switch: s1, nodes: 'n[1-2]'}\n"
                              "      - {switch: s2, nodes: 'n[2-3]'}\n      - {switch: s3}\n", "t.yaml")
    assert doc.select().conf.warnings() == ["t.yaml:5: host n2 is under several switches: s1, s2",
                                            "t.yaml:6: switch s3 has no nodes and no children"]
    doc = parse_topology_yaml("- topology: a\n  block:\n    blocks:\n      - {block: b1, nodes: 'n[1-2]'}\n"
                              "      - {block: b2, nodes: 'n[2-3]'}\n", "t.yaml")
    assert doc.select().conf.warnings() == ["t.yaml:5: host n2 is in several blocks: b1, b2"]


# ------------------------------------------------------------------------------------------------- the CLI

def _write(tmp_path: Path, text: str, name: str = "topology.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_cli_import_chooses_the_cluster_default_and_says_so(tmp_path):
    p = _write(tmp_path, DOCUMENTED)
    out = tmp_path / "g.json"
    r = runner.invoke(app, ["topo", "import", "--from", "topology.yaml", str(p), "--json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    info = json.loads(r.stdout)
    assert {k: info[k] for k in ("name", "hosts", "switches_by_level")} == {"name": "fabric", "hosts": 8,
                                                                           "switches_by_level": {"0": 2, "1": 1}}
    assert r.stderr.splitlines() == [f"slurmtools: warning: {p}: 3 topologies (fabric, racks, anywhere); imported "
                                     "fabric (tree, the cluster default)"]
    assert Topology.from_json(out.read_text()).same_as(to_topology(parse_topology_yaml(DOCUMENTED).select().conf,
                                                                   "fabric"))


def test_cli_import_a_named_topology(tmp_path):
    p = _write(tmp_path, DOCUMENTED)
    r = runner.invoke(app, ["topo", "import", "--from", "topology.yaml", str(p), "--topology", "racks"])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"{p} (topology.yaml): 8 hosts, switches none, 0 GPUs")
    # the blocks are in the graph now (they were left out with a warning): shown, and written back by export
    assert "4 blocks (BlockSizes 2,4)" in r.stdout
    assert r.stderr.splitlines() == [
        f"slurmtools: warning: {p}: 3 topologies (fabric, racks, anywhere); imported racks (block, named by "
        "--topology)"]
    # a flat topology names nothing to import: refused in one line that names the ones that do (it was an empty
    # graph, exit 0)
    r = runner.invoke(app, ["topo", "import", "--from", "topology.yaml", str(p), "--topology", "anywhere", "--json"])
    assert isinstance(r.exception, ConfigError)
    assert str(r.exception) == (f"{p}: anywhere: flat: it names no switches, blocks or hosts, so there is nothing to "
                                "import (--topology names another: fabric (tree), racks (block))")


def test_slurm_26_05_flat_options_ring_and_torus_are_read_and_only_choosing_them_is_refused(tmp_path):
    """Slurm 26.05 reads `flat:` as a mapping of options (alpha_step_rank) and two new kinds, ring and torus3d
    (its testsuite's topology.yaml): a file holding them beside a tree imports the tree; choosing one of the new
    kinds is refused naming it, and a typo under `flat:` is refused as before."""
    text = ("- topology: tree1\n  cluster_default: true\n  tree:\n    switches:\n      - switch: s1\n"
            "        nodes: node[01-04]\n"
            "- topology: flat2\n  flat:\n    alpha_step_rank: true\n"
            "- topology: ring1\n  ring:\n    rings:\n      - ring: ring0\n        nodes: node[01-04]\n"
            "- topology: torus1\n  torus3d:\n    toruses:\n      - name: pod1\n        dims:\n          x: 2\n")
    doc = parse_topology_yaml(text, "t.yaml")
    assert [(t.name, t.kind) for t in doc.topologies] == [("tree1", "tree"), ("flat2", "flat"), ("ring1", "ring"),
                                                          ("torus1", "torus3d")]
    p = _write(tmp_path, text)
    r = runner.invoke(app, ["topo", "import", "--from", "topology.yaml", str(p), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["hosts"] == 4
    r = runner.invoke(app, ["topo", "import", "--from", "topology.yaml", str(p), "--topology", "ring1"])
    assert str(r.exception) == (f"{p}: ring1: a ring topology (Slurm 26.05's topology/ring), which slurmtools does "
                                "not import (it imports tree and block ones; --topology names one: tree1 (tree))")
    with pytest.raises(ParseError, match=r"t.yaml:3:5: f.flat.alpha_step: unknown key"):
        parse_topology_yaml("- topology: f\n  flat:\n    alpha_step: true\n", "t.yaml")
    with pytest.raises(ParseError, match=r"expected true or false, found 'maybe'"):
        parse_topology_yaml("- topology: f\n  flat:\n    alpha_step_rank: maybe\n", "t.yaml")


def test_cli_refuses_topology_it_cannot_apply(tmp_path):
    p = _write(tmp_path, DOCUMENTED)
    r = runner.invoke(app, ["topo", "import", "--from", "topology.yaml", str(p), "--topology", "nope"])
    assert isinstance(r.exception, ConfigError)
    assert str(r.exception) == f"{p}: topology: no topology named 'nope' (the file has: fabric, racks, anywhere)"
    conf = _write(tmp_path, "SwitchName=s1 Nodes=n[1-2]\n", "topology.conf")
    r = runner.invoke(app, ["topo", "import", "--from", "topology.conf", str(conf), "--topology", "fabric"])
    assert r.exit_code == 2
    assert r.stderr == ("slurmtools: error: --topology: only with --from topology.yaml (a topology.conf input holds "
                        "one topology)\n")


def test_cli_same_graph_from_topology_yaml_and_topology_conf(tmp_path):
    t = fat_tree()
    y = _write(tmp_path, render_topology_yaml(t, R2511, {"p": "tree"}, "tree"))
    c = _write(tmp_path, render_topology_conf(t), "tree.conf")
    graphs = []
    for kind, p in (("topology.yaml", y), ("topology.conf", c)):
        out = tmp_path / f"{kind}.json"
        r = runner.invoke(app, ["topo", "import", "--from", kind, str(p), "--out", str(out)])
        assert r.exit_code == 0, r.output
        graphs.append(Topology.from_json(out.read_text()))
    assert graphs[0].name == "tree" and graphs[1].name == "tree"  # the yaml's topology, the conf file's stem
    assert graphs[0].same_as(graphs[1])


def test_detection_and_other_topo_commands_read_it(tmp_path, nvl_fabric):
    assert detect_kind(DOCUMENTED) == "topology.yaml"
    text = render_topology_yaml(nvl_fabric, R2511, {"ib": "tree", "nvl": "block"}, "tree")
    assert detect_kind(text) == "topology.yaml"
    assert detect_kind("topology: x\nflat: true\n") == "topology.yaml"
    assert detect_kind("SwitchName=s1 Nodes=n1\n") == "topology.conf"
    assert detect_kind("# a list of hosts\n- gpu01\n- gpu02\n") is None
    p = _write(tmp_path, text)
    r = runner.invoke(app, ["topo", "show", str(p), "--json"])
    assert r.exit_code == 0, r.output
    shown = json.loads(r.stdout)
    assert shown["hosts"] == 16, shown
