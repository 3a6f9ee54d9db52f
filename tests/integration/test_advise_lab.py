"""Right-sizing against real jobs: labuser runs a planned 4-GPU job three times; the lab has no GPUs, so each run's
real epilog record is given a utilisation record showing one GPU of four at work (the NVML accounting the hook
writes on a GPU host: docs/advise.md). `slurmtools advise` then reads the real sacct (asked GPUs, time limit,
run times) and recommends --gpus 1 and a shorter --time, and `plan --right-size` follows it: the job it plans is
submitted and Slurm gives it one GPU and the shorter limit."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest

from tests.integration.labtools import job_folder

pytestmark = pytest.mark.lab

CLI = [sys.executable, "-m", "slurmtools"]


def slurmtools(lab, *args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, env=lab.env, cwd=cwd, timeout=300)


def submit_plan(lab, script: str, cwd) -> int:
    out = lab.sh(f"cd {cwd} && sbatch --parsable", user="labuser", input=script).stdout.strip()
    return int(out.split(";")[0])


def records_of(lab, job: int, timeout: float = 60) -> list:
    """The real epilog's records of `job` (one per run and node), once written."""
    spool = lab.dir / "spool" / "slurmtools" / "jobs"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = sorted(spool.glob(f"{job}.*.json"))
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"no epilog record of job {job} in {spool} after {timeout}s")


def test_under_used_gpus_give_the_recommendation_and_right_size_follows_it(lab, tmp_path):
    name = f"adv-{uuid.uuid4().hex[:6]}"  # a shape of its own: earlier runs in a reused lab do not count
    work = job_folder(lab, "advise")
    base = ["--user", "labuser", "--account", "vision", "--tier", "production", "--name", name, "--template",
            "python"]
    p = slurmtools(lab, "plan", "--json", "--gpus", "4", "--time", "30m", *base, "--", "sleep", "2", cwd=work)
    assert p.returncode == 0, p.stderr
    first = json.loads(p.stdout)
    assert first["nodes"] * first["gpus_per_node"] == 4 and first["time_limit_s"] == 1800
    jobs = [submit_plan(lab, first["script"], work) for _ in range(3)]
    for j in jobs:
        lab.wait_state(j, "COMPLETED", 180)
        lab.wait_accounting(j)

    # each run's real record, with what NVML accounting reports on a GPU host: GPU 0 at work, the other three idle
    ep = tmp_path / "epilog"
    ep.mkdir()
    for j in jobs:
        for f in records_of(lab, j):
            rec = json.loads(f.read_text())
            assert rec["job"] == j and len(rec["gpus"]) == 4, rec
            rec["gpu_accounting"] = [{"gpu": g, "processes": 1 if i == 0 else 0,
                                      "gpu_util_pct": 70 if i == 0 else 0, "mem_util_pct": 20 if i == 0 else 0,
                                      "max_memory_bytes": 12 * 2**30 if i == 0 else 0}
                                     for i, g in enumerate(rec["gpus"])]
            (ep / f.name).write_text(json.dumps(rec))

    a = slurmtools(lab, "advise", "--user", "labuser", "--since", "1h", "--epilog-dir", str(ep), "--json")
    assert a.returncode == 0, a.stderr
    doc = json.loads(a.stdout)
    shape = next(s for s in doc["shapes"] if s["name"] == name)
    assert (shape["user"], shape["gpus"], shape["runs"], shape["account"]) == ("labuser", 4, 3, "vision")
    # asked: what sacct holds for the planned job
    assert shape["asked"]["gpus"] == 4 and shape["asked"]["time_limit_s"] == 1800
    assert shape["asked"]["cpus"] == first["cpus_per_gpu"] * 4
    assert shape["used"]["gpus_busy_at_share"] == 1 and shape["used"]["gpu_use_from"] == "epilog"
    rules = {f["rule"]: f for f in shape["findings"]}
    assert rules["gpus"]["evidence"] == f"3 of your last 3 `{name}` runs used at most 1 of 4 GPUs"
    assert rules["gpus"]["fix"] == "plan with --gpus 1"
    # the runs took seconds (sacct's own times; tolerance: anything under the 5-minute floor of the new limit)
    longest = shape["used"]["longest_completed_run_s"]
    assert 1 <= longest <= 200, longest
    assert rules["time"]["fix"] == "use --time 5m"
    assert rules["time"]["changes"] == {"time_limit": {"from": 1800, "to": 300}}

    p = slurmtools(lab, "plan", "--json", "--gpus", "4", "--time", "30m", *base, "--right-size", "--epilog-dir",
                   str(ep), "--", "sleep", "2", cwd=work)
    assert p.returncode == 0, p.stderr
    sized = json.loads(p.stdout)
    assert sized["nodes"] * sized["gpus_per_node"] == 1 and sized["time_limit_s"] == 300
    assert [(c["field"], c["from"], c["to"]) for c in sized["right_size"]["changes"]] == [("gpus", 4, 1),
                                                                                          ("time_limit", 1800, 300)]
    assert f"--right-size: --gpus 4 -> 1 because 3 of your last 3 `{name}` runs used at most 1 of 4 GPUs" in \
        sized["notes"]
    # Slurm runs what the right-sized plan asks: one GPU, a 5-minute limit
    j = submit_plan(lab, sized["script"], work)
    lab.wait_state(j, "COMPLETED", 180)
    lab.wait_accounting(j)
    row = lab.sh(f"sacct -X -n -P -j {j} -o AllocTRES,TimelimitRaw,JobName").stdout.strip().splitlines()[0]
    tres, limit, jname = row.split("|")
    assert "gres/gpu=1" in tres.split(",") and limit == "5" and jname == name, row
