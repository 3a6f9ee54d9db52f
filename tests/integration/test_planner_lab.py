"""The placement planner against the real Slurm lab (16 hosts x 8 fake h100, leaf1..leaf4 of 4 hosts each).

Plans are made from the lab's live state through the backend, rendered with the bundled templates, submitted
with sbatch as `labuser`, and checked with Slurm's own answers (scontrol/squeue node lists against the lab's
topology.conf)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from slurmtools.hostlist import expand
from slurmtools.planner.live import gather
from slurmtools.planner.plan import plan_job
from slurmtools.planner.request import JobRequest
from slurmtools.planner.templates import find_template, render
from slurmtools.resources import example_site
from slurmtools.site import load_site

from labtools import job_folder

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def site():
    return load_site(example_site())


@pytest.fixture
def clean(lab):
    """Every test starts and ends with no jobs in the lab."""
    lab.sh("scancel --full -u labuser; scancel --full -u root", check=False)
    _wait_empty(lab)
    yield
    lab.sh("scancel --full -u labuser; scancel --full -u root", check=False)
    _wait_empty(lab)


def _wait_empty(lab, timeout=90):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not lab.sh("squeue -h -o %i", check=False).stdout.strip():
            lab.wait_nodes_idle(timeout=60)
            return
        time.sleep(0.5)
    raise AssertionError("jobs left in the lab: " + lab.sh("squeue", check=False).stdout)


def leaf_map(lab) -> dict[str, str]:
    """host -> leaf, read from the topology.conf the lab's slurmctld loaded."""
    out = {}
    for line in (lab.dir / "etc" / "topology.conf").read_text().splitlines():
        f = dict(x.split("=", 1) for x in line.split() if "=" in x)
        if "Nodes" in f:
            for h in expand(f["Nodes"]):
                out[h] = f["SwitchName"]
    return out


def workdir(lab) -> Path:
    return job_folder(lab, "planner")


def plan_for(lab, site, template, **kw):
    base = dict(user="labuser", account="vision", time_limit=600, name="plab")
    base.update(kw)
    req = JobRequest(**base)
    state = gather(site, lab.backend())
    assert state.note == "" and state.view.live
    info = find_template(template, site.source)
    plan = plan_job(req, site, state.view, info.shape, state.releases, slurm=state.release, planned=state.planned)
    return plan, render(plan, info, site.source)


def sbatch(lab, script: str, cwd: Path, env: str = "") -> int:
    out = lab.sh(f"cd {cwd} && {env} sbatch --parsable", user="labuser", input=script).stdout.strip()
    return int(out.split(";")[0])


def hold_hosts(lab, hosts: list[str], cwd: Path) -> list[int]:
    """Occupy whole hosts with sleeping jobs (pinned with -w), so the planner sees them busy."""
    ids = []
    for h in hosts:
        out = lab.sh(f"cd {cwd} && sbatch --parsable -A vision --qos=production -w {h} -N1 --gpus-per-node=h100:8 "
                     f"--cpus-per-gpu=14 --mem-per-gpu=250000M -t 10 -o /dev/null --wrap 'sleep 600'",
                     user="labuser").stdout.strip()
        ids.append(int(out))
    for j in ids:
        lab.wait_state(j, "RUNNING", timeout=60)
    return ids


def running_nodes(lab, job_id: int) -> list[str]:
    lab.wait_state(job_id, "RUNNING", timeout=90)
    return list(lab.backend().job(job_id).nodes)


def test_sixteen_gpus_with_one_leaf_land_under_one_leaf(lab, site, clean):
    d = workdir(lab)
    plan, script = plan_for(lab, site, "mpi", gpus=16, command=("sleep", "60"))
    assert plan.switches == 1 and "#SBATCH --switches=1@00:02:00" in script
    job = sbatch(lab, script, d)
    nodes = running_nodes(lab, job)
    leaves = leaf_map(lab)
    assert len(nodes) == 2 and len({leaves[h] for h in nodes}) == 1, nodes
    # Slurm recorded the constraint the plan asked for
    assert "Switches=1@00:02:00" in lab.sh(f"scontrol show job {job}").stdout


