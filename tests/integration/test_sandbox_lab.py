"""The capacity sandbox (issue 14) against real Slurm: a recorded history of 200 jobs over three tiers replayed through
a sandbox shaped like the example site (baseline) and like the example site with 8 more nodes (candidate), each in
its own lab brought up and stopped by `slurmtools sandbox replay`, exactly as an admin runs it.

Asserted: every job is accounted in both (finished, none refused, none lost); the candidate's waits are lower
(median and p90 overall, and p90 for the standard tier); the baseline's queue makes preemptions; the report files
are written; no daemon of either sandbox is left running; a job that did not finish is shown with what slurmctld
logged about it. A second test adds a campaign file (`--add`) to a short history and checks its jobs are submitted
at their scaled time as their own user and run. Another replays a scaled model of the site (`--node-scale 2`). A
third brings up a lab standing for the live cluster, runs jobs on it and replays them with `--since` from its
accounting. A fourth interrupts a replay with Ctrl-C twice (and others with SIGTERM and a hang-up) while its jobs
run and checks the daemons and the jobs' programs are gone. A fifth replays a preemption on the fast clock (`--clock
faketime`): Slurm's grace and requeue delay at 60x, the recorded limits as they are, and the clock's launcher and
shared memory gone afterwards. The fast clock is the default, so the 200-job replay, the interrupted replays and
`--repeat` run on it; the campaign, the scaled model, `--since` (at 1x, where the fast clock would first wait up to
5 minutes for slurmctld's fair-share pass) and the forecast run on the scaled clock (`--clock scaled`), so both
clocks bring up real labs. A sixth replays a history three times (`--repeat 3`) and checks the spread the report
carries. A seventh feeds ten days of history to the demand forecast and replays only the forecast's day
(`--forecast`, `--from`).
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

from labtools import LAB_SCRIPT, Lab, _lab_env, lab_slurm

pytestmark = [pytest.mark.lab, pytest.mark.sandbox]

REPO = Path(__file__).resolve().parents[2]
OFFSET = int(os.environ.get("SLURMTOOLS_LAB_PORT_OFFSET", "0")) + 500


def _sandbox_daemons(workdir: Path) -> list[str]:
    """Processes started for a sandbox under `workdir` (their command line names its lab's files)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if str(workdir) in ln and any(
        d in ln for d in ("slurmctld", "slurmd", "slurmdbd", "mariadbd", "munged"))]


def _job_programs(workdir: Path) -> list[str]:
    """Replayed jobs' programs still running for a sandbox under `workdir` (batch scripts in its lab's spool)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if f"{workdir}/" in ln and "/spool/" in ln and "slurmstepd" not in ln]


def _running(pid: int) -> bool:
    """A process that still runs (a zombie waiting for a parent that does not reap it has stopped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _bring_down(lab_dir: Path, port_offset: int) -> None:
    """Stop a sandbox's lab that its replay, killed, could not stop itself."""
    env = {**os.environ, "SLURMTOOLS_LAB_DIR": str(lab_dir), "SLURMTOOLS_LAB_PORT_OFFSET": str(port_offset)}
    subprocess.run([str(LAB_SCRIPT), "down"], env=env, capture_output=True, timeout=180)


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "slurmtools", *args], cwd=REPO, capture_output=True, text=True,
                          **kw)


def _story(run_dir: Path, key: str) -> list[str]:
    """What the sandbox's slurmctld logged about a replayed job (for a failure's message)."""
    try:
        jid = json.loads((run_dir / "replay.json").read_text())["job_ids"][key].split("_")[0]
        log = (run_dir / "lab" / "log" / "slurmctld.log").read_text(errors="replace").splitlines()
    except (OSError, KeyError, ValueError) as exc:
        return [f"(no log: {exc})"]
    return [ln for ln in log if f"JobId={jid} " in ln or ln.endswith(f"JobId={jid}")][-40:]


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
        for j in x["jobs"]:
            if j["status"] != "finished":
                print(label, "not finished:", j, *_story(work / label, j["key"]), sep="\n  ")
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
    # at 60x, what the preemption figures are worth is said beside them
    assert any(n.startswith("at 60x the preemptions and the GPU-hours they lost are one timing")
               for n in base["notes"]), base["notes"]
    assert (tmp_path / "report" / "sandbox.json").exists()
    assert _sandbox_daemons(work) == []


