"""Campaign what-ifs (`sandbox replay --add`) and forecast load (`--forecast`): the synthetic jobs, their exact
submit times and shapes, every validation error's one line, and the forecast's band ordering."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path

import pytest

from slurmtools.errors import ConfigError
from slurmtools.sandbox.campaign import (DAY, ForecastError, add_to, daily_gpu_hours, forecast_load,
                                         load_campaigns)
from slurmtools.sandbox.trace import Trace, TraceJob, load_trace
from slurmtools.site import load_site

REPO = Path(__file__).resolve().parents[3]
SITE_FILE = REPO / "site_configs" / "example" / "site.toml"
T0 = datetime(2026, 11, 2, 8, tzinfo=timezone.utc).timestamp()


@pytest.fixture(scope="module")
def site():
    return load_site(str(SITE_FILE))


def job(key, submit, *, gpus=8, nodes=1, run_s=3600.0, tier="standard", account="nlp", user="bob", cpus=32):
    return TraceJob(key=key, submit=submit, user=user, account=account, tier=tier, partition="gpu", nodes=nodes,
                    gpus=gpus, gpu_type="h100", cpus=cpus, run_s=run_s, limit_s=2 * run_s, state="COMPLETED",
                    start=submit)


@pytest.fixture
def trace():
    """Three hours of history from T0."""
    return Trace(tuple(job(str(i), T0 + i * 3600) for i in range(4)), "hist.sacct")


def write(tmp_path, body: str) -> str:
    p = tmp_path / "campaign.toml"
    p.write_text(body)
    return str(p)


BASE = '''[[campaign]]
name = "sweep"
account = "vision"
job_gpus = 16
run_time = "2h"
'''


def test_example_file_is_a_valid_campaign(site, trace):
    notes = []
    jobs = load_campaigns(str(REPO / "site_configs/example/campaign-vision.toml"), site, trace, notes)
    assert len(jobs) == 16 and {(j.gpus, j.nodes, j.account, j.tier) for j in jobs} == {(8, 1, "vision", "standard")}
    assert jobs[0].submit == T0 + 7200 and jobs[-1].submit == T0 + 7200 + 15 * 3 * 3600 / 16
    assert "16 job(s) of 8 h100 GPUs" in notes[0]


def test_burst_gpus_waves_and_shape(site, trace, tmp_path):
    path = write(tmp_path, BASE + 'gpus = 64\nduration = "5h"\nstart = "+1h"\ntier = "production"\n')
    jobs = load_campaigns(path, site, trace)
    # 64 / 16 = 4 jobs a wave, ceil(5h / 2h) = 3 waves, all at start
    assert [j.key for j in jobs] == [f"c-sweep-{i}" for i in range(12)]
    assert {j.submit for j in jobs} == {T0 + 3600}
    j = jobs[0]
    assert (j.gpus, j.nodes, j.gpus_per_node, j.gpu_type, j.partition) == (16, 2, 8, "h100", "gpu")
    assert (j.user, j.account, j.tier, j.synthetic, j.start) == ("campaign-sweep", "vision", "production", "sweep",
                                                                 None)
    assert (j.run_s, j.limit_s) == (7200.0, 10800.0)  # default limit: 1.5 x the run
    assert j.cpus == 64  # the history's 4 CPUs per GPU


def test_uniform_is_evenly_spaced_and_jobs_count(site, trace, tmp_path):
    path = write(tmp_path, BASE + 'jobs = 5\nduration = "10h"\narrival = "uniform"\n'
                                  'start = 2026-11-02T09:30:00\ntime_limit = "3h"\nuser = "vis-bot"\n')
    jobs = load_campaigns(path, site, trace)
    start = datetime(2026, 11, 2, 9, 30, tzinfo=timezone.utc).timestamp()
    assert [j.submit for j in jobs] == [start + i * 7200 for i in range(5)]
    assert {j.limit_s for j in jobs} == {10800.0} and {j.user for j in jobs} == {"vis-bot"}


def test_poisson_is_seeded_sorted_and_within_the_duration(site, trace, tmp_path):
    body = BASE + 'jobs = 400\nduration = "1d"\narrival = "poisson"\nstart = "2026-11-02T12:00:00Z"\n'
    a = load_campaigns(write(tmp_path, body + "seed = 7\n"), site, trace)
    b = load_campaigns(write(tmp_path, body + "seed = 7\n"), site, trace)
    c = load_campaigns(write(tmp_path, body + "seed = 8\n"), site, trace)
    start = datetime(2026, 11, 2, 12, tzinfo=timezone.utc).timestamp()
    times = [j.submit for j in a]
    assert times == [j.submit for j in b] != [j.submit for j in c]
    assert times == sorted(times) and start <= times[0] and times[-1] < start + DAY
    gaps = [y - x for x, y in zip([start] + times, times)]
    assert 0.8 * DAY / 400 < sum(gaps) / len(gaps) < 1.2 * DAY / 400  # Poisson rate: count / duration
    # exponential gaps: the coefficient of variation is near 1 (evenly spaced would be 0)
    mean = sum(gaps) / len(gaps)
    cv = math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps)) / mean
    assert 0.8 < cv < 1.2


def test_two_campaigns_and_the_notes(site, trace, tmp_path):
    path = write(tmp_path, BASE + 'jobs = 2\n\n[[campaign]]\nname = "late"\naccount = "students"\njob_gpus = 4\n'
                                  'jobs = 1\nrun_time = "1h"\nstart = "+30d"\n'
                                  '\n[[campaign]]\nname = "wide"\naccount = "nlp"\ntier = "standard"\n'
                                  'job_gpus = 32\ngpus = 128\nrun_time = "1h"\n')
    notes = []
    jobs = load_campaigns(path, site, trace, notes)
    assert [j.synthetic for j in jobs] == ["sweep"] * 2 + ["late"] + ["wide"] * 4
    late = jobs[2]
    assert (late.nodes, late.gpus, late.tier) == (1, 4, "standard")  # below one node: one node, site default tier
    assert any(n.startswith("campaign late starts") and "after the history" in n for n in notes)
    assert any("asks for up to 128 GPUs at once" in n and "64" in n for n in notes)
    merged = add_to(trace, jobs, notes)
    assert len(merged.jobs) == len(trace.jobs) + 7 and merged.notes == tuple(notes)
    assert [j.submit for j in merged.jobs] == sorted(j.submit for j in merged.jobs)
    # the same campaign again (a second --add of the same file) is refused, not keyed twice
    with pytest.raises(ConfigError, match=r"campaign\[0\]\.name: campaign 'sweep' is already in the trace"):
        load_campaigns(path, site, merged)


@pytest.mark.parametrize("extra,where,message", [
    ('jobs = 1\ncolour = "red"\n', "campaign[0].colour", "unknown key"),
    ('jobs = 1\n', "campaign[0].account", "'physics' is not an account of the candidate site"),
    ('jobs = 1\ntier = "gold"\n', "campaign[0].tier", "'gold' is not a tier of the candidate site"),
    ('jobs = 1\ntier = "production"\n', "campaign[0].tier", "account students may not use tier production"),
    ('gpus = 100\n', "campaign[0].gpus", "100 is not a multiple of job_gpus = 16"),
    ('', "campaign[0].gpus", "exactly one of them"),
    ('gpus = 16\njobs = 1\n', "campaign[0].gpus", "exactly one of them"),
    ('jobs = 1\nduration = "0s"\n', "campaign[0].duration", "longer than 0s"),
    ('jobs = 1\nduration = 30\n', "campaign[0].duration", "say the unit"),
    ('jobs = 1\ntime_limit = "1h"\n', "campaign[0].time_limit", "shorter than run_time"),
    ('jobs = 1\ntime_limit = "3d"\n', "campaign[0].time_limit", "allow 1d in"),
    ('jobs = 1\nstart = "next tuesday"\n', "campaign[0].start", "expected a date-time"),
    ('jobs = 1\narrival = "bursty"\n', "campaign[0].arrival", "expected one of burst, uniform, poisson"),
    ('jobs = 1\nseed = 3\n', "campaign[0].seed", "only poisson arrivals are random"),
    ('jobs = 1\nnodes_per_job = 3\n', "campaign[0].nodes_per_job", "does not divide over 3 nodes"),
    ('jobs = 1\nnodes_per_job = 1\n', "campaign[0].nodes_per_job", "16 GPUs per node: no h100 node"),
    ('jobs = 1\npartition = "cpu"\n', "campaign[0].partition", "'cpu' is not a partition"),
    ('jobs = 1\ngpu_type = "a100"\n', "campaign[0].gpu_type", "'a100' is not a GPU type of partition gpu"),
    ('jobs = 1000000\n', "campaign[0].jobs", "at most 100000"),
    ('jobs = 0\n', "campaign[0].jobs", "expected an integer >= 1"),
])
def test_each_error_is_one_line_naming_file_and_key(site, trace, tmp_path, extra, where, message):
    body = BASE.replace('"vision"', '"physics"') if "physics" in message else BASE
    if "students" in message:
        body = BASE.replace('"vision"', '"students"')
    path = write(tmp_path, body + extra)
    with pytest.raises(ConfigError) as e:
        load_campaigns(path, site, trace)
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"{path}: {where}: ") and message in line, line
    if where in ("campaign[0].account", "campaign[0].tier") or "allow" in message:
        assert str(SITE_FILE) in line  # a what-if may edit the candidate: say which file


def test_account_error_says_how_to_add_it(site, trace, tmp_path):
    with pytest.raises(ConfigError, match=r"add \[accounts\.physics\] to that file"):
        load_campaigns(write(tmp_path, BASE.replace('"vision"', '"physics"') + "jobs = 1\n"), site, trace)


@pytest.mark.parametrize("account", ["", " ", "a b", "vision]"])
def test_an_account_no_table_can_name_gets_no_table_to_add(site, trace, tmp_path, account):
    # was: "add [accounts.] to that file" (or "[accounts.a b]"), a table TOML refuses
    path = write(tmp_path, BASE.replace('"vision"', repr(account).replace("'", '"')) + "jobs = 1\n")
    with pytest.raises(ConfigError) as e:
        load_campaigns(path, site, trace)
    line = str(e.value)
    assert line.startswith(f"{path}: campaign[0].account: ") and "is not an account of the candidate site" in line
    assert "\n" not in line and "[accounts." not in line, line


@pytest.mark.parametrize("body,where,message", [
    ("", "campaign", "missing (required)"),
    ("campaign = []\n", "campaign", "nothing to add"),
    ('[campaign]\nname = "x"\n', "campaign", "expected an array of tables"),
    ('title = "x"\n' + BASE + "jobs = 1\n", "title", "unknown key"),
    (BASE + "jobs = 1\n" + BASE + "jobs = 1\n", "campaign[1].name", "names two campaigns"),
    (BASE.replace('"sweep"', '"a b"') + "jobs = 1\n", "campaign[0].name", "letters, digits"),
    (BASE.replace("16", "12") + "jobs = 1\n", "campaign[0].job_gpus", "whole 8-GPU nodes"),
    (BASE.replace("16", "256") + "jobs = 1\ntier = \"scavenger\"\n", "campaign[0].job_gpus",
     "32 nodes of 8 h100 GPUs: partition gpu has 16"),
    (BASE.replace("16", "64") + "jobs = 1\n", "campaign[0].job_gpus", "tier standard allows at most 32 GPUs"),
])
def test_file_level_errors(site, trace, tmp_path, body, where, message):
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as e:
        load_campaigns(path, site, trace)
    assert str(e.value).startswith(f"{path}: {where}: ") and message in str(e.value), str(e.value)


def test_missing_and_bad_files(site, trace, tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_campaigns(str(tmp_path / "nope.toml"), site, trace)
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_campaigns(write(tmp_path, "[[campaign]\n"), site, trace)


# ---- forecast load


def daily_trace(per_day: list[float], *, tail_gpuh: float = 0.0) -> Trace:
    """One 8-GPU job a day at 10:00 after T0 whose run gives that day's GPU-hours; a last job on the day after
    (the trailing partial day) asking `tail_gpuh`."""
    jobs = [job(str(i), T0 + i * DAY + 36000, run_s=gh / 8 * 3600, user=f"u{i % 3}")
            for i, gh in enumerate(per_day)]
    jobs.append(job("tail", T0 + len(per_day) * DAY + 36000, run_s=max(tail_gpuh, 0.001) / 8 * 3600))
    return Trace(tuple(jobs), "days.sacct")


def test_daily_gpu_hours_whole_days_from_the_first_submission():
    t0, days, partial = daily_gpu_hours(daily_trace([80, 40, 120], tail_gpuh=16))
    assert t0 == T0 + 36000 and days == pytest.approx([80, 40, 120]) and partial == pytest.approx(16)


def test_flat_history_forecasts_exactly_its_level():
    trace = daily_trace([100.0] * 14, tail_gpuh=40)
    notes = []
    jobs = forecast_load(trace, "mid", 3, seed=1, notes=notes)
    by_day = {}
    for j in jobs:
        by_day.setdefault(int((j.submit - (T0 + 36000)) // DAY), []).append(j)
    # a flat history is forecast without error: day 0 (the partial day, 40 asked) gets 60 more, days 1-2 get 100
    assert sorted(by_day) == [14, 15, 16]
    for d, js in by_day.items():
        gh = sum(j.gpus * j.run_s for j in js) / 3600
        target = 60 if d == 14 else 100
        assert target <= gh < target + 100 and gh - max(j.gpus * j.run_s for j in js) / 3600 < target
        assert all(j.submit == T0 + d * DAY + 36000 for j in js)  # the drawn jobs' own time of day
    assert {j.synthetic for j in jobs} == {"forecast-mid"} and all(j.start is None for j in jobs)
    assert len({j.key for j in jobs}) == len(jobs) and all(j.key.startswith("f-mid-") for j in jobs)
    assert "±0%" in notes[0]
    lo = forecast_load(trace, "low", 3, seed=1)
    hi = forecast_load(trace, "high", 3, seed=1)
    same = lambda js: [(j.submit, j.run_s, j.gpus) for j in js]  # noqa: E731
    assert same(lo) == same(jobs) == same(hi)  # no error: the band is the point


def test_band_ordering_on_a_generated_history(site, tmp_path):
    from slurmtools.sandbox.example_trace import generate

    p = tmp_path / "h.sacct"
    # ~3000 jobs over 20 days on the 128-GPU example site: arrivals spread over the whole span
    p.write_text(generate(site, 3000, 20 * 24, seed=3, load=0.1))
    trace = load_trace(str(p))
    _, days, _ = daily_gpu_hours(trace)
    assert len(days) >= 14
    added = {}
    for band in ("low", "mid", "high"):
        notes = []
        jobs = forecast_load(trace, band, 5, seed=2, notes=notes)
        added[band] = sum(j.gpus * j.run_s for j in jobs) / 3600
        recorded = {j.key: j for j in trace.jobs}
        assert all(j.synthetic == f"forecast-{band}" for j in jobs)
        assert all(j.submit >= trace.first_submit + len(days) * DAY for j in jobs)
        assert all(j.submit < trace.first_submit + (len(days) + 5) * DAY for j in jobs)
        # shapes, tiers, accounts and runs all come from the history's own jobs
        shapes = {(r.nodes, r.gpus, r.tier, r.account, r.run_s) for r in recorded.values()}
        assert {(j.nodes, j.gpus, j.tier, j.account, j.run_s) for j in jobs} <= shapes
    assert 0 < added["low"] < added["mid"] < added["high"]
    merged = add_to(trace, forecast_load(trace, "mid", 5, seed=2), ["forecast"])
    assert merged.notes[-1] == "forecast" and len(merged.jobs) > len(trace.jobs)


def test_band_widths_follow_the_backtest_error():
    """A growing history (1-GPU, 1-hour jobs: 10 more each day) that the flat methods lag: the band is the point
    forecast x (1 -/+ the backtest WAPE), met to within one job a day."""
    jobs = [job(f"{d}-{k}", T0 + d * DAY + k * 60, gpus=1, run_s=3600.0)
            for d in range(16) for k in range(10 + 10 * d)]
    trace = Trace(tuple(jobs) + (job("tail", T0 + 16 * DAY, gpus=1, run_s=3600.0),), "ramp.sacct")
    added, notes = {}, []
    for band in ("low", "mid", "high"):
        added[band] = sum(j.gpus * j.run_s for j in forecast_load(trace, band, 2, notes=notes)) / 3600
    import re

    w = float(re.search(r"±(\d+)%", notes[0]).group(1)) / 100
    assert w >= 0.05
    assert added["low"] < added["mid"] < added["high"]
    # mid has 1 GPU-hour of history subtracted (the tail job) and overshoots by < 1 job a day
    point = added["mid"] + 1
    assert abs(added["high"] - (point * (1 + w) - 1)) < 2 + point * 0.01  # WAPE is printed rounded
    assert abs(added["low"] - (point * (1 - w) - 1)) < 2 + point * 0.01


def test_short_history_is_refused_in_one_line(trace):
    with pytest.raises(ForecastError) as e:
        forecast_load(trace, "mid", 7)
    assert str(e.value) == ("hist.sacct: 0 whole day(s) of submissions; a 7-day forecast with its error band "
                            "needs at least 14 (7 to fit, 7 to test it on)")
    with pytest.raises(ForecastError, match="needs at least 8"):
        forecast_load(daily_trace([10.0] * 7), "high", 1)
    assert forecast_load(daily_trace([10.0] * 8), "high", 1) is not None
    with pytest.raises(ForecastError, match="band: expected one of low, mid, high"):
        forecast_load(trace, "max", 1)


def test_synthetic_jobs_are_not_history():
    """Forecasting a trace that already carries synthetic jobs measures the recorded jobs only."""
    trace = daily_trace([100.0] * 10)
    extra = forecast_load(trace, "mid", 2)
    merged = add_to(trace, extra, ["x"])
    assert daily_gpu_hours(merged) == daily_gpu_hours(trace)
