"""Issue 11: never a silently wrong graph from a real machine's capture.

One test per defect class, each on a real capture of that class (sources in tests/data/SOURCES.md). Each of them
failed before the fix: the old graph gave GH200 GPUs no CPUs, ranked NICs by counting edges, left SYS-only NICs
attached to nothing, wrote `Links=-1,0,...` for GPUs whose NVLinks a file does not state, never wrote gres
`Cores=`/`Type=` from a capture, assumed 25 GB/s per NVLink, and called every NIC InfiniBand.
"""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.errors import ConfigError
from slurmtools.topology import queries as q
from slurmtools.topology.nccl_xml import parse_nccl_xml
from slurmtools.topology.nccl_xml import to_topology as xml_topology
from slurmtools.topology.nvsmi import parse_nvlink_status, parse_topo_matrix
from slurmtools.topology.nvsmi import to_topology as smi_topology
from slurmtools.topology.graph import Topology
from slurmtools.topology.render_slurm import gres_lines_for_host, render_gres_conf

from ._data import REPO, data_path, read_data

runner = CliRunner()

GH200 = "crickett-hpe-hpc-ai-envs_cray-ex-gh200x4_topo-m.txt"
GB200 = "unknown-repo_gb200x4-presto-gcn_8nic-all-SYS_topo-m.txt"
NPS4 = "gpu-compress-decompress_dgx-a100x8_10nic_nps4.txt"
JTKJ = "unknown-repo_hgx-a100x8_4nic_jtkj003.txt"
SIMAI = "simai_topo_8A100_4CX6.xml"
RTP = "rtp-llm_8gpu-0x26ba_bond-nic-per-switch_ib-nic-off-cpu_nccl-topo.xml"
P4D = "aws-ofi-nccl_p4d-24xl-topo.xml"
P5 = "aws-ofi-nccl_p5.48xl-topo.xml"
RWKV = "rwkvinllama_rtx4090x2-2numa_cx4-2port-off-cpu_nccl-topo.xml"
V100 = "lukolszewski-llamacpp_vast-v100x8-sxm2-hybridcube_1nic_topo-m_ansi.txt"
V100_LINKS = "lukolszewski-llamacpp_vast-v100x8-sxm2_nvlink-s.txt"
B300 = "xe9780-perftest_dell-xe9780-b300x7_topo-m.txt"
B300_LINKS = "xe9780-perftest_dell-xe9780-b300x7_nvlink-status.txt"
ROCE = "unknown-repo_hgx-a100x4-80gb_roce-nic-rocep49s0.txt"
BY_INDEX = "/dev/nvidia{index}"   # the admin's statement that device files follow the index (no source states it)


def smi(name: str, nvlink: str | None = None, **kw):
    status = parse_nvlink_status(read_data(nvlink)) if nvlink else ()
    return smi_topology(parse_topo_matrix(read_data(name), name), "n", status, **kw)


def xml(name: str, **kw):
    return xml_topology(parse_nccl_xml(read_data(name), name), "n", **kw)


# 1. multi-value NUMA affinity -----------------------------------------------------------------------------

def test_grace_hopper_gpus_keep_their_cpus_with_multi_value_numa_affinity():
    t = smi(GH200)
    assert q.local_cpus(t, "n")[0] == tuple(range(0, 72))
    assert q.local_cpus(t, "n")[3] == tuple(range(216, 288))
    assert q.gpu_numa(t, "n")[0] == [0, 5, 6, 7, 8, 9, 10, 11]      # as the capture lists them
    assert "numa_ids" in t.unknown("n")                             # which of them holds the CPUs: not said
    gb = smi(GB200)
    assert q.local_cpus(gb, "n")[1] == tuple(range(0, 72)) and q.local_cpus(gb, "n")[2] == tuple(range(72, 144))
    # Grace has one thread per core, but the capture does not say so: Cores= only when the admin states it
    assert "Cores=" not in gres_lines_for_host(t, "n", BY_INDEX)[0]
    t1 = smi(GH200, threads_per_core=1)
    assert "Cores=72-143" in gres_lines_for_host(t1, "n", BY_INDEX)[1]


# 2. nearest NIC by path class, not by edge count ------------------------------------------------------------

