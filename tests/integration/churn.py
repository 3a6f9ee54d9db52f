"""A churn run on the real Slurm lab: checkpointing trainers and plain jobs on the preemptible tiers, production
jobs arriving at random that preempt them, requeued jobs restarted at once (`slurmtools admin restart-now`) or
after Slurm's requeue hold, then every figure checked against what Slurm and the jobs themselves recorded.

Used by tests/integration/test_churn_lab.py (a few minutes) and benchmarks/bench_churn.py (full size). Seeded: the
same seed makes the same choices (tiers, arrival times, which node each production job takes among the busy ones,
which requeued jobs restart at once); Slurm's own timing still varies, so a failure names its seed to replay.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "examples" / "checkpoint_trainer.py"
WIRING = REPO / "slurmtools" / "checkpoint_wiring.sh"
USER = "labuser"
#: the warning lead the site's policy wants in the script of each preemptible tier (site_configs/example)
LEAD = {"standard": 300, "scavenger": 120}
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE"}


@dataclass
class ChurnConfig:
    seed: int = 16
    trainers: int = 40
    plain: int = 10
    production: int = 6
    #: production arrivals, seconds after the submissions, uniformly in this window
    arrive: tuple[float, float] = (12.0, 60.0)
    prod_seconds: tuple[int, int] = (5, 12)
    steps: int = 150
    step_s: float = 0.4
    restart_step_s: float = 0.05
    plain_s: int = 45
    plain_rerun_s: int = 3
    #: requeued jobs restarted at once with `slurmtools admin restart-now`; the others wait Slurm's requeue hold.
    #: Requeues later than `hold_until` seconds restart at once always (the hold would only stretch the run).
    immediate_share: float = 0.5
    hold_until: float = 40.0
    #: GraceTime during the run (restored after): short, so plain programs are requeued soon after preemption
    grace: dict = field(default_factory=lambda: {"scavenger": 10, "standard": 30})
    timeout: float = 600.0


@dataclass
class Job:
    kind: str  # trainer | plain | production
    tier: str
    folder: Path
    job_id: int = 0
    steps: int = 0
    nodes_wanted: tuple[str, ...] = ()


@dataclass
class ChurnResult:
    seed: int
    jobs: list[Job]
    since: datetime
    until: datetime
    runs: dict  # job id -> [sacct -D rows: dict(state, start, end, gpus)]
    final_state: dict
    preemptions: int
    immediate: int
    report: dict
    expected: dict
    recomputed_per_resume: list[int]
    signal_to_saved_s: list[float]
    unloadable: int
    drained: list[str]
    problems: list[str]
    wall_s: float
    in_grace: list[int] = field(default_factory=list)

    def table(self) -> str:
        tr = [j for j in self.jobs if j.kind == "trainer"]
        lines = [f"churn run, seed {self.seed}: {len(self.jobs)} jobs ({len(tr)} trainers, "
                 f"{sum(j.kind == 'plain' for j in self.jobs)} plain, "
                 f"{sum(j.kind == 'production' for j in self.jobs)} production), "
                 f"{sum(len(r) for r in self.runs.values())} runs, {self.preemptions} preemptions "
                 f"({self.immediate} restarted at once) in {self.wall_s:.0f} s",
                 "| figure | value |", "| --- | --- |"]
        done = sum(self.final_state.get(j.job_id) == "COMPLETED" for j in self.jobs)
        lost = len(self.jobs) - done
        good = sum(1 for j in tr if not any(p.startswith(f"trainer {j.job_id}:") for p in self.problems))
        timeout = [j for j in self.in_grace if self.final_state.get(j) == "TIMEOUT"]
        rows = [("jobs lost (not COMPLETED, work not done)", lost - len(timeout)),
                ("preempted jobs that finished within the grace time (of them Slurm says TIMEOUT)",
                 f"{len(self.in_grace)} ({len(timeout)})"),
                ("trainers with the result of an uninterrupted run", f"{good} of {len(tr)}"),
                ("steps recomputed over all resumes", sum(self.recomputed_per_resume)),
                ("resumes", len(self.recomputed_per_resume)),
                ("signal-to-saved median / max (s)",
                 f"{statistics.median(self.signal_to_saved_s):.2f} / {max(self.signal_to_saved_s):.2f}"
                 if self.signal_to_saved_s else "-"),
                ("unloadable checkpoints", self.unloadable),
                ("drained nodes", len(self.drained))]
        for k in ("preempted_runs", "requeued_runs", "failed_runs", "runs_finished_in_preemption_grace",
                  "gpu_hours_lost_to_preemption"):
            got, want = self.report.get(k), self.expected.get(k)
            fmt = (lambda v: f"{v:.4f}") if isinstance(want, float) else str
            rows.append((f"report {k} / sacct+checkpoints", f"{fmt(got)} / {fmt(want)}"))
        lines += [f"| {k} | {v} |" for k, v in rows]
        if self.problems:
            lines.append(f"problems ({len(self.problems)}):")
            lines += [f"  - {p}" for p in self.problems[:40]]
        return "\n".join(lines)


def _trainer_script(tier: str, cfg: ChurnConfig) -> str:
    return f"""#!/bin/bash
