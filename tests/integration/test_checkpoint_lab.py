"""Checkpoint-on-signal end to end in the real Slurm lab: preemption and the time-limit warning.

A plain-Python trainer (examples/checkpoint_trainer.py) runs as labuser through the batch wiring
(slurmtools/checkpoint_wiring.sh). Facts these tests rely on (Slurm 22.05, measured): the batch shell is warned
by `--signal=B:SIG@lead` and, with preempt_send_user_signal, by the same signal at preemption (SIG: the default
URG, or USR1 named by a hand-written script through SLURMTOOLS_CHECKPOINT_SIGNAL); a requeued job
waits ~120 s unless its StartTime is set to now; its rerun has SLURM_RESTART_COUNT=1. Timers tick every 30 s.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "examples" / "checkpoint_trainer.py"
WIRING = REPO / "slurmtools" / "checkpoint_wiring.sh"
sys.path.insert(0, str(REPO / "examples"))
import checkpoint_trainer  # noqa: E402

pytestmark = pytest.mark.lab
USER = "labuser"


def workdir(lab, name: str) -> Path:
    d = lab.jobs_dir / f"ckpt-{name}-{int(time.time() * 1000)}"
    d.mkdir()
    d.chmod(0o777)
    return d


def submit_trainer(lab, d: Path, *, qos: str, node: str, limit: str, lead: int, steps: int, step_s: float,
                   restart_step_s: float, exclusive: bool, srun_nodes: int = 0, step_without_scontrol: bool = False,
                   signal: str = "URG") -> int:
    script = d / "train.sbatch"
    launcher = f"srun -N{srun_nodes} --ntasks-per-node=1 " if srun_nodes else ""
    if step_without_scontrol:  # like a container without Slurm's commands: the wiring must do the requeue
        launcher += "env PATH=/nonexistent "
    log = "log-{rank}" if srun_nodes else "log"
    script.write_text(f"""#!/bin/bash
#SBATCH --signal=B:{signal}@{lead}
#SBATCH --requeue
{"" if signal == "URG" else f"export SLURMTOOLS_CHECKPOINT_SIGNAL={signal}"}
source {WIRING}
echo "batch restart=${{SLURM_RESTART_COUNT:-0}} node=$SLURMD_NODENAME"
slurmtools_run {launcher}/usr/bin/python3 {TRAINER} {d}/ck {d}/{log} --steps {steps} --step-seconds {step_s} \\
    --restart-step-seconds {restart_step_s}
