"""The differential test: the DuckDB engine (`columnar.compute`) gives the report `metrics.compute` gives, on every
sacct dump under tests/data/reports, the hand-made dump (with capacity, node events, the fabric, epilog records
and decision-log flags), generated dumps with steps, arrays, preemptions and runs still going, and over the day
cache (cached days plus fresh runs) as the report reads it. `reports_equal` is the judge: every summary figure,
note and table."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reports_handmade as hm
from reports_equal import assert_reports_equal
from slurmtools.reports import cache as cache_mod
from slurmtools.reports import capacity, columnar, ingest, metrics, synth
from slurmtools.reports.sacct import read_sacct
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric

DATA = Path(__file__).resolve().parents[2] / "data" / "reports"
#: dumps the reader refuses as a whole (a two-character delimiter; sacct's fixed-width text): no report to compare
REFUSED = {"sacct-lab-22.05.8-P-2char.txt", "sacct-lab-22.05.8-formatted.txt"}
SACCT_DUMPS = sorted(p.name for p in DATA.glob("sacct-*.txt") if p.name not in REFUSED)
SINCE, UNTIL = datetime.fromisoformat(hm.SINCE), datetime.fromisoformat(hm.UNTIL)


@pytest.fixture(scope="module")
def site():
    return load_site(None)


@pytest.fixture(scope="module")
def fabric(site):
    return load_fabric(site.fabric_path)


def both(jobs, site, since, until, **kw):
    """The report of each engine over the same inputs, checked equal; returns the new engine's."""
    old = metrics.compute(jobs if isinstance(jobs, pd.DataFrame) else _merged(jobs), site, since, until, **kw)
    new = columnar.compute(jobs, site, since, until, **kw)
    assert_reports_equal(old, new)
    return new


def _merged(src: columnar.RunSource) -> pd.DataFrame:
    """What `ingest.load_jobs` hands the old engine for the same source."""
    cached = pd.concat([pd.read_parquet(p) for p in src.files], ignore_index=True) if src.files else \
        cache_mod.empty_jobs()
    cached = cache_mod._typed(cached) if len(cached) else cached
    return cache_mod.merge(cached, src.fresh) if len(cached) else src.fresh


def _cap(site, since, until, events=None):
    return capacity.capacity_table(capacity.nodes_from_site(site, load_fabric(site.fabric_path)), events, since,
                                   until)


def test_the_refused_dumps_are_refused():
    from slurmtools.errors import ParseError

    for name in REFUSED:
        with pytest.raises(ParseError):
            read_sacct(DATA / name)


@pytest.mark.parametrize("name", SACCT_DUMPS)
def test_every_sacct_dump_in_the_test_data(name, site, fabric):
    acc = read_sacct(DATA / name)
    jobs = acc.jobs
    start, end = jobs["start"].min(), jobs["end"].max()
    assert pd.notna(start), f"{name}: no run with a start"
    since = pd.Timestamp(start).floor("h").to_pydatetime()
    until = (pd.Timestamp(end if pd.notna(end) else start) + pd.Timedelta(hours=1)).ceil("h").to_pydatetime()
    r = both(jobs, site, since, until, capacity=_cap(site, since, until), notes=acc.notes, fabric=fabric)
    assert r.summary["runs"] > 0


def test_hand_made_dump_with_capacity_events_and_fabric(site, fabric):
    acc = read_sacct(hm.TEXT, text=True)
    events = capacity.read_events(hm.EVENTS)
    r = both(acc.jobs, site, SINCE, UNTIL, capacity=_cap(site, SINCE, UNTIL, events), events=events,
             notes=acc.notes, fabric=fabric)
    assert r.summary["gpu_hours"] == pytest.approx(203.5)  # the worked-out total (reports_handmade.py)
    assert r.summary["runs"] == 9 and r.summary["jobs"] == 8


