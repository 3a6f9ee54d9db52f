"""`sandbox replay --from WHEN`: the history as a replay that begins at WHEN sees it (`Trace.replayed_from`), and
the times the option and campaign files take (`trace.moment`)."""

from __future__ import annotations

import dataclasses
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from slurmtools.errors import ParseError
from slurmtools.sandbox.campaign import DAY, forecast_load
from slurmtools.sandbox.trace import Trace, TraceJob, moment

REPO = Path(__file__).resolve().parents[3]
T0 = datetime(2026, 11, 2, 8, tzinfo=timezone.utc).timestamp()


def job(key, submit, start, run_s, **kw) -> TraceJob:
    return TraceJob(key=key, submit=submit, user="bob", account="nlp", tier="standard", partition="gpu", nodes=1,
                    gpus=8, gpu_type="h100", cpus=32, run_s=run_s, limit_s=4 * 3600.0, state="COMPLETED",
                    start=start, **kw)


def history() -> Trace:
    """Four jobs around T0 + 2 h: one ended before it, one running across it, one queued across it, one after."""
    return Trace((job("ended", T0, T0, 3600.0),
                  job("running", T0 + 600, T0 + 1800, 3 * 3600.0),
                  job("queued", T0 + 3600, T0 + 3 * 3600, 1800.0),
                  job("later", T0 + 4 * 3600, T0 + 4 * 3600 + 60, 600.0)), "hist.sacct", ("earlier note",))


def test_jobs_running_or_queued_at_the_start_are_carried_the_rest_kept_as_recorded():
    t = T0 + 2 * 3600
    got = history().replayed_from(t)
    by = {j.key: j for j in got.jobs}
    assert sorted(by) == ["later", "queued", "running"]
    # running since T0+30 min for 3 h: submitted at t, with the 1.5 h it had left, started (1x) at t
    assert (by["running"].submit, by["running"].start, by["running"].run_s) == (t, t, 1.5 * 3600)
    # queued since T0+1 h, started at T0+3 h: submitted at t, its own start and run time kept
    assert (by["queued"].submit, by["queued"].start, by["queued"].run_s) == (t, T0 + 3 * 3600, 1800.0)
    assert by["later"] == history().jobs[3]
    assert [j.key for j in got.jobs] == ["queued", "running", "later"]   # by submission, then key
    assert got.first_submit == t
    assert got.notes[0] == "earlier note"
    assert got.notes[1] == ("replayed from 2026-11-02T10:00:00Z: 1 recorded job(s) that ended before it left out; "
                            "2 running or queued then submitted at it (the running ones with the run time they "
                            "had left)")


def test_a_job_ending_exactly_at_the_start_is_left_out_and_one_submitted_then_kept():
    h = history()
    got = h.replayed_from(T0 + 3600)    # "ended" ends at T0 + 1 h; "queued" is submitted then
    assert [j.key for j in got.jobs] == ["queued", "running", "later"]
    assert {j.key: j.submit for j in got.jobs}["queued"] == T0 + 3600
    assert "1 recorded job(s) that ended before it" in got.notes[-1]


def test_from_before_the_history_changes_nothing_but_the_note():
    got = history().replayed_from(T0 - 60)
    assert got.jobs == history().jobs
    assert "0 recorded job(s)" in got.notes[-1] and "0 running or queued" in got.notes[-1]


def test_added_jobs_before_the_start_are_left_out_and_counted():
    h = history().with_jobs([dataclasses.replace(job("c-a-0", T0 + 600, None, 600.0), synthetic="campaign a"),
                             dataclasses.replace(job("c-a-1", T0 + 5 * 3600, None, 600.0), synthetic="campaign a")])
    got = h.replayed_from(T0 + 2 * 3600)
    assert "c-a-0" not in {j.key for j in got.jobs} and "c-a-1" in {j.key for j in got.jobs}
    assert got.notes[-1].endswith("; 1 added job(s) submitted before it left out")