CAMPAIGN = """
[[campaign]]
name = "sweep"
account = "vision"
tier = "production"
job_gpus = 8
jobs = 4
start = "+20m"
run_time = "10m"
time_limit = "1h"
arrival = "burst"
"""


@pytest.mark.timeout(600)
def test_a_campaign_file_adds_its_jobs_to_a_real_replay_at_their_scaled_time(tmp_path):
    """`--add campaign.toml` end to end: the campaign's jobs are submitted as their own user, 20 real minutes after
    the history's first submission (20 sandbox s at 60x), and the scheduler runs them; the history's jobs too."""
    work = REPO / f".sandbox-test-{lab_slurm()}-add"
    trace, camp = tmp_path / "history.txt", tmp_path / "campaign.toml"
    assert _cli("sandbox", "example-trace", "--out", str(trace), "--jobs", "20", "--hours", "0.5",
                "--run-median", "4", "--seed", "3").returncode == 0
    camp.write_text(CAMPAIGN)
    # --workdir relative, as its default (.sandbox) is: the replayed jobs' scripts must still be found
    r = _cli("sandbox", "replay", "--trace", str(trace), "--site", "site_configs/example/site.toml", "--add",
             str(camp), "--clock", "scaled", "--speedup", "60", "--slurm", lab_slurm(), "--workdir",
             str(work.relative_to(REPO)), "--port-offset",
             str(OFFSET + 200), "--json", timeout=540)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)["candidate"]
    jobs = {j["key"]: j for j in res["jobs"]}
    added = {k: j for k, j in jobs.items() if k.startswith("c-sweep-")}
    assert sorted(added) == [f"c-sweep-{i}" for i in range(4)], sorted(jobs)
    assert len(jobs) == 24 and res["overall"]["jobs"] == 24
    for k, j in added.items():
        print(k, j)
        assert (j["status"], j["tier"], j["account"], j["gpus"]) == ("finished", "production", "vision", 8), j
        # submitted at +20 min (in real time, as the sandbox reports starts): none can start before
        assert j["start"] >= 20 * 60 - 60, j
    assert all(j["status"] == "finished" for j in jobs.values()), [j for j in jobs.values()
                                                                     if j["status"] != "finished"]
    assert any("sweep" in n for n in res["notes"]), res["notes"]
    sacct = (work / "candidate" / "sacct.txt").read_text()
    ids = json.loads((work / "candidate" / "replay.json").read_text())["job_ids"]
    users = {ln.split("|")[0]: ln.split("|")[3] for ln in sacct.splitlines()[1:]}
    campaign_users = {users[ids[k]] for k in added}
    history_users = {users[ids[k]] for k in jobs if k not in added}
    assert len(campaign_users) == 1 and not campaign_users & history_users, (campaign_users, history_users)
    assert _sandbox_daemons(work) == []


@pytest.mark.timeout(600)
def test_node_scale_replays_a_scaled_model_through_the_cli(tmp_path):
    """`--node-scale 2` on the example site (16 nodes of 8 GPUs): the sandbox emulates 8 nodes of 16 GPUs, says so
    in the output, and the history's jobs run on the model; a job wider than the model's node is still placed."""
    work = REPO / f".sandbox-test-{lab_slurm()}-scaled"
    trace = tmp_path / "history.txt"
    assert _cli("sandbox", "example-trace", "--out", str(trace), "--jobs", "20", "--hours", "0.5",
                "--run-median", "4", "--seed", "5").returncode == 0
    r = _cli("sandbox", "replay", "--trace", str(trace), "--site", "site_configs/example/site.toml", "--node-scale",
             "2", "--clock", "scaled", "--speedup", "60", "--slurm", lab_slurm(), "--workdir", str(work),
             "--port-offset", str(OFFSET + 250), "--json", timeout=540)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)["candidate"]
    assert any(n.startswith("scaled model 1:2: 8 emulated nodes for 16 real ones") for n in res["notes"]), res["notes"]
    assert res["overall"]["jobs"] == 20
    assert all(j["status"] == "finished" for j in res["jobs"]), [j for j in res["jobs"] if j["status"] != "finished"]
    from slurmtools.hostlist import expand

    conf = (work / "candidate" / "lab" / "etc" / "site.conf").read_text().splitlines()
    model = {h: ln for ln in conf if ln.startswith("NodeName=") for h in expand(ln.split()[0].split("=", 1)[1])}
    assert len(model) == 8 and all("Gres=gpu:h100:16 " in ln for ln in model.values()), conf
    ran = {h for ln in (work / "candidate" / "sacct.txt").read_text().splitlines()[1:]
           for h in expand(ln.split("|")[15]) if ln.split("|")[15] not in ("", "None assigned")}
    assert ran and ran <= set(model), (ran, sorted(model))
    assert _sandbox_daemons(work) == []


