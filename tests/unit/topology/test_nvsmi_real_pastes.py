"""`nvidia-smi topo -m` and `nvlink -s` in forms a probe of real pastes found misread or refused: a NIC Legend on one
line or missing, `nvlink -s` without UUIDs or under a doc's banner, a markdown paste with a blank line after every
row, and the legend of a driver from before NVLink. Each input is composed here in the layout of the paste named
beside it (tokens, separators, legend wording); none is a copy of third-party text."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.errors import ParseError
from slurmtools.topology import queries as q
from slurmtools.topology.nvsmi import parse_nvlink_status, parse_topo_matrix, to_topology


def _import(tmp_path, topo: str, *args: str, status: str | None = None):
    (tmp_path / "topo.txt").write_text(topo)
    extra = list(args)
    if status is not None:
        (tmp_path / "nvl.txt").write_text(status)
        extra += ["--nvlink", str(tmp_path / "nvl.txt")]
    return CliRunner().invoke(app, ["topo", "import", "--from", "nvidia-smi", str(tmp_path / "topo.txt"),
                                    "--host", "n1", *extra])


# ---------------------------------------------------------------- NIC names

# 4 GPUs, 2 RoCE ports; the author cut the legend to four entries and put the NIC Legend on one line without its
# title (layout of IsseiHasegawa/vLLM-experiment, README "GPU topology").
_MATRIX_2NIC = (
    "        GPU0    GPU1    GPU2    GPU3    NIC0    NIC1    CPU Affinity    NUMA Affinity\n"
    "GPU0     X      PXB     SYS     SYS     SYS     SYS     0-23,48-71      0\n"
    "GPU1    PXB      X      SYS     SYS     SYS     SYS     0-23,48-71      0\n"
    "GPU2    SYS     SYS      X      PIX     NODE    NODE    24-47,72-95     1\n"
    "GPU3    SYS     SYS     PIX      X      NODE    NODE    24-47,72-95     1\n"
    "NIC0    SYS     SYS     NODE    NODE     X      PIX\n"
    "NIC1    SYS     SYS     NODE    NODE    PIX      X\n"
    "\n"
    "PIX  = at most a single PCIe bridge\n"
    "SYS  = PCIe plus the SMP interconnect between NUMA nodes (QPI/UPI)\n"
    "\n"
)
ONE_LINE_LEGEND = _MATRIX_2NIC + "NIC0: rocep177s0f0    NIC1: rocep177s0f1\n"


@pytest.mark.parametrize("legend", [
    "NIC0: rocep177s0f0    NIC1: rocep177s0f1\n",                          # one line, no title (vLLM-experiment)
    "NIC Legend:\n\n  NIC0: rocep177s0f0\tNIC1: rocep177s0f1\n",           # titled, tab between the pairs
    "NIC Legend: NIC0: rocep177s0f0 NIC1: rocep177s0f1\n",                  # on the title's own line
    "NIC0: rocep177s0f0\nNIC1:rocep177s0f1\n",                              # no title, one per line
])
def test_every_nic_legend_pair_is_read_wherever_it_stands(legend):
    """A NIC Legend on one line (or without its title) was ignored: the NICs came out as `NIC0`/`NIC1`, and those
    labels were used as device names (nearest NIC, NCCL/gres binding)."""
    m = parse_topo_matrix(_MATRIX_2NIC + legend, "vllm.txt")
    assert [n.name for n in m.nics] == ["rocep177s0f0", "rocep177s0f1"] and not m.unnamed_nics
    assert m.nearest_nics(2) == ("NODE", ("rocep177s0f0", "rocep177s0f1"))
    t = to_topology(m, "n1")
    assert "nic_names" not in t.unknown("n1") and "nic_link_layer" not in t.unknown("n1")
    assert q.nearest_nics(t, "n1")[3] == ["rocep177s0f0", "rocep177s0f1"]


# 8 RTX 4090s and 2 NICs pasted without Legend and NIC Legend, tab-separated, NIC rows without trailing cells
# (layout of https://github.com/NVIDIA/go-gpuallocator/issues/17).
_NO_LEGEND = "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n" + "".join(
    f"GPU{a}\t" + "\t".join(" X " if a == b else "SYS" for b in range(4))
    + ("\tPHB\tPHB" if a == 2 else "\tSYS\tSYS") + ("\t0-55,112-167\t0" if a < 2 else "\t56-111,168-223\t1")
    + "\t\tN/A\n" for a in range(4)) + "NIC0\tSYS\tSYS\tPHB\tSYS\t X \tPIX\nNIC1\tSYS\tSYS\tPHB\tSYS\tPIX\t X\n"


def test_nics_without_a_legend_have_unknown_names(tmp_path):
    """With no NIC Legend the matrix's labels stood in as device names, unflagged: `--strict` passed and the
    summary showed NIC0 as if it were the adapter. The labels stay the vertices' names, and `nic_names` is unknown."""
    m = parse_topo_matrix(_NO_LEGEND, "gpuallocator.txt")
    assert [d.label for d in m.unnamed_nics] == ["NIC0", "NIC1"]
    assert m.nearest_nics(2) == ("PHB", ("NIC0", "NIC1"))
    assert "nic_names" in to_topology(m, "n1").unknown("n1")
    r = _import(tmp_path, _NO_LEGEND, "--strict")
    assert r.exit_code == 3 and "nic_names" in r.output, r.output
    r = _import(tmp_path, _NO_LEGEND, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert "nic_names" in doc["unknown"]
    assert "NIC0... are the matrix's labels" in doc["inside"][0]["unknown"]["nic_names"]
    # nothing checks or compares an adapter by a label: the node expectations check no HCA by name, and topo
    # diff compares no NIC of that host against the declared ones
    from slurmtools.render.node_expectations import host_facts
    from slurmtools.topology.checks import diff

    t = to_topology(m, "n1")
    assert host_facts(t, "n1")["hcas"] is None
    named = to_topology(parse_topo_matrix(_NO_LEGEND + "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"), "n1")
    assert [h["name"] for h in host_facts(named, "n1")["hcas"]] == ["mlx5_0", "mlx5_1"]
    assert [f.code for f in diff(named, named)] == []
    assert not [f for f in diff(named, t) if f.code in ("missing-nic", "nic-numa")]
    assert not [f for f in diff(t, named) if f.code in ("missing-nic", "nic-numa")]   # either side unnamed
    # NICs named in the header (old drivers: `mlx4_0` as the column) are device names, known
    old = parse_topo_matrix("\tGPU0\tmlx4_0\tCPU Affinity\nGPU0\t X \tPHB\t0-11\nmlx4_0\tPHB\t X \n")
    assert not old.unnamed_nics and "nic_names" not in to_topology(old, "k").unknown("k")


@pytest.mark.parametrize("legend, line, column, words", [
    ("NIC0: rocep177s0f0    NIC1 rocep177s0f1\n", 12, 23, "expected `NIC<n>: <device name>` pairs on a NIC Legend "
                                                          "line, found 'NIC1 rocep177s0f1'"),
    ("NIC0: rocep177s0f0    NIC0: rocep177s0f1\n", 12, 23, "NIC0 appears twice in the NIC Legend"),
    ("NIC0: rocep177s0f0\n", 13, None, "the NIC Legend names no NIC1"),
    ("NIC0: rocep177s0f0  NIC1: rocep177s0f1  NIC2: mlx5_0\n", None, None,
     "names NIC2, which the matrix does not have"),
])
def test_a_nic_legend_line_is_read_whole_or_refused(legend, line, column, words):
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(_MATRIX_2NIC + legend, "vllm.txt")
    assert (err.value.line, err.value.column) == (line, column) and words in str(err.value), str(err.value)


def test_gpu_rows_then_a_nic_legend_is_a_cut_paste():
    """Rows of the NICs left out, their legend lines after a blank (an NCCL issue's trimmed, annotated paste): the
    table is cut short, refused as such, not read as blank-spaced rows ("expected the row of NIC0, found 'NIC0:'")."""
    text = ("        GPU0  GPU1  NIC0  NIC1\nGPU0     X    NV18  PIX   SYS\nGPU1    NV18   X    SYS   PIX\n\n"
            "NIC0: rocep80s0   -> ens2005np0  (rail 0)\n")
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(text, "nccl.txt")
    assert err.value.line == 4 and "table ends after 2 of 4 rows; expected the row of NIC0" in str(err.value)


# ---------------------------------------------------------------- nvlink -s without UUIDs, under banners

# Two Quadro RTX 8000 on a 2-link bridge; this driver printed no UUID (layout of a GitHub devlog, "035").
QUADRO_STATUS = ("$ nvidia-smi nvlink --status\n"
                 "GPU 0: Quadro RTX 8000\n\t Link 0: 25.781 GB/s\n\t Link 1: 25.781 GB/s\n"
                 "GPU 1: Quadro RTX 8000\n\t Link 0: 25.781 GB/s\n\t Link 1: 25.781 GB/s\n")
QUADRO_TOPO = "$ nvidia-smi topo -m\n        GPU0   GPU1\nGPU0     X     NV2\nGPU1    NV2    X\n"
# Two V100 SXM2 with 6 links, from an nvidia-smi cheatsheet: an indented code block under `Output:` and a
# `====STATUS====` banner, links tab-indented further.
V100_STATUS = ("    nvidia-smi nvlink --status\n    \n    Output:\n    ==============STATUS==============\n"
               + "".join(f"    GPU {g}: Tesla V100-SXM2-32GB\n" + "".join(f"\t    Link {k}: 25.781 GB/s\n"
                                                                        for k in range(6)) for g in range(2)))
V100_TOPO = ("    Nvidia-smi topo --matrix\n\n    Output:\n    ==============MATRIX==============\n"
             "            GPU0    GPU1    CPU Affinity\n    GPU0     X      NV4     1-1,3-3,5-5,7-7\n"
             "    GPU1    NV4      X      1-1,3-3,5-5,7-7\n")


@pytest.mark.parametrize("status, name, links", [(QUADRO_STATUS, "Quadro RTX 8000", 2),
                                                 (V100_STATUS, "Tesla V100-SXM2-32GB", 6)])
def test_status_without_uuid_or_under_a_banner(status, name, links):
    """Both were refused at their first line: `expected GPU <n>: <name> (UUID: ...)`."""
    gpus = parse_nvlink_status(status, "s.txt")
    assert [(g.index, g.name, g.uuid) for g in gpus] == [(0, name, None), (1, name, None)]
    assert all(g.links == tuple((k, 25.781) for k in range(links)) for g in gpus)
    assert gpus[1].line == (5 if links == 2 else 12)


@pytest.mark.parametrize("topo, status, nv, gtype", [(V100_TOPO, V100_STATUS, 4, "tesla_v100-sxm2-32gb"),
                                                     (QUADRO_TOPO, QUADRO_STATUS, 2, "quadro_rtx_8000")])
def test_status_file_gives_its_speeds_to_the_topo_node(tmp_path, topo, status, nv, gtype):
    r = _import(tmp_path, topo, "--json", status=status)
    assert r.exit_code == 0, r.output
    inside = json.loads(r.output)["inside"][0]
    assert inside["nvlink_islands"] == [[0, 1]] and inside["nvlink_gbytes_per_link"] == [25.781]
    assert [g["type"] for g in inside["gpus"]] == [gtype] * 2
    assert "nvlink_speed" not in inside["unknown"] and "gpu_model" not in inside["unknown"]
    t = to_topology(parse_topo_matrix(topo), "n1", parse_nvlink_status(status))
    assert t.edge("gpu:n1:0", "gpu:n1:1").links == nv and t.edge("gpu:n1:0", "gpu:n1:1").gbytes == nv * 25.781


@pytest.mark.parametrize("text, line, words", [
    ("Output:\n=====STATUS=====\n\t Link 0: 25.781 GB/s\n", 3, "expected `GPU <n>: <name>`"),   # a banner hides no line
    ("GPU 0: Tesla V100 (UUID: GPU-1\n\t Link 0: 25.781 GB/s\n", 1, "expected `GPU <n>: <name>`"),  # UUID cut short
    ("Output:\n====\nGPU 0: Tesla V100\n ??\n", 4, "expected `GPU <n>: <name>`"),
])
def test_status_lines_are_still_read_strictly(text, line, words):
    with pytest.raises(ParseError) as err:
        parse_nvlink_status(text, "s.txt")
    assert err.value.line == line and words in str(err.value), str(err.value)


def test_a_status_file_alone_is_still_not_a_matrix():
    with pytest.raises(ParseError, match="this is `nvidia-smi nvlink -s` output"):
        parse_topo_matrix(QUADRO_STATUS, "s.txt")


# ---------------------------------------------------------------- a blank line after every row

# V100 hybrid cube mesh pasted into markdown: title, the command in backticks, a whitespace-only line under the
# header and a blank line after every row; no affinity columns (layout of "Network Topology of a node of WeChat
# Yard").
_CUBE = [[0, 1, 2, 1, 0, 0, 0, 2], [1, 0, 1, 2, 0, 0, 2, 0], [2, 1, 0, 2, 0, 1, 0, 0], [1, 2, 2, 0, 1, 0, 0, 0],
         [0, 0, 0, 1, 0, 2, 2, 1], [0, 0, 1, 0, 2, 0, 1, 2], [0, 2, 0, 0, 2, 1, 0, 1], [2, 0, 0, 0, 1, 2, 1, 0]]
SPACED = ("## Network Topology of a node\n```nvidia-smi topo -m```\n\n"
          + "  ".join(f"GPU{i}" for i in range(8)) + "\n  \n"
          + "".join(f"GPU{a}  " + "  ".join(" X " if a == b else f"NV{c}" if c else "SYS" for b, c in enumerate(row))
                    + "\n\n" for a, row in enumerate(_CUBE)))


def test_a_blank_line_after_every_row_is_no_end_of_the_table(tmp_path):
    """It was refused with "table ends after 0 of 8 rows" although all eight rows are there."""
    m = parse_topo_matrix(SPACED, "wechat.txt")
    assert [[m.nvlinks(a, b) for b in range(8)] for a in range(8)] == _CUBE
    r = _import(tmp_path, SPACED, "--json")
    assert r.exit_code == 0, r.output
    inside = json.loads(r.output)["inside"][0]
    assert inside["nvlink_islands"] == [list(range(8))] and "local_cpus" in inside["unknown"]


def test_rows_spaced_out_are_still_checked_and_cut_pastes_refused():
    rows = SPACED.split("\n")
    # the asymmetry is named at the line of the row that holds it, not at the row's index below the header
    bad = SPACED.replace("GPU7  NV2", "GPU7  NV1")
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(bad, "wechat.txt")
    assert err.value.line == rows.index(next(r for r in rows if r.startswith("GPU7"))) + 1
    assert "matrix not symmetric: GPU0->GPU7 is NV2 but GPU7->GPU0 is NV1" in str(err.value)
    # cut after GPU2's row (and its blank line), or followed by the legend: the table ends there
    cut = SPACED[:SPACED.index("\nGPU3  ") + 1]
    for text in (cut, cut + "Legend:\n\n  X    = Self\n", cut + "nvidia-smi said more, not pasted\n"):
        with pytest.raises(ParseError) as err:
            parse_topo_matrix(text, "wechat.txt")
        assert err.value.line == 11 and "table ends after 3 of 8 rows; expected the row of GPU3" in str(err.value)


# ---------------------------------------------------------------- the legend of a driver from before NVLink

# 2x K80 and an FDR HCA (mlx4_0): the column named by the device, and the oldest legend, in its wording, with SOC
# and no NV# entry (layout of Microway's nvidia-smi guide).
_K80 = ("nvidia-smi topo --matrix\n\n"
        "        GPU0    GPU1    GPU2    GPU3    mlx4_0  CPU Affinity\n"
        "GPU0     X      PIX     PHB     PHB     PHB     0-11\n"
        "GPU1    PIX      X      PHB     PHB     PHB     0-11\n"
        "GPU2    PHB     PHB      X      PIX     PHB     0-11\n"
        "GPU3    PHB     PHB     PIX      X      PHB     0-11\n"
        "mlx4_0  PHB     PHB     PHB     PHB      X \n\n")
OLDEST_LEGEND = ("Legend:\n\n  X   = Self\n  SOC = Path traverses a socket-level link (e.g. QPI)\n"
                 "  PHB = Path traverses a PCIe host bridge\n  PXB = Path traverses multiple PCIe internal switches\n"
                 "  PIX = Path traverses a PCIe internal switch\n")


def test_a_pre_nvlink_legend_states_no_nvlink(tmp_path):
    """The legend of a driver from before NVLink has no NV# entry, as `topo -mp`'s has not: the K80s' NVLinks were
    left unknown (`NVLink islands: unknown`, gres.conf refused). That driver shows every link there is."""
    from slurmtools.topology.render_slurm import gres_lines_for_host

    m = parse_topo_matrix(_K80 + OLDEST_LEGEND, "k80.txt")
    assert not m.pcie_only and m.nearest_nics(0) == ("PHB", ("mlx4_0",))
    t = to_topology(m, "k80")
    assert "nvlink" not in t.unknown("k80") and q.nvlink_islands(t, "k80") == [[0], [1], [2], [3]]
    assert all("Links=" in ln for ln in gres_lines_for_host(t, "k80", "/dev/nvidia{index}"))   # no minor in topo -m
    r = _import(tmp_path, _K80 + OLDEST_LEGEND, "--json")
    assert json.loads(r.output)["inside"][0]["nvlink_islands"] == [[0], [1], [2], [3]], r.output


@pytest.mark.parametrize("text", [
    _K80 + "Legend:\n\n  X   = Self\n  SOC = Path traverses a socket-level link (e.g. QPI)\n"
           "  PIX = Path traverses a PCIe internal switch\n",                   # a few entries kept: age not told
    "$ nvidia-smi topo -mp\n" + _K80 + OLDEST_LEGEND,                           # the command says `-mp`
    _K80 + OLDEST_LEGEND.replace("  SOC = Path traverses a socket-level link (e.g. QPI)\n",
                                 "  SYS = Connection traversing PCIe as well as the SMP interconnect\n"
                                 "  NODE = Connection traversing PCIe within a NUMA node\n"),   # `-mp` of a later one
])
def test_a_partial_or_later_legend_without_nv_stays_pcie_only(text):
    m = parse_topo_matrix(text, "k80.txt")
    assert m.pcie_only and "nvlink" in to_topology(m, "k80").unknown("k80")
