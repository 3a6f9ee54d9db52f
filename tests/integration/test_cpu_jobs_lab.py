"""CPU jobs against the real Slurm lab. The lab is the example site, which has no CPU partition: `slurmtools submit
--gpus 0` run by labuser must be refused in one line that says so, before sbatch (no job reaches Slurm: the job
ids Slurm hands out just before and just after are consecutive). A second lab from the CPU test site
(tests/data/sites/cpu) shows the rendered slurm.conf loaded by the real slurmctld and CPU jobs running there."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from labtools import LAB_SCRIPT, REPO, Lab, _lab_env, lab_slurm
from slurmtools.hostlist import expand

pytestmark = pytest.mark.lab


def _held_probe(lab) -> int:
    """A held job submitted by labuser: its id is the controller's next job id at that moment."""
    p = lab.sh("sbatch -H --parsable -o /dev/null -A vision -q production --wrap 'true'", user="labuser")
    return int(p.stdout.strip().split(";")[0])


def test_cpu_job_on_the_example_site_is_refused_before_sbatch(lab):
    before = _held_probe(lab)
    try:
        p = lab.sh(f"{sys.executable} -m slurmtools submit --gpus 0 --cpus 8 --time 5m -- sleep 60",
                   user="labuser", check=False)
        after = _held_probe(lab)
    finally:
        lab.sh("scancel -u labuser", check=False)
    assert p.returncode == 2 and p.stdout == "", p.stdout + p.stderr
    assert p.stderr.strip().splitlines() == [
        "slurmtools: error: request: --gpus: site example has no CPU partition (partitions: gpu: h100 GPUs only); "
        "ask your admins for one, or request GPUs"]
    assert after == before + 1  # nothing was submitted in between


# ------------------------------------------------------------------------------ a lab built from the CPU test site
CPU_SITE = REPO / "tests" / "data" / "sites" / "cpu" / "site.toml"


@pytest.fixture(scope="module")
def cpu_lab(lab):
    """A second lab from tests/data/sites/cpu (4 GPU hosts, 2 CPU-only hosts; partitions gpu, cpu and gpucpu with
    MaxCPUsPerNode=32) beside the session's lab: its own folder and ports; stopped at the end of the module."""
    d = Path(str(lab.dir) + "-cpusite")
    offset = str(int(os.environ.get("SLURMTOOLS_LAB_PORT_OFFSET") or 0) + 1200)
    env = dict(os.environ, SLURMTOOLS_SITE=str(CPU_SITE), SLURMTOOLS_LAB_DIR=str(d), SLURMTOOLS_LAB_PORT_OFFSET=offset)
    up = subprocess.run([str(LAB_SCRIPT), "up", "--slurm", lab_slurm()], capture_output=True, text=True, env=env,
                        timeout=900)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        lenv, version = _lab_env(d)
        lenv["SLURMTOOLS_LAB_PORT_OFFSET"] = offset
        cl = Lab(dir=d, env=lenv, slurm_version=version)
        cl.wait_nodes_idle()
        yield cl
    finally:
        subprocess.run([str(LAB_SCRIPT), "down"], capture_output=True, env=env, timeout=300)


