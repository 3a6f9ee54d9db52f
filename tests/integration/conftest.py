"""Lab test collection: every test under tests/integration needs the Slurm lab (the `lab` fixture is in
tests/conftest.py, shared with tests/hostile).

Never a fake: every test here talks to real slurmctld/slurmd/slurmdbd daemons started by scripts/slurm-lab.
SLURMTOOLS_LAB_SLURM picks the release (22.05, Debian's, by default; 25.11 built from source); scripts/test runs the
lab suite once per release. Set SLURMTOOLS_LAB_REUSE=1 to reuse a lab that is already up and healthy.
"""

from __future__ import annotations

import pytest
from labtools import _lab_dir, lab_slurm


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
