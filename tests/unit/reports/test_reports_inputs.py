"""Epilog GPU records, node events and capacity, and the day cache."""

from __future__ import annotations

import json
from datetime import date, datetime

import pandas as pd
import pytest

import reports_handmade as hm
from slurmtools.errors import ParseError
from slurmtools.reports import cache as cache_mod
from slurmtools.reports import capacity, metrics
from slurmtools.reports.epilog import read_epilog_dir
from slurmtools.reports.sacct import read_sacct
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric


def _hook_record(job, node, run, gpus, utils, mem_bytes=None, restart_count=None):
    """The shape slurmtools/hooks/epilog.py writes (restart_count may already count the requeue of this run)."""
    return {"job": job, "run": run, "user": "alice", "uid": 1000, "account": "vision", "partition": "gpu", "qos": "standard",
            "node": node, "nodes": "gpu[01-02]", "gpus": gpus, "start": 1793577600.0, "end": 1793581200.5,
            "exit_code": "0:0", "derived_exit_code": "0:0",
            "restart_count": run if restart_count is None else restart_count, "job_state": "COMPLETING",
            "gpu_accounting": None if utils is None else [
                {"gpu": g, "processes": 1, "gpu_util_pct": u, "mem_util_pct": 10, "max_memory_bytes": mem_bytes}
                for g, u in zip(gpus, utils)]}


