"""The foundation against the real lab: submit, GPUs, errors, cluster show, requeue/cancel, tier preemption."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from slurmtools.errors import SlurmError

pytestmark = pytest.mark.lab

PASS_THROUGH = """-- pass-through for the foundation tests: they test Slurm and the backend, not the site's admission policy
function slurm_job_submit(job_desc, part_list, submit_uid) return slurm.SUCCESS end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid) return slurm.SUCCESS end
"""


@pytest.fixture(autouse=True, scope="module")
def raw_slurm(lab):
    """Swap the lab's generated job_submit.lua for a pass-through (Slurm reloads it when its mtime changes)."""
    path = lab.dir / "etc" / "job_submit.lua"
    saved = path.read_text()
    path.write_text(PASS_THROUGH)
    yield
    path.write_text(saved)


def _script(body: str) -> str:
    return "#!/bin/bash\n" + body + "\n"


def test_submit_run_and_sacct_shows_gpus(lab):
    b = lab.backend()
    jid = b.submit(_script("srun true"), ["--gres=gpu:h100:2", "-N1", "-J", "st-sacct",
                                         f"--output={lab.jobs_dir}/%j.out"], cwd=str(lab.jobs_dir))
    assert lab.wait_state(jid, {"COMPLETED", "FAILED"}, 90) == "COMPLETED"
    recs = lab.wait_accounting(jid)
    alloc = [r for r in recs if r.step is None]
    assert len(alloc) == 1, recs
    assert alloc[0].state == "COMPLETED"
    assert alloc[0].alloc_gpus == 2 and alloc[0].alloc_gpus_by_type == {"h100": 2}
    assert alloc[0].name == "st-sacct"
    assert any(r.step == "batch" for r in recs)


def test_two_nodes_sixteen_gpus_see_eight_each(lab):
    b = lab.backend()
    out = lab.jobs_dir / "gpuenv-%j.out"
    body = 'srun bash -c \'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $SLURM_GPUS_ON_NODE"\''
    jid = b.submit(_script(body), ["-N2", "--gpus=16", f"--output={out}"], cwd=str(lab.jobs_dir))
    assert lab.wait_state(jid, {"COMPLETED", "FAILED"}, 90) == "COMPLETED"
    lines = (lab.jobs_dir / f"gpuenv-{jid}.out").read_text().split("\n")
    rows = sorted(ln.split() for ln in lines if ln.strip())
    assert len(rows) == 2, rows
    assert rows[0][0] != rows[1][0]  # two different nodes
    for node, cvd, on_node in rows:
        assert cvd == "0,1,2,3,4,5,6,7" and on_node == "8", rows
    job = b.job(jid)
    assert job.gpus == 16 and job.num_nodes == 2


def test_invalid_partition_carries_slurms_message(lab):
    with pytest.raises(SlurmError) as err:
        lab.backend().submit(_script("true"), ["-p", "nosuchpart"])
    assert "invalid partition specified: nosuchpart" in str(err.value)
    assert str(err.value).startswith("sbatch: error:")


def test_cluster_show_matches_sinfo(lab):
    b = lab.backend()
    jid = b.submit(_script("sleep 60"), ["--gres=gpu:h100:3", "-w", "gpu07", f"--output={lab.jobs_dir}/%j.out"])
    try:
        lab.wait_state(jid, "RUNNING", 60)
        p = subprocess.run([sys.executable, "-m", "slurmtools", "cluster", "show", "--json"], capture_output=True,
                           text=True, env=lab.env, check=True)
        shown = json.loads(p.stdout)
        sinfo = lab.sh("sinfo -h -N -o '%N|%T|%G|%f'").stdout.split()
        expect = {}
        for line in sinfo:
            name, state, gres, feats = line.split("|")
            expect[name] = (state, gres, feats)
        assert {n["name"] for n in shown["nodes"]} == set(expect)
        for n in shown["nodes"]:
            state, gres, feats = expect[n["name"]]
            assert n["state"] == state, (n, state)
            assert f"gpu:h100:{n['gpus']['h100']}" in gres
            assert n["features"] == feats.split(",")
        used = lab.sh("scontrol -d show node gpu07 | grep -o 'GresUsed=[^ ]*'").stdout
        assert "gpu:h100:3" in used
        g7 = next(n for n in shown["nodes"] if n["name"] == "gpu07")
        assert g7["gpus_used"] == {"h100": 3} and g7["gpus_free"] == 5
        assert shown["gpus"]["h100"]["used"] == 3
        assert shown["gpus"]["h100"]["total"] == 8 * len(expect)
        assert [t["name"] for t in shown["tiers"]] == ["production", "standard", "scavenger"]
        assert all(t["in_slurm"] for t in shown["tiers"])
    finally:
        b.cancel(jid)


