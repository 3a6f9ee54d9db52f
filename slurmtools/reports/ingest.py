"""Gathering a report's inputs (the I/O side): job runs from a saved dump or the backend, through the day cache;
node capacity from the site's fabric or the backend; down time from sacctmgr event text; epilog GPU records.

Policy-free: what the numbers mean is decided in `metrics`.
"""

from __future__ import annotations

import sys
import time
from datetime import date, datetime, timedelta
from pathlib import Path

import pandas as pd

from slurmtools.errors import SlurmError
from slurmtools.reports import cache as cache_mod
from slurmtools.reports.sacct import REPORT_FIELDS, read_sacct


class Progress:
    """Stage lines on stderr when a terminal is attached; silent under cron (no TTY) or when quiet."""

    def __init__(self, enabled: bool | None = None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.t0 = time.perf_counter()

    def __call__(self, msg: str) -> None:
        if self.enabled:
            sys.stderr.write(f"[{time.perf_counter() - self.t0:6.1f}s] {msg}\n")
            sys.stderr.flush()

    def bar(self, done: int, total: int, unit: str = "MB") -> None:
        """A one-line bar redrawn in place (a dump read, by MB; days stored, by day); ends with a newline when
        complete."""
        if not self.enabled or total <= 0:
            return
        frac = min(done / total, 1.0)
        n = int(frac * 30)
        scale = 1e6 if unit == "MB" else 1
        sys.stderr.write(f"\r  [{'#' * n}{'.' * (30 - n)}] {frac * 100:5.1f}%  {done / scale:,.0f} of "
                         f"{total / scale:,.0f} {unit}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _day(ts) -> date:
    return pd.Timestamp(ts).date()


def load_jobs(since: datetime, until: datetime, *, history_since: datetime | None = None,
              sacct_file: str | Path | None = None, backend=None, cache_dir: str | Path | None = None,
              now: datetime | None = None, progress: Progress | None = None, bad_rows: list | None = None,
              lazy: bool = False, cluster: str | None = None, zone=None, needs: tuple = ()
              ) -> tuple[pd.DataFrame, pd.DataFrame | None, list[str], dict]:
    """(runs, history, notes, timings): every run active in [since, until) and whatever else the sources held;
    `history` is the cached daily usage of runs that ended in [history_since, since) and are not among the runs.
    The rows of the fetched dump that were skipped as bad are appended to `bad_rows` (`badrows.BadRows`).
    `cluster`: the site's, kept of a dump holding several clusters (`sacct.read_sacct`); `needs`: fields a saved
    dump must have beyond the reader's own (`sacct.read_sacct`).

    With a cache, only the days not cached yet are fetched (a --sacct-file is trusted to cover the window asked
    for), and the finished days of what was fetched are stored. With `lazy`, the runs come back as a
    `columnar.RunSource` (the cached day files, not read, and the fresh runs) for the DuckDB engine.

    `zone` (`reports.zone.Zone`): the zone sacct printed its times in and the window's; the runs' times come back
    as UTC instants and the cache's days are its local days. Without it, times stay as written (UTC)."""
    from slurmtools.reports.zone import get

    z = get(zone)
    progress = progress or Progress(False)
    notes: list[str] = []
    timings: dict[str, float] = {}
    now = now or datetime.now()
    hist_from = min(pd.Timestamp(history_since or since), pd.Timestamp(since))
    c = cache_mod.DayCache(cache_dir, z) if cache_dir else None
    since_day, hist_day = _day(since), _day(hist_from)
    cached = pd.DataFrame()
    cached_files: list[Path] = []
    history = None
    fetch_from = hist_from
    if c is not None:
        have = set(c.days())
        d = hist_day
        while d in have and pd.Timestamp(d) < pd.Timestamp(until):
            d += timedelta(days=1)
        if have and max(have) >= since_day:
            # runs that ended on or after the window's first day: every one of them may overlap the window
            t = time.perf_counter()
            if lazy:
                cached_files = [c.path(x) for x in sorted(have) if since_day <= x]
            else:
                cached = c.load(since_day, max(have))
            timings["cache_read_s"] = time.perf_counter() - t
        if d > hist_day:
            fetch_from = pd.Timestamp(d)
            t = time.perf_counter()
            history = c.load_usage(hist_day, min(since_day, d) - timedelta(days=1))
            timings["cache_read_s"] = timings.get("cache_read_s", 0.0) + time.perf_counter() - t
            runs_from = f"{len(cached):,} runs" if not lazy else f"{len(cached_files):,} day file(s) of runs"
            progress(f"cache: {runs_from} and {len(history):,} usage rows from {len(_range(hist_day, d))} day(s)")
    if fetch_from >= pd.Timestamp(until):
        # every day is cached, but runs still going at `until` are never cached: ask for the last second
        fetch_from = pd.Timestamp(until) - pd.Timedelta(seconds=1)
    t = time.perf_counter()
    if sacct_file is not None:
        progress(f"reading {sacct_file}")
        acc = read_sacct(sacct_file, on_block=progress.bar, cluster=cluster, zone=zone, needs=needs)
    elif backend is not None:
        dump = getattr(backend, "accounting_dump", None)
        if dump is None:
            raise SlurmError("sacct", "this backend cannot dump accounting text; use --sacct-file PATH")
        progress(f"sacct {fetch_from} .. {pd.Timestamp(until)}")
        acc = read_sacct(dump(fetch_from.to_pydatetime(), pd.Timestamp(until).to_pydatetime(),
                              list(REPORT_FIELDS)), text=True, source="sacct", on_block=progress.bar,
                         cluster=cluster, zone=zone)
    else:
        raise SlurmError("sacct", "no accounting source: give --sacct-file PATH or run where sacct works")
    timings["parse_s"] = time.perf_counter() - t
    notes += acc.notes
    if bad_rows is not None and acc.bad is not None:
        bad_rows.append(acc.bad)
    progress(f"parsed {len(acc.jobs):,} job runs and {acc.steps:,} steps")
    fresh = acc.jobs
    if c is not None and len(fresh):
        if len(cached) or cached_files or history is not None:
            # runs that ended before the fetched window are in the cache already (as runs or as usage)
            ended_before = fresh["end"].notna() & (fresh["end"] < z.utc(fetch_from))
            fresh = fresh[~ended_before.to_numpy()].reset_index(drop=True)
        # the fetched data covers [fetch_from, until): store its whole days that are over
        src_first = _day(fetch_from) if fetch_from == fetch_from.normalize() else _day(fetch_from) + timedelta(days=1)
        if sacct_file is not None:
            # a saved dump may start later than the window asked for: never mark days before its data as final
            ends = fresh["end"].dropna()
            src_first = max(src_first, _day(z.local(ends.min())) if len(ends) else _day(until))
        last_final = min(_day(until) - timedelta(days=1), _day(now) - timedelta(days=1))
        if src_first <= last_final:
            t = time.perf_counter()
            written = c.store(fresh, src_first, last_final, on_day=progress.bar)
            timings["cache_write_s"] = time.perf_counter() - t
            progress(f"cache: stored {len(written)} finished day(s)")
            if lazy and written:
                # the runs just stored are read back from their day files, like the days cached before
                end_day = cache_mod.end_days(fresh["end"], z)
                first_d, last_d = (pd.Timestamp(d).value // 10**9 // 86400 for d in (written[0], written[-1]))
                stored = fresh["end"].notna().to_numpy() & (end_day >= first_d) & (end_day <= last_d)
                fresh = fresh[~stored].reset_index(drop=True)
                cached_files = sorted(set(cached_files) | {c.path(d) for d in written})
    t = time.perf_counter()
    if lazy:
        from slurmtools.reports.columnar import RunSource

        return RunSource(files=cached_files, fresh=fresh), history, notes, timings
    jobs = cache_mod.merge(cached, fresh) if len(cached) else fresh
    timings["merge_s"] = time.perf_counter() - t
    return jobs, history, notes, timings


def _range(a: date, b: date) -> list[date]:
    out = []
    while a < b:
        out.append(a)
        a += timedelta(days=1)
    return out


def gpu_runs_by_nodelist(jobs, gpus_only: bool = True) -> dict[str, int]:
    """NodeList -> how many runs that held GPUs ran there (every run that started, without `gpus_only`), of a
    frame of runs or a `columnar.RunSource` (counted by DuckDB over its day files, as that engine counts runs)."""
    if not isinstance(jobs, pd.DataFrame):
        from slurmtools.reports.columnar import gpu_runs_by_nodelist as over_files

        return over_files(jobs, gpus_only)
    if not len(jobs) or "nodelist" not in jobs.columns or "gpus" not in jobs.columns:
        return {}
    keep = (jobs["gpus"] > 0) if gpus_only else jobs["start"].notna()
    return {str(k): int(n) for k, n in jobs.loc[keep, "nodelist"].value_counts(dropna=True).items()}


def first_job(jobs: pd.DataFrame, history: pd.DataFrame | None = None, zone=None) -> pd.Timestamp | None:
    """The earliest sign of a job in what was loaded: a run's submit or start time, or the first cached day (the
    start of that local day of `zone`); an instant."""
    from slurmtools.reports.zone import get

    times = []
    for c in ("submit", "start"):
        if c in jobs.columns and jobs[c].notna().any():
            times.append(pd.Timestamp(jobs[c].min()))
    if history is not None and len(history):
        times.append(get(zone).utc(history["day"].min()))
    return min(times) if times else None


def load_capacity(site, since: datetime, until: datetime, *, backend=None, events_text: str | None = None,
                  events_source: str = "sacctmgr show event", first_job: datetime | None = None,
                  bad_rows: list | None = None, zone=None
                  ) -> tuple[pd.DataFrame | None, pd.DataFrame | None, list[str]]:
    """(capacity table, node events, notes). Capacity counts from the cluster's first record (its first
    accounting event, or `first_job` (an instant), whichever is earlier) when that is inside the window, never
    before. Event rows skipped as bad are appended to `bad_rows` (without it, a bad row raises a ParseError).
    `zone`: the window's and sacctmgr's zone; the events' times come back as UTC instants. Of an event dump with a
    Cluster column only the site's cluster's rows count (`site.cluster_name`)."""
    from slurmtools.reports.capacity import (capacity_table, counted_from, first_event, nodes_from_backend,
                                             nodes_from_site, parse_events, read_events)
    from slurmtools.reports.zone import get

    cluster = getattr(site, "cluster_name", None)
    notes = []
    nodes = None
    if site is not None and site.fabric_path is not None:
        from slurmtools.topology.sitefile import load_fabric

        nodes = nodes_from_site(site, load_fabric(site.fabric_path))
    elif backend is not None:
        try:
            nodes = nodes_from_backend(backend.nodes())
        except SlurmError as exc:
            notes.append(f"capacity unknown (sinfo failed: {exc})")
    else:
        notes.append("capacity unknown: the site has no fabric file and no Slurm is reachable")
    events = None
    if events_text is None and backend is not None and hasattr(backend, "events_dump"):
        try:
            events_text, events_source = backend.events_dump(since, until), "sacctmgr show event"
        except SlurmError as exc:
            notes.append(f"node down/drain time not subtracted (sacctmgr failed: {exc})")
    elif events_text is None:
        notes.append("node down/drain time not subtracted (no sacctmgr event data; see --events-file)")
    first_ev = None
    if events_text is not None:
        if bad_rows is None:
            events = read_events(events_text, events_source, zone, cluster)
            first_ev = first_event(events_text, events_source, zone, cluster)
        else:
            events, first_ev, ebad = parse_events(events_text, events_source, zone, cluster, notes)
            bad_rows.append(ebad)
    start = counted_from(since, first_ev, first_job, zone=zone)
    if nodes and start is not None:
        from slurmtools.reports.metrics import CAPACITY_NOTE

        shown = start if zone is None else get(zone).local(start)
        notes.append(f"{CAPACITY_NOTE} {shown} (the cluster's first record: "
                     f"{'its first accounting event' if first_ev is not None and start == first_ev else 'its first job'}"
                     f"), not from the window's start {pd.Timestamp(since)}")
    cap = capacity_table(nodes, events, since, until, start=start, zone=zone) if nodes else None
    return cap, events, notes


def load_epilog(path: str | Path | None, decisions: str | Path | None = None, bad_rows: list | None = None,
                cluster: str | None = None, zone=None) -> tuple[pd.DataFrame | None, list[str]]:
    """The epilog's records under `path`, with last-checkpoint times from the decision log `decisions` (default:
    `decisions.jsonl` in `path` or, for the spool's `jobs/` folder, beside it). Records skipped as bad (epilog
    files, decision-log lines) are appended to `bad_rows`; with `cluster` (the site's cluster_name), so is a record
    of another cluster (job ids are per cluster). `zone`: the report's; the records' times come back as UTC
    instants."""
    from slurmtools.audit import LOG_NAME
    from slurmtools.reports.badrows import BadRows
    from slurmtools.reports.epilog import add_checkpoints, checkpoints_from_decisions, read_epilog_dir

    if path is None:
        return None, []
    rec = read_epilog_dir(path, cluster, zone)
    problems = list(rec.problems)
    if bad_rows is not None and rec.bad is not None and rec.files:
        bad_rows.append(rec.bad)
        problems = []  # each is listed in bad_rows.csv, and counted in a note of its own
    if decisions is None:
        here = [Path(path) / LOG_NAME, Path(path).parent / LOG_NAME]
        decisions = next((p for p in here if p.is_file()), None)
    frame = rec.frame
    if decisions is not None:
        dbad = BadRows(str(decisions), "records") if bad_rows is not None else None
        ck, cp = checkpoints_from_decisions(decisions, dbad, zone)
        if dbad is not None:
            bad_rows.append(dbad)  # each bad line is listed in bad_rows.csv
        problems += cp
        frame = add_checkpoints(frame, ck)
    notes = problems[:5]
    if len(problems) > 5:
        notes.append(f"... and {len(problems) - 5} more unreadable epilog record(s)")
    return frame, notes
