"""CLI start-up and `cluster show` cost, as ratios measured side by side in one run.

  slurmtools --help, plan --help vs  python3 -c pass (goal <= 2x), beside typer's own cost
  slurmtools cluster show --json vs  the raw `sinfo --json` it wraps (goal <= 10x), as the installed script runs
                                     it (without typer), beside --backend commands, typer and sacctmgr
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


def timed(argv: list[str], n: int, **env: str) -> float:
    """Median wall seconds of n runs (after one warm-up run that may write bytecode, as an installed copy has)."""
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SLURMTOOLS_PREBUILT_HELP",
                                                              "SLURMTOOLS_DIRECT", "SLURMTOOLS_BACKEND")}
    e.update(env)
    subprocess.run(argv, capture_output=True, env=e)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        p = subprocess.run(argv, capture_output=True, env=e)
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
    t_plan = timed(st + ["plan", "--help"], args.n)
    t_typer = timed([py, "-c", "import typer"], args.n)
    t_help_typer = timed(st + ["--help"], args.n, SLURMTOOLS_PREBUILT_HELP="0")
    t_plan_typer = timed(st + ["plan", "--help"], args.n, SLURMTOOLS_PREBUILT_HELP="0")
    rows += [("slurmtools --help", t_help, t_help / base), ("slurmtools plan --help", t_plan, t_plan / base),
             ("  beside them: python3 -c 'import typer'", t_typer, t_typer / base),
             ("  slurmtools --help through typer", t_help_typer, t_help_typer / base),
             ("  slurmtools plan --help through typer", t_plan_typer, t_plan_typer / base)]
    have_slurm = subprocess.run(["sinfo", "-h"], capture_output=True).returncode == 0
    if have_slurm:
        # the installed script, as users run it (python -m adds runpy's import); run without typer (launch.DIRECT)
        script = Path(py).with_name("slurmtools")
        show = ([str(script)] if script.exists() else st) + ["cluster", "show", "--json"]
        t_sinfo = timed(["sinfo", "--json"], args.n)
        t_show = timed(show, args.n)
        t_show_cmd = timed(show, args.n, SLURMTOOLS_BACKEND="commands")
        t_show_via_typer = timed(show, args.n, SLURMTOOLS_DIRECT="0")
        t_qos = timed(["sacctmgr", "-n", "-P", "show", "qos", "format=Name,GraceTime"], args.n)
        t_show_typer = timed(st + ["cluster", "show", "--help"], args.n, SLURMTOOLS_PREBUILT_HELP="0")
        rows += [("sinfo --json (raw)", t_sinfo, t_sinfo / base),
                 ("slurmtools cluster show --json", t_show, t_show / base),
                 ("  the same, --backend commands", t_show_cmd, t_show_cmd / base),
                 ("  the same through typer (SLURMTOOLS_DIRECT=0)", t_show_via_typer, t_show_via_typer / base),
                 ("  beside it: sacctmgr show qos (names, grace)", t_qos, t_qos / base),
                 ("  cluster show --help through typer", t_show_typer, t_show_typer / base)]
    print(f"{'command':46} {'median s':>9} {'x python3 -c pass':>18}")
    for name, t, r in rows:
        print(f"{name:46} {t:9.3f} {r:18.1f}")
    worst = max(t_help, t_plan) / base
    print(f"RATIO --help and plan --help / python3 -c pass: {t_help / base:.2f} and {t_plan / base:.2f} "
          f"(goal <= 2: {'MET' if worst <= 2 else 'NOT MET'}); served from typer's captured text "
          f"(slurmtools/cli/launch.py); typer alone would be {t_help_typer / base:.1f} and {t_plan_typer / base:.1f}")
    if have_slurm:
        r, rc = t_show / t_sinfo, t_show_cmd / t_sinfo
        print(f"RATIO cluster show --json / raw sinfo --json: {r:.1f} (goal <= 10: {'MET' if r <= 10 else 'NOT MET'}), "
              f"{rc:.1f} with --backend commands ({'MET' if rc <= 10 else 'NOT MET'}); through typer it would be "
              f"{t_show_via_typer / t_sinfo:.1f}; the sacctmgr query it waits on alone is {t_qos / t_sinfo:.1f}x "
              f"(sinfo, scontrol, sacctmgr and the version run side by side)")
    else:
        print("no Slurm reachable: cluster-show rows skipped (set SLURM_CONF to the lab's slurm.conf)")
    if args.lab_up:
        env = dict(os.environ)
        t = time.perf_counter()
        subprocess.run([str(REPO / "scripts" / "slurm-lab"), "up"], check=True, env=env)
        print(f"lab start-up (scripts/slurm-lab up, 16 nodes, clean state): {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