def test_a_full_cluster_predicts_the_hosts_a_preempting_job_gets(lab, site, clean):
    """Item 5 of issue 10: with every host busy, a production plan used to say "must queue" with the empty
    cluster's hosts and a 0 GB/s estimate, then start at once by preempting a scavenger job elsewhere. The plan
    now names the scavenger job and its hosts, and Slurm puts the job there."""
    d = workdir(lab)
    # labuser: 6 hosts of production (48 GPUs: the 16 planned below keep it within the tier's 64 per user)
    hold_hosts(lab, [f"gpu{i:02d}" for i in range(1, 7)], d)
    held = []
    for i in range(7, 15):  # root: 8 more hosts of production
        held.append(int(lab.sh(f"cd {d} && sbatch --parsable -A vision --qos=production -w gpu{i:02d} -N1 "
                               f"--gpus-per-node=h100:8 -t 10 -o /dev/null --wrap 'sleep 600'").stdout.strip()))
    low_script = d / "low.sh"
    low_script.write_text("#!/bin/bash\n#SBATCH --signal=B:USR1@120\nsleep 600\n")
    low = int(lab.sh(f"cd {d} && sbatch --parsable -A vision --qos=scavenger --requeue -w gpu15,gpu16 -N2 "
                     f"--gpus-per-node=h100:8 -t 10 -o /dev/null {low_script}").stdout.strip())
    for j in held + [low]:
        lab.wait_state(j, "RUNNING", timeout=60)
    plan, script = plan_for(lab, site, "mpi", gpus=16, tier="production", command=("sleep", "30"))
    assert not plan.starts_now and plan.preempts == (low,), plan.notes
    assert set(plan.hosts) == {"gpu15", "gpu16"} and plan.quality.plan.gbytes > 0
    job = sbatch(lab, script, d)
    assert sorted(running_nodes(lab, job)) == ["gpu15", "gpu16"]


def test_the_default_tier_is_the_sites(lab, site, clean):
    """Item 3 of issue 10: without --tier a job used to go on production (the highest tier); it now goes on the
    site's default tier, as the accounting database's DefaultQOS does, and a job too big for it is refused in one
    line naming the tiers that would take it (never moved to another tier silently)."""
    d = workdir(lab)
    assert site.default_tier == "standard"
    p = lab.sh(f"cd {d} && {sys.executable} -m slurmtools submit --gpus 8 --name deftier --output-dir {d} --time 5m "
               f"-- sleep 1", user="labuser", check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    job = int(p.stdout.split("submitted job ")[1].split(":")[0])
    assert "QOS=standard" in lab.sh(f"scontrol show job {job}").stdout
    big = lab.sh(f"cd {d} && {sys.executable} -m slurmtools submit --gpus 64 --output-dir {d} -- sleep 1",
                 user="labuser", check=False)
    assert big.returncode == 2 and len(big.stderr.strip().splitlines()) == 1, big.stderr
    assert "over tier standard's 32 GPUs per job (the site's default tier)" in big.stderr
    assert "tiers that fit: production" in big.stderr
    assert lab.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=90) == "COMPLETED"
    assert lab.sh("squeue -h -o %i", check=False).stdout.strip() == ""  # the refused one never reached Slurm


def test_larger_than_a_leaf_spans_the_fewest_leaves(lab, site, clean):
    d = workdir(lab)
    plan, script = plan_for(lab, site, "mpi", gpus=48, tier="production", command=("sleep", "60"))
    assert (plan.nodes, plan.switches) == (6, 2)
    nodes = running_nodes(lab, sbatch(lab, script, d))
    leaves = leaf_map(lab)
    assert len(nodes) == 6 and len({leaves[h] for h in nodes}) == 2, nodes


def test_partly_busy_leaves_still_get_the_optimum_free_hosts_allow(lab, site, clean):
    d = workdir(lab)
    # one busy host under every leaf: 3 free hosts per leaf, so 4 hosts need 2 leaves now
    busy = hold_hosts(lab, ["gpu01", "gpu05", "gpu09", "gpu13"], d)
    plan, script = plan_for(lab, site, "mpi", gpus=32, tier="standard", command=("sleep", "60"))
    assert (plan.leaves_now, plan.leaves_empty, plan.switches) == (2, 1, 2)
    nodes = running_nodes(lab, sbatch(lab, script, d))
    leaves = leaf_map(lab)
    assert len({leaves[h] for h in nodes}) == 2 and not {"gpu01", "gpu05", "gpu09", "gpu13"} & set(nodes)
    for j in busy:
        lab.sh(f"scancel {j}")


