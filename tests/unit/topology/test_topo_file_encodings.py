"""Input files as Windows saves them: PowerShell's `>` writes UTF-16 LE with a byte-order mark (and CRLF), its
`Out-File -Encoding utf8` UTF-8 with one. Each provider reads them as the UTF-8 file; without a mark the bytes are
UTF-8 or refused in one line that says what the file seems to be."""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest

from slurmtools.cli.topo_providers import _read, build, load_topology
from slurmtools.errors import ConfigError

from ._data import data_path, read_data

YAML = """\
- topology: fabric
  cluster_default: true
  tree:
    switches:
      - switch: core
        children: edge[1-2]
      - switch: edge1
        nodes: cn[001-004]
      - switch: edge2
        nodes: cn[005-008]
"""

SAMPLES = [
    ("nvidia-smi", "princeton-della-pli-h100_della-k17g3.txt"),
    ("ibnetdiscover", "topograph_ibnetdiscover_example.out.gz"),
    ("topology.conf", "nvidia-circe-superpod_topology.conf"),
    ("topology.yaml", "fabric.yaml"),
    ("nccl-xml", "simai_topo_8A100_4CX6.xml"),
    ("capture", "slurmtools-lent-h100-vm_nvml-capture.json"),
]
ENCODINGS = [
    ("UTF-16 LE BOM, CRLF", lambda t: b"\xff\xfe" + t.replace("\n", "\r\n").encode("utf-16-le")),
    ("UTF-16 BE BOM", lambda t: b"\xfe\xff" + t.encode("utf-16-be")),
    ("UTF-8 BOM", lambda t: b"\xef\xbb\xbf" + t.encode()),
    ("UTF-32 LE BOM", lambda t: b"\xff\xfe\x00\x00" + t.encode("utf-32-le")),
]


def text_of(name: str) -> str:
    return YAML if name == "fabric.yaml" else read_data(name)


def save(folder, name: str, data: bytes):
    folder.mkdir(exist_ok=True)
    p = folder / name
    p.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return p


@pytest.mark.parametrize("how, encode", ENCODINGS, ids=[e[0] for e in ENCODINGS])
@pytest.mark.parametrize("kind, name", SAMPLES)
def test_a_file_with_a_byte_order_mark_reads_as_utf8(tmp_path, kind, name, how, encode):
    """UTF-16 was refused with `cannot read: 'utf-8' codec can't decode byte 0xff in position 0`."""
    text = text_of(name)
    plain = save(tmp_path / "plain", name, text.encode())
    p = save(tmp_path / "win", name, encode(text))
    assert _read(str(p)).replace("\r\n", "\n") == _read(str(plain))   # a .gz keeps its CRLF, as it did in UTF-8
    assert build(kind, str(p)).same_as(build(kind, str(plain)))
    assert load_topology(p).same_as(build(kind, str(plain)))


def test_a_utf16_gz_keeps_its_line_ends_as_a_utf8_gz_did(tmp_path):
    """`.gz` text never had its line ends translated; decoding by the mark does not start to."""
    p = save(tmp_path, "x.conf.gz", b"\xff\xfe" + "SwitchName=s1 Nodes=n1\r\n".encode("utf-16-le"))
    assert _read(str(p)) == "SwitchName=s1 Nodes=n1\r\n"


def test_an_nvlink_file_in_utf16_is_read_too(tmp_path):
    topo, nvl = "unknown-repo_hgx-a100x4-80gb_roce-nic-rocep49s0.txt", "unknown-repo_hgx-a100x4-80gb_nvlink-s.txt"
    p = save(tmp_path, nvl, b"\xff\xfe" + read_data(nvl).replace("\n", "\r\n").encode("utf-16-le"))
    t = build("nvidia-smi", str(data_path(topo)), nvlink=str(p))
    assert t.same_as(build("nvidia-smi", str(data_path(topo)), nvlink=str(data_path(nvl))))


@pytest.mark.parametrize("data, says", [
    ("GPU0\tGPU1\n".encode("utf-16-le"), "it seems to be UTF-16 LE without a byte-order mark"),
    ("GPU0\tGPU1\n".encode("utf-16-be"), "it seems to be UTF-16 BE without a byte-order mark"),
    ("\u00e9GPU0\tGPU1\n".encode("utf-16-le"), "'utf-8' codec can't decode byte 0xe9 in position 0"),
    (b"# caf\xe9\nSwitchName=s1 Nodes=n1\n", "'utf-8' codec can't decode byte 0xe9 in position 5"),
    (b"\xff\xfe" + "GPU0".encode("utf-16-le") + b"\x00", "UTF-16 LE byte-order mark but is no UTF-16 LE text"),
    (gzip.compress(b"SwitchName=s1\n"), "gzip-compressed data: name it .gz"),
])
def test_undecodable_bytes_are_refused_saying_what_the_file_seems(tmp_path, data, says):
    p = save(tmp_path, "in.txt", data)
    with pytest.raises(ConfigError) as e:
        _read(str(p))
    msg = str(e.value)
    assert msg.startswith(f"{p}: cannot read: ") and says in msg and len(msg.splitlines()) == 1, msg


def test_cp1252_keeps_the_existing_message_and_says_what_it_seems():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = save(Path(d), "t.conf", b"# caf\xe9\nSwitchName=s1 Nodes=n1\n")
        r = subprocess.run([sys.executable, "-m", "slurmtools", "topo", "import", "--from", "topology.conf",
                            str(p)], capture_output=True, text=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith(f"slurmtools: error: {p}: cannot read: 'utf-8' codec can't decode byte 0xe9")
    assert "Windows-1252" in r.stderr


def test_the_cli_imports_what_powershell_wrote(tmp_path):
    name = "princeton-della-pli-h100_della-k17g3.txt"
    p = save(tmp_path, name, b"\xff\xfe" + read_data(name).replace("\n", "\r\n").encode("utf-16-le"))
    r = subprocess.run([sys.executable, "-m", "slurmtools", "topo", "import", "--from", "nvidia-smi", str(p),
                        "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
