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
from slurmtools.slurm.parsable import MAX_EXTRA_PIECES

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
    t0 = datetime(2026, 11, 2, 8).timestamp()   # sacct writes local times
    assert (j.submit, j.start, j.run_s, j.limit_s, j.gpus, j.nodes, j.cpus) == (t0, t0 + 300, 3600.0, 7200.0, 8, 1, 32)


# ---- values read as other values, or as unset and then filled with a default

@pytest.mark.parametrize("field,value", [
    ("ReqTRES", "billing=8,cpu=32,gres/gpu=-1,node=1"),     # was a job of -1 GPUs
    ("ReqTRES", "cpu=32,gres/gpu:h100=٣,node=1"),           # int() reads ٣ as 3
    ("ReqTRES", "cpu=32,gres/gpu=8,gres/gpu=2,node=1"),     # the last of two counts won
    ("ReqTRES", "nan"),                                     # no TRES item: 0 GPUs, nodes from NodeList
    ("TimelimitRaw", "٣"),                                   # 3 minutes
    ("TimelimitRaw", "2h"),                                  # unreadable: the partition's limit instead
    ("Submit", "2026-02-30T08:00:00"),                       # unset: the job's Start taken for its submission
    ("Submit", "2026-11-02"),                                # a date alone, read as midnight
    ("End", "2026-11-02T09:05:00+14:00"),                    # sacct writes no offset
    ("End", "soon"),                                         # unset: the job left out as still running
    ("Start", "٢٠٢٦-11-02T08:05:00"),
    ("State", "COMPLETED\x00"),
    ("JobID", "1\u00b2"),
    ("Account", "vi\tsion"),                                 # into sbatch --account= and the sandbox's users
    ("QOS", "standard\x1b"),
    ("User", "ann bob"),
])
def test_a_value_the_trace_would_read_as_another_is_refused_naming_line_and_field(tmp_path, field, value):
    refused(dump(tmp_path, **{field: value}), f"{field}: ")


@pytest.mark.parametrize("changed,words", [
    ({"End": "2026-11-02T08:00:00"}, ["job 10: End ", "is before its Start"]),     # was a run of 0 s
    ({"Submit": "2026-11-02T09:00:00"}, ["job 10: Start ", "is before its Submit"]),
    ({"Submit": "Unknown"}, ["job 10: Submit is unknown"]),                     # was its Start
    ({"TimelimitRaw": "0"}, ["job 10: a time limit of 0"]),                     # `--time=0` is no limit to Slurm
])
def test_times_out_of_order_or_unknown_are_refused_not_defaulted(tmp_path, changed, words):
    refused(dump(tmp_path, **changed), *words, line=None)


def test_a_dump_without_jobid_keys_jobs_by_jobidraw(tmp_path):
    """Every job was keyed "" and the trace held one job (the last)."""
    head = HEAD.replace("JobID|", "", 1)
    p = tmp_path / "h.sacct"
    rows = ["|".join({**GOOD, "JobIDRaw": str(n)}[f] for f in head.split("|")) for n in (10, 11)]
    p.write_text("\n".join([head, *rows]) + "\n")
    assert [j.key for j in load_trace(str(p)).jobs] == ["10", "11"]


# ---- values out of range: tracebacks before

def test_a_time_limit_past_slurms_largest_is_refused(tmp_path):
    """A 40-digit TimelimitRaw was an OverflowError (int too large to convert to float)."""
    refused(dump(tmp_path, TimelimitRaw="9" * 40), "TimelimitRaw: ", "largest time limit")


def test_a_nodelist_that_is_not_a_hostlist_is_refused_by_every_sacct_reader(tmp_path):
    """`expand` raised ValueError out of parse_sacct (the trace, policy replay, the live backend)."""
    refused(dump(tmp_path, ReqTRES="cpu=32,gres/gpu=8", NodeList="gpu[0-99999999]"), "NodeList: ", "too large")
    with pytest.raises(ParseError, match=r"^s:2: NodeList: bad hostlist 'gpu\[01-03': "):
        parse_sacct(HEAD + "\n" + "|".join({**GOOD, "NodeList": "gpu[01-03"}[f] for f in FIELDS), "s")


