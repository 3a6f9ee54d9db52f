"""`scripts/slurm-lab up` refuses, in one line naming the port, a lab whose ports another program holds, before it
starts a daemon: every node's slurmd port is checked, not only the first 64 (a sandbox lab has up to 512 nodes, and
a slurmd that cannot bind its port was a node that never came up, found only when the lab timed out)."""

from __future__ import annotations

import os
import socket
import subprocess
import tomllib
from pathlib import Path

import pytest

from labtools import LAB_SCRIPT, lab_slurm
from slurmtools.sandbox.sitecopy import dumps

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
OFFSET = int(os.environ.get("SLURMTOOLS_LAB_PORT_OFFSET") or 0) + 1600
NODES = 80


def _site_of(n: int, out: Path) -> Path:
    """The example site with `n` nodes of its node type on one leaf."""
    site = tomllib.loads((REPO / "site_configs/example/site.toml").read_text())
    fabric = tomllib.loads((REPO / "topology/example/fabric.toml").read_text())
    hosts = f"gpu[01-{n:02d}]"
    fabric["leaves"] = [{"name": "leaf1", "hosts": hosts, "node_type": next(iter(fabric["node_types"]))}]
    fabric["spines"] = []
    (out / "fabric.toml").write_text(dumps(fabric))
    site["site"]["fabric"] = "fabric.toml"
    site["partitions"]["gpu"]["nodes"] = hosts
    (out / "site.toml").write_text(dumps(site))
    return out / "site.toml"


def test_up_names_a_busy_slurmd_port_of_the_last_node(tmp_path):
    lab_dir = REPO / f".lab-ports-{lab_slurm()}"
    env = dict(os.environ, SLURMTOOLS_SITE=str(_site_of(NODES, tmp_path)), SLURMTOOLS_LAB_DIR=str(lab_dir),
               SLURMTOOLS_LAB_PORT_OFFSET=str(OFFSET))
    last = 17001 + OFFSET + NODES - 1   # slurm-lab's slurmd ports: 17001 + offset, one per node
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", last))
    holder.listen()
    try:
        up = subprocess.run([str(LAB_SCRIPT), "up", "--slurm", lab_slurm()], capture_output=True, text=True,
                            env=env, timeout=900)
        assert up.returncode != 0, up.stdout
        errors = [line for line in up.stderr.splitlines() if "error" in line or "already in use" in line]
        assert len(errors) == 1 and f"port {last} is already in use" in errors[0], up.stderr
        assert not (lab_dir / "run" / "slurmctld.pid").exists()   # refused before any daemon started
    finally:
        holder.close()
        subprocess.run([str(LAB_SCRIPT), "down"], capture_output=True, env=env, timeout=300)
