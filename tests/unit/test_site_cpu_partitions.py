"""CPU partitions in the site file (`gpu_types = []`, `max_cpus_per_node`), CPU-only node types in the fabric
(`gpus = 0`), the checks between the two, and what Slurm gets from them (slurm.conf, gres.conf, topology.conf)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from slurmtools.errors import ConfigError
from slurmtools.render.slurm_conf import render_gres_conf, render_slurm_conf, render_topology_conf
from slurmtools.resources import example_site
from slurmtools.site import load_site
from slurmtools.site.load import check_hosts
from slurmtools.slurm.releases import release_for
from slurmtools.topology.sitefile import load_fabric

CPU_DIR = Path(__file__).resolve().parent.parent / "data" / "sites" / "cpu"


@pytest.fixture
def cpu_copy(tmp_path):
    for f in ("site.toml", "fabric.toml"):
        shutil.copy(CPU_DIR / f, tmp_path / f)
    return tmp_path


def edit(path: Path, old: str, new: str) -> Path:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    return path


def test_gpu_types_absent_means_every_type_and_empty_means_cpu():
    assert load_site(example_site()).partitions["gpu"].cpu_only is False
    s = load_site(CPU_DIR / "site.toml")
    assert [p.name for p in s.cpu_partitions] == ["cpu", "gpucpu"]
    assert s.partitions["cpu"].gpu_types == () and s.partitions["cpu"].max_cpus_per_node is None
    assert s.partitions["gpucpu"].max_cpus_per_node == 32 and s.partitions["gpu"].gpu_types == ("h100",)
    assert load_site(example_site()).cpu_partitions == []


def test_max_cpus_per_node_must_be_positive(cpu_copy):
    edit(cpu_copy / "site.toml", "max_cpus_per_node = 32", "max_cpus_per_node = 0")
    with pytest.raises(ConfigError, match=r"site.toml: partitions.gpucpu.max_cpus_per_node: "):
        load_site(cpu_copy / "site.toml")


def test_cpu_only_node_type():
    nt = load_fabric(CPU_DIR / "fabric.toml").node_types["epyc"]
    assert (nt.gpus, nt.gpu_type, nt.nvlink, nt.cpus) == (0, "", "none", 128)
    assert nt.nearest_nics(0) == ()


@pytest.mark.parametrize("old,new,key", [
    ('[node_types.epyc]\ngpus = 0', '[node_types.epyc]\ngpus = 0\ngpu_type = "h100"', "node_types.epyc.gpu_type"),
    ('[node_types.epyc]\ngpus = 0', '[node_types.epyc]\ngpus = 0\nnvlink = "nvswitch"', "node_types.epyc.nvlink"),
    ('[node_types.epyc]\ngpus = 0', '[node_types.epyc]\ngpus = 0\nnvlinks_per_gpu = 4',
     "node_types.epyc.nvlinks_per_gpu"),
    ('[node_types.epyc]\ngpus = 0', '[node_types.epyc]\ngpus = 2', "node_types.epyc.gpu_type"),
])
def test_bad_node_types_name_the_key(cpu_copy, old, new, key):
    edit(cpu_copy / "fabric.toml", old, new)
    with pytest.raises(ConfigError) as exc:
        load_fabric(cpu_copy / "fabric.toml")
    assert f"fabric.toml: {key}: " in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("old,new,key,words", [
    ("max_cpus_per_node = 32\n", "", "partitions.gpucpu.max_cpus_per_node", "holds GPU hosts (gpu01: 8 GPUs)"),
    ("max_cpus_per_node = 32", "max_cpus_per_node = 112", "partitions.gpucpu.max_cpus_per_node",
     "112 leaves no CPU of GPU host gpu01"),
    ('nodes = "gpu[01-04]"\ndefault = true', 'nodes = "gpu[01-04],cpu01"\ndefault = true', "partitions.gpu.nodes",
     "cpu01 has no GPUs (node type epyc)"),
])
def test_partitions_checked_against_the_fabric(cpu_copy, old, new, key, words):
    with pytest.raises(ConfigError) as exc:  # loading the site checks it against its fabric, for every command
        load_site(edit(cpu_copy / "site.toml", old, new))
    assert str(exc.value).startswith(f"{cpu_copy / 'site.toml'}: {key}: ") and words in str(exc.value)


def test_rendered_slurm_files_for_the_cpu_site():
    site = load_site(CPU_DIR / "site.toml")
    fabric = load_fabric(site.fabric_path)
    check_hosts(site, fabric)
    conf = render_slurm_conf(site, fabric, release_for("22.05")).splitlines()
    assert "NodeName=cpu[01-02] Sockets=2 CoresPerSocket=64 ThreadsPerCore=1 RealMemory=512000 Feature=cpu,leaf2 " \
           "State=UNKNOWN" in conf
    assert any(ln.startswith("NodeName=gpu[01-04] ") and "Gres=gpu:h100:8" in ln for ln in conf)
    assert [ln for ln in conf if ln.startswith("PartitionName=")] == [
        "PartitionName=gpu Nodes=gpu[01-04] Default=YES MaxTime=2-00:00:00 State=UP AllowQos=production,standard",
        "PartitionName=cpu Nodes=cpu[01-02] Default=NO MaxTime=1-00:00:00 State=UP AllowQos=production,standard",
        "PartitionName=gpucpu Nodes=gpu[01-04] Default=NO MaxTime=04:00:00 State=UP MaxCPUsPerNode=32 "
        "AllowQos=production,standard"]
    gres = render_gres_conf(fabric)
    assert "cpu0" not in gres and gres.count("NodeName=gpu[01-04] Name=gpu Type=h100") == 8
    topo = render_topology_conf(fabric).splitlines()
    assert "SwitchName=leaf2 Nodes=cpu[01-02]" in topo and "SwitchName=spine1 Switches=leaf[1-2]" in topo


def test_example_site_renders_as_before():
    site = load_site(example_site())
    conf = render_slurm_conf(site, load_fabric(site.fabric_path), release_for("22.05"))
    assert "MaxCPUsPerNode" not in conf
