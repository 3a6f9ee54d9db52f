"""Daylight-saving changes: sacct prints local wall-clock times without an offset; the report reads them as real
instants in the zone they were printed in (TZ, or --tz for a dump) and buckets by local days. Under
TZ=Europe/Berlin (clocks 02:00 -> 03:00 on 2026-03-29, 03:00 -> 02:00 on 2026-10-25) and TZ=America/New_York
(02:00 -> 03:00 on 2026-03-08, 02:00 -> 01:00 on 2026-11-01): a run across the spring change counts the time it
ran (ElapsedRaw), one across the autumn change too, a run from the repeated hour's first pass to its second is a
run and not a bad row, the change days hold 23 and 25 hours of every GPU, the epilog's epoch times meet sacct's on
the same clock, and both engines (and the day cache) agree. UTC and zones without a change read as before. A dump
whose times are not sacct's standard form (a user's SLURM_TIME_FORMAT) is refused in one line."""

from __future__ import annotations

import json
import time
from datetime import date, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import reports_handmade as hm
from reports_equal import assert_reports_equal, assert_tables_equal
from slurmtools.errors import ParseError
from slurmtools.reports import cache as cache_mod
from slurmtools.reports import capacity, columnar, ingest, metrics
from slurmtools.reports import zone as zone_mod
from slurmtools.reports.sacct import read_sacct
from slurmtools.resources import example_site
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric
from tests.inproc import cli as _cli

GPUS = 128  # the example site: 16 nodes x 8 h100
HEAD = ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|Submit|Eligible|Start|End|ElapsedRaw|NodeList|"
        "NNodes|AllocTRES")
#: per zone: the spring day, its skipped hour, the autumn day, its repeated hour (local wall clock)
ZONES = {
    "Europe/Berlin": {"spring": "2026-03-29", "gap": 2, "autumn": "2026-10-25", "twice": 2},
    "America/New_York": {"spring": "2026-03-08", "gap": 2, "autumn": "2026-11-01", "twice": 1},
}


def _row(job, start, end, elapsed, gpus=1, state="COMPLETED", submit=None, name="train", user="alice",
         raw=None, node="gpu01"):
    submit = submit or start
    return "|".join([str(job), str(raw or job), name, user, "vision", "gpu", "standard", state, submit, submit,
                     start, end, "" if elapsed is None else str(elapsed), node, "1",
                     f"cpu=1,gres/gpu:h100={gpus},gres/gpu={gpus},node=1"])


#: a job long before, so that capacity counts from the window's start (the cluster's first record is older)
EARLY = _row(1, "2026-01-05T10:00:00", "2026-01-05T11:00:00", 3600, node="gpu09")


def _dump(tmp_path: Path, rows: list[str], name: str = "dump.txt") -> Path:
    p = tmp_path / name
    p.write_text("\n".join([HEAD, EARLY, *rows]) + "\n")
    return p


def _t(day: str, hour: int, minute: int = 0) -> str:
    return f"{day}T{hour:02d}:{minute:02d}:00"


def _report(tmp_path: Path, dump: Path, since: str, until: str, *extra: str) -> dict:
    """The report's JSON document for the window (`slurmtools report`, in this process)."""
    out = tmp_path / f"out-{since}-{until}-{len(extra)}"
    code, _, err = _cli("report", "--site", str(example_site()), "--sacct-file", str(dump), "--since", since,
                        "--until", until, "--format", "json", "--out", str(out), "-q",
                        "--epilog-dir", str(tmp_path / "no-epilog"), *extra)
    assert code == 0, err
    return json.loads((out / "report.json").read_text())


def _next_day(day: str) -> str:
    return (datetime.fromisoformat(day) + timedelta(days=1)).date().isoformat()


