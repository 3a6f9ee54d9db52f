"""The planner on the example site (16 DGX-H100-like hosts, 4 per leaf) and on synthetic views."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slurmtools.errors import ConfigError
from slurmtools.planner.plan import Release, TemplateShape, plan_job
from slurmtools.planner.request import JobRequest
from slurmtools.planner.view import from_fabric
from slurmtools.slurm.model import NodeInfo

from helpers import busy

TORCHRUN = TemplateShape("torchrun", tasks="per-node", multi_node=True)
MPI = TemplateShape("mpi", tasks="per-gpu", multi_node=True)


def req(**kw):
    base = dict(command=("python", "train.py"), time_limit=3600, user="labuser", account="vision")
    base.update(kw)
    return JobRequest(**base)


def opts(plan):
    return {d.option: d.value for d in plan.directives}


def test_sixteen_gpus_one_leaf_whole_hosts(site, fabric):
    p = plan_job(req(gpus=16), site, from_fabric(fabric), TORCHRUN)
    o = opts(p)
    assert (p.nodes, p.gpus_per_node) == (2, 8)
    assert o["switches"] == "1@00:02:00"
    assert o["gpus-per-node"] == "h100:8" and o["cpus-per-gpu"] == "14" and o["mem-per-gpu"] == "250000M"
    assert o["gres-flags"] == "enforce-binding"
    assert "gpu-bind" not in o  # one launcher per host
    assert len({fabric.leaf_of(h).name for h in p.hosts}) == 1
    assert dict(p.env)["NCCL_IB_HCA"] == "=" + ",".join(f"mlx5_{i}" for i in range(8))
    assert p.quality.vs_empty == 1.0 and p.quality.vs_now == 1.0


def test_larger_than_a_leaf_spans_fewest_leaves(site, fabric):
    p = plan_job(req(gpus=40, tier="production"), site, from_fabric(fabric), TORCHRUN)
    assert opts(p)["switches"].startswith("2@")
    assert len({fabric.leaf_of(h).name for h in p.hosts}) == 2


def _nodes(fabric, busy_hosts):
    out = []
    for h in fabric.hosts:
        used = 8 if h in busy_hosts else 0
        out.append(NodeInfo(name=h, state="allocated" if used else "idle", flags=(), cpus=112,
                            cpus_alloc=112 if used else 0, memory_mb=2_000_000, memory_alloc_mb=0,
                            gpus_by_type={"h100": 8}, gpus_used_by_type={"h100": used}, gpus_used_idx=(),
                            features=(), partitions=("gpu",)))
    return out


def test_partly_busy_leaves_still_get_the_optimum(site, fabric):
    # every leaf has one busy host: 3 free per leaf; 32 GPUs (4 hosts) now need 2 leaves, empty needs 1
    view = from_fabric(fabric, _nodes(fabric, {"gpu01", "gpu05", "gpu09", "gpu13"}))
    p = plan_job(req(gpus=32, tier="standard"), site, view, TORCHRUN)
    assert p.leaves_now == 2 and p.leaves_empty == 1
    assert opts(p)["switches"] == "2@00:02:00"
    assert not {"gpu01", "gpu05", "gpu09", "gpu13"} & set(p.hosts)
    assert p.quality.vs_empty <= 1.0


def test_waits_for_a_tighter_placement_when_a_job_ends_soon(site, fabric):
    view = from_fabric(fabric, _nodes(fabric, {"gpu01", "gpu05", "gpu09", "gpu13"}))
    soon = [Release("gpu05", 8, 300, 7)]
    # gpu05 ends within 5 minutes (10% of a 1-day limit allows 2 h): waiting gives 1 leaf instead of 2
    p = plan_job(req(gpus=32, tier="standard", time_limit=86400), site, view, TORCHRUN, releases=soon)
    assert opts(p)["switches"] == "1@00:06:00"
    late = [Release("gpu05", 8, 86400, 7)]
    p2 = plan_job(req(gpus=32, tier="standard", time_limit=86400), site, view, TORCHRUN, releases=late)
    assert opts(p2)["switches"] == "2@00:02:00"


def test_job_that_does_not_fit_now_queues_with_the_empty_optimum(site, fabric):
    view = from_fabric(fabric, _nodes(fabric, set(fabric.hosts[:14])))
    p = plan_job(req(gpus=32, tier="standard"), site, view, TORCHRUN)
    assert not p.starts_now and p.leaves_now is None
    assert opts(p)["switches"].startswith("1@")


def test_default_tier_is_the_sites(site, fabric):
    v = from_fabric(fabric)
    p = plan_job(req(gpus=8, tier=None), site, v, TORCHRUN)
    assert site.default_tier == "standard" and p.tier == "standard"
    assert "the site's default tier" in p.directive("qos").why
    # over the default tier's limit: refused, naming the tiers that fit; never a silent move to another tier
    with pytest.raises(ConfigError, match=r"--tier: 64 GPUs is over tier standard's 32 GPUs per job \(the site's "
                                          r"default tier\); tiers that fit: production \(never preempted\), "
                                          r"scavenger"):
        plan_job(req(gpus=64, tier=None), site, v, TORCHRUN)


def test_best_tier_and_limits(site, fabric):
    v = from_fabric(fabric)
    p = plan_job(req(gpus=64, tier="best"), site, v, TORCHRUN)
    assert p.tier == "production" and not any("--tier best" in n for n in p.notes)
    # 96 GPUs: over production's 64 and standard's 32; scavenger allows 128 for up to 12 h; the fallback is stated
    p = plan_job(req(gpus=96, time_limit=3600, tier="best"), site, v, TORCHRUN)
    assert p.tier == "scavenger"
    assert any(n.startswith("--tier best: tier scavenger (preemptible by production, standard) because 96 GPUs "
                            "is over tier production's 64") for n in p.notes), p.notes
    with pytest.raises(ConfigError, match="--tier: no tier fits"):
        plan_job(req(gpus=96, time_limit=86400, tier="best"), site, v, TORCHRUN)
    with pytest.raises(ConfigError, match="--tier: 40 GPUs is over tier standard's 32"):
        plan_job(req(gpus=40, tier="standard"), site, v, TORCHRUN)
    with pytest.raises(ConfigError, match="--account: unknown account"):
        plan_job(req(gpus=8, account="nope"), site, v, TORCHRUN)


def test_students_cannot_use_production(site, fabric):
    p = plan_job(req(gpus=8, user="carol", account=None), site, from_fabric(fabric), TORCHRUN)
    assert p.tier == "standard" and p.account == "students"


def test_preemptible_tier_gets_requeue_append_and_batch_signal(site, fabric):
    p = plan_job(req(gpus=8, tier="scavenger"), site, from_fabric(fabric), TORCHRUN)
    o = opts(p)
    assert "requeue" in o and o["requeue"] is None
    assert o["open-mode"] == "append"
    assert o["signal"] == "B:URG@120"  # scavenger: signal_lead 2m
    assert ("SLURMTOOLS_SIGNAL_LEAD", "120") in p.env and "SLURMTOOLS_FORWARD_SIGNAL" not in dict(p.env)
    assert "only to a program that said it handles it" in p.directive("signal").why
    p2 = plan_job(req(gpus=8, tier="production"), site, from_fabric(fabric), TORCHRUN)
    assert "signal" not in opts(p2) and "requeue" not in opts(p2)


def test_handles_signal_passes_the_warning_on(site, fabric):
    p = plan_job(req(gpus=8, tier="scavenger", handles_signal=True), site, from_fabric(fabric), TORCHRUN)
    assert ("SLURMTOOLS_FORWARD_SIGNAL", "1") in p.env
    assert "--handles-signal" in p.directive("signal").why


@pytest.mark.parametrize("time_limit, lead, note", [
    (3600, 300, None),  # the tier's 5 m lead fits
    (600, 300, None),  # exactly half
    (300, 150, "shortened from the tier's 5m to 150s"),  # the issue's --time 5m: it used to warn at start
    (240, 120, "shortened"),
    (239, 0, "lead 0 (no time-limit warning"),
    (60, 0, "at preemption only"),
])
def test_signal_lead_fits_inside_the_time_limit(site, fabric, time_limit, lead, note):
    p = plan_job(req(gpus=8, tier="standard", time_limit=time_limit), site, from_fabric(fabric), TORCHRUN)
    assert opts(p)["signal"] == f"B:URG@{lead}"
    # Slurm warns when at most lead + 30 s remain and checks every 30 s: the warning never comes in the first minute
    assert lead == 0 or time_limit - lead - 60 >= 60
    if note is None:
        assert not any("--signal" in n for n in p.notes)
    else:
        assert any(note in n for n in p.notes), p.notes


def test_whole_hosts_for_multi_node(site, fabric):
    with pytest.raises(ConfigError, match="--gpus: 12 GPUs is not a whole number of 8-GPU"):
        plan_job(req(gpus=12), site, from_fabric(fabric), TORCHRUN)
    with pytest.raises(ConfigError, match="--gpus-per-node"):
        plan_job(req(nodes=2, gpus_per_node=4), site, from_fabric(fabric), TORCHRUN)
    site2 = replace(site, partitions={"gpu": replace(site.partitions["gpu"], allow_partial_nodes=True)})
    p = plan_job(req(nodes=2, gpus_per_node=4), site2, from_fabric(fabric), TORCHRUN)
    assert (p.nodes, p.gpus_per_node) == (2, 4)


def test_mpi_gets_one_task_per_gpu_and_gpu_binding(site, fabric):
    o = opts(plan_job(req(gpus=16), site, from_fabric(fabric), MPI))
    assert o["ntasks-per-node"] == "8" and o["gpu-bind"] == "closest"


def test_independent_tasks_take_no_switch_constraint(site, fabric):
    p = plan_job(req(gpus=16, comm="independent"), site, from_fabric(fabric), TORCHRUN)
    assert "switches" not in opts(p) and "NCCL_IB_HCA" not in dict(p.env)


def test_single_node_template_refuses_multi_node(site, fabric):
    with pytest.raises(ConfigError, match="--template: template python runs on one node"):
        plan_job(req(gpus=16), site, from_fabric(fabric), TemplateShape("python", multi_node=False))


@pytest.mark.parametrize("field,value,option", [
    ("name", "a b", "--name"), ("name", "x\n#SBATCH --qos=production", "--name"),
    ("output_dir", "/tmp/$(id)", "--output-dir"), ("workdir", "/tmp/`id`", "--workdir"),
    ("account", "vision\n", "--account"),
])
def test_hostile_directive_values_are_refused_with_the_option_named(site, fabric, field, value, option):
    with pytest.raises(ConfigError, match=option):
        plan_job(req(gpus=8, **{field: value}), site, from_fabric(fabric), TORCHRUN)


def test_request_shape_errors():
    with pytest.raises(ConfigError, match="--gpus: give the total GPUs"):
        JobRequest(command=("x",))
    with pytest.raises(ConfigError, match="--comm: unknown communication hint"):
        JobRequest(command=("x",), gpus=1, comm="ring")
    with pytest.raises(ConfigError, match="--gpus: must be a whole number"):
        JobRequest(command=("x",), gpus=-1)  # 0 is a CPU job (tests/unit/planner/test_cpu_jobs.py)
    with pytest.raises(ConfigError, match="--env"):
        JobRequest(command=("x",), gpus=1, env=(("A-B", "1"),))


def test_busy_helper_synthetic_view_oversubscribed_uplinks_lower_quality():
    from helpers import make_view
    from slurmtools.planner.quality import estimate

    v = make_view([[8] * 4, [8] * 4, [8] * 4], uplink=400.0)
    one = estimate(v, ["h00001", "h00002", "h00003", "h00004"], 8)
    two = estimate(v, ["h00001", "h00002", "h00005", "h00006"], 8)
    assert one.gbytes == 50.0 and one.hops == 2
    assert two.gbytes < one.gbytes and two.hops == 4
    v2 = busy(v, ["h00001"])
    assert v2.hosts["h00001"].gpus_free == 0


def test_tensor_parallel_stays_inside_one_multi_node_nvlink_domain(site, fabric):
    # two 8-host NVLink domains across the leaves; nvl-a has 3 busy hosts, so a 4-host TP job fits in both but
    # best fit takes nvl-a (least room to spare) and pins it with --constraint
    fab = replace(fabric, nvlink_domains={"nvl-a": tuple(fabric.hosts[:8]), "nvl-b": tuple(fabric.hosts[8:])})
    view = from_fabric(fab, _nodes(fab, {"gpu01", "gpu02", "gpu05"}))
    p = plan_job(req(gpus=32, comm="tensor-parallel", tier="standard"), site, view, TORCHRUN)
    o = opts(p)
    assert o["constraint"] == "nvl-a" and "NVLink" in p.directive("constraint").why
    assert set(p.hosts) <= set(fabric.hosts[:8]) and not {"gpu01", "gpu02", "gpu05"} & set(p.hosts)
    # allreduce jobs are not pinned to a domain
    assert "constraint" not in opts(plan_job(req(gpus=32, tier="standard"), site, view, TORCHRUN))


# ---- predictions on a full cluster (issue 10 item 5): preemption first, then time limits and the queue ahead

ALL = {f"gpu{i:02d}" for i in range(1, 17)}


def test_a_full_cluster_with_preemptible_jobs_predicts_the_victims_hosts(site, fabric):
    view = from_fabric(fabric, _nodes(fabric, ALL))
    running = [Release(f"gpu{i:02d}", 8, 3000, 100 + i, "production") for i in range(1, 17) if i not in (7, 8)]
    running += [Release("gpu07", 8, 3000, 7, "scavenger"), Release("gpu08", 8, 3000, 8, "scavenger")]
    p = plan_job(req(gpus=16, tier="production"), site, view, TORCHRUN, releases=running)
    assert not p.starts_now and p.preempts == (7, 8) and set(p.hosts) == {"gpu07", "gpu08"}
    assert p.start_in == site.tiers["scavenger"].grace_time
    assert p.quality.plan.gbytes > 0 and p.quality.best_now.gbytes > 0
    assert any("preempts job(s) 7, 8 (scavenger)" in n for n in p.notes), p.notes
    # a standard job may preempt scavenger jobs too, but a scavenger job preempts nobody: it queues
    q = plan_job(req(gpus=16, tier="scavenger"), site, view, TORCHRUN, releases=running)
    assert q.preempts == () and q.start_in == 3000 and q.quality.plan.gbytes > 0


def test_a_queued_job_is_predicted_from_time_limits_and_the_jobs_ahead(site, fabric):
    from slurmtools.planner.plan import Planned

    view = from_fabric(fabric, _nodes(fabric, ALL))
    running = [Release(f"gpu{i:02d}", 8, 600 if i <= 4 else 3000, 100 + i, "production") for i in range(1, 17)]
    p = plan_job(req(gpus=16, tier="production"), site, view, TORCHRUN, releases=running)
    assert p.start_in == 600 and set(p.hosts) <= {"gpu01", "gpu02", "gpu03", "gpu04"} and p.behind == ()
    assert p.quality.plan.gbytes > 0  # never the 0 GB/s of "does not fit now"
    # a production job queued ahead is planned on three of those hosts: ours waits for the next releases
    ahead = [Planned(55, "production", 600, ("gpu01", "gpu02", "gpu03"))]
    p2 = plan_job(req(gpus=16, tier="production"), site, view, TORCHRUN, releases=running, planned=ahead)
    assert p2.start_in == 3000 and p2.behind == (55,) and not {"gpu01", "gpu02", "gpu03"} & set(p2.hosts)
    # a scavenger job planned there is not ahead of a production one
    low = [Planned(56, "scavenger", 600, ("gpu01", "gpu02", "gpu03"))]
    p3 = plan_job(req(gpus=16, tier="production"), site, view, TORCHRUN, releases=running, planned=low)
    assert p3.start_in == 600 and p3.behind == ()
