"""gres.conf File= names the GPU's device file, /dev/nvidia<minor>, which the driver assigns and which need not follow
the GPU's index (nvidia-smi's, NVML's, or NCCL XML's CUDA ordinal). An NVML capture states the minor; `nvidia-smi
topo -m` and NCCL XML do not, so their File= is refused unless the admin states that the files follow the index.
File= was always /dev/nvidia{index}: a line whose Cores= and Links= describe one GPU bound jobs to another."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from slurmtools.errors import ConfigError, ParseError
from slurmtools.topology.checks import check_gres, compare_gres
from slurmtools.topology.graph import Topology
from slurmtools.topology.nvml_capture import NvmlCapture, capture, to_topology
from slurmtools.topology.render_slurm import render_gres_conf
from tests.nvml_fake import fake_nvml

from ._data import data_path

TOPO_M = "stas00-mlengineering_h100x8-NV18_reformatted.txt"


def _bus(i: int) -> str:
    return f"00000000:{0x18 + 0x10 * i:02X}:00.0"


def four_gpus(minors=(3, 2, 1, 0)) -> list[dict]:
    """4 A100s, NVLinked in pairs (0-1, 2-3), GPUs 0-1 on NUMA node 0 (CPUs 0-7), 2-3 on node 1 (CPUs 8-15);
    the driver numbered their device files backwards (`minor` None: NVML does not report it)."""
    return [{"name": "NVIDIA A100-SXM4-80GB", "bus": _bus(i), "numa": i // 2, "cpus": list(range(8 * (i // 2),
             8 * (i // 2) + 8)), "links": {k: (_bus(i ^ 1), "gpu") for k in range(4)}, "minor": minors[i]}
            for i in range(4)]


ANCESTOR = [[0 if a == b else 10 if a // 2 == b // 2 else 50 for b in range(4)] for a in range(4)]


@pytest.fixture
def cap(monkeypatch) -> NvmlCapture:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(four_gpus(), ANCESTOR))
    return capture("n1")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "slurmtools", "topo", *args], capture_output=True, text=True)


def test_nvml_capture_writes_file_by_minor(cap):
    t = to_topology(cap, threads_per_core=1)
    assert [g.minor for g in t.gpus("n1")] == [3, 2, 1, 0]
    lines = render_gres_conf(t, autodetect=None, header=False).splitlines()
    assert lines == [
        "NodeName=n1 Name=gpu Type=nvidia_a100-sxm4-80gb File=/dev/nvidia3 Cores=0-7 Links=-1,4,0,0",
        "NodeName=n1 Name=gpu Type=nvidia_a100-sxm4-80gb File=/dev/nvidia2 Cores=0-7 Links=4,-1,0,0",
        "NodeName=n1 Name=gpu Type=nvidia_a100-sxm4-80gb File=/dev/nvidia1 Cores=8-15 Links=0,0,-1,4",
        "NodeName=n1 Name=gpu Type=nvidia_a100-sxm4-80gb File=/dev/nvidia0 Cores=8-15 Links=0,0,4,-1",
    ]
    # a device tree elsewhere (a container's, a lab's) keeps the minor
    assert "File=/lab/dev/nvidia3 " in render_gres_conf(t, "/lab/dev/nvidia{minor}")
    # and the file it wrote is the capture's, matched by minor
    c = compare_gres(t, "\n".join(lines) + "\n")
    assert c.findings == [] and c.gpus == 4 and c.cores == 4 and c.links == 4 and c.by_index == []
    assert "read as GPU index" not in c.summary(t.name)


def test_index_pattern_is_refused_where_the_minor_says_otherwise(cap):
    t = to_topology(cap)
    with pytest.raises(ConfigError) as e:
        render_gres_conf(t, "/dev/nvidia{index}")
    assert str(e.value) == ("topology n1: host n1: GPU 0 is /dev/nvidia3 (its device minor), so a --gres-files "
                            "pattern with {index} would name another GPU's device; use {minor}")


def test_lint_compares_file_lines_with_the_gpu_of_that_minor(cap):
    """The file slurmtools wrote before, by index: /dev/nvidia0 is GPU 3, whose cores and links it misstates."""
    t = to_topology(cap, threads_per_core=1)
    old = "".join(f"NodeName=n1 Name=gpu File=/dev/nvidia{i} Cores={'0-7' if i < 2 else '8-15'} Links={row}\n"
                  for i, row in enumerate(("-1,4,0,0", "4,-1,0,0", "0,0,-1,4", "0,0,4,-1")))
    assert [f.line() for f in check_gres(t, old, "g")] == [
        "n1: g:4: GPU 0 (/dev/nvidia3) Cores=8-15, the capture has 0-7",
        "n1: g:4: GPU 0 (/dev/nvidia3) Links=0,0,4,-1, the capture has -1,4,0,0",
        "n1: g:3: GPU 1 (/dev/nvidia2) Cores=8-15, the capture has 0-7",
        "n1: g:3: GPU 1 (/dev/nvidia2) Links=0,0,-1,4, the capture has 4,-1,0,0",
        "n1: g:2: GPU 2 (/dev/nvidia1) Cores=0-7, the capture has 8-15",
        "n1: g:2: GPU 2 (/dev/nvidia1) Links=4,-1,0,0, the capture has 0,0,-1,4",
        "n1: g:1: GPU 3 (/dev/nvidia0) Cores=0-7, the capture has 8-15",
        "n1: g:1: GPU 3 (/dev/nvidia0) Links=-1,4,0,0, the capture has 0,0,4,-1",
    ]
    assert [f.line() for f in check_gres(t, old + "NodeName=n1 Name=gpu File=/dev/nvidia4\n", "g")][-1] == (
        "n1: g:5: /dev/nvidia4 (no GPU's device minor) is not in the capture")


def test_capture_to_graph_json_to_gres_conf_keeps_the_minor(cap, tmp_path):
    (tmp_path / "cap.json").write_text(json.dumps(cap.to_dict()))
    r = run("import", "--from", "capture", str(tmp_path / "cap.json"), "--out", str(tmp_path / "g.json"))
    assert r.returncode == 0, r.stderr
    back = Topology.from_json((tmp_path / "g.json").read_text())
    assert [g.minor for g in back.gpus("n1")] == [3, 2, 1, 0]
    assert back.same_as(to_topology(cap)) and Topology.from_json(back.to_json()).same_as(back)
    r = run("export", str(tmp_path / "g.json"), "-f", "gres.conf")
    assert r.returncode == 0, r.stderr
    assert [ln.split()[3] for ln in r.stdout.splitlines() if ln.startswith("NodeName=")] == [
        "File=/dev/nvidia3", "File=/dev/nvidia2", "File=/dev/nvidia1", "File=/dev/nvidia0"]


def test_old_graph_json_without_minor_loads_with_the_minor_unknown(cap):
    data = to_topology(cap).to_dict()
    for v in data["vertices"]:
        v.pop("minor", None)
    t = Topology.from_dict(data, "old.json")
    assert [g.minor for g in t.gpus("n1")] == [None] * 4
    with pytest.raises(ConfigError, match="host n1: the GPUs' device files are unknown"):
        render_gres_conf(t)
    text = render_gres_conf(t, "/dev/nvidia{index}")   # the admin's statement
    assert "File=/dev/nvidia0 " in text
    c = compare_gres(t, text)
    assert c.findings == [] and c.by_index == ["n1"]
    assert c.summary(t.name).endswith("; host(s) n1: /dev/nvidiaN read as GPU index N, as the topology states no "
                                      "device minor (an NVML capture, `slurmtools topo capture`, does)")


def test_a_gpu_whose_minor_nvml_did_not_report_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(four_gpus((3, 2, None, 0)), ANCESTOR))
    t = to_topology(capture("n1"))
    with pytest.raises(ConfigError, match=r"host n1: GPU 2's device file is unknown \(the source states no"):
        render_gres_conf(t)


@pytest.mark.parametrize("minor, words", [("3", "expected a whole number or null, got '3'"),
                                          (-1, "expected a whole number or null, got -1"),
                                          (True, "expected a whole number or null, got True"),
                                          (2, "2, the same as vertices[")])
def test_bad_minor_in_graph_json_is_one_line(cap, minor, words):
    data = to_topology(cap).to_dict()
    gpus = [i for i, v in enumerate(data["vertices"]) if v["kind"] == "gpu"]
    data["vertices"][gpus[0]]["minor"] = minor     # GPU 0; GPU 1 has minor 2
    with pytest.raises(ParseError) as e:
        Topology.from_dict(data, "g.json")
    at = gpus[1] if minor == 2 else gpus[0]
    assert str(e.value).startswith(f"g.json: vertices[{at}].minor: {words}") and "\n" not in str(e.value)


def test_capture_with_a_minor_twice_is_refused(cap):
    d = cap.to_dict()
    d["gpus"][1]["minor"] = d["gpus"][0]["minor"]
    with pytest.raises(ParseError, match=r"gpus\[1\]\.minor: the same as gpus\[0\]'s"):
        NvmlCapture.from_dict(d, "cap.json")


def test_topo_m_graph_refuses_file_in_one_line(tmp_path):
    """`nvidia-smi topo -m` numbers GPUs by index and states no minor: refused naming the host and what tells it,
    written once the admin states that the files follow the index."""
    r = run("import", "--from", "nvidia-smi", str(data_path(TOPO_M)), "--host", "h1", "--out",
            str(tmp_path / "g.json"))
    assert r.returncode == 0, r.stderr
    r = run("export", str(tmp_path / "g.json"), "-f", "gres.conf")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"slurmtools: error: topology {json.loads((tmp_path / 'g.json').read_text())['name']}: host h1: the GPUs' "
        "device files are unknown (the source states no device minor; the index is not the minor on every machine), "
        "so gres.conf File= cannot be written; capture the node with `slurmtools topo capture`, or pass "
        "--gres-files /dev/nvidia{index} if its device files follow the GPU index"]
    r = run("export", str(tmp_path / "g.json"), "-f", "gres.conf", "--gres-files", "/dev/nvidia{index}")
    assert r.returncode == 0, r.stderr
    assert [ln.split()[2] for ln in r.stdout.splitlines() if ln.startswith("NodeName=")] == [
        f"File=/dev/nvidia{i}" for i in range(8)]
