"""The Slurm lab fixture: a real Slurm 22.05 cluster on loopback, brought up once per test session.

Never a fake: every test here talks to real slurmctld/slurmd/slurmdbd daemons started by scripts/slurm-lab.
Set SLURMTOOLS_LAB_REUSE=1 to reuse a lab that is already up and healthy (quicker local iterations).
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAB_SCRIPT = REPO / "scripts" / "slurm-lab"


@dataclass
class Lab:
    dir: Path
    env: dict = field(repr=False)

    @property
    def conf(self) -> Path:
        return self.dir / "etc" / "slurm.conf"

    @property
    def jobs_dir(self) -> Path:
        return self.dir / "jobs"

    def sh(self, cmd: str, user: str | None = None, check: bool = True, timeout: float = 120,
           input: str | None = None) -> subprocess.CompletedProcess:
        """Run a bash command as root, or as `user` (runuser), with the lab's SLURM_CONF."""
        argv = ["bash", "-c", cmd]
        if user:
            argv = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={self.conf}", f"PATH={self.env['PATH']}"] + argv
        p = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout, input=input,
                           cwd=str(self.jobs_dir))
        if check and p.returncode != 0:
            raise AssertionError(f"command failed (rc {p.returncode}): {cmd}\nstdout: {p.stdout}\nstderr: {p.stderr}\n"
                                 f"lab folder: {self.dir}")
        return p

    def backend(self):
        from slurmtools.slurm.commands import CommandBackend

        return CommandBackend(env=self.env)

    def job_state(self, job_id: int) -> str:
        out = self.sh(f"squeue -h -j {job_id} -t all -o %T", check=False).stdout.strip()
        if out:
            return out.splitlines()[0]
        out = self.sh(f"sacct -n -X -P -j {job_id} -o State", check=False).stdout.strip()
        return out.splitlines()[-1].split()[0] if out else "UNKNOWN"

    def wait_state(self, job_id: int, states, timeout: float = 120) -> str:
        """Wait until the job is in one of `states` (squeue, then sacct once it has left the controller)."""
        states = {states} if isinstance(states, str) else set(states)
        end = time.monotonic() + timeout
        last = ""
        while time.monotonic() < end:
            last = self.job_state(job_id)
            if last in states:
                return last
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} did not reach {sorted(states)} within {timeout}s (last state {last}); "
                             f"lab folder: {self.dir}")

    def wait_accounting(self, job_id: int, timeout: float = 60) -> list:
        """Records of a finished job once slurmdbd has them complete.

        slurmctld reports to slurmdbd asynchronously: right after a job ends, sacct can show a placeholder record
        (name "allocation", QOS "Unknown") until the submission message is stored.
        """
        from datetime import datetime, timedelta, timezone

        b = self.backend()
        end = time.monotonic() + timeout
        recs: list = []
        while time.monotonic() < end:
            now = datetime.now(timezone.utc)
            recs = b.accounting(now - timedelta(days=1), now + timedelta(minutes=5), job_ids=[job_id],
                                duplicates=True)
            alloc = [r for r in recs if r.step is None]
            if alloc and all(r.qos not in ("", "Unknown") and r.end is not None for r in alloc):
                return recs
            time.sleep(0.5)
        raise AssertionError(f"sacct has no complete record of job {job_id} after {timeout}s: {recs}")

    def wait_nodes_idle(self, timeout: float = 90) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            states = self.sh("sinfo -h -N -o %T", check=False).stdout.split()
            if states and all(s == "idle" for s in states):
                return
            time.sleep(0.5)
        raise AssertionError(f"nodes not idle after {timeout}s: {self.sh('sinfo -N', check=False).stdout}")


def _lab_dir() -> Path:
    return Path(os.environ.get("SLURMTOOLS_LAB_DIR", REPO / ".lab"))


@pytest.fixture(scope="session")
def lab() -> Lab:
    if os.geteuid() != 0:
        pytest.fail("the Slurm lab cannot start: it needs root (slurmd, munged and the prolog/epilog hooks run as "
                    "root). Run the test command as root, e.g. `sudo scripts/test`.", pytrace=False)
    d = _lab_dir()
    env = dict(os.environ)
    env["SLURM_CONF"] = str(d / "etc" / "slurm.conf")
    env["PATH"] = env.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
    healthy = False
    if os.environ.get("SLURMTOOLS_LAB_REUSE") == "1":
        healthy = subprocess.run([str(LAB_SCRIPT), "status"], capture_output=True, env=env).returncode == 0
    if not healthy:
        p = subprocess.run([str(LAB_SCRIPT), "up"], capture_output=True, text=True, env=env, timeout=600)
        if p.returncode != 0:
            pytest.fail(f"scripts/slurm-lab up failed (lab folder {d}):\n{p.stdout}\n{p.stderr}", pytrace=False)
    lab = Lab(dir=d, env=env)
    lab.wait_nodes_idle()
    return lab


def pytest_collection_modifyitems(items):
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.lab)


def pytest_terminal_summary(terminalreporter):
    if terminalreporter.stats.get("failed") or terminalreporter.stats.get("error"):
        terminalreporter.write_line(f"Slurm lab folder (configs, state, logs): {_lab_dir()}  "
                                    f"(see `scripts/slurm-lab logs`)")
