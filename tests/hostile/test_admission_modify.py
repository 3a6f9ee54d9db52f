"""Issue 12, class 7: `scontrol update job` meets the admission rules. The generated job_submit.lua's
slurm_job_modify checks the job as it would be after the change (job_rec's fields, then job_desc's: see
slurmtools.policy.update), and `slurmtools admin policy check-update JobId=N KEY=VALUE...` runs the same check
before the update is made. Before the fix slurm_job_modify allowed everything: a pending job could be raised past
its tier's GPU limit, moved to a tier it may not use that way, lose its GPU type or land on a preemptible tier
without a checkpoint signal.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmtools.policy import JobRequest, RequestError
from slurmtools.policy.request import INFINITE
from slurmtools.policy.update import modified_request, parse_show_job, parse_update, record_request, with_time_change

from .admission_support import example, lab_submit, lua_results, needs_lua, python_decision

USER = "labuser"
SIG = "#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsleep 1\n"
NOSIG = "#!/bin/bash\nsleep 1\n"
#: job_rec of a pending `-A vision -q production --gres=gpu:h100:8 -N 1 -t 60` job, as 22.05 shows it (measured)
REC = {"account": "vision", "qos": "production", "partition": "gpu", "time_limit": 60, "min_nodes": 1,
       "tres_per_node": "gres:gpu:h100:8", "script": NOSIG, "name": "job.sh",
       "tres_fmt_req_str": "cpu=1,mem=1G,node=1,billing=1,gres/gpu=8,gres/gpu:h100=8"}
UNSET = {"min_nodes": 4294967294, "num_tasks": 4294967294, "time_limit": 4294967294, "ntasks_per_node": 65534,
         "cpus_per_task": 65534, "sockets_per_node": 65534, "user_name": "labuser"}


def test_update_arguments_are_read_or_refused_by_name():
    u = parse_update(["JobId=12", "numnodes=4-6", "QOS=standard", "Gres=gpu:h100:2", "Priority=5", "TimeLimit=1:00:00"])
    assert (u.job_id, u.change.min_nodes, u.change.qos, u.change.tres_per_node, u.change.time_limit, u.ignored) == \
        ("12", 4, "standard", "gres:gpu:h100:2", 60, ("Priority",))
    for args, msg in ((["NumNodes=4"], "needs JobId=<number>"), (["JobId=1", "NumNodes=many"], "NumNodes: expected"),
                      (["JobId=1", "MinMemoryNode=lots"], "MinMemoryNode: expected memory"), (["JobId=1", "x"], "'x'")):
        with pytest.raises(RequestError, match=msg):
            parse_update(args)


def test_relative_time_limit_is_made_absolute_as_scontrol_does():
    """`TimeLimit=+N/-N`: scontrol adds it to the job's limit before it sends the update (update_job.c), so the Lua
    sees the sum; the preflight does the same, and refuses what scontrol refuses."""
    assert with_time_change(parse_update(["JobId=1", "TimeLimit=+30"]), 60).time_limit == 90
    assert with_time_change(parse_update(["JobId=1", "TimeLimit=-1:00:00"]), 90).time_limit == 30
    assert with_time_change(parse_update(["JobId=1", "TimeLimit=+1-00:00:00"]), 60).time_limit == 60 + 24 * 60
    # the last TimeLimit= wins, absolute or relative
    assert with_time_change(parse_update(["JobId=1", "TimeLimit=+30", "TimeLimit=45"]), 60).time_limit == 45
    assert with_time_change(parse_update(["JobId=1", "TimeLimit=45", "TimeLimit=+30"]), 60).time_limit == 90
    for args, limit, msg in ((["TimeLimit=+30"], INFINITE, "UNLIMITED or unknown"),
                             (["TimeLimit=+30"], None, "UNLIMITED or unknown"),
                             (["TimeLimit=-2:00:00"], 60, "decrement of 120 min is larger than the job's limit of 60"),
                             (["TimeLimit=+UNLIMITED"], 60, "UNLIMITED is not an increment")):
        with pytest.raises(RequestError, match=msg):
            with_time_change(parse_update(["JobId=1", *args]), limit)
    # and the tier's wall-time rule sees the sum: production allows 2 days
    show = {"Account": "vision", "QOS": "production", "Partition": "gpu", "TimeLimit": "1-23:00:00", "NumNodes": "1",
            "TresPerNode": "gres:gpu:h100:8", "TRES": REC["tres_fmt_req_str"], "UserId": "labuser(1001)"}
    current, tres = record_request(show, script=REC["script"])
    for delta, action in (("+59", "allow"), ("+2:00:00", "deny")):
        req, _ = modified_request(current, with_time_change(parse_update(["JobId=1", "TimeLimit=" + delta]),
                                                            current.time_limit), tres)
        assert python_decision(req).action == action, (delta, python_decision(req))


def _python(rec: dict, change: dict):
    show = {"Account": rec["account"], "QOS": rec["qos"], "Partition": rec["partition"], "TimeLimit": "01:00:00",
            "NumNodes": str(rec["min_nodes"]), "TresPerNode": rec.get("tres_per_node", ""),
            "TRES": rec["tres_fmt_req_str"], "UserId": "labuser(1001)"}
    current, tres = record_request(show, script=rec["script"])
    req, touched = modified_request(current, JobRequest(**change), tres)
    return python_decision(req) if touched else None


@needs_lua
def test_modify_same_decision_in_python_and_lua(tmp_path):
    changes = [{"min_nodes": 9}, {"qos": "standard"}, {"tres_per_node": "gres:gpu:2"}, {"time_limit": 30},
               {"min_nodes": 8}, {"tres_per_job": "gres:gpu:h100:65"}, {"name": "x"}]
    cases = [{"modify": True, "rec": REC, "desc": {**UNSET, **c}} for c in changes]
    for name, got in lua_results(cases, tmp_path).items():
        for c, lua in zip(changes, got):
            d = _python(REC, c)
            want = (-1, d.message) if d is not None and d.action == "deny" else (0, "")
            assert (lua["rc"], lua["user"]) == want, (name, c, lua)
    assert _python(REC, {"min_nodes": 9}).message == \
        "tier production allows at most 64 GPUs per job; this job asks for 72"
    assert _python(REC, {"qos": "standard"}).policy == "checkpoint_signal"
    assert _python(REC, {"tres_per_node": "gres:gpu:2"}).policy == "gpu_type"
    assert _python(REC, {"time_limit": 30}).action == "allow" and _python(REC, {"name": "x"}) is None


def test_per_task_job_counts_its_tasks_from_slurms_gpus():
    rec = {**REC, "tres_per_node": "", "script": SIG, "tres_fmt_req_str": "cpu=32,node=4,gres/gpu=32,gres/gpu:h100=32"}
    show = {"Account": "vision", "QOS": "standard", "Partition": "gpu", "TimeLimit": "1:00:00", "NumNodes": "4",
            "TresPerTask": "gres:gpu:h100:1", "TRES": rec["tres_fmt_req_str"]}
    current, tres = record_request(show, script=SIG)
    req, _ = modified_request(current, JobRequest(tres_per_task="gres:gpu:h100:2"), tres)
    assert (req.num_tasks, req.gpus, req.min_cpus) == (32, 64, 32)
    assert python_decision(req).message == "tier standard allows at most 32 GPUs per job; this job asks for 64"


# ---- in the lab ---------------------------------------------------------------------------------------------


def _submit(lab, args: str, script: str) -> str:
    """The held job's id (admitted: the submission must succeed)."""
    return lab_submit(lab, args, script, user=USER, check=True).stdout.strip().split(";")[0]


