"""Churn at full size (issue 16): 120 checkpointing trainers, 30 plain jobs and 62 production jobs arriving at
random (70+ preemptions), on the real Slurm lab; prints the figures in the issue's table form.

    sudo .venv/bin/python benchmarks/bench_churn.py [--slurm 22.05|25.11] [--seed N] [--small]

Brings up its own lab (SLURMTOOLS_LAB_DIR, default <repo>/.lab-bench-churn-<release>, port offset 3600) and stops
it after. About 8 minutes on 2 cores. `--small` runs the lab test's size (40 trainers, 10 plain).
Goals: 0 jobs lost, every trainer's result the uninterrupted one, and the report equal to sacct and the
checkpoints (preempted, requeued, failed runs and GPU-hours lost); exit status 1 if any is missed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.churn import ChurnConfig, run_churn  # noqa: E402
from tests.integration.labtools import LAB_SCRIPT, Lab, _lab_env  # noqa: E402

#: the issue's run: 212 jobs (120 trainers, 30 plain, 62 production); trainers long enough to be hit through the
#: whole arrival window, and slower after a resume than in the lab test so that they can be hit again
FULL = dict(trainers=120, plain=30, production=62, arrive=(10.0, 220.0), steps=300, step_s=0.4,
            restart_step_s=0.25, plain_s=90, plain_rerun_s=20, hold_until=150.0, timeout=1500.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slurm", default="22.05", choices=("22.05", "25.11"))
    ap.add_argument("--seed", type=int, default=212)
    ap.add_argument("--small", action="store_true", help="the lab test's size")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_churn: needs root (it starts a Slurm lab)", file=sys.stderr)
        return 2
    d = Path(os.environ.get("SLURMTOOLS_LAB_DIR", REPO / f".lab-bench-churn-{a.slurm}"))
    env = dict(os.environ, SLURMTOOLS_LAB_DIR=str(d),
               SLURMTOOLS_LAB_PORT_OFFSET=os.environ.get("SLURMTOOLS_LAB_PORT_OFFSET", "3600"))
    p = subprocess.run([str(LAB_SCRIPT), "up", "--slurm", a.slurm], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"bench_churn: the {a.slurm} lab did not start:\n{p.stdout}{p.stderr}", file=sys.stderr)
        return 2
    try:
        lab_env, version = _lab_env(d)
        lab = Lab(dir=d, env=lab_env, slurm_version=version)
        cfg = ChurnConfig(seed=a.seed) if a.small else ChurnConfig(seed=a.seed, **FULL)
        r = run_churn(lab, cfg, log=lambda m: print(m, flush=True))
        print(f"\nSlurm {version}")
        print(r.table())
        return 0 if not r.problems else 1
    finally:
        subprocess.run([str(LAB_SCRIPT), "down"], env=env, capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