#: what the "live" cluster runs before `--since` reads it back: (account, tier, GPUs, seconds)
LIVE_JOBS = (("vision", "production", 1, 4), ("nlp", "standard", 2, 6), ("nlp", "scavenger", 8, 3),
             ("vision", "standard", 4, 5))


@pytest.mark.timeout(900)
def test_since_replays_the_history_the_live_clusters_accounting_holds(tmp_path):
    """`--since` end to end: a lab standing for the live cluster runs four jobs; `sandbox replay --since 1h`, pointed
    at it by SLURM_CONF as an admin's shell would be, reads them back from its slurmdbd and replays them in a
    sandbox of its own: the same jobs (account, tier, GPUs, run time), all finished, the live lab untouched."""
    live_dir = REPO / f".sandbox-test-{lab_slurm()}-live"
    work = REPO / f".sandbox-test-{lab_slurm()}-since"
    offset = str(OFFSET + 300)
    env = dict(os.environ, SLURMTOOLS_SITE=str(REPO / "site_configs/example/site.toml"),
               SLURMTOOLS_LAB_DIR=str(live_dir), SLURMTOOLS_LAB_PORT_OFFSET=offset)
    env.pop("SLURMTOOLS_LAB_REUSE", None)
    up = subprocess.run([str(LAB_SCRIPT), "up", "--slurm", lab_slurm()], capture_output=True, text=True, env=env,
                        timeout=600)
    try:
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
        lenv, version = _lab_env(live_dir)
        live = Lab(dir=live_dir, env=lenv, slurm_version=version)
        live.wait_nodes_idle()
        from slurmtools.site import load_site

        tiers = load_site(REPO / "site_configs/example/site.toml").tiers
        ids = []
        for account, tier, gpus, secs in LIVE_JOBS:
            t = tiers[tier]   # the site's job_submit.lua wants a preemptible tier's warning signal in the script
            sig = f"#SBATCH --signal=B:{t.checkpoint_signal}@{t.signal_lead}\n" if t.preempted_by else ""
            p = live.sh(f"sbatch --parsable -A {account} -q {tier} --gres=gpu:h100:{gpus} -t 60 -o /dev/null",
                        user="labuser", input=f"#!/bin/bash\n{sig}sleep {secs}\n")
            ids.append(int(p.stdout.strip().split(";")[0]))
        for j in ids:
            live.wait_state(j, "COMPLETED", timeout=120)
            live.wait_accounting(j)
        # seconds after the lab came up, each job's priority already counts its fair share (PriorityWeightFairshare
        # 10000, nothing used yet): the lab adds its accounts before slurmctld starts, so the fair-share pass it runs
        # as it starts knows them; one without them left every factor at 0 for the first 5 minutes
        qos_only = {"production": 100000, "standard": 10000, "scavenger": 1000}   # PriorityWeightQOS x tier share
        prio = [int(ln.split("InitPrio=")[1].split()[0]) for ln in (live_dir / "log" / "slurmctld.log").read_text()
                .splitlines() if "_slurm_rpc_submit_batch_job" in ln]
        assert [p - qos_only[t] for p, (_, t, _, _) in zip(prio, LIVE_JOBS)] == [10000] * len(LIVE_JOBS), prio
        r = subprocess.run([sys.executable, "-m", "slurmtools", "sandbox", "replay", "--since", "1h", "--site",
                            "site_configs/example/site.toml", "--clock", "scaled", "--speedup", "1", "--slurm",
                            lab_slurm(), "--workdir",
                            str(work), "--port-offset", str(OFFSET + 400), "--json"], cwd=REPO, env=lenv,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        res = json.loads(r.stdout)["candidate"]
        got = sorted((j["account"], j["tier"], j["gpus"], j["status"], j["key"]) for j in res["jobs"])
        assert [g[:4] for g in got] == sorted((a, t, g, "finished") for a, t, g, _ in LIVE_JOBS), got
        assert sorted(int(g[4]) for g in got) == sorted(ids)
        work_s = {int(j["key"]): j["work_s"] for j in res["jobs"]}
        for j, (*_, secs) in zip(ids, LIVE_JOBS):
            assert secs <= work_s[j] <= secs + 2, (j, work_s[j])
        # the live lab is still there and still holds just its own four jobs
        rows = live.sh("sacct -a -X -n -P -o JobIDRaw -S now-1hours").stdout.split()
        assert sorted(map(int, rows)) == sorted(ids)
    finally:
        subprocess.run([str(LAB_SCRIPT), "down"], capture_output=True, env=env, timeout=300)
    assert _sandbox_daemons(work) == [] and _sandbox_daemons(live_dir) == []


def _as_from_a_terminal() -> None:
    """The replay's signal dispositions as a terminal session gives them: SIGINT and SIGHUP at their defaults.
    Started in the background of a non-interactive shell (`nohup ... &`, some CI runners), the test and its children
    inherit both ignored, and Python then installs no KeyboardInterrupt for SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


#: how each way of stopping a replay reaches it: (signal, to its whole process group as a terminal sends it, twice)
STOPS = {
    "ctrl_c_twice": (signal.SIGINT, True, True),   # the second one while the sandbox's daemons are being stopped
    "sigterm": (signal.SIGTERM, False, False),
    "hangup": (signal.SIGHUP, True, False),        # the admin's terminal or SSH session closed
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("how", list(STOPS))
def test_ctrl_c_stops_every_daemon_of_the_sandbox(tmp_path, how):
    signum, to_group, twice = STOPS[how]
    work = REPO / f".sandbox-test-{lab_slurm()}-int"
    assert _sandbox_daemons(work) == [], "an earlier sandbox's daemons still run in this test's folder"
    trace = tmp_path / "history.txt"
    assert _cli("sandbox", "example-trace", "--out", str(trace), "--jobs", "30", "--hours", "0.5").returncode == 0
    p = subprocess.Popen([sys.executable, "-m", "slurmtools", "sandbox", "replay", "--trace", str(trace), "--site",
                          "site_configs/example/site.toml", "--speedup", "30", "--slurm", lab_slurm(),
                          "--workdir", str(work), "--port-offset", str(OFFSET + 100)], cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=_as_from_a_terminal)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and not any("slurmctld" in ln for ln in _sandbox_daemons(work)):
            assert p.poll() is None, p.communicate()
            time.sleep(1)
        assert any("slurmctld" in ln for ln in _sandbox_daemons(work)), "the sandbox's slurmctld never started"
        # interrupt while replayed jobs run: their programs must not outlive the sandbox either
        deadline = time.time() + 300   # the sandbox's users are created (sacctmgr) before the first job
        seen = []                      # kept: a short job's program may end before a second look
        while time.time() < deadline and not seen:
            assert p.poll() is None, p.communicate()
            time.sleep(0.5)
            seen = _job_programs(work)
        assert seen, "no replayed job started within 5 minutes"
        # a terminal signals its whole foreground process group: the replay and whatever Slurm command it runs
        (os.killpg if to_group else os.kill)(p.pid, signum)
        if twice:
            time.sleep(1.0)
            os.killpg(p.pid, signum)
        _, err = p.communicate(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        daemons, programs = _sandbox_daemons(work), _job_programs(work)
        if daemons:
            _bring_down(work / "candidate" / "lab", OFFSET + 100)   # a failed test leaves no daemon to the next
    assert p.returncode == 130, err[-2000:]
    assert "interrupted" in err
    assert daemons == []
    assert programs == []


#: a scavenger job holding the whole example site (16 nodes x 8 GPUs, 20 min) and a one-GPU production job that
#: arrives 2 minutes later: production preempts it after the scavenger tier's 1-minute grace
PREEMPTION_TRACE = """\
JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Eligible|Start|End|ElapsedRaw|TimelimitRaw|\
NodeList|AllocTRES|ReqTRES|AllocCPUS
1|1|wide|ann|vision|gpu|scavenger|COMPLETED|0:0|2026-11-02T08:00:00|2026-11-02T08:00:00|2026-11-02T08:00:00|\
2026-11-02T08:20:00|1200|60|gpu[01-16]|billing=128,cpu=512,gres/gpu:h100=128,gres/gpu=128,node=16|\
billing=128,cpu=512,gres/gpu:h100=128,gres/gpu=128,node=16|512
2|2|urgent|bo|nlp|gpu|production|COMPLETED|0:0|2026-11-02T08:02:00|2026-11-02T08:02:00|2026-11-02T08:02:00|\
2026-11-02T08:06:00|240|30|gpu01|billing=1,cpu=4,gres/gpu:h100=1,gres/gpu=1,node=1|\
billing=1,cpu=4,gres/gpu:h100=1,gres/gpu=1,node=1|4
"""


@pytest.mark.timeout(600)
def test_fast_clock_replays_a_preemption_with_slurms_own_grace(tmp_path):
    """`--clock faketime --speedup 60`: slurmctld and slurmd run 60x faster than real time, so the 1-minute grace,
    the 30 s timer that enforces it and the requeue delay are all one sixtieth long in real time, and the job
    limits reach Slurm as recorded. The outcome, read back from Slurm's fast clock, shows the production job
    waiting about the grace and the scavenger job preempted once and then finishing its work."""
    work = REPO / f".sandbox-test-{lab_slurm()}-faketime"
    trace = tmp_path / "history.txt"
    trace.write_text(PREEMPTION_TRACE)
    r = _cli("sandbox", "replay", "--trace", str(trace), "--site", "site_configs/example/site.toml", "--clock",
             "faketime", "--speedup", "60", "--slurm", lab_slurm(), "--workdir", str(work), "--port-offset",
             str(OFFSET + 350), "--json", timeout=540)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)["candidate"]
    jobs = {j["key"]: j for j in res["jobs"]}
    print(json.dumps(jobs, indent=1), res["wall_s"], res["notes"])
    wide, urgent = jobs["1"], jobs["2"]
    assert wide["status"] == urgent["status"] == "finished", (wide, urgent)
    # preempted at least once: Slurm 25.11 was seen requeueing it again as its next run ended (a job that ends with
    # the preemption's grace flag set is requeued, proc_req.c), and that third run found its work done
    assert wide["preemptions"] >= 1 and wide["runs"] >= 2 and urgent["preemptions"] == 0, (wide, urgent)
    # the grace (60 s) and the 30 s check that ends it, on the fast clock; launching costs up to ~1 real s = 60 s
    assert 55 <= urgent["wait_s"] <= 240, urgent
    # the scavenger job's runs hold its 20 minutes of work, plus the grace's work after the last save
    assert 1200 <= wide["held_s"] <= 1200 + 600, wide
    assert urgent["held_s"] >= 240 and urgent["start"] >= 120, urgent
    assert res["span_h"] * 3600 / res["wall_s"] > 10, (res["span_h"], res["wall_s"])   # it was accelerated
    assert any("libfaketime 60x" in n for n in res["notes"]), res["notes"]
    lab = work / "candidate" / "lab"
    clock = dict(ln.split("=", 1) for ln in (lab / "faketime.env").read_text().splitlines())
    limits = {ln.split("|")[0]: ln.split("|")[14] for ln in (work / "candidate" / "sacct.txt").read_text()
              .splitlines()[1:]}
    ids = json.loads((work / "candidate" / "replay.json").read_text())["job_ids"]
    assert (limits[ids["1"]], limits[ids["2"]]) == ("60", "30"), limits   # the recorded limits, not scaled
    conf = (lab / "etc" / "slurm.conf").read_text().splitlines()   # no hook: its real time would count 60x
    assert not [ln for ln in conf if ln.startswith(("Prolog=", "Epilog="))] and "PrologEpilogTimeout=1800" in conf
    # the urgent job ran once for its recorded 240 s on Slurm's clock: its program counted from Slurm's start of the
    # run (SLURM_JOB_START_TIME; on 22.05 scontrol's StartTime), so its launch, 60 times longer on the fast clock,
    # did not add to it (before: 244 s here on 22.05; +3 to +8 s a run in bench_sandbox's 60x replays on 25.11).
    # Its own end is the mtime of its last save (the kernel's clock, real time), put on Slurm's clock: 240 s after
    # the whole second sacct gives as the start, plus at most one 0.2 s step of its loop; less by up to 0.5 s (8 real
    # ms: the program's clock is libfaketime's, the mtime is put on it here by FAKETIME_ORIGIN; CI saw -0.17 s)
    rows = {ln.split("|")[0]: ln.split("|") for ln in (work / "candidate" / "sacct.txt").read_text().splitlines()[1:]}
    start = time.mktime(time.strptime(rows[ids["2"]][11], "%Y-%m-%dT%H:%M:%S"))
    origin = float(clock["FAKETIME_ORIGIN"])
    ended = origin + 60 * ((work / "candidate" / "state" / "2").stat().st_mtime - origin)
    assert -0.5 <= ended - start - 240 <= 1.5, ended - start - 240
    # sacct's Elapsed adds the program's exit and slurmd's telling slurmctld, real time counted 60 times: 3 s on a
    # quiet machine, 5 s seen beside another lab's tests (83 real ms); 15 s is a quarter of a real second
    assert -1 <= int(rows[ids["2"]][13]) - 240 <= 15, rows[ids["2"]][13]
    # the history began 1 recorded second (the default --lead-in) after one of slurmctld's fair-share passes, which
    # come every recorded 5 minutes from the first (its state file keeps when that ran), at any speed-up
    import struct

    kept = json.loads((work / "candidate" / "replay.json").read_text())
    _last, first_pass = struct.unpack(">qq", (lab / "state" / "priority_last_decay_ran").read_bytes()[:16])
    after = (origin + (kept["t0"] - origin) * 60 - first_pass) % 300
    assert 0.5 <= after <= 2.5, after
    # and the first job's priority counted its fair share: the lab adds the accounts before slurmctld starts, so its
    # first pass knows them (a pass without them left the factor at 0 until the next, 5 minutes at 1x)
    prio = [int(ln.split("InitPrio=")[1].split()[0]) for ln in (lab / "log" / "slurmctld.log").read_text().splitlines()
            if "_slurm_rpc_submit_batch_job" in ln and "InitPrio=" in ln]
    assert prio and prio[0] > 1000, prio   # scavenger's QoS share alone is 1000 (PriorityWeightQOS x 0.01)
    assert _sandbox_daemons(work) == []
    assert not _running(int(clock["FAKETIME_PID"])), "the fast clock's launcher outlived the sandbox"
    assert not Path(f"/dev/shm/faketime_shm_{clock['FAKETIME_PID']}").exists()


@pytest.mark.timeout(900)
def test_repeat_replays_the_history_again_later_and_reports_the_spread(tmp_path):
    """`--repeat 3`: the same history replayed three times through fresh sandboxes, the first submission 1, 8 and
    15 s after each lab came up; every replay runs every job; the report carries each figure's lowest and highest
    value, the first replay's value between them; each replay's lab is stopped."""
    work = REPO / f".sandbox-test-{lab_slurm()}-repeat"
    trace = tmp_path / "history.txt"
    assert _cli("sandbox", "example-trace", "--out", str(trace), "--jobs", "20", "--hours", "0.5", "--load", "2.5",
                "--run-median", "4", "--seed", "3").returncode == 0
    r = _cli("sandbox", "replay", "--trace", str(trace), "--site", "site_configs/example/site.toml", "--repeat", "3",
             "--speedup", "60", "--slurm", lab_slurm(), "--workdir", str(work), "--port-offset", str(OFFSET + 450),
             "--out", str(tmp_path / "report"), "--json", timeout=840)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    res = doc["candidate"]
    assert res["lead_in_s"] == 1.0 and [x["lead_in_s"] for x in res["repeats"]] == [8.0, 15.0]
    for x in [res, *res["repeats"]]:
        print(x["lead_in_s"], {k: x["overall"][k] for k in ("finished", "wait_median_h", "wait_p90_h",
                                                            "preemptions", "gpu_hours_lost")}, x["wall_s"])
        assert (x["overall"]["jobs"], x["overall"]["finished"]) == (20, 20), x["overall"]
        assert x["wall_s"] < 0.5 * 3600 / 10                              # each was accelerated
    for k in ("candidate", "candidate-2", "candidate-3"):
        ids = json.loads((work / k / "replay.json").read_text())["job_ids"]
        assert len(ids) == 20, k                                          # each replay submitted every job
    rows = {(s["scope"], s["group"], s["figure"]): s for s in doc["spread"]}
    for f in ("wait_median_h", "wait_p90_h", "wait_max_h", "preemptions", "gpu_hours_lost", "utilisation"):
        s = rows[("all", "all", f)]
        first = res["overall"][f]
        assert s["candidate_runs"] == 3 and s["candidate_min"] <= first <= s["candidate_max"], (f, s, first)
    assert rows[("all", "all", "wait_max_h")]["candidate_max"] > 0       # a loaded queue: some job waited
    assert (tmp_path / "report" / "sandbox_spread.csv").exists()
    assert "Spread over repeated replays" in (tmp_path / "report" / "sandbox.md").read_text()
    assert _sandbox_daemons(work) == []


def _daily_history(days: int) -> str:
    """`days` days of one recorded routine as sacct prints it: every day at 08:00, 08:01 and 08:02 a vision
    job of 6 GPUs on one node for 10 minutes (3 GPU-hours a day, limit 1 h), production tier."""
    from datetime import datetime, timedelta, timezone

    from slurmtools.sandbox.example_trace import HEADER

    t0 = datetime(2026, 11, 2, 8, tzinfo=timezone.utc)
    tres = "billing=6,cpu=24,gres/gpu:h100=6,gres/gpu=6,node=1"
    lines = [HEADER]
    for d in range(days):
        for i in range(3):
            jid = 2000 + 3 * d + i
            s = t0 + timedelta(days=d, minutes=i)
            ts, te = s.strftime("%Y-%m-%dT%H:%M:%S"), (s + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%S")
            lines.append("|".join(map(str, (jid, jid, f"daily-{d}-{i}", "vision-u0", "vision", "gpu", "production",
                                             "COMPLETED", "0:0", ts, ts, ts, te, 600, 60, "gpu01", tres, tres, 24))))
    return "\n".join(lines) + "\n"


@pytest.mark.timeout(600)
def test_forecast_load_replays_from_the_end_of_a_long_history(tmp_path):
    """`--forecast mid --forecast-days 2 --from +10d`: ten days of history feed the demand forecast (3 GPU-hours a
    day, its last day partial), and the replay starts where the history ends, so only the forecast's second day is
    replayed: the jobs it drew from the history (the routine's shape, tier, account and time of day) are submitted
    to a real slurmctld at their scaled time and run; none of the recorded jobs is, and the notes say both."""
    work = REPO / f".sandbox-test-{lab_slurm()}-forecast"
    trace = tmp_path / "history.txt"
    trace.write_text(_daily_history(10))
    r = _cli("sandbox", "replay", "--trace", str(trace), "--site", "site_configs/example/site.toml", "--forecast",
             "mid", "--forecast-days", "2", "--from", "+10d", "--clock", "scaled", "--speedup", "60", "--slurm",
             lab_slurm(), "--workdir", str(work), "--port-offset", str(OFFSET + 150), "--json", timeout=540)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)["candidate"]
    jobs = {j["key"]: j for j in res["jobs"]}
    print(sorted(jobs), res["notes"])
    # day 0 of the forecast is the history's partial last day, which already asked its 3 GPU-hours; day 1 gets 3
    assert sorted(jobs) == ["f-mid-1-0", "f-mid-1-1", "f-mid-1-2"], sorted(jobs)
    for k, j in jobs.items():
        assert (j["status"], j["tier"], j["account"], j["gpus"]) == ("finished", "production", "vision", 6), j
    notes = "\n".join(res["notes"])
    assert "added the demand forecast (mid) for 2d" in notes and "3 GPU-hours/day" in notes, notes
    # the history's times are sacct's, local wall-clock times of this machine's zone: 08:00 there, in UTC
    from datetime import datetime, timezone
    at = datetime(2026, 11, 12, 8).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"replayed from {at}: 30 recorded job(s) that ended before it left out" in notes, notes
    ids = json.loads((work / "candidate" / "replay.json").read_text())["job_ids"]
    assert sorted(ids) == sorted(jobs)                                # Slurm was given exactly these
    sacct = (work / "candidate" / "sacct.txt").read_text().splitlines()
    states = {ln.split("|")[0]: ln for ln in sacct[1:]}
    assert all("COMPLETED" in states[ids[k]] for k in jobs), sacct
    assert _sandbox_daemons(work) == []
