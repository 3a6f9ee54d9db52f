"""`slurmtools topo import|capture`: each provider through the CLI, its JSON output, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.cli.topo_providers import detect_kind
from slurmtools.errors import ConfigError, ParseError
from slurmtools.topology.graph import Topology

from ._data import data_path, read_data

runner = CliRunner()


@pytest.mark.parametrize("kind, name, summary", [
    ("nvidia-smi", "princeton-della-pli-h100_della-k17g3.txt",
     {"hosts": 1, "gpus": 8, "nics": 6, "nvswitches": 1, "nvlink_domains": 1, "switches_by_level": {}}),
    ("ibnetdiscover", "topograph_ibnetdiscover_example.out.gz",
     {"hosts": 122, "gpus": 0, "nics": 473, "switches_by_level": {"0": 31, "1": 9}}),
    ("topology.conf", "nvidia-circe-superpod_topology.conf", {"hosts": 79, "switches_by_level": {"0": 5}}),
])
def test_import_summary_and_graph(tmp_path, kind, name, summary):
    out = tmp_path / "g.json"
    r = runner.invoke(app, ["topo", "import", "--from", kind, str(data_path(name)), "--json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    info = json.loads(r.stdout)
    assert {k: info[k] for k in summary} == summary
    t = Topology.from_json(out.read_text())
    assert len(t.hosts()) == summary["hosts"]


def test_import_ibnet_with_exclusions_and_pattern():
    r = runner.invoke(app, ["topo", "import", "--from", "ibnetdiscover", str(data_path(
        "topograph_ibnetdiscover_example.out.gz")), "--json", "--exclude-hca", "HCA-*",
        "--hostname-pattern", r"^(?P<host>[ab]\d\d-p1-dgx-\d\d-c\d\d) (?P<hca>\S+)$"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["nics"] == 68   # 72 mlx5_* adapters, less the 4 on hosts named otherwise


def test_import_errors_carry_file_and_line():
    r = runner.invoke(app, ["topo", "import", "--from", "nvidia-smi",
                            str(data_path("sglang-issue11208_gb200x4_6nic_TRUNCATED.txt"))])
    assert isinstance(r.exception, ParseError) and (r.exception.line, r.exception.column) == (6, 44)


def test_no_traceback_for_user_errors():
    p = subprocess.run([sys.executable, "-m", "slurmtools", "topo", "import", "--from", "topology.conf",
                        "/nonexistent/topology.conf"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr == "slurmtools: error: /nonexistent/topology.conf: file not found\n"


def test_capture_without_nvml_fails_in_one_line(monkeypatch):
    import pynvml

    def no_driver():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", no_driver)
    r = runner.invoke(app, ["topo", "capture"])
    assert r.exit_code == 4 and "topo capture: NVML:" in r.output and "driver" in r.output


@pytest.mark.parametrize("name, kind", [
    ("princeton-della-pli-h100_della-k17g3.txt", "nvidia-smi"),
    ("topograph_ibnetdiscover_example.out.gz", "ibnetdiscover"),
    ("nvidia-circe-superpod_topology.conf", "topology.conf"),
    ("unknown-repo_hgx-a100x4-80gb_nvlink-s.txt", None),
])
def test_detect_kind(name, kind):
    assert detect_kind(read_data(name)) == kind


def test_import_nccl_xml_and_nvlink_speeds():
    r = runner.invoke(app, ["topo", "import", "--from", "nccl-xml", str(data_path("simai_topo_8A100_4CX6.xml")),
                            "--json"])
    assert r.exit_code == 0, r.output
    assert {k: json.loads(r.stdout)[k] for k in ("gpus", "nics", "nvswitches")} == {"gpus": 8, "nics": 5,
                                                                                   "nvswitches": 6}
    r = runner.invoke(app, ["topo", "import", "--from", "nvidia-smi", "--host", "a100x4", "--json",
                            str(data_path("unknown-repo_hgx-a100x4-80gb_roce-nic-rocep49s0.txt")),
                            "--nvlink", str(data_path("stas00-mlengineering_h100_nvlink-status_abbrev.txt"))])
    assert isinstance(r.exception, ParseError) and "elided" in str(r.exception)
    from slurmtools.cli.topo_providers import build

    t = build("nvidia-smi", str(data_path("unknown-repo_hgx-a100x4-80gb_roce-nic-rocep49s0.txt")), "a100x4",
              nvlink=str(data_path("unknown-repo_hgx-a100x4-80gb_nvlink-s.txt")))
    assert t.edge("gpu:a100x4:0", "nvswitch:a100x4:0").gbytes == 12 * 25.0


def test_import_capture_file(tmp_path, monkeypatch):
    from slurmtools.topology.nvml_capture import capture

    from .test_provider_nvml import _anc, a100_mesh4, fake_nvml

    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(a100_mesh4(), _anc(4, 1, 4)))
    cap = capture("mesh01")
    f = tmp_path / "mesh01.json"
    f.write_text(json.dumps(cap.to_dict()))
    r = runner.invoke(app, ["topo", "import", "--from", "capture", str(f), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["gpus"] == 4 and detect_kind(f.read_text()) == "capture"
    f.write_text("{not json")
    r = runner.invoke(app, ["topo", "import", "--from", "capture", str(f)])
    assert isinstance(r.exception, ParseError) and r.exception.line == 1


@pytest.mark.parametrize("kind, name", [
    ("nvidia-smi", "stas00-mlengineering_2gpu-nvlink-NV2.txt"),
    ("ibnetdiscover", "topograph_ibnetdiscover_example.out.gz"),
    ("topology.conf", "nvidia-circe-superpod_topology.conf"),
    ("nccl-xml", "simai_topo_8A100_4CX6.xml"),
    ("capture", "slurmtools-lent-h100-vm_nvml-capture.json"),
])
def test_a_byte_order_mark_is_no_part_of_the_text(tmp_path, kind, name):
    """Saved by a Windows editor, a file starts with a UTF-8 BOM; it hid the first line (`\\ufeffSwitchName=` is
    no key, the matrix header no header) and the kind from detection."""
    import gzip

    from slurmtools.cli.topo_providers import build, load_topology

    text = read_data(name).encode()
    p = tmp_path / name
    p.write_bytes(gzip.compress(b"\xef\xbb\xbf" + text) if name.endswith(".gz") else b"\xef\xbb\xbf" + text)
    assert build(kind, str(p)).same_as(build(kind, str(data_path(name))))
    assert load_topology(p).same_as(build(kind, str(p)))


def test_damaged_gzip_is_refused_in_one_line(tmp_path):
    """Damage inside the compressed data raises zlib.error, which is no OSError: it escaped as a traceback."""
    from slurmtools.cli.topo_providers import build

    data = data_path("topograph_ibnetdiscover_example.out.gz").read_bytes()
    p = tmp_path / "dump.out.gz"
    p.write_bytes(data[:100] + bytes(b ^ 0xFF for b in data[100:200]) + data[200:])
    with pytest.raises(ConfigError, match=f"^{p}: cannot read: Error -3 while decompressing data"):
        build("ibnetdiscover", str(p))


@pytest.mark.parametrize("name", ["a b", "", "x\ty", "gpu01\n"])
def test_capture_refuses_a_hostname_its_reader_refuses(name):
    """`topo capture --hostname` wrote any name, and `topo import --from capture` then refused the file it wrote
    (`hostname: expected a host name`): the name is refused before NVML is asked, in one line."""
    from tests.hostile.site_check_support import refusal

    assert refusal("topo", "capture", "--hostname", name) == (
        f"--hostname: expected a host name (one printable word), got {name!r}")


@pytest.mark.parametrize("text", ["SwitchName = leaf1 Nodes=n[1-4]\n", "  switchname\t=leaf1 Nodes=n1\n",
                                  "BlockName =b1 Nodes=n[1-8]\nBlockSizes=8\n"])
def test_topology_conf_with_blanks_around_the_equals_sign_is_known(text):
    # Slurm's parser allows blanks around `=` (parse_config.c keyvalue_pattern); the kind was not recognised
    assert detect_kind(text) == "topology.conf"