#SBATCH --signal=B:URG@{LEAD[tier]}
#SBATCH --requeue
#SBATCH --open-mode=append
source {WIRING}
echo "batch start restart=${{SLURM_RESTART_COUNT:-0}} node=$SLURMD_NODENAME"
slurmtools_run /usr/bin/python3 {TRAINER} "$CHURN_DIR/ck" "$CHURN_DIR/log" --steps "$CHURN_STEPS" \\
    --step-seconds {cfg.step_s} --restart-step-seconds {cfg.restart_step_s}
echo "batch rc=$?"
"""


def _plain_script(cfg: ChurnConfig) -> str:
    # a program that knows nothing of signals: the wiring leaves it running, Slurm requeues it at the grace end
    return f"""#!/bin/bash
#SBATCH --signal=B:URG@{LEAD['scavenger']}
#SBATCH --requeue
#SBATCH --open-mode=append
source {WIRING}
echo "plain start run=${{SLURM_RESTART_COUNT:-0}}" >> "$CHURN_DIR/log"
slurmtools_run bash -c 'if [ "${{SLURM_RESTART_COUNT:-0}}" = 0 ]; then sleep {cfg.plain_s}; else sleep {cfg.plain_rerun_s}; fi'
rc=$?
echo "plain end run=${{SLURM_RESTART_COUNT:-0}} rc=$rc" >> "$CHURN_DIR/log"
exit $rc
"""


def _sbatch(lab, args: str) -> int:
    out = lab.sh(f"sbatch --parsable {args}", user=USER).stdout.strip()
    return int(out.split(";")[0])


def run_churn(lab, cfg: ChurnConfig, log=print) -> ChurnResult:
    """Submit, drive and check one churn run; returns every figure and the problems found (empty: all held)."""
    from tests.integration.labtools import job_folder

    rng = random.Random(cfg.seed)
    lab.wait_nodes_idle(180)
    since = datetime.now().replace(microsecond=0) + timedelta(seconds=1)
    time.sleep(max(0.0, (since - datetime.now()).total_seconds()) + 0.05)
    base = job_folder(lab, f"churn-{cfg.seed}")
    scripts = {}
    for name, text in (("standard", _trainer_script("standard", cfg)), ("scavenger", _trainer_script("scavenger", cfg)),
                       ("plain", _plain_script(cfg))):
        p = base / f"{name}.sbatch"
        p.write_text(text)
        p.chmod(0o755)
        scripts[name] = p
    old_grace = {t: _seconds(lab.sh(f"sacctmgr -n -P show qos {t} format=gracetime").stdout.strip())
                 for t in cfg.grace}
    jobs: list[Job] = []
    t0 = time.monotonic()
    immediate = 0
    restarted: dict[int, int] = {}  # job -> restart count already handled
    futures = []
    pool = ThreadPoolExecutor(max_workers=4)
    lock = threading.Lock()
    try:
        for t, g in cfg.grace.items():
            lab.sh(f"sacctmgr -i modify qos where name={t} set GraceTime={g}")
        # trainers and plain jobs in a seeded order, so both kinds share the nodes production jobs will hit
        kinds = ["trainer"] * cfg.trainers + ["plain"] * cfg.plain
        rng.shuffle(kinds)
        for i, kind in enumerate(kinds):
            if kind == "plain":
                d = base / f"p{i:03d}"
                d.mkdir()
                d.chmod(0o777)
                j = Job("plain", "scavenger", d)
                j.job_id = _sbatch(lab, f"-J churn-p{i} -p gpu --qos=scavenger -A nlp --gres=gpu:h100:1 -t 10 "
                                        f"-o {d}/out.txt --export=ALL,CHURN_DIR={d} {scripts['plain']}")
                jobs.append(j)
                continue
            tier = rng.choice(["scavenger", "standard"])
            d = base / f"t{i:03d}"
            d.mkdir()
            d.chmod(0o777)
            steps = cfg.steps + rng.randrange(0, cfg.steps // 3 + 1)
            j = Job("trainer", tier, d, steps=steps)
            j.job_id = _sbatch(lab, f"-J churn-t{i} -p gpu --qos={tier} -A nlp --gres=gpu:h100:1 -t 10 "
                                    f"-o {d}/out.txt --export=ALL,CHURN_DIR={d},CHURN_STEPS={steps} "
                                    f"{scripts[tier]}")
            jobs.append(j)
        arrivals = sorted(rng.uniform(*cfg.arrive) for _ in range(cfg.production))
        low = {j.job_id for j in jobs}
        backend = lab.backend()

        def restart(jid: int) -> None:
            from slurmtools.slurm.restart import restart_now

            (r,) = restart_now(backend, [jid], timeout=120)
            if r.outcome not in ("restarted", "running"):
                log(f"restart-now job {jid}: {r.outcome} {r.detail}")

        while True:
            now = time.monotonic() - t0
            while arrivals and now >= arrivals[0]:
                arrivals.pop(0)
                # one of the three nodes running most of our preemptible jobs and not already claimed by a
                # production job: every arrival preempts several
                per_node: dict[str, int] = {}
                for info in backend.jobs(sorted(low)):
                    if info.state == "RUNNING":
                        for n in info.nodes:
                            per_node[n] = per_node.get(n, 0) + 1
                claimed = {n for j in jobs if j.kind == "production" for n in j.nodes_wanted}
                busy = sorted((n for n in per_node if n not in claimed), key=lambda n: (-per_node[n], n))[:3]
                node = rng.choice(busy) if busy else f"gpu{rng.randrange(1, 17):02d}"
                k = sum(j.kind == "production" for j in jobs)
                d = base / f"prod{k:03d}"
                d.mkdir()
                d.chmod(0o777)
                j = Job("production", "production", d, nodes_wanted=(node,))
                j.job_id = _sbatch(lab, f"-J churn-prod{k} -p gpu --qos=production -A nlp -w {node} --exclusive "
                                        f"--gres=gpu:h100:8 -t 5 -o {d}/out.txt "
                                        f"--wrap 'sleep {rng.randint(*cfg.prod_seconds)}'")
                jobs.append(j)
                log(f"[{now:5.1f}s] production job {j.job_id} on {node}")
            infos = {i.job_id: i for i in backend.jobs([j.job_id for j in jobs])}
            for jid in sorted(low):
                info = infos.get(jid)
                if info is None or info.restarts <= restarted.get(jid, 0):
                    continue
                restarted[jid] = info.restarts
                if now > cfg.hold_until or rng.random() < cfg.immediate_share:
                    immediate += 1
                    futures.append(pool.submit(restart, jid))
            left = [j for j in jobs if j.job_id not in infos or infos[j.job_id].state not in FINAL]
            left = [j for j in left if lab.job_state(j.job_id) not in FINAL] if len(left) < 5 else left
            if not left and not arrivals:
                break
            if now > cfg.timeout:
                log(f"churn: timed out after {cfg.timeout:.0f} s with {len(left)} job(s) left")
                break
            time.sleep(1.0)
    finally:
        for f in futures:
            f.result()
        pool.shutdown()
        for t, g in old_grace.items():
            lab.sh(f"sacctmgr -i modify qos where name={t} set GraceTime={g}")
    wall = time.monotonic() - t0
    for j in jobs:
        if lab.job_state(j.job_id) not in FINAL:
            subprocess.run(["scancel", str(j.job_id)], env=lab.env)
    for j in jobs:
        lab.wait_accounting(j.job_id, timeout=120)
    time.sleep(1)
    until = datetime.now().replace(microsecond=0) + timedelta(seconds=1)
    return _check(lab, cfg, jobs, since, until, immediate, wall)


def _preempted_last_run(spool: Path, jid: int, run: int) -> bool:
    """Slurm preempted this run: its epilog record saw PreemptTime set."""
    return any(json.loads(p.read_text()).get("preempt_time") for p in (spool / "jobs").glob(f"{jid}.{run}.*.json"))


def _program_finished(j: Job, run: int) -> bool:
    """The job's own program says it finished in that run (trainer: its done line; plain: rc=0)."""
    text = (j.folder / "log").read_text() if (j.folder / "log").exists() else ""
    if j.kind == "trainer":
        return any(" done " in ln and f"restart={run} " in ln for ln in text.splitlines())
    return f"plain end run={run} rc=0" in text


