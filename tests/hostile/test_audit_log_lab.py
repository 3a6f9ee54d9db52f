"""Class 9 in the real lab: job_submit.lua inside slurmctld writes a budget re-route as `admission_modified`, a real
`slurmtools admin sync-qos` change writes a `qos_sync` record, every record carries the same policy hash the CLI
computes for the site, and `slurmtools audit verify` passes on the lab's real log and fails, naming the line,
once a line is deleted or two are swapped. Before this class the re-route left no record and no record said
which policy decided."""

from __future__ import annotations

import shlex
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from slurmtools import audit
from slurmtools.policy.engine import load_fabric_for
from slurmtools.policy.fingerprint import policy_hash
from slurmtools.policy.usage import render_usage_lua
from slurmtools.render.job_submit import render_job_submit
from slurmtools.site import load_site
from labtools import install_lua, job_script

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]
SCRIPT = "#!/bin/bash\n#SBATCH --signal=B:URG@120\nsleep 1\n"



@pytest.fixture
def real_log(lab):
    """The lab's own decision log, with the site's policy rendered against it (usage read at once, ttl 0)."""
    site = load_site(None)
    fabric = load_fabric_for(site)
    log = lab.dir / "spool" / "slurmtools" / "decisions.jsonl"
    usage = lab.dir / "etc" / "audit_test_usage.lua"
    path = lab.dir / "etc" / "job_submit.lua"
    saved = path.read_text()
    install_lua(lab, render_job_submit(site, fabric, usage_file=str(usage), audit_log=str(log), usage_ttl=0).text)
    yield {"site": site, "hash": policy_hash(site, fabric), "log": log, "usage": usage}
    install_lua(lab, saved)
    usage.unlink(missing_ok=True)


def cli(lab, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "slurmtools", *args], capture_output=True, text=True, timeout=120,
                          env={**lab.env, **(env or {})})


def test_reroute_and_sync_qos_are_logged_with_the_policy_hash_and_verify_checks_the_real_log(lab, real_log, tmp_path):
    log, h = real_log["log"], real_log["hash"]
    month = datetime.now().strftime("%Y-%m")
    real_log["usage"].write_text(render_usage_lua({"vision": 20000.0}, month))  # vision is over budget: scavenger
    sp = job_script(lab, "audit-lab", SCRIPT)
    before = len(list(audit.read(log)))
    p = lab.sh(f"sbatch -H --parsable -o /dev/null -A vision -q standard --gpus=h100:8 {shlex.quote(str(sp))}",
               user="labuser")
    job = p.stdout.strip().split(";")[0]
    qos = lab.sh(f"squeue -h -j {job} -o %q").stdout.strip()
    lab.sh(f"scancel {job}")
    assert qos == "scavenger", "the budget policy did not re-route the job"
    new = list(audit.read(log))[before:]
    mod = [r for r in new if r["event"] == "admission_modified"]
    assert len(mod) == 1, new
    assert mod[0]["user"] == "labuser" and mod[0]["details"]["changes"]["qos"] == "scavenger"
    assert "budget" in mod[0]["details"]["policy"].split(",") and mod[0]["policy"] == h
    assert mod[0]["writer"].startswith("job_submit.lua@") and mod[0]["seq"] >= 1
    assert audit.policy_path(log).read_text().strip() == h  # left by the loaded Lua for the node hooks

    # a QoS drifts; sync-qos puts it back and logs the change
    lab.sh("sacctmgr -i modify qos where name=scavenger set GraceTime=7")
    r = cli(lab, "admin", "sync-qos", env={"SLURMTOOLS_AUDIT_LOG": str(log)})
    assert r.returncode == 0 and "GraceTime=60" in r.stdout, r.stdout + r.stderr
    sync = [x for x in audit.read(log) if x["event"] == "qos_sync"]
    assert sync and sync[-1]["details"]["qos"] == ["scavenger"] and "GraceTime=60" in sync[-1]["details"]["settings"]
    assert sync[-1]["policy"] == h

    # the real log verifies; a copy with a line deleted or two lines of one writer swapped does not
    r = cli(lab, "audit", "verify", "--log", str(log))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = log.read_text().splitlines(keepends=True)
    lua = [i for i, ln in enumerate(lines) if '"writer":"job_submit.lua@' in ln]
    if len(lua) < 3:  # enough of the Lua's own lines to delete one in the middle
        for _ in range(3 - len(lua)):
            jid = lab.sh(f"sbatch -H --parsable -o /dev/null -A vision -q standard --gpus=h100:8 {sp}",
                         user="labuser").stdout.strip().split(";")[0]
            lab.sh(f"scancel {jid}")
        lines = log.read_text().splitlines(keepends=True)
        lua = [i for i, ln in enumerate(lines) if '"writer":"job_submit.lua@' in ln]
    deleted = tmp_path / "deleted.jsonl"
    deleted.write_text("".join(ln for i, ln in enumerate(lines) if i != lua[1]))
    r = cli(lab, "audit", "verify", "--log", str(deleted))
    assert r.returncode == 1 and f"{deleted}:{lua[2]}: writer job_submit.lua@" in r.stdout, r.stdout
    assert "1 record(s) missing" in r.stdout
    swapped = tmp_path / "swapped.jsonl"
    sw = list(lines)
    sw[lua[0]], sw[lua[1]] = sw[lua[1]], sw[lua[0]]
    swapped.write_text("".join(sw))
    r = cli(lab, "audit", "verify", "--log", str(swapped))
    assert r.returncode == 1 and "out of order or repeated" in r.stdout, r.stdout
