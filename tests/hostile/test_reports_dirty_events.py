"""Class 3 for the two other inputs of a report: the sacctmgr event dump (`--events-file`, capacity) and the
decision log (`decisions.jsonl`, preemption and checkpoints). A bad row of either is skipped, listed in
bad_rows.csv with its line and reason, counted in every output, and fails the report only past the share, like a
bad sacct row; the good rows around it are read as if it were not there."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from slurmtools.reports import capacity, ingest
from tests.hostile import reports_dirty_support as d

REPO = Path(__file__).resolve().parents[2]
EV_HEADER = "NodeName|TimeStart|TimeEnd|State|Reason"
#: gpu01 down 00:00-02:00 (2 h x 8 GPUs), gpu02 drained 04:00-05:00 (1 h x 8), the cluster's registration
EV_GOOD = ["gpu01|2026-11-02T00:00:00|2026-11-02T02:00:00|DOWN|power",
           "gpu02|2026-11-02T04:00:00|2026-11-02T05:00:00|DRAIN|fix",
           "|2026-10-01T00:00:00|Unknown|UP|Cluster Registered TRES"]

#: a bad event row (gpu03 for 10 hours, which would show in the capacity if it were read) -> its reason
EV_BAD = {
    "torn line": (b"gpu03|2026-11-02T00:00:00", "torn: 2 fields, expected 5"),
    "non-ISO time": (b"gpu03|02/11/2026 00:00|2026-11-02T10:00:00|DOWN|x",
                     "field TimeStart: expected YYYY-MM-DDTHH:MM:SS, got '02/11/2026 00:00'"),
    "year 1": (b"gpu03|0001-01-01T00:00:00|2026-11-02T10:00:00|DOWN|x",
               "field TimeStart: 0001-01-01T00:00:00 is not between 1970 and 2200"),
    "text for a time": (b"gpu03|2026-11-02T00:00:00|soon|DOWN|x",
                        "field TimeEnd: expected YYYY-MM-DDTHH:MM:SS, got 'soon'"),
    "end before start": (b"gpu03|2026-11-02T10:00:00|2026-11-02T00:00:00|DOWN|x",
                         "field TimeEnd: 2026-11-02T00:00:00 is before TimeStart 2026-11-02T10:00:00"),
    "missing start": (b"gpu03|Unknown|2026-11-02T10:00:00|DOWN|x", "field TimeStart: missing"),
    "bad UTF-8 in the node": (b"gpu\xff03|2026-11-02T00:00:00|2026-11-02T10:00:00|DOWN|x",
                              "field NodeName: bytes that are not UTF-8"),
    "broken hostlist": (b"gpu[03-|2026-11-02T00:00:00|2026-11-02T10:00:00|DOWN|x",
                        "field NodeName: 'gpu[03-' is not a Slurm hostlist"),
}


def events_dump(lines: list[bytes]) -> str:
    """As the CLI reads --events-file: bytes that are not UTF-8 kept as surrogates."""
    return (b"\n".join([EV_HEADER.encode(), *lines]) + b"\n").decode("utf-8", "surrogateescape")


@pytest.mark.parametrize("kind", sorted(EV_BAD))
def test_each_bad_event_row_is_skipped_with_line_and_reason(kind):
    line, words = EV_BAD[kind]
    lines = [x.encode() for x in EV_GOOD]
    lines.insert(1, line)  # line 3 of the file
    events, first, bad = capacity.parse_events(events_dump(lines), "events.txt")
    assert sorted(events["node"]) == ["gpu01", "gpu02"]
    assert capacity.down_seconds(events, d.SINCE, d.UNTIL) == {"gpu01": 7200.0, "gpu02": 3600.0}
    assert first == capacity.first_event(events_dump([x.encode() for x in EV_GOOD]))
    assert [(b.source, b.line, b.reason) for b in bad.rows] == [("events.txt", 3, words)]
    assert bad.rows[0].text == line.decode("utf-8", "replace")
    assert (bad.total, len(bad.rows)) == (4, 1)


def test_bad_utf8_in_the_reason_keeps_the_row():
    """Reason is the admin's free text, unused by the report: its bytes do not make the row bad."""
    events, _, bad = capacity.parse_events(events_dump([b"gpu01|2026-11-02T00:00:00|2026-11-02T02:00:00|DOWN|caf\xe9",
                                                        b"gpu02|2026-11-02T00:00:00|Unknown|DOWN|a|b"]))
    assert sorted(events["node"]) == ["gpu01", "gpu02"] and not bad.rows