@pytest.mark.parametrize("name, gpu, nearest, path", [
    (SIMAI, 0, ["mlx5_bond_1"], "PXB"),   # mlx5_bond_0 hangs off the CPU: the same edge count, farther
    (RTP, 0, ["mlx5_bond_0"], "PXB"),     # mlx5_2..5 hang off the CPU
    (RTP, 5, ["mlx5_bond_5"], "PXB"),
    (RWKV, 0, ["mlx5_0", "mlx5_1"], "PHB"),
])
def test_nearest_nic_ranks_by_nccl_path_class(name, gpu, nearest, path):
    t = xml(name)
    near = q.nearest_nic_paths(t, "n")[gpu]
    assert [p.nic for p in near] == nearest and {p.path for p in near} == {path}


def test_the_graph_agrees_with_the_xml_readers_own_answer():
    for name in (SIMAI, RTP, "panlichen-nccl-tests_rtx3090x8-plx_1nic_nccl-topo.xml", P4D, RWKV):
        x = parse_nccl_xml(read_data(name), name)
        near = q.nearest_nics(xml(name), "n")
        for g in x.gpus:
            if x.nearest_nics(g.index):
                assert sorted(near[g.index]) == sorted(x.nearest_nics(g.index)), (name, g.index)


# 3. NICs only across the socket link -----------------------------------------------------------------------

def test_a_gpu_with_only_far_nics_gets_them_marked_far():
    t = smi(GB200)
    for g, paths in q.nearest_nic_paths(t, "n").items():
        assert [p.nic for p in paths] == [f"mlx5_{i}" for i in range(8)] and all(p.far for p in paths)
    nps4 = smi(NPS4)   # mlx5_8/9: SYS to every GPU, PIX to each other
    assert all(p.path == "SYS" for ps in q.nic_paths(nps4, "n").values() for p in ps if p.nic in ("mlx5_8",
                                                                                                   "mlx5_9"))
    assert q.path_class(nps4, "nic:n:mlx5_8", "nic:n:mlx5_9") == "PIX"
    r = runner.invoke(app, ["topo", "lint", str(data_path(GB200))])
    assert r.exit_code == 1 and "GPU 0: every NIC is across the socket link" in r.output
    assert "not stated by the source, so not checked: host_name, nvlink_speed, gpu_model" in r.output


# 4. unknown is not none -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [P4D, P5, "azhpc-images_ndv5-topo.xml"])
def test_gpus_without_stated_nvlinks_are_unknown_and_gres_refuses(name, tmp_path):
    t = xml(name)
    assert "nvlink" in t.unknown("n")
    with pytest.raises(ConfigError, match="NVLink connects is unknown.*--assume-no-nvlink"):
        render_gres_conf(t)
    r = runner.invoke(app, ["topo", "import", "--from", "nccl-xml", str(data_path(name)), "--out",
                            str(tmp_path / "g.json")])
    assert r.exit_code == 0 and "NVLink islands: unknown" in r.output and "unknown: nvlink" in r.output
    r = runner.invoke(app, ["topo", "export", str(tmp_path / "g.json"), "-f", "gres.conf"])
    assert isinstance(r.exception, ConfigError) and "Links=-1" not in r.output
    assert "which GPUs NVLink connects is unknown" in str(r.exception) and "\n" not in str(r.exception)
    # NCCL XML states no device minor either (its GPUs are the run's CUDA ordinals): File= is not written ...
    r = runner.invoke(app, ["topo", "export", str(tmp_path / "g.json"), "-f", "gres.conf", "--assume-no-nvlink"])
    assert isinstance(r.exception, ConfigError) and "File=" not in r.output
    host = Topology.from_json((tmp_path / "g.json").read_text()).host_names()[0]
    assert str(r.exception).endswith(
        f": host {host}: the GPUs' device files are unknown (the source states no device minor; the index is not "
        "the minor on every machine), so gres.conf File= cannot be written; capture the node with `slurmtools "
        "topo capture`, or pass --gres-files /dev/nvidia{index} if its device files follow the GPU index")
    assert "\n" not in str(r.exception)
    # ... until the admin states that the device files follow the index
    r = runner.invoke(app, ["topo", "export", str(tmp_path / "g.json"), "-f", "gres.conf", "--assume-no-nvlink",
                            "--gres-files", BY_INDEX])
    assert r.exit_code == 0 and "File=/dev/nvidia7 " in r.output and "Links=0,0,0,0,0,0,0,-1" in r.output
    # a dump of a probed PCIe-only node states its GPUs have no NVLink
    assert "nvlink" not in xml(RWKV).unknown("n")


def test_slots_without_devices_are_reported_unknown():
    r = runner.invoke(app, ["topo", "import", "--from", "nccl-xml", str(data_path("aws-ofi-nccl_g5.48xl-topo.xml")),
                            "--strict"])
    assert r.exit_code == 3 and "devices" in r.output


