"""`nvidia-smi topo -m` rows with fewer affinity values than the header has columns (CPU Affinity, NUMA Affinity,
GPU NUMA ID). Such a row was read as if CPU Affinity were the one left out, so a row that lost another value (a GPU
row without its trailing GPU NUMA ID, a NIC row with values, a driver whose header names a column its rows do not
print) had its values shifted one column: its CPUs read as NUMA nodes. Now the values are placed by the tab cells
where the row is laid out as nvidia-smi prints it (`0-47\\t0\\t\\tN/A`, an empty CPU Affinity as `\\t\\t0\\t\\tN/A`),
else by what each value is; a row that fits no placement, or several, is refused in one line naming file, line
and column. Inputs are composed here in nvidia-smi's layout; none is a copy of third-party text."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.errors import ParseError
from slurmtools.topology.nvsmi import parse_topo_matrix

from ._data import read_data

HEAD3 = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
HEAD2 = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n"
NIC3 = "NIC0\tPIX\tSYS\t X \t\t\t\t\n"
NIC2 = "NIC0\tPIX\tSYS\t X \t\t\n"


def table(head: str, gpu0: str, gpu1: str, nic: str) -> str:
    """Two GPUs on two sockets and a NIC beside GPU0; `gpu0`/`gpu1` are what follows each GPU row's link cells."""
    return (head + f"GPU0\t X \tSYS\tPIX\t{gpu0}\n" + f"GPU1\tSYS\t X \tSYS\t{gpu1}\n" + nic
            + "\nNIC Legend:\n\n  NIC0: mlx5_0\n")


def where(text: str, value: str, line: int) -> int:
    """The 1-based column of `value` on line `line` of `text` (its last occurrence there)."""
    return text.splitlines()[line - 1].rindex(value) + 1


FULL = table(HEAD3, "0-31,64-95\t0\t\tN/A", "32-63,96-127\t1\t\tN/A", NIC3)


# ---------------------------------------------------------------- read: one placement fits

@pytest.mark.parametrize("gpu0, cpus, numa", [
    # the trailing GPU NUMA ID cell empty, nvidia-smi's empty cell before it kept (tabs as printed)
    ("0-31,64-95\t0\t\t", set(range(32)) | set(range(64, 96)), {0}),
    # one cell per column, the last one empty
    ("0-31,64-95\t0\t", set(range(32)) | set(range(64, 96)), {0}),
    # a NUMA Affinity that is a list (Grace boards) says by its form it is no GPU NUMA ID, tabs or not
    ("0-71 0,3-9,11-17", set(range(72)), {0, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17}),
    ("0-71\t0,3-9,11-17", set(range(72)), {0, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17}),
])
def test_a_row_without_its_gpu_numa_id_keeps_its_cpus(gpu0, cpus, numa):
    """The row was read as CPU Affinity empty, its CPU list taken for NUMA nodes and its NUMA node for the GPU
    NUMA ID (or refused for a GPU NUMA ID '0,3-9,11-17')."""
    m = parse_topo_matrix(table(HEAD3, gpu0, "32-63,96-127\t1\t\tN/A", NIC3), "short.txt")
    g = m.gpu(0)
    assert (g.cpu_affinity, g.numa_affinity, g.gpu_numa_id) == (frozenset(cpus), frozenset(numa), None)
    assert m.gpu(1).cpu_affinity == frozenset(range(32, 64)) | frozenset(range(96, 128))


@pytest.mark.parametrize("head, nic, gpu0, numa", [
    # nvidia-smi's own empty CPU Affinity: the GPU's NUMA node holds no CPU of the caller's cpuset
    (HEAD3, NIC3, "\t0\t\tN/A", {0}),
    (HEAD2, NIC2, "\t0", {0}),
    # no tabs, but N/A is no CPU list: the value left out can only be CPU Affinity
    (HEAD2, NIC2, " N/A", None),
    (HEAD3, NIC3, "   N/A   N/A", None),
])
def test_an_empty_cpu_affinity_is_still_read(head, nic, gpu0, numa):
    m = parse_topo_matrix(table(head, gpu0, "32-63\t1" + ("\t\tN/A" if head is HEAD3 else ""), nic), "job.txt")
    g = m.gpu(0)
    assert g.cpu_affinity == frozenset() and g.numa_affinity == (None if numa is None else frozenset(numa))
    assert g.gpu_numa_id is None and m.gpu(1).numa_affinity == frozenset({1})


def test_the_captures_with_empty_cpu_cells_read_as_before():
    """The real capture taken inside a job confined to one socket (empty CPU Affinity on GPU0-3), and the same
    behind an `srun -l` label: the tab cells still place its values."""
    text = read_data("princeton-della-pli-h100_della-k17g3.txt")
    for capture in (text, "".join("0: " + line for line in text.splitlines(True))):
        m = parse_topo_matrix(capture, "pli.txt")
        assert [g.cpu_affinity for g in m.gpus[:4]] == [frozenset()] * 4
        assert [g.numa_affinity for g in m.gpus] == [frozenset({0})] * 4 + [frozenset({1})] * 4
        assert m.gpu(4).cpu_affinity == frozenset({1}) and all(g.gpu_numa_id is None for g in m.gpus)