def test_hold_release_requeue_and_cancel(lab):
    b = lab.backend()
    jid = b.submit(_script("sleep 300"), ["-H", "--gres=gpu:1", f"--output={lab.jobs_dir}/%j.out"])
    j = b.job(jid)
    assert j.state == "PENDING" and j.reason == "JobHeldUser"
    b.release(jid)
    lab.wait_state(jid, "RUNNING", 60)
    b.requeue(jid)
    lab.wait_state(jid, "PENDING", 60)
    assert b.job(jid).restarts == 1
    b.cancel(jid)
    lab.wait_state(jid, "CANCELLED", 60)


def test_scavenger_job_is_preempted_by_production_and_requeued(lab):
    """Proves the lab's tiers: preempt/qos + REQUEUE + GraceTime as rendered from the site file."""
    b = lab.backend()
    # a shorter grace than the site's 60 s keeps the test quick; Slurm still enforces it on its 30-s timer
    lab.sh("sacctmgr -i modify qos where name=scavenger set GraceTime=5")
    low = high = None
    try:
        # no job step: at grace start Slurm signals only steps, so a step would end the job before the requeue
        low = b.submit(_script("sleep 600"), ["--qos=scavenger", "--requeue", "-w", "gpu16", "--exclusive",
                                                   f"--output={lab.jobs_dir}/%j.out"])
        lab.wait_state(low, "RUNNING", 60)
        high = b.submit(_script("sleep 5"), ["--qos=production", "-w", "gpu16", "--exclusive",
                                             f"--output={lab.jobs_dir}/%j.out"])
        lab.wait_state(high, {"RUNNING", "COMPLETED"}, 120)
        # the low job went back to the queue, not to the bin
        lab.wait_state(low, "PENDING", 30)
        j = b.job(low)
        assert j.restarts == 1
        t0 = datetime.now(timezone.utc) - timedelta(hours=1)
        runs = [r for r in b.accounting(t0, datetime.now(timezone.utc) + timedelta(minutes=5), job_ids=[low],
                                        steps=False, duplicates=True)]
        assert "PREEMPTED" in [r.state for r in runs], runs
        # the preempted run was given the tier's grace period (5 s here) before being stopped
        preempted = next(r for r in runs if r.state == "PREEMPTED")
        high_submit = b.job(high).submit_time
        assert (preempted.end - high_submit).total_seconds() >= 5, (preempted.end, high_submit)
        assert "preempted JobId=%d has been requeued" % low in (lab.dir / "log" / "slurmctld.log").read_text()
    finally:
        for j in (low, high):
            if j:
                subprocess.run(["scancel", str(j)], env=lab.env)
        lab.sh("sacctmgr -i modify qos where name=scavenger set GraceTime=60")


def test_node_drain_shows_in_accounting_events(lab):
    b = lab.backend()
    lab.sh("scontrol update nodename=gpu15 state=drain reason='st-events check'")
    try:
        now = datetime.now(timezone.utc)
        deadline = now + timedelta(seconds=30)
        text = ""
        while datetime.now(timezone.utc) < deadline:
            text = b.events_dump(now - timedelta(hours=1), now + timedelta(hours=1))
            if "st-events check" in text:
                break
        rows = [ln.split("|") for ln in text.splitlines()[1:] if "st-events check" in ln]
        assert rows and rows[-1][0] == "gpu15" and rows[-1][3].startswith("DRAIN"), text
        assert not next(n for n in b.nodes() if n.name == "gpu15").schedulable
    finally:
        lab.sh("scontrol update nodename=gpu15 state=resume")
