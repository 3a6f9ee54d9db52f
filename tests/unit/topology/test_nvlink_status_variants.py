"""`nvidia-smi nvlink -s` as drivers, clusters and pastes give it: inactive links in either spelling, NVML's
message in place of a GPU's links, capture prefixes (srun -l, pdsh, timestamps), and a status file that cannot be
of the topo -m file's node. Each reads true or is refused in one line naming file and line. Files composed here,
in the layouts seen in the places noted."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.errors import ParseError
from slurmtools.topology.nvsmi import parse_nvlink_status

U = "GPU-11111111-2222-3333-4444-55555555555"


def gpu(i: int, name: str = "Tesla V100-SXM2-16GB") -> str:
    return f"GPU {i}: {name} (UUID: {U}{i})\n"


def links(*speeds: str) -> str:
    return "".join(f"\t Link {n}: {s}\n" for n, s in enumerate(speeds))


V100 = gpu(0) + links(*["25.781 GB/s"] * 6) + gpu(1) + links(*["25.781 GB/s"] * 6)
TOPO_NV6 = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV6\t0-19\t0\nGPU1\tNV6\t X \t0-19\t0\n"
TOPO_SYS = TOPO_NV6.replace("NV6", "SYS")
ALL_INACTIVE = "NVML: Unable to retrieve NVLink information as all links are inActive\n"


def test_inactive_spelled_as_a_word():
    """`Link 3: Inactive` (Azure/azhpc-diagnostics#73 and azurehpc-health-checks#132 rewrite `<inactive>` so) was
    refused as no link line."""
    g = parse_nvlink_status(gpu(0) + links("25.781 GB/s", "Inactive", "<inactive>", "inactive"), "s.txt")[0]
    assert g.links == ((0, 25.781), (1, None), (2, None), (3, None)) and g.active == 1 and g.state == "listed"


@pytest.mark.parametrize("msg, state", [
    (ALL_INACTIVE, "inactive"),                                                         # leptonai/gpud#1085 (B200)
    ("\t NVML: Unable to retrieve Nvlink information as all links are inActive\n", "inactive"),  # open-gpu-kernel-modules#1150
    ("\t NVML: Unable to retrieve NVLink information: Not Supported\n", "unsupported"),  # PCIe cards
])
def test_nvml_message_in_place_of_the_links(msg, state):
    """NVML's line under a GPU was refused; it says the GPU has no active link, without a link count."""
    gpus = parse_nvlink_status(gpu(0, "NVIDIA B200") + msg + gpu(1, "NVIDIA B200") + links("53.125 GB/s"), "s.txt")
    assert (gpus[0].state, gpus[0].links, gpus[0].active) == (state, (), 0)
    assert gpus[1].links == ((0, 53.125),)


@pytest.mark.parametrize("text, line, words", [
    (ALL_INACTIVE, 1, "which GPU it is about is not stated"),          # `nvlink --status -i 2` pasted alone
    (gpu(0) + links("25 GB/s") + ALL_INACTIVE, 3, "under GPU 0's links"),
    (gpu(0) + ALL_INACTIVE + links("25 GB/s"), 3, "after NVML said GPU 0"),
    (V100 + gpu(0) + links("25 GB/s"), 15, "GPU 0 is listed twice (lines 1 and 15)"),   # two runs concatenated
    (gpu(0) + "\t Link 3: 25 GB/s\n", 2, "expected Link 0, found Link 3"),             # `-l 3`: one link only
])
def test_refused_at_the_line(text, line, words):
    with pytest.raises(ParseError) as err:
        parse_nvlink_status(text, "s.txt")
    assert err.value.line == line and words in str(err.value), str(err.value)


@pytest.mark.parametrize("prefix", ["0: ", " 0: ", "node1: ", "node1:", "2024-05-01T10:00:00.123Z ", "[10:00:01] "])
def test_a_prefixed_capture_reads_as_the_plain_output(prefix):
    """Through `srun -l`, pdsh/clush or a CI log every line was refused at line 1; the topo -m reader's prefix
    handling is reused."""
    text = "".join(prefix + ln for ln in (V100 + gpu(2) + ALL_INACTIVE).splitlines(keepends=True))
    assert parse_nvlink_status(text, "cap.txt") == parse_nvlink_status(V100 + gpu(2) + ALL_INACTIVE, "plain.txt")


def test_two_hosts_in_one_capture_are_refused():
    text = "".join("node1: " + ln for ln in V100.splitlines(True)) + "".join("node2: " + ln
                                                                            for ln in V100.splitlines(True))
    with pytest.raises(ParseError) as err:
        parse_nvlink_status(text, "pdsh.txt")
    assert err.value.line == 15 and "several nodes' outputs" in str(err.value)


def _import(tmp_path, topo: str, status: str):
    (tmp_path / "topo.txt").write_text(topo)
    (tmp_path / "nvl.txt").write_text(status)
    return CliRunner().invoke(app, ["topo", "import", "--from", "nvidia-smi", str(tmp_path / "topo.txt"),
                                    "--nvlink", str(tmp_path / "nvl.txt")])


@pytest.mark.parametrize("status, line, words", [
    (gpu(0, "NVIDIA H100 80GB HBM3") + links(*["26.562 GB/s"] * 18), None,
     "lists GPUs 0 but {topo} has GPUs 0, 1"),                                          # `nvlink -s -i 0`
    (V100 + gpu(2) + links("25.781 GB/s"), None, "lists GPUs 0, 1, 2 but {topo} has GPUs 0, 1"),  # another node
    (gpu(0) + links("25.781 GB/s") + gpu(1) + ALL_INACTIVE, 3,
     "GPU 1: NVML says all its links are inactive, but {topo} shows NV6 between GPU1 and GPU0"),
    (gpu(0) + links("<inactive>") + gpu(1) + links("<inactive>"), 1, "GPU 0: no active link is listed"),
])
def test_a_status_file_of_another_node_is_refused(tmp_path, status, line, words):
    """The status file's names and speeds were taken for the topo -m node whatever GPUs it listed."""
    r = _import(tmp_path, TOPO_NV6, status)
    assert isinstance(r.exception, ParseError), r.output
    assert r.exception.line == line and r.exception.source.endswith("nvl.txt")
    assert words.format(topo=str(tmp_path / "topo.txt")) in str(r.exception)


@pytest.mark.parametrize("status", [gpu(0) + ALL_INACTIVE + gpu(1) + ALL_INACTIVE, gpu(0) + gpu(1), V100])
def test_a_matching_status_file_is_imported(tmp_path, status):
    r = _import(tmp_path, TOPO_NV6 if status == V100 else TOPO_SYS, status)
    assert r.exit_code == 0, r.output


# what `nvlink -s` states per GPU: its links' rate, and how many are active ------------------------------------

H200 = "NVIDIA H200"
FULL = ["26.562 GB/s"] * 18
# GPU 0's links 2, 3, 4 and 10 trained down, as an IB health-check script's fixture of a real H200 node shows them
# (test_check_nvlink_speed_consistency): 1.0 and 1.562 GB/s beside 26.562
DEGRADED = FULL[:2] + ["1.0 GB/s", "1.562 GB/s", "1.562 GB/s"] + FULL[5:10] + ["1.562 GB/s"] + FULL[11:]


def topo_nv(n: int, nv: int) -> str:
    """`topo -m` of n GPUs with NV{nv} between every two (n >= 3 and 18 < (n-1)*nv: an NVSwitch board)."""
    head = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\n"
    return head + "".join(f"GPU{i}\t" + "\t".join(" X " if j == i else f"NV{nv}" for j in range(n)) + "\t0-47\t0\n"
                          for i in range(n))


def _nvlinks(t) -> dict[tuple[str, str], tuple[int, float | None]]:
    return {(a, b): (e.links, e.gbytes_per_link) for a, b, e in t.g.edges(data="e") if e.kind == "nvlink"}


def test_a_gpu_whose_links_run_at_different_rates_is_given_no_rate():
    """Every NVLink edge got the fastest rate of any link of any GPU: a degraded GPU read as 18 links at 26.562."""
    from slurmtools.topology.nvsmi import parse_topo_matrix, to_topology

    pair = to_topology(parse_topo_matrix(topo_nv(2, 18), "t.txt"), "n",
                       parse_nvlink_status(gpu(0, H200) + links(*DEGRADED) + gpu(1, H200) + links(*FULL), "s.txt"))
    assert _nvlinks(pair) == {("gpu:n:0", "gpu:n:1"): (18, None)} and "nvlink_speed" in pair.unknown("n")
    # on an NVSwitch board each GPU has its own edge: the others keep the rate their links state
    board = to_topology(parse_topo_matrix(topo_nv(4, 18), "t.txt"), "n", parse_nvlink_status(
        gpu(0, H200) + links(*DEGRADED) + "".join(gpu(i, H200) + links(*FULL) for i in (1, 2, 3)), "s.txt"))
    assert _nvlinks(board) == {("gpu:n:0", "nvswitch:n:0"): (18, None), **{
        (f"gpu:n:{i}", "nvswitch:n:0"): (18, 26.562) for i in (1, 2, 3)}}
    assert "nvlink_speed" in board.unknown("n")
    whole = to_topology(parse_topo_matrix(topo_nv(4, 18), "t.txt"), "n", parse_nvlink_status(
        "".join(gpu(i, H200) + links(*FULL) for i in range(4)), "s.txt"))
    assert {r for _, r in _nvlinks(whole).values()} == {26.562} and "nvlink_speed" not in whole.unknown("n")


@pytest.mark.parametrize("topo, status, line, words", [
    # two links of GPU 3 down on an NVSwitch board (a real H200 node's status with two links made inactive)
    (topo_nv(4, 18), "".join(gpu(i, H200) + links(*(FULL if i != 3 else FULL[:5] + ["<inactive>"] * 2 + FULL[7:]))
                             for i in range(4)), 58, "GPU 3: 16 active NVLinks, but {topo} shows 18 (NV18 to each peer)"),
    (topo_nv(4, 12), "".join(gpu(i, H200) + links(*FULL) for i in range(4)), 1,
     "GPU 0: 18 active NVLinks, but {topo} shows 12 (NV12 to each peer)"),
    (TOPO_NV6, gpu(0) + links(*["25.781 GB/s"] * 6) + gpu(1) + links(*["25.781 GB/s"] * 5, "<inactive>"), 8,
     "GPU 1: 5 active NVLinks, but {topo} shows 6 (NV# to its peers: 6)"),
])
def test_an_active_link_count_the_matrix_does_not_show_is_refused(tmp_path, topo, status, line, words):
    """A GPU's active links were never compared with the matrix: two links down read as all 18 up."""
    r = _import(tmp_path, topo, status)
    assert isinstance(r.exception, ParseError), r.output
    assert r.exception.line == line and r.exception.source.endswith("nvl.txt")
    assert words.format(topo=str(tmp_path / "topo.txt")) in str(r.exception) and "\n" not in str(r.exception)


def test_more_active_links_than_a_mesh_shows_are_imported(tmp_path):
    """A mesh's NV# cover only the GPUs the matrix shows: a job's 2 of a cube mesh's 8, or POWER9's links to its
    CPU, leave active links the matrix cannot show."""
    r = _import(tmp_path, TOPO_NV6.replace("NV6", "NV2"), V100)
    assert r.exit_code == 0, r.output