def test_without_a_list_the_first_bad_row_still_names_its_line():
    from slurmtools.errors import ParseError

    with pytest.raises(ParseError, match=r"^events.txt:3: torn: 2 fields, expected 5$"):
        capacity.read_events(events_dump([EV_GOOD[0].encode(), b"gpu03|2026-11-02T00:00:00"]), "events.txt")


# --- the decision log -------------------------------------------------------------------------------------------

def decision(job, event="preempted", **details) -> bytes:
    rec = {"time": 1793581200.0, "event": event, "job": job, "user": "alice", "details": details,
           "policy": "0" * 16, "writer": "test@gpu01", "seq": 1}
    return json.dumps(rec).encode()


DEC_GOOD = [decision(101, run=0, last_checkpoint="2026-11-02T01:30:00"),
            decision(102, event="admission_allowed"),
            decision(103, event="time_limit", run=0)]
#: a bad decision-log line -> its reason
DEC_BAD = {
    "torn line": (decision(104, run=0, last_checkpoint=1793583000)[:40], "not a decision record (torn or not JSON)"),
    "bad UTF-8": (b'{"event": "preempted", "job": 104, "user": "\xff"}', "not UTF-8 (byte 0xff at offset 44)"),
    "not a record": (b'["preempted", 104]', "not a decision record (no event)"),
    "deep nesting": (b"[" * 100000 + b"]" * 100000, "not a decision record (torn or not JSON)"),
    "text in the run": (decision(104, run="two", last_checkpoint=1793583000),
                        "event preempted: field details.run: 'two' is not a run index"),
    "text in the job": (decision("job104", run=0), "event preempted: field job: 'job104' is not a job id"),
    "job 0": (decision(0, run=0), "event preempted: field job: 0 is not a job id"),
    "negative run": (decision(104, run=-1), "event preempted: field details.run: -1 is not a run index"),
    "bad time": (decision(104, run=0, last_checkpoint="yesterday"),
                 "event preempted: field details.last_checkpoint: expected epoch seconds or an ISO time between 1970 "
                 "and 2200, got 'yesterday'"),
    "year 1": (decision(104, run=0, last_checkpoint="0001-01-01T00:00:00"),
               "event preempted: field details.last_checkpoint: expected epoch seconds"),
    "epoch 1e30": (decision(104, run=0, last_checkpoint=1e30),
                   "event preempted: field details.last_checkpoint: expected epoch seconds"),
}


