"""gres.conf Links= in Slurm's numbering of a node's GPUs: gres.conf(5) numbers them by PCI bus ID (NVML's
enumeration), and slurmd's AutoDetect compares a file's Links with its own string, ignoring the GPU where they
differ. A source that numbers GPUs otherwise (an NCCL dump: CUDA ordinals, fastest first) wrote Links= in its own
index order, and `topo lint --gres` passed such a file."""

from __future__ import annotations

from slurmtools.topology import queries as q
from slurmtools.topology.checks import check_gres
from slurmtools.topology.graph import Topology
from slurmtools.topology.render_slurm import render_gres_conf


def three_gpus(buses=("0000:87:00.0", "0000:07:00.0", "0000:47:00.0"), minors=(2, 0, 1)) -> Topology:
    """GPU 0 (bus 87) has 2 NVLinks to GPU 1 (bus 07) and 4 to GPU 2 (bus 47); 1 and 2 none."""
    t = Topology("built")
    h = "n1"
    t.add_host(h)
    cpu = t.add_cpu(h, 0, 0, cpus=range(16), cores=range(16))
    v = [t.add_gpu(h, i, "NVIDIA A100", pci_bus_id=b, parent=cpu, minor=m)
         for i, (b, m) in enumerate(zip(buses, minors))]
    t.link_nvlink(v[0], v[1], 2)
    t.link_nvlink(v[0], v[2], 4)
    return t


def test_links_follow_pci_bus_order_not_the_sources_index():
    t = three_gpus()
    assert [g.index for g in q.slurm_gpu_order(t, "n1")] == [1, 2, 0]
    assert q.slurm_links_rows(t, "n1") == {1: [-1, 0, 2], 2: [0, -1, 4], 0: [2, 4, -1]}
    conf = render_gres_conf(t, autodetect=None)
    rows = {line.split("File=")[1].split()[0]: line.split("Links=")[1]
            for line in conf.splitlines() if "Links=" in line}
    assert rows == {"/dev/nvidia2": "2,4,-1", "/dev/nvidia0": "-1,0,2", "/dev/nvidia1": "0,-1,4"}
    assert check_gres(t, conf) == []


def test_lint_reads_a_file_in_index_order_as_wrong_where_the_bus_says_otherwise():
    t = three_gpus()
    written_by_index = ("NodeName=n1 Name=gpu File=/dev/nvidia2 Links=-1,2,4\n"
                        "NodeName=n1 Name=gpu File=/dev/nvidia0 Links=2,-1,0\n"
                        "NodeName=n1 Name=gpu File=/dev/nvidia1 Links=4,0,-1\n")
    found = check_gres(t, written_by_index)
    assert [f.code for f in found] == ["gres-links"] * 3
    assert "GPU 0 (/dev/nvidia2) Links=-1,2,4, the capture has 2,4,-1" in found[0].message


def test_without_a_bus_id_for_every_gpu_the_index_is_the_order():
    """`nvidia-smi topo -m` states no bus ids; its GPU numbers are NVML's enumeration, Slurm's order."""
    t = three_gpus(buses=("0000:87:00.0", None, "0000:47:00.0"))
    assert [g.index for g in q.slurm_gpu_order(t, "n1")] == [0, 1, 2]
    assert q.slurm_links_rows(t, "n1")[0] == [-1, 2, 4]
