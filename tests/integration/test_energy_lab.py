"""Energy and slack windows through the real Slurm: jobs on the lab's fake GPUs (each draws a fixed 700 W, so its
energy counter reads 700 W x time; hooks/labfake.py, hooks/energy.py) get epilog records whose energy is the
counters' difference between the prolog's mark of the run and the epilog, per GPU and node; `slurmtools report`
shows that energy, its cost at the site's price and its CO2e; the example slack trainer's windows reach the job's
record before its scratch folder is cleaned, and the report's slack windows table.

Slurm (22.05 or 25.11) runs the prolog and epilog as root and hands them the job's GPUs; the fake is only what the
GPUs answer, from the lab's root-owned fault file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from labtools import job_script

from slurmtools.hooks.labfake import FAKE_NAME
from slurmtools.resources import example_site

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "examples" / "slack_trainer.py"
USER = "labuser"
POWER_W = 700
PRICE, CARBON = 120.0, 0.4
MJ_PER_KWH = 3.6e9

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_planner_lab import clean  # noqa: E402,F401  (the fixture: no jobs before and after each test)


@pytest.fixture
def fake_power(lab):
    """Every lab node's 8 fake GPUs draw POWER_W; the lab's previous fault file is put back afterwards."""
    path = lab.dir / "etc" / FAKE_NAME
    old = path.read_bytes() if path.exists() else None
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"default": {"count": 8, "power_w": POWER_W}}))
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    yield
    if old is None:
        path.unlink()
    else:
        path.write_bytes(old)


def records(lab, job: int) -> list[dict]:
    d = lab.dir / "spool" / "slurmtools" / "jobs"
    return [json.loads(p.read_text()) for p in sorted(d.glob(f"{job}.*.json"))]


def wait_records(lab, job: int, n: int, timeout: float = 60) -> list[dict]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = records(lab, job)
        if len(got) >= n:
            return got
        time.sleep(0.5)
    raise AssertionError(f"job {job}: {len(records(lab, job))} epilog records, expected {n}")


def test_energy_and_slack_windows_reach_the_record_and_the_report(lab, clean, fake_power, tmp_path):  # noqa: F811
    since = datetime.now().replace(microsecond=0) - timedelta(seconds=1)
    d = lab.jobs_dir / f"energy-{int(time.time() * 1000)}"
    d.mkdir()
    d.chmod(0o777)
    # a trainer on 4 GPUs of one node, its slack signal from a cache file that does not exist (the mode it picks
    # then is no matter here: its windows are)
    train = job_script(lab, d.name, f"""#!/bin/bash
