"""The Slurm lab as tests see it: which release, where its folder is, its client environment, and `Lab` helpers.

Never a fake: every test here talks to real slurmctld/slurmd/slurmdbd daemons started by scripts/slurm-lab.
SLURMTOOLS_LAB_SLURM picks the release (22.05, Debian's, by default; 25.11 built from source); scripts/test runs the
lab suite once per release. Set SLURMTOOLS_LAB_REUSE=1 to reuse a lab that is already up and healthy.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAB_SCRIPT = REPO / "scripts" / "slurm-lab"
#: small programs the planner and launcher lab tests run inside jobs
JOB_HELPERS = Path(__file__).resolve().parent / "planner_lab"


@dataclass
class Lab:
    dir: Path
    env: dict = field(repr=False)
    #: the running Slurm's version, e.g. "25.11.7"
    slurm_version: str = ""

    @property
    def release(self):
        from slurmtools.slurm.releases import release_for

        return release_for(self.slurm_version)

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


def lab_slurm() -> str:
    """The Slurm release this test session's lab runs (SLURMTOOLS_LAB_SLURM, default 22.05)."""
    return os.environ.get("SLURMTOOLS_LAB_SLURM", "22.05")


def _lab_dir() -> Path:
    default = REPO / (".lab" if lab_slurm() == "22.05" else f".lab-{lab_slurm()}")
    return Path(os.environ.get("SLURMTOOLS_LAB_DIR", default))


def _lab_env(d: Path) -> tuple[dict, str]:
    """Client environment of the lab in `d`: its SLURM_CONF, and its Slurm's binaries first on PATH."""
    env = dict(os.environ)
    env["SLURMTOOLS_LAB_DIR"] = str(d)
    env["SLURM_CONF"] = str(d / "etc" / "slurm.conf")
    path = env.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
    rec = {}
    f = d / "slurm.env"
    if f.exists():
        rec = dict(line.split("=", 1) for line in f.read_text().splitlines() if "=" in line)
    if rec.get("SLURM_PREFIX"):
        path = f"{rec['SLURM_PREFIX']}/bin:{rec['SLURM_PREFIX']}/sbin:" + path
    env["PATH"] = path
    return env, rec.get("SLURM_VERSION", "")


def job_folder(lab: "Lab", prefix: str) -> Path:
    """A fresh folder under the lab's jobs folder holding the job helper programs, writable by labuser."""
    import shutil
    import uuid

    d = lab.jobs_dir / f"{prefix}-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    for p in JOB_HELPERS.glob("*.py"):
        shutil.copy(p, d / p.name)
    os.chmod(d, 0o777)
    return d


def install_lua(lab, text: str) -> None:
    """Write the lab's job_submit.lua so that slurmctld sees a new mtime (it reloads on a change, second
    resolution)."""
    path = lab.dir / "etc" / "job_submit.lua"
    old = int(path.stat().st_mtime) if path.exists() else 0
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    t = max(int(time.time()), old + 1)
    os.utime(path, (t, t))


def launchers_env() -> Path:
    """The cached environment with the real launchers (torchrun, accelerate, deepspeed). Missing is a failure, not a
    skip: scripts/test builds it before the lab tests."""
    import pytest

    repo = Path(__file__).resolve().parents[2]
    p = subprocess.run([str(repo / "scripts" / "launchers-env"), "--check"], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail(f"{p.stderr.strip()} (scripts/test builds it before the lab tests)", pytrace=False)
    return Path(p.stdout.strip())


def job_script(lab: "Lab", folder: str, text: str) -> Path:
    """`text` as a job script the lab user can read, in `folder` under the lab's jobs folder (sticky, shared)."""
    work = lab.jobs_dir / folder
    work.mkdir(exist_ok=True)
    os.chmod(work, 0o1777)
    sp = work / f"job-{time.monotonic_ns()}.sh"
    sp.write_text(text)
    os.chmod(sp, 0o644)
    return sp

