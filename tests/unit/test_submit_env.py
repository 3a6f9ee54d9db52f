"""`slurmtools submit` runs sbatch without the user's SBATCH_* variables (sbatch would take them over the plan's
#SBATCH lines); the lab test in tests/integration/test_planner_lab.py shows the job Slurm then holds."""

from __future__ import annotations

from slurmtools.cli.jobs import sbatch_env


def test_every_sbatch_variable_is_left_out_and_named_in_order():
    env, dropped = sbatch_env({"PATH": "/bin", "SBATCH_TIMELIMIT": "1", "SBATCH_PARTITION": "x", "SLURM_CONF": "/c",
                               "MY_SBATCH_NOTE": "kept", "SQUEUE_FORMAT": "%i"})
    assert dropped == ["SBATCH_PARTITION", "SBATCH_TIMELIMIT"]
    assert env == {"PATH": "/bin", "SLURM_CONF": "/c", "MY_SBATCH_NOTE": "kept", "SQUEUE_FORMAT": "%i"}


def test_nothing_to_leave_out_says_nothing():
    env, dropped = sbatch_env({"PATH": "/bin"})
    assert env == {"PATH": "/bin"} and dropped == []
