"""`nvidia-smi topo -m` captured through Slurm or cluster tools: every line behind the same prefix (`srun -l`,
pdsh, clush, `docker compose logs`, CI timestamps) reads as the plain table, columns kept for errors; several
tasks' or hosts' tables in one capture are refused, naming the line, instead of one being picked."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.cli.topo_providers import detect_kind
from slurmtools.errors import ParseError
from slurmtools.topology.nvsmi import parse_topo_matrix

# A 4-GPU, 2-NIC board in the layout nvidia-smi prints (tabs, ` X ` cells, legend, NIC legend).
PLAIN = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV12\tNV12\tNV12\tPXB\tSYS\t0-31\t0\t\tN/A\n"
    "GPU1\tNV12\t X \tNV12\tNV12\tPXB\tSYS\t0-31\t0\t\tN/A\n"
    "GPU2\tNV12\tNV12\t X \tNV12\tSYS\tPXB\t32-63\t1\t\tN/A\n"
    "GPU3\tNV12\tNV12\tNV12\t X \tSYS\tPXB\t32-63\t1\t\tN/A\n"
    "NIC0\tPXB\tPXB\tSYS\tSYS\t X \tSYS\t\t\t\t\n"
    "NIC1\tSYS\tSYS\tPXB\tPXB\tSYS\t X \t\t\t\t\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n"
    "\n"
    "NIC Legend:\n"
    "\n"
    "  NIC0: mlx5_0\n"
    "  NIC1: mlx5_1\n"
)

PREFIXES = ["0: ", " 0: ", "12: ", "node1: ", "gpu-a01.cluster: ", "node1:", "svc  | ", "trainer-1 | ",
            "2024-05-01T10:00:00.123Z ", "[10:00:01] ", "2024-05-01T10:00:00.1234567Z 0: "]


def prefixed(prefix: str, text: str = PLAIN) -> str:
    return "".join(prefix + line for line in text.splitlines(keepends=True))


def same(a, b) -> bool:
    return (a.devices, a.links, a.columns, a.pcie_only) == (b.devices, b.links, b.columns, b.pcie_only)


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_prefixed_capture_reads_as_the_plain_table(prefix):
    """Every line behind the same prefix was refused with "no `nvidia-smi topo -m` header found"."""
    m = parse_topo_matrix(prefixed(prefix), "cap.txt")
    assert same(m, parse_topo_matrix(PLAIN, "plain.txt"))
    assert [d.name for d in m.nics] == ["mlx5_0", "mlx5_1"]   # the NIC legend was read too
    assert detect_kind(prefixed(prefix)) == "nvidia-smi"


def test_each_line_keeps_its_own_timestamp():
    """A CI log stamps every line with its own time: the kind of prefix is what must be the same, not its text."""
    text = "".join(f"2024-05-01T10:00:{i:02d}.{i * 7:03d}Z {line}" for i, line in enumerate(PLAIN.splitlines(True)))
    assert same(parse_topo_matrix(text), parse_topo_matrix(PLAIN))


def test_srun_labels_of_blank_lines_and_a_prompt_above():
    """srun labels blank lines too (`0: `, or `0:` once an editor trims the blank); the command line typed above
    the capture carries no label."""
    body = "".join(("0:\n" if not line.strip() else "0: " + line) for line in PLAIN.splitlines(True))
    text = "$ srun -l -N1 nvidia-smi topo -m\n" + body
    assert same(parse_topo_matrix(text), parse_topo_matrix(PLAIN))


@pytest.mark.parametrize("prefix", ["0: ", "node1: ", "2024-05-01T10:00:00.123Z "])
def test_errors_name_the_column_of_the_capture(prefix):
    """A cell that is no link class is named at its column in the file as it is, prefix included."""
    bad = PLAIN.replace("GPU2\tNV12\tNV12\t X \tNV12\tSYS", "GPU2\tNV12\tNV12\t X \tNVXX\tSYS")
    with pytest.raises(ParseError) as plain:
        parse_topo_matrix(bad, "f")
    with pytest.raises(ParseError) as cap:
        parse_topo_matrix(prefixed(prefix, bad), "f")
    assert (cap.value.line, cap.value.column) == (plain.value.line, plain.value.column + len(prefix))
    assert "'NVXX'" in str(cap.value)


def test_a_headless_row_behind_a_prefix_is_still_refused():
    text = prefixed("0: ", "\n".join(PLAIN.splitlines()[1:]))
    with pytest.raises(ParseError, match="this is the row of GPU0"):
        parse_topo_matrix(text, "f")


def interleaved(a: str, b: str) -> str:
    la, lb = prefixed(a).splitlines(True), prefixed(b).splitlines(True)
    return "".join(x + y for x, y in zip(la, lb))


@pytest.mark.parametrize("text, line, what", [
    (interleaved("0: ", "1: "), 2, "srun tasks '0:' and '1:'"),
    (interleaved(" 0: ", " 1: "), 2, "srun tasks '0:' and '1:'"),
    (prefixed("0: ") + prefixed("1: "), 20, "srun tasks '0:' and '1:'"),
    (prefixed("node1: ") + prefixed("node2: "), 20, "hosts 'node1:' and 'node2:'"),
    (interleaved("svc-a | ", "svc-b | "), 2, "services 'svc-a |' and 'svc-b |'"),
    (interleaved("2024-05-01T10:00:00Z 0: ", "2024-05-01T10:00:00Z 1: "), 2, "srun tasks '0:' and '1:'"),
])
def test_several_nodes_in_one_capture_are_refused(text, line, what):
    """Two nodes' tables in one capture: no guess which node is meant, and never a matrix mixing their rows."""
    with pytest.raises(ParseError) as e:
        parse_topo_matrix(text, "both.txt")
    msg = str(e.value)
    assert e.value.line == line and len(msg.splitlines()) == 1, msg
    assert msg.startswith(f"both.txt:{line}:") and "several nodes' outputs" in msg and what in msg
    assert "import one node's (e.g. `grep '" in msg