def _submit(cl, d: Path, args: str) -> int:
    p = cl.sh(f"cd {d} && {sys.executable} -m slurmtools submit --site {CPU_SITE} --tier production --time 5m "
              f"--output-dir {d} {args}", user="labuser", check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "submitted job " in p.stdout and ": CPU job, " in p.stdout, p.stdout
    return int(p.stdout.split("submitted job ")[1].split(":")[0])


def _step_cpus(cl, job: int, timeout: float = 60) -> dict[str, tuple[str, str, str]]:
    """sacct's JobID -> (partition, AllocCPUS, NodeList) of the job and its steps, once the step has a record and
    the job's own is complete (slurmdbd stores the submission asynchronously: under load sacct first shows a
    placeholder allocation row with no partition)."""
    end = time.monotonic() + timeout
    rows: dict[str, tuple[str, str, str]] = {}
    while time.monotonic() < end:
        out = cl.sh(f"sacct -n -P -j {job} -o JobID,Partition,AllocCPUS,NodeList", check=False).stdout
        rows = {f[0]: tuple(f[1:]) for f in (ln.split("|") for ln in out.splitlines()) if len(f) == 4}
        if f"{job}.0" in rows and rows.get(str(job), ("",))[0]:
            return rows
        time.sleep(0.5)
    raise AssertionError(f"sacct has no step 0 of job {job}: {rows}")


def test_slurmctld_loads_the_cpu_site(cpu_lab):
    part = cpu_lab.sh("scontrol show partition gpucpu").stdout
    assert "MaxCPUsPerNode=32" in part and "Nodes=gpu[01-04]" in part
    assert cpu_lab.sh("sinfo -h -p cpu -o %N").stdout.strip() == "cpu[01-02]"
    assert "Gres=(null)" in cpu_lab.sh("scontrol show node cpu01").stdout
    assert "Gres=gpu:h100:8" in cpu_lab.sh("scontrol show node gpu01").stdout
    # Slurm enforces the cap itself: 40 CPUs on one host of the overlay can never be given
    bad = cpu_lab.sh("sbatch -t 5 -p gpucpu -q production -A vision -c 40 -o /dev/null --wrap true",
                     user="labuser", check=False)
    assert bad.returncode != 0 and "Requested node configuration is not available" in bad.stderr


def test_cpu_jobs_run_on_the_cpu_partitions(cpu_lab):
    d = cpu_lab.jobs_dir / f"cpu-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    os.chmod(d, 0o777)
    line = "bash -c 'echo \"task $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME\"'"
    try:
        # one task of 8 CPUs on a CPU-only host (python template): the step gets all 8 (SRUN_CPUS_PER_TASK)
        one = _submit(cpu_lab, d, f"--gpus 0 --cpus 8 --name one -- {line}")
        # 4 tasks x 16 CPUs on the overlay, 32 CPUs per host at most: 2 GPU hosts x 2 tasks (mpi template)
        four = _submit(cpu_lab, d, f"--cpus 16 --ntasks 4 --partition gpucpu --name four -- {line}")
        for job in (one, four):
            assert cpu_lab.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=90) == "COMPLETED"
        rows = _step_cpus(cpu_lab, one)
        assert rows[str(one)][0] == "cpu" and rows[f"{one}.0"][1] == "8"
        assert rows[f"{one}.0"][2] in ("cpu01", "cpu02")
        assert (d / f"one-{one}.out").read_text().splitlines()[-1].startswith("task 0 of 1 on cpu0")
        rows = _step_cpus(cpu_lab, four)
        assert rows[str(four)][0] == "gpucpu" and rows[f"{four}.0"][1] == "64"
        hosts = expand(rows[f"{four}.0"][2])
        assert len(hosts) == 2 and all(h.startswith("gpu") for h in hosts)
        tasks = [ln for ln in (d / f"four-{four}.out").read_text().splitlines() if ln.startswith("task ")]
        assert sorted(int(t.split()[1]) for t in tasks) == [0, 1, 2, 3] and all(" of 4 on gpu" in t for t in tasks)
    finally:
        cpu_lab.sh("scancel -u labuser", check=False)


def test_job_submit_keeps_gpus_to_the_gpu_partition(cpu_lab):
    """The generated job_submit.lua in the real slurmctld (policy partition_gpus): GPUs asked through the CPU overlay
    partition, whose hosts have GPUs (so Slurm alone would hand them out, outside the GPU partition's rules), and
    a GPU-less job on the GPU partition (the site sets require_gpus_on_gpu_partitions) are refused with the policy's
    own line; the same CPU job on the overlay is admitted."""
    base = "sbatch -H --parsable -t 5 -q production -A vision -o /dev/null"
    script = "--wrap 'true'"
    try:
        gpus = cpu_lab.sh(f"{base} -p gpucpu --gres=gpu:h100:1 {script}", user="labuser", check=False)
        assert gpus.returncode != 0 and gpus.stderr.splitlines()[0] == (
            "sbatch: error: partition gpucpu is a CPU partition: it gives no GPUs, and this job asks for 1; GPU jobs "
            "go to gpu"), gpus.stderr
        bare = cpu_lab.sh(f"{base} -p gpu -c 2 {script}", user="labuser", check=False)
        assert bare.returncode != 0 and bare.stderr.splitlines()[0] == (
            "sbatch: error: partition gpu is for GPU jobs: ask for GPUs (e.g. --gres=gpu:h100:1); CPU jobs go to cpu "
            "or gpucpu"), bare.stderr
        ok = cpu_lab.sh(f"{base} -p gpucpu -c 2 {script}", user="labuser", check=False)
        assert ok.returncode == 0 and ok.stdout.strip().split(";")[0].isdigit(), ok.stdout + ok.stderr
    finally:
        cpu_lab.sh("scancel -u labuser", check=False)
