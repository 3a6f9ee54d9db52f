"""The report over millions of job runs, computed by DuckDB over the day cache's Parquet files (and the fresh
runs, a pandas frame), to the same `metrics.Report` as `metrics.compute`.

Why: `metrics.compute` holds every run in pandas (a year of a 20,000-GPU site is 10 M runs: several GB). Here
the runs stay in DuckDB, which streams the Parquet files and keeps only typed columns; pandas gets the small
grouped tables. What does not scale with the runs (budgets, forecast, capacity per bucket) is left to
`metrics.compute` itself, called on no runs with this engine's daily usage as its history, so those parts have
one home. DuckDB was chosen over Polars by measuring both on this workload (docs/reports.md).
Pure but for reading the given Parquet files; `tests/unit/reports/test_reports_columnar.py` proves it equal to
`metrics.compute` on every test dump.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from slurmtools.reports import metrics
from slurmtools.reports import zone as zone_mod
from slurmtools.reports.sacct import JOB_COLUMNS, empty_jobs

#: from this many runs (cached and fresh) the report is computed here rather than by `metrics.compute`: measured
#: on the 2-core machine, 30,000 runs (a night) 2.2-2.3 s here against 1.4-1.7 s in pandas, 206,000 runs (a month)
#: 1.5-1.6 s and 250 MB here against 2.2-2.4 s and 390-480 MB, 1 M runs 4.7 s and 360 MB against 12.1 s and 1.3 GB
LARGE_RUNS = 100_000
#: DuckDB's memory cap: past it, it spills to a temporary folder (the report's peak stays under 2 GB at 10 M runs)
MEMORY_LIMIT = "1GB"


@dataclass
class RunSource:
    """Where the job runs are: cached day files (runs that ended those days) and a frame of fresh runs.

    A run in both (same job, start and GPU type) counts once, the fresh one, as `cache.merge` decides."""

    files: list[Path] = field(default_factory=list)
    fresh: pd.DataFrame = field(default_factory=empty_jobs)

    def __len__(self) -> int:
        """Rows of the cached files (from their Parquet footers: nothing else is read) and fresh rows."""
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(p).metadata.num_rows for p in self.files) + len(self.fresh)

    def frame(self) -> pd.DataFrame:
        """The runs as one pandas frame, as `ingest.load_jobs` without `lazy` gives them (`cache.merge`)."""
        from slurmtools.reports import cache as cache_mod

        if not self.files:
            return self.fresh
        cached = cache_mod._typed(pd.concat([pd.read_parquet(p) for p in self.files], ignore_index=True))
        return cache_mod.merge(cached, self.fresh) if len(cached) else self.fresh


def engine_for(src: RunSource):
    """(compute, first_job, runs) for a run source: this engine from LARGE_RUNS runs on, below that
    `metrics.compute` over the runs read into pandas (DuckDB's fixed costs outweigh what it saves on a night's
    runs). Both give the same report (the differential test)."""
    if len(src) >= LARGE_RUNS:
        return compute, first_job, src
    from slurmtools.reports.ingest import first_job as pandas_first_job

    return metrics.compute, pandas_first_job, src.frame()


def _connect():
    import duckdb

    con = duckdb.connect()
    con.execute("SET enable_progress_bar=false")  # DuckDB's own bar goes to stdout, even under cron
    # tables are written in parallel (about 1.5x faster at 10 M runs): every result that needs an order asks
    # for it, and a run's position is a column of its own
    con.execute("SET preserve_insertion_order=false")
    con.execute(f"SET memory_limit='{MEMORY_LIMIT}'")
    # where it spills past the cap: a folder per user (cron runs as root, people as themselves)
    con.execute(f"SET temp_directory='{tempfile.gettempdir()}/slurmtools-duckdb-{os.getuid()}'")
    return con


def _frame_for_duckdb(df: pd.DataFrame) -> pd.DataFrame:
    """The job columns with categoricals as plain text (DuckDB reads categoricals as ENUMs)."""
    out = {}
    for c, t in JOB_COLUMNS.items():
        col = df[c] if c in df.columns else pd.Series([None] * len(df), dtype="object")
        out[c] = col.astype(object).where(col.notna(), None) if t in ("category", "str") else col
    out["row_"] = np.arange(len(df), dtype=np.int64)  # the frame's order, stated rather than left to the scan
    return pd.DataFrame(out)


def _sql_type(t: str) -> str:
    return ("VARCHAR" if t in ("category", "str") else "TIMESTAMP" if t.startswith("datetime")
            else "DOUBLE" if t.startswith("float") else "BIGINT")


def _select(have: set[str] | None = None) -> str:
    """The job columns, typed; a column a cached file predates reads as NULL."""
    def one(c: str, t: str) -> str:
        value = f'"{c}"' if have is None or c in have else "NULL"
        return f'CAST({value} AS {_sql_type(t)}) AS "{c}"'

    return ", ".join(one(c, t) for c, t in JOB_COLUMNS.items())


#: a run's position: its file's index x 2^32 + its row there (the fresh frame counts as the last file): the order
#: `cache.merge` gives rows of one job and start, and the way back to the run's text
_FILE = 4294967296


def register_source(con, src: RunSource | pd.DataFrame) -> RunSource:
    """Create the view `jobs`: every job column plus `pos`. A run both cached and fresh counts once, the fresh
    one (`cache.merge`); a run is cached in the file of the day it ended, so no run is in two files."""
    if isinstance(src, pd.DataFrame):
        src = RunSource(fresh=src)
    parts = []
    fresh = _frame_for_duckdb(src.fresh)
    con.register("fresh_frame", fresh)
    con.execute(f"CREATE OR REPLACE TEMP VIEW fresh AS SELECT {_select()}, "
                f"{len(src.files)} * {_FILE} + row_ AS pos FROM fresh_frame")
    if src.files:
        files = [str(p) for p in src.files]
        scan = f"read_parquet({files!r}, filename=true, file_row_number=true, union_by_name=true)"
        have = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
        # list_position runs once per chunk: DuckDB hands the file name over as a constant vector
        cached = (f"SELECT {_select(have)}, (list_position({files!r}, filename) - 1) * {_FILE} + file_row_number "
                  f"AS pos FROM {scan}")
        if len(fresh):
            cached = (f"SELECT * FROM ({cached}) c WHERE NOT EXISTS (SELECT 1 FROM fresh f WHERE "
                      "f.job_id_raw = c.job_id_raw AND f.start IS NOT DISTINCT FROM c.start AND "
                      "f.gpu_type IS NOT DISTINCT FROM c.gpu_type)")
        parts.append(cached)
    fresh_rows = "SELECT * FROM fresh"
    if src.files and len(fresh):
        # cache.merge also keeps one of runs repeated within the fresh ones (the last)
        fresh_rows = ("SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER (PARTITION BY job_id_raw, start, "
                      "gpu_type ORDER BY pos DESC) AS rn FROM fresh) WHERE rn = 1")
    parts.append(fresh_rows)
    con.execute(f"CREATE OR REPLACE TEMP VIEW jobs AS {' UNION ALL '.join(parts)}")
    return src


def gpu_runs_by_nodelist(src: RunSource, gpus_only: bool = True) -> dict[str, int]:
    """NodeList -> how many runs that held GPUs ran there (every run that started, without `gpus_only`), counted
    as `register_source` counts runs (one both cached and fresh once); one GROUP BY over the day files (a year of
    10 M runs: about half a second)."""
    con = _connect()
    try:
        register_source(con, src)
        which = "gpus > 0" if gpus_only else "start IS NOT NULL"
        rows = con.execute(f"SELECT nodelist, count(*) FROM jobs WHERE {which} AND nodelist IS NOT NULL "
                           "GROUP BY nodelist").fetchall()
    finally:
        con.close()
    return {k: int(n) for k, n in rows}


def first_job(src: RunSource | pd.DataFrame, history: pd.DataFrame | None = None, zone=None
              ) -> pd.Timestamp | None:
    """`ingest.first_job` over a run source: the earliest submit or start, or the first cached usage day (its
    start in `zone`). The cached files' earliest times come from their Parquet footers (exact minimums; no run
    is read)."""
    import pyarrow.parquet as pq

    if isinstance(src, pd.DataFrame):
        src = RunSource(fresh=src)
    times = []
    for c in ("submit", "start"):
        if c in src.fresh.columns and src.fresh[c].notna().any():
            times.append(pd.Timestamp(src.fresh[c].min()))
    for p in src.files:
        meta = pq.ParquetFile(p).metadata
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        for c in ("submit", "start"):
            if c not in names:
                continue
            k = names.index(c)
            for g in range(meta.num_row_groups):
                st = meta.row_group(g).column(k).statistics
                if st is not None and st.has_min_max:
                    times.append(pd.Timestamp(st.min))
                elif meta.row_group(g).num_rows:  # no statistics: read the column
                    col = pq.read_table(p, columns=[c])[c].to_pandas()
                    if col.notna().any():
                        times.append(pd.Timestamp(col.min()))
                    break
    if history is not None and len(history):
        times.append(zone_mod.get(zone).utc(history["day"].min()))
    return min(times).as_unit("s") if times else None


def _q(value) -> str:
    """A SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def _lit(values) -> str:
    return "[" + ", ".join("'" + str(v).replace("'", "''") + "'" for v in values) + "]"