@pytest.mark.parametrize("tz", sorted(ZONES))
def test_a_run_across_the_spring_change_counts_the_time_it_ran(tmp_path, in_zone, tz):
    """01:30 to 03:30 on the spring day is one hour (ElapsedRaw 3600): 2 GPUs, 2 GPU-hours (it counted 4)."""
    in_zone(tz)
    day, gap = ZONES[tz]["spring"], ZONES[tz]["gap"]
    dump = _dump(tmp_path, [_row(10, _t(day, gap - 1, 30), _t(day, gap + 1, 30), 3600, gpus=2)])
    doc = _report(tmp_path, dump, day, _next_day(day))
    assert doc["summary"]["gpu_hours"] == pytest.approx(2.0)
    assert doc["summary"]["bad_rows"] == 0


@pytest.mark.parametrize("tz", sorted(ZONES))
def test_a_run_across_the_autumn_change_counts_the_time_it_ran(tmp_path, in_zone, tz):
    """From half an hour before the repeated hour to half an hour after it is three hours (it counted two)."""
    in_zone(tz)
    day, twice = ZONES[tz]["autumn"], ZONES[tz]["twice"]
    dump = _dump(tmp_path, [_row(10, _t(day, twice - 1, 30), _t(day, twice + 1, 30), 10800)])
    doc = _report(tmp_path, dump, day, _next_day(day))
    assert doc["summary"]["gpu_hours"] == pytest.approx(3.0)
    assert doc["summary"]["bad_rows"] == 0


@pytest.mark.parametrize("tz", sorted(ZONES))
def test_a_run_within_the_repeated_hour_is_a_run_not_a_bad_row(tmp_path, in_zone, tz):
    """Started at :30 in the repeated hour's first pass, ended at :10 in its second: End reads before Start, but
    the run lasted 40 minutes (ElapsedRaw 2400). It was listed in bad_rows.csv and lost from the report. Without
    ElapsedRaw, a run whose End reads before its Start is read the only way that fits; one that fits both ways is
    read as the first pass and said in a note."""
    in_zone(tz)
    day, h = ZONES[tz]["autumn"], ZONES[tz]["twice"]
    dump = _dump(tmp_path, [_row(10, _t(day, h, 30), _t(day, h, 10), 2400, gpus=3),
                            _row(11, _t(day, h, 40), _t(day, h, 20), None, gpus=1),
                            _row(12, _t(day, h, 10), _t(day, h, 40), None, gpus=1)])
    doc = _report(tmp_path, dump, day, _next_day(day), "--max-bad-share", "1")
    assert doc["summary"]["bad_rows"] == 0
    assert doc["summary"]["runs"] == 3
    # 3 GPUs x 40 min, 1 GPU x 40 min (02:40 first pass to 02:20 second), 1 GPU x 30 min (first pass of both)
    assert doc["summary"]["gpu_hours"] == pytest.approx(2.0 + 40 / 60 + 0.5)
    said = [n for n in doc["notes"] if "repeated hour" in n]
    assert len(said) == 1 and said[0].startswith("1 job run row(s)") and "first pass" in said[0] and tz in said[0]


def test_a_time_the_spring_change_skipped_is_a_bad_row_with_its_reason(tmp_path, in_zone):
    """sacct never prints 02:30 on the spring day (the clocks went from 02:00 to 03:00): such a row is bad."""
    in_zone("Europe/Berlin")
    rows = [_row(10, "2026-03-29T02:30:00", "2026-03-29T04:00:00", 1800, submit="2026-03-29T01:00:00"),
            _row(11, "2026-03-29T04:00:00", "2026-03-29T05:00:00", 3600)]
    acc = read_sacct(_dump(tmp_path, rows), zone=zone_mod.local())
    assert [b.line for b in acc.bad.rows] == [3]
    assert acc.bad.rows[0].reason == ("field Start: 2026-03-29T02:30:00 is no time in Europe/Berlin: the clocks "
                                      "went from 02:00 to 03:00 that night (sacct never prints it)")
    assert sorted(acc.jobs["job_id_raw"]) == [1, 11]


@pytest.mark.parametrize("tz,season,hours", [("Europe/Berlin", "spring", 23), ("Europe/Berlin", "autumn", 25),
                                             ("America/New_York", "spring", 23), ("America/New_York", "autumn", 25)])
