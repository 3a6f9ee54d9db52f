"""The generated job_submit.lua, run by a real Lua 5.1 (Slurm 22.05 links liblua5.1) with a fake `slurm` table,
must reach the Python evaluator's decisions with byte-identical messages."""

import os
import json
from datetime import datetime

import pytest

from slurmtools.policy import JobRequest, PolicyContext, RequestError, evaluate
from slurmtools.policy.usage import render_usage_lua
from slurmtools.render.job_submit import render_job_submit
from policy_cases import edge_cases, random_cases
from policy_luarun import job_desc, run_lua

# a missing interpreter is a set-up failure, not a skip
pytestmark = pytest.mark.usefixtures("require_lua")


def _compare(site, fabric, tmp_path, usage):
    month = datetime.now().strftime("%Y-%m")
    usage_file = tmp_path / "usage.lua"
    if usage is not None:
        usage_file.write_text(render_usage_lua(usage, month))
    audit = tmp_path / "audit.jsonl"
    text = render_job_submit(site, fabric, usage_file=str(usage_file), audit_log=str(audit)).text
    from slurmtools.policy import load_policies

    pols = load_policies(site, fabric)
    ctx = PolicyContext(site=site, fabric=fabric, usage=usage, month=month)
    cases, reqs = [], []
    for a, s in edge_cases() + random_cases(600):
        try:
            reqs.append(JobRequest.from_sbatch(a, script=s, user="labuser", default_account="vision"))
            cases.append((a, s))
        except RequestError:
            continue  # sbatch refuses these itself; job_submit.lua never sees them
    assert len(cases) > 500
    got = run_lua(text, [job_desc(r) for r in reqs], tmp_path)
    denied = 0
    for (args, _), r, lua in zip(cases, reqs, got):
        d = evaluate(r, pols, ctx)
        if d.action == "deny":
            denied += 1
            assert (lua["rc"], lua["user"]) == (-1, d.message), args
        else:
            assert lua["rc"] == 0 and lua["user"] == "", (args, lua)
            assert lua["partition"] == d.changes.get("partition", r.partition or ""), args
            assert lua["qos"] == d.changes.get("qos", r.qos or ""), args
    assert denied > 100 and len(cases) - denied > 40  # both outcomes well represented
    return audit


def test_lua_mirrors_python_without_usage(site, fabric, tmp_path):
    audit = _compare(site, fabric, tmp_path, None)
    from slurmtools import audit as audit_log

    lines = list(audit_log.read(audit, strict=True))  # the decision log's own reader accepts every line
    assert lines and all(x["details"]["source"] == "job_submit.lua" for x in lines)
    # every admission decision is a line (issue 12): refusals, re-routes (admission_modified) and plain admissions,
    # each with the policy hash and the Lua writer's own numbers 1, 2, 3 ...
    assert {x["event"] for x in lines} == {"admission_refused", "admission_modified", "admission_allowed"}
    from slurmtools.policy.fingerprint import policy_hash

    assert {x["policy"] for x in lines} == {policy_hash(site, fabric)}
    assert [x["seq"] for x in lines] == list(range(1, len(lines) + 1)) and audit_log.verify(audit) == []


def test_lua_mirrors_python_with_budgets(site, fabric, tmp_path):
    _compare(site, fabric, tmp_path, {"vision": 25000.0, "nlp": 40000.0, "students": 12.5})


@pytest.mark.parametrize("mode", ["closed", "open"])
def test_lua_internal_error_follows_fail_mode_and_audits_once(site, fabric, tmp_path, mode):
    from dataclasses import replace

    from slurmtools.policy.builtin import MESSAGES

    audit = tmp_path / "audit.jsonl"
    s = replace(site, policy=replace(site.policy, fail_mode=mode))
    text = render_job_submit(s, fabric, audit_log=str(audit)).text
    got = run_lua(text, [{"explode": True}], tmp_path)
    if mode == "closed":
        assert got[0]["rc"] == -1 and got[0]["user"] == MESSAGES["internal_error"]
        assert "internal error (fail_mode closed), job refused: " in got[0]["error"]
    else:
        assert got[0]["rc"] == 0 and got[0]["user"] == ""
        assert "internal error (fail_mode open), job allowed: " in got[0]["error"]
    lines = audit.read_text().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert rec["event"] == "admission_policy_error"
    assert rec["details"]["message"].startswith(f"fail_mode {mode}: job ")


def test_nasty_site_names_stay_inside_lua_strings(site, fabric, tmp_path):
    from dataclasses import replace

    evil = replace(site, name='x"]] os.exit(3) --[[\n', source=site.source)
    text = render_job_submit(evil, fabric).text
    got = run_lua(text, [job_desc(JobRequest.from_sbatch(["-A", "vision", "-q", "production",
                                                          "--gres=gpu:h100:1"]))], tmp_path)
    assert got[0]["rc"] == 0


def test_log_only_mode_refuses_nothing_but_audits(site, fabric, tmp_path):
    audit = tmp_path / "audit.jsonl"
    text = render_job_submit(site, fabric, audit_log=str(audit), enforce=False).text
    req = JobRequest.from_sbatch(["-A", "vision", "--gres=gpu:8"])
    got = run_lua(text, [job_desc(req)], tmp_path)
    assert got[0]["rc"] == 0 and got[0]["user"] == "" and got[0]["partition"] == "" and got[0]["qos"] == ""
    line = json.loads(audit.read_text())
    assert line["event"] == "admission_would_refuse" and line["details"]["policy"] == "gpu_type"
