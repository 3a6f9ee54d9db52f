"""CPU jobs against the real Slurm lab. The lab is the example site, which has no CPU partition: `slurmtools submit
--gpus 0` run by labuser must be refused in one line that says so, before sbatch (no job reaches Slurm: the job
ids Slurm hands out just before and just after are consecutive)."""

from __future__ import annotations

import sys

import pytest

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
