"""topo diff / lint / gres.conf checks, and the `slurmtools topo` CLI over them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slurmtools.errors import ParseError
from slurmtools.resources import bundled
from slurmtools.topology.build_site import build_site
from slurmtools.topology.checks import check_gres, diff, lint, parse_gres_conf
from slurmtools.topology.graph import NvLink, Topology, ib_link
from slurmtools.topology.render_slurm import render_gres_conf
from slurmtools.topology.sitefile import load_fabric

EXAMPLE = bundled("topology") / "example" / "fabric.toml"


@pytest.fixture(scope="module")
def declared() -> Topology:
    return build_site(load_fabric(EXAMPLE))


def discovered_with_faults(tmp_path: Path) -> Topology:
    """The example as a discovery would see it: switches named by GUID, and five faults."""
    text = EXAMPLE.read_text()
    for i in range(1, 5):
        text = text.replace(f'"leaf{i}"', f'"0xfc6a1c0300{i:02d}"')
    p = tmp_path / "seen.toml"
    p.write_text(text)
    t = build_site(load_fabric(p))
    # gpu16 is gone, gpu17 is new
    t.g.remove_nodes_from([v for v in list(t.g) if v.split(":")[1:2] == ["gpu16"]])
    t.add_host("gpu17")
    t.link("host:gpu17", "switch:0xfc6a1c030004", ib_link("4xNDR"))
    # gpu05 is cabled to leaf1's switch
    for n in range(8):
        t.g.remove_edge(f"nic:gpu05:mlx5_{n}", "switch:0xfc6a1c030002")
        t.link(f"nic:gpu05:mlx5_{n}", "switch:0xfc6a1c030001", ib_link("4xNDR"))
    # GPU 2 of gpu03 lost 6 of its 18 NVLinks
    t.g.edges["gpu:gpu03:2", "nvswitch:gpu03:0"]["e"] = NvLink(12)
    # mlx5_0 of gpu02 sits on socket 1
    t.g.remove_edge("pcisw:gpu02:0", "nic:gpu02:mlx5_0")
    t.link_pcie("pcisw:gpu02:2", "nic:gpu02:mlx5_0")
    return t


def test_diff_finds_each_fault_once(declared, tmp_path):
    seen = discovered_with_faults(tmp_path)
    found = [(f.code, f.subject) for f in diff(declared, seen)]
    assert sorted(found) == sorted([
        ("missing-host", "gpu16"), ("extra-host", "gpu17"), ("wrong-leaf", "gpu05"),
        ("degraded-nvlink", "gpu03"), ("degraded-nvlink", "gpu03"), ("degraded-nvlink", "gpu03"),
        ("degraded-nvlink", "gpu03"), ("degraded-nvlink", "gpu03"), ("degraded-nvlink", "gpu03"),
        ("degraded-nvlink", "gpu03"), ("nic-numa", "gpu02"),
    ])
    lines = {f.line() for f in diff(declared, seen)}
    assert "gpu05: under leaf 0xfc6a1c030001 (where leaf1's hosts are), declared under leaf2" in lines
    assert "gpu03: GPU 0 <-> GPU 2: 12 NVLinks, its type has 18" in lines
    assert "gpu02: NIC mlx5_0 is on NUMA node 1, declared 0" in lines


def test_diff_of_identical_graphs_is_empty(declared):
    assert diff(declared, Topology.from_json(declared.to_json())) == []


def test_diff_compares_only_what_discovery_saw(declared):
    """A fabric-only discovery (hosts and cables, no GPUs or NICs inside) reports no GPU or NIC problems."""
    t = Topology("ibnet")
    for s in ("leafA", "leafB", "leafC", "leafD"):
        t.add_switch(s)
    for i in range(1, 17):
        t.add_host(f"gpu{i:02d}")
        t.link(f"host:gpu{i:02d}", f"switch:leaf{'ABCD'[(i - 1) // 4]}", ib_link("4xNDR", 8))
    assert diff(declared, t) == []


def test_lint(declared):
    assert lint(declared) == []
    t = Topology.from_json(declared.to_json())
    t.g.edges["gpu:gpu07:1", "nvswitch:gpu07:0"]["e"] = NvLink(16)
    t.add_host("stray")
    t.add_switch("orphan")
    t.add_gpu("stray", 0)
    t.link_nvlink("gpu:gpu01:0", "gpu:gpu01:1", 2)
    found = sorted((f.code, f.subject, f.message) for f in lint(t))
    assert found == [("degraded-nvlink", "gpu07", f"GPU {i} <-> GPU {j}: 16 NVLinks, most hosts of type dgx-h100 "
                                                  f"have 18") for i, j in ((0, 1), (1, 2), (1, 3), (1, 4), (1, 5),
                                                                           (1, 6), (1, 7))] + [
        ("gpu-no-cpu", "stray", "GPU 0 has no local CPU recorded"),
        ("orphan-switch", "orphan", "no host is reachable from this switch"),
        ("uncabled-host", "stray", "not cabled to any switch")]
    # an extra direct NVLink on gpu01 is more, not fewer: not a degradation


def test_gres_conf_against_a_capture(declared, tmp_path):
    good = render_gres_conf(declared, "/dev/nvidia{index}")   # the site declares GPUs, not device minors
    assert check_gres(declared, good) == []
    seen = discovered_with_faults(tmp_path)
    found = check_gres(seen, good, "gres.conf")
    gpu03 = [f.line() for f in found if f.subject == "gpu03"]
    assert "gpu03: gres.conf:5: GPU 2 Links=18,18,-1,18,18,18,18,18, the capture has 12,12,-1,12,12,12,12,12" \
        in gpu03
    assert len(gpu03) == 8  # GPU 2's row and its entry in every other GPU's row
    bad_cores = good.replace("File=/dev/nvidia4 Cores=56-111", "File=/dev/nvidia4 Cores=0-55")
    found = check_gres(declared, bad_cores, "g.conf")
    assert len(found) == 16 and found[0].line() == "gpu01: g.conf:7: GPU 4 Cores=0-55, the capture has 56-111"
    missing = "\n".join(ln for ln in good.splitlines() if "nvidia7" not in ln)
    assert {f.code for f in check_gres(declared, missing)} == {"gres-missing"}


def test_gres_conf_parser():
    gpus = parse_gres_conf("AutoDetect=off\n# c\nNodeName=n[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-1] "
                           "Cores=0-3,8\nName=shard Count=8\n", "g")
    assert [(g.node, g.index, g.cores) for g in gpus] == [("n1", 0, (0, 1, 2, 3, 8)), ("n2", 0, (0, 1, 2, 3, 8)),
                                                          ("n1", 1, (0, 1, 2, 3, 8)), ("n2", 1, (0, 1, 2, 3, 8))]
    with pytest.raises(ParseError, match="^g:2: Cores: expected integers"):
        parse_gres_conf("\nName=gpu File=/dev/nvidia0 Cores=a-b", "g")
    assert parse_gres_conf("Name=gpu Count=8", "g") == []  # valid (AutoDetect fills it in), but no GPU index
    with pytest.raises(ParseError, match="g:1: expected Key=Value"):
        parse_gres_conf("Name=gpu File=/dev/nvidia0 oops", "g")


# ----------------------------------------------------------------------------------------------------- CLI

runner = CliRunner()


def cli(*args: str):
    from slurmtools.cli.main import app

    return runner.invoke(app, list(args))


def test_cli_export_and_show(tmp_path):
    r = cli("topo", "export", str(EXAMPLE), "--format", "topology.conf")
    assert r.exit_code == 0 and "SwitchName=spine1 Switches=leaf[1-4]" in r.output
    out = tmp_path / "t.json"
    assert cli("topo", "export", str(EXAMPLE), "-f", "json", "-o", str(out)).exit_code == 0
    assert Topology.from_json(out.read_text()).same_as(build_site(load_fabric(EXAMPLE)))
    r = cli("topo", "show", str(out), "--json")
    info = json.loads(r.output)
    assert (info["hosts"], info["gpus"], info["levels"][0]["ratio"]) == (16, 128, 2.0)
    r = cli("topo", "show", str(out), "--host", "gpu02", "--json")
    assert json.loads(r.output)["gpus"][3]["nearest_nics"] == ["mlx5_2", "mlx5_3"]
    r = cli("topo", "path", "gpu01", "gpu16", str(out))
    assert r.output.strip() == "gpu01 -> gpu16: 4 hops via leaf1 -> spine1 -> leaf4, bottleneck 400 GB/s"
    gml = tmp_path / "t.graphml"
    assert cli("topo", "export", str(out), "-f", "graphml", "-o", str(gml)).exit_code == 0
    import networkx as nx

    g = nx.read_graphml(gml)
    assert g.number_of_nodes() == Topology.from_json(out.read_text()).g.number_of_nodes()
    assert g.nodes["gpu:gpu02:3"]["kind"] == "gpu" and g.nodes["gpu:gpu02:3"]["gpu_type"] == "h100"
    assert g.edges["switch:leaf1", "switch:spine1"]["count"] == 16


def test_cli_pictures(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "n.png"
    assert cli("topo", "export", str(EXAMPLE), "-f", "png", "--host", "gpu01", "-o", str(png)).exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / "f.svg"
    assert cli("topo", "export", str(EXAMPLE), "-f", "svg", "-o", str(svg)).exit_code == 0
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "leaf4" in text and "spine1" in text
    # a single host with no switches (one node's capture): its inside is drawn without --host
    one = Topology("one")
    c = one.add_cpu("n1", 0, 0, cpus=range(4))
    one.add_gpu("n1", 0, parent=c)
    src = tmp_path / "one.json"
    src.write_text(one.to_json())
    svg1 = tmp_path / "one.svg"
    assert cli("topo", "export", str(src), "-f", "svg", "-o", str(svg1)).exit_code == 0
    assert "GPU0" in svg1.read_text() and "NUMA 0" in svg1.read_text()


def test_cli_diff_and_lint_exit_non_zero_on_findings(tmp_path, declared):
    seen = tmp_path / "seen.json"
    seen.write_text(discovered_with_faults(tmp_path).to_json())
    r = cli("topo", "diff", str(seen), "--declared", str(EXAMPLE))
    assert r.exit_code == 1
    assert "gpu16: declared but not discovered" in r.output.splitlines()
    r = cli("topo", "diff", str(seen), "--declared", str(EXAMPLE), "--json")
    assert r.exit_code == 1 and {"code": "extra-host", "subject": "gpu17", "message": "discovered but not declared"} \
        in json.loads(r.output)
    gres = tmp_path / "gres.conf"
    gres.write_text(render_gres_conf(declared, "/dev/nvidia{index}"))
    r = cli("topo", "lint", str(seen), "--gres", str(gres))
    assert r.exit_code == 1 and "gpu03: " in r.output
    r = cli("topo", "lint", str(EXAMPLE), "--gres", str(gres))
    assert r.exit_code == 0 and "no problems found" in r.output


def test_cli_user_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "slurmtools.topology/1", "vertices": [{"kind": "toaster"}]}')
    for args, msg in (
        (["show", str(bad)], f"slurmtools: error: {bad}: vertices[0].kind: expected one of"),
        (["export", str(EXAMPLE), "-f", "pdf"], "slurmtools: error: --format: expected one of"),
        (["export", str(EXAMPLE), "-f", "block"], "no multi-node NVLink domain"),
        (["show", str(tmp_path / "none.toml")], "none.toml: file not found"),
        (["path", "gpu01", "gpu99", str(EXAMPLE)], "slurmtools: error: no host 'gpu99'"),
        (["show", str(EXAMPLE), "--host", "nope"], "--host: no host 'nope'"),
    ):
        r = subprocess.run([sys.executable, "-m", "slurmtools", "topo", *args], capture_output=True, text=True)
        assert r.returncode == 2, (args, r.stderr)
        assert msg in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_diff_counts_no_gpus_a_source_may_list_only_some_of(declared):
    """A job's NCCL dump lists the GPUs of its ranks (2 of a node's 8, `devices` unknown): "2 GPUs discovered, 8
    declared" reported a node short of GPUs that has them all."""
    from slurmtools.topology.nccl_xml import parse_nccl_xml, to_topology

    from ._data import read_data

    seen = to_topology(parse_nccl_xml(read_data("handwritten_dgx1-v100_2-of-8-gpus_nccl-topo.xml"), "x.xml"), "gpu01")
    assert "devices" in seen.unknown("gpu01") and len(seen.gpus("gpu01")) == 2
    assert [f.code for f in diff(declared, seen) if f.subject == "gpu01"] == []
    seen.g.nodes["host:gpu01"]["v"] = seen.vertex("host:gpu01").__class__("gpu01")   # the same, all devices stated
    assert [f.line() for f in diff(declared, seen) if f.code == "gpu-count"] == ["gpu01: 2 GPUs discovered, 8 declared"]
