"""Admission of CPU jobs on a site with CPU partitions (tests/data/sites/cpu): the Python policies and the generated
job_submit.lua (run by a real Lua 5.1) admit the CPU jobs the planner writes on CPU partitions, and agree on every
case, GPU-less jobs on the GPU partition included (no rule refuses those today: docs/planner.md says why)."""

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
        ["-A", "vision", "-p", "gpu", "-q", "standard", "-c", "8"],  # GPU-less on the GPU partition: admitted
        ["-A", "vision", "-p", "cpu", "-q", "standard", "-c", "8", "-t", "1441"],  # over the tier's walltime
        ["-A", "vision", "-p", "cpu", "-q", "standard", "-N", "3"],  # over the tier's node limit
        ["-A", "vision", "-p", "gpu", "-q", "standard", "--gres=gpu:1"],  # untyped GPU: refused as before
        ["-A", "vision", "-q", "standard", "-c", "4"],  # no partition: the default (gpu)
    ]
    reqs += [JobRequest.from_sbatch(a, script=SIG, user="alice", default_account="vision") for a in by_hand]
    decisions = [evaluate(r, pols, ctx) for r in reqs]
    assert [d.action for d in decisions[4:]] == ["allow", "deny", "deny", "deny", "modify"], \
        [(d.action, d.message) for d in decisions[4:]]
    text = render_job_submit(site, fabric, audit_log=str(tmp_path / "audit.jsonl")).text
    got = run_lua(text, [job_desc(r) for r in reqs], tmp_path)
    for r, d, lua in zip(reqs, decisions, got):
        if d.action == "deny":
            assert (lua["rc"], lua["user"]) == (-1, d.message), r
        else:
            assert lua["rc"] == 0 and lua["user"] == "", (r, lua)
            assert lua["partition"] == d.changes.get("partition", r.partition or ""), r
            assert lua["qos"] == d.changes.get("qos", r.qos or ""), r
