"""`nvidia-smi topo -m` as it reaches us from the wild: forms seen in public pastes that the plain captures do not
show. Each input is a small matrix composed here in the layout of the paste named beside it (tokens, separators,
column titles); none is a copy of third-party text."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.errors import ParseError
from slurmtools.topology.nvsmi import parse_topo_matrix

# One H200 with four NICs, tab-separated as nvidia-smi prints it, after an env-dump title line; the CPU Affinity is
# a cgroup's scattered list. Layout of https://github.com/InternLM/lmdeploy/issues/4953 and
# https://github.com/sgl-project/sglang/issues/26039 (`python -m sglang.check_env`).
_UNDERLINED = (
    "NVIDIA Topology: \n"
    "\t{on}GPU0\tNIC0\tNIC1\tNIC2\tNIC3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID{off}\n"
    "GPU0\t X \tSYS\tSYS\tNODE\tNODE\t33,35,37\t1\t\tN/A\n"
    "NIC0\tSYS\t X \tPIX\tSYS\tSYS\t\t\t\t\n"
    "NIC1\tSYS\tPIX\t X \tSYS\tSYS\t\t\t\t\n"
    "NIC2\tNODE\tSYS\tSYS\t X \tPIX\t\t\t\t\n"
    "NIC3\tNODE\tSYS\tSYS\tPIX\t X \t\t\t\t\n"
    "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
    "\nNIC Legend:\n\n  NIC0: mlx5_1\n  NIC1: mlx5_2\n  NIC2: mlx5_7\n  NIC3: mlx5_8\n"
)


@pytest.mark.parametrize("on, off", [
    ("\x1b[4m", "\x1b[0m"),          # the terminal escape itself (newer drivers underline the header)
    ("[4m", "[0m"),                  # GitHub dropped the ESC byte (sglang#26039)
    ("^[[4m", "^[[0m"),              # `cat -v` / editor caret notation of ESC (lmdeploy#4953)
    ("\u241b[4m", "\u241b[0m"),      # the SYMBOL FOR ESCAPE some viewers put in its place
])
def test_underlined_header_reads_whatever_became_of_its_escape(on, off):
    """With the ESC byte lost, `[4mGPU0` hid the header and GPU0's row was taken for it ("a device appears twice")."""
    m = parse_topo_matrix(_UNDERLINED.format(on=on, off=off), "env.txt")
    assert [d.label for d in m.gpus] == ["GPU0"]
    assert [d.name for d in m.nics] == ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"]
    assert m.gpu(0).cpu_affinity == frozenset({33, 35, 37}) and m.gpu(0).numa_affinity == frozenset({1})
    assert m.gpu(0).gpu_numa_id is None
    assert m.nearest_nics(0) == ("NODE", ("mlx5_7", "mlx5_8"))
    assert m.link("NIC0", "NIC1").kind == "PIX" and m.link("GPU0", "NIC0").kind == "SYS"


@pytest.mark.parametrize("text, line, column, words", [
    # no header at all: the paste starts at GPU0's row
    ("GPU0\t X \tNV2\t0-7\nGPU1\tNV2\t X \t0-7\n", 1, 1, "no header line"),
    # a header run into the title line above it (an env dump's `NVIDIA Topology:` lost its line break)
    ("NVIDIA Topology: \tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-7\nGPU1\tNV2\t X \t0-7\n", 2, 1,
     "the line above it reads 'NVIDIA Topology: \\tGPU0\\tGPU1\\tCPU Affinity'"),
])
def test_a_row_is_never_taken_for_the_header(text, line, column, words):
    """GPU0's row was read as the header: the error blamed a duplicate device, or with a single GPU the row's cells
    became column names."""
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(text, "paste.txt")
    assert (err.value.line, err.value.column) == (line, column), str(err.value)
    assert words in str(err.value) and "row of GPU0" in str(err.value)


# The matrix retyped as a markdown table (layout of the server guide in https://github.com/DDVD233/midoc): 8 RTX
# PRO 6000 in two NODE blocks, CPU Affinity only, indented under an admonition.
_MARKDOWN = "    |      | " + " | ".join(f"GPU{i}" for i in range(8)) + " | CPU Affinity    |\n" \
    + "    |------|" + "------|" * 8 + "-----------------|\n" \
    + "".join(f"    | GPU{i} | " + " | ".join("X   " if j == i else "NODE" if (i < 4) == (j < 4) else "SYS "
                                              for j in range(8))
              + f" | {'0-31,64-95' if i < 4 else '32-63,96-127':15} |\n" for i in range(8))


