"""The site against its fabric: partitions name only hosts the fabric has, GPU partitions only hosts with GPUs.
Checked when the site is loaded, so `plan` and every renderer refuse what `site check` refuses."""

from __future__ import annotations

import pytest

from tests.hostile.site_check_support import BASE, FABRIC, cli, edited, refusal

PLAN = ("--gpus", "8", "--user", "alice", "--slurm-version", "25.11", "--", "python", "x.py")


def test_partition_with_hosts_the_fabric_lacks(tmp_path):
    p = edited(tmp_path, 'nodes = "gpu[01-16]"', 'nodes = "gpu[01-20]"')
    line = refusal("site", "check", str(p))
    assert line == (f"{p}: partitions.gpu.nodes: gpu17, gpu18, gpu19, gpu20 are not hosts of fabric example "
                    f"({FABRIC}: gpu[01-16])")
    assert refusal("admin", "render", "slurm-conf", "--slurm-version", "25.11", "--site", str(p)) == line
    assert refusal("plan", "--site", str(p), *PLAN) == line


def _fabric_without_gpus(tmp_path, leaf4_only: bool):
    text = FABRIC.read_text()
    cpu = "[node_types.cpu]\ngpus = 0\ncores_per_socket = 64\nmemory_mb = 500000\n\n"
    if leaf4_only:
        text = text.replace("[[leaves]]", cpu + "[[leaves]]", 1)
        text = text.replace('hosts = "gpu[13-16]"\nnode_type = "dgx-h100"', 'hosts = "gpu[13-16]"\nnode_type = "cpu"')
    else:
        text = (text.replace('gpu_type = "h100"\ngpus = 8', "gpus = 0").replace('nvlink = "nvswitch"', 'nvlink = "none"')
                .replace("nvlinks_per_gpu = 18\n", ""))
    fab = tmp_path / "fabric.toml"
    fab.write_text(text)
    return edited(tmp_path, f'fabric = "{FABRIC}"', f'fabric = "{fab}"', text=BASE)


@pytest.mark.parametrize("leaf4_only,host,nt", [(False, "gpu01", "dgx-h100"), (True, "gpu13", "cpu")])
def test_gpu_partition_over_hosts_without_gpus(tmp_path, leaf4_only, host, nt):
    p = _fabric_without_gpus(tmp_path, leaf4_only)
    line = refusal("site", "check", str(p))
    assert line == (f"{p}: partitions.gpu.nodes: {host} has no GPUs (node type {nt}); put CPU-only hosts in a "
                    "partition with gpu_types = []")
    assert refusal("plan", "--site", str(p), *PLAN) == line
    assert refusal("admin", "render", "gres-conf", "--site", str(p)) == line


def test_a_fabric_that_does_not_exist(tmp_path):
    p = edited(tmp_path, f'fabric = "{FABRIC}"', 'fabric = "nowhere/fabric.toml"')
    assert refusal("site", "check", str(p)) == (f"{p}: site.fabric: {tmp_path / 'nowhere/fabric.toml'}: no such file "
                                                "(a relative path is from the site file's folder)")


def test_the_cpu_test_site_still_passes():
    from tests.conftest import REPO

    r = cli("site", "check", str(REPO / "tests/data/sites/cpu/site.toml"))
    assert r.code == 0, r.err
    assert "partition gpucpu: gpu[01-04]" in r.out


def test_an_account_with_no_tiers(tmp_path):
    """Found by the site fuzz test: `tiers = []` passed `site check` and crashed `admin render accounts`."""
    p = edited(tmp_path, 'tiers = ["standard", "scavenger"]', "tiers = []")
    assert refusal("site", "check", str(p)) == (f"{p}: accounts.students.tiers: an empty list: name at least one "
                                                "tier (or leave the key out for every tier)")