def _seconds(text: str) -> int:
    """sacctmgr's `[D-]HH:MM:SS` -> seconds (it prints that, but takes only seconds back)."""
    days, _, hms = text.rpartition("-")
    h, m, sec = (int(x) for x in hms.split(":"))
    return (int(days) if days else 0) * 86400 + h * 3600 + m * 60 + sec


def _time(s: str) -> float | None:
    return None if s in ("", "Unknown", "None") else datetime.fromisoformat(s).timestamp()


def _check(lab, cfg: ChurnConfig, jobs: list[Job], since: datetime, until: datetime, immediate: int,
           wall: float) -> ChurnResult:
    """Everything the run recorded, side by side with what Slurm and the jobs say; problems listed."""
    sys.path.insert(0, str(REPO / "examples"))
    import checkpoint_trainer

    problems: list[str] = []
    ours = {j.job_id: j for j in jobs}
    out = lab.sh(f"sacct -a -X -D -P -n -o JobIDRaw,State,Start,End,AllocTRES -S {since:%Y-%m-%dT%H:%M:%S} "
                 f"-E {until:%Y-%m-%dT%H:%M:%S}").stdout
    runs: dict[int, list[dict]] = {}
    for line in out.splitlines():
        raw, state, start, end, tres = line.split("|")
        gpus = int(next((kv.split("=")[1] for kv in tres.split(",") if kv.startswith("gres/gpu=")), 0))
        if state.startswith("PENDING") or _time(start) is None:
            continue
        runs.setdefault(int(raw), []).append({"state": state.split()[0], "start": _time(start), "end": _time(end),
                                              "gpus": gpus})
    for rs in runs.values():
        rs.sort(key=lambda r: r["start"])
    others = sorted(set(runs) - set(ours))
    if others:
        problems.append(f"runs of jobs not in this churn overlap its window: {others[:10]}")
    final = {}
    for line in lab.sh(f"sacct -X -P -n -o JobIDRaw,State -j {','.join(str(j) for j in ours)}").stdout.splitlines():
        raw, state = line.split("|")
        final[int(raw)] = state.split()[0]
    spool = lab.dir / "spool" / "slurmtools"
    in_grace = []  # preempted, but the program finished on its own within the grace time
    for jid, j in ours.items():
        last = len(runs.get(jid, [])) - 1
        grace = final.get(jid) in ("COMPLETED", "TIMEOUT") and _preempted_last_run(spool, jid, last)
        if grace:
            in_grace.append(jid)
        if final.get(jid) == "COMPLETED":
            continue
        if grace and final.get(jid) == "TIMEOUT" and _program_finished(j, last):
            continue  # Slurm 22.05: ended after the grace deadline, before the kill: TIMEOUT, its work done
        problems.append(f"{j.kind} {jid}: ended {final.get(jid)} (lost)")
    preemptions = sum(len(runs.get(jid, [])) - 1 for jid in ours)

    # the trainers: the uninterrupted result, every resume from the newest save, at most the unsaved work redone
    recomputed, to_saved, unloadable = [], [], 0
    saves_by_run: dict[tuple[int, int], float] = {}
    for jid, j in ours.items():
        if j.kind != "trainer":
            continue
        lines = (j.folder / "log").read_text().splitlines() if (j.folder / "log").exists() else []
        kv = [dict(w.split("=", 1) for w in ln.split() if "=" in w) | {"_": ln} for ln in lines]
        done = [k for k in kv if " done " in k["_"]]
        if len(done) != 1 or int(done[0]["result"]) != checkpoint_trainer.expected(j.steps):
            problems.append(f"trainer {jid}: {len(done)} done line(s), result "
                            f"{[d.get('result') for d in done]} != {checkpoint_trainer.expected(j.steps)}")
        unloadable += sum("unreadable" in k["_"] or "cannot load" in k["_"] for k in kv)
        last_saved, last_step = 0, -1
        for k in kv:
            ln = k["_"]
            if " saved " in ln:
                last_saved = int(k["step"])
                saves_by_run[(jid, int(k["restart"]))] = float(k["t"])
                if "since_signal_s" in k:
                    to_saved.append(float(k["since_signal_s"]))
            elif " step " in ln:
                last_step = max(last_step, int(ln.split(" step ")[1].split()[0]))
            elif " start " in ln and k.get("restart", "0") != "0":
                frm = int(k["from"])
                if frm != last_saved:
                    problems.append(f"trainer {jid}: run {k['restart']} resumed from step {frm}, the newest save "
                                    f"was step {last_saved}")
                redo = max(0, last_step + 1 - frm)
                recomputed.append(redo)
                if redo > max(0, last_step + 1 - last_saved):
                    problems.append(f"trainer {jid}: {redo} steps redone, more than the {last_step + 1 - last_saved} "
                                    "done since the last save")
    for jid, j in ours.items():
        if j.kind != "plain":
            continue
        text = (j.folder / "log").read_text() if (j.folder / "log").exists() else ""
        n = len(runs.get(jid, []))
        if f"plain end run={n - 1} rc=0" not in text:
            problems.append(f"plain {jid}: its last run ({n - 1}) did not end with rc=0: {text[-300:]!r}")

    # every run of every job has its epilog record, numbered as sacct orders the runs, with Slurm's start
    for jid, rs in runs.items():
        if jid not in ours:
            continue
        for k, r in enumerate(rs):
            recs = [json.loads(p.read_text()) for p in (spool / "jobs").glob(f"{jid}.{k}.*.json")]
            if not recs:
                problems.append(f"job {jid} run {k}: no epilog record")
                continue
            for rec in recs:
                if rec.get("start") is None or abs(rec["start"] - r["start"]) > 10:
                    problems.append(f"job {jid} run {k}: record start {rec.get('start')} "
                                    f"({rec.get('start_source')}), sacct {r['start']}")
        extra = [p.name for p in (spool / "jobs").glob(f"{jid}.*.json")
                 if not p.name.split(".")[1].isdigit() or int(p.name.split(".")[1]) >= len(rs)]
        if extra:
            problems.append(f"job {jid}: records of runs sacct does not have: {extra}")

    # what the report must say, from sacct and the checkpoints: runs of every job in the window
    exp_pre = exp_rq = exp_failed = 0
    lost = tol = 0.0
    t_lo, t_hi = since.timestamp(), until.timestamp()
    for jid, rs in runs.items():
        for k, r in enumerate(rs):
            requeued = k < len(rs) - 1
            pre = r["state"] in ("PREEMPTED", "REQUEUED") or (requeued and r["state"] not in ("NODE_FAIL", "BOOT_FAIL"))
            exp_rq += requeued
            exp_pre += pre
            exp_failed += r["state"] == "FAILED" and not pre
            if pre or requeued:
                end = r["end"] if r["end"] is not None else t_hi
                ck = saves_by_run.get((jid, k))
                c = min(max(float(int(ck)), r["start"]), end) if ck is not None else r["start"]
                lost += max(0.0, min(end, t_hi) - max(c, t_lo)) * r["gpus"] / 3600
                # the report takes the save time the job reported, this the trainer's log line written just
                # after it: both floored to the second, they can fall either side of one
                tol += r["gpus"] / 3600 if ck is not None else 0.0
    expected = {"preempted_runs": exp_pre, "requeued_runs": exp_rq, "failed_runs": exp_failed,
                "runs_finished_in_preemption_grace": len(in_grace), "gpu_hours_lost_to_preemption": lost}
    rep_dir = Path(lab.jobs_dir) / f"churn-report-{cfg.seed}-{int(time.time())}"
    p = subprocess.run([sys.executable, "-m", "slurmtools", "report", "--since", since.isoformat(),
                        "--until", until.isoformat(), "--format", "json", "--out", str(rep_dir),
                        "--epilog-dir", str(spool / "jobs"), "--history", "0", "-q"],
                       capture_output=True, text=True, env=lab.env, timeout=300)
    report = {}
    if p.returncode != 0:
        problems.append(f"report failed: {p.stderr.strip()[-500:]}")
    else:
        s = json.loads((rep_dir / "report.json").read_text())["summary"]
        report = {k: s.get(k) for k in expected}
        for k in ("preempted_runs", "requeued_runs", "failed_runs", "runs_finished_in_preemption_grace"):
            if report[k] != expected[k]:
                problems.append(f"report {k} = {report[k]}, sacct says {expected[k]}")
        if report["gpu_hours_lost_to_preemption"] is None or \
                abs(report["gpu_hours_lost_to_preemption"] - lost) > tol:
            problems.append(f"report gpu_hours_lost_to_preemption = {report['gpu_hours_lost_to_preemption']}, "
                            f"sacct and the checkpoints say {lost:.4f} (to within {tol:.4f})")
    drained = [ln for ln in lab.sh("sinfo -h -N -o '%N %T'").stdout.splitlines()
               if any(w in ln.split()[1] for w in ("drain", "down", "fail"))]
    if drained:
        problems.append(f"nodes drained or down: {drained}")
    return ChurnResult(cfg.seed, jobs, since, until, runs, final, preemptions, immediate, report, expected,
                       recomputed, to_saved, unloadable, drained, problems, wall, in_grace)


def seed_from_env(default: int) -> int:
    return int(os.environ.get("SLURMTOOLS_CHURN_SEED", default))
