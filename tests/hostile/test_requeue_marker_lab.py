"""Issue 12, class 1 in the real Slurm lab: another user plants the checkpoint wiring's old requeue marker and
promise paths (`/tmp/slurmtools-requeue-<job>`, `/tmp/slurmtools-handles-signal-<job>`) while the victim's
checkpointed job runs; the job must still end COMPLETED once, never requeued.

Before the fix the victim's wiring found the planted marker at the end of the run, could not remove it (sticky
/tmp) and ran `scontrol requeue`: the finished job was queued again, and again after every later run. The second
user is a plain local account (created here when missing, as scripts/slurm-lab creates labuser); it needs no Slurm
association, only a shell on the node, as any other user of a shared node has.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "examples" / "checkpoint_trainer.py"
WIRING = REPO / "slurmtools" / "checkpoint_wiring.sh"
VICTIM = "labuser"
INTRUDER = "labintruder"


def intruder() -> str:
    if subprocess.run(["id", "-u", INTRUDER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-M", "-s", "/bin/bash", INTRUDER], check=True, capture_output=True)
    return INTRUDER


def test_markers_planted_by_another_user_do_not_requeue_a_finished_checkpointed_job(lab):
    who = intruder()
    d = lab.jobs_dir / f"h1-marker-{int(time.time() * 1000)}"
    d.mkdir()
    d.chmod(0o777)
    steps = 40
    script = d / "train.sbatch"
    script.write_text(f"""#!/bin/bash
#SBATCH --requeue
#SBATCH --signal=B:URG@60
source {WIRING}
echo "batch restart=${{SLURM_RESTART_COUNT:-0}}"
slurmtools_run /usr/bin/python3 {TRAINER} {d}/ck {d}/log --steps {steps} --step-seconds 0.25
echo "batch rc=$?"
""")
    script.chmod(0o755)
    job = int(lab.sh(f"sbatch --parsable -J h1-victim -p gpu --qos=standard -A nlp -w gpu04 --gres=gpu:h100:1 "
                     f"-t 5 -o {d}/out-%j.txt {script}", user=VICTIM).stdout.strip())
    planted = [Path(f"/tmp/slurmtools-requeue-{job}"), Path(f"/tmp/slurmtools-handles-signal-{job}")]
    try:
        log = d / "log"
        end = time.monotonic() + 90
        while not (log.exists() and " step " in log.read_text()) and time.monotonic() < end:
            time.sleep(0.2)
        assert log.exists() and " step " in log.read_text(), f"job {job} never started: {lab.job_state(job)}"
        # the job id is public (squeue): the other user plants both paths while the job runs
        lab.sh(f"touch {planted[0]} {planted[1]}", user=who)
        assert all(p.exists() and p.owner() == who for p in planted)
        state = lab.wait_state(job, {"COMPLETED", "PENDING", "REQUEUED", "FAILED", "CANCELLED", "TIMEOUT"}, 120)
        time.sleep(5)  # a requeue would show by now: the state changes before the next run's 120 s hold ends
        state = lab.job_state(job)
        out = (d / f"out-{job}.txt").read_text()
        assert state == "COMPLETED", f"job {job} is {state}, not COMPLETED once:\n{out}"
        assert "requeueing job" not in out and "batch rc=0" in out, out
        rec = lab.sh(f"scontrol show job -o {job}", check=False).stdout
        if rec.strip():
            assert " Restarts=0 " in rec, rec
        runs = lab.sh(f"sacct -n -X -D -P -j {job} -o State").stdout.split()
        assert runs == ["COMPLETED"], runs
        lines = log.read_text().splitlines()
        assert sum(" start " in ln for ln in lines) == 1 and sum(" done " in ln for ln in lines) == 1, lines[-5:]
        assert all(p.exists() and p.owner() == who for p in planted)  # not ours: neither read nor removed
    finally:
        lab.sh(f"scancel {job}", check=False)
        for p in planted:
            p.unlink(missing_ok=True)
