"""`scripts/slurm-lab down` against a real lab: it stops every daemon of its lab, also those whose pid files are gone
(a `down` killed after it had removed them, as a second Ctrl-C once did to a sandbox's), and no daemon of another
lab. A lab of its own beside the session's lab, so that the session's lab can be checked untouched."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from labtools import LAB_SCRIPT, lab_slurm

pytestmark = pytest.mark.lab

OFFSET = str(int(os.environ.get("SLURMTOOLS_LAB_PORT_OFFSET") or 0) + 1400)
DAEMONS = ("slurmctld", "slurmd", "slurmdbd", "mariadbd", "munged")


def _daemons_of(lab_dir: Path) -> dict[int, str]:
    """pid -> name of the daemons started for the lab in `lab_dir`: `slurm-lab` starts each with the lab's
    SLURM_CONF in its environment."""
    want = f"SLURM_CONF={lab_dir}/etc/slurm.conf".encode()
    out = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            name = (proc / "comm").read_text().strip()
            if name in DAEMONS and want in (proc / "environ").read_bytes().split(b"\0"):
                out[int(proc.name)] = name
        except OSError:
            continue
    return out


def test_down_stops_the_daemons_whose_pid_files_are_gone(lab):
    d = Path(str(lab.dir) + "-down")
    env = dict(os.environ, SLURMTOOLS_LAB_DIR=str(d), SLURMTOOLS_LAB_PORT_OFFSET=OFFSET)
    up = subprocess.run([str(LAB_SCRIPT), "up", "--slurm", lab_slurm()], capture_output=True, text=True, env=env,
                        timeout=900)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        ours, theirs = _daemons_of(d), _daemons_of(lab.dir)
        assert set(ours.values()) == set(DAEMONS), ours
        assert set(theirs.values()) == set(DAEMONS), theirs   # the session's lab, which must stay up
        gone = ["slurmctld.pid", "slurmd-gpu01.pid", "mariadb.pid", "munged.pid"]
        for name in gone:
            (d / "run" / name).unlink()
        down = subprocess.run([str(LAB_SCRIPT), "down"], capture_output=True, text=True, env=env, timeout=300)
        assert down.returncode == 0, down.stdout + down.stderr
        assert _daemons_of(d) == {}
        assert _daemons_of(lab.dir) == theirs
    finally:
        subprocess.run([str(LAB_SCRIPT), "down"], capture_output=True, env=env, timeout=300)