def test_the_suggested_grep_keeps_one_readable_node():
    import re

    text = interleaved("0: ", "1: ")
    with pytest.raises(ParseError) as e:
        parse_topo_matrix(text, "both.txt")
    pattern = re.search(r"grep '([^']*)'", str(e.value)).group(1)
    kept = "".join(line for line in text.splitlines(True) if re.search(pattern, line))
    assert same(parse_topo_matrix(kept), parse_topo_matrix(PLAIN))


def test_another_task_without_a_table_is_no_second_node():
    """A task that printed only an error shows no second matrix: the one table is read."""
    text = "1: Failed to initialize NVML: Driver/library version mismatch\n" + prefixed("0: ")
    assert same(parse_topo_matrix(text), parse_topo_matrix(PLAIN))


def test_plain_and_quoted_pastes_are_unchanged():
    for text in (PLAIN, prefixed("> "), prefixed("# ")):
        assert same(parse_topo_matrix(text), parse_topo_matrix(PLAIN))
    with pytest.raises(ParseError, match="no `nvidia-smi topo -m` header found"):
        parse_topo_matrix("0: hello\n0: world\n", "f")


def test_the_cli_imports_a_labelled_capture_and_refuses_two_nodes(tmp_path):
    runner = CliRunner()
    one = tmp_path / "node1.txt"
    one.write_text(prefixed("0: "))
    r = runner.invoke(app, ["topo", "import", "--from", "nvidia-smi", str(one), "--json"])
    assert r.exit_code == 0, r.output
    two = tmp_path / "both.txt"
    two.write_text(interleaved("0: ", "1: "))
    r = runner.invoke(app, ["topo", "import", "--from", "nvidia-smi", str(two)])
    assert isinstance(r.exception, ParseError) and r.exception.line == 2
