"""The pyslurm backend against the command backend on the same Slurm 25.11 lab, as ratios measured in one run.

  slurmtools cluster show --json      --backend pyslurm  vs  --backend commands   (whole CLI process)
  Backend.jobs() with N jobs queued   pyslurm            vs  commands (squeue --json)   (in process)
  Backend.nodes()                     pyslurm            vs  commands (scontrol/sinfo --json)

N held jobs (default 1,000) are submitted for the read, then cancelled. Needs the 25.11 lab with pyslurm in
.venv (`scripts/test --slurm 25.11` builds both; then `SLURMTOOLS_LAB_DIR=.lab-25.11 scripts/slurm-lab up
--slurm 25.11` and `eval "$(SLURMTOOLS_LAB_DIR=.lab-25.11 scripts/slurm-lab env)"`). Without them it says so and
exits 0: there is nothing to compare on 22.05, for which PyPI has no pyslurm.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def median_time(fn, n: int) -> float:
    fn()  # warm-up
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=7, help="runs per measurement (median is reported)")
    ap.add_argument("--jobs", type=int, default=1000, help="held jobs queued for the jobs() read")
    args = ap.parse_args()
    from slurmtools.slurm.backends import get_backend, pyslurm_usable

    ok, why = pyslurm_usable(use_cache=False)
    if not ok:
        print(f"bench_backends: nothing to compare here: {why}")
        return 0
    cmd, pys = get_backend("commands"), get_backend("pyslurm")
    ids: list[int] = []
    script = "#!/bin/sh\n#SBATCH --qos=production\n#SBATCH -t 5\ntrue\n"
    t0 = time.perf_counter()
    try:
        for i in range(args.jobs):
            ids.append(cmd.submit(script, ["-H", "-J", f"bench-{i}", "-o", "/dev/null"], cwd="/tmp"))
        submit_s = time.perf_counter() - t0
        rows = []
        for name, a, b in (("jobs()", lambda: cmd.jobs(), lambda: pys.jobs()),
                           ("nodes()", lambda: cmd.nodes(), lambda: pys.nodes())):
            assert len(a()) == len(b()), f"{name}: the backends disagree on the count"
            ta, tb = median_time(a, args.n), median_time(b, args.n)
            rows.append((f"{name} ({len(a())} items)", ta, tb))
        py = sys.executable
        cli = [py, "-m", "slurmtools", "cluster", "show", "--json"]

        def run(backend: str):
            p = subprocess.run(cli, capture_output=True, env=dict(os.environ, SLURMTOOLS_BACKEND=backend))
            if p.returncode != 0:
                raise SystemExit(f"cluster show --backend {backend} failed: {p.stderr.decode().strip()}")

        rows.append(("cluster show --json (CLI process)", median_time(lambda: run("commands"), args.n),
                     median_time(lambda: run("pyslurm"), args.n)))
    finally:
        for k in range(0, len(ids), 200):
            subprocess.run(["scancel", *map(str, ids[k:k + 200])], capture_output=True)
    print(f"{args.jobs} held jobs submitted in {submit_s:.1f} s (sbatch)")
    print(f"{'measurement':36} {'commands s':>11} {'pyslurm s':>10} {'pyslurm / commands':>19}")
    for name, ta, tb in rows:
        print(f"{name:36} {ta:11.3f} {tb:10.3f} {tb / ta:19.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