echo "batch rc=$?"
""")
    script.chmod(0o755)
    excl = "--exclusive --gres=gpu:h100:8" if exclusive else "--gres=gpu:h100:1"
    if srun_nodes:
        excl += f" -N{srun_nodes} --ntasks-per-node=1"
    out = lab.sh(f"sbatch --parsable -J ckpt-{qos} -p gpu --qos={qos} -A nlp -w {node} {excl} -t {limit} "
                 f"-o {d}/out-%j.txt {script}", user=USER).stdout.strip()
    return int(out.split(";")[0])


def log_lines(d: Path, name: str = "log") -> list[str]:
    p = d / name
    return p.read_text().splitlines() if p.exists() else []


def wait_log(d: Path, pred, timeout: float, what: str, name: str = "log") -> list[str]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        lines = log_lines(d, name)
        if pred(lines):
            return lines
        time.sleep(0.3)
    raise AssertionError(f"trainer log never showed {what} within {timeout}s: {log_lines(d, name)[-5:]}")


def field(line: str, key: str) -> str:
    m = re.search(rf"(?:^|\s){key}=(\S+)", line)
    assert m, f"{key}= missing in {line!r}"
    return m.group(1)


def job_record(lab, job: int) -> dict[str, str]:
    out = lab.sh(f"scontrol show job -o {job}").stdout
    return dict(tok.split("=", 1) for tok in out.split() if "=" in tok)


def start_requeued_now(lab, job: int, nodes: str, run: int = 0) -> None:
    """Skip the ~120 s requeue hold, but only once the node is done with the previous run.

    Measured: StartTime=now right after the requeue can restart the job on the same node before slurmd has
    forgotten the kill (`error: Job N already killed, do not launch batch job`), and the rerun then FAILS.
    The epilog's record marks the end of the previous run on that node; a few seconds more are margin.
    """
    for node in nodes.split(","):
        record = lab.dir / "spool" / "slurmtools" / "jobs" / f"{job}.{run}.{node}.json"
        end = time.monotonic() + 60
        while not record.exists() and time.monotonic() < end:
            time.sleep(0.5)
        assert record.exists(), f"epilog of job {job} run {run} on {node} never finished"
    time.sleep(5)
    lab.sh(f"scontrol update JobId={job} StartTime=now")


def grace_seconds(lab, qos: str) -> int:
    g = lab.sh(f"sacctmgr -n -P show qos {qos} format=gracetime").stdout.strip()
    h, m, s = (int(x) for x in g.split("-")[-1].split(":"))
    return h * 3600 + m * 60 + s


def check_resumed_run(d: Path, steps: int, cause: str, name: str = "log", signal: str = "URG"
                      ) -> tuple[list[str], int]:
    """Common end-state checks: one save with `cause`, a rerun with SLURM_RESTART_COUNT=1 from that step, the
    uninterrupted result, and at most one step done twice."""
    lines = log_lines(d, name)
    saved = [ln for ln in lines if " saved " in ln]
    assert len(saved) == 1, lines[-10:]
    assert field(saved[0], "cause") == cause and field(saved[0], "signal") == signal
    saved_step = int(field(saved[0], "step"))
    starts = [ln for ln in lines if " start " in ln]
    assert [field(s, "restart") for s in starts] == ["0", "1"], starts
    assert field(starts[1], "from") == str(saved_step)
    done = [ln for ln in lines if " done " in ln]
    assert len(done) == 1 and field(done[0], "restart") == "1"
    assert int(field(done[0], "result")) == checkpoint_trainer.expected(steps)
    ran = [int(ln.split(" step ")[1]) for ln in lines if " step " in ln]
    assert set(ran) == set(range(steps))
    assert len(ran) - steps <= 1  # at most one step lost (done twice)
    return lines, saved_step


def test_preempted_scavenger_saves_within_grace_requeues_and_resumes(lab):
    d = workdir(lab, "preempt")
    steps = 300
    job = submit_trainer(lab, d, qos="scavenger", node="gpu13", limit="10", lead=60, steps=steps, step_s=0.2,
                         restart_step_s=0.02, exclusive=True)
    wait_log(d, lambda ls: sum(" step " in ln for ln in ls) >= 20, 90, "20 steps")
    grace = grace_seconds(lab, "scavenger")
    t0 = time.time()
    prod = int(lab.sh("sbatch --parsable -J prod -p gpu --qos=production -A nlp -w gpu13 --exclusive "
                      f"--gres=gpu:h100:8 -t 5 -o {d}/prod-%j.txt --wrap 'sleep 3'", user=USER).stdout.strip())
    lines = wait_log(d, lambda ls: any(" saved " in ln for ln in ls), grace + 30, "a save after preemption")
    saved = next(ln for ln in lines if " saved " in ln)
    assert field(saved, "cause") == "preempted", saved
    assert float(field(saved, "t")) - t0 <= grace, "checkpoint not written within GraceTime"
    assert any("got_SIGURG:_preempted_(PreemptTime=" in ln for ln in lines)
    lab.wait_state(job, "PENDING", 60)
    rec = job_record(lab, job)
    assert rec["Restarts"] == "1", rec
    start_requeued_now(lab, job, "gpu13")
    lab.wait_state(prod, "COMPLETED", 120)
    lab.wait_state(job, "COMPLETED", 120)
    check_resumed_run(d, steps, "preempted")
    out = (d / f"out-{job}.txt").read_text()
    assert "batch restart=1" in out and "batch rc=0" in out
    # the epilog saw the requeue and wrote it to the decision log and one record per run
    events = decisions(lab, job)
    kinds = [e["event"] for e in events]
    assert kinds.count("requeued") == 1 and kinds.count("preempted") == 1, events
    pre = next(e for e in events if e["event"] == "preempted")
    assert pre["details"]["reported_by"] == "job" and "PreemptTime=" in pre["details"]["evidence"]
    assert not Path(f"/tmp/slurmtools-job-{job}").exists()  # the epilog cleaned the job's scratch
    spool = lab.dir / "spool" / "slurmtools" / "jobs"
    recs = [json.loads((spool / f"{job}.{run}.gpu13.json").read_text()) for run in (0, 1)]
    assert [r["qos"] for r in recs] == ["scavenger", "scavenger"] and recs[0]["user"] == USER


def test_two_node_job_preempted_on_one_node_only_rank_zero_writes(lab):
    """srun with one task per node: the signal reaches both ranks; rank 0 alone writes and requeues (where the
    release does not requeue a preempted job itself)."""
    d = workdir(lab, "twonode")
    steps = 300
    job = submit_trainer(lab, d, qos="scavenger", node="gpu[11-12]", limit="10", lead=60, steps=steps, step_s=0.2,
                         restart_step_s=0.02, exclusive=True, srun_nodes=2)
    for r in ("0", "1"):
        wait_log(d, lambda ls: sum(" step " in ln for ln in ls) >= 15, 90, "15 steps", name=f"log-{r}")
    prod = int(lab.sh("sbatch --parsable -J prod -p gpu --qos=production -A nlp -w gpu12 --exclusive "
                      f"--gres=gpu:h100:8 -t 5 -o /dev/null --wrap 'sleep 2'", user=USER).stdout.strip())
    l0 = wait_log(d, lambda ls: any(" saved " in ln for ln in ls), 90, "rank 0 save", name="log-0")
    saved0 = next(ln for ln in l0 if " saved " in ln)
    assert field(saved0, "cause") == "preempted" and field(saved0, "path").startswith("ckpt-")
    lab.wait_state(job, "PENDING", 60)
    l0, l1 = log_lines(d, "log-0"), log_lines(d, "log-1")
    # the wiring passed the warning (URG, which srun does not forward) to rank 1 through scancel; rank 1 leaves
    # asking Slurm (and requeueing) to rank 0
    assert any(" saved " in ln and "cause=unknown signal=URG rank=1" in ln for ln in l1), l1[-3:]
    saved1 = [ln for ln in l1 if " saved " in ln]
    assert all(field(ln, "path") == "none" and field(ln, "rank") == "1" for ln in saved1), saved1
    if lab.release.preempted_exit_requeued:
        # 25.11 requeues the preempted job itself once it ends: rank 0 says so and asks for no requeue of its own
        # (measured: one by the job as well would make Slurm requeue the next run too)
        assert sum("msg Slurm_requeues_this_preempted_job_itself" in ln for ln in l0) == 1, l0[-5:]
        assert not [ln for ln in l0 + l1 if "msg requeued_job_" in ln]
    else:
        assert sum("msg requeued_job_" in ln for ln in l0 + l1) == 1  # one requeue, by rank 0
    assert job_record(lab, job)["Restarts"] == "1"
    start_requeued_now(lab, job, "gpu11,gpu12")
    lab.wait_state(prod, "COMPLETED", 120)
    lab.wait_state(job, "COMPLETED", 120)
    check_resumed_run(d, steps, "preempted", name="log-0")
    done1 = [ln for ln in log_lines(d, "log-1") if " done " in ln]
    assert len(done1) == 1 and int(field(done1[0], "result")) == checkpoint_trainer.expected(steps)


@pytest.mark.parametrize("how", ["scontrol", "marker"])
def test_time_limit_warning_checkpoints_requeues_and_finishes_on_second_run(lab, how):
    """`scontrol`: the library requeues. `marker`: the step has no scontrol (as in a container), the library
    leaves a requeue request and the batch wiring, outside, carries it out. The `scontrol` job is a hand-written
    script that chose USR1 (and says so in SLURMTOOLS_CHECKPOINT_SIGNAL); the `marker` job uses the default URG."""
    sig = "USR1" if how == "scontrol" else "URG"
    node = "gpu14" if how == "scontrol" else "gpu10"
    d = workdir(lab, f"timelimit-{how}")
    steps = 600  # 120 s at 0.2 s/step: always longer than the warning (sent 30-90 s into a 2-minute limit)
    job = submit_trainer(lab, d, qos="standard", node=node, limit="2", lead=60, steps=steps, step_s=0.2,
                         restart_step_s=0.02, exclusive=False, step_without_scontrol=how == "marker", signal=sig)
    lines = wait_log(d, lambda ls: any(" saved " in ln for ln in ls), 150, "a save at the time-limit warning")
    saved = next(ln for ln in lines if " saved " in ln)
    lab.wait_state(job, "PENDING", 60)
    lines = log_lines(d)
    if how == "scontrol":
        assert field(saved, "cause") == "time_limit", saved
        assert any("msg requeued_job_" in ln for ln in lines), lines[-5:]
    else:
        # without scontrol the library cannot ask Slurm either: the cause is unknown, the requeue still happens
        assert field(saved, "cause") == "unknown", saved
        assert any("leaving_a_requeue_marker" in ln for ln in lines), lines[-5:]
        assert "requeueing job" in (d / f"out-{job}.txt").read_text()
    assert job_record(lab, job)["Restarts"] == "1"
    start_requeued_now(lab, job, node)
    lab.wait_state(job, "COMPLETED", 120)
    check_resumed_run(d, steps, "time_limit" if how == "scontrol" else "unknown", signal=sig)
    assert "batch restart=1" in (d / f"out-{job}.txt").read_text()
    kinds = [e["event"] for e in decisions(lab, job)]
    assert kinds.count("requeued") == 1, kinds
    assert kinds.count("time_limit") == (1 if how == "scontrol" else 0), kinds


def decisions(lab, job: int, timeout: float = 30) -> list[dict]:
    from slurmtools import audit

    end = time.monotonic() + timeout
    found: list[dict] = []
    while time.monotonic() < end:
        found = [e for e in audit.read(lab.dir / "spool" / "slurmtools" / audit.LOG_NAME, strict=True)
                 if e["job"] == job]
        if found:
            return found
        time.sleep(0.5)
    return found
