"""Prolog and epilog wall time against `python -c pass` (goal: at most 3x), measured side by side in one run.

    python benchmarks/bench_hooks.py [--rounds 40]

Runs as root (the hooks check that their spool folder is root's). Each round runs the baseline and every hook
variant once, interleaved, so machine noise hits all alike; prints medians and the RATIOS to the baseline. No NVML
is used: "no GPUs" jobs do not touch NVML, "GPUs, NVML absent" jobs try pynvml and find no library (as in the lab).
The epilog's `scontrol show job` is switched off (SLURMTOOLS_EPILOG_SCONTROL=0) except in the last row, where
/bin/true stands in for scontrol: the controller's answer time is Slurm's, not the hook's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(argv: list[str], env: dict) -> float:
    t = time.perf_counter()
    r = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"bench_hooks: {' '.join(argv)} exited {r.returncode}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=40)
    a = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as td:
        os.chmod(td, 0o755)
        spool = Path(td) / "spool"
        spool.mkdir(mode=0o755)
        base = {"PATH": "/usr/bin:/bin", "SLURMTOOLS_PYTHON": py, "SLURMTOOLS_SPOOL_DIR": str(spool),
                "SLURMTOOLS_EPILOG_SCONTROL": "0", "SLURMTOOLS_SCRATCH_PATTERN": f"{td}/scratch-{{job_id}}",
                "SLURM_JOB_USER": "labuser", "SLURM_JOB_UID": "1001", "SLURM_JOB_ACCOUNT": "nlp",
                "SLURM_JOB_PARTITION": "gpu", "SLURMD_NODENAME": "gpu01", "SLURM_NODELIST": "gpu[01-02]",
                "SLURM_JOB_EXIT_CODE2": "0:0"}
        gpus = {"SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7"}
        variants = {
            "python -c pass": ([py, "-c", "pass"], {}),
            "prolog (no GPUs)": ([str(REPO / "scripts" / "prolog")], {}),
            "prolog (GPUs, NVML absent)": ([str(REPO / "scripts" / "prolog")], gpus),
            "epilog (no GPUs)": ([str(REPO / "scripts" / "epilog")], {}),
            "epilog (GPUs, NVML absent)": ([str(REPO / "scripts" / "epilog")], gpus),
            # the default epilog also runs `scontrol show job`; /bin/true stands in for it so that this row counts
            # the hook's own cost of spawning it, not the controller's answer time
            "epilog + scontrol spawn": ([str(REPO / "scripts" / "epilog")],
                                        {**gpus, "SLURMTOOLS_EPILOG_SCONTROL": "1", "SLURMTOOLS_SCONTROL": "/bin/true"}),
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        for r in range(a.rounds + 3):
            for name, (argv, extra) in variants.items():
                env = dict(base, SLURM_JOB_ID=str(1000 + r), **extra)
                dt = timed(argv, env)
                if r >= 3:  # warm-up rounds fill the page cache
                    times[name].append(dt)
        base_t = statistics.median(times["python -c pass"])
        print(f"interpreter: {py}  rounds: {a.rounds}")
        print(f"{'what':30} {'median ms':>10} {'ratio':>7}")
        for name, ts in times.items():
            m = statistics.median(ts)
            print(f"{name:30} {m * 1000:10.1f} {m / base_t:7.2f}x")
        worst = max(statistics.median(t) for k, t in times.items() if k != "python -c pass") / base_t
        print(f"worst hook ratio: {worst:.2f}x (goal <= 3x): {'OK' if worst <= 3 else 'OVER GOAL'}")


if __name__ == "__main__":
    main()
