"""Choosing the backend: a name that is not a backend is refused in one line, on the command line and in the API;
`--backend` reaches the one place that chooses (the real choice against a live Slurm is the labs' test)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from slurmtools.errors import SlurmUnavailable
from slurmtools.slurm.backends import get_backend


def test_unknown_backend_name_is_refused_in_one_line():
    with pytest.raises(SlurmUnavailable) as e:
        get_backend("nope", env={})
    assert str(e.value) == "--backend: expected auto, commands, pyslurm; got 'nope'"


def test_cli_backend_option(tmp_path):
    env = dict(os.environ, SLURM_CONF=str(tmp_path / "missing.conf"))
    env.pop("SLURMTOOLS_BACKEND", None)
    p = subprocess.run([sys.executable, "-m", "slurmtools", "--backend", "nope", "cluster", "show"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 2 and p.stderr == "slurmtools: error: --backend: expected auto, commands, pyslurm; " \
                                             "got 'nope'\n"
    # forced commands: the command backend is the one that answers (here: that the configuration is missing)
    p = subprocess.run([sys.executable, "-m", "slurmtools", "--backend", "commands", "cluster", "show"],
                       capture_output=True, text=True, env=env)
    assert p.returncode != 0 and "missing.conf" in p.stderr and "pyslurm" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
