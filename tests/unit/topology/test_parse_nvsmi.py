"""`nvidia-smi topo -m` / `nvlink -s` parsing: facts read off every real capture, and precise refusals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slurmtools.errors import ConfigError, ParseError
from slurmtools.topology.nvsmi import parse_cpulist, parse_nvlink_status, parse_topo_matrix

from ._data import read_data, shared_files

# file -> GPU count, {(gpu a, gpu b): NVLinks}, {gpu: (class, nearest NICs)}, {gpu: NUMA affinity}, NIC names
FACTS = {
    "club-3090-issue1229_rtx5090x2-PHB.txt":
        (2, {(0, 1): 0}, {0: ("", ())}, {0: {0}, 1: {0}}, []),
    "gpu-compress-decompress_dgx-a100x8_10nic_nps4.txt":
        (8, {(0, 1): 12, (0, 7): 12, (3, 6): 12},
         {0: ("PXB", ("mlx5_0", "mlx5_1")), 3: ("PXB", ("mlx5_2", "mlx5_3")), 4: ("PXB", ("mlx5_4", "mlx5_5")),
          7: ("PXB", ("mlx5_6", "mlx5_7"))},
         {0: {3}, 1: {3}, 2: {1}, 4: {7}, 6: {5}, 7: {5}}, [f"mlx5_{i}" for i in range(10)]),
    "oneflow-dlperf_v100x8-dgx1-hybridcube_1nic.txt":
        (8, {(0, 1): 1, (0, 3): 2, (0, 4): 2, (0, 5): 0, (4, 7): 2, (5, 7): 1},
         {0: ("NODE", ("mlx5_0",)), 2: ("PIX", ("mlx5_0",)), 4: ("SYS", ("mlx5_0",))},
         {0: None, 7: None}, ["mlx5_0"]),
    "oneflow-dlperf_v100x8-hybridcube_2nic_messy-whitespace.txt":
        (8, {(0, 1): 1, (0, 2): 2, (0, 3): 1, (0, 4): 0, (0, 7): 2, (4, 5): 2, (3, 4): 1, (6, 7): 1},
         {2: ("PIX", ("mlx5_0",)), 0: ("NODE", ("mlx5_0",)), 4: ("NODE", ("mlx5_1",)), 7: ("PIX", ("mlx5_1",))},
         {0: {0}, 3: {0}, 4: {1}, 7: {1}}, ["mlx5_0", "mlx5_1"]),
    "princeton-della-a100-2gpu_della-i14g20.txt":
        (2, {(0, 1): 0}, {0: ("NODE", ("mlx5_0",)), 1: ("NODE", ("mlx5_1",))}, {0: {0}, 1: {1}},
         ["mlx5_0", "mlx5_1"]),
    "princeton-della-pli-h100_della-k17g3.txt":
        (8, {(0, 1): 18, (2, 7): 18},
         {0: ("PIX", ("mlx5_0", "mlx5_1")), 3: ("PIX", ("mlx5_2",)), 4: ("PIX", ("mlx5_3", "mlx5_4")),
          6: ("PIX", ("mlx5_5",)), 1: ("NODE", tuple(f"mlx5_{i}" for i in range(6)))},
         {0: {0}, 4: {1}}, [f"mlx5_{i}" for i in range(6)]),
    "stas00-mlengineering_2gpu-nvlink-NV2.txt": (2, {(0, 1): 2}, {0: ("", ())}, {0: None}, []),
    "stas00-mlengineering_2gpu-pcie-PHB.txt": (2, {(0, 1): 0}, {1: ("", ())}, {1: None}, []),
    "stas00-mlengineering_a100x8-NV12_reformatted.txt": (8, {(0, 7): 12, (3, 4): 12}, {}, {3: {0}, 4: {1}}, []),
    "stas00-mlengineering_h100x8-NV18-HT.txt": (8, {(0, 7): 18}, {}, {0: {0}, 7: {1}}, []),
    "stas00-mlengineering_h100x8-NV18_reformatted.txt": (8, {(1, 6): 18}, {}, {2: {0}, 5: {1}}, []),
    "unknown-repo_berkeley-savio4-n0123_a5000x8-pcie_2nic.txt":
        (8, {(0, 1): 0, (2, 3): 0},
         {0: ("NODE", ("mlx5_0", "mlx5_1")), 5: ("SYS", ("mlx5_0", "mlx5_1"))}, {0: {0}, 4: {1}},
         ["mlx5_0", "mlx5_1"]),
    "unknown-repo_hgx-a100x4-80gb_roce-nic-rocep49s0.txt":
        (4, {(0, 3): 12, (1, 2): 12}, {g: ("SYS", ("rocep49s0",)) for g in range(4)}, {g: {1} for g in range(4)},
         ["rocep49s0"]),
    "unknown-repo_hgx-a100x8_4nic_jtkj003.txt":
        (8, {(0, 5): 12},
         {0: ("PXB", ("mlx5_0", "mlx5_1")), 2: ("PXB", ("mlx5_2", "mlx5_3")),
          4: ("SYS", ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")), 7: ("SYS", ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"))},
         {0: {0}, 5: {1}}, ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]),
}

# file -> (line, column or None, words the message must hold)
REFUSED = {
    "sglang-issue11208_gb200x4_6nic_TRUNCATED.txt": (6, 44, "row GPU3 has 5 of 10 link cells"),
    "club-3090-issue1229_rtx5090x2_topo-p2p-rw-GNS.txt": (1, None, "topo -p2p"),
    "stas00-mlengineering_h100x8_topo-p2p-r.txt": (2, None, "topo -p2p"),
    "stas00-mlengineering_l4x2_topo-p2p-r.txt": (2, None, "topo -p2p"),
}


@pytest.mark.parametrize("name", sorted(FACTS))
def test_matrix_facts(name):
    gpus, nvl, nearest, numa, nics = FACTS[name]
    m = parse_topo_matrix(read_data(name), name)
    assert len(m.gpus) == gpus
    assert [g.index for g in m.gpus] == list(range(gpus))
    assert [n.name for n in m.nics] == nics
    for (a, b), count in nvl.items():
        assert m.nvlinks(a, b) == count == m.nvlinks(b, a)
    for g, want in nearest.items():
        assert m.nearest_nics(g) == want
    for g, want in numa.items():
        assert m.gpu(g).numa_affinity == (None if want is None else frozenset(want))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_with_position(name):
    line, column, words = REFUSED[name]
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(read_data(name), name)
    assert err.value.line == line and err.value.column == column
    assert words in str(err.value) and str(err.value).startswith(name + ":")


def test_cpu_affinity_forms():
    ht = parse_topo_matrix(read_data("stas00-mlengineering_h100x8-NV18-HT.txt"))
    assert ht.gpu(0).cpu_affinity == frozenset(range(0, 52)) | frozenset(range(104, 156))
    assert ht.gpu(5).cpu_affinity == frozenset(range(52, 104)) | frozenset(range(156, 208))
    pli = parse_topo_matrix(read_data("princeton-della-pli-h100_della-k17g3.txt"))
    # Empty cells (the caller's cpuset held no CPU of that NUMA node) read as empty, not shifted.
    assert pli.gpu(0).cpu_affinity == frozenset() and pli.gpu(0).numa_affinity == frozenset({0})
    assert pli.gpu(4).cpu_affinity == frozenset({1}) and pli.gpu(4).gpu_numa_id is None
    assert parse_cpulist("0,5-11") == frozenset({0, 5, 6, 7, 8, 9, 10, 11})
    with pytest.raises(ValueError):
        parse_cpulist("5-3")


def test_pcie_groups_and_numa_of_nics():
    m = parse_topo_matrix(read_data("unknown-repo_berkeley-savio4-n0123_a5000x8-pcie_2nic.txt"))
    assert sorted(m.pcie_groups("PIX")) == [("GPU2", "GPU3"), ("GPU6", "GPU7"), ("mlx5_0", "mlx5_1")]
    assert ("GPU0", "GPU1", "GPU2", "GPU3") in m.pcie_groups("PXB")
    dgx = parse_topo_matrix(read_data("gpu-compress-decompress_dgx-a100x8_10nic_nps4.txt"))
    assert dgx.numa_of("NIC0") == 3 and dgx.numa_of("NIC6") == 5 and dgx.numa_of("NIC8") is None


GB200_HEAD = """\
        GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV18    SYS     0-71    0,3-9,11-17             2