def test_hand_made_dump_with_epilog_records_and_decision_log_flags(site):
    acc = read_sacct(hm.TEXT, text=True)
    t = pd.Timestamp
    ep = pd.DataFrame({
        "job_id_raw": [101, 102, 102, 110], "run": [0, 0, 1, 0], "gpus": [8, 4, 4, 1], "nodes": [1, 1, 1, 1],
        "gpu_util_pct": [10.0, 50.0, np.nan, 20.0], "gpu_mem_mb": [np.nan] * 4,
        "start": [t(D) for D in ("2026-11-02T01:30", "2026-11-02T02:10", "2026-11-02T05:20", "2026-11-02T12:00")],
        "end": [t(D) for D in ("2026-11-02T07:30", "2026-11-02T05:10", "2026-11-02T07:20", "2026-11-02T13:00")],
        "last_checkpoint": [pd.NaT, t("2026-11-02T04:40"), pd.NaT, pd.NaT],
        "preempted_reported": [False, True, False, False], "time_limit_reported": [False, False, False, True]})
    r = both(acc.jobs, site, SINCE, UNTIL, epilog=ep)
    assert r.tables["preemption_by_tier"].loc["standard", "gpu_hours_lost"] == pytest.approx(4 * 0.5)  # since 04:40
    # 101, 102 run 0 and 110 from the epilog; 102 run 1 has no utilisation anywhere
    assert r.summary["gpu_hours_with_utilization"] == pytest.approx(48 + 12 + 1)


def test_windows_that_cut_runs_and_a_window_without_runs(site):
    jobs = read_sacct(hm.TEXT, text=True).jobs
    for since, until in ((datetime(2026, 11, 2, 3), datetime(2026, 11, 2, 6)),  # runs cut at both ends
                         (datetime(2026, 11, 1), datetime(2026, 11, 30)),  # a month: day buckets
                         (datetime(2025, 1, 1), datetime(2025, 1, 2))):  # nothing ran
        both(jobs, site, since, until, capacity=_cap(site, since, until))


def _synth(n, days, seed, start=datetime(2026, 10, 1), **kw):
    text = synth.generate(n, start, days, seed=seed, nodes=16, node_fmt="gpu{:02d}", arrays=0.3,
                          account_names=["vision", "nlp", "students"], **kw)
    return read_sacct(text, text=True)


def test_generated_month_with_steps_arrays_preemptions_and_running_jobs(site, fabric):
    acc = _synth(4000, 30, seed=11, now=datetime(2026, 10, 29))
    jobs = acc.jobs
    assert (jobs["job_id"].str.contains("_")).any() and (jobs["state"] == "RUNNING").any()
    assert jobs["job_id_raw"].duplicated().any()  # preempted jobs ran again
    since, until = datetime(2026, 10, 3), datetime(2026, 10, 29)
    r = both(jobs, site, since, until, capacity=_cap(site, since, until), history=None, fabric=fabric,
             notes=acc.notes)
    assert r.summary["preempted_runs"] > 0 and r.summary["requeued_runs"] > 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 400), offset_h=st.integers(-48, 24 * 9),
       span_h=st.integers(1, 24 * 12))
def test_generated_dumps_any_window(site, seed, n, offset_h, span_h):
    acc = _synth(n, 7, seed=seed)
    since = datetime(2026, 10, 1) + timedelta(hours=offset_h)
    until = since + timedelta(hours=span_h)
    both(acc.jobs, site, since, until, capacity=_cap(site, since, until))


def _cached_source(tmp_path, jobs, first: date, last: date, fresh_from) -> columnar.RunSource:
    """The day cache written by `DayCache.store`, and the fresh runs `ingest.load_jobs` would keep."""
    c = cache_mod.DayCache(tmp_path / "cache")
    c.store(jobs, first, last)
    files = [c.path(d) for d in c.days() if first <= d <= last]
    fresh = jobs[~(jobs["end"].notna() & (jobs["end"] < pd.Timestamp(fresh_from))).to_numpy()].reset_index(drop=True)
    return columnar.RunSource(files=files, fresh=fresh)


def test_cached_days_plus_fresh_runs(tmp_path, site, fabric):
    acc = _synth(3000, 20, seed=5, now=datetime(2026, 10, 21))
    src = _cached_source(tmp_path, acc.jobs, date(2026, 10, 1), date(2026, 10, 18), datetime(2026, 10, 19))
    assert src.files and len(src.fresh)
    since, until = datetime(2026, 10, 5), datetime(2026, 10, 21)
    r = both(src, site, since, until, capacity=_cap(site, since, until), fabric=fabric)
    assert r.summary["runs"] > 1000
    # the same source through the report's own path: first job and history from the cache
    assert columnar.first_job(src) == ingest.first_job(_merged(src))
    # the runs per NodeList (the report's check of hosts outside its capacity) alike over the files and the frame,
    # a run both cached and fresh once
    assert ingest.gpu_runs_by_nodelist(src) == ingest.gpu_runs_by_nodelist(_merged(src))
    assert sum(ingest.gpu_runs_by_nodelist(src).values()) == int((_merged(src)["gpus"] > 0).sum())
    # every day cached, nothing fresh: the old engine gets the cached days in file order, unsorted
    only = columnar.RunSource(files=src.files)
    both(only, site, since, datetime(2026, 10, 19), capacity=_cap(site, since, datetime(2026, 10, 19)))