def test_nothing_left_is_one_line_naming_the_history():
    with pytest.raises(ParseError) as e:
        history().replayed_from(T0 + 10 * 3600)
    assert str(e.value) == ("hist.sacct: no job submitted, queued or running at or after 2026-11-02T18:00:00Z: "
                            "nothing to replay from there")


def test_forecast_then_from_replays_the_forecast_days_only():
    """The whole history feeds the forecast; --from at the end of it leaves only the forecast's jobs."""
    at = [T0 + d * DAY + 3600 + i * 60 for d in range(9) for i in range(3)]   # three jobs an hour into each day
    jobs = [job(f"h{k}", t, t, 1800.0) for k, t in enumerate(at)]
    # CPU jobs (never drawn by the forecast) that start the history's first day and its last, partial one
    jobs += [dataclasses.replace(job(k, t, t, 60.0), gpus=0) for k, t in (("first", T0), ("tail", T0 + 9 * DAY))]
    h = Trace(tuple(jobs), "hist.sacct")
    extra = forecast_load(h, "mid", 1)
    assert len(extra) >= 2 and all(T0 + 9 * DAY + 3600 <= j.submit <= T0 + 9 * DAY + 3720 for j in extra)
    got = h.with_jobs(extra).replayed_from(T0 + 9 * DAY + 1800)   # the tail ended; the forecast's day is ahead
    assert {j.key for j in got.jobs} == {j.key for j in extra}
    assert all(j.synthetic == "forecast-mid" for j in got.jobs)


@pytest.mark.parametrize("given,expected", [
    ("2026-11-03T00:00:00", datetime(2026, 11, 3, tzinfo=timezone.utc).timestamp()),
    ("2026-11-03T01:00:00+01:00", datetime(2026, 11, 3, tzinfo=timezone.utc).timestamp()),
    ("2026-11-03T00:00:00Z", datetime(2026, 11, 3, tzinfo=timezone.utc).timestamp()),
    ("2026-11-03", datetime(2026, 11, 3, tzinfo=timezone.utc).timestamp()),
    ("+2h", T0 + 7200),
    (" + 8d ", T0 + 8 * DAY),
    (date(2026, 11, 3), datetime(2026, 11, 3, tzinfo=timezone.utc).timestamp()),
    (datetime(2026, 11, 3, 6), datetime(2026, 11, 3, 6, tzinfo=timezone.utc).timestamp()),
])
def test_moment_forms(given, expected):
    assert moment(given, T0) == expected


@pytest.mark.parametrize("given", ["yesterday", "+", "+2 parsecs", "2026-13-01", 5, ""])
def test_moment_refuses_what_it_cannot_read(given):
    with pytest.raises(ValueError, match="expected a (date-time like 2026-12-01T00:00:00 or an offset|duration)"):
        moment(given, T0)


def test_cli_from_errors_are_one_line(tmp_path):
    """A bad --from and a --from past the history each end in one line naming the option or the trace."""
    import subprocess
    import sys

    trace = tmp_path / "history.txt"
    r = subprocess.run([sys.executable, "-m", "slurmtools", "sandbox", "example-trace", "--out", str(trace),
                        "--jobs", "20", "--hours", "0.5", "--seed", "3"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    base = [sys.executable, "-m", "slurmtools", "sandbox", "replay", "--trace", str(trace), "--site",
            "site_configs/example/site.toml", "--workdir", str(tmp_path / "w")]
    bad = subprocess.run(base + ["--from", "noon"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "--from: expected a date-time like" in bad.stderr and "'noon'" in bad.stderr
    past = subprocess.run(base + ["--from", "+30d"], cwd=REPO, capture_output=True, text=True)
    assert past.returncode == 2 and past.stderr.count("\n") == 1, past.stderr
    assert f"{trace}: no job submitted, queued or running at or after" in past.stderr
    assert not (tmp_path / "w").exists()   # refused before any lab came up