def test_epilog_records_of_two_nodes_merge_into_one_run(tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    # run 0 was preempted: its epilog already saw restart_count 1; `run` says which run it was
    (jobs / "7.0.gpu01.json").write_text(json.dumps(_hook_record(7, "gpu01", 0, [0, 1], [80, 60], 2 * 2**30, 1)))
    (jobs / "7.0.gpu02.json").write_text(json.dumps(_hook_record(7, "gpu02", 0, [0, 1], [40, 20], 3 * 2**30, 1)))
    (jobs / "7.1.gpu01.json").write_text(json.dumps(_hook_record(7, "gpu01", 1, [0], None)))
    (jobs / "8.0.gpu03.json").write_text(json.dumps({"job_id": "8", "gpu_util_pct": [10, 30], "gpus": 2,
                                                     "start": "2026-11-02T01:00:00"}))
    (jobs / "torn.json").write_text('{"job": 9, "gpu_acc')
    (jobs / "odd.json").write_text(json.dumps({"job": "x9"}))
    rec = read_epilog_dir(tmp_path)
    f = rec.frame.set_index(["job_id_raw", "run"])
    assert rec.files == 6
    assert f.loc[(7, 0), "gpu_util_pct"] == pytest.approx(50)  # mean over the 4 GPUs of both nodes
    assert f.loc[(7, 0), "gpus"] == 4 and f.loc[(7, 0), "nodes"] == 2
    assert f.loc[(7, 0), "gpu_mem_mb"] == pytest.approx(3 * 1024)
    assert pd.isna(f.loc[(7, 1), "gpu_util_pct"])  # NVML accounting was off: unknown, not zero
    assert f.loc[(8, 0), "gpu_util_pct"] == pytest.approx(20)
    assert f.loc[(8, 0), "start"] == pd.Timestamp("2026-11-02T01:00:00")
    assert len(rec.problems) == 2
    assert any("torn.json" in p for p in rec.problems)
    assert any("odd.json" in p and "field job" in p for p in rec.problems)


def test_epilog_folder_missing_is_a_note(tmp_path):
    rec = read_epilog_dir(tmp_path / "none")
    assert len(rec.frame) == 0 and "folder missing" in rec.problems[0]


def test_events_merge_overlaps_and_expand_hostlists():
    text = ("State|NodeName|TimeStart|TimeEnd|Reason\n"
            "DOWN|gpu[01-02]|2026-11-02T00:00:00|2026-11-02T02:00:00|power\n"
            "DRAIN|gpu01|2026-11-02T01:00:00|2026-11-02T03:00:00|fix\n"
            "DRAIN|gpu03|2026-11-02T23:00:00|Unknown|still drained\n"
            "UP||2026-11-01T00:00:00|Unknown|cluster\n")
    ev = capacity.read_events(text)
    assert sorted(ev["node"]) == ["gpu01", "gpu01", "gpu02", "gpu03"]
    d = capacity.down_seconds(ev, datetime(2026, 11, 2), datetime(2026, 11, 3))
    assert d == {"gpu01": 3 * 3600, "gpu02": 2 * 3600, "gpu03": 3600}


def test_events_bad_time_names_line_and_field():
    with pytest.raises(ParseError, match=r"events.txt:3: field TimeEnd"):
        capacity.read_events("NodeName|TimeStart|TimeEnd|State\ngpu01|2026-11-02T00:00:00|Unknown|DOWN\n"
                             "gpu02|2026-11-02T00:00:00|soon|DOWN\n", "events.txt")
    with pytest.raises(ParseError, match="lacks field"):
        capacity.read_events("Node|Start\nx|y\n", "events.txt")


def test_capacity_of_the_example_site():
    site = load_site(None)
    nodes = capacity.nodes_from_site(site, load_fabric(site.fabric_path))
    assert len(nodes) == 16 and {n.gpu_type for n in nodes} == {"h100"} and sum(n.gpus for n in nodes) == 128
    cap = capacity.capacity_table(nodes, None, datetime(2026, 11, 2), datetime(2026, 11, 2, 12))
    assert cap["gpu_hours"].sum() == pytest.approx(128 * 12)


def test_day_cache_roundtrip_and_incremental_equals_full(tmp_path):
    site = load_site(None)
    jobs = read_sacct(hm.TEXT, text=True).jobs
    c = cache_mod.DayCache(tmp_path)
    written = c.store(jobs, date(2026, 11, 1), date(2026, 11, 2))
    assert written == [date(2026, 11, 1), date(2026, 11, 2)] and c.days() == written
    back = c.load(date(2026, 11, 1), date(2026, 11, 2))
    done = jobs[jobs["end"].notna()].reset_index(drop=True)
    assert len(back) == len(done)
    assert {c_: str(t) for c_, t in back.dtypes.items()} == {c_: str(t) for c_, t in jobs.dtypes.items()}
    # cached finished days + the unfinished runs from a fresh read give the same report as the full read
    fresh = jobs[jobs["end"].isna()]
    merged = cache_mod.merge(back, fresh.reset_index(drop=True))
    since, until = datetime(2026, 11, 2), datetime(2026, 11, 3)
    a = metrics.compute(jobs, site, since, until).summary
    b = metrics.compute(merged, site, since, until).summary
    assert a == b


def test_nightly_from_cache_equals_a_full_reread(tmp_path):
    from slurmtools.reports.ingest import load_jobs

    site = load_site(None)
    new = hm._row("COMPLETED", "new", "111", "111", "bob", "nlp", "standard", "2026-11-03T01:00:00",
                  "2026-11-03T01:00:00", "2026-11-03T01:00:00", "2026-11-03T02:00:00", 2, 1, "gpu11")
    # a run that ended on 11-01 marks where the first dump's data begins (a dump is cached only from there)
    early = hm._row("COMPLETED", "early", "99", "99", "alice", "vision", "production", "2026-11-01T10:00:00",
                    "2026-11-01T10:00:00", "2026-11-01T10:00:00", "2026-11-01T11:00:00", 1, 1, "gpu12")
    full = tmp_path / "full.txt"
    full.write_text(hm.TEXT + early + "\n" + new + "\n")
    first = tmp_path / "first.txt"
    first.write_text(hm.TEXT + early + "\n")
    day3 = tmp_path / "day3.txt"  # what sacct -S 2026-11-03 returns the next night: 107 still runs, 108 waits
    day3.write_text(hm.HEADER + "\n" + "\n".join(r for r in hm.ROWS if r.split("|")[2] in ("107", "108")) + "\n" +
                    new + "\n")
    cdir = tmp_path / "cache"
    now = datetime(2026, 11, 5)
    d1, d3, d4 = datetime(2026, 11, 1), datetime(2026, 11, 3), datetime(2026, 11, 4)
    load_jobs(datetime(2026, 11, 2), d3, history_since=d1, sacct_file=first, cache_dir=cdir, now=now)
    assert cache_mod.DayCache(cdir).days() == [date(2026, 11, 1), date(2026, 11, 2)]
    jobs, history, _, t = load_jobs(d3, d4, history_since=d1, sacct_file=day3, cache_dir=cdir, now=now)
    assert "cache_read_s" in t and len(history) > 0
    assert sorted(set(jobs["job_id_raw"])) == [107, 108, 111]  # only the new day's runs were loaded as runs
    assert cache_mod.DayCache(cdir).days()[-1] == date(2026, 11, 3)
    inc = metrics.compute(jobs, site, d3, d4, history=history)
    ref_jobs, ref_hist, _, _ = load_jobs(d3, d4, history_since=d1, sacct_file=full)
    assert ref_hist is None
    ref = metrics.compute(ref_jobs, site, d3, d4)
    assert inc.summary == ref.summary
    assert inc.summary["gpu_hours"] == pytest.approx(8 * 24 + 2)  # 107 all day, 111 one hour on 2 GPUs
    pd.testing.assert_frame_equal(inc.tables["budget"], ref.tables["budget"])
    pd.testing.assert_frame_equal(inc.tables["demand_daily_by_tier"], ref.tables["demand_daily_by_tier"],
                                  check_freq=False)
    assert inc.tables["budget"].loc["nlp", "month_to_date_gpu_hours"] == pytest.approx(212 + 2)
    # a past window whose days are all cached: the run still going (107) is never cached, so it comes fresh
    again, _, _, _ = load_jobs(datetime(2026, 11, 2), d3, history_since=d1, sacct_file=day3, cache_dir=cdir, now=now)
    past = metrics.compute(again, site, datetime(2026, 11, 2), d3)
    assert past.summary["gpu_hours"] == pytest.approx(203.5)


def test_a_dump_is_cached_only_from_where_its_data_begins(tmp_path):
    from slurmtools.reports.ingest import load_jobs

    f = tmp_path / "d.txt"
    f.write_text(hm.TEXT)  # nothing in it ended before 11-02
    load_jobs(datetime(2026, 11, 2), datetime(2026, 11, 3), history_since=datetime(2026, 10, 1), sacct_file=f,
              cache_dir=tmp_path / "c", now=datetime(2026, 11, 5))
    assert cache_mod.DayCache(tmp_path / "c").days() == [date(2026, 11, 2)]