#: a run counts in the window [lo, hi) when it overlaps it or started in it (`metrics.compute`'s rule)
_IN_WINDOW = "(end_s > {lo} AND start_s < {hi} AND end_s > start_s) OR (start_s >= {lo} AND start_s < {hi})"
#: text columns of a run kept as DuckDB ENUMs (a byte or two a run instead of a string: 10 M runs fit in memory)
_ENUMS = ("user", "account", "partition", "state", "gpu_type", "tier", "cluster", "nodelist")


def _runs_table(con, site, until: datetime, lo: int, hi: int, zone=None) -> tuple[int, list[str]]:
    """`metrics.prepare` in SQL: the view `k` of every run that held GPUs and the table `runs` of them with
    their number among the job's runs and whether a later run followed. Returns how many finished runs had no
    End (counted as 0 s) and the tiers every loaded job names (the old engine's tier categories)."""
    u = zone_mod.get(zone).instant(until)
    single = {p.name: p.gpu_types[0] for p in site.partitions.values() if len(p.gpu_types) == 1} if site else {}
    # untyped GPUs in a partition with one GPU type are that type (a CASE, not a join: a few partitions)
    by_part = "CASE j.\"partition\" " + " ".join(f"WHEN {_q(k)} THEN {_q(v)}" for k, v in single.items()) + \
        " ELSE 'untyped' END" if single else "'untyped'"
    cluster = site.cluster_name if site else "(none)"
    running = "(" + ", ".join(_q(x) for x in metrics.RUNNING) + ")"
    con.execute(f"""
        CREATE OR REPLACE TEMP VIEW k AS
        SELECT j.pos, j.job_id_raw, j."user", j.account, j."partition", j.state, j.gpus::INTEGER AS gpus,
            CASE WHEN j.gpu_type = 'untyped' THEN {by_part} ELSE j.gpu_type END AS gpu_type,
            CASE WHEN j.qos IS NULL THEN NULL WHEN j.qos = '' THEN '(none)' ELSE j.qos END AS tier,
            CASE WHEN j.cluster IS NULL THEN NULL WHEN j.cluster = '' THEN {_q(cluster)} ELSE j.cluster END AS cluster,
            epoch(j.start)::BIGINT AS start_s,
            CASE WHEN j."end" IS NOT NULL THEN epoch(j."end")::BIGINT
                 WHEN j.state IN {running} THEN greatest({u}, epoch(j.start)::BIGINT)
                 ELSE epoch(j.start)::BIGINT END AS end_s,
            epoch(coalesce(j.eligible, j.submit))::BIGINT AS ref_s,
            j.gpu_util_slurm::FLOAT AS gpu_util_slurm, j.gpu_mem_slurm_mb::FLOAT AS gpu_mem_slurm_mb,
            {"j.energy_slurm_j" if "energy_slurm_j" in JOB_COLUMNS else "NULL::DOUBLE"} AS energy_slurm_j, j.nodelist
        FROM jobs j
        WHERE j.gpus > 0 AND j.start IS NOT NULL""")
    # the values of each text column, as ENUM types: one scan of the raw columns of every job (a member no run
    # uses costs nothing); the tiers every loaded job names, GPUs or not, are the old engine's tier categories
    raw = ("user", "account", "partition", "state", "gpu_type", "qos", "cluster", "nodelist")
    row = con.execute("SELECT " + ", ".join(f'list(DISTINCT "{c}")' for c in raw) + ", count(*) FILTER (WHERE "
                      f"gpus > 0 AND start IS NOT NULL AND \"end\" IS NULL AND NOT coalesce(state IN {running}, false))"
                      " FROM jobs").fetchall()[0]
    got, no_end = dict(zip(raw, row[:-1])), int(row[-1])
    got = {c: {v for v in (vs or []) if v is not None} for c, vs in got.items()}
    tiers = sorted({"(none)" if q == "" else q for q in got["qos"]})
    members = {"user": got["user"], "account": got["account"], "partition": got["partition"],
               "state": got["state"] | {*metrics.RUNNING, *metrics.NODE_FAILURE, "PREEMPTED", "REQUEUED", "FAILED"},
               "gpu_type": got["gpu_type"] | set(single.values()) | {"untyped"}, "tier": set(tiers),
               "cluster": {cluster if c == "" else c for c in got["cluster"]}, "nodelist": got["nodelist"]}
    for c in _ENUMS:
        con.execute(f"DROP TYPE IF EXISTS e_{c}")
        con.execute(f"CREATE TYPE e_{c} AS ENUM ({', '.join(_q(v) for v in sorted(members[c])) or _q('')})")
    cols = ", ".join(f'k."{c}"::e_{c} AS "{c}"' if c in _ENUMS else f'k."{c}"' for c in
                     ("pos", "job_id_raw", *_ENUMS, "gpus", "start_s", "end_s", "ref_s", "gpu_util_slurm",
                      "gpu_mem_slurm_mb", "energy_slurm_j"))
    # a run's number among its job's runs, and whether a later one followed: a window, but only over the jobs
    # that ran more than once (a few percent): sorting every run would spill past the memory cap at 10 M runs.
    # One run may be several rows (a row per GPU type, same start; a row after a resize: the row before ended
    # RESIZING): the rule of `metrics.run_numbers`
    # A job is its cluster and JobIDRaw (a dump of several clusters numbers each one's jobs apart)
    con.execute("CREATE OR REPLACE TEMP TABLE multi AS SELECT job_id_raw, cluster FROM k GROUP BY 1, 2 "
                "HAVING count(*) > 1")
    con.execute("""CREATE OR REPLACE TEMP TABLE nth AS
        WITH o AS (
            SELECT pos, job_id_raw, cluster, start_s, state,
                CASE WHEN lag(pos) OVER w IS NULL THEN 1 WHEN lag(start_s) OVER w = start_s THEN 0
                     WHEN lag(state) OVER w = 'RESIZING' THEN 0 ELSE 1 END AS new_run
            FROM k SEMI JOIN multi USING (job_id_raw, cluster)
            WINDOW w AS (PARTITION BY job_id_raw, cluster ORDER BY start_s, pos)),
        r AS (
            SELECT pos, job_id_raw, cluster, state,
                (sum(new_run) OVER (PARTITION BY job_id_raw, cluster ORDER BY start_s, pos
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - 1)::INTEGER AS run
            FROM o)
        SELECT pos, run,
            run < max(run) OVER (PARTITION BY job_id_raw, cluster) AND state IS DISTINCT FROM 'RESIZING' AS requeued
        FROM r""")
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE runs AS
        SELECT {cols}, coalesce(n.run, 0)::INTEGER AS run, coalesce(n.requeued, false) AS requeued,
            n.run IS NULL AS lone
        FROM k LEFT JOIN nth n USING (pos)""")
    con.execute("DROP TABLE multi")
    con.execute("DROP TABLE nth")
    return no_end, tiers


def _epilog_keys(con, epilog: pd.DataFrame | None) -> None:
    """The table `ep` of per-run facts the epilog and the decision log give (job_id_raw, run): utilisation,
    last checkpoint, whether a preemption or a time limit was reported, as `metrics.compute` reads them."""
    cols = {"job_id_raw": "BIGINT", "run": "BIGINT", "util": "DOUBLE", "ck": "DOUBLE", "pre_rep": "BOOLEAN",
            "tl_rep": "BOOLEAN"}
    con.execute("CREATE OR REPLACE TEMP TABLE ep(" + ", ".join(f"{k} {v}" for k, v in cols.items()) + ")")
    if epilog is None or not len(epilog):
        return
    keys = pd.MultiIndex.from_frame(epilog[["job_id_raw", "run"]].astype(np.int64)).unique()
    out = pd.DataFrame(index=keys)
    ep = epilog.dropna(subset=["gpu_util_pct"]).drop_duplicates(["job_id_raw", "run"], keep="last")
    out["util"] = pd.Series(ep["gpu_util_pct"].to_numpy(dtype=float), index=pd.MultiIndex.from_arrays(
        [ep["job_id_raw"].to_numpy(np.int64), ep["run"].to_numpy(np.int64)])).reindex(keys)
    out["ck"] = np.nan
    if "last_checkpoint" in epilog.columns:
        ec = epilog.dropna(subset=["last_checkpoint"])
        if len(ec):
            cs = pd.Series(metrics._secs(ec["last_checkpoint"].to_numpy()).astype(float),
                           index=pd.MultiIndex.from_arrays([ec["job_id_raw"].to_numpy(np.int64),
                                                            ec["run"].to_numpy(np.int64)]))
            out["ck"] = cs.groupby(level=[0, 1]).max().reindex(keys)
    for col, name in (("preempted_reported", "pre_rep"), ("time_limit_reported", "tl_rep")):
        out[name] = False
        if col in epilog.columns:
            rep = epilog[epilog[col].astype(bool)]
            flagged = set(zip(rep["job_id_raw"].to_numpy().tolist(), rep["run"].to_numpy().tolist()))
            out[name] = [k in flagged for k in keys]
    frame = out.reset_index()
    frame.columns = list(cols)
    con.register("ep_frame", frame)
    con.execute("INSERT INTO ep SELECT * FROM ep_frame")


def compute(src: RunSource | pd.DataFrame, site, since: datetime, until: datetime, *,
            capacity: pd.DataFrame | None = None, events: pd.DataFrame | None = None,
            epilog: pd.DataFrame | None = None, top: int = 10, notes: list[str] | None = None,
            history: pd.DataFrame | None = None, fabric=None, bad_rows: list | None = None,
            zone=None) -> metrics.Report:
    """`metrics.compute` over a run source (cached day files and fresh runs, or a frame of runs)."""
    z = zone_mod.get(zone)
    con = _connect()
    src = register_source(con, src)
    lo = z.instant(since)
    hi = z.instant(until)
    no_end, tiers = _runs_table(con, site, until, lo, hi, z)
    run_notes: list[str] = []
    if no_end:
        run_notes.append(f"{no_end} finished run(s) have no End time in sacct; counted as 0 s")
    cpu_only = int(con.execute(f"""SELECT count(*) FROM jobs WHERE start IS NOT NULL AND NOT coalesce(gpus > 0, false)
        AND epoch(start)::BIGINT < {hi} AND coalesce(epoch("end")::BIGINT, {hi}) > {lo}""").fetchall()[0][0])
    if cpu_only:
        run_notes.append(metrics.cpu_only_note(cpu_only))

    if epilog is not None and len(epilog):
        from slurmtools.reports.runmatch import align_to_runs

        ids = pd.DataFrame({"job_id_raw": pd.unique(epilog["job_id_raw"].to_numpy(np.int64))})
        con.register("ep_ids", ids)
        mine = con.execute("SELECT job_id_raw, run, start_s, end_s FROM runs WHERE job_id_raw IN "
                           "(SELECT job_id_raw FROM ep_ids) ORDER BY job_id_raw, start_s, pos").df()
        epilog, moved = align_to_runs(epilog, mine)
        if moved:
            run_notes.append(f"{moved} epilog or decision-log record(s) placed on sacct's run by time: the run "
                             "number they carry differs")
    _epilog_keys(con, epilog)

    prices = {n: t.price_per_gpu_hour for n, t in (site.gpu_types.items() if site else [])}
    used_types = [r[0] for r in con.execute("SELECT DISTINCT gpu_type FROM runs").fetchall() if r[0] is not None]
    unknown_types = sorted(set(map(str, used_types)) - set(prices) - {""})
    con.execute("CREATE OR REPLACE TEMP TABLE price(gpu_type VARCHAR, p DOUBLE)")
    if prices:
        con.executemany("INSERT INTO price VALUES (?, ?)", list(prices.items()))
    nodes = ", ".join(_q(x) for x in metrics.NODE_FAILURE)
    # the daily usage of every loaded run: history for budgets and the forecast
    usage = _daily_usage(con, lo, hi, z)
    # every run of the window with its cost, utilisation (epilog, else Slurm's), idle hours and preemption facts:
    # a view (the joins are with small tables; a second copy of the runs would cost memory). DuckDB's
    # greatest/least skip NULLs: an unknown utilisation must stay unknown, hence the CASEs
    con.execute(f"""
        CREATE OR REPLACE TEMP VIEW w AS
        SELECT *, CASE WHEN util IS NULL THEN NULL ELSE gpu_hours * (1 - least(greatest(util, 0), 100) / 100.0) END
            AS idle
        FROM (SELECT r.*,
            greatest(least(r.end_s, {hi}) - greatest(r.start_s, {lo}), 0) * r.gpus / 3600.0 AS gpu_hours,
            greatest(least(r.end_s, {hi}) - greatest(r.start_s, {lo}), 0) * r.gpus / 3600.0 * coalesce(p.p, 0.0)
                AS cost,
            p.p IS NULL AS unpriced,
            CASE WHEN e.util IS NOT NULL THEN e.util WHEN isnan(r.gpu_util_slurm) THEN NULL
                 ELSE r.gpu_util_slurm END AS util,
            CASE WHEN e.util IS NOT NULL THEN 'epilog' WHEN r.gpu_util_slurm IS NOT NULL AND NOT isnan(r.gpu_util_slurm)
                 THEN 'slurm' ELSE '' END AS util_source,
            e.ck,
            ((r.state IN ('PREEMPTED', 'REQUEUED') OR (r.requeued AND NOT coalesce(r.state IN ({nodes}), false)))
              AND NOT coalesce(e.tl_rep, false)) OR coalesce(e.pre_rep, false) AS pre
        FROM runs r LEFT JOIN price p ON p.gpu_type = r.gpu_type::VARCHAR
        LEFT JOIN ep e ON e.job_id_raw = r.job_id_raw AND e.run = r.run
        WHERE {_IN_WINDOW.format(lo=lo, hi=hi)})""")
    # the whole-window figures in one pass
    # (no DISTINCT here: it would serialise the pass; jobs, users and accounts are counted apart)
    s = con.execute("""SELECT count(*), coalesce(sum(gpu_hours), 0),
        count(*) FILTER (WHERE lone), NULL, NULL, coalesce(sum(cost), 0),
        coalesce(sum(gpu_hours) FILTER (WHERE util IS NOT NULL), 0),
        coalesce(sum(idle) FILTER (WHERE util IS NOT NULL), 0),
        count(*) FILTER (WHERE state = 'FAILED' AND NOT pre),
        count(*) FILTER (WHERE gpu_mem_slurm_mb IS NOT NULL AND NOT isnan(gpu_mem_slurm_mb)),
        count(*) FILTER (WHERE energy_slurm_j IS NOT NULL AND NOT isnan(energy_slurm_j)),
        coalesce(sum(gpu_hours) FILTER (WHERE unpriced), 0) FROM w""").fetchall()[0]
    n_runs = int(s[0])
    # a job of one row is a job of its own: only the others (runs, rows per GPU type) need a DISTINCT
    jobs = int(s[2]) + int(con.execute("SELECT count(DISTINCT (job_id_raw, cluster)) FROM w WHERE NOT lone"
                                       ).fetchall()[0][0])
    if unknown_types and n_runs:
        run_notes.append(f"GPU type(s) without a price in the site file, left out of the cost: {', '.join(unknown_types)}")

    # what does not scale with the runs: metrics.compute on no runs, with this engine's daily usage as history
    hist = usage if history is None or not len(history) else pd.concat([history, usage], ignore_index=True)
    base = metrics.compute(empty_jobs(), site, since, until, capacity=capacity, events=events, top=top,
                           notes=[], history=hist, bad_rows=bad_rows, zone=zone)
    n_bad = len(base.bad_rows)
    notes = list(notes or []) + base.notes[:n_bad] + run_notes + base.notes[n_bad:]

    total_gh = float(s[1])
    cap_total = cap_avail = None
    if capacity is not None and len(capacity):
        cap_total = float(capacity["gpu_hours"].sum())
        cap_avail = float(capacity["available_gpu_hours"].sum())
    tables: dict[str, pd.DataFrame] = {}
    cap_by = {"cluster": None, "partition": None, "gpu_type": None}
    if capacity is not None and len(capacity):
        cap_by["gpu_type"] = capacity.groupby("gpu_type")["available_gpu_hours"].sum()
        parts = capacity.assign(partition=capacity["partitions"].str.split(",")).explode("partition")
        cap_by["partition"] = parts.groupby("partition")["available_gpu_hours"].sum()
        cap_by["cluster"] = pd.Series({site.cluster_name if site else "(none)": cap_avail})
    groups = _groups(con)
    for key in ("cluster", "partition", "gpu_type"):
        tables[f"by_{key}"] = _with_capacity(groups[key].drop(columns=["idle_gpu_hours"]), cap_by[key])
    for key in ("tier", "account", "user"):
        t = groups[key]
        idle = t.pop("idle_gpu_hours")
        t["share_of_capacity_pct"] = t["gpu_hours"] / cap_avail * 100 if cap_avail else np.nan
        t["share_of_use_pct"] = t["gpu_hours"] / total_gh * 100 if total_gh else np.nan
        t["idle_gpu_hours"] = idle
        tables[f"by_{key}"] = t.sort_values("gpu_hours", ascending=False)

    wait_by_tier, wait_by_size, wait_hist, wait_all = _waits(con, lo, hi)
    tables["wait_by_tier"], tables["wait_by_size"] = wait_by_tier, wait_by_size
    pre_tables, pre_sum = _preemption(con, src, lo, hi, top, z)
    tables.update(pre_tables)
    tables.update(_waste(con, src, top, has_mem=bool(s[9])))
    for k in ("budget", "demand_daily_by_tier", "forecast"):
        if k in base.tables:
            tables[k] = base.tables[k]
    timeline = _timeline(con, lo, hi, base.timeline, tiers, z)
    if fabric is not None:
        by_nl = con.execute("""SELECT nodelist::VARCHAR AS nodelist, tier::VARCHAR AS tier, count(*) AS n,
            sum(gpu_hours) AS gh FROM w WHERE tier IS NOT NULL GROUP BY ALL ORDER BY nodelist, tier""").df()
        if n_runs:
            tables.update(_placement(by_nl, fabric, capacity))
        per = by_nl.groupby("nodelist", sort=True)["gh"].sum()
        nv = metrics.nvlink_usage(pd.DataFrame({"row": np.arange(len(per)), "gpu_hours": per.to_numpy()}),
                                  pd.DataFrame({"nodelist": per.index.astype(str)}), fabric, capacity, lo, hi)
        if nv is not None:
            tables["usage_by_nvlink_domain"] = nv

    summary = dict(base.summary)
    summary.update({
        "runs": n_runs, "jobs": jobs, "users": len(groups["user"]), "accounts": len(groups["account"]),
        "gpu_hours": total_gh, "cost": float(s[5]), "unpriced_gpu_hours": float(s[11]),
        "utilization_pct": total_gh / cap_avail * 100 if cap_avail else None,
        "idle_capacity_gpu_hours": max(cap_avail - total_gh, 0.0) if cap_avail is not None else None,
        "preempted_runs": int(tables["preemption_by_tier"]["preempted_runs"].sum()),
        "requeued_runs": int(tables["preemption_by_tier"]["requeued_runs"].sum()),
        "gpu_hours_lost_to_preemption": float(tables["preemption_by_tier"]["gpu_hours_lost"].sum()),
        "lost_runs_with_checkpoint_time": pre_sum["known"],
        "gpu_hours_lost_is_upper_bound": pre_sum["bound"],
        "gpu_hours_with_utilization": float(s[6]), "idle_gpu_hours_allocated": float(s[7]),
        "median_wait_min": wait_all[0], "p90_wait_min": wait_all[1], "failed_runs": int(s[8]),
    })
    if "runs_energy_unknown" in base.summary:  # the old engine reports energy (issue 13): so does this one
        etables, esummary, enotes = _energy(con, src, epilog, site, top, n_runs, slurm=int(s[10]))
        tables.update(etables)
        summary.update(esummary)
        notes += enotes
    if "runs_energy_unknown" in base.summary and epilog is not None and "slack_windows" in epilog.columns:
        from slurmtools.reports.energy import windows_table

        con.register("ep_ids2", pd.DataFrame({"job_id_raw": pd.unique(epilog["job_id_raw"].to_numpy(np.int64))}))
        mine = {int(r[0]) for r in con.execute("SELECT DISTINCT job_id_raw FROM w WHERE job_id_raw IN "
                                               "(SELECT job_id_raw FROM ep_ids2)").fetchall()}
        windows = windows_table(epilog, mine, zone if zone is None else z)
        if windows is not None:
            tables["slack_windows"] = windows
    summary = {k: summary[k] for k in base.summary}  # the old engine's order
    con.close()
    return metrics.Report(since=since, until=until, site=base.site, cluster=base.cluster, currency=base.currency,
                          summary=summary, tables=tables, timeline=timeline, wait_hist=wait_hist,
                          forecasts=base.forecasts, notes=notes, uncharged_tiers=base.uncharged_tiers,
                          bad_rows=base.bad_rows, zone=z)


def _energy(con, src: RunSource, epilog: pd.DataFrame | None, site, top: int, n_runs: int, slurm: int
            ) -> tuple[dict, dict, list[str]]:
    """`energy.add_energy` for the window's runs. Without any energy figure (no epilog counter, no energy TRES:
    most sites) every run is unknown and no table is made, which needs no run in memory; otherwise the runs'
    few columns it reads are handed to it."""
    from slurmtools.reports.energy import add_energy

    cols = "job_id_raw, run, \"user\", account, tier, gpu_type, gpus, gpu_hours, start_s, end_s"
    ep_energy = epilog is not None and len(epilog) and "energy_mj" in epilog.columns and \
        epilog["energy_mj"].notna().any()
    if not ep_energy and not slurm:
        empty = con.execute(f"SELECT {cols}, 0 AS row FROM w LIMIT 0").df()
        tables, summary, notes = add_energy(empty, pd.DataFrame({"job_id": [], "energy_slurm_j": []}), epilog,
                                            site, top)
        summary["runs_energy_unknown"] = n_runs  # no figure for any run
        return tables, summary, notes
    r = con.execute(f"SELECT {cols}, energy_slurm_j, pos FROM w ORDER BY job_id_raw, start_s, pos").df()
    text = _text(src, r["pos"].to_numpy())
    runs = r.drop(columns=["energy_slurm_j", "pos"]).assign(row=np.arange(len(r)))
    jobs = pd.DataFrame({"job_id": text["job_id"].to_numpy(), "energy_slurm_j": r["energy_slurm_j"].to_numpy()})
    return add_energy(runs, jobs, epilog, site, top)


_GROUP_KEYS = ("cluster", "partition", "gpu_type", "tier", "account", "user")


def _groups(con) -> dict[str, pd.DataFrame]:
    """Runs, GPU-hours, cost and idle GPU-hours (NaN where no run's use is known) per value of each key, in one
    pass over the runs (GROUPING SETS)."""
    keys = ", ".join(f'"{k}"::VARCHAR AS "{k}"' for k in _GROUP_KEYS)
    sets = ", ".join(f'("{k}")' for k in _GROUP_KEYS)
    which = ", ".join(f'grouping("{k}") AS "g_{k}"' for k in _GROUP_KEYS)
    t = con.execute(f"""SELECT {keys}, {which}, count(*) AS runs, sum(gpu_hours) AS gpu_hours, sum(cost) AS cost,
        sum(idle) AS idle_gpu_hours FROM w GROUP BY GROUPING SETS ({sets})""").df()
    out = {}
    for k in _GROUP_KEYS:
        part = t[(t[f"g_{k}"] == 0) & t[k].notna()]
        g = pd.DataFrame({"runs": part["runs"].to_numpy(np.int64), "gpu_hours": part["gpu_hours"].to_numpy(float),
                          "cost": part["cost"].to_numpy(float),
                          "idle_gpu_hours": part["idle_gpu_hours"].to_numpy(float)},
                         index=pd.Index(part[k].to_numpy(dtype=object), name=k)).sort_index()
        out[k] = g
    return out


def _with_capacity(t: pd.DataFrame, cap: pd.Series | None) -> pd.DataFrame:
    """As `metrics.compute` joins a table with the capacity per key (outer: keys without runs show too)."""
    if cap is None:
        t["available_gpu_hours"] = np.nan
    else:
        t = t.join(cap.rename("available_gpu_hours"), how="outer").fillna({"runs": 0, "gpu_hours": 0.0, "cost": 0.0})
    t["utilization_pct"] = t["gpu_hours"] / t["available_gpu_hours"] * 100
    t["idle_gpu_hours"] = (t["available_gpu_hours"] - t["gpu_hours"]).clip(lower=0)
    return t


def _quantile(values: np.ndarray, counts: np.ndarray, q: float) -> float:
    """numpy's linear-interpolation quantile of `values` (sorted, distinct) each repeated `counts` times."""
    cum = np.cumsum(counts)
    pos = q * (cum[-1] - 1)
    k = int(np.floor(pos))
    lo = values[np.searchsorted(cum, k, side="right")]
    hi = values[np.searchsorted(cum, min(k + 1, cum[-1] - 1), side="right")]
    return float(lo + (hi - lo) * (pos - k))


def _waits(con, lo: int, hi: int):
    """Queue wait of the runs that started in the window: by tier, by GPUs per run, the histogram per tier, and
    the median and p90 over all of them. Waits are whole seconds, so one GROUP BY (tier, size, wait) gives every
    figure exactly: quantiles are read off the counts instead of sorting millions of waits three times."""
    size = "CASE " + " ".join(f"WHEN gpus BETWEEN {a} AND {b} THEN '{lab}'" for a, b, lab in metrics.SIZE_BINS) \
        + " ELSE '' END"
    g = con.execute(f"""SELECT tier::VARCHAR AS tier, {size} AS size,
        CASE WHEN ref_s IS NULL THEN NULL ELSE greatest(start_s - ref_s, 0) END AS wait_s, count(*) AS n
        FROM w WHERE start_s >= {lo} AND start_s < {hi} GROUP BY ALL""").df()
    n_all = int(g["n"].sum())
    g = g[g["wait_s"].notna()]
    g = g.assign(wait_min=g["wait_s"].to_numpy(dtype=float) / 60.0, n=g["n"].to_numpy(np.int64))

    def figures(part: pd.DataFrame) -> tuple[int, float, float, float]:
        by = part.groupby("wait_min", sort=True)["n"].sum()
        v, c = by.index.to_numpy(float), by.to_numpy(np.int64)
        return int(c.sum()), _quantile(v, c, 0.5), _quantile(v, c, 0.9), float((v * c).sum() / c.sum())

    def stats(key: str, order: list[str]) -> pd.DataFrame:
        part = g[g[key].notna()]
        rows = {k: figures(part[part[key] == k]) for k in order if (part[key] == k).any()}
        t = pd.DataFrame(list(rows.values()), index=pd.Index(list(rows), dtype=object, name=key),
                         columns=["runs", "median_wait_min", "p90_wait_min", "mean_wait_min"])
        t["runs"] = t["runs"].astype(np.int64)
        return t

    labels = [b[2] for b in metrics.SIZE_BINS]
    by_size = stats("size", labels)
    by_size.index = pd.CategoricalIndex(by_size.index, categories=labels, name="size")
    by_tier = stats("tier", sorted(g["tier"].dropna().unique()))
    if n_all:
        b = np.digitize(g["wait_min"].to_numpy(), metrics.WAIT_BINS_MIN[1:-1], right=False)
        h = g[g["tier"].notna()].assign(b=b[g["tier"].notna().to_numpy()]).groupby(["b", "tier"])["n"].sum()
        tiers = sorted(g["tier"].dropna().unique())
        hist = pd.DataFrame(0, index=pd.Index(metrics.WAIT_LABELS, name="wait_min"),
                            columns=pd.Index(tiers, name="tier"), dtype=np.int64)
        for (bi, tier), n in h.items():
            hist.loc[metrics.WAIT_LABELS[int(bi)], tier] = int(n)
    else:
        hist = pd.DataFrame(index=metrics.WAIT_LABELS)
    overall = figures(g) if len(g) else (0, None, None, None)
    return by_tier, by_size, hist, (overall[1], overall[2])


def _text(src: RunSource, pos: np.ndarray) -> pd.DataFrame:
    """job_id and name of the runs at `pos`: only the rows a table shows, read back from their own files (one
    scan of those files' two columns)."""
    import duckdb

    pos = np.asarray(pos, dtype=np.int64)
    out = pd.DataFrame({"job_id": np.full(len(pos), None, dtype=object), "name": np.full(len(pos), None, dtype=object)})
    fidx, row = pos // _FILE, pos % _FILE
    fresh = np.flatnonzero(fidx == len(src.files))
    if len(fresh):
        part = src.fresh.iloc[row[fresh]]
        out.loc[fresh, "job_id"], out.loc[fresh, "name"] = part["job_id"].to_numpy(), part["name"].to_numpy()
    cached = np.flatnonzero(fidx < len(src.files))
    if len(cached):
        used = sorted(set(fidx[cached].tolist()))
        files = [str(src.files[i]) for i in used]
        con = duckdb.connect()
        con.execute("SET enable_progress_bar=false")
        con.register("want", pd.DataFrame({"f": [files[used.index(i)] for i in fidx[cached]],
                                           "r": row[cached], "i": cached}))
        got = con.execute(f"""SELECT w.i, p.job_id, p.name FROM read_parquet({files!r}, filename=true,
            file_row_number=true) p JOIN want w ON w.f = p.filename AND w.r = p.file_row_number""").df()
        con.close()
        out.loc[got["i"].to_numpy(), "job_id"] = got["job_id"].to_numpy()
        out.loc[got["i"].to_numpy(), "name"] = got["name"].to_numpy()
    return out


def _preemption(con, src: RunSource, lo: int, hi: int, top: int, z=zone_mod.UTC) -> tuple[dict, dict]:
    """Preemption and requeue of the runs that ended in the window, and the runs with the most GPU-hours lost."""
    con.execute(f"""CREATE OR REPLACE TEMP VIEW ended AS
        SELECT *, pre OR requeued AS lostmask, (pre OR requeued) AND ck IS NOT NULL AS known,
            (pre OR requeued) AND ck IS NULL AS bound,
            CASE WHEN NOT (pre OR requeued) THEN 0.0 WHEN ck IS NULL THEN gpu_hours
                 ELSE greatest(least(end_s, {hi}) - greatest(least(greatest(ck, start_s), end_s), {lo}), 0)
                      * gpus / 3600.0 END AS lost
        FROM w WHERE end_s > {lo} AND end_s <= {hi}""")
    t = con.execute("""SELECT tier AS k, count(*) FILTER (WHERE pre) AS preempted_runs,
        count(*) FILTER (WHERE requeued) AS requeued_runs, sum(lost) AS gpu_hours_lost,
        count(*) FILTER (WHERE known) AS runs_with_checkpoint_time, bool_or(bound) AS upper_bound
        FROM ended WHERE tier IS NOT NULL GROUP BY 1 ORDER BY 1""").df().set_index("k")
    t.index = t.index.astype(object)
    t.index.name = "tier"
    for c in ("preempted_runs", "requeued_runs", "runs_with_checkpoint_time"):
        t[c] = t[c].astype(np.int64)
    t["upper_bound"] = t["upper_bound"].astype(bool)
    known, bound = con.execute("SELECT count(*) FILTER (WHERE known), coalesce(bool_or(bound), false) "
                               "FROM ended").fetchall()[0]
    lr = con.execute(f"""SELECT pos, run, tier, "user", state, requeued, gpus, start_s, end_s,
        CASE WHEN known THEN ck END AS ck, gpu_hours, lost, bound FROM ended WHERE lostmask
        ORDER BY lost DESC, job_id_raw, start_s, pos LIMIT {top * 5}""").df()
    text = _text(src, lr["pos"].to_numpy())
    runs = pd.DataFrame({
        "job_id": text["job_id"].astype(str).to_numpy(), "run": lr["run"].to_numpy(np.int32),
        "tier": lr["tier"].astype(str).to_numpy(), "user": lr["user"].astype(str).to_numpy(),
        "state": lr["state"].astype(str).to_numpy(), "requeued": lr["requeued"].to_numpy(bool),
        "gpus": lr["gpus"].to_numpy(np.int32),
        "start": pd.to_datetime(z.to_local(lr["start_s"].to_numpy(np.int64)), unit="s"),
        "end": pd.to_datetime(z.to_local(lr["end_s"].to_numpy(np.int64)), unit="s"),
        "last_checkpoint": metrics._local_or_nat(z, lr["ck"].to_numpy(dtype=float)),
        "gpu_hours": lr["gpu_hours"].to_numpy(float), "gpu_hours_lost": lr["lost"].to_numpy(float),
        "upper_bound": lr["bound"].to_numpy(bool)})
    return {"preemption_by_tier": t, "preempted_runs": runs}, {"known": int(known), "bound": bool(bound)}


def _waste(con, src: RunSource, top: int, has_mem: bool) -> dict:
    """The runs below the waste threshold with the most idle GPU-hours, and measured use per user."""
    thr = metrics.WASTE_UTIL_PCT
    w5 = con.execute(f"""SELECT pos, "user", account, tier, gpus, gpu_hours, util, idle, util_source,
        gpu_mem_slurm_mb FROM w WHERE util IS NOT NULL AND util < {thr}
        ORDER BY idle DESC, job_id_raw, start_s, pos LIMIT {top * 5}""").df()
    text = _text(src, w5["pos"].to_numpy())
    t = pd.DataFrame({
        "job_id": text["job_id"].astype(str).to_numpy(), "user": w5["user"].astype(str).to_numpy(),
        "account": w5["account"].astype(str).to_numpy(), "tier": w5["tier"].astype(str).to_numpy(),
        "name": text["name"].astype(str).to_numpy(), "gpus": w5["gpus"].to_numpy(np.int32),
        "gpu_hours": w5["gpu_hours"].to_numpy(float), "gpu_util_pct": w5["util"].to_numpy(float),
        "idle_gpu_hours": w5["idle"].to_numpy(float), "util_source": w5["util_source"].astype(str).to_numpy()})
    if has_mem:
        t["gpu_mem_used_mb"] = w5["gpu_mem_slurm_mb"].to_numpy(dtype=float)
    by_user = con.execute(f"""SELECT "user" AS k, sum(gpu_hours) AS gpu_hours_measured, sum(idle) AS idle_gpu_hours,
        count(*) FILTER (WHERE util < {thr}) AS runs_below_threshold FROM w WHERE util IS NOT NULL
        AND "user" IS NOT NULL GROUP BY 1 ORDER BY 1""").df()
    if len(by_user):
        eff = by_user.set_index("k")
        eff.index = eff.index.astype(object)
        eff.index.name = "user"
        eff["runs_below_threshold"] = eff["runs_below_threshold"].astype(np.int64)
        eff["mean_gpu_util_pct"] = (1 - eff["idle_gpu_hours"] / eff["gpu_hours_measured"]) * 100
        eff = eff.sort_values("idle_gpu_hours", ascending=False)
    else:
        eff = pd.DataFrame(columns=["gpu_hours_measured", "idle_gpu_hours", "runs_below_threshold",
                                    "mean_gpu_util_pct"])
    return {"top_waste_jobs": t, "waste_by_user": eff}


def _bucket_sums(con, rel: str, keys: tuple[str, ...], edges: list[int], z=zone_mod.UTC, first_local: int = 0,
                 step: int = 0) -> dict[tuple, list[float]]:
    """GPU-hours of the runs in `rel` (start_s, end_s, gpus, keys) in each bucket [edges[i], edges[i+1]) per
    value of `keys`. The edges are those of `z.grid(first_local, edges[-1], step)` (bucket k starts at local
    time first_local + k x step; an instant's bucket is read off `z.clock`). Exact, and without a row per run and
    bucket: the GPU-seconds before a time T are T x sum(g) - sum(g x start) over runs started before T, less the
    same over runs ended before T; both sums come from two GROUP BYs (by the bucket a run starts in, and ends
    in), in integers."""
    n = len(edges) - 1
    if n <= 0:
        return {}
    e0, en = int(edges[0]), int(edges[-1])
    if not step:  # edges evenly spaced but for the last, from the first
        step = int(edges[1]) - e0 if n > 1 else max(en - e0, 1)
        first_local = int(z.clock(np.array([e0]))[0])
    kcols = ", ".join(f'"{k}"::VARCHAR AS "{k}"' for k in keys)
    clip = f"greatest(least({{x}}, {en}), {e0})"
    s_, e_ = clip.format(x="start_s"), clip.format(x="end_s")

    def idx(x: str) -> str:
        return f"CASE WHEN {x} >= {en} THEN {n} ELSE ({z.sql_clock(x, e0, en)} - {first_local}) // {step} END"

    names = ", ".join(f'"{k}"' for k in keys)
    rows = con.execute(f"""
        WITH r AS (SELECT {kcols}, {s_} AS s, {e_} AS e, gpus::BIGINT AS g FROM (SELECT * FROM {rel})
                   WHERE {e_} > {s_})
        SELECT {names}, b, sum(g)::HUGEINT, sum(gx)::HUGEINT FROM (
            SELECT {names}, {idx("s")} AS b, g, g * s AS gx FROM r
            UNION ALL SELECT {names}, {idx("e")} AS b, -g, -g * e FROM r) GROUP BY ALL""").fetchall()
    acc: dict[tuple, list] = {}
    for *key, b, g, gx in rows:
        a = acc.setdefault(tuple(key), [[0] * (n + 2), [0] * (n + 2)])
        a[0][int(b) + 1] += int(g)
        a[1][int(b) + 1] += int(gx)
    out = {}
    for key, (g, gx) in acc.items():
        cg = cgx = 0
        before = []  # GPU-seconds before each edge
        for j in range(n + 1):
            cg += g[j]
            cgx += gx[j]
            before.append(int(edges[j]) * cg - cgx)
        out[key] = [(before[j + 1] - before[j]) / 3600.0 for j in range(n)]
    return out


def _daily_usage(con, lo: int, hi: int, z=zone_mod.UTC) -> pd.DataFrame:
    """`metrics.daily_usage` of every loaded run, from the day `metrics.compute` starts it at (local days)."""
    first = con.execute("SELECT min(start_s) FROM runs").fetchall()[0][0]
    if first is None:
        return pd.DataFrame({k: pd.Series(dtype=v) for k, v in metrics.USAGE_COLUMNS.items()})
    lo_l, hi_l = (int(x) for x in z.clock(np.array([lo, hi])))
    day0 = int(z.clock(np.array([int(first)]))[0]) // 86400 * 86400
    day0 = min(max(day0, hi_l - 400 * 86400), lo_l - lo_l % 86400)
    first_local = int(z.clock(np.array([int(z.instants(np.array([day0]))[0])]))[0])
    days, edges = z.grid(first_local, hi, 86400)
    if hi <= int(edges[0]):
        return pd.DataFrame({k: pd.Series(dtype=v) for k, v in metrics.USAGE_COLUMNS.items()})
    sums = _bucket_sums(con, "runs WHERE tier IS NOT NULL AND account IS NOT NULL", ("tier", "account"),
                        [int(e) for e in edges], z, first_local, 86400)
    rows = [(int(days[d]), tier, acct, v[d]) for (tier, acct), v in sums.items() for d in range(len(v)) if v[d] != 0]
    rows.sort()
    return pd.DataFrame({"day": pd.to_datetime(np.array([r[0] for r in rows], dtype=np.int64), unit="s")
                         .astype("datetime64[s]"),
                         "tier": np.array([r[1] for r in rows], dtype=object).astype(str),
                         "account": np.array([r[2] for r in rows], dtype=object).astype(str),
                         "gpu_hours": np.array([r[3] for r in rows], dtype=float)})


def _timeline(con, lo: int, hi: int, base: pd.DataFrame, tiers: list[str], z=zone_mod.UTC) -> pd.DataFrame:
    """GPU-hours per bucket and tier (every tier the loaded jobs name, as the old engine's categories do), with
    the capacity column `metrics.compute` computed (over the same buckets: `metrics.timeline_grid`)."""
    if not int(con.execute("SELECT count(*) FROM w").fetchall()[0][0]):
        return base
    starts, edges, keep, bsec = metrics.timeline_grid(z, lo, hi)
    first_local = int(starts[0]) if len(starts) else 0
    sums = _bucket_sums(con, f"runs WHERE tier IS NOT NULL AND ({_IN_WINDOW.format(lo=lo, hi=hi)})", ("tier",),
                        [int(e) for e in edges], z, first_local, bsec)
    at = np.flatnonzero(keep)
    out = pd.DataFrame({t: np.asarray(sums.get((t,), [0.0] * len(keep)))[at] for t in tiers}, index=base.index,
                       dtype=float)
    for c in base.columns:
        out[c] = base[c]
    out.index.name = base.index.name
    return out


def _placement(by_nl: pd.DataFrame, fabric, capacity: pd.DataFrame | None) -> dict:
    """`metrics.placement` over runs grouped by NodeList and tier: the GPU-hours per leaf are `metrics.placement`'s
    own over one row per NodeList; the runs spanning more leaves than needed are counted per group here (the
    leaf arithmetic once per NodeList)."""
    per = by_nl.groupby("nodelist", sort=True)["gh"].sum()
    leaves = metrics.placement(pd.DataFrame({"row": np.arange(len(per)), "gpu_hours": per.to_numpy(),
                                             "tier": "-"}),
                               pd.DataFrame({"nodelist": per.index.astype(str)}), fabric, capacity)
    leaf_of = {h: leaf.name for leaf in fabric.leaves.values() for h in leaf.hosts}
    biggest = max((len(leaf.hosts) for leaf in fabric.leaves.values()), default=1)
    rows = []
    shape_of: dict[str, tuple[int, bool]] = {}
    for nl, tier, n, gh in by_nl.itertuples(index=False):
        nl = str(nl)
        if nl not in shape_of:
            sh = metrics._leaf_share(nl, leaf_of)
            nhosts = metrics._hosts(nl) if sh else 0
            shape_of[nl] = (nhosts, (len(sh) > max(1, -(-nhosts // biggest))) and nhosts > 1)
        nhosts, spread = shape_of[nl]
        rows.append((str(tier), int(n) if nhosts > 1 else 0, int(n) if spread else 0, gh if spread else 0.0))
    t = pd.DataFrame(rows, columns=["tier", "multi", "spread", "gh"])
    g = t.groupby("tier")
    return {"placement_by_tier": pd.DataFrame({"multi_node_runs": g["multi"].sum(),
                                               "runs_on_more_leaves_than_needed": g["spread"].sum(),
                                               "their_gpu_hours": g["gh"].sum()}),
            "usage_by_leaf": leaves["usage_by_leaf"]}


def usage_by_end_day(jobs: pd.DataFrame, zone=None) -> dict:
    """For the day cache: per day D, `metrics.daily_usage` of the runs that ended on D (as `metrics.prepare`
    reads them without a site), from the first day any of them started to the end of D; for all days at once.
    Days are local days of `zone` (None: UTC), the runs' times instants."""
    z = zone_mod.get(zone)
    con = _connect()
    con.register("f", pd.DataFrame({"start": jobs["start"], "end": jobs["end"], "gpus": jobs["gpus"],
                                    "qos": jobs["qos"].astype(object), "account": jobs["account"].astype(object)}))
    local, bounds, join = "{x}", "d AS d_lo, d + 86400 AS d_hi", ""
    if not z.is_utc:
        # a local day's real start and end: a small table of the days the runs span (23, 24 or 25 hours each)
        lo, hi = con.execute('SELECT min(epoch(start))::BIGINT, max(epoch("end"))::BIGINT FROM f WHERE gpus > 0 '
                             'AND start IS NOT NULL AND "end" IS NOT NULL AND "end" > start').fetchall()[0]
        lo, hi = (int(lo), int(hi)) if lo is not None else (0, 0)
        clock = z.clock(np.array([lo, hi]))
        days = np.arange(int(clock[0]) // 86400 * 86400, int(clock[1]) // 86400 * 86400 + 86400 + 1, 86400,
                         dtype=np.int64)
        inst = z.instants(days)
        con.register("days", pd.DataFrame({"d": days[:-1], "d_lo": inst[:-1], "d_hi": inst[1:]}))
        local = z.sql_clock("{x}", lo, hi)
        bounds, join = "days.d_lo, days.d_hi", "JOIN days USING (d)"

    def loc(x: str) -> str:  # `zone.clock`: local seconds that never run back
        return local.replace("{x}", x)
    u = con.execute(f"""
        WITH r AS (SELECT epoch(start)::BIGINT AS st, epoch("end")::BIGINT AS en, gpus,
                       CASE WHEN qos = '' THEN '(none)' ELSE qos END AS tier, account,
                       {loc('epoch("end")::BIGINT')} // 86400 * 86400 AS endday
                   FROM f WHERE gpus > 0 AND start IS NOT NULL AND "end" IS NOT NULL)
        SELECT endday, d AS day, tier, account,
            sum(greatest(least(en, d_hi) - greatest(st, d_lo), 0) * gpus) / 3600.0 AS gpu_hours
        FROM (SELECT *, {bounds} FROM (SELECT *, unnest(range({loc('st')} // 86400 * 86400, {loc('en')}, 86400))
              AS d FROM r WHERE en > st) {join})
        WHERE tier IS NOT NULL AND account IS NOT NULL
        GROUP BY ALL HAVING gpu_hours != 0 ORDER BY endday, day, tier, account""").df()
    con.close()
    out = {}
    for endday, g in u.groupby("endday", sort=True):
        out[pd.Timestamp(int(endday), unit="s").date()] = pd.DataFrame({
            "day": pd.to_datetime(g["day"].to_numpy(np.int64), unit="s").astype("datetime64[s]"),
            "tier": g["tier"].astype(str).to_numpy(), "account": g["account"].astype(str).to_numpy(),
            "gpu_hours": g["gpu_hours"].to_numpy(float)})
    return out
