"""Topology drift as node health: the node expectations rendered from real graphs (the bundled example site, the
CPU test site, real captures), the file's validation (one line naming file and field), the sysfs HCA reader on
files in the kernel's formats, and the comparison: degraded NVLink, x8 PCIe, HDR instead of NDR, a down or
missing HCA give one-line reasons; facts the graph does not state are reported as not checked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.errors import ConfigError
from slurmtools.hooks import common, drift, expectations, links, nodecheck
from slurmtools.hooks.expectations import GpuExpect, HcaExpect, HostExpectations
from slurmtools.hooks.links import GpuLinks, HcaPort
from slurmtools.render import node_expectations as ne
from slurmtools.topology.build_site import build_site
from slurmtools.topology.graph import Topology
from slurmtools.topology.sitefile import load_fabric
from tests.conftest import REPO, TEST_DATA

EXAMPLE_FABRIC = REPO / "topology" / "example" / "fabric.toml"
CPU_FABRIC = TEST_DATA / "sites" / "cpu" / "fabric.toml"
CAPTURES = TEST_DATA / "topology"


# --------------------------------------------------------------------------------------------- helpers

def write_expectations(folder: Path, gpus: int | None = 8, nvlinks: int | None = 18, pcie_gen: int | None = None,
                       pcie_width: int | None = None, hcas: list[dict] | None = None, host: str = "gpu01") -> Path:
    """A root-owned expectations file for one host, as the renderer writes it."""
    if hcas is None:
        hcas = [{"name": f"mlx5_{i}", "rate_gbytes": None, "width": 4, "speed": "NDR", "link_layer": "ib",
                 "cabled": True} for i in range(2)]
    doc = {"format": expectations.FORMAT, "topology": "test",
           "profiles": {"p": {"gpus": gpus, "gpu": [{"index": i, "nvlinks": nvlinks, "pcie_gen": pcie_gen,
                                                     "pcie_width": pcie_width} for i in range(gpus or 0)],
                              "hcas": hcas}},
           "hosts": {host: "p"}}
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o755)
    path = folder / expectations.NAME
    path.write_text(json.dumps(doc))
    os.chmod(path, 0o644)
    return path


def sysfs(root: Path, hcas: dict[str, str | tuple[str, str, str]]) -> Path:
    """A /sys/class/infiniband tree in the kernel's formats. hcas: name -> rate text (port ACTIVE / LinkUp), or
    (rate, state, phys_state)."""
    for name, spec in hcas.items():
        rate, state, phys = (spec, "4: ACTIVE", "5: LinkUp") if isinstance(spec, str) else spec
        port = root / "sys" / "class" / "infiniband" / name / "ports" / "1"
        port.mkdir(parents=True, exist_ok=True)
        (port / "rate").write_text(rate + "\n")
        (port / "state").write_text(state + "\n")
        (port / "phys_state").write_text(phys + "\n")
        (port / "link_layer").write_text("InfiniBand\n")
    (root / "sys" / "class" / "infiniband").mkdir(parents=True, exist_ok=True)
    return root


def host_exp(gpus=8, nvlinks=18, pcie_gen=None, pcie_width=None, hcas=None) -> HostExpectations:
    gpu = [GpuExpect(i, nvlinks, pcie_gen, pcie_width) for i in range(gpus or 0)]
    return HostExpectations("gpu01", "p", "/etc/slurm/x.json", gpus, gpu, [] if hcas is None else hcas)


def healthy_gpus(n: int = 8, over: dict[int, dict] | None = None, **every) -> dict[int, GpuLinks]:
    """GPU links of a healthy H100 board at full speed; `every` changes all GPUs, `over` single ones."""
    base = {**dict(nvlinks_up=18, pcie_gen=5, pcie_width=16, pcie_max_gen=5, pcie_max_width=16, pstate=0), **every}
    return {i: GpuLinks(i, **{**base, **(over or {}).get(i, {})}) for i in range(n)}


NDR = HcaExpect("mlx5_0", None, 4, "NDR", "ib", True)


def port(rate="400 Gb/sec (4X NDR)", state="ACTIVE", phys="LinkUp", layer="InfiniBand") -> list[HcaPort]:
    return [HcaPort(1, state, phys, rate, layer)]


def reason_ok(reason: str) -> bool:
    """Survives `common.drain` unchanged (it replaces any other character)."""
    return all(c in common._REASON_CHARS for c in reason)


# ------------------------------------------------------------------------------------------- the renderer

def test_render_from_the_bundled_example_site():
    t = build_site(load_fabric(EXAMPLE_FABRIC))
    doc = ne.document(t)
    assert list(doc["profiles"]) == ["dgx-h100"] and set(doc["hosts"]) == {f"gpu{i:02d}" for i in range(1, 17)}
    p = doc["profiles"]["dgx-h100"]
    assert p["gpus"] == 8 and [g["nvlinks"] for g in p["gpu"]] == [18] * 8
    # the fabric file states no PCIe link of the GPUs and no HCA rate: null, never a default
    assert {(g["pcie_gen"], g["pcie_width"]) for g in p["gpu"]} == {(None, None)}
    assert p["hcas"][3] == {"name": "mlx5_3", "rate_gbytes": None, "width": 4, "speed": "NDR", "link_layer": "ib",
                            "cabled": True}
    text = ne.dumps(doc)
    assert json.loads(text) == doc
    parsed = expectations.parse_all(text, "x.json")
    assert parsed["gpu07"].gpus == 8 and parsed["gpu07"].gpu[5].nvlinks == 18
    assert parsed["gpu07"].hcas[0].speed == "NDR"
    assert any("not stated, not checked: PCIe gen, PCIe width" in line for line in ne.summary(doc))


def test_render_cpu_hosts_have_no_gpu_count():
    doc = ne.document(build_site(load_fabric(CPU_FABRIC)))
    cpu = doc["profiles"][doc["hosts"]["cpu01"]]
    assert cpu["gpus"] is None and cpu["gpu"] == []
    r = drift.compare(expectations.parse(ne.dumps(doc), "x", "cpu01"), drift.Observed(gpu_count=0))
    assert "GPU count: the graph has no GPUs for this host" in r.not_checked and r.faults == []


@pytest.mark.parametrize("capture, nvlinks, nics", [
    ("stas00-mlengineering_h100x8-NV18_reformatted.txt", 18, 0),      # NVSwitch board: 18 links into the switch
    ("gpu-compress-decompress_dgx-a100x8_10nic_nps4.txt", 12, 10),     # DGX A100: 12 links, 10 HCAs
    ("stas00-mlengineering_2gpu-pcie-PHB.txt", 0, 0),                  # PCIe only: no NVLink
])
def test_render_from_nvidia_smi_captures(capture, nvlinks, nics):
    from slurmtools.cli.topo_providers import build

    t = build("nvidia-smi", str(CAPTURES / capture))
    (host,) = t.host_names()
    p = ne.host_facts(t, host)
    assert {g["nvlinks"] for g in p["gpu"]} == {nvlinks}
    assert len(p["hcas"] or []) == nics
    for h in p["hcas"] or []:  # nvidia-smi names the HCAs but states no rate and no cable
        assert (h["rate_gbytes"], h["width"], h["speed"], h["cabled"]) == (None, None, None, None)


def test_render_nccl_xml_nic_rates():
    from slurmtools.cli.topo_providers import build

    t = build("nccl-xml", str(CAPTURES / "simai_topo_8A100_4CX6.xml"))
    (host,) = t.host_names()
    p = ne.host_facts(t, host)
    assert p["gpus"] == 8 and {g["nvlinks"] for g in p["gpu"]} == {12}
    assert {h["rate_gbytes"] for h in p["hcas"]} == {25.0}   # speed="200000" Mb/s in the dump


def test_render_states_pcie_only_where_the_graph_does():
    t = Topology("hand")
    cpu = t.add_cpu("n1", 0)
    t.add_gpu("n1", 0, parent=cpu)
    t.add_gpu("n1", 1, parent=cpu)
    t.link_pcie(cpu, "gpu:n1:0", gen=5, width=16)
    p = ne.host_facts(t, "n1")
    assert [(g["pcie_gen"], g["pcie_width"]) for g in p["gpu"]] == [(5, 16), (None, None)]
    assert p["hcas"] == []


def test_render_unknown_facts_of_the_host_stay_null():
    t = build_site(load_fabric(EXAMPLE_FABRIC))
    t.mark_unknown("gpu03", "nvlink", "nics")
    doc = ne.document(t)
    p = doc["profiles"][doc["hosts"]["gpu03"]]
    assert doc["hosts"]["gpu03"] != doc["hosts"]["gpu02"]
    assert {g["nvlinks"] for g in p["gpu"]} == {None} and p["hcas"] is None
    r = drift.compare(expectations.parse(ne.dumps(doc), "x", "gpu03"),
                      drift.Observed(gpu_count=8, gpus=healthy_gpus(nvlinks_up=0)))
    assert r.faults == [] and "GPU 0-7 NVLinks: not declared" in r.not_checked
    assert "HCAs: the graph does not state which this host has" in r.not_checked


def test_cli_render_node_expectations(tmp_path):
    runner = CliRunner()
    out = tmp_path / expectations.NAME
    r = runner.invoke(app, ["admin", "render", "node-expectations", str(EXAMPLE_FABRIC), "--host", "gpu02",
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    assert list(json.loads(out.read_text())["hosts"]) == ["gpu02"]
    r = runner.invoke(app, ["admin", "render", "node-expectations", str(EXAMPLE_FABRIC), "--host", "nope"])
    assert r.exit_code == 2 and "--host: no host 'nope'" in r.output


# ------------------------------------------------------------------------------------ the file's validation

GOOD = {"format": expectations.FORMAT, "topology": "t",
        "profiles": {"p": {"gpus": 2, "gpu": [{"index": 0, "nvlinks": 18, "pcie_gen": 5, "pcie_width": 16}],
                           "hcas": [{"name": "mlx5_0", "rate_gbytes": 50, "width": 4, "speed": "NDR",
                                     "link_layer": "ib", "cabled": True}]}},
        "hosts": {"gpu01": "p"}}


def test_parse_a_good_file():
    e = expectations.parse(json.dumps(GOOD), "f.json", "gpu01")
    assert (e.gpus, e.gpu[0].nvlinks, e.gpu[0].pcie_gen, e.hcas[0].rate_gbytes) == (2, 18, 5, 50.0)
    assert expectations.parse(json.dumps(GOOD), "f.json", "gpu99") is None


def _bad(path: str, value):
    doc = json.loads(json.dumps(GOOD))
    *head, last = path.split(".")
    d = doc
    for k in head:
        d = d[int(k)] if isinstance(d, list) else d[k]
    if isinstance(d, list):
        d[int(last)] = value
    elif value is KeyError:
        del d[last]
    else:
        d[last] = value
    return json.dumps(doc)


@pytest.mark.parametrize("path, value, message", [
    ("format", "slurmtools.node-expectations/0", "f.json: format: expected 'slurmtools.node-expectations/1', "
                                                 "found 'slurmtools.node-expectations/0'"),
    ("hosts", [], "f.json: hosts: expected an object, found a list"),
    ("hosts.gpu01", "q", "f.json: hosts.gpu01: no profile 'q' in profiles"),
    ("hosts.gpu01", 3, "f.json: hosts.gpu01: expected a profile name, found a number"),
    ("profiles.p.gpus", -1, "f.json: profiles.p.gpus: expected 0 or more, found -1"),
    ("profiles.p.gpus", "8", "f.json: profiles.p.gpus: expected a whole number or null, found '8'"),
    ("profiles.p.nvlink", 18, "f.json: profiles.p.nvlink: unknown field (known: gpus, gpu, hcas)"),
    ("profiles.p.gpu.0.nvlinks", 1.5, "f.json: profiles.p.gpu[0].nvlinks: expected a whole number or null, "
                                      "found 1.5"),
    ("profiles.p.gpu.0.index", KeyError, "f.json: profiles.p.gpu[0].index: missing"),
    ("profiles.p.gpu.0.index", 5, "f.json: profiles.p.gpu: GPU index 5 but gpus = 2"),
    ("profiles.p.gpu.0.pcie_width", 3, "f.json: profiles.p.gpu[0].pcie_width: expected one of 1, 2, 4, 8, 12, "
                                       "16, 32, found 3"),
    ("profiles.p.gpu.0.pcie_gen", 9, "f.json: profiles.p.gpu[0].pcie_gen: expected 7 or less, found 9"),
    ("profiles.p.hcas.0.name", "../etc", "f.json: profiles.p.hcas[0].name: expected an HCA name like 'mlx5_0', "
                                         "found '../etc'"),
    ("profiles.p.hcas.0.speed", "ndr", "f.json: profiles.p.hcas[0].speed: expected one of SDR, DDR, QDR, FDR10, "
                                       "FDR, EDR, HDR, NDR, XDR or null, found 'ndr'"),
    ("profiles.p.hcas.0.rate_gbytes", 0, "f.json: profiles.p.hcas[0].rate_gbytes: expected GB/s above 0 or null, "
                                         "found 0"),
    ("profiles.p.hcas.0.cabled", "yes", "f.json: profiles.p.hcas[0].cabled: expected true, false or null, "
                                        "found 'yes'"),
    ("profiles.p.hcas.0.link_layer", "roce", "f.json: profiles.p.hcas[0].link_layer: expected one of ib, "
                                             "ethernet or null, found 'roce'"),
    ("profiles.p.hcas", {}, "f.json: profiles.p.hcas: expected a list, found an object"),
])
def test_malformed_file_one_line_naming_file_and_field(path, value, message):
    with pytest.raises(ConfigError) as ei:
        expectations.parse(_bad(path, value), "f.json", "gpu01")
    assert str(ei.value) == message and "\n" not in str(ei.value)


@pytest.mark.parametrize("text, message", [
    ('{"format": "slurmtools.node-expectations/1",\n "hosts": }', "f.json: line 2 column 11: invalid JSON: "
                                                                  "Expecting value"),
    ("[1, 2]", "f.json: expected a JSON object, found a list"),
    (b"\xff\xfe", "f.json: not UTF-8 text (byte 0)"),
])
def test_unreadable_file_one_line(text, message):
    with pytest.raises(ConfigError) as ei:
        expectations.parse(text, "f.json", "gpu01")
    assert str(ei.value) == message


def test_parse_all_checks_every_profile():
    doc = json.loads(json.dumps(GOOD))
    doc["profiles"]["unused"] = {"gpus": "x"}
    assert expectations.parse(json.dumps(doc), "f.json", "gpu01") is not None  # the prolog reads its own only
    with pytest.raises(ConfigError, match=r"profiles\.unused\.gpus"):
        expectations.parse_all(json.dumps(doc), "f.json")


def test_ib_speeds_are_the_graphs():
    from slurmtools.topology.graph import IB_LANE_GBYTES

    assert expectations.IB_SPEEDS == tuple(IB_LANE_GBYTES)
    assert list(IB_LANE_GBYTES.values()) == sorted(IB_LANE_GBYTES.values())  # slowest first, as drift ranks them


def test_where_the_file_is(monkeypatch):
    for k in ("SLURMTOOLS_NODE_EXPECTATIONS", "SLURMTOOLS_LAB_ETC", "SLURM_CONF"):
        monkeypatch.delenv(k, raising=False)
    assert expectations.path() == "/etc/slurm/slurmtools-node-expectations.json"
    monkeypatch.setenv("SLURM_CONF", "/opt/slurm/etc/slurm.conf")
    assert expectations.path() == "/opt/slurm/etc/slurmtools-node-expectations.json"
    monkeypatch.setenv("SLURMTOOLS_LAB_ETC", "/lab/etc")
    assert expectations.path() == "/lab/etc/slurmtools-node-expectations.json"
    monkeypatch.setenv("SLURMTOOLS_NODE_EXPECTATIONS", "/x/y.json")
    assert expectations.path() == "/x/y.json"


@pytest.mark.usefixtures("require_root")  # ownership checks need root
def test_a_file_root_does_not_own_is_refused(tmp_path, monkeypatch):
    path = write_expectations(tmp_path / "etc")
    monkeypatch.setenv("SLURMTOOLS_NODE_EXPECTATIONS", str(path))
    assert nodecheck._expectations("gpu01")[0] is not None
    os.chown(path, 1001, 1001)
    exp, why = nodecheck._expectations("gpu01")
    assert exp is None and why == f"file refused: {path}: owned by uid 1001, not root"
    os.chown(path, 0, 0)
    os.chmod(path, 0o666)
    assert "writable by group or others" in nodecheck._expectations("gpu01")[1]
    os.chmod(path, 0o644)
    link = tmp_path / "etc" / "link.json"
    link.symlink_to(path)
    monkeypatch.setenv("SLURMTOOLS_NODE_EXPECTATIONS", str(link))
    assert "symlinks are refused" in nodecheck._expectations("gpu01")[1]
    monkeypatch.setenv("SLURMTOOLS_NODE_EXPECTATIONS", str(path))
    path.write_text("{")
    assert nodecheck._expectations("gpu01")[1].startswith(f"malformed: {path}: line 1 column 2: invalid JSON")


# --------------------------------------------------------------------------------------- sysfs HCA reader

@pytest.mark.parametrize("text, parsed", [
    ("400 Gb/sec (4X NDR)", (400.0, 4, "NDR")),
    ("200 Gb/sec (4X HDR)\n", (200.0, 4, "HDR")),
    ("100 Gb/sec (2X HDR)", (100.0, 2, "HDR")),
    ("56 Gb/sec (4X FDR)", (56.0, 4, "FDR")),
    ("40 Gb/sec (4X FDR10)", (40.0, 4, "FDR10")),
    ("2.5 Gb/sec (1X SDR)", (2.5, 1, "SDR")),
    ("800 Gb/sec (4X XDR)", (800.0, 4, "XDR")),
    ("garbage", None),
    ("400 Gb/sec", None),
    ("x Gb/sec (4X NDR)", None),
])
def test_parse_rate(text, parsed):
    assert links.parse_rate(text) == parsed


def test_sysfs_reader_on_the_kernels_formats(tmp_path):
    root = sysfs(tmp_path, {"mlx5_0": "400 Gb/sec (4X NDR)", "mlx5_1": ("100 Gb/sec (4X EDR)", "1: DOWN",
                                                                        "2: Polling")})
    (tmp_path / "sys/class/infiniband/mlx5_0/ports/2").mkdir()  # a second port whose files are missing
    assert links.hca_names(str(root)) == ["mlx5_0", "mlx5_1"]
    got = links.read_hcas(["mlx5_0", "mlx5_1", "mlx5_9"], str(root))
    assert set(got) == {"mlx5_0", "mlx5_1"}
    p = got["mlx5_0"][0]
    assert (p.port, p.state, p.phys_state, p.gbps, p.width, p.speed, p.link_layer, p.active) == \
        (1, "ACTIVE", "LinkUp", 400.0, 4, "NDR", "InfiniBand", True)
    assert (got["mlx5_0"][1].port, got["mlx5_0"][1].state, got["mlx5_0"][1].gbps) == (2, None, None)
    q = got["mlx5_1"][0]
    assert (q.state, q.phys_state, q.active) == ("DOWN", "Polling", False)
    assert links.read_hcas(["mlx5_0"], str(tmp_path / "nothing")) is None
    assert links.hca_names(str(tmp_path / "nothing")) is None


# --------------------------------------------------------------------------------------------- comparing

def test_healthy_node_has_no_faults():
    r = drift.compare(host_exp(hcas=[NDR]), drift.Observed(gpu_count=8, gpus=healthy_gpus(),
                                                           hcas={"mlx5_0": port()}, hca_names=["mlx5_0"]))
    assert r.faults == [] and r.notes == []
    assert r.compared == 1 + 8 * 3 + 3  # count; per GPU NVLink, width, generation; HCA state, width, speed


def test_degraded_nvlink_is_one_line_naming_gpu_and_links():
    gpus = healthy_gpus(over={3: {"nvlinks_up": 16, "nvlinks_down": (4, 9)}})
    r = drift.compare(host_exp(), drift.Observed(gpu_count=8, gpus=gpus))
    assert r.faults == ["GPU 3 NVLink 16/18 up (down: 4,9)"]
    assert all(reason_ok(f) for f in r.faults)


def test_pcie_x8_link_is_a_fault():
    gpus = healthy_gpus(over={5: {"pcie_width": 8}})
    r = drift.compare(host_exp(), drift.Observed(gpu_count=8, gpus=gpus))
    assert r.faults == ["GPU 5 PCIe x8 of max x16"]
    r = drift.compare(host_exp(pcie_gen=5, pcie_width=16),
                      drift.Observed(gpu_count=8, gpus=healthy_gpus(over={5: {"pcie_width": 8, "pcie_max_width": 8,
                                                                                   "pcie_max_gen": 4, "pcie_gen": 4}})))
    assert r.faults == ["GPU 5 PCIe x8, declared x16, max Gen4, declared Gen5"]
    assert all(reason_ok(f) for f in r.faults)


def test_pcie_generation_is_compared_only_at_full_speed():
    idle = healthy_gpus(pcie_gen=1, pstate=8)
    r = drift.compare(host_exp(), drift.Observed(gpu_count=8, gpus=idle))
    assert r.faults == []
    assert "GPU 0-7 current PCIe generation: idle (P8), the link slows down to save power" in r.not_checked
    busy = healthy_gpus(over={2: {"pcie_gen": 3}})
    assert drift.compare(host_exp(), drift.Observed(gpu_count=8, gpus=busy)).faults == [
        "GPU 2 PCIe Gen3 of max Gen5 at full speed"]


def test_hdr_instead_of_ndr_is_a_fault():
    r = drift.compare(host_exp(hcas=[NDR]), drift.Observed(gpu_count=8, gpus=healthy_gpus(),
                                                           hcas={"mlx5_0": port("200 Gb/sec (4X HDR)")}))
    assert r.faults == ["HCA mlx5_0 port 1 at 200 Gb/sec (4X HDR), declared 4X NDR"]
    rated = HcaExpect("mlx5_0", 50.0, None, None, None, True)  # an ibnetdiscover / NCCL graph: a rate only
    r = drift.compare(host_exp(hcas=[rated]), drift.Observed(hcas={"mlx5_0": port("100 Gb/sec (1X NDR)")}))
    assert r.faults == ["HCA mlx5_0 port 1 at 100 Gb/sec (1X NDR), declared 400 Gb/s"]
    assert all(reason_ok(f) for f in r.faults)


def test_hca_down_missing_or_without_driver():
    two = [NDR, HcaExpect("mlx5_1", None, 4, "NDR", "ib", True)]
    r = drift.compare(host_exp(hcas=two), drift.Observed(hcas={"mlx5_0": port(state="DOWN", phys="Polling")},
                                                         hca_names=["mlx5_0"]))
    assert r.faults == ["HCA mlx5_1 missing", "HCA mlx5_0 port 1 DOWN (Polling)"]
    r = drift.compare(host_exp(hcas=two), drift.Observed(ib_class_absent=True))
    assert r.faults == ["2 declared HCAs missing (/sys/class/infiniband absent)"]
    # none of the declared names, but other devices: the graph names HCAs differently, nothing is said
    r = drift.compare(host_exp(hcas=two), drift.Observed(hcas={}, hca_names=["ibp12s0", "ibp75s0"]))
    assert r.faults == [] and r.not_checked[-1] == ("HCAs: none of mlx5_0,mlx5_1 is on this node, which has "
                                                    "ibp12s0,ibp75s0: the graph names them differently")


def test_unknown_expected_facts_are_reported_not_checked():
    unknown_hca = HcaExpect("mlx5_0")
    exp = host_exp(gpus=None, nvlinks=None, hcas=[unknown_hca])
    exp.gpu = [GpuExpect(i) for i in range(4)]
    r = drift.compare(exp, drift.Observed(gpu_count=4, gpus=healthy_gpus(4, nvlinks_up=0),
                                          hcas={"mlx5_0": port("100 Gb/sec (4X EDR)")}, hca_names=["mlx5_0"]))
    assert r.faults == []
    assert r.not_checked[:3] == ["GPU count: the graph has no GPUs for this host", "GPU 0-3 NVLinks: not declared",
                                 "GPU 0-3 PCIe generation and width: not declared (current link compared with "
                                 "its maximum only)"]
    assert "HCA mlx5_0 link state: not declared as cabled to a switch" in r.not_checked
    assert "HCA mlx5_0 rate, width and speed: not declared" in r.not_checked
    assert "not checked: GPU count: the graph has no GPUs" in r.summary()


def test_unread_sources_are_reported_not_checked():
    r = drift.compare(host_exp(hcas=[NDR]), drift.Observed(gpus_why="the job has no GPUs (NVML not opened)",
                                                           hcas_why="the lab fault file names no sysfs_root"))
    assert r.faults == [] and r.compared == 0
    assert r.not_checked == ["GPU count: the job has no GPUs (NVML not opened)",
                             "GPU links: the job has no GPUs (NVML not opened)",
                             "HCAs: the lab fault file names no sysfs_root"]
    r = drift.compare(host_exp(), drift.Observed(gpu_count=8, gpus=healthy_gpus(5), skipped=[5, 6, 7],
                                                 budget_s=2.0))
    assert r.faults == [] and "GPU 5-7 links: not read, the time budget (2 s) was spent" in r.not_checked


def test_more_than_declared_is_a_note_never_a_fault():
    gpus = healthy_gpus(9)
    r = drift.compare(host_exp(nvlinks=12, hcas=[HcaExpect("mlx5_0", None, 4, "HDR", "ib", True)]),
                      drift.Observed(gpu_count=9, gpus=gpus, hcas={"mlx5_0": port()}, hca_names=["mlx5_0"]))
    assert r.faults == []
    assert r.notes[0] == "NVML sees 9 GPUs, the graph declares 8"
    assert "GPU 0 has 18 NVLinks up, the graph declares 12" in r.notes
    assert r.notes[-1] == "HCA mlx5_0 port 1 at 400 Gb/sec (4X NDR), the graph declares 4X HDR"


def test_fewer_gpus_than_declared():
    r = drift.compare(host_exp(), drift.Observed(gpu_count=7, gpus=healthy_gpus(7)))
    assert r.faults == ["NVML sees 7 GPUs, 8 declared"]


# ---------------------------------------------------------------------------- the check on a fake sysfs tree

def test_check_of_a_job_without_gpus_compares_the_hcas(tmp_path, monkeypatch):
    from tests.unit.test_hooks_nvml import Lines

    monkeypatch.delenv("SLURMTOOLS_LAB_ETC", raising=False)
    monkeypatch.setenv("SLURMTOOLS_NODE_EXPECTATIONS", str(write_expectations(tmp_path / "etc")))
    root = sysfs(tmp_path / "root", {"mlx5_0": "400 Gb/sec (4X NDR)", "mlx5_1": "200 Gb/sec (4X HDR)"})
    log = Lines()
    faults = nodecheck.check("gpu01", None, False, log, sysfs_root=str(root))
    assert faults == ["HCA mlx5_1 port 1 at 200 Gb/sec (4X HDR), declared 4X NDR"]
    assert "GPU count: the job has no GPUs (NVML not opened)" in log.lines[-1]
    log = Lines()
    assert nodecheck.check("gpu02", None, False, log, sysfs_root=str(root)) == []
    assert log.lines == [f"topology drift: not checked (gpu02 is not in {tmp_path / 'etc' / expectations.NAME})"]


def test_budget_from_the_environment(monkeypatch):
    for value, want in (("0.5", 0.5), ("", 2.0), ("x", 2.0), ("-1", 2.0), ("1e9", 2.0)):
        monkeypatch.setenv(nodecheck.BUDGET_ENV, value)
        assert nodecheck.budget_seconds() == want
