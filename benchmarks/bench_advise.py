"""Advise benchmark: ratios measured side by side in one run.

`slurmtools advise` reads the same sacct dump as the report (through the report's reader) plus its own fields
(Timelimit, TotalCPU, MaxRSS, the CPUs and memory asked), joins the epilog's records and judges every job shape.
`plan --right-size` pays the same cost before it plans. Measured on a realistic dump (`slurmtools.reports.synth`,
30 days, .batch/.extern steps, hostile job names) with advise's fields added:

1. advise's history read (`advise.usage.load_runs`) against the report's sacct reader alone on the same file;
2. the rules over every shape (`advise.rules.advise`) against the same reader.
Goal: the whole of advise (read + rules) <= 4x the report's reader. Prints ratios; asserts nothing.

    python benchmarks/bench_advise.py              # 100,000 jobs
    python benchmarks/bench_advise.py --jobs 500000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path

START = datetime(2026, 10, 1)


def dump_with_advise_fields(n: int, folder: Path) -> Path:
    """A synthetic 30-day dump with Timelimit, TotalCPU and MaxRSS appended (steps carry MaxRSS)."""
    import numpy as np

    from slurmtools.reports import synth

    lines = synth.generate(n, START, 30, seed=1).split("\n")
    rng = np.random.default_rng(0)
    rss = rng.integers(1, 400, len(lines))
    out = [lines[0] + "|Timelimit|TotalCPU|MaxRSS"]
    for i, ln in enumerate(lines[1:]):
        if ln:
            step = "." in ln.split("|", 2)[1]
            out.append(ln + (f"||00:10:00|{rss[i]}G" if step else "|1-00:00:00|01:02:03.500|"))
    p = folder / "sacct.txt"
    p.write_text("\n".join(out) + "\n")
    return p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()

    from slurmtools.advise import rules, usage
    from slurmtools.reports.sacct import read_sacct
    from slurmtools.resources import example_site
    from slurmtools.site import load_site

    site = load_site(example_site())
    with tempfile.TemporaryDirectory() as tmp:
        path = dump_with_advise_fields(a.jobs, Path(tmp))
        read_sacct(path)  # warm imports and the file cache for both
        reader, load, judge = [], [], []
        for _ in range(a.repeat):  # alternating, so both see the same machine load
            t = time.perf_counter()
            acc = read_sacct(path)
            reader.append(time.perf_counter() - t)
            t = time.perf_counter()
            runs, _ = usage.load_runs(datetime(2026, 9, 1), datetime(2026, 12, 1), sacct_file=path)
            load.append(time.perf_counter() - t)
            t = time.perf_counter()
            shapes = rules.advise(runs, site)
            judge.append(time.perf_counter() - t)
    r, lo, ju = (statistics.median(x) for x in (reader, load, judge))
    print(f"{len(acc.jobs):,} job runs, {len(runs):,} finished, {len(shapes):,} shapes "
          f"({sum(1 for s in shapes if s.findings):,} with advice); medians of {a.repeat}")
    print(f"report's sacct reader      {r:6.2f} s   1.00x")
    print(f"advise history read        {lo:6.2f} s   {lo / r:.2f}x")
    print(f"advise rules               {ju:6.2f} s   {ju / r:.2f}x")
    print(f"advise in all              {lo + ju:6.2f} s   {(lo + ju) / r:.2f}x   (goal <= 4x)")


if __name__ == "__main__":
    main()