# 5. gres.conf Cores= and Type= ------------------------------------------------------------------------------

def test_gres_gets_cores_from_the_sibling_layout_and_type_from_the_model():
    lines = gres_lines_for_host(smi(NPS4, gpu_type="a100"), "n", BY_INDEX)
    assert lines[0].startswith("Name=gpu Type=a100 File=/dev/nvidia0 Cores=48-63 Links=")
    assert "Cores=16-31" in lines[2]
    t = smi(V100, V100_LINKS)   # the model comes from `nvidia-smi nvlink -s`
    assert gres_lines_for_host(t, "n", BY_INDEX)[0].startswith("Name=gpu Type=tesla_v100-sxm2-32gb "
                                                               "File=/dev/nvidia0 Cores=0-19 ")
    assert "Type=" not in gres_lines_for_host(xml(SIMAI), "n", BY_INDEX)[0] and "Cores=0-31" in gres_lines_for_host(
        xml(SIMAI), "n", BY_INDEX)[0]
    r = runner.invoke(app, ["topo", "import", "--from", "nvidia-smi", str(data_path(JTKJ)), "--gpu-type", "a100",
                            "--json"])
    assert r.exit_code == 0


# 6. NVLink speed by generation ------------------------------------------------------------------------------

def test_nvlink_speed_comes_from_the_capture_or_the_model_never_a_default():
    assert smi(V100, V100_LINKS).edge("gpu:n:0", "gpu:n:3").gbytes_per_link == 25.781
    b300 = smi(B300, B300_LINKS)
    assert {e.gbytes_per_link for *_, e in b300.g.edges(data="e") if e.kind == "nvlink"} == {53.125}
    assert {e.gbytes_per_link for *_, e in smi(NPS4, gpu_type="a100").g.edges(data="e") if e.kind == "nvlink"} \
        == {25.0}
    assert {e.gbytes_per_link for *_, e in xml(SIMAI).g.edges(data="e") if e.kind == "nvlink"} == {25.0}  # sm=80
    t = smi(B300)
    assert {e.gbytes for *_, e in t.g.edges(data="e") if e.kind == "nvlink"} == {None}
    assert "nvlink_speed" in t.unknown("n")


def test_a_site_nvswitch_type_of_unknown_speed_is_refused(tmp_path):
    from slurmtools.topology.sitefile import load_fabric

    src = next((REPO / "topology" / "example").glob("*.toml"))
    body = src.read_text()
    assert 'gpu_type = "h100"' in body
    bad = tmp_path / "fabric.toml"
    bad.write_text(body.replace('gpu_type = "h100"', 'gpu_type = "zz9"', 1))
    with pytest.raises(ConfigError, match=r"nvlink_gbytes_per_link: NVLink speed of GPU type 'zz9' is not known"):
        load_fabric(bad)
    stated = tmp_path / "stated.toml"
    stated.write_text(body.replace('gpu_type = "h100"', 'gpu_type = "zz9"\nnvlink_gbytes_per_link = 50', 1))
    nt = next(iter(load_fabric(stated).node_types.values()))
    assert nt.nvlink_gbytes_per_link == 50.0


# 8. Ethernet vs InfiniBand -------------------------------------------------------------------------------------

def test_roce_and_ethernet_nics_are_not_recorded_as_infiniband():
    layers = {n.name: n.link_layer for n in xml(RTP).nics("n")}
    assert layers["mlx5_bond_0"] == "ethernet" and layers["mlx5_2"] == "ib"   # PCI class 0x0200 / 0x0207
    assert {n.link_layer for n in xml(SIMAI).nics("n")} == {"ethernet"}
    assert [n.link_layer for n in smi(ROCE).nics("n")] == ["ethernet"]       # rocep49s0
    assert [n.link_layer for n in smi(JTKJ).nics("n")] == [None] * 4         # mlx5_N: not said
    assert "nic_link_layer" in smi(JTKJ).unknown("n")


# import summary and --strict -----------------------------------------------------------------------------------

def test_import_prints_a_screen_to_check_against_the_capture():
    r = runner.invoke(app, ["topo", "import", "--from", "nvidia-smi", str(data_path(JTKJ))])
    assert r.exit_code == 0
    assert re.search(r"GPU0: nearest NIC mlx5_0, mlx5_1 \(PXB: .*\), CPUs 0-31,64-95, cores 0-31, NUMA 0", r.output)
    assert re.search(r"GPU4: nearest NIC mlx5_0, mlx5_1, mlx5_2, mlx5_3 \(SYS: across the socket link", r.output)
    assert "unknown: gpu_model" in r.output and "NVLink islands: [[0, 1, 2, 3, 4, 5, 6, 7]]" in r.output