def test_busy_host_moves_the_job_to_a_whole_free_leaf(lab, site, clean):
    d = workdir(lab)
    # gpu02 busy: leaf1 has 3 free hosts; a 4-host job fits under one of the other leaves, and the plan says so
    hold_hosts(lab, ["gpu02"], d)
    plan, script = plan_for(lab, site, "mpi", gpus=32, tier="standard", command=("sleep", "60"))
    assert plan.switches == 1 and "gpu02" not in plan.hosts
    nodes = running_nodes(lab, sbatch(lab, script, d))
    leaves = leaf_map(lab)
    assert len({leaves[h] for h in nodes}) == 1 and "gpu02" not in nodes


def test_torchrun_template_ranks_agree_across_two_nodes(lab, site, clean):
    d = workdir(lab)
    out = d / "ranks"
    out.mkdir()
    os.chmod(out, 0o777)
    plan, script = plan_for(lab, site, "torchrun", gpus=16, tier="production",
                            command=("python3", str(d / "check_rank.py"), str(out)),
                            template_vars=(("torchrun", f"python3 {d / 'fake_torchrun.py'}"),
                                           ("master_addr", "127.0.0.1")))
    job = sbatch(lab, script, d)
    state = lab.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=120)
    log = (d / f"plab-{job}.out").read_text() if (d / f"plab-{job}.out").exists() else ""
    assert state == "COMPLETED", log
    recs = [json.loads(p.read_text()) for p in sorted(out.glob("rank-*.json"))]
    assert sorted(int(r["RANK"]) for r in recs) == list(range(16))
    assert {r["WORLD_SIZE"] for r in recs} == {"16"}
    assert {r["MASTER_ADDR"] for r in recs} == {"127.0.0.1"}
    assert len({r["MASTER_PORT"] for r in recs}) == 1
    assert {r["SLURM_JOB_ID"] for r in recs} == {str(job)}
    by_node: dict[str, list[int]] = {}
    for r in recs:
        by_node.setdefault(r["SLURMD_NODENAME"], []).append(int(r["RANK"]))
    assert len(by_node) == 2 and sorted(len(v) for v in by_node.values()) == [8, 8]
    assert sorted(sorted(v) for v in by_node.values()) == [list(range(8)), list(range(8, 16))]
    # node ranks in the plan's rank order (static rendezvous): the first host of the leaf's order holds ranks 0-7
    assert sorted(by_node[min(by_node)]) == list(range(8)), by_node
    assert "--node-rank=" in script and "--rdzv-backend" not in script
    assert {r["NCCL_IB_HCA"] for r in recs} == {"=" + ",".join(f"mlx5_{i}" for i in range(8))}
    assert {r["SLURM_NTASKS"] for r in recs} == {"2"}  # one launcher task per node


def test_the_warning_never_comes_at_start_and_reaches_a_program_that_handles_it(lab, site, clean):
    """Item 2 of issue 10: `--tier standard --time 5m` used to get the tier's 5-minute lead and be warned at once.
    Here a 4-minute limit gets half of it as its lead.
    The lead now fits inside the limit; a 1-minute job gets @0 (warned at preemption only). --handles-signal passes
    the warning on to a program that asks for it."""
    d = workdir(lab)
    marker, short = d / "signal.marker", d / "short.marker"
    plan, script = plan_for(lab, site, "python", gpus=1, tier="standard", time_limit=240, handles_signal=True,
                            command=("python3", str(d / "sig_step.py"), str(marker), "URG"))
    assert plan.directive("signal").value == "B:URG@120"  # the site default warning signal
    assert any("shortened" in n for n in plan.notes)
    assert "#SBATCH --requeue" in script and "#SBATCH --open-mode=append" in script
    plan1, script1 = plan_for(lab, site, "python", gpus=1, tier="standard", time_limit=60, handles_signal=True,
                              command=("python3", str(d / "sig_step.py"), str(short), "URG"))
    assert plan1.directive("signal").value == "B:URG@0"
    job = sbatch(lab, script, d)
    job1 = sbatch(lab, script1, d)  # sbatch and the site's job_submit.lua accept @0
    lab.wait_state(job, "RUNNING", timeout=60)
    end = time.monotonic() + 200
    while time.monotonic() < end and not marker.exists():
        time.sleep(1)
    log = (d / f"plab-{job}.out").read_text() if (d / f"plab-{job}.out").exists() else ""
    assert marker.exists(), f"no signal reached the step; job output:\n{log}"
    assert marker.read_text().startswith("SIGURG ")
    # the step started, then the warning came: not at start (Slurm sends it when at most lead + 30 s remain and
    # checks every 30 s, so 120 s before the end of 240 s is 60 to 90 s in)
    waited = marker.stat().st_mtime - Path(str(marker) + ".started").stat().st_mtime
    assert waited >= 45, f"the warning came {waited:.0f} s after the step started"
    assert lab.wait_state(job, ("COMPLETED", "FAILED", "TIMEOUT"), timeout=60) == "COMPLETED"
    # the 1-minute job ran to its limit without a warning
    assert lab.wait_state(job1, ("COMPLETED", "FAILED", "TIMEOUT"), timeout=120) == "TIMEOUT"
    assert Path(str(short) + ".started").exists() and not short.exists()