def _check_update(lab, job: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "slurmtools", "admin", "policy", "check-update", "--no-usage",
                           f"JobId={job}", *args], capture_output=True, text=True, env=lab.env, timeout=120)


@pytest.fixture
def enforcing(lab):
    """The lab with this checkout's rendering of the example site's policies; the lab's file is restored after."""
    from slurmtools.render.job_submit import render_job_submit

    site, fabric, _ = example()
    path = lab.dir / "etc" / "job_submit.lua"
    saved = path.read_text()
    old = int(path.stat().st_mtime)
    path.write_text(render_job_submit(site, fabric).text)
    t = max(int(time.time()), old + 1)
    os.utime(path, (t, t))
    yield
    path.write_text(saved)
    t = max(int(time.time()), t + 1)
    os.utime(path, (t, t))


@pytest.mark.lab
@pytest.mark.parametrize("args,script,update,policy,field", [
    ("-A vision -q production --gres=gpu:h100:8", NOSIG, "NumNodes=9", "tier_limits", "NumNodes"),  # past its GPUs
    ("-A vision -q production --gres=gpu:h100:8 -N 5", SIG, "QOS=standard", "tier_limits", "QOS"),  # another tier
    ("-A vision -q production --gres=gpu:h100:1", NOSIG, "Gres=gpu:2", "gpu_type", "TresPerNode"),  # loses its type
    ("-A vision -q production --gres=gpu:h100:1 -t 60", NOSIG, "QOS=standard", "checkpoint_signal", "QOS"),
])
def test_scontrol_update_is_refused_like_submission(lab, enforcing, args, script, update, policy, field):
    job = _submit(lab, args, script)
    try:
        before = parse_show_job(lab.sh(f"scontrol show job -o {job}").stdout).get(field)
        pre = _check_update(lab, job, update)
        assert pre.returncode == 1 and pre.stdout.startswith(f"refused by {policy}: "), pre.stdout + pre.stderr
        message = pre.stdout.strip().split(": ", 1)[1]
        mark = (lab.dir / "log" / "slurmctld.log").stat().st_size
        p = lab.sh(f"scontrol update JobId={job} {update}", user=USER, check=False)
        assert p.returncode != 0
        with open(lab.dir / "log" / "slurmctld.log") as fh:
            fh.seek(mark)
            log = fh.read()
        assert f"slurmtools policy: refused update ({policy}): {message}" in log
        after = parse_show_job(lab.sh(f"scontrol show job -o {job}").stdout).get(field)
        assert after == before  # nothing changed
    finally:
        lab.sh(f"scancel {job}")