def test_the_change_days_hold_23_and_25_hours_of_every_gpu(tmp_path, in_zone, tz, season, hours):
    """Capacity of a change day is 23 or 25 hours of every GPU; a month's daily buckets give that day its hours,
    and a run over the whole day counts them (timeline and the forecast's daily demand)."""
    in_zone(tz)
    day = ZONES[tz][season]
    before = (datetime.fromisoformat(day) - timedelta(days=1)).date().isoformat()
    after = (datetime.fromisoformat(day) + timedelta(days=1)).date().isoformat()
    whole = 49 + (hours - 24)  # noon before to noon after, in real hours
    dump = _dump(tmp_path, [_row(10, f"{before}T12:00:00", f"{after}T12:00:00", whole * 3600)])
    doc = _report(tmp_path, dump, day, _next_day(day))
    assert doc["summary"]["installed_gpu_hours"] == pytest.approx(GPUS * hours)
    assert doc["summary"]["gpu_hours"] == pytest.approx(hours)
    # a month: daily buckets from local midnight to local midnight
    first = datetime.fromisoformat(day) - timedelta(days=10)
    since, until = first.date().isoformat(), (first + timedelta(days=31)).date().isoformat()
    doc = _report(tmp_path, dump, since, until)
    tl = {r["bucket_start"]: r for r in doc["timeline"]}
    assert len(tl) == 31 and all(k.endswith(" 00:00:00") for k in tl)
    assert tl[f"{day} 00:00:00"]["capacity_gpu_hours"] == pytest.approx(GPUS * hours)
    assert tl[f"{day} 00:00:00"]["standard"] == pytest.approx(hours)
    assert tl[f"{before} 00:00:00"]["standard"] == pytest.approx(12)
    assert tl[f"{after} 00:00:00"]["standard"] == pytest.approx(12)
    assert sum(r["capacity_gpu_hours"] for r in tl.values()) == pytest.approx(doc["summary"]["installed_gpu_hours"])
    demand = {r["day"]: r["standard"] for r in doc["tables"]["demand_daily_by_tier"]}
    assert demand[f"{day} 00:00:00"] == pytest.approx(hours)


def _epilog_record(job, run, start_utc: str, end_utc: str, util, gpus, last_checkpoint_utc: str | None = None):
    epoch = lambda s: pd.Timestamp(s).value / 1e9  # noqa: E731
    rec = {"job": job, "run": run, "restart_count": run, "user": "alice", "account": "vision", "qos": "standard",
           "node": "gpu01", "gpus": list(range(gpus)), "start": epoch(start_utc), "end": epoch(end_utc),
           "gpu_accounting": [{"gpu": g, "processes": 1, "gpu_util_pct": util, "max_memory_bytes": None}
                              for g in range(gpus)]}
    if last_checkpoint_utc is not None:
        rec["last_checkpoint"] = epoch(last_checkpoint_utc)
    return rec


