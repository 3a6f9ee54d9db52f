"""The Slurm lab fixture: a real Slurm cluster on loopback, brought up once per test session.

Never a fake: every test here talks to real slurmctld/slurmd/slurmdbd daemons started by scripts/slurm-lab.
SLURMTOOLS_LAB_SLURM picks the release (22.05, Debian's, by default; 25.11 built from source); scripts/test runs the
lab suite once per release. Set SLURMTOOLS_LAB_REUSE=1 to reuse a lab that is already up and healthy.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from labtools import LAB_SCRIPT, Lab, _lab_dir, _lab_env, lab_slurm


@pytest.fixture(scope="session")
def lab() -> Lab:
    if os.geteuid() != 0:
        pytest.fail("the Slurm lab cannot start: it needs root (slurmd, munged and the prolog/epilog hooks run as "
                    "root). Run the test command as root, e.g. `sudo scripts/test`.", pytrace=False)
    d = _lab_dir()
    env, version = _lab_env(d)
    healthy = False
    if os.environ.get("SLURMTOOLS_LAB_REUSE") == "1":
        healthy = (subprocess.run([str(LAB_SCRIPT), "status"], capture_output=True, env=env).returncode == 0
                   and version.startswith(lab_slurm()))
    if not healthy:
        p = subprocess.run([str(LAB_SCRIPT), "up", "--slurm", lab_slurm()], capture_output=True, text=True, env=env,
                           timeout=900)
        if p.returncode != 0:
            pytest.fail(f"scripts/slurm-lab up --slurm {lab_slurm()} failed (lab folder {d}):\n{p.stdout}\n{p.stderr}",
                        pytrace=False)
        env, version = _lab_env(d)
    lab = Lab(dir=d, env=env, slurm_version=version)
    lab.wait_nodes_idle()
    return lab


def pytest_collection_modifyitems(config, items):
    """Every test here needs the lab. A test marked `slurm_release("25.11", ...)` is about those releases only
    (pyslurm exists only for 25.11): for another lab it is deselected, not skipped, and shows as deselected."""
    keep, drop = [], []
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.lab)
        m = item.get_closest_marker("slurm_release")
        (drop if m is not None and lab_slurm() not in m.args else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config):
    return f"slurm lab: Slurm {lab_slurm()} (SLURMTOOLS_LAB_SLURM), folder {_lab_dir()}"


def pytest_terminal_summary(terminalreporter):
    if terminalreporter.stats.get("failed") or terminalreporter.stats.get("error"):
        terminalreporter.write_line(f"Slurm {lab_slurm()} lab folder (configs, state, logs): {_lab_dir()}  "
                                    f"(see `SLURMTOOLS_LAB_DIR={_lab_dir()} scripts/slurm-lab logs`)")
