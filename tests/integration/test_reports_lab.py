"""`slurmtools report` against jobs really run in the lab: several tiers, a failed job, an array, a preempted and
requeued job and a hostile job name. The report's numbers are checked against what the jobs were built to do
(GPU counts, tiers, states, which run was preempted) and against sacct's own ElapsedRaw for the durations."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta

import pytest

pytestmark = pytest.mark.lab

HOSTILE = "<script>alert(1)</script>"


def sbatch(lab, *args: str) -> int:
    out = lab.sh("sbatch --parsable " + " ".join(args), user="labuser").stdout.strip()
    return int(out.split(";")[0].split("_")[0])


# the site's policy wants preemptible tiers to ask for the checkpoint signal in the script itself
LEAD = {"production": None, "standard": 300, "scavenger": 120}


def script(lab, name: str, tier: str, body: str) -> str:
    p = lab.jobs_dir / f"rep-{name}.sh"
    sig = f"#SBATCH --signal=B:USR1@{LEAD[tier]}\n" if LEAD[tier] else ""
    p.write_text(f"#!/bin/bash\n{sig}{body}\n")
    p.chmod(0o755)
    return str(p)


def test_report_numbers_from_real_jobs(lab, tmp_path):
    lab.wait_nodes_idle()  # nothing of an earlier test still runs inside our window
    # the window starts at the next whole second, after every earlier run ended (sacct has second resolution)
    since = datetime.now().replace(microsecond=0) + timedelta(seconds=1)
    time.sleep(max(0.0, (since - datetime.now()).total_seconds()) + 0.05)
    out = f"--output={lab.jobs_dir}/rep-%j.out"
    lab.sh("sacctmgr -i modify qos where name=scavenger set GraceTime=5")
    low = high = c = None
    try:
        a = sbatch(lab, "-A vision --qos=production --gres=gpu:h100:2 -N1 -J rep-prod", out,
                   script(lab, "prod", "production", "sleep 20"))
        b = sbatch(lab, "-A nlp --qos=standard --gres=gpu:h100:1 -J rep-fail", out,
                   script(lab, "fail", "standard", "sleep 2; exit 3"))
        c = sbatch(lab, "-A vision --qos=scavenger --gres=gpu:h100:1 --array=0-1 -J rep-array", out,
                   script(lab, "array", "scavenger", "sleep 5"))
        f = sbatch(lab, "-A nlp --qos=standard --gres=gpu:h100:1", f"-J '{HOSTILE}'", out,
                   script(lab, "hostile", "standard", "sleep 1"))
        # the first run waits to be preempted; the rerun after the requeue is short. Where Slurm requeues a job
        # that ends in its grace time (25.11), the first run ends at the warning, as a checkpointing job does: one
        # still running when the grace time is over is requeued, and then its next run as well (25.11.7, measured;
        # docs/checkpoint.md). Where it does not (22.05), ending in grace would not be requeued: the shell waits.
        on_warning = "exit 0" if lab.release.preempted_exit_requeued else "echo got USR1"
        low = sbatch(lab, "-A nlp --qos=scavenger --requeue -w gpu16 --exclusive --gres=gpu:h100:8 -J rep-low", out,
                     script(lab, "low", "scavenger",
                            f"trap '{on_warning}' USR1\n"
                            'if [ "${SLURM_RESTART_COUNT:-0}" -ge 1 ]; then sleep 3; exit 0; fi\n'
                            "sleep 600 & pid=$!\n"
                            'while kill -0 "$pid" 2>/dev/null; do wait "$pid"; done'))
        lab.wait_state(low, "RUNNING", 60)
        high = sbatch(lab, "-A vision --qos=production -w gpu16 --exclusive --gres=gpu:h100:8 -J rep-high", out,
                      script(lab, "high", "production", "sleep 5"))
        lab.wait_state(high, {"RUNNING", "COMPLETED"}, 120)
        lab.wait_state(low, "PENDING", 60)
        lab.wait_state(high, "COMPLETED", 60)
        lab.sh(f"scontrol update JobId={low} StartTime=now")
        for j in (a, b, f, high, low):
            lab.wait_state(j, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 120)
        for j in (a, b, f, high, low, c):
            lab.wait_accounting(j)
    finally:
        if low:
            subprocess.run(["scancel", str(low)], env=lab.env)
        lab.sh("sacctmgr -i modify qos where name=scavenger set GraceTime=60")
    time.sleep(1)
    until = datetime.now().replace(microsecond=0) + timedelta(seconds=1)

    # reference: sacct's own ElapsedRaw and AllocTRES for every run in the window. sacct -S/-E list runs whose End
    # is at or after -S; the report (docs/reports.md) counts a run for the part of [start, end) inside
    # [since, until), so a run of an earlier test that ended in the very second `since` names has no part in it:
    # apply the same half-open rule here (on a loaded machine such a run is common: found by the 25.11 issue).
    # An array task split off its array when it starts gets a JobIDRaw of its own, allocated then (after jobs
    # submitted later, on a busy machine): it belongs to the array by its JobID `C_1`, not by its raw id.
    ref = lab.sh(f"sacct -a -X -D -P -n -o JobID,JobIDRaw,QOS,Account,State,ElapsedRaw,AllocTRES,Start,End "
                 f"-S {since:%Y-%m-%dT%H:%M:%S} -E {until:%Y-%m-%dT%H:%M:%S}").stdout
    runs = []
    for line in ref.splitlines():
        jobid, raw, qos, acct, state, elapsed, tres, start, end = line.split("|")
        gpus = int(next((kv.split("=")[1] for kv in tres.split(",") if kv.startswith("gres/gpu=")), 0))
        if not gpus or state == "PENDING" or start in ("", "Unknown", "None"):
            continue
        t_start = datetime.fromisoformat(start)
        t_end = datetime.fromisoformat(end) if end not in ("", "Unknown", "None") else until
        if not (t_start < until and (t_end > since or t_start >= since)):
            continue
        owner = int(jobid.split("_")[0].split(".")[0])
        assert owner in (a, b, c, f, high, low), f"a run of another test overlaps the window: {line}"
        runs.append({"raw": int(raw), "qos": qos, "account": acct, "state": state.split()[0],
                     "s": int(elapsed), "gpus": gpus})
    assert len([r for r in runs if r["raw"] == low]) == 2, runs  # -D: the preempted run and the rerun
    gh = lambda rs: sum(r["gpus"] * r["s"] for r in rs) / 3600  # noqa: E731

    rep = tmp_path / "rep"
    p = subprocess.run([sys.executable, "-m", "slurmtools", "report", "--since", since.isoformat(),
                        "--until", until.isoformat(), "--format", "json,html,md", "--out", str(rep),
                        "--epilog-dir", str(lab.dir / "spool" / "slurmtools" / "jobs"), "--history", "0"],
                       capture_output=True, text=True, env=lab.env, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads((rep / "report.json").read_text())
    s = doc["summary"]

    # the same runs read in another zone (a half-hour offset): sacct prints that zone's wall-clock times, the window
    # is given in them, and every figure is the same, since the report counts instants, not wall-clock readings
    from zoneinfo import ZoneInfo

    def there(t):
        return t.astimezone(ZoneInfo("Asia/Kolkata")).replace(tzinfo=None).isoformat()

    rep2 = tmp_path / "rep-kolkata"
    p2 = subprocess.run([sys.executable, "-m", "slurmtools", "report", "--since", there(since), "--until",
                         there(until), "--format", "json", "--out", str(rep2), "--epilog-dir",
                         str(lab.dir / "spool" / "slurmtools" / "jobs"), "--history", "0"],
                        capture_output=True, text=True, env=dict(lab.env, TZ="Asia/Kolkata"), timeout=300)
    assert p2.returncode == 0, p2.stderr
    s2 = json.loads((rep2 / "report.json").read_text())["summary"]
    same = ("gpu_hours", "runs", "jobs", "failed_runs", "installed_gpu_hours", "utilization_pct",
            "gpu_hours_lost_to_preemption")
    assert {k: s2[k] for k in same} == {k: s[k] for k in same}
    t = {name: rows for name, rows in doc["tables"].items()}
    tol = 2 * len(runs) * 8 / 3600  # Start/End vs ElapsedRaw: at most a second or two per run

    assert s["gpu_hours"] == pytest.approx(gh(runs), abs=tol)
    assert s["runs"] == len(runs) == 8  # A, B, 2 array tasks, F, high, low twice
    assert s["jobs"] == 7 and s["failed_runs"] == 1
    by_tier = {r["tier"]: r["gpu_hours"] for r in t["by_tier"]}
    for tier in ("production", "standard", "scavenger"):
        assert by_tier[tier] == pytest.approx(gh([r for r in runs if r["qos"] == tier]), abs=tol), tier
    by_acct = {r["account"]: r["gpu_hours"] for r in t["by_account"]}
    assert by_acct["vision"] == pytest.approx(gh([r for r in runs if r["account"] == "vision"]), abs=tol)
    # hand facts: A held 2 GPUs for its 20 s sleep (Slurm timers allow slack), B failed after ~2 s on 1 GPU
    a_run = next(r for r in runs if r["raw"] == a)
    assert a_run["gpus"] == 2 and 20 <= a_run["s"] <= 50
    assert next(r for r in runs if r["raw"] == b)["state"] == "FAILED"
    # the preempted run: 8 GPUs, lost to preemption, counted once as preempted and once as requeued
    pre = next(r for r in runs if r["raw"] == low and r["state"] == "PREEMPTED")
    tiers = {r["tier"]: r for r in t["preemption_by_tier"]}
    assert tiers["scavenger"]["preempted_runs"] == 1 and tiers["scavenger"]["requeued_runs"] == 1
    assert tiers["scavenger"]["gpu_hours_lost"] == pytest.approx(8 * pre["s"] / 3600, abs=8 * 2 / 3600)
    if not lab.release.preempted_exit_requeued:
        assert pre["s"] >= 5  # the tier's grace (5 s here) ran before the stop
    assert s["gpu_hours_lost_to_preemption"] == pytest.approx(8 * pre["s"] / 3600, abs=8 * 2 / 3600)
    # capacity: the example site's 16 nodes x 8 GPUs over the window
    hours = (until - since).total_seconds() / 3600
    assert s["installed_gpu_hours"] == pytest.approx(128 * hours)
    assert s["utilization_pct"] == pytest.approx(s["gpu_hours"] / (128 * hours) * 100)
    # the lab's cluster registered before the window: capacity counts the whole window, and says nothing
    assert not [n for n in doc["notes"] if n.startswith("capacity counted from")], doc["notes"]
    # a window of a minute or two is shown in buckets of seconds (metrics.bucket_seconds), adding up to the total
    assert len(doc["timeline"]) >= 2
    tiers_tl = sum(v for row in doc["timeline"] for k, v in row.items()
                   if k not in ("bucket_start", "capacity_gpu_hours"))
    assert tiers_tl == pytest.approx(s["gpu_hours"], abs=tol)
    assert sum(row["capacity_gpu_hours"] for row in doc["timeline"]) == pytest.approx(128 * hours)
    # waits: every run started in the window; two production runs
    wt = {r["tier"]: r for r in t["wait_by_tier"]}
    assert wt["production"]["runs"] == 2 and sum(r["runs"] for r in t["wait_by_tier"]) == 8
    # budgets: month to date, so also every earlier nlp run in this lab this month (sacct's own sum); the
    # scavenger tier is `charged = false` in the example site: shown, not charged (the preempted run was nlp's)
    month = lab.sh(f"sacct -a -X -D -P -n -A nlp -o ElapsedRaw,AllocTRES,QOS -S {since:%Y-%m-01T00:00:00} "
                   f"-E {until:%Y-%m-%dT%H:%M:%S}").stdout
    month_rows = [(int(e) * int(next((kv.split("=")[1] for kv in tr.split(",") if kv.startswith("gres/gpu=")), 0))
                   / 3600, q) for e, tr, q in (ln.split("|") for ln in month.splitlines())]
    nlp_month = sum(g for g, _ in month_rows)
    nlp_charged = sum(g for g, q in month_rows if q != "scavenger")
    budget = {r["account"]: r for r in t["budget"]}
    assert budget["nlp"]["month_to_date_gpu_hours"] == pytest.approx(nlp_month, abs=tol)
    assert budget["nlp"]["month_to_date_gpu_hours"] >= by_acct["nlp"] - tol
    assert budget["nlp"]["charged_gpu_hours"] == pytest.approx(nlp_charged, abs=tol)
    assert budget["nlp"]["not_charged_gpu_hours"] >= 8 * pre["s"] / 3600 - tol
    assert budget["nlp"]["budget_used_pct"] == pytest.approx(nlp_charged / 40000 * 100, abs=tol)
    assert budget["nlp"]["monthly_budget_gpu_hours"] == 40000
    # no NVML in the lab: utilisation is unknown, never invented
    assert s["gpu_hours_with_utilization"] == 0
    assert not [n for n in doc["notes"] if "unreadable" in n or ".json:" in n], doc["notes"]
    # the lab's real epilog wrote one record per run and node, and the report's reader agrees with its format
    from slurmtools.reports.epilog import read_epilog_dir

    ep = read_epilog_dir(lab.dir / "spool" / "slurmtools" / "jobs")
    assert not [x for x in ep.problems if "rep-" in x or any(f"/{j}." in x for j in (a, b, f, low))], ep.problems
    got = set(zip(ep.frame["job_id_raw"], ep.frame["run"]))
    assert {(a, 0), (b, 0), (f, 0), (low, 0), (low, 1)} <= got, sorted(got)
    assert ep.frame.set_index(["job_id_raw", "run"]).loc[(a, 0), "gpus"] == 2
    html = (rep / "report.html").read_text()
    assert HOSTILE not in html
    md = (rep / "summary.md").read_text()
    assert HOSTILE not in md
    cost = re.search(r'id="kpi-cost"><b>(.*?)</b>', html).group(1)
    assert cost.endswith(" USD") and f"Cost {cost};" in md  # one money rule: the page and the summary agree
    jobs_json = lab.sh(f"sacct -X -P -n -o JobName -j {f}").stdout.strip()
    assert jobs_json == HOSTILE  # Slurm kept the name verbatim: the escaping above was really exercised
