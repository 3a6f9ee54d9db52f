"""Admission of CPU jobs on a site with CPU partitions (tests/data/sites/cpu): the Python policies and the generated
job_submit.lua (run by a real Lua 5.1) admit the CPU jobs the planner writes on CPU partitions, refuse GPUs asked
through a CPU partition and (the site sets `require_gpus_on_gpu_partitions`) GPU-less jobs on the GPU partition,
and agree on every case."""

from __future__ import annotations

from pathlib import Path

import pytest

from policy_luarun import job_desc, run_lua
from slurmtools.planner.plan import plan_job
from slurmtools.planner.request import JobRequest as PlanRequest
from slurmtools.planner.templates import find_template, render
from slurmtools.planner.view import from_fabric
from slurmtools.policy import JobRequest, PolicyContext, evaluate, load_policies
from slurmtools.render.job_submit import render_job_submit
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric

pytestmark = pytest.mark.usefixtures("require_lua")  # a missing Lua fails, never skips

CPU_SITE = Path(__file__).resolve().parents[2] / "data" / "sites" / "cpu" / "site.toml"
SIG = "#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsrun true\n"


def _planned_scripts(site, fabric) -> list[str]:
    """Scripts the planner writes for CPU jobs on both CPU partitions, preemptible tier and not."""
    view = from_fabric(fabric)
    out = []
    for kw in (dict(gpus=0, cpus=8), dict(cpus=16, ntasks=16, template="mpi"),
               dict(cpus=8, ntasks=8, partition="gpucpu", template="mpi", tier="production"),
               dict(gpus=0, partition="gpucpu", mem_mb=1024)):
        info = find_template(kw.pop("template", "python"), site.source)
        p = plan_job(PlanRequest(command=("python", "prep.py"), user="alice", **kw), site, view, info.shape)
        out.append(render(p, info, site.source))
    return out


def test_cpu_jobs_are_admitted_on_cpu_partitions_and_lua_agrees(tmp_path):
    site = load_site(CPU_SITE)
    fabric = load_fabric(site.fabric_path)
    pols = load_policies(site, fabric)
    ctx = PolicyContext(site=site, fabric=fabric, usage=None)
    reqs = [JobRequest.from_sbatch([], script=s, user="alice", default_account="vision")
            for s in _planned_scripts(site, fabric)]
    assert [r.partition for r in reqs] == ["cpu", "cpu", "gpucpu", "gpucpu"] and all(r.gpus == 0 for r in reqs)
    for r in reqs:
        d = evaluate(r, pols, ctx)
        assert d.action == "allow", (r, d.message)
    by_hand = [
        ["-A", "vision", "-p", "gpu", "-q", "standard", "-c", "8"],  # GPU-less on the GPU partition
        ["-A", "vision", "-p", "cpu", "-q", "standard", "-c", "8", "-t", "1441"],  # over the tier's walltime
        ["-A", "vision", "-p", "cpu", "-q", "standard", "-N", "3"],  # over the tier's node limit
        ["-A", "vision", "-p", "gpu", "-q", "standard", "--gres=gpu:1"],  # untyped GPU: refused as before
        ["-A", "vision", "-q", "standard", "--gres=gpu:h100:1", "-c", "4"],  # no partition: the default (gpu)
        ["-A", "vision", "-q", "standard", "-c", "4"],  # no partition, no GPUs: the default (gpu) refuses it
        ["-A", "vision", "-p", "gpucpu", "-q", "standard", "--gres=gpu:h100:1"],  # GPUs through the overlay
        ["-A", "vision", "-p", "cpu", "-q", "production", "--gpus=2"],
        ["-A", "vision", "-p", "cpu", "-q", "standard", "-c", "8"],  # a CPU job where it belongs
    ]
    reqs += [JobRequest.from_sbatch(a, script=SIG, user="alice", default_account="vision") for a in by_hand]
    decisions = [evaluate(r, pols, ctx) for r in reqs]
    assert [d.action for d in decisions[4:]] == ["deny", "deny", "deny", "deny", "modify", "deny", "deny", "deny",
                                                 "allow"], [(d.action, d.message) for d in decisions[4:]]
    required = ("partition gpu is for GPU jobs: ask for GPUs (e.g. --gres=gpu:h100:1); CPU jobs go to cpu or "
                "gpucpu")
    assert (decisions[4].policy, decisions[4].message) == ("partition_gpus", required)
    assert decisions[9].message == required
    assert [(d.policy, d.message) for d in decisions[10:12]] == [
        ("partition_gpus", "partition gpucpu is a CPU partition: it gives no GPUs, and this job asks for 1; GPU jobs "
                           "go to gpu"),
        ("partition_gpus", "partition cpu is a CPU partition: it gives no GPUs, and this job asks for 2; GPU jobs "
                           "go to gpu")]
    text = render_job_submit(site, fabric, audit_log=str(tmp_path / "audit.jsonl")).text
    got = run_lua(text, [job_desc(r) for r in reqs], tmp_path)
    for r, d, lua in zip(reqs, decisions, got):
        if d.action == "deny":
            assert (lua["rc"], lua["user"]) == (-1, d.message), r
        else:
            assert lua["rc"] == 0 and lua["user"] == "", (r, lua)
            assert lua["partition"] == d.changes.get("partition", r.partition or ""), r
            assert lua["qos"] == d.changes.get("qos", r.qos or ""), r


def test_gpus_required_on_a_site_without_cpu_partitions(tmp_path):
    """The example site has no CPU partition: with `require_gpus_on_gpu_partitions` a GPU-less job is refused and
    told so (not pointed to a partition that does not exist); without the setting the rule does not run at all."""
    from dataclasses import replace

    site = load_site(None)
    fabric = load_fabric(site.fabric_path)
    assert "partition_gpus" not in [p.name for p in load_policies(site, fabric)]
    strict = replace(site, policy=replace(site.policy, require_gpus_on_gpu_partitions=True))
    pols = load_policies(strict, fabric)
    ctx = PolicyContext(site=strict, fabric=fabric, usage=None)
    reqs = [JobRequest.from_sbatch(a, script=SIG, user="alice", default_account="vision") for a in (
        ["-A", "vision", "-q", "standard", "-c", "4"],
        ["-A", "vision", "-p", "gpu", "-q", "standard", "--gres=gpu:h100:1", "-c", "4"])]
    decisions = [evaluate(r, pols, ctx) for r in reqs]
    assert (decisions[0].action, decisions[0].policy, decisions[0].message) == (
        "deny", "partition_gpus",
        "partition gpu is for GPU jobs: ask for GPUs (e.g. --gres=gpu:h100:1); this site has no CPU partition")
    assert decisions[1].action == "allow", decisions[1].message
    text = render_job_submit(strict, fabric, audit_log=str(tmp_path / "audit.jsonl")).text
    got = run_lua(text, [job_desc(r) for r in reqs], tmp_path)
    assert (got[0]["rc"], got[0]["user"]) == (-1, decisions[0].message)
    assert (got[1]["rc"], got[1]["user"]) == (0, "")
