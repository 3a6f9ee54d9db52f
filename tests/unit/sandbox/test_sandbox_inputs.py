"""What the sandbox's readers refuse: one case for each class of damage the input fuzz
(tests/hostile/test_sandbox_inputs_fuzz.py) found in a history (`load_trace`) or a campaign file
(`load_campaigns`), each refused in one line naming the file and the line or key, where it was read as another
value, filled with a default, or ended in a traceback."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from slurmtools.errors import ConfigError, ParseError
from slurmtools.sandbox.campaign import load_campaigns
from slurmtools.sandbox import trace as tr
from slurmtools.sandbox.trace import Trace, TraceJob, load_trace, moment
from slurmtools.site import load_site
from slurmtools.slurm.commands import parse_sacct

REPO = Path(__file__).resolve().parents[3]
HEAD = "JobID|JobIDRaw|User|Account|Partition|QOS|State|Submit|Start|End|TimelimitRaw|NodeList|ReqTRES|JobName"
FIELDS = HEAD.split("|")
GOOD = {"JobID": "10", "JobIDRaw": "10", "User": "ann", "Account": "vision", "Partition": "gpu",
        "QOS": "standard", "State": "COMPLETED", "Submit": "2026-11-02T08:00:00", "Start": "2026-11-02T08:05:00",
        "End": "2026-11-02T09:05:00", "TimelimitRaw": "120", "NodeList": "gpu01",
        "ReqTRES": "billing=8,cpu=32,gres/gpu:h100=8,gres/gpu=8,node=1", "JobName": "train"}
T0 = datetime(2026, 11, 2, 8, tzinfo=timezone.utc).timestamp()


def dump(tmp_path, head: str = HEAD, **changed) -> str:
    """A history of one job (line 2), its fields as GOOD with `changed` ones replaced."""
    row = {**GOOD, **changed}
    p = tmp_path / "h.sacct"
    p.write_text(head + "\n" + "|".join(row[f] for f in head.split("|")) + "\n")
    return str(p)


def refused(path: str, *words: str, line: int | None = 2) -> str:
    with pytest.raises(ParseError) as e:
        load_trace(path)
    msg = str(e.value)
    where = f"{path}:{line}: " if line else f"{path}: "
    assert msg.startswith(where) and "\n" not in msg and all(w in msg for w in words), msg
    return msg


def test_the_good_line_is_read(tmp_path):
    (j,) = load_trace(dump(tmp_path)).jobs
    assert (j.submit, j.start, j.run_s, j.limit_s, j.gpus, j.nodes, j.cpus) == (T0, T0 + 300, 3600.0, 7200.0, 8, 1, 32)


def test_a_dump_without_jobid_keys_jobs_by_jobidraw(tmp_path):
    """Every job was keyed "" and the trace held one job (the last)."""
    head = HEAD.replace("JobID|", "", 1)
    p = tmp_path / "h.sacct"
    rows = ["|".join({**GOOD, "JobIDRaw": str(n)}[f] for f in head.split("|")) for n in (10, 11)]
    p.write_text("\n".join([head, *rows]) + "\n")
    assert [j.key for j in load_trace(str(p)).jobs] == ["10", "11"]


def test_a_nodelist_that_is_not_a_hostlist_is_refused_by_every_sacct_reader(tmp_path):
    """`expand` raised ValueError out of parse_sacct (the trace, policy replay, the live backend)."""
    refused(dump(tmp_path, ReqTRES="cpu=32,gres/gpu=8", NodeList="gpu[0-99999999]"), "NodeList: ", "too large")
    with pytest.raises(ParseError, match=r"^s:2: NodeList: bad hostlist 'gpu\[01-03': "):
        parse_sacct(HEAD + "\n" + "|".join({**GOOD, "NodeList": "gpu[01-03"}[f] for f in FIELDS), "s")


def test_superscript_digits_in_sacct_numbers_are_not_a_traceback():
    """`'²'.isdigit()` is true and int('²') a ValueError: JobIDRaw and ElapsedRaw of `²` ended parse_sacct."""
    head = HEAD + "|ElapsedRaw"
    row = "|".join({**GOOD, "JobIDRaw": "²", "ElapsedRaw": "²"}[f] for f in head.split("|"))
    (r,) = parse_sacct(head + "\n" + row, "s")
    assert (r.job_id_raw, r.elapsed_s) == (0, 0)   # unreadable, as for any other text (the reports count them)


def test_a_year_9999_end_west_of_utc_is_refused_in_one_line(tmp_path, monkeypatch):
    """sacct writes local times; 9999-12-31T23:59:59 in a zone behind UTC is past what a datetime holds: an
    OverflowError from parse_sacct before."""
    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    try:
        refused(dump(tmp_path, End="9999-12-31T23:59:59"), "End: ", "out of range")
        with pytest.raises(ParseError, match=r"^s:2: End: '9999-12-31T23:59:59' is out of range"):
            parse_sacct(HEAD + "\n" + "|".join({**GOOD, "End": "9999-12-31T23:59:59"}[f] for f in FIELDS), "s")
    finally:
        monkeypatch.undo()
        time.tzset()
