"""Report benchmark at a year's scale (issue 15 goal 1): ratios measured side by side in one run.

A generated year of a 20,000-GPU site (2,500 nodes x 8 GPUs; `--year`: 10,000,000 jobs with .batch and .extern
steps, 10% array tasks, preemptions and their reruns, GPU TRES; `slurmtools.reports.synth.write_year`), then:
1. a bare columnar read of the dump, by pyarrow's streaming CSV reader and by DuckDB's, every field typed as the
   report reads it (the fair floor for anything that reads the dump);
   and the floor of any day-cache build: DuckDB reading the dump and writing its job lines untouched (no step
   reduction, no TRES parsing, no checks) to Parquet, in one file and in one file per end day;
2. building the day cache from the dump (`ingest.load_jobs` with `--cache`, as the first cron run does).
   Goal: <= 1.5x the bare read (below the day-file floor on this machine: docs/reports.md);
3. the full yearly report from the cache plus one fresh day (30,000 jobs: what sacct adds the next night),
   computed by the DuckDB engine and written as HTML, CSV, Markdown and JSON. Goals: <= 30 s, peak RSS < 2 GB.
With `--compare-old` (only for sizes pandas holds: 1 M jobs at most) the same report by `metrics.compute`.

Each measurement runs in its own process, so its peak memory (VmHWM) is its own. Prints ratios; asserts nothing.
    python benchmarks/bench_reports_scale.py --jobs 1000000 --compare-old   # about 3 minutes with the dump
    python benchmarks/bench_reports_scale.py --year                          # the dump alone: about 10 minutes
    python benchmarks/bench_reports_scale.py --year --report-only            # step 3 again, on the cache kept
The dump and the cache are kept in --dir (default /tmp/slurmtools-bench-year) between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
START = datetime(2025, 11, 1)
DAYS = 365
NODES = 2_500  # x 8 GPUs = 20,000 GPUs
ACCOUNTS = ["vision", "nlp", "students"]

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
what, path = sys.argv[1], sys.argv[2]
n = 0
TIMES = ("Submit", "Eligible", "Start", "End")
if what in ("bare_pyarrow", "bare_duckdb"):
    names = open(path).readline().rstrip("\n").split("|")
if what == "bare_pyarrow":
    import pyarrow as pa, pyarrow.csv as pacsv
    types = {k: pa.timestamp("s") if k in TIMES else pa.int32() if k == "NNodes" else pa.string() for k in names}
    r = pacsv.open_csv(path, read_options=pacsv.ReadOptions(block_size=1 << 24),
                       parse_options=pacsv.ParseOptions(delimiter="|", quote_char=False),
                       convert_options=pacsv.ConvertOptions(column_types=types, null_values=["", "Unknown"],
                                                            strings_can_be_null=False))
    for b in r:
        n += b.num_rows
elif what == "bare_duckdb":
    import duckdb
    con = duckdb.connect()
    con.execute("SET enable_progress_bar=false")
    types = {k: "TIMESTAMP" if k in TIMES else "INTEGER" if k == "NNodes" else "VARCHAR" for k in names}
    # every field is parsed and looked at (max), so the read cannot skip a column
    agg = ", ".join(f'max("{k}")' for k in names)
    n = con.execute(f"SELECT count(*), {agg} FROM read_csv('{path}', delim='|', quote='', escape='', header=true, "
                    f"types={types!r}, nullstr=['', 'Unknown'], timestampformat='%Y-%m-%dT%H:%M:%S')").fetchone()[0]
elif what in ("floor_one", "floor_days"):
    # the least a day-cache build does: read the dump as the bare read does and write its job lines (no step
    # reduction, no TRES parsing, no checks) as Parquet, in one file or one file per end day as the cache keeps them
    import duckdb
    out = sys.argv[3]
    names = open(path).readline().rstrip("\n").split("|")
    con = duckdb.connect()
    con.execute("SET enable_progress_bar=false")
    con.execute("SET preserve_insertion_order=false")
    types = {k: "TIMESTAMP" if k in TIMES else "INTEGER" if k == "NNodes" else "VARCHAR" for k in names}
    src = (f"SELECT * FROM read_csv('{path}', delim='|', quote='', escape='', header=true, types={types!r}, "
           f"nullstr=['', 'Unknown'], timestampformat='%Y-%m-%dT%H:%M:%S') WHERE NOT contains(JobIDRaw, '.')")
    if what == "floor_one":
        con.execute(f"COPY ({src}) TO '{out}/runs.parquet' (FORMAT parquet)")
    else:
        con.execute(f'COPY (SELECT *, CAST("End" AS DATE) AS day FROM ({src})) TO \'{out}\' '
                    f"(FORMAT parquet, PARTITION_BY (day))")
    n = con.execute(f"SELECT count(*) FROM read_parquet('{out}/**/*.parquet')").fetchone()[0]
elif what in ("build", "report", "report_old"):
    from datetime import datetime
    from pathlib import Path
    from slurmtools.reports import ingest
    since, until, cache = datetime.fromisoformat(sys.argv[3]), datetime.fromisoformat(sys.argv[4]), sys.argv[5]
    now = datetime.fromisoformat(sys.argv[6])
    lazy = what != "report_old"
    jobs, history, notes, t = ingest.load_jobs(since, until, history_since=since, sacct_file=path,
                                               cache_dir=cache, now=now, lazy=lazy)
    if what == "build":
        n = len(jobs)
    else:
        from slurmtools.reports import columnar, metrics, outputs
        from slurmtools.site import load_site
        from slurmtools.topology.sitefile import load_fabric
        site = load_site(None)
        first = columnar.first_job(jobs, history) if lazy else ingest.first_job(jobs, history)
        cap, events, cn = ingest.load_capacity(site, since, until, first_job=first)
        # as `slurmtools report` does: the GPU runs per NodeList against the capacity's hosts
        from slurmtools.reports.capacity import hosts_outside
        hosts_outside(ingest.gpu_runs_by_nodelist(jobs), set(cap["node"]) if cap is not None else set())
        compute = columnar.compute if lazy else metrics.compute
        r = compute(jobs, site, since, until, capacity=cap, notes=notes + cn, history=history,
                    fabric=load_fabric(site.fabric_path))
        outputs.write(r, Path(sys.argv[7]), outputs.FORMATS)
        n = r.summary["runs"]
        json.dump({k: v for k, v in r.summary.items()}, open(Path(sys.argv[7]) / "bench-summary.json", "w"),
                  default=str)
# VmHWM: this process's own peak (ru_maxrss would carry the parent's peak across exec)
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
print(json.dumps({"s": time.perf_counter() - t0, "rss_mb": rss, "rows": n}))
"""


