"""Report benchmark: ratios measured side by side in one run.

1. A realistic `sacct --parsable2 -D` dump (jobs with .batch and .extern steps; `slurmtools.reports.synth`) to a
   full report (parse, metrics, forecast, HTML + CSV + Markdown + JSON), against a bare `pandas.read_csv` of the
   same file. Goal at 1,000,000 jobs (`--full`): <= 15 s, <= 1.5 GB peak, <= 3x read_csv.
2. A nightly incremental run: finished days in the day cache (30 with --full, 7 by default) plus one new day of
   30,000 jobs, against re-reading the history's dump. Goal: <= 2 s.

Each measurement runs in its own process so peak memory (VmHWM) is its own. Prints ratios; asserts nothing.
    python benchmarks/bench_reports.py            # 200,000 jobs (about a minute on 2 cores, dumps included)
    python benchmarks/bench_reports.py --full     # 1,000,000 jobs
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
START = datetime(2026, 10, 1)

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
what, path = sys.argv[1], sys.argv[2]
if what == "read_csv":
    import pandas as pd
    df = pd.read_csv(path, sep="|", low_memory=False)
    n = len(df)
elif what == "report":
    from datetime import datetime
    from pathlib import Path
    from slurmtools.reports import ingest, metrics, outputs
    from slurmtools.site import load_site
    since, until, out = datetime.fromisoformat(sys.argv[3]), datetime.fromisoformat(sys.argv[4]), sys.argv[5]
    cache = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] != "-" else None
    load_since = datetime.fromisoformat(sys.argv[7]) if len(sys.argv) > 7 else since
    site = load_site(None)
    # as `slurmtools report` does: with the day cache, the engine for the number of runs (columnar.engine_for)
    jobs, history, notes, t = ingest.load_jobs(since, until, history_since=load_since, sacct_file=path,
                                               cache_dir=cache, now=datetime(2030, 1, 1), lazy=cache is not None)
    cap, events, cn = ingest.load_capacity(site, since, until)
    from slurmtools.topology.sitefile import load_fabric
    compute = metrics.compute
    if cache is not None:
        from slurmtools.reports.columnar import engine_for
        compute, _, jobs = engine_for(jobs)
    r = compute(jobs, site, since, until, capacity=cap, notes=notes, history=history,
                fabric=load_fabric(site.fabric_path))
    outputs.write(r, Path(out), outputs.FORMATS)
    n = len(jobs)
# VmHWM: this process's own peak (ru_maxrss would carry the parent's peak across exec)
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
print(json.dumps({"s": time.perf_counter() - t0, "rss_mb": rss, "rows": n}))
"""


def child(*args: str) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, cwd=REPO)
    if p.returncode != 0:
        sys.exit(f"benchmark child failed: {p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def dump(path: Path, n: int, start: datetime, days: float, seed: int, first_id: int = 1000) -> Path:
    from slurmtools.reports import synth

    if not path.exists():
        t = time.perf_counter()
        # the example site's 16 nodes cannot hold a million jobs: size the synthetic cluster to the load
        nodes = max(16, int(n / days / 60))
        synth.write(path, n, start, days, seed=seed, nodes=nodes, first_id=first_id,
                    account_names=["vision", "nlp", "students"])
        print(f"  generated {path.name}: {n:,} jobs, {path.stat().st_size / 1e6:.0f} MB in "
              f"{time.perf_counter() - t:.1f} s", flush=True)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="1,000,000 jobs")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--dir", default=None, help="where dumps are kept between runs (default: a temp folder)")
    a = ap.parse_args()
    n = a.jobs or (1_000_000 if a.full else 200_000)
    days = 30
    work = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="bench-reports-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"slurmtools report benchmark: {n:,} jobs over {days} days, {os.cpu_count()} CPUs, in {work}")
    big = dump(work / f"month-{n}.txt", n, START, days, seed=1)
    until = START + timedelta(days=days)

    bare = child("read_csv", str(big))
    full = child("report", str(big), START.isoformat(), until.isoformat(), str(work / "out-full"))
    print(f"\n1. full report from a {big.stat().st_size / 1e6:.0f} MB dump ({bare['rows']:,} lines, "
          f"{full['rows']:,} job runs)")
    print(f"   pandas.read_csv alone     {bare['s']:7.2f} s   peak {bare['rss_mb']:6.0f} MB")
    print(f"   slurmtools full report    {full['s']:7.2f} s   peak {full['rss_mb']:6.0f} MB")
    print(f"   ratio report / read_csv   {full['s'] / bare['s']:7.2f} x  (goal <= 3x)")
    if n >= 1_000_000:
        print(f"   goal <= 15 s: {'met' if full['s'] <= 15 else 'MISSED'}; goal <= 1.5 GB: "
              f"{'met' if full['rss_mb'] <= 1536 else 'MISSED'}")

    # nightly: past days cached (a month with --full, a week by default); tonight's dump holds one new day
    per_day = 30_000
    hdays = 30 if a.full else 7
    hstart = until - timedelta(days=hdays)
    month = dump(work / f"nightly-{hdays}d-{per_day}.txt", per_day * hdays, hstart, hdays, seed=2)
    seed = work / f"cache-seed-{hdays}d"
    if not seed.exists():
        child("report", str(month), hstart.isoformat(), until.isoformat(), str(work / "out-seed"), str(seed))
    import shutil

    cache = work / "cache-night"
    shutil.rmtree(cache, ignore_errors=True)
    shutil.copytree(seed, cache)  # tonight's run starts from the month's cache, not from a previous benchmark
    new_day = dump(work / f"nightly-day-{per_day}.txt", per_day, until, 1, seed=3, first_id=10_000_000)
    night = child("report", str(new_day), until.isoformat(), (until + timedelta(days=1)).isoformat(),
                  str(work / "out-night"), str(cache), hstart.isoformat())
    whole = child("report", str(month), (until - timedelta(days=1)).isoformat(), until.isoformat(),
                  str(work / "out-whole"), "-", hstart.isoformat())
    print(f"\n2. nightly report of one new day ({per_day:,} jobs) with a {hdays}-day history for forecast and budgets")
    print(f"   from the day cache + the new day   {night['s']:6.2f} s   peak {night['rss_mb']:5.0f} MB"
          f"  ({night['rows']:,} runs)")
    print(f"   re-reading the history's dump      {whole['s']:6.2f} s   peak {whole['rss_mb']:5.0f} MB")
    print(f"   ratio incremental / re-read        {night['s'] / whole['s']:6.2f} x  (goal: <= 2 s absolute: "
          f"{'met' if night['s'] <= 2 else 'MISSED'})")


if __name__ == "__main__":
    main()
