"""Admission policies against the real Slurm 22.05 lab: the generated job_submit.lua, loaded by slurmctld, must
reach the same decisions as the Python policies with the same messages; sync-qos must converge on the real
accounting database.

Requests are real `sbatch -H` submissions by labuser (held, then cancelled); no part of Slurm is faked.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "policy"))
from policy_cases import SIG, edge_cases, random_cases  # noqa: E402

from slurmtools.policy import JobRequest, PolicyContext, RequestError, evaluate, load_policies  # noqa: E402
from slurmtools.policy.engine import load_fabric_for  # noqa: E402
from slurmtools.policy.usage import render_usage_lua  # noqa: E402
from slurmtools.render.job_submit import render_job_submit  # noqa: E402
from slurmtools.site import load_site  # noqa: E402
from labtools import install_lua  # noqa: E402

USER = "labuser"
FAILED = "sbatch: error: Batch job submission failed: Unspecified error"



@pytest.fixture(scope="module")
def policy_lab(lab):
    """The lab with our own rendering of the example site's policies; the lab's file is restored after."""
    site = load_site(None)
    fabric = load_fabric_for(site)
    path = lab.dir / "etc" / "job_submit.lua"
    saved = path.read_text() if path.exists() else None
    usage_file = lab.dir / "etc" / "policy_test_usage.lua"
    audit = lab.dir / "log" / "policy_test_audit.jsonl"
    usage_file.unlink(missing_ok=True)
    audit.unlink(missing_ok=True)
    text = render_job_submit(site, fabric, usage_file=str(usage_file), audit_log=str(audit), usage_ttl=0).text
    install_lua(lab, text)
    work = lab.jobs_dir / "policy-diff"
    work.mkdir(exist_ok=True)
    os.chmod(work, 0o1777)
    yield {"site": site, "fabric": fabric, "usage_file": usage_file, "audit": audit, "work": work}
    if saved is not None:
        install_lua(lab, saved)
    usage_file.unlink(missing_ok=True)


def submit_all(lab, work: Path, cases, tag: str) -> list[dict]:
    """sbatch -H every case as labuser in one shell; return rc, stdout, stderr per case. Cancels what it made."""
    lines = ["cd " + shlex.quote(str(work))]
    for i, (args, script) in enumerate(cases):
        sp = work / f"{tag}-{i}.sh"
        sp.write_text(script)
        os.chmod(sp, 0o644)
        argv = " ".join(shlex.quote(a) for a in ["sbatch", "-H", "--parsable", "-o", "/dev/null", *args, str(sp)])
        lines.append(f"{argv} >{tag}-{i}.out 2>{tag}-{i}.err; echo $? >{tag}-{i}.rc")
    runner = work / f"{tag}-run.sh"
    runner.write_text("\n".join(lines) + "\n")
    os.chmod(runner, 0o644)
    lab.sh(f"bash {shlex.quote(str(runner))}", user=USER, timeout=600)
    out = []
    for i in range(len(cases)):
        rc = int((work / f"{tag}-{i}.rc").read_text().strip())
        out.append({"rc": rc, "out": (work / f"{tag}-{i}.out").read_text().strip(),
                    "err": (work / f"{tag}-{i}.err").read_text().strip()})
    ids = [o["out"].split(";")[0] for o in out if o["rc"] == 0]
    jobs = {}
    if ids:
        q = lab.sh(f"squeue -h -t all -j {','.join(ids)} -o '%i|%P|%q'").stdout
        for line in q.splitlines():
            jid, part, qos = line.strip().split("|")
            jobs[jid] = (part, qos)
        lab.sh(f"scancel {' '.join(ids)}")
    for o in out:
        if o["rc"] == 0:
            o["partition"], o["qos"] = jobs[o["out"].split(";")[0]]
    return out


def compare(cases, results, policies, ctx):
    """Python decision vs what slurmctld did. Returns (denied, allowed, refused later by Slurm itself)."""
    denied = allowed = slurm_own = client = 0
    mismatches = []
    for (args, script), res in zip(cases, results):
        err_lines = res["err"].splitlines()
        try:
            req = JobRequest.from_sbatch(args, script=script, user=USER, default_account="vision")
        except RequestError as exc:
            # sbatch refuses these itself, before the controller: job_submit.lua never sees them
            client += 1
            if res["rc"] == 0 or FAILED in err_lines:
                mismatches.append((args, f"client-side: {exc}", res))
            continue
        d = evaluate(req, policies, ctx)
        if d.action == "deny":
            denied += 1
            if res["rc"] == 0 or err_lines[:1] != [f"sbatch: error: {d.message}"] or err_lines[-1:] != [FAILED]:
                mismatches.append((args, d.message, res))
            continue
        if res["rc"] == 0:
            allowed += 1
            want = (d.changes.get("partition", req.partition), d.changes.get("qos", req.qos))
            if (res["partition"], res["qos"]) != want:
                mismatches.append((args, f"allow {want}", res))
        elif FAILED in err_lines:
            mismatches.append((args, "allow", res))  # our Lua refused (Unspecified error) where Python allows
        else:
            slurm_own += 1  # admitted by the Lua, then refused by Slurm's own checks (e.g. no association)
    assert not mismatches, "\n".join(repr(m) for m in mismatches[:10]) + f"\n({len(mismatches)} mismatches)"
    assert client <= len(cases) // 10, client
    return denied, allowed, slurm_own


def test_differential_python_vs_job_submit_lua(lab, policy_lab):
    site, fabric = policy_lab["site"], policy_lab["fabric"]
    cases = edge_cases() + random_cases(400, seed=11)
    assert len(cases) >= 300
    results = submit_all(lab, policy_lab["work"], cases, "diff")
    ctx = PolicyContext(site=site, fabric=fabric, usage=None)
    denied, allowed, slurm_own = compare(cases, results, load_policies(site, fabric), ctx)
    print(f"\ndifferential: {len(cases)} requests: {denied} refused with identical messages, {allowed} admitted with "
          f"identical partition/QoS, {slurm_own} admitted by the Lua then refused by Slurm itself, the rest refused "
          f"by sbatch before the controller")
    assert denied >= 100 and allowed >= 80 and slurm_own <= len(cases) // 10, (denied, allowed, slurm_own)
    # every refusal reached the audit log from inside slurmctld
    from slurmtools import audit as audit_log

    events = list(audit_log.read(policy_lab["audit"], strict=True))
    refused = [e for e in events if e["event"] == "admission_refused"]
    assert len(refused) >= denied and all(e["user"] == USER for e in refused)


def test_budgets_from_the_usage_file(lab, policy_lab):
    site, fabric = policy_lab["site"], policy_lab["fabric"]
    month = datetime.now().strftime("%Y-%m")
    usage = {"vision": 20000.0, "nlp": 40000.5}  # vision routes to scavenger, nlp is refused
    policy_lab["usage_file"].write_text(render_usage_lua(usage, month))
    try:
        cases = [c for c in edge_cases() if "students" not in c[0]] + random_cases(60, seed=23)
        results = submit_all(lab, policy_lab["work"], cases, "budget")
        ctx = PolicyContext(site=site, fabric=fabric, usage=usage, month=month)
        denied, allowed, _ = compare(cases, results, load_policies(site, fabric), ctx)
        assert denied > 20 and allowed > 5
        rerouted = [r for r in results if r["rc"] == 0 and r["qos"] == "scavenger"]
        assert rerouted, "no vision job was re-routed to scavenger"
    finally:
        policy_lab["usage_file"].unlink(missing_ok=True)


def test_test_only_runs_job_submit_lua_too(lab, policy_lab):
    """Measured on 22.05: `sbatch --test-only` passes through job_submit.lua, with the same message (the second
    line differs: `allocation failure` instead of `Batch job submission failed`)."""
    work = policy_lab["work"]
    sp = work / "testonly.sh"
    sp.write_text(SIG)
    os.chmod(sp, 0o644)
    p = lab.sh(f"sbatch --test-only -A vision -q standard --gpus=h100:33 {sp}", user=USER, check=False)
    assert p.returncode != 0
    assert p.stderr.splitlines()[0] == "sbatch: error: tier standard allows at most 32 GPUs per job; this job asks for 33"
    p = lab.sh(f"sbatch --test-only -A vision -q standard --gpus=h100:32 -N4 {sp}", user=USER, check=False)
    assert p.returncode == 0 and "to start at" in p.stderr


def test_lua_internal_error_refuses_the_job_by_default(lab, policy_lab):
    """A broken rule table makes the evaluator fail inside slurmctld: with the default fail_mode "closed" the job
    is refused (tests/hostile/test_admission_fail_mode.py covers both modes through a real input)."""
    site, fabric = policy_lab["site"], policy_lab["fabric"]
    good = (lab.dir / "etc" / "job_submit.lua").read_text()
    broken = good.replace("local RULES = {", "local RULES = { { kind = \"nosuch\", params = {} },", 1)
    assert broken != good
    install_lua(lab, broken)
    try:
        sp = policy_lab["work"] / "broken.sh"
        sp.write_text("#!/bin/bash\nsleep 1\n")
        os.chmod(sp, 0o644)
        p = lab.sh(f"sbatch -H --parsable -o /dev/null -A vision --gres=gpu:8 {sp}", user=USER, check=False)
        if p.returncode == 0:
            lab.sh(f"scancel {p.stdout.strip().split(';')[0]}")
        log = (lab.dir / "log" / "slurmctld.log").read_text()
        assert p.returncode != 0 and "slurmtools policy: internal error (fail_mode closed), job refused" in log
    finally:
        install_lua(lab, good)


def test_sync_qos_converges_on_the_real_database(lab, tmp_path):
    """Change one tier's grace time in a temp site file: dry-run shows exactly that change, apply, then no-op."""
    from slurmtools.policy.qos_sync import apply, plan_qos_sync, read_qos
    from slurmtools.render.accounting import as_shell

    src = Path(load_site(None).source)
    text = src.read_text()
    fabric_line = next(x for x in text.splitlines() if x.startswith("fabric"))
    text = text.replace(fabric_line, f'fabric = "{(src.parent / "../../topology/example/fabric.toml").resolve()}"')
    run = lab.backend().run
    base = tmp_path / "site.toml"
    base.write_text(text)
    site = load_site(base)
    apply(plan_qos_sync(site, read_qos(run)), run)  # start from the site as written
    assert plan_qos_sync(site, read_qos(run)) == []
    changed = tmp_path / "site2.toml"
    changed.write_text(text.replace('grace_time = "5m"', 'grace_time = "7m"', 1))
    assert as_shell(plan_qos_sync(load_site(changed), read_qos(run))).count("\n") == 1
    env = dict(lab.env, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    cli = [sys.executable, "-m", "slurmtools", "admin", "sync-qos", "--site", str(changed)]
    import subprocess

    dry = subprocess.run(cli + ["--dry-run"], capture_output=True, text=True, env=env, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout == "sacctmgr -i modify qos where name=standard set GraceTime=420\n"
    chk = subprocess.run(cli + ["--check"], capture_output=True, text=True, env=env, timeout=120)
    assert (chk.returncode, chk.stdout) == (1, dry.stdout), chk.stderr
    assert chk.stderr.strip() == ("slurmtools: error: the accounting database's QoS differ from the site's tiers: 1 "
                                  "sacctmgr command(s) above would make them match (run `slurmtools admin sync-qos`)")
    assert read_qos(run)["standard"]["GraceTime"] == "00:05:00"  # dry-run changed nothing
    done = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert read_qos(run)["standard"]["GraceTime"] == "00:07:00"
    again = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=120)
    assert again.stdout.strip() == "QoS already match the site's tiers: nothing to do"
    chk = subprocess.run(cli + ["--check"], capture_output=True, text=True, env=env, timeout=120)
    assert chk.returncode == 0 and chk.stdout.strip() == again.stdout.strip(), chk.stderr
    # a QoS without the tier's node limit (as sync-qos left it before node= was rendered) is drift
    run(["sacctmgr", "-i", "modify", "qos", "where", "name=standard", "set", "MaxTRESPerJob=node=-1"])
    chk = subprocess.run(cli + ["--check"], capture_output=True, text=True, env=env, timeout=120)
    assert (chk.returncode, chk.stdout) == (1, "sacctmgr -i modify qos where name=standard set "
                                               "MaxTRESPerJob=gres/gpu=32,node=4\n"), (chk.stdout, chk.stderr)
    # put the lab back as the example site has it
    apply(plan_qos_sync(site, read_qos(run)), run)
    assert plan_qos_sync(site, read_qos(run)) == []


def test_usage_refresh_and_replay_from_real_accounting(lab, tmp_path):
    """A real GPU job shows up in refresh-usage's table and in a replay of a stricter candidate site."""
    import subprocess

    sp = lab.jobs_dir / "policy-usage.sh"
    sp.write_text("#!/bin/bash\nsleep 3\n")
    os.chmod(sp, 0o644)
    p = lab.sh(f"sbatch --parsable -o /dev/null -A vision -q production --gres=gpu:h100:8 -t 10 {sp}", user=USER)
    jid = int(p.stdout.strip().split(";")[0])
    lab.wait_state(jid, {"COMPLETED"}, timeout=120)
    lab.wait_accounting(jid)
    env = dict(lab.env, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    out = tmp_path / "usage.lua"
    r = subprocess.run([sys.executable, "-m", "slurmtools", "admin", "policy", "refresh-usage", "-o", str(out)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert f'month = "{datetime.now().strftime("%Y-%m")}"' in text and '["vision"] = ' in text
    vision = float(text.split('["vision"] = ')[1].split(",")[0])
    assert vision >= 8 * 3 / 3600.0  # at least this job's 8 GPUs x 3 s

    src = Path(load_site(None).source)
    site_text = src.read_text().replace("max_gpus_per_job = 64", "max_gpus_per_job = 4", 1)
    site_text = site_text.replace('fabric = "../../topology/example/fabric.toml"',
                                  f'fabric = "{(src.parent / "../../topology/example/fabric.toml").resolve()}"')
    cand = tmp_path / "strict.toml"
    cand.write_text(site_text)
    r = subprocess.run([sys.executable, "-m", "slurmtools", "admin", "policy", "replay", "--site", str(cand),
                        "--since", "1d", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    mine = [c for c in rep["changed"] if c["job_id"] == str(jid)]
    assert mine and mine[0]["message"] == "tier production allows at most 4 GPUs per job; this job asks for 8"


def test_preflight_with_the_real_backend(lab, tmp_path, monkeypatch):
    """The CLI path: default account from sacctmgr, usage from sacct, same message as the Lua gives."""
    from slurmtools.policy import preflight

    monkeypatch.setenv("SLURMTOOLS_AUDIT_LOG", str(tmp_path / "decisions.jsonl"))
    site = load_site(None)
    d = preflight(JobRequest.from_sbatch(["-q", "production", "--gres=gpu:h100:1"], user="carol"), site, lab.backend())
    assert d.message == "account students may not use tier production (its tiers: standard, scavenger)"
    d = preflight(JobRequest.from_sbatch(["-q", "production", "--gres=gpu:h100:1"], user=USER), site, lab.backend())
    assert d.action == "modify" and d.changes == {"partition": "gpu"}  # labuser's default account is vision


def test_srun_meets_the_same_rules(lab, policy_lab):
    """Interactive jobs go through job_submit.lua too: same message after `srun: error:`; no script, so no
    checkpoint signal is asked for."""
    p = lab.sh("srun -A vision --gres=gpu:8 -t 1 true", user=USER, check=False)
    assert p.returncode != 0
    assert p.stderr.splitlines()[0] == ("srun: error: partition gpu needs a GPU type: ask for e.g. --gres=gpu:h100:N "
                                        "instead of an untyped GPU count (GPU types here: h100)")
    p = lab.sh("srun -A vision -q standard --gres=gpu:h100:1 -t 1 hostname", user=USER, check=False, timeout=120)
    assert p.returncode == 0, p.stderr


def test_slurm_spreads_the_gpus_of_a_job_without_nodes_or_tasks(lab):
    """What admission counts for `--gpus=N` with neither -N nor -n, as the real slurmctld allocates it: with one
    free GPU a node, `--gpus=h100:4` runs on 4 nodes as 4 tasks (each node with its --mem), `-n 1 --gpus=h100:4`
    does not start (one task, one node), and `--gpus=h100:12` asks for 2 nodes at least (8 a node). Past
    admission: a pass-through job_submit.lua (the rendered one refuses such jobs where the spread breaks a limit)."""
    sub = "sbatch --parsable -p gpu -q production -t 3 -o /dev/null"
    saved = (lab.dir / "etc" / "job_submit.lua").read_text()
    install_lua(lab, "function slurm_job_submit(d, p, u) return slurm.SUCCESS end\n"
                     "function slurm_job_modify(d, r, p, u) return slurm.SUCCESS end\nreturn slurm.SUCCESS\n")
    try:
        # 7 of 8 GPUs taken on every node, by two users (production allows 64 GPUs a user)
        fillers = [lab.sh(f"{sub} -A {acct} -w gpu{i:02d} -N 1 --gres=gpu:h100:7 --wrap 'sleep 120'",
                          user=who).stdout.strip()
                   for i in range(1, 17) for who, acct in ((("bob", "nlp") if i <= 8 else ("alice", "vision")),)]
        for f in fillers:
            lab.wait_state(int(f), "RUNNING", 60)
        spread = int(lab.sh(f"{sub} -A nlp --gpus=h100:4 --mem=2G --wrap 'sleep 30'", user=USER).stdout.strip())
        one = int(lab.sh(f"{sub} -A nlp --gpus=h100:4 -n 1 --wrap 'sleep 30'", user=USER).stdout.strip())
        lab.wait_state(spread, "RUNNING", 60)
        rec = lab.sh(f"scontrol show job -o {spread}").stdout
        assert " NumNodes=4 " in rec and " NumTasks=4 " in rec, rec
        assert re.search(r"TRES=\S*mem=8G\S*gres/gpu:h100=4(,|\s)", rec), rec   # --mem per node, 4 nodes
        lab.sh(f"scancel {spread}")
        # 12 GPUs, one free a node, production's 8 nodes at most: it waits, and asks for 2 nodes at least
        twelve = int(lab.sh(f"{sub} -A nlp --gpus=h100:12 --wrap 'sleep 30'", user=USER).stdout.strip())
        time.sleep(6)   # a scheduling pass or more (sched_interval=5 in the lab): 3 GPUs free on no node
        rec = lab.sh(f"scontrol show job -o {one}").stdout
        assert "JobState=PENDING" in rec and " NumNodes=1 " in rec, rec
        rec = lab.sh(f"scontrol show job -o {twelve}").stdout
        assert "JobState=PENDING" in rec and " NumNodes=2 " in rec, rec
    finally:
        install_lua(lab, saved)
        for who in (USER, "bob", "alice"):
            lab.sh("scancel -u " + who, check=False)


def test_slurm_gives_spread_and_exclusive_jobs_more_gpus_than_they_name(lab):
    """What admission counts, as the real slurmctld allocates it (not the policy: Slurm's own behaviour, which the
    count follows): without -N, `-n 8 --gres=gpu:h100:1` is spread over several nodes when one lacks the free
    CPUs, and each node brings its GPU (22.05: 4 nodes, 25.11: 2, measured), at most as many nodes as the tier
    QoS's node limit; `--exclusive` gets all 8 GPUs of its node with or without a GPU request, `--exclusive=user`
    only what it asks for."""
    sub = "sbatch --parsable -p gpu -q production -A nlp -t 3 -o /dev/null"
    path = lab.dir / "etc" / "job_submit.lua"
    saved = path.read_text()
    fillers = [lab.sh(f"{sub} -w gpu{i:02d} -N 1 -c 108 --wrap 'sleep 120'", user=USER).stdout.strip()
               for i in range(1, 17)]   # 4 free CPUs left on each node
    try:
        for f in fillers:
            lab.wait_state(int(f), "RUNNING", 60)
        spread = int(lab.sh(f"{sub} -n 8 --gres=gpu:h100:1 --wrap 'sleep 30'", user=USER).stdout.strip())
        lab.wait_state(spread, "RUNNING", 60)
        rec = lab.sh(f"scontrol show job -o {spread}").stdout
        nodes = int(rec.split(" NumNodes=")[1].split()[0].split("-")[0])
        assert nodes > 1, rec
        # 22.05's TRES=, 25.11's AllocTRES= (sacct lags behind)
        assert re.search(rf"TRES=\S*gres/gpu:h100={nodes}(,|\s)", rec), rec
        # past admission (a pass-through job_submit.lua), slurmctld itself gives a job without -N no more nodes than
        # its tier QoS's node limit (MaxTRESPerJob node=, as the lab's QoS are rendered): 32 one-CPU tasks need 8
        # nodes here; standard (4 nodes) does not start it, production (8) starts it on 8
        install_lua(lab, "function slurm_job_submit(d, p, u) return slurm.SUCCESS end\n"
                         "function slurm_job_modify(d, r, p, u) return slurm.SUCCESS end\nreturn slurm.SUCCESS\n")
        time.sleep(1)
        lab.sh(f"scancel {spread}")
        capped = int(lab.sh(f"{sub.replace('production', 'standard')} -n 32 --gres=gpu:h100:1 --wrap 'true'",
                            user=USER).stdout.strip())
        wide = int(lab.sh(f"{sub} -n 32 --gres=gpu:h100:1 --wrap 'sleep 30'", user=USER).stdout.strip())
        lab.wait_state(wide, "RUNNING", 60)
        assert " NumNodes=8 " in lab.sh(f"scontrol show job -o {wide}").stdout
        time.sleep(6)   # a scheduling pass or more (sched_interval=5 in the lab)
        rec = lab.sh(f"scontrol show job -o {capped}").stdout
        assert "JobState=PENDING" in rec, rec
    finally:
        install_lua(lab, saved)
        lab.sh("scancel -u " + USER, check=False)
    for opts, gpus in (("--exclusive --gres=gpu:h100:1", 8), ("--exclusive", 8), ("--exclusive=user --gres=gpu:h100:1", 1)):
        job = int(lab.sh(f"{sub} -N 1 {opts} --wrap 'sleep 30'", user=USER).stdout.strip())
        try:
            lab.wait_state(job, "RUNNING", 60)
            assert f"JOB_GRES=gpu:h100:{gpus}" in lab.sh(f"scontrol show job -d {job}").stdout, opts
        finally:
            lab.sh(f"scancel {job}", check=False)