def child(*args: str) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, cwd=REPO)
    if p.returncode != 0:
        sys.exit(f"benchmark child {args[0]} failed: {p.stderr[-3000:]}")
    return json.loads(next(ln for ln in reversed(p.stdout.strip().splitlines()) if ln.startswith("{")))


def progress_line(done: int, total: int) -> None:
    if sys.stderr.isatty():
        sys.stderr.write(f"\r  generating: {done:,} of {total:,} jobs")
        sys.stderr.write("\n" if done >= total else "")
        sys.stderr.flush()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--year", action="store_true", help="10,000,000 jobs (the goal's size)")
    ap.add_argument("--jobs", type=int, default=None, help="jobs in the year (default 1,000,000)")
    ap.add_argument("--compare-old", action="store_true", help="also time metrics.compute (1 M jobs at most)")
    ap.add_argument("--dir", default="/tmp/slurmtools-bench-year", help="where the dump and cache are kept")
    ap.add_argument("--report-only", action="store_true",
                    help="only step 3, from the cache a previous run left in --dir (to time the report alone)")
    a = ap.parse_args()
    n = a.jobs or (10_000_000 if a.year else 1_000_000)
    work = Path(a.dir)
    work.mkdir(parents=True, exist_ok=True)
    print(f"slurmtools yearly report benchmark: {n:,} jobs over {DAYS} days on {NODES * 8:,} GPUs, "
          f"{os.cpu_count()} CPUs, in {work}", flush=True)
    from slurmtools.reports import synth

    dump = work / f"year-{n}.txt"
    if not dump.exists():
        t = time.perf_counter()
        synth.write_year(dump, n, START, DAYS, nodes=NODES, arrays=0.1, account_names=ACCOUNTS, seed=7,
                         progress=progress_line)
        print(f"  generated {dump.name}: {dump.stat().st_size / 1e9:.1f} GB in {time.perf_counter() - t:.0f} s",
              flush=True)
    end = START + timedelta(days=DAYS)
    fresh = work / f"fresh-day-{n}.txt"
    if not fresh.exists():
        synth.write(fresh, n // DAYS, end, 1, nodes=NODES, arrays=0.1, account_names=ACCOUNTS, seed=8,
                    first_id=1000 + 2 * n)
    size_gb = dump.stat().st_size / 1e9

    cache = work / "cache"
    if a.report_only and not cache.is_dir():
        sys.exit(f"--report-only: no cache in {work}: run without it first")
    if not a.report_only:
        build_cache(dump, cache, end, size_gb)
    report(work, cache, fresh, end, a.compare_old)


def build_cache(dump: Path, cache: Path, end: datetime, size_gb: float) -> None:
    bare_pa = child("bare_pyarrow", str(dump))
    bare_db = child("bare_duckdb", str(dump))
    shutil.rmtree(cache, ignore_errors=True)
    floors = {}
    for kind in ("floor_one", "floor_days"):
        out = cache.parent / kind
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        floors[kind] = child(kind, str(dump), str(out))
        shutil.rmtree(out, ignore_errors=True)
    build = child("build", str(dump), START.isoformat(), end.isoformat(), str(cache), end.isoformat())
    fair = min(bare_pa["s"], bare_db["s"])
    print(f"\n1. bare columnar read of the {size_gb:.1f} GB dump ({bare_pa['rows']:,} lines)")
    print(f"   pyarrow streaming CSV reader  {bare_pa['s']:7.1f} s   peak {bare_pa['rss_mb']:6.0f} MB")
    print(f"   DuckDB read_csv               {bare_db['s']:7.1f} s   peak {bare_db['rss_mb']:6.0f} MB")
    one, days = floors["floor_one"], floors["floor_days"]
    print(f"   floor: DuckDB reads it and writes its {one['rows']:,} job lines untouched to Parquet (no step "
          f"reduction, no TRES, no checks)")
    print(f"     in one file                 {one['s']:7.1f} s   peak {one['rss_mb']:6.0f} MB   = {one['s'] / fair:.2f} x "
          f"the faster bare read")
    print(f"     one file per end day        {days['s']:7.1f} s   peak {days['rss_mb']:6.0f} MB   = {days['s'] / fair:.2f} x "
          f"the faster bare read")
    print(f"2. day cache built from the dump {build['s']:7.1f} s   peak {build['rss_mb']:6.0f} MB")
    print(f"   ratio to the faster bare read {build['s'] / fair:7.2f} x  (goal <= 1.5x: "
          f"{'met' if build['s'] <= 1.5 * fair else 'MISSED'}); to pyarrow's {build['s'] / bare_pa['s']:.2f} x, "
          f"to DuckDB's {build['s'] / bare_db['s']:.2f} x; to the day-file floor {build['s'] / days['s']:.2f} x")


def report(work: Path, cache: Path, fresh: Path, end: datetime, compare_old: bool) -> None:
    until = end + timedelta(days=1)
    rep_cache = work / "cache-report"
    shutil.rmtree(rep_cache, ignore_errors=True)
    shutil.copytree(cache, rep_cache)  # the report stores tonight's day: each run starts from the same cache
    rep = child("report", str(fresh), START.isoformat(), until.isoformat(), str(rep_cache), until.isoformat(),
                str(work / "out"))
    print(f"3. yearly report from the cache + one fresh day ({rep['rows']:,} runs in the window)")
    print(f"   DuckDB engine, all formats    {rep['s']:7.1f} s   peak {rep['rss_mb']:6.0f} MB")
    print(f"   ratio to the 30 s goal        {rep['s'] / 30:7.2f}     (goal <= 1: "
          f"{'met' if rep['s'] <= 30 else 'MISSED'})")
    print(f"   ratio to the 2 GB goal        {rep['rss_mb'] / 2048:7.2f}     (goal < 1: "
          f"{'met' if rep['rss_mb'] < 2048 else 'MISSED'})")
    if compare_old:
        shutil.rmtree(rep_cache, ignore_errors=True)
        shutil.copytree(cache, rep_cache)
        old = child("report_old", str(fresh), START.isoformat(), until.isoformat(), str(rep_cache),
                    until.isoformat(), str(work / "out-old"))
        print(f"   pandas engine (metrics.compute) {old['s']:5.1f} s   peak {old['rss_mb']:6.0f} MB"
              f"   -> DuckDB engine {rep['s'] / old['s']:.2f}x its time, {rep['rss_mb'] / old['rss_mb']:.2f}x "
              f"its memory")
        a_ = json.load(open(work / "out" / "bench-summary.json"))
        b_ = json.load(open(work / "out-old" / "bench-summary.json"))
        same = all(str(a_[k])[:10] == str(b_[k])[:10] for k in a_)
        print(f"   summaries equal (10 significant characters): {same}")
    shutil.rmtree(rep_cache, ignore_errors=True)


if __name__ == "__main__":
    main()
