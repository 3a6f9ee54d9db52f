"""Shared test helpers: where the repository and the shared real-world data are, and the Slurm lab fixture.

The `lab` fixture is a real Slurm cluster on loopback (scripts/slurm-lab), brought up once per test session and
shared by tests/integration and the lab tests of tests/hostile. Never a fake.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: real third-party captures beside the checkout (../shared/data); tests use it only when present
SHARED_DATA = REPO.parent / "shared" / "data"
TEST_DATA = REPO / "tests" / "data"

sys.path.insert(0, str(REPO / "tests" / "integration"))
from labtools import LAB_SCRIPT, Lab, _lab_dir, _lab_env, lab_slurm  # noqa: E402

# The tests stand for a cluster: root writes scripts, folders and labs that job users and daemons then read, as a
# site's usual 022 umask lets them. A runner with a hardened 077 umask must not fail them for that; what slurmtools
# itself must write readable whatever the umask is tested under 077 where it matters (test_slack, test_hooks,
# test_topo_render).
os.umask(0o022)


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


@pytest.fixture(scope="session")
def require_root() -> None:
    """For tests that act as root and as another user (chown, setpriv), as slurmd's hooks do. Not root is a set-up
    failure, not a skip: `sudo scripts/test` runs them."""
    if os.geteuid() != 0:
        pytest.fail("this test acts as root and as another user, as slurmd's hooks do: run the tests as root, e.g. "
                    "`sudo scripts/test`", pytrace=False)


@pytest.fixture(scope="session")
def require_lua() -> None:
    """For tests that run the generated job_submit.lua. A missing interpreter is a set-up failure, not a skip:
    scripts/test installs lua5.3 (`apt-get install -y lua5.3`)."""
    import shutil

    if not (shutil.which("lua5.1") or shutil.which("lua5.3")):
        pytest.fail("no lua5.1 or lua5.3 to run the generated job_submit.lua: apt-get install -y lua5.3 "
                    "(scripts/test installs it)", pytrace=False)


@pytest.fixture
def in_zone(monkeypatch):
    """Run in a time zone (TZ and tzset), restored afterwards: the reports', advise's and the sandbox trace's
    daylight-saving tests."""
    import time

    def use(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()
    yield use
    monkeypatch.undo()
    time.tzset()