MARKDOWN = ("| | GPU0 | GPU1 | NIC0 | CPU Affinity | NUMA Affinity | GPU NUMA ID |\n"
            "|---|---|---|---|---|---|---|\n"
            "| GPU0 | X | SYS | PIX | {gpu0} |\n"
            "| GPU1 | SYS | X | SYS | 32-63 | 1 | N/A |\n"
            "| NIC0 | PIX | SYS | X | | | |\n")


@pytest.mark.parametrize("gpu0, cpus, numa", [
    (" | 0 | N/A", set(), {0}),        # the CPU cell left empty, as nvidia-smi prints it inside a job
    ("0-31 | 0", set(range(32)), {0}),  # the GPU NUMA ID cell left out: markdown renders it empty
])
def test_markdown_cells_are_columns(gpu0, cpus, numa):
    """A retyped markdown table separates its cells with bars: an empty or missing cell is that column's."""
    m = parse_topo_matrix(MARKDOWN.format(gpu0=gpu0), "t.md")
    g = m.gpu(0)
    assert (g.cpu_affinity, g.numa_affinity, g.gpu_numa_id) == (frozenset(cpus), frozenset(numa), None)
    assert m.gpu(1).cpu_affinity == frozenset(range(32, 64)) and m.nics[0].numa_affinity is None


# ---------------------------------------------------------------- refused: several placements fit, or none

@pytest.mark.parametrize("text, line, value, words", [
    # a GPU row without its GPU NUMA ID, tabs not as nvidia-smi lays them out: its CPUs or its NUMA nodes?
    (table(HEAD3, "0-31,64-95\t0", "32-63,96-127\t1\t\tN/A", NIC3), 2, "0-31,64-95",
     "'0-31,64-95' reads as CPU Affinity or as NUMA Affinity"),
    # the same row aligned with spaces (a terminal copy)
    (table(HEAD3, "0-31,64-95      0", "32-63,96-127\t1\t\tN/A", NIC3), 2, "0-31,64-95",
     "'0-31,64-95' reads as CPU Affinity or as NUMA Affinity"),
    # a driver whose header names GPU NUMA ID while its rows print two values: refused at the first row
    (table(HEAD3, "0-31 0", "32-63 1", NIC3), 2, "0-31", "'0-31' reads as CPU Affinity or as NUMA Affinity"),
    # a NIC row with values, one short
    (table(HEAD3, "0-31\t0\t\tN/A", "32-63\t1\t\tN/A", "NIC0\tPIX\tSYS\t X \t0-31 0\n"), 4, "0-31",
     "row NIC0: 2 values for the 3 columns"),
    # an empty CPU Affinity with its tabs lost: '0' is a CPU or a NUMA node
    (table(HEAD3, "0    N/A", "32-63\t1\t\tN/A", NIC3), 2, "0", "'0' reads as CPU Affinity or as NUMA Affinity"),
    (table(HEAD3, "0\tN/A", "32-63\t1\t\tN/A", NIC3), 2, "0", "'0' reads as CPU Affinity or as NUMA Affinity"),
    # two columns, one value: CPU Affinity or NUMA Affinity
    (table(HEAD2, "0-31,64-95", "32-63\t1", NIC2), 2, "0-31,64-95",
     "'0-31,64-95' reads as CPU Affinity or as NUMA Affinity"),
    # nothing fits: no GPU NUMA ID is a list, and a NUMA Affinity never follows a GPU NUMA ID
    (table(HEAD3, "N/A 0-3", "32-63\t1\t\tN/A", NIC3), 2, "N/A", "no placement gives each value its column's form"),
])
def test_a_row_whose_values_fit_several_columns_is_refused(text, line, value, words):
    """Each was read with CPU Affinity empty and the other values shifted into the wrong columns."""
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(text, "short.txt")
    msg = str(err.value)
    assert (err.value.line, err.value.column) == (line, where(text, value, line)), msg
    assert words in msg and len(msg.splitlines()) == 1
    assert msg.startswith(f"short.txt:{line}:{err.value.column}: ")


def test_a_cell_out_of_its_form_is_named_by_its_column():
    """Laid out as nvidia-smi prints it, a cell is its column: a list in the GPU NUMA ID cell is refused there."""
    text = table(HEAD3, "\t0-3\t\t0-3", "32-63\t1\t\tN/A", NIC3)
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(text, "short.txt")
    assert (err.value.line, err.value.column) == (2, where(text, "0-3", 2))
    assert "row GPU0, GPU NUMA ID: expected a NUMA id or N/A, found '0-3'" in str(err.value)


def test_full_rows_and_value_less_nic_rows_are_unchanged():
    m = parse_topo_matrix(FULL, "full.txt")
    assert m.gpu(0).cpu_affinity == frozenset(range(32)) | frozenset(range(64, 96))
    assert m.gpu(1).numa_affinity == frozenset({1}) and m.nics[0].cpu_affinity is None
    assert m.nics[0].numa_affinity is None and m.nics[0].name == "mlx5_0"


def test_the_cli_refuses_a_shifted_row_in_one_line(tmp_path):
    f = tmp_path / "short.txt"
    f.write_text(table(HEAD3, "0-31 0", "32-63 1", NIC3))
    r = CliRunner().invoke(app, ["topo", "import", "--from", "nvidia-smi", str(f), "--json"])
    assert isinstance(r.exception, ParseError), r.output
    assert (r.exception.line, r.exception.column) == (2, 18)
    assert str(r.exception).startswith(f"{f}:2:18: row GPU0: 2 values for the 3 columns")