GPU1    NV18     X      SYS     72-143  1,19-25,27-33           10
NIC0    SYS     SYS      X

NIC Legend:

  NIC0: mlx5_0
"""


def test_multi_range_numa_and_gpu_numa_id():
    m = parse_topo_matrix(GB200_HEAD, "gb200.txt")
    assert m.gpu(0).numa_affinity == frozenset({0, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17})
    assert m.gpu(0).gpu_numa_id == 2 and m.gpu(1).gpu_numa_id == 10
    assert m.nics[0].name == "mlx5_0" and m.nics[0].cpu_affinity is None


TWO_NICS = """\
        GPU0    GPU1    NIC0    NIC1    CPU Affinity    NUMA Affinity
GPU0     X      NV18    SYS     SYS     0-71    0
GPU1    NV18     X      SYS     SYS     72-143  1
NIC0    SYS     SYS      X      PIX
NIC1    SYS     SYS     PIX      X

NIC Legend:

  NIC0: mlx5_0
  NIC1: mlx5_1
"""


@pytest.mark.parametrize("legend, line", [
    ("  NIC0: mlx5_0\n  NIC1 mlx5_1\n", 10),   # a garbled entry ended the legend: NIC1 stayed "NIC1"
    ("  NIC0: mlx5_0\n", 10),                   # cut short
])
def test_a_nic_legend_names_every_nic_or_none(legend, line):
    assert [n.name for n in parse_topo_matrix(TWO_NICS, "gb200.txt").nics] == ["mlx5_0", "mlx5_1"]
    text = TWO_NICS.replace("  NIC0: mlx5_0\n  NIC1: mlx5_1\n", legend)
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(text, "gb200.txt")
    assert err.value.line == line and "the NIC Legend names no NIC1 (cut short, or a garbled line?)" in str(err.value)
    assert [n.name for n in parse_topo_matrix(text[:text.index("NIC Legend")], "x").nics] == ["NIC0", "NIC1"]


def test_comment_prefix_prompt_and_fused_cells():
    text = ("# $ nvidia-smi topo -m\n"
            "#\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\n"
            "#GPU0\t X NV2\tPXBNODE\t0-7\t0\n"
            "#GPU1\tNV2\t XPXB\tSYS\t0-7\t0\n"
            "#GPU2PXB\tPXB\tXSYS\t8-15\t1\n"
            "#NIC0\tNODE\tSYS\tSYS\t X \n")
    m = parse_topo_matrix(text)
    assert m.nvlinks(0, 1) == 2 and m.link("GPU0", "GPU2").kind == "PXB"
    assert m.nearest_nics(0) == ("NODE", ("NIC0",)) and m.gpu(2).cpu_affinity == frozenset(range(8, 16))


def test_legacy_soc_reads_as_sys():
    m = parse_topo_matrix("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSOC\t0-7\nGPU1\tSOC\t X \t8-15\n")
    assert m.link("GPU0", "GPU1").kind == "SYS" and m.link("GPU0", "GPU1").token == "SOC"


TWO = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
       "GPU0\t X \tNV2\t0-7\t0\tN/A\nGPU1\tNV2\t X \t8-15\t1\tN/A\n")


@pytest.mark.parametrize("old, new, line, words", [
    ("\tNV2\t0-7", "\tNV٣\t0-7", 2, "expected a link class"),            # int() reads ٣ as 3
    ("\tNV2\t0-7", "\tNV²\t0-7", 2, "expected a link class"),            # isdigit() passes ², int() refuses it
    ("0-7\t0\t", "0-7\t٣\t", 2, "NUMA Affinity: expected a list"),
    ("0-7\t0\tN/A", "0-7\t0\t-1", 2, "GPU NUMA ID: expected a NUMA id"),
    ("\tGPU1\tCPU", "\tGPU١\tCPU", 1, "expected a GPU label like GPU0"),   # was read as a NIC named GPU١
])
def test_numbers_are_ascii_digits(old, new, line, words):
    """Numbers in the matrix are what nvidia-smi prints: ASCII digits, no sign (it prints N/A for none)."""
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(TWO.replace(old, new, 1), "paste.txt")
    assert err.value.line == line and words in str(err.value), str(err.value)


@pytest.mark.parametrize("cells, column", [("0-70000\t0", "CPU Affinity"), ("0-7\t65536", "NUMA Affinity")])
def test_affinity_ids_are_bounded(cells, column):
    """A range is expanded into its ids: past any Linux system's CPU count it is a garbled cell (0-99999999999 took
    the memory), refused."""
    with pytest.raises(ParseError, match=f"{column}: expected a list like 0-15,32-47 \\(ids below 65536\\)"):
        parse_topo_matrix(TWO.replace("0-7\t0", cells, 1), "paste.txt")
    with pytest.raises(ParseError, match=f"{column}: .*: id [0-9]+ is not below 65536$"):
        parse_topo_matrix(TWO.replace("0-7\t0", cells, 1), "paste.txt")


@pytest.mark.parametrize("cells, column, part", [("266-192\t0", "CPU Affinity", "266-192"),
                                                 ("0-7\t3-1", "NUMA Affinity", "3-1"),
                                                 ("0-7,15-8\t0", "CPU Affinity", "15-8")])
def test_a_range_that_runs_backwards_is_named(cells, column, part):
    """A reversed range (`266-192`, seen in a hand-edited paste) has a CPU list's form; the message names the range
    that runs backwards rather than only the form it should have."""
    with pytest.raises(ParseError, match=f"{column}: expected a list like .*: {part} runs backwards$"):
        parse_topo_matrix(TWO.replace("0-7\t0", cells, 1), "paste.txt")


@pytest.mark.parametrize("speed", ["25.1.1", "٣", "."])
def test_nvlink_status_speed_is_a_decimal(speed):
    with pytest.raises(ParseError, match="expected `GPU <n>"):
        parse_nvlink_status(f"GPU 0: X (UUID: GPU-1)\n\t Link 0: {speed} GB/s\n", "s.txt")


@pytest.mark.parametrize("cell", ["NV0", "NV" + "9" * 150, "NV0X"])
def test_fused_cells_are_split_into_link_words_only(cell):
    """The fused-cell search made NV<digits> words of its own that the link reader refused (NV0, a count of over
    100 digits): an AssertionError instead of a message."""
    with pytest.raises(ParseError, match="expected a link class"):
        parse_topo_matrix(TWO.replace("\tNV2\t0-7", f"\t{cell}\t0-7", 1), "paste.txt")


def test_a_fused_cell_thousands_of_words_long_is_refused():
    """Fused cells are split by a search that once recursed a level per word (RecursionError past about 1000)."""
    with pytest.raises(ParseError, match="for column GPU1, found 'NV2NV2"):
        parse_topo_matrix(TWO.replace("\tNV2\t0-7", "\t" + "NV2" * 3000 + "\t0-7", 1), "paste.txt")


@pytest.mark.parametrize("text, line, column, words", [
    ("\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tNV1\t X \n", 3, None, "not symmetric"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-7\nGPU1\tNV2\tX\tSYS0-7\n", 3, 12, "CPU Affinity: expected a list"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-7\nGPU1\tNV2SYS\t0-7\n", 3, 6, "expected X (the device itself)"),
    ("\tGPU0\tGPU1\nGPU0\t X \tPXBNODE\n", 2, 10, "splits into 2 cells"),
    ("\tGPU0\tGPU1\nGPU0\t X \tQPI\n", 2, 10, "expected a link class"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU10\tNV2\t X \n", 3, 1, "expected the row of GPU1, found 'GPU10'"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV2\n\nLegend:\n", 3, None, "expected the row of GPU1"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tNV2\tPIX\n", 3, 10, "expected X"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-7x\nGPU1\tNV2\t X \t0-7\n", 2, 14, "CPU Affinity"),
    ("hello\n", None, None, "no `nvidia-smi topo -m` header"),
])
def test_precise_errors(text, line, column, words):
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(text, "paste.txt")
    assert (err.value.line, err.value.column) == (line, column), str(err.value)
    assert words in str(err.value)


def test_nvlink_status():
    gpus = parse_nvlink_status(read_data("unknown-repo_hgx-a100x4-80gb_nvlink-s.txt"))
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    assert all(g.active == 12 and g.gbytes == 300.0 for g in gpus)
    assert gpus[0].uuid == "GPU-e04968e9-3302-841c-b00f-f388d7a8f56f" and gpus[0].name == "NVIDIA A100-SXM4-80GB"
    inactive = parse_nvlink_status("GPU 0: X (UUID: GPU-1)\n\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n")
    assert inactive[0].active == 1 and inactive[0].links[1] == (1, None)


def test_nvlink_status_elided_is_refused():
    with pytest.raises(ParseError) as err:
        parse_nvlink_status(read_data("stas00-mlengineering_h100_nvlink-status_abbrev.txt"), "abbrev.txt")
    assert err.value.line == 4 and "elided" in str(err.value)


def test_nvlink_status_is_not_a_matrix():
    with pytest.raises(ParseError, match="nvlink -s"):
        parse_topo_matrix(read_data("unknown-repo_hgx-a100x4-80gb_nvlink-s.txt"))


@pytest.mark.parametrize("path", shared_files("topo_matrix", "*.txt"), ids=lambda p: p.name)
def test_shared_sweep(path):
    """Every shared capture parses into a consistent matrix or is refused at a line."""
    text = path.read_text()
    try:
        if re.search(r"^\s*GPU \d+: .*\(UUID", text, re.M) and "topo" not in text:
            assert parse_nvlink_status(text, path.name)
            return
        m = parse_topo_matrix(text, path.name)
    except ParseError as exc:
        assert exc.line is not None or "nvlink" in str(exc), str(exc)
        assert path.name in FACTS or path.name in REFUSED or "nvlink" in path.name or exc.line
        return
    n = len(m.devices)
    assert m.gpus and all(m.links[i][i].kind == "X" for i in range(n))
    assert all(m.links[i][j] == m.links[j][i] for i in range(n) for j in range(n))
    if path.name in FACTS:
        assert len(m.gpus) == FACTS[path.name][0]


# ---------------------------------------------------------------- into the graph

def _topo_m_captures() -> list[Path]:
    """Every `nvidia-smi topo -m` capture the tests can see: the copies here and, when present, ../shared."""
    from tests.unit.topology._data import TEST_DATA

    here = sorted(p for p in TEST_DATA.glob("*.txt") if re.search(r"topo-m|NV\d|PHB|PIX|nic|pcie", p.name)
                  and "p2p" not in p.name and "nvlink-s" not in p.name and "nvlink-status" not in p.name)
    return here + shared_files("topo_matrix", "*.txt")


@pytest.mark.parametrize("path", _topo_m_captures(), ids=lambda p: p.name)
def test_graph_agrees_with_the_matrix(path):
    """No fact of the graph contradicts its capture: every cell's class is the graph's path class between the
    two devices (NV# cells its NVLink count), and each GPU's local CPUs and NUMA nodes are its affinity cells."""
    from slurmtools.topology import queries as q
    from slurmtools.topology.nvsmi import to_topology
    from slurmtools.topology.render_slurm import gres_lines_for_host

    try:
        m = parse_topo_matrix(path.read_text(), path.name)
    except ParseError:
        assert re.search(r"TRUNCATED|p2p|nvlink", path.name)   # the captures that must be refused
        return
    t = to_topology(m, "node1")
    assert [g.index for g in t.gpus("node1")] == [g.index for g in m.gpus]
    assert sorted(n.name for n in t.nics("node1")) == sorted(n.name for n in m.nics)
    vid = {d.label: (f"gpu:node1:{d.index}" if d.kind == "gpu" else f"nic:node1:{d.name}") for d in m.devices}
    for a in m.devices:
        for b in m.devices:
            cell = m.link(a, b)
            if a is b:
                continue
            if cell.kind == "NV":
                assert q.nvlink_count(t, vid[a.label], vid[b.label]) == cell.nvlinks, (a.label, b.label)
            elif not (a.kind == b.kind == "gpu" and cell.kind != "SYS" and _nv_hidden(m, a, b)):
                assert q.path_class(t, vid[a.label], vid[b.label]) == cell.kind, (a.label, b.label, cell.token)
    # gres.conf Links= rows are the matrix's NVLink counts, -1 for the GPU itself, hence symmetric; a one-GPU host
    # has no peers and its line no Links= (the lent H100's capture); `topo -mp` shows no NVLinks at all, so its
    # Links= are not written
    # `topo -m` states no device minor: File= is refused unless the admin states the files follow the index
    by_index = "/dev/nvidia{index}"
    with pytest.raises(ConfigError, match="device files are unknown"):
        gres_lines_for_host(t, "node1", assume_no_nvlink=True)
    if m.pcie_only:
        assert "nvlink" in t.unknown("node1")
        with pytest.raises(ConfigError, match="NVLink connects is unknown"):
            gres_lines_for_host(t, "node1", by_index)
        lines = gres_lines_for_host(t, "node1", by_index, assume_no_nvlink=True)
    else:
        lines = gres_lines_for_host(t, "node1", by_index)
    if len(m.gpus) == 1:
        assert len(lines) == 1 and "Links=" not in lines[0]
    else:
        links = [[int(x) for x in re.search(r"Links=(\S+)", ln).group(1).split(",")] for ln in lines]
        assert links == [[-1 if a == b else m.nvlinks(a, b) for b in range(len(m.gpus))]
                         for a in range(len(m.gpus))]
    near = q.nearest_nic_paths(t, "node1")
    cpus, numa = q.local_cpus(t, "node1"), q.gpu_numa(t, "node1")
    for g in m.gpus:
        cls, nics = m.nearest_nics(g.index)
        assert sorted(p.nic for p in near[g.index]) == sorted(nics)
        assert {p.path for p in near[g.index]} <= {cls}
        assert cpus[g.index] == tuple(sorted(g.cpu_affinity or ()))
        assert numa[g.index] == (sorted(g.numa_affinity) if g.numa_affinity else [])


def _nv_hidden(m, a, b) -> bool:
    """GPU pairs whose PCIe class the matrix hides: every other GPU pair cell of theirs is NV#, so nvidia-smi
    never showed a PCIe class between GPUs of this board (the graph may place them either way)."""
    return any(m.link(x, y).kind == "NV" for x in m.gpus for y in m.gpus if x is not y)


def test_nvswitch_board_versus_mesh():
    from slurmtools.topology import queries as q
    from slurmtools.topology.nvsmi import is_nvswitch_board, to_topology

    a100 = parse_topo_matrix(read_data("gpu-compress-decompress_dgx-a100x8_10nic_nps4.txt"))
    cube = parse_topo_matrix(read_data("oneflow-dlperf_v100x8-dgx1-hybridcube_1nic.txt"))
    assert is_nvswitch_board(a100) and not is_nvswitch_board(cube)
    t = to_topology(a100, "dgx")
    assert len(list(t.of_kind("nvswitch"))) == 1 and q.nvlink_islands(t, "dgx") == [list(range(8))]
    assert [d.name for d in t.of_kind("nvlink_domain")] == ["dgx"]
    c = to_topology(cube, "v100", parse_nvlink_status("GPU 0: V100 (UUID: GPU-0)\n Link 0: 25.781 GB/s\n"))
    assert not list(c.of_kind("nvswitch")) and q.nvlink_count(t, "gpu:dgx:0", "gpu:dgx:5") == 12
    assert c.edge("gpu:v100:0", "gpu:v100:3").links == 2 and c.edge("gpu:v100:0", "gpu:v100:3").gbytes == 51.562
    assert not c.g.has_edge("gpu:v100:0", "gpu:v100:5")


def test_sixteen_gpus_space_aligned():
    n = 16
    head = "        " + "".join(f"GPU{i:<6}" for i in range(n)) + "CPU Affinity    NUMA Affinity\n"
    rows = "".join(f"GPU{a:<5}" + "".join(" X    " if a == b else "NV12  " for b in range(n))
                   + f"{0 if a < 8 else 48}-{47 if a < 8 else 95}    {a // 8}\n" for a in range(n))
    m = parse_topo_matrix(head + rows, "dgx2.txt")
    assert len(m.gpus) == 16 and m.nvlinks(3, 15) == 12 and m.gpu(12).numa_affinity == frozenset({1})
    assert m.gpu(15).cpu_affinity == frozenset(range(48, 96))


# ---------------------------------------------------------------- paste forms and `topo -mp`

@pytest.mark.parametrize("prefix", ["> ", ">", "> > ", ">>> ", "# ", "#"])
@pytest.mark.parametrize("name", ["unknown-repo_gb200x4-presto-gcn_8nic-all-SYS_topo-m.txt",
                                  "princeton-della-pli-h100_della-k17g3.txt"])
def test_quoted_pastes_read_as_the_plain_paste(name, prefix):
    """A paste quoted in a markdown or e-mail reply (every line behind `> `, `>>> `...) was refused as having no
    `topo -m` header, and `topo lint FILE` did not know it for nvidia-smi output; a `#`-prefixed one was read."""
    from slurmtools.cli.topo_providers import detect_kind

    plain = read_data(name)
    quoted = "".join(prefix + line for line in plain.splitlines(keepends=True))
    m, q = parse_topo_matrix(plain, name), parse_topo_matrix(quoted, name)
    assert (q.devices, q.links, q.columns, q.pcie_only) == (m.devices, m.links, m.columns, m.pcie_only)
    assert detect_kind(quoted) == "nvidia-smi"


TOPO_MP = "handwritten_a100x4_topo-mp_hash-prefixed.txt"


def test_topo_mp_leaves_the_nvlinks_unknown():
    """`nvidia-smi topo -mp` prints the PCIe classes only, SYS between NVLinked A100s (the form of a real paste
    from a JUWELS Booster job script): it was read as a node without NVLink, and gres.conf got Links=0 for every
    pair."""
    from slurmtools.topology.nvsmi import to_topology
    from slurmtools.topology.render_slurm import gres_lines_for_host

    text = read_data(TOPO_MP)
    m = parse_topo_matrix(text, TOPO_MP)
    assert m.pcie_only and len(m.gpus) == 4 and m.nearest_nics(2) == ("PIX", ("mlx5_2",))
    assert m.gpu(0).numa_affinity == frozenset({1}) and m.link("GPU0", "GPU1").kind == "SYS"
    t = to_topology(m, "jwb0001")
    assert "nvlink" in t.unknown("jwb0001")
    with pytest.raises(ConfigError, match="NVLink connects is unknown"):
        gres_lines_for_host(t, "jwb0001")
    # either sign is enough: the command line above the matrix, or a legend without `NV#`; with neither, the
    # cells are those of a node without NVLink (docs/topology.md, what a provider cannot see)
    command, matrix, legend = text.partition("\n")[0], text[text.index("# \t GPU0"):text.index("#\n# Legend")], \
        text[text.index("#\n# Legend"):]
    assert parse_topo_matrix(matrix + legend).pcie_only and parse_topo_matrix(command + "\n" + matrix).pcie_only
    assert not parse_topo_matrix(matrix).pcie_only
    # `topo -m` lists NV# in its legend: a node without NVLink is read as one
    phb = read_data("club-3090-issue1229_rtx5090x2-PHB.txt")
    assert "NV#" in phb and not parse_topo_matrix(phb).pcie_only
    assert "nvlink" not in to_topology(parse_topo_matrix(phb), "ws").unknown("ws")
