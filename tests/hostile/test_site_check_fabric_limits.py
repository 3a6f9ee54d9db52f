"""The fabric file's integers against what Slurm takes for the NodeName values they render into
(slurmtools/topology/sitefile.py has the limits and their source): past them slurm.conf would get a node whose CPU
count wraps (a uint16), whose GPU count slurmd resets to 1024, or a board the topology graph cannot be built for.
Each is refused in one line naming the fabric file and key; the largest accepted values still render."""

from __future__ import annotations

import pytest

from tests.hostile.site_check_support import cli, fabric_site, refusal


CASES = [
    (("gpus = 8", "gpus = 1025"), "gpus", "1025 is more than Slurm's GPUs per node hold (MAX_GRES_BITMAP) (1024)"),
    (("gpus = 8", "gpus = 99999999999999999999"), "gpus",
     "99999999999999999999 is more than Slurm's GPUs per node hold (MAX_GRES_BITMAP) (1024)"),
    (("sockets = 2", "sockets = 65536"), "sockets", "65536 is more than Slurm's CPUs per node hold (uint16) (65533)"),
    (("cores_per_socket = 56", "cores_per_socket = 70000"), "cores_per_socket",
     "70000 is more than Slurm's CPUs per node hold (uint16) (65533)"),
    (("threads_per_core = 1", "threads_per_core = 65534"), "threads_per_core",
     "65534 is more than Slurm's CPUs per node hold (uint16) (65533)"),
    # each fits, the product wraps: 2 x 32768 = 65536 CPUs would be 0 in Slurm's uint16
    (("cores_per_socket = 56", "cores_per_socket = 32768"), "cores_per_socket",
     "2 sockets x 32768 cores x 1 threads = 65536 CPUs is more than Slurm's CPUs per node hold (uint16: 65533)"),
    (("memory_mb = 2000000", "memory_mb = 9223372036854775808"), "memory_mb",
     "9223372036854775808 is more than Slurm's RealMemory holds (below MEM_PER_CPU) (9223372036854775807)"),
    (("pcie_switches = 4", "pcie_switches = 1000000000"), "pcie_switches",
     "1000000000 is more than one board holds (1024)"),
    (("nvlinks_per_gpu = 18", "nvlinks_per_gpu = 1025"), "nvlinks_per_gpu", "1025 is more than one board holds (1024)"),
    (("nvlink = \"nvswitch\"", "nvlink = \"nvswitch\"\nnvswitches = 5000000"), "nvswitches",
     "5000000 is more than one board holds (1024)"),
]


@pytest.mark.parametrize("edit,key,words", CASES, ids=[c[1] + "-" + c[0][1].split()[-1] for c in CASES])
def test_fabric_integer_past_slurm(tmp_path, edit, key, words):
    site, fab = fabric_site(tmp_path, edit)
    line = refusal("site", "check", str(site))
    assert line == f"{fab}: node_types.dgx-h100.{key}: {words}"
    # every command that reads the fabric says the same
    assert refusal("admin", "render", "slurm-conf", "--slurm-version", "25.11", "--site", str(site)) == line


def test_the_largest_values_render(tmp_path):
    site, _ = fabric_site(tmp_path, ("gpus = 8", "gpus = 1024"), ("cores_per_socket = 56", "cores_per_socket = 32766"),
                          ("memory_mb = 2000000", "memory_mb = 9223372036854775807"),
                          ("pcie_switches = 4", "pcie_switches = 1024"))
    r = cli("site", "check", str(site))
    assert r.code == 0, r.err
    r = cli("admin", "render", "slurm-conf", "--slurm-version", "25.11", "--site", str(site))
    assert r.code == 0, r.err
    assert ("Sockets=2 CoresPerSocket=32766 ThreadsPerCore=1 RealMemory=9223372036854775807 Gres=gpu:h100:1024"
            in r.out), r.out[:2000]