@pytest.mark.lab
def test_a_job_named_like_its_own_fields_is_not_checked_as_another_job(lab, enforcing):
    """A name with blanks holding `QOS=... Partition=...` printed before the job's own fields in `scontrol show job
    -o`, and check-update judged that other job: the update of a standard job read as one of a production job.
    (25.11 also prints the sbatch line as SubmitLine=, so there the words stay in the record after a rename.)"""
    job = _submit(lab, "-A vision -q standard -J 'a b QOS=production Partition=evil' --gres=gpu:h100:1", SIG)
    try:
        shown = lab.sh(f"scontrol show job -o {job}").stdout
        assert "JobName=a b QOS=production Partition=evil " in shown and " QOS=standard " in shown, shown
        pre = _check_update(lab, job, "TimeLimit=30")
        assert pre.returncode == 2 and pre.stdout == "", pre.stdout + pre.stderr
        assert pre.stderr.count("\n") == 1 and "QOS= is printed twice" in pre.stderr, pre.stderr
    finally:
        lab.sh(f"scancel {job}")


@pytest.mark.lab
def test_scontrol_update_within_the_rules_passes(lab, enforcing):
    job = _submit(lab, "-A vision -q production --gres=gpu:h100:8", NOSIG)
    try:
        assert _check_update(lab, job, "TimeLimit=30").stdout.strip() == "allowed"
        lab.sh(f"scontrol update JobId={job} TimeLimit=30", user=USER)
        assert parse_show_job(lab.sh(f"scontrol show job -o {job}").stdout)["TimeLimit"] == "00:30:00"
        # a relative change: the preflight adds it to the job's limit as scontrol does
        assert _check_update(lab, job, "TimeLimit=+10").stdout.strip() == "allowed"
        lab.sh(f"scontrol update JobId={job} TimeLimit=+10", user=USER)
        assert parse_show_job(lab.sh(f"scontrol show job -o {job}").stdout)["TimeLimit"] == "00:40:00"
        pre = _check_update(lab, job, "TimeLimit=-1:00:00")
        assert pre.returncode == 2 and "larger than the job's limit of 40 min" in pre.stderr, pre.stderr
    finally:
        lab.sh(f"scancel {job}")


