"""The sandbox's history reader (`load_trace`) in a zone with clock changes: sacct prints local wall-clock times,
and the autumn change prints an hour of them twice. The reader took every time in that hour as its first pass, so
a run from the first pass into the second read an hour short or was refused (End before Start), and a run started
in the second pass read as started an hour early (a requeued job's runs in the wrong order, a Start before its
Submit). It now reads them as the report does (`reports.zone.resolve`, docs/reports.md): by ElapsedRaw or Elapsed,
else so that End is not before Start, else as the first pass, with a note."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from slurmtools.errors import ParseError
from slurmtools.sandbox.trace import load_trace
from tests.inproc import sacct_printing as _sacct

HEAD = "JobID|JobIDRaw|User|Account|Partition|QOS|State|Submit|Start|End|ElapsedRaw|TimelimitRaw|NodeList|ReqTRES"
#: Europe/Berlin's autumn change of 2026: 03:00 CEST back to 02:00 CET at 01:00 UTC on 2026-10-25
BERLIN_DAY = "2026-10-25"
#: America/New_York's: 02:00 EDT back to 01:00 EST at 06:00 UTC on 2026-11-01
NEW_YORK_DAY = "2026-11-01"


def utc(day: str, hm: str) -> float:
    """The instant of a UTC wall-clock time on `day` (an expected value, written out by hand)."""
    return datetime.fromisoformat(f"{day}T{hm}:00").replace(tzinfo=timezone.utc).timestamp()


def row(job, submit, start, end, elapsed="", state="COMPLETED", head=HEAD):
    values = {"JobID": str(job), "JobIDRaw": str(job), "User": "ann", "Account": "vision", "Partition": "gpu",
              "QOS": "standard", "State": state, "Submit": submit, "Start": start, "End": end,
              "ElapsedRaw": str(elapsed), "Elapsed": str(elapsed), "TimelimitRaw": "600", "NodeList": "gpu01",
              "ReqTRES": "cpu=4,gres/gpu=1,node=1"}
    return "|".join(values[f] for f in head.split("|"))


def history(tmp_path, *rows, head=HEAD) -> str:
    p = tmp_path / "h.sacct"
    p.write_text(head + "\n" + "\n".join(rows) + "\n")
    return str(p)


def read(path: str):
    """{job: (instant of its submission, of its start, its run time)}, and the trace."""
    t = load_trace(path)
    return {j.key: (j.submit, j.start, j.run_s) for j in t.jobs}, t


# ---- Europe/Berlin: 02:00-03:00 twice; first pass CEST (UTC+2), second CET (UTC+1)

def test_a_run_from_the_first_pass_into_the_second_is_read_by_elapsed_raw(tmp_path, in_zone):
    """02:40 (first pass) to 02:20 (second pass) ran 40 minutes: it was refused (End before Start). 02:20 to 02:40
    across both passes ran 80 minutes: it read as 20."""
    in_zone("Europe/Berlin")
    d = BERLIN_DAY
    jobs, t = read(history(tmp_path,
                           row(1, f"{d}T02:30:00", f"{d}T02:40:00", f"{d}T02:20:00", 2400),
                           row(2, f"{d}T02:15:00", f"{d}T02:20:00", f"{d}T02:40:00", 4800)))
    assert jobs == {"1": (utc(d, "00:30"), utc(d, "00:40"), 2400.0),
                    "2": (utc(d, "00:15"), utc(d, "00:20"), 4800.0)}
    assert t.span_s == utc(d, "01:40") - utc(d, "00:15")
    assert t.notes == ()


def test_a_run_in_the_second_pass_starts_an_hour_later_than_the_first_pass_says(tmp_path, in_zone):
    """Submitted 01:50 (CEST), started 02:10 in the second pass, ended 03:30: it waited 80 minutes and ran 80; it
    read as waiting 20 and running 140. One submitted 02:50 (first pass) that started 02:05 (second pass) was
    refused (Start before its Submit)."""
    in_zone("Europe/Berlin")
    d = BERLIN_DAY
    jobs, t = read(history(tmp_path,
                           row(3, f"{d}T01:50:00", f"{d}T02:10:00", f"{d}T03:30:00", 4800),
                           row(4, f"{d}T02:50:00", f"{d}T02:05:00", f"{d}T04:00:00", 6900)))
    assert jobs == {"3": (utc("2026-10-24", "23:50"), utc(d, "01:10"), 4800.0),
                    "4": (utc(d, "00:50"), utc(d, "01:05"), 6900.0)}
    # the replay's submit offsets (after the first submission) and recorded waits
    assert [(j.key, j.submit - t.first_submit, j.history_wait_s) for j in t.jobs] == [
        ("3", 0.0, 4800.0), ("4", 3600.0, 900.0)]


def test_starts_in_the_hour_keep_their_order(tmp_path, in_zone):
    """Job 5 started 02:40 in the first pass, job 6 02:10 in the second (after it): 6 read as starting first, 30
    minutes before 5."""
    in_zone("Europe/Berlin")
    d = BERLIN_DAY
    jobs, t = read(history(tmp_path,
                           row(5, f"{d}T02:35:00", f"{d}T02:40:00", f"{d}T05:00:00", 3 * 3600 + 1200),
                           row(6, f"{d}T02:05:00", f"{d}T02:10:00", f"{d}T05:00:00", 3 * 3600 - 600)))
    assert jobs["5"][1] < jobs["6"][1]
    assert jobs["6"][1] - jobs["5"][1] == 1800
    # job 6's Submit, 02:05, fits either pass before its Start: read as the first, and said in a note
    assert jobs["6"][0] == utc(d, "00:05")
    assert t.notes == ("1 job line(s) hold a time in the repeated hour of a change back from daylight-saving time "
                       "in Europe/Berlin that nothing tells apart (no ElapsedRaw on the line, or a Submit that fits "
                       "either pass): read as that hour's first pass",)


def test_a_requeued_jobs_runs_keep_their_order(tmp_path, in_zone):
    """`sacct -D`: run 1 02:40-02:50 (first pass, requeued), run 2 02:10 (second pass) to 03:30. Run 2 read as the
    earlier run, so the job read as ending REQUEUED and was left out: nothing to replay."""
    in_zone("Europe/Berlin")
    d = BERLIN_DAY
    jobs, t = read(history(tmp_path,
                           row(7, f"{d}T02:30:00", f"{d}T02:40:00", f"{d}T02:50:00", 600, state="REQUEUED"),
                           row(7, f"{d}T02:30:00", f"{d}T02:10:00", f"{d}T03:30:00", 4800)))
    assert jobs == {"7": (utc(d, "00:30"), utc(d, "01:10"), 4800.0)}
    assert t.jobs[0].state == "COMPLETED"


def test_without_elapsed_raw_the_order_of_start_and_end_tells_the_passes_apart(tmp_path, in_zone):
    """No ElapsedRaw (it is not required): 02:40 to 02:20 can only be first pass to second (40 minutes); 02:20 to
    02:40 fits both readings, is read as the first pass (20 minutes), and a note says so."""
    in_zone("Europe/Berlin")
    d = BERLIN_DAY
    head = HEAD.replace("|ElapsedRaw", "")
    jobs, t = read(history(tmp_path,
                           row(1, f"{d}T02:30:00", f"{d}T02:40:00", f"{d}T02:20:00", head=head),
                           row(2, f"{d}T02:15:00", f"{d}T02:20:00", f"{d}T02:40:00", head=head), head=head))
    assert jobs == {"1": (utc(d, "00:30"), utc(d, "00:40"), 2400.0),
                    "2": (utc(d, "00:15"), utc(d, "00:20"), 1200.0)}
    assert t.notes == ("1 job line(s) hold a time in the repeated hour of a change back from daylight-saving time "
                       "in Europe/Berlin that nothing tells apart (the history has no ElapsedRaw or Elapsed): read "
                       "as that hour's first pass",)


def test_elapsed_tells_the_passes_apart_without_elapsed_raw(tmp_path, in_zone):
    in_zone("Europe/Berlin")
    d = BERLIN_DAY
    head = HEAD.replace("ElapsedRaw", "Elapsed")
    jobs, t = read(history(tmp_path, row(2, f"{d}T02:15:00", f"{d}T02:20:00", f"{d}T02:40:00", "01:20:00",
                                         head=head), head=head))
    assert jobs == {"2": (utc(d, "00:15"), utc(d, "00:20"), 4800.0)}
    assert t.notes == ()


def test_a_time_the_spring_change_skipped_is_refused_in_one_line(tmp_path, in_zone):
    """02:30 on 2026-03-29 is no time in Berlin (sacct never prints it): it was read as 03:30."""
    in_zone("Europe/Berlin")
    p = history(tmp_path, row(1, "2026-03-29T01:50:00", "2026-03-29T02:30:00", "2026-03-29T04:00:00", 3600))
    with pytest.raises(ParseError) as e:
        load_trace(p)
    assert str(e.value) == (f"{p}:2: Start: 2026-03-29T02:30:00 is no time in Europe/Berlin: the clocks went from "
                            f"02:00 to 03:00 that night (sacct never prints it)")


# ---- America/New_York: 01:00-02:00 twice; first pass EDT (UTC-4), second EST (UTC-5)

def test_new_york_the_repeated_hour_is_01_00(tmp_path, in_zone):
    in_zone("America/New_York")
    d = NEW_YORK_DAY
    jobs, t = read(history(tmp_path,
                           # first pass into the second: 40 minutes (was refused)
                           row(1, f"{d}T01:30:00", f"{d}T01:40:00", f"{d}T01:20:00", 2400),
                           # submitted in the first pass, started in the second (was refused: Start before Submit)
                           row(2, f"{d}T01:50:00", f"{d}T01:05:00", f"{d}T03:00:00", 6900),
                           # both in the second pass, ended after the hour: 80 minutes (read as 140)
                           row(3, f"{d}T00:50:00", f"{d}T01:10:00", f"{d}T02:30:00", 4800)))
    assert jobs == {"1": (utc(d, "05:30"), utc(d, "05:40"), 2400.0),
                    "2": (utc(d, "05:50"), utc(d, "06:05"), 6900.0),
                    "3": (utc(d, "04:50"), utc(d, "06:10"), 4800.0)}
    assert [(j.key, j.submit - t.first_submit) for j in t.jobs] == [("3", 0.0), ("1", 2400.0), ("2", 3600.0)]
    assert t.notes == ()


# ---- what is read as before

@pytest.mark.parametrize("tz", ["UTC", "Asia/Tokyo", "Europe/Berlin"])
def test_times_outside_a_repeated_hour_read_as_before(tmp_path, in_zone, tz):
    """A guard, not a defect: in UTC, in a zone without a change, and away from the change, every time reads as the
    C library reads it (what the reader did before)."""
    in_zone(tz)
    jobs, t = read(history(tmp_path,
                           row(1, "2026-11-02T08:00:00", "2026-11-02T08:05:00", "2026-11-02T09:05:00", 3600),
                           row(2, "2026-07-01T02:30:00", "2026-07-01T02:40:00", "2026-07-01T03:20:00", 2400),
                           # Berlin's repeated hour's wall-clock times, a day early
                           row(3, "2026-10-24T02:30:00", "2026-10-24T02:40:00", "2026-10-24T02:50:00", 600)))
    local = lambda s: datetime.fromisoformat(s).timestamp()   # noqa: E731  the C library's reading
    assert jobs == {"1": (local("2026-11-02T08:00:00"), local("2026-11-02T08:05:00"), 3600.0),
                    "2": (local("2026-07-01T02:30:00"), local("2026-07-01T02:40:00"), 2400.0),
                    "3": (local("2026-10-24T02:30:00"), local("2026-10-24T02:40:00"), 600.0)}
    assert t.notes == ()


@pytest.mark.parametrize("tz", ["UTC", "Asia/Tokyo"])
def test_end_before_start_is_still_refused_without_a_change(tmp_path, in_zone, tz):
    """The 02:40 -> 02:20 run above is a bad row where the clock does not go back (a guard)."""
    in_zone(tz)
    d = BERLIN_DAY
    p = history(tmp_path, row(1, f"{d}T02:30:00", f"{d}T02:40:00", f"{d}T02:20:00", 2400))
    with pytest.raises(ParseError, match=r"job 1: End .* is before its Start"):
        load_trace(p)


def test_a_start_that_fits_both_passes_is_read_after_its_submit(tmp_path, in_zone):
    """Submitted 02:40 (first pass), ran 02:10-02:30 (20 minutes, ElapsedRaw 1200): both passes fit the run's
    length, but only the second comes after the submission. It was refused (Start before its Submit)."""
    in_zone("Europe/Berlin")
    d = BERLIN_DAY
    jobs, t = read(history(tmp_path, row(1, f"{d}T02:40:00", f"{d}T02:10:00", f"{d}T02:30:00", 1200)))
    assert jobs == {"1": (utc(d, "00:40"), utc(d, "01:10"), 1200.0)}
    assert t.notes == ()


# ---- `sandbox replay --since`: the backend's sacct text, read as a --trace file is

#: what the backend asks sacct for (`slurm.commands.ACCT_FIELDS`), in its order
LIVE_HEAD = ("JobID|JobIDRaw|User|Account|Partition|QOS|State|ExitCode|Submit|Eligible|Start|End|ElapsedRaw|"
             "TimelimitRaw|NodeList|AllocTRES|ReqTRES|AllocCPUS|JobName")


def _live_row(job, submit, start, end, elapsed, state="COMPLETED"):
    values = {"JobID": str(job), "JobIDRaw": str(job), "User": "ann", "Account": "vision", "Partition": "gpu",
              "QOS": "standard", "State": state, "ExitCode": "0:0", "Submit": submit, "Eligible": submit,
              "Start": start, "End": end, "ElapsedRaw": str(elapsed), "TimelimitRaw": "600", "NodeList": "gpu01",
              "AllocTRES": "billing=4,cpu=4,gres/gpu=1,node=1", "ReqTRES": "cpu=4,gres/gpu=1,node=1",
              "AllocCPUS": "4", "JobName": "train"}
    return "|".join(values[f] for f in LIVE_HEAD.split("|"))


def test_since_reads_the_backends_sacct_text_as_a_trace_file(tmp_path, in_zone, monkeypatch):
    """`--since` took the backend's records, whose times were read already, a repeated one as its first pass: job 1
    (02:40 first pass to 02:20 second) was refused (End before Start), job 2 read as 20 minutes. It now reads
    sacct's text as a --trace file: the same jobs, times and notes. sacct is asked for ElapsedRaw, every run of a
    job (-D) and no steps (-X)."""
    import slurmtools.cli.common as common
    from slurmtools.cli.sandbox import _from_slurm
    from slurmtools.slurm.commands import ACCT_FIELDS

    in_zone("Europe/Berlin")
    d = BERLIN_DAY
    text = "\n".join([LIVE_HEAD,
                      _live_row(1, f"{d}T02:30:00", f"{d}T02:40:00", f"{d}T02:20:00", 2400),
                      _live_row(2, f"{d}T02:15:00", f"{d}T02:20:00", f"{d}T02:40:00", 4800),
                      _live_row(6, f"{d}T02:05:00", f"{d}T02:10:00", f"{d}T05:00:00", 3 * 3600 - 600),
                      _live_row(7, f"{d}T02:30:00", f"{d}T02:40:00", f"{d}T02:50:00", 600, state="REQUEUED"),
                      _live_row(7, f"{d}T02:30:00", f"{d}T02:10:00", f"{d}T03:30:00", 4800)]) + "\n"
    backend = _sacct(text)
    monkeypatch.setattr(common, "backend", lambda: backend)
    t = _from_slurm("30d", {})
    assert f"--format={','.join(ACCT_FIELDS)}" in backend.argv and "ElapsedRaw" in ACCT_FIELDS
    assert {"--duplicates", "--allocations", "--allusers"} <= set(backend.argv)
    jobs = {j.key: (j.submit, j.start, j.run_s) for j in t.jobs}
    assert jobs == {"1": (utc(d, "00:30"), utc(d, "00:40"), 2400.0),
                    "2": (utc(d, "00:15"), utc(d, "00:20"), 4800.0),
                    "6": (utc(d, "00:05"), utc(d, "01:10"), 3 * 3600 - 600.0),
                    "7": (utc(d, "00:30"), utc(d, "01:10"), 4800.0)}
    p = tmp_path / "h.sacct"
    p.write_text(text)
    f = load_trace(str(p))
    assert t.jobs == f.jobs and t.notes == f.notes
    assert t.source == "sacct (last 30d)" and t.notes == (   # job 6's Submit fits either pass
        "1 job line(s) hold a time in the repeated hour of a change back from daylight-saving time in "
        "Europe/Berlin that nothing tells apart (no ElapsedRaw on the line, or a Submit that fits either pass): "
        "read as that hour's first pass",)


def test_since_refuses_what_a_trace_file_refuses(in_zone, monkeypatch):
    """The backend's history is checked as a --trace file is: a time the spring change skipped is one line naming
    sacct's line and field (it was read as 03:30)."""
    import slurmtools.cli.common as common
    from slurmtools.cli.sandbox import _from_slurm

    in_zone("Europe/Berlin")
    text = LIVE_HEAD + "\n" + _live_row(1, "2026-03-29T01:50:00", "2026-03-29T02:30:00", "2026-03-29T04:00:00",
                                        3600) + "\n"
    monkeypatch.setattr(common, "backend", lambda: _sacct(text))
    with pytest.raises(ParseError) as e:
        _from_slurm("30d", {})
    assert str(e.value) == ("sacct (last 30d):2: Start: 2026-03-29T02:30:00 is no time in Europe/Berlin: the clocks "
                            "went from 02:00 to 03:00 that night (sacct never prints it)")


def test_since_without_a_change_reads_as_before(in_zone, monkeypatch):
    """A guard: in UTC the backend's history reads as its records did."""
    import slurmtools.cli.common as common
    from slurmtools.cli.sandbox import _from_slurm
    from slurmtools.sandbox.trace import trace_from_records
    from slurmtools.slurm.commands import parse_sacct

    in_zone("UTC")
    d = BERLIN_DAY
    text = "\n".join([LIVE_HEAD, _live_row(1, f"{d}T02:30:00", f"{d}T02:40:00", f"{d}T03:20:00", 2400),
                      _live_row(2, f"{d}T02:15:00", f"{d}T02:20:00", f"{d}T02:40:00", 1200)]) + "\n"
    monkeypatch.setattr(common, "backend", lambda: _sacct(text))
    t = _from_slurm("30d", {})
    assert t == trace_from_records(parse_sacct(text), "sacct (last 30d)")
    assert [j.run_s for j in t.jobs] == [1200.0, 2400.0]