def test_superscript_digits_in_sacct_numbers_are_not_a_traceback():
    """`'²'.isdigit()` is true and int('²') a ValueError: JobIDRaw and ElapsedRaw of `²` ended parse_sacct. Then
    they were read as job 0 and 0 s; now each is refused in one line naming the line and the field."""
    head = HEAD + "|ElapsedRaw"
    row = "|".join({**GOOD, "JobIDRaw": "²", "ElapsedRaw": "²"}[f] for f in head.split("|"))
    with pytest.raises(ParseError, match=r"^s:2: JobIDRaw: '²' is not a job id"):
        parse_sacct(head + "\n" + row, "s")
    row = "|".join({**GOOD, "ElapsedRaw": "²"}[f] for f in head.split("|"))
    with pytest.raises(ParseError, match=r"^s:2: ElapsedRaw: not a whole number: '²'"):
        parse_sacct(head + "\n" + row, "s")


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


def test_a_line_of_many_delimiters_is_refused_at_once(tmp_path):
    """Fitting 200,000 '|' of one line to its fields took minutes (quadratic): refused before, in one line."""
    p = dump(tmp_path, JobName="x" + "|" * (MAX_EXTRA_PIECES + 1))
    t = time.monotonic()
    refused(p, f"{MAX_EXTRA_PIECES + 14} '|' on one line for 14 fields")
    assert time.monotonic() - t < 1


# ---- campaign files and --from

@pytest.fixture(scope="module")
def site():
    return load_site(str(REPO / "site_configs" / "example" / "site.toml"))


@pytest.fixture
def trace():
    return Trace((TraceJob(key="1", submit=T0, user="bob", account="nlp", tier="standard", partition="gpu", nodes=1,
                           gpus=8, gpu_type="h100", cpus=32, run_s=3600.0, limit_s=7200.0, state="COMPLETED",
                           start=T0),), "hist.sacct")


BASE = '[[campaign]]\nname = "sweep"\naccount = "vision"\njob_gpus = 16\nrun_time = "2h"\njobs = 5\n'


@pytest.mark.parametrize("extra,where,message", [
    ('start = "+99999999999999999999d"\n', "start", "out of range"),            # OverflowError in the notes
    ("start = 0001-01-01T00:00:00+14:00\n", "start", "out of range"),           # ValueError: year 0
    ('duration = "99999999999999999999d"\narrival = "uniform"\n', "duration", "years 1 to 9999"),  # submits past 9999
    ('start = 9999-12-31T22:00:00\n', "start", "the campaign would run past 9999-12-31T23:59:59Z"),
    ("run_time = " + "9" * 400 + "\n", "run_time", "expected a duration"),      # OverflowError in the unit hint
    ('duration = "٣h"\narrival = "uniform"\n', "duration", "ASCII digits"),       # read as 3h
    ('start = "+٣h"\n', "start", "expected a date-time"),                       # read as 3h
])
def test_campaign_values_out_of_range_or_in_other_digits_are_refused(site, trace, tmp_path, extra, where, message):
    body = BASE.replace('run_time = "2h"\n', "") + extra if extra.startswith("run_time") else BASE + extra
    p = tmp_path / "c.toml"
    p.write_text(body)
    with pytest.raises(ConfigError) as e:
        load_campaigns(str(p), site, trace)
    msg = str(e.value)
    assert msg.startswith(f"{p}: campaign[0].{where}: ") and message in msg and "\n" not in msg, msg


def test_a_campaign_number_of_5000_digits_is_refused_in_one_line(site, trace, tmp_path):
    """tomllib's int() refuses past 4300 digits with a ValueError load_toml did not catch."""
    p = tmp_path / "c.toml"
    p.write_text(BASE.replace("jobs = 5", "jobs = " + "9" * 5000))
    with pytest.raises(ConfigError, match=r"invalid TOML: a number too long to read") as e:
        load_campaigns(str(p), site, trace)
    assert str(e.value).startswith(f"{p}: ")


@pytest.mark.parametrize("given", ["+99999999999999999999d", "9999-12-31T23:00:00-14:00", "+٣h"])
def test_moment_refuses_times_a_datetime_cannot_show(given):
    """--from and a campaign's start: past year 9999 the replay's notes could not print it."""
    with pytest.raises(ValueError, match="out of range|expected a date-time"):
        moment(given, T0)