def test_epilog_records_across_the_changes_meet_sacct_on_one_clock(tmp_path, in_zone):
    """The epilog writes epoch seconds. A preempted run across the spring change with its last checkpoint before
    the change loses GPUs x (End - checkpoint) in real time; a run within the repeated autumn hour gets its
    record's utilisation (it was a bad row, its record matched nothing)."""
    in_zone("Europe/Berlin")
    rows = [_row(20, "2026-03-29T01:00:00", "2026-03-29T03:30:00", 5400, gpus=4, state="PREEMPTED"),
            _row(20, "2026-03-29T03:40:00", "2026-03-29T05:40:00", 7200, gpus=4),
            _row(21, "2026-10-25T02:30:00", "2026-10-25T02:10:00", 2400, gpus=2)]
    dump = _dump(tmp_path, rows)
    ep = tmp_path / "epilog"
    ep.mkdir()
    # 01:00 CET is 00:00 UTC, 03:30 CEST 01:30 UTC, the checkpoint 01:50 CET 00:50 UTC
    (ep / "20.0.gpu01.json").write_text(json.dumps(_epilog_record(20, 0, "2026-03-29T00:00:00",
                                                                  "2026-03-29T01:30:05", 50, 4,
                                                                  "2026-03-29T00:50:00")))
    # 02:30 CEST (first pass) is 00:30 UTC, 02:10 CET (second pass) 01:10 UTC
    (ep / "21.0.gpu01.json").write_text(json.dumps(_epilog_record(21, 0, "2026-10-25T00:30:00",
                                                                  "2026-10-25T01:10:03", 20, 2)))
    out = tmp_path / "out"
    code, _, err = _cli("report", "--site", str(example_site()), "--sacct-file", str(dump), "--since",
                        "2026-03-01", "--until", "2026-11-01", "--format", "json", "--out", str(out), "-q",
                        "--epilog-dir", str(ep))
    assert code == 0, err
    doc = json.loads((out / "report.json").read_text())
    s = doc["summary"]
    assert s["bad_rows"] == 0
    assert s["gpu_hours_lost_to_preemption"] == pytest.approx(4 * 40 / 60)
    (lost,) = doc["tables"]["preempted_runs"]
    # shown in local time, as sacct and the user know them
    assert (lost["start"], lost["end"], lost["last_checkpoint"]) == ("2026-03-29 01:00:00", "2026-03-29 03:30:00",
                                                                     "2026-03-29 01:50:00")
    # run 0 (1.5 h x 4 GPUs at 50 %) and job 21 (40 min x 2 GPUs at 20 %) from the epilog
    assert s["gpu_hours_with_utilization"] == pytest.approx(6.0 + 4 / 3)
    assert s["idle_gpu_hours_allocated"] == pytest.approx(3.0 + 4 / 3 * 0.8)


def test_energy_of_a_run_cut_by_the_window_is_shared_in_real_time(tmp_path, in_zone):
    """A run counts the share of its GPU energy that its GPU-hours in the window are of its whole: 01:00 to 04:00
    on the spring day ran two hours, one of them after the window's start at 03:00, so half its 2 kWh (it counted
    a third: three wall-clock hours)."""
    in_zone("Europe/Berlin")
    dump = _dump(tmp_path, [_row(30, "2026-03-29T01:00:00", "2026-03-29T04:00:00", 7200, gpus=1)])
    ep = tmp_path / "epilog"
    ep.mkdir()
    rec = _epilog_record(30, 0, "2026-03-29T00:00:00", "2026-03-29T02:00:02", 60, 1)
    rec["gpu_energy"] = [{"gpu": 0, "start_mj": 10**9, "end_mj": 10**9 + 2 * 3_600_000_000}]  # 2 kWh
    (ep / "30.0.gpu01.json").write_text(json.dumps(rec))
    out = tmp_path / "out"
    code, _, err = _cli("report", "--site", str(example_site()), "--sacct-file", str(dump), "--since",
                        "2026-03-29T03:00", "--until", "2026-03-30", "--format", "json", "--out", str(out), "-q",
                        "--epilog-dir", str(ep))
    assert code == 0, err
    s = json.loads((out / "report.json").read_text())["summary"]
    assert s["gpu_hours"] == pytest.approx(1.0)
    assert s["energy_kwh"] == pytest.approx(1.0)


def _both(jobs, site, since, until, z, **kw):
    old = metrics.compute(jobs if isinstance(jobs, pd.DataFrame) else jobs.frame(), site, since, until, zone=z, **kw)
    new = columnar.compute(jobs, site, since, until, zone=z, **kw)
    assert_reports_equal(old, new)
    return old