def _spool(tmp_path, lines: list[bytes]) -> Path:
    jobs = tmp_path / "spool" / "jobs"
    jobs.mkdir(parents=True)
    (tmp_path / "spool" / "decisions.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return jobs


@pytest.mark.parametrize("kind", sorted(DEC_BAD))
def test_each_bad_decision_line_is_skipped_with_line_and_reason(tmp_path, kind):
    line, words = DEC_BAD[kind]
    lines = list(DEC_GOOD)
    lines.insert(1, line)  # line 2
    bad: list = []
    frame, notes = ingest.load_epilog(_spool(tmp_path, lines), bad_rows=bad)
    log = str(tmp_path / "spool" / "decisions.jsonl")
    assert notes == []
    dec = [b for b in bad if b.source == log]
    assert len(dec) == 1
    assert [(b.source, b.line) for b in dec[0].rows] == [(log, 2)]
    assert dec[0].rows[0].reason.startswith(words), dec[0].rows[0].reason
    assert dec[0].rows[0].text == line.decode("utf-8", "replace")
    assert (dec[0].total, len(dec[0].rows)) == (4, 1)
    # the good lines around it are read exactly
    got = frame.set_index("job_id_raw")
    assert sorted(got.index) == [101, 103]
    assert str(got.loc[101, "last_checkpoint"]) == "2026-11-02 01:30:00" and bool(got.loc[101, "preempted_reported"])
    assert bool(got.loc[103, "time_limit_reported"])


# --- the report end to end --------------------------------------------------------------------------------------

def _cli(tmp_path, *args):
    dump = tmp_path / "dump.txt"
    dump.write_bytes(d.dump(d.clean_lines()))
    return subprocess.run([sys.executable, "-m", "slurmtools.cli.main", "report", "--since", "2026-11-02",
                           "--until", "2026-11-03", "--format", "csv,json,md,html", "--out", str(tmp_path / "out"),
                           "--sacct-file", str(dump), "-q", *args],
                          capture_output=True, text=True, timeout=180, cwd=REPO)


def test_the_report_lists_and_counts_bad_event_and_decision_rows(tmp_path):
    ev = tmp_path / "events.txt"
    ev.write_bytes(b"\n".join([EV_HEADER.encode(), *(x.encode() for x in EV_GOOD), EV_BAD["bad UTF-8 in the node"][0],
                               EV_BAD["torn line"][0]]) + b"\n")
    jobs = _spool(tmp_path, [*DEC_GOOD, DEC_BAD["text in the run"][0]])
    p = _cli(tmp_path, "--events-file", str(ev), "--epilog-dir", str(jobs), "--max-bad-share", "0.5")
    assert p.returncode == 0, p.stderr
    out = tmp_path / "out"
    log = str(tmp_path / "spool" / "decisions.jsonl")
    doc = json.loads((out / "report.json").read_text())
    # 16 hosts x 8 GPUs x 24 h, less gpu01's 2 h and gpu02's 1 h: the bad rows took nothing away
    assert doc["summary"]["available_gpu_hours"] == pytest.approx(16 * 8 * 24 - 3 * 8)
    assert doc["summary"]["bad_rows"] == 3
    assert {(i["source"], i["what"], i["total"], i["bad"]) for i in doc["bad_rows"]["inputs"]} == {
        (str(ev), "rows", 5, 2), (log, "records", 4, 1)}
    assert "- Bad input rows skipped: 3 (listed in bad_rows.csv)" in (out / "summary.md").read_text()
    assert "bad input rows skipped: 3 (listed in bad_rows.csv)" in (out / "report.html").read_text()
    assert f"2 of 5 rows of {ev} were bad and skipped (40.00%); the list: bad_rows.csv" in doc["notes"]
    listed = list(csv.DictReader((out / "bad_rows.csv").open(newline="")))
    assert [(r["source"], r["line"], r["reason"]) for r in listed if r["source"] != str(tmp_path / "dump.txt")] == [
        (str(ev), "5", "field NodeName: bytes that are not UTF-8"),
        (str(ev), "6", "torn: 2 fields, expected 5"),
        (log, "4", "event preempted: field details.run: 'two' is not a run index")]
    assert listed[0]["text"] == "gpu\ufffd03|2026-11-02T00:00:00|2026-11-02T10:00:00|DOWN|x"


def test_too_many_bad_event_rows_fail_the_report_in_one_line(tmp_path):
    ev = tmp_path / "events.txt"
    ev.write_bytes(b"\n".join([EV_HEADER.encode(), *(x.encode() for x in EV_GOOD), EV_BAD["year 1"][0]]) + b"\n")
    p = _cli(tmp_path, "--events-file", str(ev), "--epilog-dir", str(tmp_path / "none"), "--max-bad-share", "0.2")
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [
        f"slurmtools: error: 1 of 4 rows of {ev} were bad and skipped (25.00%), more than --max-bad-share allows "
        f"(20%); the list: {tmp_path / 'out' / 'bad_rows.csv'}"]
    assert not (tmp_path / "out" / "report.html").exists()


def test_too_many_bad_decision_lines_fail_the_report_in_one_line(tmp_path):
    jobs = _spool(tmp_path, [*DEC_GOOD, DEC_BAD["torn line"][0]])
    p = _cli(tmp_path, "--epilog-dir", str(jobs), "--max-bad-share", "0.2")
    assert p.returncode == 1
    log = tmp_path / "spool" / "decisions.jsonl"
    assert p.stderr.strip().splitlines() == [
        f"slurmtools: error: 1 of 4 records of {log} were bad and skipped (25.00%), more than --max-bad-share "
        f"allows (20%); the list: {tmp_path / 'out' / 'bad_rows.csv'}"]