def test_load_jobs_lazy_gives_the_cached_days_as_files(tmp_path):
    p = tmp_path / "d.txt"
    synth.write(p, 2000, datetime(2026, 10, 1), 10, seed=3, nodes=16, node_fmt="gpu{:02d}")
    cache = tmp_path / "c"
    since, until, now = datetime(2026, 10, 1), datetime(2026, 10, 11), datetime(2026, 10, 12)
    eager, *_ = ingest.load_jobs(since, until, sacct_file=p, cache_dir=cache, now=now)
    lazy, hist, _, _ = ingest.load_jobs(since, until, sacct_file=p, cache_dir=cache, now=now, lazy=True)
    assert isinstance(lazy, columnar.RunSource) and len(lazy.files) == 10  # every day of the dump is over
    assert len(lazy) == len(eager)
    site = load_site(None)
    old = metrics.compute(eager, site, since, until, history=hist)
    again, *_ = ingest.load_jobs(since, until, sacct_file=p, cache_dir=cache, now=now)
    assert_reports_equal(old, metrics.compute(again, site, since, until, history=hist))
    assert_reports_equal(old, columnar.compute(lazy, site, since, until, history=hist))
    # read into pandas (what the report does below columnar.LARGE_RUNS runs), the same runs as without lazy
    assert_reports_equal(old, metrics.compute(lazy.frame(), site, since, until, history=hist))


def test_engine_for_picks_by_the_number_of_runs(tmp_path, monkeypatch):
    src = columnar.RunSource(fresh=_synth(300, 2, seed=2).jobs)
    compute, first, runs = columnar.engine_for(src)
    assert compute is metrics.compute and first is ingest.first_job and isinstance(runs, pd.DataFrame)
    monkeypatch.setattr(columnar, "LARGE_RUNS", len(src))
    compute, first, runs = columnar.engine_for(src)
    assert compute is columnar.compute and first is columnar.first_job and runs is src


