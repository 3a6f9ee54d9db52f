"""The incremental cache: per finished day, a Parquet file of the job runs that ended that day, and a small one
of their GPU-hours per day, tier and account (`metrics.daily_usage`).

Why per end-day: a run that ended on day D can never change again, so once every run that ended on D has been
seen (the data covered all of D, and D is over) the day is final and a nightly report reads it back instead of
asking sacct or re-parsing a dump. Runs still going or pending are never cached; they always come fresh.
History (forecast, month-to-date budgets) reads only the small usage files, so a nightly report over one new day
does not reload a month of runs.
Files are written to a temporary name and renamed, so a crash leaves no half-written day.

Version 2: runs' times are UTC instants and a day is a local day of the report's zone (`reports.zone`), so the
files live under `v2/<zone>/`; version 1's files (local wall-clock times, UTC days) are never read again (a
cache of another zone neither: its days are other days).
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from slurmtools.reports.sacct import JOB_COLUMNS, empty_jobs

VERSION = 2


class DayCache:
    def __init__(self, root: str | Path, zone=None):
        from slurmtools.reports.zone import get

        self.root = Path(root)
        self.zone = get(zone)
        #: the folder of this version and zone (a zone's name as a folder name: `Europe/Berlin` -> `Europe_Berlin`)
        self.dir = self.root / f"v{VERSION}" / "".join(c if c.isalnum() or c in "+-." else "_"
                                                      for c in self.zone.name)

    def path(self, day: date) -> Path:
        return self.dir / f"{day:%Y-%m-%d}.parquet"

    def usage_path(self, day: date) -> Path:
        return self.dir / "usage" / f"{day:%Y-%m-%d}.parquet"

    def days(self) -> list[date]:
        d = self.dir
        if not d.is_dir():
            return []
        out = []
        for p in d.glob("*.parquet"):
            try:
                day = datetime.strptime(p.stem, "%Y-%m-%d").date()
                if self.usage_path(day).exists():
                    out.append(day)
            except ValueError:
                continue
        return sorted(out)

    def has(self, day: date) -> bool:
        return self.path(day).exists() and self.usage_path(day).exists()

    def load(self, first: date, last: date) -> pd.DataFrame:
        """Runs that ended on the cached days in [first, last]."""
        parts = [pd.read_parquet(self.path(d)) for d in self.days() if first <= d <= last]
        if not parts:
            return empty_jobs()
        return _typed(pd.concat(parts, ignore_index=True))

    def load_usage(self, first: date, last: date) -> pd.DataFrame:
        """Usage of the runs that ended on the cached days in [first, last]."""
        from slurmtools.reports.metrics import USAGE_COLUMNS

        parts = [pd.read_parquet(self.usage_path(d)) for d in self.days() if first <= d <= last
                 and self.usage_path(d).exists()]
        if not parts:
            return pd.DataFrame({k: pd.Series(dtype=v) for k, v in USAGE_COLUMNS.items()})
        u = pd.concat(parts, ignore_index=True)
        return u.groupby(["day", "tier", "account"], as_index=False)["gpu_hours"].sum().astype(USAGE_COLUMNS)

    def store(self, jobs: pd.DataFrame, first: date, last: date, on_day=None) -> list[date]:
        """Write the days in [first, last] from `jobs` (which must cover them entirely); return the days written.

        One stable sort by end day and one usage query for all days (`columnar.usage_by_end_day`): a year of
        runs is stored in one pass, not one pass over every run per day. `on_day(done, total, "days")` after
        each day, for a progress bar."""
        from slurmtools.reports.columnar import usage_by_end_day
        from slurmtools.reports.metrics import USAGE_COLUMNS

        self.path(first).parent.mkdir(parents=True, exist_ok=True)
        self.usage_path(first).parent.mkdir(parents=True, exist_ok=True)
        day = end_days(jobs["end"], self.zone)
        order = np.argsort(day, kind="stable")
        sorted_days = day[order]
        usage = usage_by_end_day(jobs, self.zone)
        empty_usage = pa.Table.from_pandas(pd.DataFrame({k: pd.Series(dtype=v) for k, v in USAGE_COLUMNS.items()}),
                                           preserve_index=False)
        # converted to arrow once and sliced per day: what `DataFrame.to_parquet` writes, without converting
        # every day's part on its own
        table = pa.Table.from_pandas(jobs.reset_index(drop=True), preserve_index=False)

        def write(d: date) -> date:
            k = np.datetime64(d, "D").astype(np.int64)
            a, b = np.searchsorted(sorted_days, [k, k + 1])
            p = self.path(d)
            tmp = p.with_suffix(f".tmp{os.getpid()}")
            pq.write_table(table.take(order[a:b]), tmp)
            up = self.usage_path(d)
            utmp = up.with_suffix(f".tmp{os.getpid()}")
            u = usage.get(d)
            pq.write_table(empty_usage if u is None else pa.Table.from_pandas(u, preserve_index=False), utmp)
            os.replace(utmp, up)
            os.replace(tmp, p)  # the runs file last: a day counts as cached once both exist
            return d

        # a few threads write days side by side (Parquet writing leaves the interpreter's lock; a year of small
        # day files is mostly per-file cost); days complete in order, each when its runs file appears
        total = (last - first).days + 1
        writers = max(1, min(4, os.cpu_count() or 1))
        written: list[date] = []
        pending: deque = deque()

        def done_one() -> None:
            written.append(pending.popleft().result())
            if on_day is not None:
                on_day(len(written), total, "days")

        with ThreadPoolExecutor(max_workers=writers) as pool:
            d = first
            while d <= last:
                pending.append(pool.submit(write, d))
                while len(pending) > 2 * writers:
                    done_one()
                d += timedelta(days=1)
            while pending:
                done_one()
        return written


def end_days(end, zone) -> np.ndarray:
    """The local day (days since 1970-01-01) each run ended on (`end`: UTC instants; an int64 minimum where
    there is none)."""
    end = np.asarray(end, dtype="datetime64[s]")
    done = ~np.isnat(end)
    local = zone.clock(np.where(done, end, np.datetime64(0, "s")).astype(np.int64))
    return np.where(done, local // 86400, np.iinfo(np.int64).min)


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    out = {}
    for c, t in JOB_COLUMNS.items():
        col = df[c] if c in df else pd.Series([None] * len(df))
        out[c] = col.astype(t) if t != "str" else col.astype("str")
    frame = pd.DataFrame(out)
    return frame


def merge(cached: pd.DataFrame, fresh: pd.DataFrame) -> pd.DataFrame:
    """Cached runs plus fresh ones; a run in both (same job, same start) is kept once, fresh winning."""
    if len(cached) == 0:
        return fresh
    if len(fresh) == 0:
        return cached
    both = pd.concat([cached, fresh], ignore_index=True)
    for c in ("user", "account", "partition", "qos", "state", "gpu_type", "cluster"):
        both[c] = both[c].astype("category")
    both = both.drop_duplicates(["job_id_raw", "start", "gpu_type"], keep="last")
    order = np.lexsort((both["start"].to_numpy(), both["job_id_raw"].to_numpy()))
    return both.iloc[order].reset_index(drop=True)