def test_a_plain_program_on_a_preemptible_tier_is_requeued_intact(lab, site, clean, tmp_path):
    """Item 1 of issue 10: a scavenger job running a program that knows nothing of signals (`sleep`) used to die of
    the forwarded SIGUSR1 (FAILED 10:0). Now Slurm requeues it, it runs again to the end, and sacct and the report
    both say "preempted"."""
    d = workdir(lab)
    since = datetime.now().replace(microsecond=0)
    lab.sh("sacctmgr -i modify qos where name=scavenger set GraceTime=5")
    job = high = None
    try:
        cmd = (f"cd {d} && {sys.executable} -m slurmtools submit --gpus 8 --tier scavenger --time 10m "
               f"--name plain --output-dir {d} -- bash -c 'echo \"start run $SLURM_RESTART_COUNT\"; "
               f"if [ \"${{SLURM_RESTART_COUNT:-0}}\" = 0 ]; then sleep 300; else sleep 2; fi; "
               f"echo \"end run $SLURM_RESTART_COUNT\"'")
        p = lab.sh(cmd, user="labuser", check=False)
        assert p.returncode == 0, p.stdout + p.stderr
        job = int(p.stdout.split("submitted job ")[1].split(":")[0])
        lab.wait_state(job, "RUNNING", 60)
        node = lab.sh(f"squeue -h -j {job} -o %N").stdout.strip()
        out = d / f"plain-{job}.out"
        end = time.monotonic() + 60
        while time.monotonic() < end and "start run" not in (out.read_text() if out.exists() else ""):
            time.sleep(0.5)
        high = int(lab.sh(f"cd {d} && sbatch --parsable -A vision --qos=production -w {node} --exclusive "
                          f"--gres=gpu:h100:8 -o /dev/null --wrap 'sleep 5'", user="labuser").stdout.strip())
        lab.wait_state(job, "PENDING", 120)  # requeued: back in the queue, not FAILED
        lab.wait_state(high, "COMPLETED", 120)
        lab.wait_nodes_idle()
        lab.sh(f"scontrol update JobId={job} StartTime=now")
        assert lab.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=120) == "COMPLETED"
        lab.wait_accounting(job)
    finally:
        for j in (job, high):
            if j:
                subprocess.run(["scancel", str(j)], env=lab.env)
        lab.sh("sacctmgr -i modify qos where name=scavenger set GraceTime=60")
    text = out.read_text()
    assert "User defined signal" not in text, text
    assert "not passed on" in text or "it is stopped now" in text, text
    assert text.count("start run") == 2 and text.count("end run 1") == 1, text  # the rerun ran to its end
    states = lab.sh(f"sacct -n -X -D -P -j {job} -o State").stdout.split()
    assert states == ["PREEMPTED", "COMPLETED"], states
    until = datetime.now().replace(microsecond=0) + timedelta(seconds=2)
    time.sleep(2)
    rep = tmp_path / "rep"
    r = subprocess.run([sys.executable, "-m", "slurmtools", "report", "--since", since.isoformat(),
                        "--until", until.isoformat(), "--format", "json", "--out", str(rep), "--history", "0"],
                       capture_output=True, text=True, env=lab.env, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads((rep / "report.json").read_text())
    tiers = {t["tier"]: t for t in doc["tables"]["preemption_by_tier"]}
    assert tiers["scavenger"]["preempted_runs"] == 1, tiers
    assert doc["summary"]["failed_runs"] == 0, doc["summary"]


def test_cli_plan_is_live_and_explain_reports_placement(lab, site, clean):
    d = workdir(lab)
    env = dict(lab.env)
    cli = [sys.executable, "-m", "slurmtools"]
    p = subprocess.run(cli + ["plan", "--json", "--gpus", "16", "--user", "labuser", "--account", "vision",
                              "--template", "mpi", "--", "sleep", "60"], capture_output=True, text=True, env=env,
                       cwd=d, timeout=60)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["live"] is True and data["note"] == "" and data["switches"] == 1
    job = sbatch(lab, data["script"], d)
    lab.wait_state(job, "RUNNING", timeout=60)
    e = subprocess.run(cli + ["explain", str(job), "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert e.returncode == 0, e.stderr
    r = json.loads(e.stdout)
    assert r["state"] == "RUNNING" and len(r["leaves"]) == 1
    assert r["quality"]["vs_empty"] == 1.0 and r["quality"]["leaves_used"] == 1
    t = subprocess.run(cli + ["explain", str(job)], capture_output=True, text=True, env=env, timeout=60)
    assert "placement: leaf" in t.stdout and "quality:" in t.stdout
    bad = subprocess.run(cli + ["explain", "999999"], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and "999999" in bad.stderr



def test_cli_submit_end_to_end(lab, site, clean):
    """`slurmtools submit` run by labuser with the example site: plan -> admission preflight -> sbatch -> job id
    and output path; the job's 16 ranks run under one leaf."""
    d = workdir(lab)
    cmd = (f"cd {d} && {sys.executable} -m slurmtools submit --gpus 16 --tier standard --template mpi --name e2e "
           f"--output-dir {d} --time 5m -- bash -c 'echo \"rank $SLURM_PROCID on $SLURMD_NODENAME\"'")
    p = lab.sh(cmd, user="labuser", check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "admission preflight:" in p.stdout
    job = int(p.stdout.split("submitted job ")[1].split(":")[0])
    out_path = Path(p.stdout.split("output: ")[1].strip())
    assert out_path == d / f"e2e-{job}.out"
    assert lab.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=90) == "COMPLETED"
    lines = [ln for ln in out_path.read_text().splitlines() if ln.startswith("rank ")]
    assert len(lines) == 16  # 2 hosts x 8 ranks (mpi template: one task per GPU)
    nodes = {ln.split(" on ")[1] for ln in lines}
    leaves = leaf_map(lab)
    assert len(nodes) == 2 and len({leaves[h] for h in nodes}) == 1
    # the rank order the template wrote (SLURM_HOSTFILE, srun --distribution=arbitrary): each host's 8 ranks are
    # consecutive, hosts in their leaf's order
    ranks = {h: sorted(int(ln.split()[1]) for ln in lines if ln.endswith(f" on {h}")) for h in nodes}
    first, second = sorted(nodes)
    assert ranks[first] == list(range(8)) and ranks[second] == list(range(8, 16)), ranks
    # a refusal from the planner reaches the user as one line, before anything is submitted
    bad = lab.sh(f"cd {d} && {sys.executable} -m slurmtools submit --gpus 40 --tier standard -- true",
                 user="labuser", check=False)
    assert bad.returncode == 2 and "over tier standard's 32" in bad.stderr and "Traceback" not in bad.stderr


def test_submit_keeps_the_plan_against_the_users_sbatch_variables(lab, site, clean):
    """sbatch takes SBATCH_* variables over the script's #SBATCH lines: a shell's SBATCH_PARTITION, SBATCH_TIMELIMIT
    or SBATCH_QOS sent `slurmtools submit`'s job elsewhere than planned and checked. They are not passed to sbatch,
    and one warning names them; the job Slurm holds is the planned one."""
    d = workdir(lab)
    cmd = (f"cd {d} && export SBATCH_PARTITION=nonexistent SBATCH_TIMELIMIT=1 SBATCH_QOS=scavenger && "
           f"{sys.executable} -m slurmtools submit --gpus 1 --tier production --name envjob --output-dir {d} "
           f"--time 7m -- sleep 1")
    p = lab.sh(cmd, user="labuser", check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    warn = [ln for ln in p.stderr.splitlines() if ln.startswith("slurmtools: warning: not passed to sbatch: ")]
    assert len(warn) == 1 and "SBATCH_PARTITION, SBATCH_QOS, SBATCH_TIMELIMIT" in warn[0], p.stderr
    job = int(p.stdout.split("submitted job ")[1].split(":")[0])
    fields = dict(tok.split("=", 1) for tok in lab.sh(f"scontrol show job -o {job}").stdout.split() if "=" in tok)
    assert (fields["Partition"], fields["QOS"], fields["TimeLimit"]) == ("gpu", "production", "00:07:00"), fields