def test_markdown_table():
    """Bars and the rule under the header hid the header ("no header found")."""
    m = parse_topo_matrix(_MARKDOWN, "guide.md")
    assert len(m.gpus) == 8 and not m.nics and m.columns == ("cpu",)
    assert m.link("GPU0", "GPU3").kind == "NODE" and m.link("GPU3", "GPU4").kind == "SYS"
    assert m.gpu(5).cpu_affinity == frozenset(range(32, 64)) | frozenset(range(96, 128))
    assert m.gpu(0).numa_affinity is None     # the table has no NUMA column: unknown, not guessed


def test_markdown_table_with_nics_and_legend():
    text = ("| | GPU0 | GPU1 | NIC0 | CPU Affinity | NUMA Affinity | GPU NUMA ID |\n"
            "|---|:---:|:---:|:---:|---|---|---|\n"
            "| GPU0 | X | NV18 | PIX | 0-55 | 0 | N/A |\n"
            "| GPU1 | NV18 | X | SYS | 56-111 | 1 | N/A |\n"
            "| NIC0 | PIX | SYS | X | | | |\n"
            "\nNIC Legend:\n\n  NIC0: mlx5_0\n")
    m = parse_topo_matrix(text, "t.md")
    assert m.nvlinks(0, 1) == 18 and m.nearest_nics(0) == ("PIX", ("mlx5_0",))
    assert m.gpu(1).numa_affinity == frozenset({1}) and m.nics[0].cpu_affinity is None


@pytest.mark.parametrize("text, line, words", [
    # GPU rows only, the NIC rows left out (layout of a GB300 write-up: 4 GPUs, NIC0..NIC3 columns)
    ("|      | GPU0 | GPU1 | NIC0 |\n|------|------|------|------|\n| GPU0 | X    | NV18 | NODE |\n"
     "| GPU1 | NV18 | X    | NODE |\n\nGPUs 0-1 share NUMA node 0.\n", 5, "table ends after 2 of 3 rows"),
    # `topo -p2p` retyped the same way
    ("| | GPU0 | GPU1 |\n|------|:----:|:----:|\n| GPU0 | X | OK |\n| GPU1 | OK | X |\n", 1, "topo -p2p"),
])
def test_markdown_tables_that_are_not_a_whole_matrix_are_refused(text, line, words):
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(text, "t.md")
    assert err.value.line == line and words in str(err.value), str(err.value)


@pytest.mark.parametrize("text, line, column, words", [
    # columns cut with `...` (layout of explanatory pastes: `GPU3    SYS     SYS     SYS      X      ...`)
    ("        GPU0    GPU1    ...\nGPU0     X      NV12    ...\nGPU1    NV12     X      ...\n", 1, 25,
     "the header elides devices here (...)"),
    # rows cut with a `...` line (`GPU1 ...` then `...` then `GPU4 ...`)
    ("\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV12\tNV12\n...\nGPU2\tNV12\tNV12\t X \n", 3, 1,
     "rows were elided here (...): expected the row of GPU1"),
    # a row cut short with the unicode ellipsis
    ("\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV12\t\u2026\n", 2, 15, "row GPU0 elides cells here (\u2026)"),
])
def test_elided_matrices_are_refused_as_elided(text, line, column, words):
    """`...` read as a device label or a link cell ("expected a link class for column ..., found '...'")."""
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(text, "paste.txt")
    assert (err.value.line, err.value.column) == (line, column), str(err.value)
    assert words in str(err.value)


def test_cli_reads_the_escape_stripped_env_dump(tmp_path):
    """The whole path: `slurmtools topo import --from nvidia-smi FILE` on an env dump whose ESC bytes were lost."""
    f = tmp_path / "check_env.txt"
    f.write_text(_UNDERLINED.format(on="[4m", off="[0m"))
    r = CliRunner().invoke(app, ["topo", "import", "--from", "nvidia-smi", str(f), "--json"])
    assert r.exit_code == 0, r.output
    assert '"gpus": 1' in r.stdout and '"nics": 4' in r.stdout