def test_strict_turns_every_unknown_into_an_error():
    r = runner.invoke(app, ["topo", "import", "--from", "nvidia-smi", str(data_path(JTKJ)), "--strict"])
    assert r.exit_code == 3 and "gpu_model" in r.output and "nvlink_speed" in r.output
    assert len(r.output.strip().splitlines()) == 1
    r = runner.invoke(app, ["topo", "import", "--from", "nvidia-smi", str(data_path(B300)), "--nvlink",
                            str(data_path(B300_LINKS)), "--threads-per-core", "1", "--strict"])
    assert r.exit_code == 3 and r.output.strip().endswith("the input leaves unknown: host_name (see `topo import` "
                                                          "without --strict for what each means)"), r.output
    r = runner.invoke(app, ["topo", "import", "--from", "nvidia-smi", str(data_path(B300)), "--nvlink",
                            str(data_path(B300_LINKS)), "--threads-per-core", "1", "--host", "b300n01", "--strict"])
    assert r.exit_code == 0, r.output


def test_the_host_and_gpu_type_an_admin_states_are_one_slurm_word_each():
    """They become a NodeName and a gres Type: a blank or a `!` would split or break the line Slurm reads."""
    import subprocess
    import sys

    for opt, value in (("--host", "bad host!"), ("--host", ""), ("--gpu-type", "h 100")):
        r = subprocess.run([sys.executable, "-m", "slurmtools", "topo", "import", "--from", "nvidia-smi",
                            str(data_path(B300)), opt, value], capture_output=True, text=True)
        assert r.returncode == 2 and r.stdout == "", (opt, value, r.stderr)
        assert r.stderr == (f"slurmtools: error: {opt}: expected a name of letters, digits, '_', '.' or '-' (what "
                            f"Slurm's config takes as one word); got {value!r}\n")


def test_strict_names_a_nic_whose_place_is_unknown(tmp_path):
    # the NCCL dump of Azure NC A100 v4: eth0 without a PCI device under numaid 0
    r = runner.invoke(app, ["topo", "import", "--from", "nccl-xml", str(data_path("azhpc-images_ncv4-topo.xml")),
                            "--strict"])
    assert r.exit_code == 3 and "nic_locality" in r.output


# a capture taken inside a Slurm job (rapidsai/dask-cuda issue 1381: `srun --gpus=A100_80GB:8 -c32 ... nvidia-smi
# topo -m`, trimmed to four GPUs, the two NUMA nodes SYS apart): nvidia-smi lists only the job's cpuset, so GPUs of
# the other NUMA node show no CPU, and those it shows are 32 of NUMA 0's CPUs, not its whole set
CPUSET_VIEW = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV12\tSYS\tSYS\t0-15,56-71\t0\t\tN/A
GPU1\tNV12\t X \tSYS\tSYS\t0-15,56-71\t0\t\tN/A
GPU2\tSYS\tSYS\t X \tNV12\t\t1\t\tN/A
GPU3\tSYS\tSYS\tNV12\t X \t\t1\t\tN/A
"""


def test_a_capture_inside_a_cpuset_states_no_gpus_local_cpus():
    """The GPUs that showed CPUs got them as their local CPUs, and gres.conf Cores=0-15 from them (NUMA 0 has 28
    cores there). A GPU near no listed CPU, or two NUMA nodes listing the same CPUs (a K80 capture in a 4-CPU job:
    0-3 on both sockets), is the tell-tale: local CPUs and cores unknown, no Cores= written."""
    t = smi_topology(parse_topo_matrix(CPUSET_VIEW, "cpuset.txt"), "n")
    assert {"local_cpus", "cores"} <= set(t.unknown("n"))
    assert not any("Cores=" in ln for ln in gres_lines_for_host(t, "n", "/dev/nvidia{index}"))
    both = CPUSET_VIEW.replace("\t\t1\t\tN/A", "\t0-3\t1\t\tN/A").replace("0-15,56-71", "0-3")
    t = smi_topology(parse_topo_matrix(both, "k80.txt"), "n", threads_per_core=1)
    assert {"local_cpus", "cores"} <= set(t.unknown("n"))
    assert not any("Cores=" in ln for ln in gres_lines_for_host(t, "n", "/dev/nvidia{index}"))
