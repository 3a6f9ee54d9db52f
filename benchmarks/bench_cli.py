"""CLI start-up and `cluster show` cost, as ratios measured side by side in one run.

  slurmtools --help              vs  python3 -c pass
  slurmtools cluster show --json vs  python3 -c pass, and vs the raw `sinfo --json` it wraps
  lab start-up time (scripts/slurm-lab up), with --lab-up

Needs a reachable Slurm for the cluster-show rows (SLURM_CONF, e.g. the lab: `scripts/slurm-lab env`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(argv: list[str], n: int) -> float:
    """Median wall seconds of n runs (after one warm-up run)."""
    subprocess.run(argv, capture_output=True)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        p = subprocess.run(argv, capture_output=True)
        out.append(time.perf_counter() - t)
        if p.returncode != 0:
            raise SystemExit(f"benchmark command failed: {' '.join(argv)}\n{p.stderr.decode()}")
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=15, help="runs per command (median is reported)")
    ap.add_argument("--lab-up", action="store_true", help="also time `scripts/slurm-lab up` (restarts the lab)")
    args = ap.parse_args()
    py = sys.executable
    st = [py, "-m", "slurmtools"]
    base = timed([py, "-c", "pass"], args.n)
    rows = [("python3 -c pass", base, 1.0)]
    t_help = timed(st + ["--help"], args.n)
    rows.append(("slurmtools --help", t_help, t_help / base))
    have_slurm = subprocess.run(["sinfo", "-h"], capture_output=True).returncode == 0
    if have_slurm:
        t_sinfo = timed(["sinfo", "--json"], args.n)
        t_show = timed(st + ["cluster", "show", "--json"], args.n)
        rows.append(("sinfo --json (raw)", t_sinfo, t_sinfo / base))
        rows.append(("slurmtools cluster show --json", t_show, t_show / base))
    print(f"{'command':36} {'median s':>9} {'x python3 -c pass':>18}")
    for name, t, r in rows:
        print(f"{name:36} {t:9.3f} {r:18.1f}")
    if have_slurm:
        print(f"cluster show / raw sinfo --json: {t_show / t_sinfo:.1f}x "
              "(cluster show also runs sinfo --version, scontrol show partition and sacctmgr show qos)")
    else:
        print("no Slurm reachable: cluster-show rows skipped (set SLURM_CONF to the lab's slurm.conf)")
    if args.lab_up:
        env = dict(os.environ)
        t = time.perf_counter()
        subprocess.run([str(REPO / "scripts" / "slurm-lab"), "up"], check=True, env=env)
        print(f"lab start-up (scripts/slurm-lab up, 16 nodes, clean state): {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
