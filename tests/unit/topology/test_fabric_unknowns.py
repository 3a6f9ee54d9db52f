"""What a fabric input does not say stays unknown, and what it cannot mean is refused (found by running real
third-party topology.conf, topology.yaml, ibnetdiscover and gres.conf files through slurmtools, 2026-11-28):

- Slurm's topology files name no link rates: the graph marks `link_rates` unknown, so `topo show` prints no GB/s,
  `topo path` no bottleneck, `--strict` refuses, and LinkSpeed= (a relative weight) survives export;
- two adapters whose descriptions read as one (`localhost HCA-1` on nodes never given a description) were merged
  into one NIC, losing a host in silence: refused naming both;
- an import that keeps no host (no description names one, every leaf excluded, a lone adapter) was an empty graph
  with exit 0: refused saying why; some adapters without a host mark `adapter_hosts` unknown;
- a gres.conf under AutoDetect leaves the GPUs it does not list to the driver: not findings, counted instead."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.cli.topo_providers import build
from slurmtools.errors import ParseError
from slurmtools.topology.graph import Topology

from .test_ibnet_warnings import GPU01, GPU02, S_LEAF, S_SPINE, ca, dump, fabric

runner = CliRunner()

# two leaves of different LinkSpeed under one spine (the shape of Slurm's topology guide's example)
CONF = ("SwitchName=s0 Nodes=tux[0-3] LinkSpeed=900\n"
        "SwitchName=s1 Nodes=tux[4-7] LinkSpeed=1800\n"
        "SwitchName=s2 Switches=s[0-1]\n")


def _cli(*args):
    return runner.invoke(app, list(args))


def test_topology_conf_link_rates_are_unknown_not_ndr(tmp_path):
    p = tmp_path / "topology.conf"
    p.write_text(CONF)
    t = build("topology.conf", str(p))
    assert t.fabric_unknown == ("link_rates",)
    assert t.vertex("switch:s0").link_speed == 900 and t.vertex("switch:s2").link_speed is None
    # import: named as unknown, and --strict refuses
    r = _cli("topo", "import", str(p), "--from", "topology.conf", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["unknown"] == ["link_rates"]
    r = _cli("topo", "import", str(p), "--from", "topology.conf")
    assert "unknown: link_rates: the cables' rates" in r.stdout
    r = _cli("topo", "import", str(p), "--from", "topology.conf", "--strict")
    assert r.exit_code == 3 and "--strict: the input leaves unknown: link_rates" in r.stderr
    # show: the levels, no GB/s and no oversubscription (the file states neither rates nor cable counts: one
    # stand-in cable per link made a non-blocking tree read 4:1); JSON alike
    r = _cli("topo", "show", str(p))
    assert r.exit_code == 0, r.output
    assert "GB/s" not in r.stdout and "oversubscribed" not in r.stdout
    assert "  level 0: 2 switches\n  level 1: 1 switches\n" in r.stdout
    assert "  unknown: link_rates: the cables' rates and counts" in r.stdout
    info = json.loads(_cli("topo", "show", str(p), "--json").stdout)
    assert info["unknown"] == ["link_rates"]
    assert [(lv["down_gbytes"], lv["ratio"], lv["worst"]) for lv in info["levels"]] == [(None, None, None)] * 2
    # path: the hops, no bottleneck
    r = _cli("topo", "path", "tux0", "tux5", str(p))
    assert r.stdout.strip() == "tux0 -> tux5: 4 hops via s0 -> s2 -> s1, bottleneck unknown (the link rates are " \
                               "not known)"
    assert json.loads(_cli("topo", "path", "tux0", "tux5", str(p), "--json").stdout)["gbytes"] is None
    # export: LinkSpeed= as the file gave it; the graph JSON keeps the unknown; GraphML carries no rates
    r = _cli("topo", "export", str(p), "-f", "topology.conf")
    assert r.stdout.splitlines()[1:] == ["SwitchName=s0 Nodes=tux[0-3] LinkSpeed=900",
                                         "SwitchName=s1 Nodes=tux[4-7] LinkSpeed=1800",
                                         "SwitchName=s2 Switches=s[0-1]"]
    back = Topology.from_json(_cli("topo", "export", str(p), "-f", "json").stdout)
    assert back.fabric_unknown == ("link_rates",) and back.same_as(t)
    graphml = _cli("topo", "export", str(p), "-f", "graphml").stdout
    assert "gbytes" not in graphml and "NDR" not in graphml


def test_a_site_fabric_keeps_its_rates():
    r = _cli("topo", "show", "--json")
    info = json.loads(r.stdout)
    assert info["unknown"] == [] and info["levels"][0]["ratio"] == 2
    assert all(lv["down_gbytes"] > 0 for lv in info["levels"])


def test_a_graph_json_with_an_unknown_fact_it_does_not_know_is_refused():
    with pytest.raises(ParseError, match=r"fabric_unknown: expected a list of link_rates, adapter_hosts"):
        Topology.from_dict({"format": "slurmtools.topology/1", "fabric_unknown": ["speed"]}, "t.json")


def test_two_adapters_that_read_as_one_are_refused(tmp_path):
    a, b = ca(1, "localhost HCA-1"), ca(2, "localhost HCA-1")
    p = tmp_path / "fabric.out"
    p.write_text(dump([S_LEAF, a, b], [(S_LEAF, 1, a, 1, "4xEDR"), (S_LEAF, 2, b, 1, "4xEDR")]))
    with pytest.raises(ParseError) as err:
        build("ibnetdiscover", str(p))
    msg = str(err.value)
    assert f"adapters {a.guid} (line " in msg and f'and {b.guid} ("localhost HCA-1") both read as adapter HCA-1 ' \
                                                  "of host localhost: two adapters cannot be one" in msg
    assert "\n" not in msg
    # the pattern the message offers leaves them out (their hosts unknown): here that is every adapter, refused
    pattern = msg[msg.index("e.g. '") + 6:-2]
    assert pattern == r"^(?!localhost\s)(?P<host>\S+)\s+(?P<hca>\S+)$"
    with pytest.raises(ParseError, match="no host to import: the node descriptions of its 2 adapter"):
        build("ibnetdiscover", str(p), hostname_pattern=pattern)


def test_an_import_that_keeps_no_host_is_refused_saying_why(tmp_path):
    p = tmp_path / "fabric.out"
    anon = [ca(1, "MT23108 InfiniHost Mellanox Technologies"), ca(2, "MT23108 InfiniHost Mellanox Technologies")]
    p.write_text(dump([S_LEAF, *anon], [(S_LEAF, 1, anon[0], 1, "4xEDR"), (S_LEAF, 2, anon[1], 1, "4xEDR")]))
    r = _cli("topo", "import", str(p), "--from", "ibnetdiscover")
    assert r.exit_code != 0
    assert str(r.exception) == (f"{p}: no host to import: the node descriptions of its 2 adapter(s) name no host by "
                                "the pattern '^(?P<host>\\\\S+)\\\\s+(?P<hca>\\\\S+)$' (e.g. \"MT23108 InfiniHost "
                                "Mellanox Technologies\"); --hostname-pattern reads them")
    r = _cli("topo", "lint", str(p))   # was "no problems found" on the empty graph
    assert r.exit_code != 0 and "no host to import" in str(r.exception)
    # one adapter alone, no cable: not "cabled back to back"
    p.write_text(dump([GPU01], []))
    with pytest.raises(ParseError, match=r"no switch and no cable in the dump: it lists 1 node\(s\) alone"):
        build("ibnetdiscover", str(p))


def test_adapters_without_a_host_beside_named_ones_leave_adapter_hosts_unknown(tmp_path):
    p = tmp_path / "fabric.out"
    anon = ca(3, "MT4123 ConnectX6   Mellanox Technologies")
    nodes, cables = fabric([anon], [(S_LEAF, 3, anon, 1, "4xEDR")])
    p.write_text(dump(nodes, cables))
    t = build("ibnetdiscover", str(p))
    assert t.host_names() == ["gpu01", "gpu02"] and t.fabric_unknown == ("adapter_hosts",)
    r = _cli("topo", "import", str(p), "--from", "ibnetdiscover", "--strict")
    assert r.exit_code == 3 and "--strict: the input leaves unknown: adapter_hosts" in r.stderr
    p.write_text(dump(*fabric()))
    assert build("ibnetdiscover", str(p)).fabric_unknown == ()
    assert S_SPINE and GPU02   # the fixtures the fabric is made of


def test_gres_lint_under_autodetect_leaves_unlisted_gpus_to_the_driver(tmp_path):
    g = tmp_path / "gres.conf"
    g.write_text("AutoDetect=nvml\nNodeName=gpu01 Name=gpu Type=h100 File=/dev/nvidia0\n")
    r = _cli("topo", "lint", "--gres", str(g))
    assert r.exit_code == 0, r.output
    assert "; 7 GPU(s) without a line left to AutoDetect=nvml" in r.stdout
    assert "no line for GPU" not in r.stdout
    # AutoDetect=off: the file is all slurmd knows, so a GPU without a line is a finding
    g.write_text("AutoDetect=off\nNodeName=gpu01 Name=gpu Type=h100 File=/dev/nvidia0\n")
    r = _cli("topo", "lint", "--gres", str(g))
    assert r.exit_code == 1 and r.stdout.count("no line for GPU") == 7


def test_gres_lint_tells_lines_skipped_alike_once(tmp_path):
    g = tmp_path / "gres.conf"
    g.write_text("".join(f"NodeName=gpu01 Name=gpu Type=1g.10gb MultipleFiles=/dev/nvidia0,"
                         f"/dev/nvidia-caps/nvidia-cap{n}\n" for n in range(2)) +
                 "".join(f"NodeName=gpu01 Name=gpu Type=1g.10gb File=/dev/nvidia-caps/nvidia-cap{n}\n"
                         for n in range(10, 16)) +
                 "NodeName=gpu01 Name=gpu File=/dev/nvidia0\n")
    r = _cli("topo", "lint", "--gres", str(g))
    first = r.stdout.splitlines()[0]
    assert ("line 3 skipped: File=/dev/nvidia-caps/nvidia-cap10 is a MIG instance (/dev/nvidia-caps), not a whole "
            "GPU: not compared (and alike: lines 4, 5, 6 and 2 more)") in first
    assert "line 1 skipped: MultipleFiles= (one GPU over several device files) is not compared (and alike: line 2)" \
        in first
    assert first.count("skipped") == 2


def test_show_names_an_ibnetdiscover_ports_report_as_import_does(tmp_path):
    """`ibnetdiscover -p` prints a port per line; `topo show` called it an unknown input where `topo import`
    said what it is and what to dump instead."""
    p = tmp_path / "ports.txt"
    p.write_text("CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - "
                 "'ib-i1l1s01' )\n")
    r = _cli("topo", "show", str(p))
    assert r.exit_code != 0
    assert "this is an `ibnetdiscover -p` ports report, not a topology dump" in str(r.exception)


def test_declared_blocks_are_kept_in_order_and_written_back(tmp_path):
    """A topology/block file's blocks were left out of the graph (its hosts kept, with a warning): `topo show`
    said 0 of them and `topo export -f block` refused. Now each is a `Block` of its hosts, in the file's order (Slurm
    aggregates blocks by position), with BlockSizes=, through the graph JSON too; nothing claims what joins them."""
    p = tmp_path / "topology.conf"
    # out of name order, an empty placeholder block between (Slurm 25.05 and later)
    p.write_text("BlockName=rack2 Nodes=n[5-8]\nBlockName=rack1 Nodes=n[1-4]\nBlockName=spare\n"
                 "BlockName=rack3 Nodes=n[9-12]\nBlockSizes=4,16\n")
    t = build("topology.conf", str(p))
    assert t.declared_blocks() == [("rack2", ["n5", "n6", "n7", "n8"]), ("rack1", ["n1", "n2", "n3", "n4"]),
                                   ("spare", []), ("rack3", ["n9", "n10", "n11", "n12"])]
    assert t.block_sizes == (4, 16) and t.count("nvlink_domain") == 0 and t.fabric_unknown == ()
    r = _cli("topo", "export", str(p), "-f", "block")
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[1:] == ["BlockName=rack2 Nodes=n[5-8]", "BlockName=rack1 Nodes=n[1-4]",
                                         "BlockName=spare", "BlockName=rack3 Nodes=n[9-12]", "BlockSizes=4,16"]
    back = Topology.from_json(t.to_json())
    assert back.same_as(t) and back.declared_blocks() == t.declared_blocks() and back.block_sizes == (4, 16)
    r = _cli("topo", "show", str(p))
    assert "blocks: 4 declared (BlockSizes 4,16): rack2 n[5-8], rack1 n[1-4], spare (empty), rack3 n[9-12]" \
        in r.stdout
    info = json.loads(_cli("topo", "show", str(p), "--json").stdout)
    assert [b["name"] for b in info["blocks"]] == ["rack2", "rack1", "spare", "rack3"]
    assert info["block_sizes"] == [4, 16]
    r = _cli("topo", "import", str(p), "--from", "topology.conf", "--json")
    assert json.loads(r.stdout)["blocks"] == 4 and r.stderr == ""
    # a file without BlockSizes= is written back without one: Slurm then aggregates 1, 2, 4 and 8 blocks, which
    # BlockSizes=4 (the blocks' size, what an NVLink domain export writes) would take away
    p.write_text("BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-8]\n")
    r = _cli("topo", "export", str(p), "-f", "block")
    assert r.stdout.splitlines()[1:] == ["BlockName=b1 Nodes=n[1-4]", "BlockName=b2 Nodes=n[5-8]"]


@pytest.mark.parametrize("vertex, why", [
    ({"kind": "block", "name": "b", "position": None}, "vertices[0].position: expected a whole number, got None"),
    ({"kind": "block", "name": "b", "position": "x"}, "vertices[0].position: expected a whole number, got 'x'"),
    ({"kind": "switch", "name": "s", "link_speed": "fast"},
     "vertices[0].link_speed: expected a whole number or null, got 'fast'"),
    ({"kind": "switch", "name": "s", "level": -1}, "vertices[0].level: expected a whole number or null, got -1"),
])
def test_a_graph_json_with_a_field_of_the_wrong_type_is_refused_in_one_line(vertex, why):
    with pytest.raises(ParseError) as err:
        Topology.from_dict({"format": "slurmtools.topology/1", "vertices": [vertex]}, "t.json")
    assert str(err.value) == f"t.json: {why}"
    with pytest.raises(ParseError, match=r"fabric_unknown: expected a list of"):
        Topology.from_dict({"format": "slurmtools.topology/1", "fabric_unknown": [["link_rates"]]}, "t.json")


def test_exports_that_would_write_nothing_are_refused(tmp_path):
    """A graph without GPUs (a block or tree topology file) exported as gres.conf wrote `AutoDetect=off` alone,
    exit 0: installed, slurmd would find no GPU on any node. And features of hosts that have none wrote a blank
    line."""
    p = tmp_path / "topology.conf"
    p.write_text("BlockName=b1 Nodes=n[1-4]\n")
    r = _cli("topo", "export", str(p), "-f", "gres.conf")
    assert r.exit_code != 0 and "no host with GPUs in the topology to write gres.conf for" in str(r.exception)
    r = _cli("topo", "export", str(p), "-f", "features")
    assert r.exit_code != 0 and "no host has a feature the topology can tell" in str(r.exception)
    p.write_text(CONF)   # a tree's leaves are features
    assert _cli("topo", "export", str(p), "-f", "features").stdout.splitlines()[0] == "NodeName=tux[0-3] Features=s0"


def test_adapters_that_name_no_host_can_be_left_out_by_description_or_guid(tmp_path):
    """A storage appliance's adapters never given a description left `adapter_hosts` unknown for good: --exclude-hca
    matched adapter names only, which such adapters do not have. Its globs also match their description or GUID."""
    p = tmp_path / "fabric.out"
    anon = ca(3, "MT4123 ConnectX6   Mellanox Technologies")
    nodes, cables = fabric([anon], [(S_LEAF, 3, anon, 1, "4xEDR")])
    p.write_text(dump(nodes, cables))
    for glob in ("MT4123 ConnectX6*", anon.guid):
        t = build("ibnetdiscover", str(p), exclude_hca=(glob,))
        assert t.host_names() == ["gpu01", "gpu02"] and t.fabric_unknown == ()
        r = _cli("topo", "import", str(p), "--from", "ibnetdiscover", "--exclude-hca", glob, "--strict")
        assert r.exit_code == 0, r.output
    # a glob of a named host's adapter name does not reach the description of another
    assert build("ibnetdiscover", str(p), exclude_hca=("mlx5_9",)).fabric_unknown == ("adapter_hosts",)