@pytest.mark.parametrize("tz", sorted(ZONES))
def test_both_engines_and_the_day_cache_agree_over_the_changes(tmp_path, in_zone, tz):
    """The DuckDB engine and the day cache count in the same instants and local days as `metrics.compute`:
    windows of an hour, a day and a month around both changes, and the cache (its days are local days)."""
    in_zone(tz)
    z = zone_mod.local()
    site = load_site(None)
    nodes = capacity.nodes_from_site(site, load_fabric(site.fabric_path))
    rows, job = [], 100
    for season in ("spring", "autumn"):
        day = datetime.fromisoformat(ZONES[tz][season])
        for k in range(40):  # runs starting every 50 minutes from 20:00 the day before, of 20 min to 9 h
            st = day - timedelta(hours=4) + timedelta(minutes=50 * k)
            if z.from_local([pd.Timestamp(st).value // 10**9])[2][0]:
                continue  # sacct never prints a skipped time
            run = timedelta(minutes=20 + 37 * (k % 15))
            first = int(z.from_local([pd.Timestamp(st).value // 10**9])[0][0])
            en = pd.Timestamp(int(z.to_local([first + int(run.total_seconds())])[0]), unit="s")
            rows.append(_row(job, f"{st:%Y-%m-%dT%H:%M:%S}", f"{en:%Y-%m-%dT%H:%M:%S}",
                             int(run.total_seconds()), gpus=1 + k % 8, user=f"u{k % 5}", node=f"gpu{k % 16 + 1:02d}"))
            job += 1
    dump = _dump(tmp_path, rows)
    acc = read_sacct(dump, zone=z)
    assert not acc.bad.rows and len(acc.jobs) == len(rows) + 1
    for season in ("spring", "autumn"):
        day = datetime.fromisoformat(ZONES[tz][season])
        for since, until in ((day, day + timedelta(days=1)), (day + timedelta(hours=1), day + timedelta(hours=4)),
                             (day - timedelta(days=20), day + timedelta(days=11))):
            cap = capacity.capacity_table(nodes, None, since, until, zone=z)
            r = _both(acc.jobs, site, since, until, z, capacity=cap, notes=acc.notes)
            assert r.summary["bad_rows"] == 0 and r.summary["runs"] > 0
        # the day report's capacity: 23 or 25 hours
        r = _both(acc.jobs, site, day, day + timedelta(days=1), z,
                  capacity=capacity.capacity_table(nodes, None, day, day + timedelta(days=1), zone=z))
        assert r.summary["installed_gpu_hours"] == pytest.approx(GPUS * (23 if season == "spring" else 25))
    # the day cache: days stored as local days, read back by both engines
    autumn = datetime.fromisoformat(ZONES[tz]["autumn"])
    since, until = autumn - timedelta(days=1), autumn + timedelta(days=2)
    cache = tmp_path / "cache"
    eager, hist, _, _ = ingest.load_jobs(since, until, sacct_file=dump, cache_dir=cache, now=until, zone=z)
    src, hist, _, _ = ingest.load_jobs(since, until, sacct_file=dump, cache_dir=cache, now=until, zone=z, lazy=True)
    assert src.files and all(f"v{cache_mod.VERSION}" in str(p) for p in src.files)
    assert cache_mod.DayCache(cache, z).days()[-1] == (until - timedelta(days=1)).date()
    cap = capacity.capacity_table(nodes, None, since, until, zone=z)
    a = _both(src, site, since, until, z, capacity=cap, history=hist)
    for r in (metrics.compute(eager, site, since, until, capacity=cap, zone=z),
              metrics.compute(acc.jobs, site, since, until, capacity=cap, zone=z)):
        assert r.summary["gpu_hours"] == pytest.approx(a.summary["gpu_hours"])
        assert_tables_equal(r.timeline, a.timeline, "timeline")
    # each cached day's usage file holds that local day's runs' usage, as `metrics.daily_usage` counts it
    got = columnar.usage_by_end_day(acc.jobs, z)
    c = cache_mod.DayCache(cache, z)
    for d in c.days():
        assert_tables_equal(pd.read_parquet(c.usage_path(d)), got.get(d), f"usage of {d}")
    d = autumn.date()
    runs = metrics.prepare(acc.jobs[cache_mod.end_days(acc.jobs["end"], z) == (d - date(1970, 1, 1)).days], None,
                           until, [], z)
    want = metrics.daily_usage(runs, z.instant(since - timedelta(days=2)), z.instant(autumn + timedelta(days=1)), z)
    assert_tables_equal(want, got[d], "usage of the autumn day")
    assert want[want["day"] == pd.Timestamp(d)]["gpu_hours"].sum() > 0


def test_a_cache_of_the_old_version_is_not_read(tmp_path, in_zone):
    """Version 1 kept local wall-clock times and UTC days: its files are left alone and the days fetched again."""
    in_zone("Europe/Berlin")
    dump = _dump(tmp_path, [_row(10, "2026-10-25T01:30:00", "2026-10-25T03:30:00", 10800)])
    old = tmp_path / "cache" / "v1"
    (old / "usage").mkdir(parents=True)
    wrong = read_sacct(dump).jobs.assign(gpus=99)
    for d in ("2026-10-24", "2026-10-25"):
        wrong.to_parquet(old / f"{d}.parquet")
        pd.DataFrame({"day": pd.Series(dtype="datetime64[s]"), "tier": pd.Series(dtype=str),
                      "account": pd.Series(dtype=str), "gpu_hours": pd.Series(dtype=float)}).to_parquet(
            old / "usage" / f"{d}.parquet")
    z = zone_mod.local()
    since, until = datetime(2026, 10, 24), datetime(2026, 10, 26)
    jobs, *_ = ingest.load_jobs(since, until, sacct_file=dump, cache_dir=tmp_path / "cache", now=until, zone=z)
    r = metrics.compute(jobs, None, since, until, zone=z)
    assert r.summary["gpu_hours"] == pytest.approx(3.0)


@pytest.mark.parametrize("tz", ["UTC", "Asia/Tokyo"])
def test_utc_and_zones_without_a_change_read_as_before(tmp_path, in_zone, tz):
    """In UTC the times as written are the instants; in a zone without clock changes every time moves by the same
    offset and back for display: the hand-made dump's report is the same in both, figure for figure and time for
    time, and what `metrics.compute` gives without a zone (the reports before zones)."""
    dump = tmp_path / "hm.txt"
    dump.write_text(hm.TEXT)
    in_zone("UTC")
    want = _report(tmp_path, dump, hm.SINCE, hm.UNTIL)
    in_zone(tz)
    got = _report(tmp_path, dump, hm.SINCE, hm.UNTIL, "--top", "10")
    assert got == want
    assert want["summary"]["gpu_hours"] == pytest.approx(203.5)
    z = zone_mod.local()
    acc, plain = read_sacct(dump, zone=z), read_sacct(dump)
    since, until = datetime.fromisoformat(hm.SINCE), datetime.fromisoformat(hm.UNTIL)
    assert_reports_equal(metrics.compute(plain.jobs, None, since, until),
                         _both(acc.jobs, None, since, until, z))


@pytest.mark.parametrize("value,written", [("Tue 14:00", "SLURM_TIME_FORMAT=relative"),
                                           ("03:17:17", "SLURM_TIME_FORMAT=relative"),
                                           ("1793577600", "SLURM_TIME_FORMAT=%s"),
                                           ("02.11.2026 14:00", "a SLURM_TIME_FORMAT other than standard")])
def test_a_dump_in_another_time_format_is_refused_in_one_line(tmp_path, value, written):
    """Saved under a user's SLURM_TIME_FORMAT, every time of the dump is unreadable: the report says so in one line
    naming the file, the field and SLURM_TIME_FORMAT (every row used to be a bad row, and the report failed on
    max_bad_share without saying why)."""
    rows = [_row(10 + k, value, value, 3600) for k in range(5)]
    dump = tmp_path / "dump.txt"
    dump.write_text("\n".join([HEAD, *rows]) + "\n")
    code, _, err = _cli("report", "--site", str(example_site()), "--sacct-file", str(dump), "--since", "2026-11-01",
                        "--until", "2026-11-03", "--format", "json", "--out", str(tmp_path / "out"), "-q",
                        "--epilog-dir", str(tmp_path / "none"))
    assert code == 2
    (line,) = err.splitlines()
    assert line == (f"slurmtools: error: {dump}: Submit values like {value!r} are not sacct's standard times "
                    f"(YYYY-MM-DDTHH:MM:SS; 5 of 5): the dump was written under {written}; write it again with "
                    f"SLURM_TIME_FORMAT=standard")


def test_the_time_format_rule_is_a_share_of_the_rows():
    """One odd time among sacct's own is a bad row like any other; most of a field odd is the whole dump's form
    (here End only: Start was standard, End relative)."""
    good = [_row(10 + k, "2026-11-02T01:00:00", "2026-11-02T02:00:00", 3600) for k in range(9)]
    odd = _row(30, "2026-11-02T01:00:00", "Tue 14:00", 3600)
    acc = read_sacct("\n".join([HEAD, *good, odd]) + "\n", text=True, source="d.txt")
    assert len(acc.jobs) == 9 and [b.line for b in acc.bad.rows] == [11]
    rel = [_row(10 + k, "2026-11-02T01:00:00", "Tue 14:00", 3600) for k in range(6)] + good[:4]
    with pytest.raises(ParseError, match=r"^d.txt: End values like 'Tue 14:00' are not sacct's standard times "
                                         r"\(YYYY-MM-DDTHH:MM:SS; 6 of 10\): the dump was written under "
                                         r"SLURM_TIME_FORMAT=relative; write it again"):
        read_sacct("\n".join([HEAD, *rel]) + "\n", text=True, source="d.txt")


def test_tz_names_the_zone_of_a_dump_written_elsewhere(tmp_path, in_zone):
    """A Berlin dump read on a UTC machine with --tz Europe/Berlin reads as it does under TZ=Europe/Berlin; an
    unknown name is one line naming --tz, and so is a TZ the C library would silently read as UTC."""
    day = ZONES["Europe/Berlin"]["spring"]
    dump = _dump(tmp_path, [_row(10, _t(day, 1, 30), _t(day, 3, 30), 3600, gpus=2)])
    in_zone("UTC")
    doc = _report(tmp_path, dump, day, _next_day(day), "--tz", "Europe/Berlin")
    assert doc["summary"]["gpu_hours"] == pytest.approx(2.0)
    assert doc["summary"]["installed_gpu_hours"] == pytest.approx(GPUS * 23)
    base = ("report", "--site", str(example_site()), "--sacct-file", str(dump), "--since", day, "--until",
            _next_day(day), "--format", "json", "--out", str(tmp_path / "o"), "-q")
    code, _, err = _cli(*base, "--tz", "Mars/Olympus")
    assert code == 2 and err.splitlines() == [
        "slurmtools: error: --tz: 'Mars/Olympus' is not a time zone this machine knows (an IANA name such as "
        "Europe/Berlin or UTC)"]
    in_zone("Mars/Olympus")
    code, _, err = _cli(*base)
    assert code == 2 and len(err.splitlines()) == 1 and "TZ=Mars/Olympus" in err and "--tz" in err


@pytest.mark.parametrize("tz", sorted(ZONES))
@pytest.mark.parametrize("elapsed", [1200.0, float("nan")])
def test_a_start_before_every_reading_of_its_submit_is_not_taken(in_zone, tz, elapsed):
    """Submitted at :40 in the repeated hour's first pass, ran :10-:30 in its second (20 minutes): both passes fit
    the run's length, but only the second comes after the Submit. The first pass was taken, without a note, and
    the job waited -30 minutes (the sandbox trace refused it as started before its submission)."""
    in_zone(tz)
    z = zone_mod.local()
    day, h = ZONES[tz]["autumn"], ZONES[tz]["twice"]

    def loc(minute):
        return np.array([int(pd.Timestamp(_t(day, h, minute)).value // 10**9)], dtype=np.int64)
    yes = np.array([True])
    r = zone_mod.resolve(z, {"submit": (loc(40), yes), "start": (loc(10), yes), "end": (loc(30), yes)},
                         np.array([elapsed]))
    first, second, _ = z.from_local(loc(10), None)
    assert r.times["start"][0] == second[0] and r.times["end"][0] - r.times["start"][0] == 1200
    assert r.times["start"][0] - r.times["submit"][0] == 30 * 60
    assert not r.unresolved[0] and not r.backwards[0]
