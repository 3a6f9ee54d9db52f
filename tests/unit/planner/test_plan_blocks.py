"""--segment and --exclusive=topo on a partition placed by NVLink blocks (the 25.11 block lab's test site: 11 trays
of 4 GPUs in NVLink domains of 4, 4 and 3), for the release that will run the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmtools.planner.plan import TemplateShape, plan_job
from slurmtools.planner.request import JobRequest, RequestError
from slurmtools.planner.view import from_fabric
from slurmtools.site import load_site
from slurmtools.slurm.releases import release_for
from slurmtools.topology.sitefile import load_fabric

SITE = Path(__file__).resolve().parents[2] / "integration" / "sites" / "nvl" / "site.toml"
TORCHRUN = TemplateShape("torchrun", tasks="per-node", multi_node=True)


@pytest.fixture(scope="module")
def nvl():
    site = load_site(str(SITE))
    return site, from_fabric(load_fabric(site.fabric_path))


def plan(nvl, slurm="25.11", **kw):
    site, view = nvl
    base = dict(command=("python", "train.py"), time_limit=3600, user="labuser", account="team", tier="production",
                partition="nvl", nodes=4, gpus_per_node=4)
    base.update(kw)
    return plan_job(JobRequest(**base), site, view, TORCHRUN, slurm=release_for(slurm) if slurm else None)


def opts(p):
    return {d.option: d.value for d in p.directives}


def test_segment_from_the_tensor_parallel_group(nvl):
    p = plan(nvl, tp_size=8, nodes=8)
    o = opts(p)
    assert o["segment"] == "2" and o["exclusive"] == "topo"
    assert "NVLink block" in p.directive("segment").why


def test_tensor_parallel_inside_one_host_needs_no_segment(nvl):
    p = plan(nvl, tp_size=4, comm="tensor-parallel")
    assert "segment" not in opts(p) and opts(p)["exclusive"] == "topo"
    assert any("fits in one host" in n for n in p.notes)


def test_plain_allreduce_job_gets_neither(nvl):
    assert not {"segment", "exclusive"} & set(opts(plan(nvl)))


@pytest.mark.parametrize("tp, nodes, words", [(24, 8, "do not divide"), (6, 6, "not whole hosts"),
                                              (20, 5, "does not fit in one block")])
def test_impossible_groups_are_refused_naming_the_option(nvl, tp, nodes, words):
    with pytest.raises(RequestError) as e:
        plan(nvl, tp_size=tp, nodes=nodes)
    assert str(e.value).startswith("request: --tp-size:") and words in str(e.value)


def test_release_without_segments_or_unknown_release_leaves_them_out_with_a_note(nvl):
    for slurm, words in (("22.05", "Slurm 22.05 has no --segment"), (None, "release is unknown")):
        p = plan(nvl, slurm=slurm, tp_size=8)
        assert not {"segment", "exclusive"} & set(opts(p))
        assert any(words in n for n in p.notes), p.notes


def test_tree_partition_gets_no_segment(nvl):
    p = plan(nvl, partition="ib", tp_size=8)
    assert "segment" not in opts(p) and any("not placed by blocks" in n for n in p.notes)


def test_rank_groups_follow_nvlink_domains(nvl):
    site, view = nvl
    mpi = TemplateShape("mpi", tasks="per-gpu", multi_node=True)
    r = JobRequest(command=("a",), time_limit=3600, user="labuser", account="team", tier="production",
                   partition="nvl", nodes=8, gpus_per_node=4)
    p = plan_job(r, site, view, mpi, slurm=release_for("25.11"))
    assert p.rank_groups == ("gpu[01-04]", "gpu[05-08]", "gpu[09-11]")  # the partition's NVLink domains
    assert plan(nvl).rank_groups == p.rank_groups  # one launcher per host (torchrun): node ranks in that order
    assert plan(nvl, comm="independent").rank_groups == ()  # ranks that do not talk: no order to keep
    assert plan(nvl, nodes=1).rank_groups == ()