def test_cache_usage_per_end_day_equals_daily_usage_of_each_day():
    """The day cache's usage files, all days in one query, hold what `metrics.daily_usage` gives day by day."""
    from reports_equal import assert_tables_equal

    jobs = _synth(3000, 12, seed=9, now=datetime(2026, 10, 12)).jobs
    got = columnar.usage_by_end_day(jobs)
    days = sorted(pd.Series(jobs["end"].dropna().dt.floor("D").unique()).dt.date)
    assert len(days) >= 11 and set(got) <= set(days)
    for d in days:
        part = jobs[jobs["end"].notna() & (jobs["end"].dt.floor("D") == pd.Timestamp(d))]
        runs = metrics.prepare(part, None, pd.Timestamp(d) + pd.Timedelta(days=1), [])
        lo = int(pd.Timestamp(pd.to_datetime(int(runs["start_s"].min()), unit="s")).floor("D").value // 10**9)
        want = metrics.daily_usage(runs, lo, int((pd.Timestamp(d) + pd.Timedelta(days=1)).value // 10**9))
        assert_tables_equal(want, got.get(d, want.iloc[:0]), f"usage of {d}")


def test_finished_run_without_end_and_untyped_gpus(site):
    """Slurm prints End=Unknown after some crashes (counted 0 s, and said so); untyped GPUs take the partition's
    only type; a QOS-less run is tier (none)."""
    text = ("JobID|JobIDRaw|State|Start|End|AllocTRES|Partition|QOS|Account|User|Submit\n"
            "7|7|FAILED|2026-11-02T01:00:00|Unknown|cpu=1,gres/gpu=2|gpu|standard|nlp|bob|2026-11-02T00:00:00\n"
            "8|8|COMPLETED|2026-11-02T02:00:00|2026-11-02T05:00:00|cpu=1,gres/gpu=4|gpu||nlp|bob|"
            "2026-11-02T01:00:00\n")
    r = both(read_sacct(text, text=True).jobs, site, SINCE, UNTIL)
    assert any("1 finished run(s) have no End time" in n for n in r.notes)
    assert r.tables["by_gpu_type"].index.tolist() == ["h100"] and "(none)" in r.tables["by_tier"].index


def test_long_runs_show_a_bar_on_a_terminal_and_nothing_under_cron(tmp_path, capfd):
    """The days stored draw a bar when progress is on (a terminal); under cron (no terminal) nothing is written,
    by slurmtools or by DuckDB (whose own bar would go to stdout)."""
    p = tmp_path / "d.txt"
    synth.write(p, 800, datetime(2026, 10, 1), 3, seed=4, nodes=16, node_fmt="gpu{:02d}")
    since, until, now = datetime(2026, 10, 1), datetime(2026, 10, 4), datetime(2026, 10, 5)
    ingest.load_jobs(since, until, sacct_file=p, cache_dir=tmp_path / "a", now=now, lazy=True,
                     progress=ingest.Progress(True))
    err = capfd.readouterr().err
    assert "3 of 3 days" in err and "100.0%" in err and "cache: stored 3 finished day(s)" in err
    src, hist, notes, _ = ingest.load_jobs(since, until, sacct_file=p, cache_dir=tmp_path / "b", now=now,
                                           lazy=True, progress=ingest.Progress(False))
    columnar.compute(src, load_site(None), since, until, history=hist, notes=notes)
    out = capfd.readouterr()
    assert out.out == "" and out.err == ""


def test_day_files_read_back_as_pandas_wrote_them(tmp_path):
    """`DayCache.store` writes each day from one arrow table; a day's file reads back exactly as the day's rows
    written by `DataFrame.to_parquet` do (values, dtypes, categories)."""
    jobs = _synth(2000, 4, seed=3).jobs
    c = cache_mod.DayCache(tmp_path / "c")
    c.store(jobs, date(2026, 10, 1), date(2026, 10, 3))
    assert c.days() == [date(2026, 10, 1), date(2026, 10, 2), date(2026, 10, 3)]
    for day in c.days():
        want = jobs[jobs["end"].notna() & (jobs["end"].dt.floor("D") == pd.Timestamp(day))].reset_index(drop=True)
        want.to_parquet(tmp_path / "want.parquet", index=False)
        pd.testing.assert_frame_equal(pd.read_parquet(c.path(day)), pd.read_parquet(tmp_path / "want.parquet"))


def test_cpu_only_runs_in_the_window_are_counted_in_a_note_of_both_engines(site):
    """A GPU report leaves CPU jobs out; a dump of them read "0 jobs" with nothing said. The note counts the runs
    without a GPU that overlap the window (one running, one without End among them), not those outside it, and the
    Markdown summary shows it beside the figures it explains."""
    from slurmtools.reports import outputs

    text = ("JobID|JobIDRaw|State|Start|End|AllocTRES|Partition|QOS|Account|User|Submit\n"
            "1|1|COMPLETED|2026-11-02T01:00:00|2026-11-02T03:00:00|cpu=4,mem=8G,node=1|cpu|standard|nlp|bob|"
            "2026-11-02T00:00:00\n"
            "2|2|RUNNING|2026-11-02T04:00:00|Unknown|cpu=4,node=1|cpu|standard|nlp|bob|2026-11-02T03:00:00\n"
            "3|3|COMPLETED|2026-10-20T01:00:00|2026-10-20T02:00:00|cpu=4,node=1|cpu|standard|nlp|bob|"
            "2026-10-20T00:00:00\n"
            "4|4|PENDING|Unknown|Unknown|cpu=4,node=1|cpu|standard|nlp|bob|2026-11-02T03:00:00\n")
    gpu = "5|5|COMPLETED|2026-11-02T01:00:00|2026-11-02T02:00:00|cpu=1,gres/gpu=2|gpu|standard|nlp|ann|2026-11-02T00:00:00\n"
    r = both(read_sacct(text, text=True).jobs, site, SINCE, UNTIL)
    assert r.summary["jobs"] == 0
    said = [n for n in r.notes if n.startswith(metrics.CPU_ONLY_NOTE)]
    assert said == [f"{metrics.CPU_ONLY_NOTE} 2 job run(s) in the window held no GPU; this is a GPU report, they are "
                    "not in its figures"]
    assert f"- Note: {said[0]}" in outputs.render_md(r)
    mixed = both(read_sacct(text + gpu, text=True).jobs, site, SINCE, UNTIL)
    assert mixed.summary["jobs"] == 1 and [n for n in mixed.notes if n.startswith(metrics.CPU_ONLY_NOTE)] == said
    alone = both(read_sacct(text.splitlines(True)[0] + gpu, text=True).jobs, site, SINCE, UNTIL)
    assert not [n for n in alone.notes if n.startswith(metrics.CPU_ONLY_NOTE)]