export SLURMTOOLS_SLACK_CACHE={d}/none.json
/usr/bin/python3 {TRAINER} {d}/ck {d}/log --steps 60 --step-seconds 0.05 --every 10 --source cache
""")
    a = int(lab.sh(f"sbatch --parsable -J energy-train -p gpu --qos=production -A nlp --gres=gpu:h100:4 -N1 -t 5 "
                   f"-o {d}/out-%j.txt {train}", user=USER).stdout.strip())
    # two nodes, 2 GPUs each: one record per node, merged by the report
    b = int(lab.sh(f"sbatch --parsable -J energy-pair -p gpu --qos=production -A vision --gres=gpu:h100:2 -N2 -t 5 "
                   f"-o {d}/pair-%j.txt --wrap 'sleep 8'", user=USER).stdout.strip())
    for j in (a, b):
        assert lab.wait_state(j, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=180) == "COMPLETED", \
            (d / f"out-{j}.txt").read_text() if (d / f"out-{j}.txt").exists() else j
    ra, rb = wait_records(lab, a, 1), wait_records(lab, b, 2)
    assert len(ra) == 1 and len(rb) == 2

    for rec in ra + rb:
        assert rec["energy_source"] == "lab-fake" and rec["energy_why"] is None, rec
        assert [g["gpu"] for g in rec["gpu_energy"]] == rec["gpus"] and len(rec["gpus"]) == (4 if rec in ra else 2)
        for g in rec["gpu_energy"]:
            # the counters: POWER_W x the time of the prolog's mark (the run's start) and of the epilog (its end)
            assert g["energy_j"] == (g["end_mj"] - g["start_mj"]) / 1000 and g["why"] is None
            assert g["end_mj"] == pytest.approx(POWER_W * rec["end"] * 1000, abs=POWER_W)  # end: 3 decimals
            assert g["start_mj"] / 1000 / POWER_W == pytest.approx(rec["start"], abs=30)
            assert g["energy_j"] == pytest.approx(POWER_W * (rec["end"] - rec["start"]), abs=POWER_W * 30)
        assert rec["energy_j"] == sum(g["energy_j"] for g in rec["gpu_energy"])
        # the lab's fake GPUs run nothing: utilisation unknown, and said why
        assert rec["gpu_accounting"] is None and "fake GPUs" in rec["gpu_accounting_why"]

    # the trainer's windows: in the record (copied from /tmp/slurmtools-job-<id> before the epilog removed it)
    written = json.loads((d / "ck" / "slack-windows.json").read_text())["windows"]
    assert written and written[-1]["end_step"] == 60
    keys = ("mode", "start_step", "end_step", "start_time", "end_time", "run", "why", "ended")
    # (texts cut at 200 characters: here the why names the missing cache file's long path)
    assert ra[0]["slack_windows"] == [{k: (w[k][:200] if k == "why" else w[k]) for k in keys} for w in written]
    assert not Path(f"/tmp/slurmtools-job-{a}").exists()
    assert rb[0]["slack_windows"] is None

    until = datetime.now().replace(microsecond=0) + timedelta(seconds=2)
    time.sleep(max(0.0, (until - datetime.now()).total_seconds()) + 0.05)
    site = tmp_path / "site.toml"
    text = example_site().read_text()
    fabric = (example_site().parent / "../../topology/example/fabric.toml").resolve()
    site.write_text(text.replace('fabric = "../../topology/example/fabric.toml"', f'fabric = "{fabric}"')
                    + f"\n[energy]\nprice_per_kwh = {PRICE}\ncarbon_kg_per_kwh = {CARBON}\n")
    rep = tmp_path / "rep"
    p = subprocess.run([sys.executable, "-m", "slurmtools", "report", "--site", str(site), "--since",
                        since.isoformat(), "--until", until.isoformat(), "--format", "json,html,md,csv", "--out",
                        str(rep), "--epilog-dir", str(lab.dir / "spool" / "slurmtools" / "jobs"), "--history", "0"],
                       capture_output=True, text=True, env=lab.env, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads((rep / "report.json").read_text())
    mj = {j: sum(g["end_mj"] - g["start_mj"] for r in rs for g in r["gpu_energy"]) for j, rs in ((a, ra), (b, rb))}
    jobs = {int(r["job_id"]): r for r in doc["tables"]["energy_jobs"]}
    assert set(jobs) == {a, b}
    for j in (a, b):
        assert jobs[j]["energy_kwh"] == pytest.approx(mj[j] / MJ_PER_KWH, rel=1e-12)
        assert jobs[j]["energy_cost"] == pytest.approx(mj[j] / MJ_PER_KWH * PRICE, rel=1e-12)
        assert jobs[j]["co2e_kg"] == pytest.approx(mj[j] / MJ_PER_KWH * CARBON, rel=1e-12)
        assert jobs[j]["energy_source"] == "gpu counters" and jobs[j]["gpus"] == 4
    s = doc["summary"]
    total = (mj[a] + mj[b]) / MJ_PER_KWH
    assert s["energy_kwh"] == pytest.approx(total, rel=1e-12) and s["runs_energy_unknown"] == 0
    assert s["energy_cost"] == pytest.approx(total * PRICE, rel=1e-12)
    by_acct = {r["account"]: r["energy_kwh"] for r in doc["tables"]["energy_by_account"]}
    assert by_acct == pytest.approx({"nlp": mj[a] / MJ_PER_KWH, "vision": mj[b] / MJ_PER_KWH}, rel=1e-12)
    html = (rep / "report.html").read_text()
    assert f'id="kpi-energy"><b>{total:,.3f} kWh</b><span>GPU energy, {total * PRICE:,.2f} USD' in html
    md = (rep / "summary.md").read_text()
    assert f"- GPU energy {total:,.3f} kWh; energy cost {total * PRICE:,.2f} USD" in md
    assert (rep / "energy_by_user.csv").read_text().startswith("user,")
    # the slack windows table: job A's windows, in their order
    wt = [w for w in doc["tables"]["slack_windows"] if w["job_id"] == str(a)]
    assert [(w["mode"], w["start_step"], w["end_step"]) for w in wt] == \
        [(w["mode"], w["start_step"], w["end_step"]) for w in written]
    assert "<h2>Slack windows</h2>" in html
