"""Issue 12, class 6: an internal error of the generated job_submit.lua follows the site's `fail_mode`
(`[policy] fail_mode = "closed"`, the default, refuses the job; "open" admits it), and is audited as one
`admission_policy_error` line naming the mode either way. Before the fix every internal error admitted the job.

The lab test breaks the policy through a real input rather than by editing the Lua: a usage table whose
GPU-hours an admin wrote as a string (`vision = "lots"`), which the budget check cannot compare.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from slurmtools.policy.builtin import MESSAGES
from slurmtools.policy.engine import load_fabric_for
from slurmtools.render.job_submit import render_job_submit
from slurmtools.site import load_site
from labtools import install_lua, job_script

USER = "labuser"
SCRIPT = "#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsleep 1\n"



def test_fail_mode_is_read_and_defaults_to_closed(tmp_path):
    site = load_site(None)
    assert site.policy.fail_mode == "closed"
    bad = tmp_path / "site.toml"
    bad.write_text(site.source.read_text().replace("[policy]\n", "[policy]\nfail_mode = \"sometimes\"\n", 1))
    from slurmtools.errors import ConfigError

    with pytest.raises(ConfigError, match="policy.fail_mode.*expected one of closed, open"):
        load_site(str(bad))


@pytest.mark.lab
@pytest.mark.parametrize("mode", ["closed", "open"])
def test_broken_usage_table_follows_fail_mode_in_slurm(lab, mode):
    site = load_site(None)
    site = replace(site, policy=replace(site.policy, fail_mode=mode))
    fabric = load_fabric_for(site)
    path = lab.dir / "etc" / "job_submit.lua"
    saved = path.read_text() if path.exists() else None
    usage = lab.dir / "etc" / f"failmode_usage_{mode}.lua"
    audit = lab.dir / "log" / f"failmode_audit_{mode}.jsonl"
    audit.unlink(missing_ok=True)
    usage.write_text("return { month = os.date(\"%Y-%m\"), accounts = { vision = \"lots\" } }\n")
    sp = job_script(lab, "failmode", SCRIPT)
    install_lua(lab, render_job_submit(site, fabric, usage_file=str(usage), audit_log=str(audit), usage_ttl=0).text)
    try:
        p = lab.sh(f"sbatch -H --parsable -o /dev/null -A vision -q production --gres=gpu:h100:1 {sp}", user=USER,
                   check=False)
        if p.returncode == 0:
            lab.sh(f"scancel {p.stdout.strip().split(';')[0]}")
        log = (lab.dir / "log" / "slurmctld.log").read_text()
        lines = [json.loads(x) for x in audit.read_text().splitlines()]
    finally:
        if saved is not None:
            install_lua(lab, saved)
        usage.unlink(missing_ok=True)
    if mode == "closed":
        assert p.returncode != 0 and p.stderr.splitlines()[0] == f"sbatch: error: {MESSAGES['internal_error']}"
        assert "slurmtools policy: internal error (fail_mode closed), job refused: " in log
    else:
        assert p.returncode == 0, p.stderr
        assert "slurmtools policy: internal error (fail_mode open), job allowed: " in log
    assert [x["event"] for x in lines] == ["admission_policy_error"]
    assert lines[0]["details"]["message"].startswith(f"fail_mode {mode}: job ")
    assert "attempt to compare" in lines[0]["details"]["message"]
