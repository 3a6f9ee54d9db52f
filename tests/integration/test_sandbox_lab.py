"""The capacity sandbox (issue 14) against real Slurm: a recorded history of 200 jobs over three tiers replayed
through a sandbox shaped like the example site (baseline) and like the example site with 8 more nodes (candidate),
each in its own lab brought up and stopped by `slurmtools sandbox replay`, exactly as an admin runs it.

Asserted: every job is accounted in both (finished, none refused, none lost); the candidate's waits are lower
(median and p90 overall, and p90 for the standard tier); the baseline's queue makes preemptions; the report files
are written; no daemon of either sandbox is left running. A second test interrupts a replay with SIGINT once its
slurmctld is up and checks the daemons are gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labtools import lab_slurm

pytestmark = [pytest.mark.lab, pytest.mark.sandbox]

REPO = Path(__file__).resolve().parents[2]
OFFSET = int(os.environ.get("SLURMTOOLS_LAB_PORT_OFFSET", "0")) + 500


def _sandbox_daemons(workdir: Path) -> list[str]:
    """Processes started for a sandbox under `workdir` (their command line names its lab's files)."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if str(workdir) in ln and any(
        d in ln for d in ("slurmctld", "slurmd", "slurmdbd", "mariadbd", "munged"))]


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "slurmtools", *args], cwd=REPO, capture_output=True, text=True,
                          **kw)


@pytest.mark.timeout(1500)
def test_more_nodes_lower_the_waits_of_a_recorded_history(tmp_path):
    work = REPO / f".sandbox-test-{lab_slurm()}"
    trace = tmp_path / "history.txt"
    r = _cli("sandbox", "example-trace", "--out", str(trace), "--jobs", "200", "--hours", "0.6", "--load", "2.5",
             "--seed", "14", "--run-median", "4")
    assert r.returncode == 0, r.stderr
    t0 = time.time()
    r = _cli("sandbox", "replay", "--trace", str(trace), "--site", "site_configs/example-plus8/site.toml",
             "--baseline", "site_configs/example/site.toml", "--speedup", "60", "--slurm", lab_slurm(),
             "--workdir", str(work), "--port-offset", str(OFFSET), "--out", str(tmp_path / "report"), "--json",
             timeout=1200)
    print(f"replays took {time.time() - t0:.0f} s; stderr: {r.stderr[-2000:]}")
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    base, cand = res["baseline"], res["candidate"]
    for label, x in (("baseline", base), ("candidate", cand)):
        o = x["overall"]
        print(label, {k: o[k] for k in ("finished", "refused", "never_started", "wait_median_h", "wait_p90_h",
                                         "wait_max_h", "preemptions", "gpu_hours_lost", "utilisation")})
        assert o["jobs"] == 200 and o["finished"] == 200, (label, o)
        assert o["refused"] == 0 and o["never_started"] == 0
        assert {t["group"] for t in x["by_tier"]} == {"production", "standard", "scavenger"}
    assert (base["nodes"], cand["nodes"]) == (16, 24)
    b, c = base["overall"], cand["overall"]
    assert c["wait_p90_h"] < b["wait_p90_h"] and c["wait_median_h"] <= b["wait_median_h"]
    bt = {t["group"]: t for t in base["by_tier"]}
    ct = {t["group"]: t for t in cand["by_tier"]}
    assert ct["standard"]["wait_p90_h"] < bt["standard"]["wait_p90_h"]
    assert b["preemptions"] > 0 and b["gpu_hours_lost"] >= 0
    assert (tmp_path / "report" / "sandbox.json").exists()
    assert _sandbox_daemons(work) == []


@pytest.mark.timeout(600)
def test_ctrl_c_stops_every_daemon_of_the_sandbox(tmp_path):
    work = REPO / f".sandbox-test-{lab_slurm()}-int"
    trace = tmp_path / "history.txt"
    assert _cli("sandbox", "example-trace", "--out", str(trace), "--jobs", "30", "--hours", "0.5").returncode == 0
    p = subprocess.Popen([sys.executable, "-m", "slurmtools", "sandbox", "replay", "--trace", str(trace), "--site",
                          "site_configs/example/site.toml", "--speedup", "30", "--slurm", lab_slurm(),
                          "--workdir", str(work), "--port-offset", str(OFFSET + 100)], cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and not any("slurmctld" in ln for ln in _sandbox_daemons(work)):
            assert p.poll() is None, p.communicate()
            time.sleep(1)
        assert any("slurmctld" in ln for ln in _sandbox_daemons(work)), "the sandbox's slurmctld never started"
        time.sleep(3)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err[-2000:]
    assert "interrupted" in err
    assert _sandbox_daemons(work) == []
