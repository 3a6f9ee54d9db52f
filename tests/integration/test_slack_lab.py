"""The cluster's slack in the real Slurm lab: the signal and mode from the live queue, a trainer inside a job that
follows it through the cached file (no Slurm asked from the job), and `submit --fill-slack` arrays that yield to
production within grace and resume.

The site is a copy of the example (the lab is built from it) with a short `[slack]` poll interval; the test plays
the cron job that refreshes the cached file (`slurmtools slack --refresh --out PATH`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from labtools import job_script

from slurmtools.resources import example_site

REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "examples" / "slack_trainer.py"
WIRING = REPO / "slurmtools" / "checkpoint_wiring.sh"
sys.path.insert(0, str(REPO / "examples"))
import slack_trainer  # noqa: E402
from test_checkpoint_lab import grace_seconds  # noqa: E402
from test_planner_lab import clean  # noqa: E402,F401  (the fixture: no jobs before and after each test)

pytestmark = pytest.mark.lab
USER = "labuser"
SLACK = """
[slack]
poll_interval = "2s"
polls = 2
margin = 0.05
heavy_at = 0.5
light_at = 0.15
max_age = "2m"
"""


def folder(lab, name: str) -> Path:
    d = lab.jobs_dir / f"slack-{name}-{int(time.time() * 1000)}"
    d.mkdir()
    d.chmod(0o777)
    return d


def site_copy(d: Path) -> Path:
    """The example site (the lab's) with a short poll interval; its fabric path made absolute."""
    text = example_site().read_text()
    fabric = (example_site().parent / "../../topology/example/fabric.toml").resolve()
    p = d / "site.toml"
    p.write_text(text.replace('fabric = "../../topology/example/fabric.toml"', f'fabric = "{fabric}"') + SLACK)
    p.chmod(0o644)
    return p


def cli(lab, *args: str, user: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    import shlex

    return lab.sh(f"{sys.executable} -m slurmtools " + " ".join(shlex.quote(a) for a in args), user=user,
                  check=check)


class Refresher:
    """The cron job: `slurmtools slack --refresh` every poll interval, in the background."""

    def __init__(self, lab, site: Path, out: Path):
        self.lab, self.site, self.out = lab, site, out
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            p = cli(self.lab, "slack", "--site", str(self.site), "--refresh", "--out", str(self.out), "--force",
                    check=False)
            if p.returncode != 0:
                self.errors.append(p.stderr.strip())
            self.stop.wait(2)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join(60)


def fill_nodes(lab, nodes: str, seconds: int, d: Path) -> list[int]:
    """Production jobs holding every GPU of `nodes`, at most 8 nodes per job (the tier's max_nodes), the first as
    labuser and the next as root: the tier's max_gpus_per_user (64) would keep a second one of labuser's pending
    (QOSMaxGRESPerUser)."""
    from slurmtools.hostlist import compress, expand

    hosts, jobs = expand(nodes), []
    for i in range(0, len(hosts), 8):
        part = compress(hosts[i:i + 8])
        n = len(hosts[i:i + 8])
        out = lab.sh(f"sbatch --parsable -J prod -p gpu --qos=production -A vision -w {part} -N{n} --exclusive "
                     f"--gres=gpu:h100:8 -t 5 -o {d}/prod-%j.txt --wrap 'sleep {seconds}'",
                     user=USER if i == 0 else None).stdout
        jobs.append(int(out.strip().split(";")[0]))
    return jobs


def wait_for(pred, timeout: float, what: str, poll: float = 0.5):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = pred()
        if last:
            return last
        time.sleep(poll)
    raise AssertionError(f"{what} not seen within {timeout}s (last: {last})")


def read_json(p: Path):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def test_mode_is_heavy_when_idle_and_light_when_production_fills_the_nodes(lab, clean):
    d = folder(lab, "mode")
    site = site_copy(d)
    # the live signal, asked by a user from the login side: the lab is idle
    idle = json.loads(cli(lab, "slack", "--site", str(site), "--source", "slurm", "--tier", "scavenger", "--json",
                          user=USER).stdout)
    assert idle["mode"] == "heavy" and idle["signal"]["idle_gpus"] == 128 and idle["signal"]["total_gpus"] == 128
    assert idle["signal"]["demand_ahead"] == 0 and idle["signal"]["preempt_chance"] == 0.0
    cache = d / "slack.json"
    with Refresher(lab, site, cache) as ref:
        wait_for(lambda: read_json(cache), 60, "the first cached signal")
        # the trainer reads only the cached file, as a job in a container without Slurm's commands would
        script = job_script(lab, d.name, f"""#!/bin/bash
#SBATCH --signal=B:URG@60
#SBATCH --requeue
export SLURMTOOLS_SLACK_CACHE={cache}
export SLURMTOOLS_SLACK_SOURCE=cache
source {WIRING}
slurmtools_run /usr/bin/python3 {TRAINER} {d}/ck {d}/log --steps 400 --step-seconds 0.05 --every 10
""")
        job = int(lab.sh(f"sbatch --parsable -J slacktrain -p gpu --qos=scavenger -A vision -w gpu16 "
                         f"--gres=gpu:h100:1 -t 10 -o {d}/out-%j.txt {script}", user=USER).stdout.strip())
        windows = d / "ck" / "slack-windows.json"
        wait_for(lambda: (read_json(windows) or {}).get("windows"), 90, "the trainer's first window")
        log = d / "log"
        wait_for(lambda: log.exists() and log.read_text().count(" step ") >= 20, 90, "20 steps")
        first = read_json(windows)["windows"][0]
        assert first["mode"] == "heavy" and first["start_step"] == 0 and first["why"].startswith("first signal")
        t_prod = time.time()
        prod = fill_nodes(lab, "gpu[01-15]", 60, d)
        for j in prod:
            lab.wait_state(j, "RUNNING", 90)
        # 7 GPUs idle of 128 (gpu16's others): the cached signal goes light, the trainer follows at a boundary
        light = wait_for(lambda: [w for w in (read_json(windows) or {}).get("windows", []) if w["mode"] == "light"],
                         120, "a light window in the trainer's windows file")
        assert not ref.errors, ref.errors
        # the CLI agrees, from the live queue
        now = json.loads(cli(lab, "slack", "--site", str(site), "--source", "slurm", "--tier", "scavenger",
                             "--json", user=USER).stdout)
        assert now["mode"] == "light" and now["signal"]["idle_gpus"] == 7, now
    for j in prod:
        lab.sh(f"scancel {j}", check=False)
    assert lab.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=180) == "COMPLETED"
    lines = log.read_text().splitlines()
    done = [ln for ln in lines if " done " in ln]
    assert len(done) == 1 and f"result={slack_trainer.expected(400)}" in done[0]
    doc = read_json(windows)
    ws = doc["windows"]
    assert doc["job_id"] == str(job) and ws[0]["mode"] == "heavy" and light[0]["start_step"] > 0
    # windows tile the run: contiguous, boundaries on multiples of `every`, the last ended by close()
    assert ws[0]["start_step"] == 0 and ws[-1]["end_step"] == 400 and ws[-1]["ended"] == "end"
    for a, b in zip(ws, ws[1:]):
        assert a["end_step"] == b["start_step"] and a["mode"] != b["mode"] and b["start_step"] % 10 == 0
    assert light[0]["start_time"] >= t_prod  # light only once production arrived
    # every step ran in its window's mode, as the trainer logged it
    for ln in lines:
        if " step " in ln:
            step = int(ln.split(" step ")[1].split()[0])
            w = next(w for w in ws if w["start_step"] <= step < w["end_step"])
            assert f"mode={w['mode']}" in ln, (ln, w)


def test_fill_slack_array_yields_to_production_within_grace_and_resumes(lab, clean):
    d = folder(lab, "fill")
    steps = 200
    cmd = ["submit", "--fill-slack", "--gpus-per-task", "8", "--max-tasks", "2", "--time", "10m", "--name", "fill",
           "--output-dir", str(d), "--env", f"SLURMTOOLS_SLACK_CACHE={d}/none.json", "--json", "--",
           "/usr/bin/python3", str(TRAINER), f"{d}/ck-{{task}}", f"{d}/log-{{task}}", "--steps", str(steps),
           "--step-seconds", "0.1", "--every", "10", "--source", "cache"]
    p = lab.sh(f"cd {d} && {sys.executable} -m slurmtools " + " ".join(f"'{a}'" for a in cmd), user=USER,
               check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    fill = out["fill_slack"]
    assert (fill["tier"], fill["idle_gpus"], fill["array_size"], fill["gpus_per_task"]) == ("scavenger", 128, 2, 8)
    assert "capped by --max-tasks 2" in fill["why"]
    arr = out["job_id"]
    script = lab.sh(f"scontrol show job {arr}_0 -o").stdout
    assert "QOS=scavenger" in script and "Requeue=1" in script
    nodes = {}
    for t in (0, 1):
        wait_for(lambda: Path(f"{d}/log-{t}").exists() and Path(f"{d}/log-{t}").read_text().count(" step ") >= 10,
                 120, f"task {t}'s first steps")
        nodes[t] = lab.sh(f"squeue -h -j {arr}_{t} -o %N").stdout.strip()
    grace = grace_seconds(lab, "scavenger")
    t0 = time.time()
    prod = fill_nodes(lab, ",".join(sorted(nodes.values())), 5, d)
    saved = {}
    for t in (0, 1):
        lines = wait_for(lambda: [ln for ln in Path(f"{d}/log-{t}").read_text().splitlines() if " saved " in ln],
                         grace + 30, f"task {t}'s save after preemption")
        assert "cause=preempted" in lines[0], lines
        saved[t] = lines[0]
        assert float(lines[0].split()[0].removeprefix("t=")) - t0 <= grace, "not saved within GraceTime"
    for j in prod:
        lab.wait_state(j, "COMPLETED", 180)
    lab.wait_nodes_idle(90)
    time.sleep(5)  # slurmd done with the killed run (see test_checkpoint_lab.start_requeued_now)
    for t in (0, 1):
        lab.wait_state(f"{arr}_{t}", "PENDING", 60)
        lab.sh(f"scontrol update JobId={arr}_{t} StartTime=now")
    for t in (0, 1):
        assert lab.wait_state(f"{arr}_{t}", ("COMPLETED", "FAILED", "CANCELLED"), timeout=180) == "COMPLETED"
        lines = Path(f"{d}/log-{t}").read_text().splitlines()
        starts = [ln for ln in lines if " start " in ln]
        assert [s.split("restart=")[1].split()[0] for s in starts] == ["0", "1"], starts
        step = saved[t].split("step=")[1].split()[0]
        assert f"from={step}" in starts[1]
        done = [ln for ln in lines if " done " in ln]
        assert len(done) == 1 and f"result={slack_trainer.expected(steps)}" in done[0]
        ws = read_json(Path(f"{d}/ck-{t}/slack-windows.json"))["windows"]
        # no cached signal in these jobs: the mode holds its start value, and the resume kept the window at the
        # checkpoint's step
        assert [w["run"] for w in ws] == [0, 1] and ws[0]["ended"] == "checkpoint"
        assert ws[0]["end_step"] == int(step) == ws[1]["start_step"] and ws[1]["end_step"] == steps
