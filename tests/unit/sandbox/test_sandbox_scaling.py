"""The sandbox's scaled model (slurmtools.sandbox.scaling): the written documents load back as a site and fabric
with the same GPUs, partitions never mixed inside an emulated node, limits scaled, jobs refused where production
would refuse them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from slurmtools.errors import ConfigError
from slurmtools.hostlist import expand
from slurmtools.sandbox import scaling, sitecopy
from slurmtools.sandbox.shape import capacity
from slurmtools.sandbox.trace import TraceJob
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric

REPO = Path(__file__).resolve().parents[3]


def _site(tmp_path: Path, extra_partitions: dict | None = None):
    doc = tomllib.loads((REPO / "site_configs/example/site.toml").read_text())
    doc["site"]["fabric"] = str(REPO / "topology/example/fabric.toml")
    doc["partitions"].update(extra_partitions or {})
    p = tmp_path / "site.toml"
    p.write_text(sitecopy.dumps(doc))
    site = load_site(p)
    return site, doc, load_fabric(site.fabric_path)


def _write(model: scaling.SiteScale, d: Path):
    d.mkdir()
    (d / "site.toml").write_text(sitecopy.dumps(model.site_doc))
    (d / "fabric.toml").write_text(sitecopy.dumps(model.fabric_doc))
    site = load_site(d / "site.toml")
    return site, load_fabric(site.fabric_path)


def _job(**kw) -> TraceJob:
    base = dict(key="7", submit=0.0, user="alice", account="vision", tier="standard", partition="gpu", nodes=1,
                gpus=1, gpu_type="h100", cpus=None, run_s=60.0, limit_s=3600.0)
    base.update(kw)
    return TraceJob(**base)


def test_factor_4_merges_each_leaf_into_one_node_with_the_same_gpus(tmp_path):
    site, doc, fabric = _site(tmp_path)
    model = scaling.scale_site(site, doc, fabric, 4)
    s2, f2 = _write(model, tmp_path / "m")
    assert model.emulated_nodes == 4 and model.real_nodes == 16
    assert capacity(s2) == (4, capacity(site)[1])
    assert expand(s2.partitions["gpu"].nodes) == ["gpu01", "gpu05", "gpu09", "gpu13"]
    nt = f2.node_type_of("gpu05")
    assert (nt.gpus, nt.cpus, nt.memory_mb) == (32, 4 * 112, 4 * 2000000)
    assert model.groups["gpu05"] == ("gpu05", "gpu06", "gpu07", "gpu08")
    assert f2.leaf_of("gpu09").name == "leaf3"
    assert s2.tiers["production"].max_nodes == 2 and s2.tiers["standard"].max_nodes == 1
    assert "1:4" in model.statement and "4 emulated nodes for 16 real" in model.statement
    assert doc["tiers"]["production"]["max_nodes"] == 8   # the caller's document is left alone


def test_a_leaf_not_divisible_keeps_its_rest_under_the_same_spine(tmp_path):
    site, doc, fabric = _site(tmp_path)
    model = scaling.scale_site(site, doc, fabric, 3)
    s2, f2 = _write(model, tmp_path / "m")
    assert model.emulated_nodes == 8
    assert capacity(s2)[1] == 128
    rest = f2.leaf_of("gpu04")
    assert rest.name == "leaf1-rest1" and f2.node_type_of("gpu04").gpus == 8
    assert f2.node_type_of("gpu01").gpus == 24
    assert "leaf1-rest1" in f2.spines["spine1"].leaves
    assert "(4 stand for fewer: a group never spans leaves" in model.statement


def test_nodes_of_different_partitions_are_never_merged(tmp_path):
    site, doc, fabric = _site(tmp_path, {"short": {"nodes": "gpu[01-06]", "max_time": "1h",
                                                   "gpu_types": ["h100"]}})
    model = scaling.scale_site(site, doc, fabric, 4)
    s2, _ = _write(model, tmp_path / "m")
    short = set(expand(site.partitions["short"].nodes))
    for hosts in model.groups.values():
        assert len({h in short for h in hosts}) == 1
    real_short = sorted(h for e in expand(s2.partitions["short"].nodes) for h in model.groups[e])
    assert real_short == sorted(short)
    assert model.emulated_nodes == 5     # leaf2 splits into gpu[05-06] and gpu[07-08]


def test_factors_slurm_cannot_take_are_refused_in_one_line(tmp_path):
    site, doc, fabric = _site(tmp_path)
    assert scaling.largest_factor(site, fabric) == 128      # 1024 GPUs per node / 8
    with pytest.raises(ConfigError, match=r"scale factor 129: node type dgx-h100 x 129 is 1032 GPUs.*largest "
                                          r"factor for this site is 128"):
        scaling.scale_site(site, doc, fabric, 129)
    for bad in (0, -2, 2.5, True):
        with pytest.raises(ConfigError, match="expected a whole number"):
            scaling.scale_site(site, doc, fabric, bad)


def test_choose_factor_is_the_smallest_that_fits(tmp_path):
    site, doc, fabric = _site(tmp_path)
    assert scaling.choose_factor(site, fabric, 16) == 1
    assert scaling.choose_factor(site, fabric, 8) == 2
    assert scaling.choose_factor(site, fabric, 5) == 4     # 1:3 leaves 8 nodes (3 + 1 per leaf)
    with pytest.raises(ConfigError, match=r"4 emulated nodes at the largest factor .* more than one sandbox "
                                          r"machine runs \(3\)"):
        scaling.choose_factor(site, fabric, 3)


def test_jobs_keep_their_gpus_and_divide_their_nodes(tmp_path):
    site, doc, fabric = _site(tmp_path)
    model = scaling.scale_site(site, doc, fabric, 4)
    j = scaling.scale_job(_job(nodes=8, gpus=64, cpus=64, tier="production"), model)
    assert (j.nodes, j.gpus, j.cpus, j.gpus_per_node) == (2, 64, 64, 32)
    assert scaling.scale_job(_job(nodes=3, gpus=24), model).nodes == 1
    one = _job()
    assert scaling.scale_job(one, model) == one
    same = scaling.scale_site(site, doc, fabric, 1)
    assert scaling.scale_job(_job(nodes=4, gpus=32), same).nodes == 4
    # a job that held whole real nodes (--exclusive in history) holds their GPUs in the model, not whole emulated
    # nodes (4 real ones each: it took 32 GPUs for the 8 it held)
    ex = scaling.scale_job(_job(nodes=1, gpus=2, exclusive=True), model)
    assert (ex.nodes, ex.gpus, ex.exclusive) == (1, 8, False)
    assert scaling.scale_job(_job(nodes=1, gpus=2, exclusive=True), same).exclusive   # 1:1 keeps --exclusive


def test_jobs_production_would_refuse_are_refused_before_the_model_accepts_them(tmp_path):
    site, doc, fabric = _site(tmp_path)
    model = scaling.scale_site(site, doc, fabric, 4)
    with pytest.raises(scaling.ScaleRefused, match=r"^job 7: 5 nodes is more than tier standard's max_nodes \(4\)"):
        scaling.scale_job(_job(nodes=5, gpus=40), model)
    with pytest.raises(scaling.ScaleRefused, match=r"job 7: 16 h100 GPUs per node is more than any node holds \(8\)"):
        scaling.scale_job(_job(gpus=16), model)
    with pytest.raises(scaling.ScaleRefused, match=r"job 7: 17 nodes is more than partition gpu has \(16\)"):
        scaling.scale_job(_job(nodes=17, gpus=17, tier="scavenger"), model)
    with pytest.raises(scaling.ScaleRefused, match=r"113 CPUs per node is more than any node holds \(112\)"):
        scaling.scale_job(_job(cpus=113), model)
    with pytest.raises(scaling.ScaleRefused, match="^job 7: no node has a100 GPUs"):
        scaling.scale_job(_job(gpu_type="a100"), model)
