"""Seeded mutations of the capacity sandbox's two input files: the recorded history (`sacct --parsable2` dumps read
by `load_trace`) and campaign files (`[[campaign]]` TOML read by `load_campaigns` against the example site).

Each mutated file is cut short, loses, doubles or swaps lines, has a token or a whole field replaced by garbage
(empty, 99999999999999999999, NaN, inf, -1, `٣`, `²`, `1_0`, a NUL, a tab, dates in year 1, 9999 or 99999, a 30th
of February, hostlists of a billion hosts, TRES items of another sign), invalid UTF-8, CRLF ends, a BOM, a line
200,000 characters long; a campaign file also gets values of another type or range (a date where a duration goes,
an inline table where a count goes, `+99999999999999999999d`), keys dropped, doubled or unknown, tables doubled.
The contract: the reader returns jobs the sandbox can submit (finite submit times a datetime can show, finite
non-negative run times, positive limits, at least one node, GPU and CPU counts >= 0, printable names; a campaign's
jobs at most MAX_JOBS), and what the replay does next with them (the speed-up bounds, the sbatch arguments) runs;
or it refuses the file with slurmtools' own error in one line that starts with the file's path. Never another
exception, a message over several lines, or a hang. A few of the same mutations go through the real CLI in a
subprocess (stopped before any lab starts by a --speedup no site holds): exit 2 with one line, never a traceback.

Each case is (sample, mutation number); the mutation is drawn from a generator seeded with both, so a failure
reproduces from its id alone, and the assertion message names the edits."""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path

import pytest

from slurmtools.errors import SlurmtoolsError
from slurmtools.sandbox import clocks
from slurmtools.sandbox.campaign import MAX_JOBS, add_to, load_campaigns
from slurmtools.sandbox.example_trace import generate
from slurmtools.sandbox.submission import build
from slurmtools.sandbox.timescale import Scale, default_speedup
from slurmtools.sandbox.trace import Trace, load_trace
from slurmtools.site import load_site
from tests.hostile.mutations import BAD_UTF8, bounded, line_edit

REPO = Path(__file__).resolve().parents[2]
SITE_FILE = REPO / "site_configs" / "example" / "site.toml"
REPORTS = REPO / "tests" / "data" / "reports"
MUTATIONS = 1000        # per sample; 14 samples
SECONDS_PER_READ = 10   # a read that takes longer is a hang
MEMORY_PER_READ = 2 << 30   # bytes of address space a read may add
SITE = load_site(str(SITE_FILE))
#: what the CLI passes load_trace: the candidate site's partition limits (for jobs recorded with Partition_Limit)
LIMITS = {p.name: float(p.max_time) for p in SITE.partitions.values()}


@dataclass(frozen=True)
class Sample:
    kind: str    # "trace" or "campaign"
    name: str    # the file's name, the case's id
    text: bytes


# ------------------------------------------------------------------------------------------------- samples

def _with_qos(path: Path) -> bytes:
    """A slurm2sql dump (real sacct output, with Timelimit and Elapsed as Slurm formats them, no TRES) with a QOS
    column added after Account, so that the trace reads it."""
    out = []
    for i, line in enumerate(path.read_text().splitlines(keepends=True)):
        f = line.split("|")
        f.insert(6, "QOS" if i == 0 else ("normal" if f[3] else ""))
        out.append("|".join(f))
    return "".join(out).encode()


def trace_samples() -> list[Sample]:
    """The histories the sandbox's tests read: a generated one (`sandbox example-trace`), the unit tests' rows
    (requeued runs, an array, jobs that never started or still run), the lab's accounting dumps with '|' and ','
    delimiters, and the real slurm2sql dumps as they are (no QOS: refused) and with a QOS column."""
    from tests.unit.sandbox.test_sandbox_core import ROWS, _dump

    out = [Sample("trace", "example-trace.sacct", generate(SITE, 40, 2.0, seed=1).encode()),
           Sample("trace", "core-rows.sacct", _dump(ROWS).encode())]
    for name in ("sacct-lab-22.05.8-acct-P.txt", "sacct-lab-22.05.8-acct-p-comma.txt", "slurm2sql_test-data1.csv",
                 "slurm2sql_test-data2.csv"):
        out.append(Sample("trace", name, (REPORTS / name).read_bytes()))
    for n in (1, 2):
        out.append(Sample("trace", f"slurm2sql-{n}-with-qos.sacct", _with_qos(REPORTS / f"slurm2sql_test-data{n}.csv")))
    return out


#: campaign files of the sandbox's tests (test_sandbox_campaign.py, test_sandbox_lab.py) beside the example one
_BASE = '[[campaign]]\nname = "sweep"\naccount = "vision"\njob_gpus = 16\nrun_time = "2h"\n'
CAMPAIGNS = {
    "burst.toml": _BASE + 'gpus = 64\nduration = "5h"\nstart = "+1h"\ntier = "production"\n',
    "uniform.toml": _BASE + 'jobs = 5\nduration = "10h"\narrival = "uniform"\nstart = 2026-11-02T09:30:00\n'
                            'time_limit = "3h"\nuser = "vis-bot"\n',
    "poisson.toml": _BASE + 'jobs = 400\nduration = "1d"\narrival = "poisson"\nstart = "2026-11-02T12:00:00Z"\n'
                            'seed = 7\n',
    "three.toml": _BASE + 'jobs = 2\n\n[[campaign]]\nname = "late"\naccount = "students"\njob_gpus = 4\njobs = 1\n'
                          'run_time = "1h"\nstart = "+30d"\n\n[[campaign]]\nname = "wide"\naccount = "nlp"\n'
                          'tier = "standard"\njob_gpus = 32\ngpus = 128\nrun_time = "1h"\n',
    "lab.toml": '[[campaign]]\nname = "sweep"\naccount = "vision"\ntier = "production"\njob_gpus = 8\njobs = 4\n'
                'start = "+20m"\nrun_time = "10m"\ntime_limit = "1h"\narrival = "burst"\n',
}


def campaign_samples() -> list[Sample]:
    example = REPO / "site_configs" / "example" / "campaign-vision.toml"
    return [Sample("campaign", example.name, example.read_bytes())] + [
        Sample("campaign", name, text.encode()) for name, text in CAMPAIGNS.items()]


TRACES = trace_samples()
CAMPAIGN_FILES = campaign_samples()


# ------------------------------------------------------------------------------------------------- mutations

#: what replaces a token: empty, out of range, signed, not a number, digits of other scripts, letters, blanks and
#: control characters, the formats' own punctuation, and very long words
GARBAGE = ("", "99999999999999999999", "-1", "-0", "+7", "1_0", "0x1f", "1e999", "NaN", "nan", "inf", "٣", "²",
           "Ω", "е", "\t", "\x00", "\x0b", "\x85", "\u2028", '"', "'", "[", "]", "=", ":", ",", "|", "-", "\\",
           "#", "{}", "x" * 5000, "9" * 400)
#: what replaces a whole sacct field: the garbage above, times out of range or of another form, and the values of
#: the dump's other fields (limits, states, TRES and hostlists of another sign or size)
FIELD_VALUES = GARBAGE + (
    "9999-12-31T23:59:59", "0001-01-01T00:00:00", "99999-01-01T00:00:00", "2026-02-30T08:00:00",
    "2026-11-02T08:00:00+14:00", "2026-11-02", "1970-01-01T00:00:00", "2026-11-02 08:00:00", "Unknown", "None",
    "UNLIMITED", "Partition_Limit", "0", "4294967295", "5-00:00:00", "-5", "COMPLETED", "RUNNING", "PENDING",
    "CANCELLED by 0", "REQUEUED", "gpu[0-99999999]", "gpu[01-03", "gpu[03-01]", "None assigned",
    "node=0", "gres/gpu=-1", "gres/gpu:h100=٣", "gres/gpu=99999999999999999999", "gres/gpu:a=1,gres/gpu:b=1",
    "cpu=-4,node=1", "node=1_0,gres/gpu=2", "billing=1,cpu=1,gres/gpu=2,node=-1", "1_0", "1200_٣", "12_[0-3]")
TOKEN = (rb"\S+", rb"[0-9]+", rb"[A-Za-z0-9_]+", rb"[^|,=\s]+")
#: TOML values a campaign key may get instead of its own: another type, out of range, not finite, lookalikes
TOML_VALUES = ("", -1, 0, 1, 3, 7, 99999999999999999999, 2 ** 63, 1e308, float("inf"), float("nan"), -0.0, 2.5,
               True, [], {}, [1, "a"], {"a": 1}, "٣", "²", "x" * 5000, "\x00", "\t", "\u2028", date(1, 1, 1),
               date(9999, 12, 31), datetime(9999, 12, 31, 23, 59, 59), datetime(1, 1, 1),
               datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
               datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-14))), time(12, 0),
               "+2h", "+99999999999999999999d", "+1e999h", "+-5m", "+NaNh", "+٣h", "-99999999999d",
               "9999-12-31T23:59:59", "0001-01-01T00:00:00", "0001-01-01T00:00:00+14:00", "2026-02-30",
               "99999-01-01", "1_0", "5m", "0s", "-1h", "1e3h", "٣h", "1_0h", "9" * 400 + "d", "99999999999999999999s",
               "1.5h", "burst", "uniform", "poisson", "vision", "nlp", "h100", "gpu", "cpu", "scavenger",
               "production", "a" * 64, "c-sweep-0")
CAMPAIGN_KEYS = ("name", "account", "user", "tier", "partition", "gpu_type", "job_gpus", "nodes_per_job", "gpus",
                 "jobs", "start", "duration", "run_time", "time_limit", "arrival", "seed", "colour", "Job_gpus")


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _toml_value(v) -> str:
    """`v` as TOML writes it (strings escaped wherever TOML asks: quotes, backslashes, control characters)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, date, time)):
        return v.isoformat() if isinstance(v, (date, time)) else str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, str):
        return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7f or c in '"\\' else c
                             for c in v) + '"'
    if isinstance(v, list):
        return "[" + ", ".join(map(_toml_value, v)) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"


def _toml(doc: dict) -> bytes:
    """A campaign document written back: scalars first, then [[name]] tables (each key quoted)."""
    head, tables = [], []
    for k, v in doc.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for t in v:
                tables.append(f"\n[[{json.dumps(k)}]]\n" + "".join(f"{json.dumps(a)} = {_toml_value(b)}\n"
                                                               for a, b in t.items()))
        else:
            head.append(f"{json.dumps(k)} = {_toml_value(v)}\n")
    return ("".join(head) + "".join(tables)).encode()


def _mutate_toml(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A key of a campaign set to another value (or an unknown key added), dropped, or a table doubled or
    replaced by a value."""
    import tomllib

    try:
        doc = tomllib.loads(data.decode())
    except ValueError:   # not UTF-8, not TOML, or a number of over 4300 digits
        return data, "toml: not TOML any more, unchanged"
    tables = doc.get("campaign")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        return data, "toml: no [[campaign]] tables, unchanged"
    i = rng.randrange(len(tables))
    t = tables[i]
    how = rng.choice(("set", "set", "set", "set", "drop", "double-table", "campaign-value"))
    if how == "set":
        key = rng.choice(CAMPAIGN_KEYS)
        t[key] = rng.choice(TOML_VALUES)
        what = f"campaign[{i}].{key} = {_toml_value(t[key])[:40]}"
    elif how == "drop" and t:
        key = rng.choice(list(t))
        del t[key]
        what = f"campaign[{i}].{key} dropped"
    elif how == "double-table":
        tables.insert(i, dict(t))
        what = f"campaign[{i}] doubled"
    else:
        doc["campaign"] = rng.choice(TOML_VALUES)
        what = f"campaign = {_toml_value(doc['campaign'])[:40]}"
    return _toml(doc), f"toml {what}"


def _mutate_field(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A whole field of a data line of a parsable dump replaced by one of FIELD_VALUES."""
    lines = _lines(data)
    if len(lines) < 2:
        return data, "field: no data line, unchanged"
    m = re.match(rb"[A-Za-z][A-Za-z0-9_]*([^A-Za-z0-9_]+)", lines[0])
    if not m:
        return data, "field: no header, unchanged"
    delim = m.group(1)
    names = lines[0].rstrip(b"\r\n").split(delim)
    k = rng.randrange(1, len(lines))
    body = lines[k].rstrip(b"\r\n")
    fields = body.split(delim)
    f = rng.randrange(min(len(fields), len(names)) or 1)
    new = rng.choice(FIELD_VALUES).encode()
    fields[f] = new
    lines[k] = delim.join(fields) + lines[k][len(body):]
    return b"".join(lines), f"line {k + 1} field {names[f][:20].decode(errors='replace')} -> {new[:40]!r}"


def _mutate(data: bytes, rng: random.Random, kind: str) -> tuple[bytes, str]:
    """One edit of `data` and its description."""
    lines = _lines(data)
    ops = ["cut-bytes", "cut-lines", "drop-line", "double-line", "swap-lines", "token", "token", "token", "insert",
           "crlf", "bom", "long-line", "blank-line"]
    ops += ["field"] * 8 if kind == "trace" else ["toml"] * 10
    op = rng.choice(ops)
    if op == "field":
        return _mutate_field(data, rng)
    if op == "toml":
        return _mutate_toml(data, rng)
    edited = line_edit(op, data, lines, rng)
    if edited is not None:
        return edited
    if op == "token":
        pattern = rng.choice(TOKEN)
        spans = [m.span() for m in re.finditer(pattern, data)]
        if spans:
            s, e = rng.choice(spans)
            new = rng.choice(GARBAGE).encode()
            return data[:s] + new + data[e:], f"token {data[s:e][:40]!r} at byte {s} -> {new[:40]!r}"
    if op == "insert":
        at = rng.randrange(len(data) + 1)
        new = rng.choice(BAD_UTF8 + (b"\x00", b"\t", b"\r", b"\xef\xbb\xbf"))
        return data[:at] + new + data[at:], f"insert {new!r} at byte {at}"
    if op == "crlf":
        return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"), "CRLF line ends"
    if op == "bom":
        return b"\xef\xbb\xbf" + data, "UTF-8 BOM"
    if op == "long-line" and lines:
        k = rng.randrange(len(lines))
        filler = rng.choice((b" ", b"0", b"x", b"|", b",", b"9", b"\t"))
        body = lines[k].rstrip(b"\r\n")
        return (b"".join(lines[:k]) + body + filler * (200_000 // len(filler)) + lines[k][len(body):]
                + b"".join(lines[k + 1:])), f"line {k + 1} lengthened with {filler!r} x 200000"
    if op == "blank-line" and lines:
        k = rng.randrange(len(lines) + 1)
        return b"".join(lines[:k] + [b"\n"] + lines[k:]), f"blank line before line {k + 1}"
    return data, f"{op}: nothing to do"


def mutation(sample: Sample, number: int) -> tuple[bytes, list[str]]:
    """The `number`th mutation of `sample`: one to three edits from a generator seeded with both."""
    rng = random.Random(f"{sample.name}/{number}")
    data, edits = sample.text, []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        data, what = _mutate(data, rng, sample.kind)
        edits.append(what)
    return data, edits


# ------------------------------------------------------------------------------------------------- checks



def _shown(t: float, why: str, what: str) -> None:
    """`t` is a finite time a datetime can show (the replay's notes and reports print every submit and end)."""
    assert isinstance(t, float) and math.isfinite(t), f"{why}: {what} = {t!r}"
    datetime.fromtimestamp(t, timezone.utc)


def check_jobs(jobs, why: str) -> None:
    """What the sandbox needs of every job it submits."""
    for j in jobs:
        w = f"{why}: job {j.key!r}"
        for name in ("key", "user", "account", "tier"):
            v = getattr(j, name)
            assert isinstance(v, str) and v and v.isprintable(), f"{w}: {name} = {v!r}"
        for name in ("partition", "gpu_type"):
            v = getattr(j, name)
            assert v is None or (isinstance(v, str) and v and v.isprintable()), f"{w}: {name} = {v!r}"
        _shown(j.submit, w, "submit")
        assert isinstance(j.run_s, float) and math.isfinite(j.run_s) and j.run_s >= 0, f"{w}: run_s = {j.run_s!r}"
        assert j.limit_s is None or (isinstance(j.limit_s, float) and math.isfinite(j.limit_s) and j.limit_s > 0), \
            f"{w}: limit_s = {j.limit_s!r}"
        assert isinstance(j.nodes, int) and j.nodes >= 1, f"{w}: nodes = {j.nodes!r}"
        assert isinstance(j.gpus, int) and j.gpus >= 0, f"{w}: gpus = {j.gpus!r}"
        assert j.cpus is None or (isinstance(j.cpus, int) and j.cpus >= 1), f"{w}: cpus = {j.cpus!r}"
        assert j.array_task is None or j.array_task >= 0, f"{w}: array_task = {j.array_task!r}"
        if j.start is not None:
            _shown(j.start, w, "start")
            assert j.start >= j.submit, f"{w}: started {j.submit - j.start} s before its submission"
            _shown(j.start + j.run_s, w, "end")
        else:
            _shown(j.submit + j.run_s, w, "end")


def replay_inputs(trace: Trace, why: str) -> None:
    """What `sandbox replay` computes from the trace before it brings up a lab: the speed-up and the sbatch
    arguments of every job."""
    assert isinstance(trace, Trace) and trace.jobs, why
    check_jobs(trace.jobs, why)
    assert math.isfinite(trace.span_s) and trace.span_s >= 0, f"{why}: span {trace.span_s!r}"
    for n in trace.notes:
        assert len(n.splitlines()) == 1, f"{why}: a note over several lines: {n!r}"
    limits = [j.limit_s for j in trace.jobs if j.limit_s]
    most = clocks.max_speedup("scaled", limits, SITE)[0]
    speedup = default_speedup([j.run_s for j in trace.jobs], most)
    for sub in build(trace.jobs, Scale(speedup), SITE):
        assert all(a.isprintable() for a in sub.argv), f"{why}: sbatch {sub.argv}"
        assert all(math.isfinite(w) and w >= 0 for w in sub.work_s), f"{why}: work {sub.work_s}"


def refused_in_one_line(exc: SlurmtoolsError, path: str, why: str) -> None:
    msg = str(exc)
    assert len(msg.splitlines()) == 1, f"{why}: a message over several lines: {msg!r}"
    assert msg.startswith(f"{path}:"), f"{why}: the message does not start with the file's path: {msg!r}"
    assert len(msg) <= len(path) + 600, f"{why}: a message of {len(msg)} characters: {msg[:300]!r}"


def read_trace_or_refuse(path: str, why: str) -> Trace | None:
    try:
        with bounded(SECONDS_PER_READ, MEMORY_PER_READ):
            trace = load_trace(path, partition_limits=LIMITS)
            replay_inputs(trace, why)
    except SlurmtoolsError as exc:
        refused_in_one_line(exc, path, why)
        return None
    except AssertionError:
        raise
    except Exception as exc:  # noqa: BLE001 - the defect this test looks for
        raise AssertionError(f"{why}: {type(exc).__name__}: {exc}") from exc
    return trace


def read_campaign_or_refuse(path: str, history: Trace, why: str) -> list | None:
    notes: list[str] = []
    try:
        with bounded(SECONDS_PER_READ, MEMORY_PER_READ):
            jobs = load_campaigns(path, SITE, history, notes)
            assert isinstance(jobs, list) and len(jobs) <= MAX_JOBS, f"{why}: {len(jobs)} jobs"
            assert all(j.synthetic for j in jobs), why
            assert len({j.key for j in jobs}) == len(jobs), f"{why}: jobs keyed twice"
            for n in notes:
                assert len(n.splitlines()) == 1, f"{why}: a note over several lines: {n!r}"
            check_jobs(jobs, why)
            for j in jobs:
                assert j.run_s > 0 and j.limit_s is not None and j.limit_s >= j.run_s, f"{why}: {j}"
            replay_inputs(add_to(history, jobs, notes), why)
    except SlurmtoolsError as exc:
        refused_in_one_line(exc, path, why)
        return None
    except AssertionError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"{why}: {type(exc).__name__}: {exc}") from exc
    return jobs


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[str, Trace]:
    p = tmp_path_factory.mktemp("history") / "history.sacct"
    p.write_bytes(TRACES[0].text)
    return str(p), load_trace(str(p), partition_limits=LIMITS)


@pytest.mark.parametrize("sample", TRACES, ids=lambda s: s.name)
def test_mutated_traces_are_read_or_refused_in_one_line(tmp_path, sample):
    outcomes = {"read": 0, "refused": 0}
    for number in range(MUTATIONS):
        data, edits = mutation(sample, number)
        p = tmp_path / sample.name
        p.write_bytes(data)
        why = f"trace {sample.name} mutation {number} ({'; '.join(edits)})"
        outcomes["read" if read_trace_or_refuse(str(p), why) is not None else "refused"] += 1
    assert outcomes["refused"], outcomes   # the mutations reach the reader's refusals


@pytest.mark.parametrize("sample", CAMPAIGN_FILES, ids=lambda s: s.name)
def test_mutated_campaigns_are_read_or_refused_in_one_line(tmp_path, sample, history):
    outcomes = {"read": 0, "refused": 0}
    for number in range(MUTATIONS):
        data, edits = mutation(sample, number)
        p = tmp_path / sample.name
        p.write_bytes(data)
        why = f"campaign {sample.name} mutation {number} ({'; '.join(edits)})"
        outcomes["read" if read_campaign_or_refuse(str(p), history[1], why) is not None else "refused"] += 1
    assert outcomes["read"] and outcomes["refused"], outcomes


def test_the_samples_as_they_are(tmp_path, history):
    """Every sample unmutated: the traces the sandbox reads are read (the slurm2sql dumps without QOS refused by
    the same rule; the second one's with QOS too: its records have neither TRES nor a GRES column, so their GPUs are
    not known), and every campaign file is read."""
    refused = []
    for sample in TRACES:
        p = tmp_path / sample.name
        p.write_bytes(sample.text)
        if read_trace_or_refuse(str(p), f"trace {sample.name} as it is") is None:
            refused.append(sample.name)
    assert refused == ["slurm2sql_test-data1.csv", "slurm2sql_test-data2.csv", "slurm2sql-2-with-qos.sacct"]
    for sample in CAMPAIGN_FILES:
        p = tmp_path / sample.name
        p.write_bytes(sample.text)
        assert read_campaign_or_refuse(str(p), history[1], f"campaign {sample.name} as it is"), sample.name


# ------------------------------------------------------------------------------------------------- the CLI

#: a speed-up no site holds: `sandbox replay` refuses it after reading the trace and campaigns, before any lab
NO_SPEEDUP = "1000000"


def _cli_cases(kind: str, want_read: int, want_refused: int, history: Trace | None, tmp_path: Path):
    """The first mutations of the first sample of `kind` that are read (`want_read` of them) and refused."""
    sample = TRACES[0] if kind == "trace" else CAMPAIGN_FILES[0]
    cases, got = [], {True: 0, False: 0}
    for number in range(MUTATIONS):
        data, edits = mutation(sample, number)
        p = tmp_path / f"{kind}-{number}-{sample.name}"
        p.write_bytes(data)
        why = f"{kind} {sample.name} mutation {number} ({'; '.join(edits)})"
        read = (read_trace_or_refuse(str(p), why) if kind == "trace"
                else read_campaign_or_refuse(str(p), history, why)) is not None
        if got[read] < (want_read if read else want_refused):
            got[read] += 1
            cases.append((str(p), read, why))
        if got == {True: want_read, False: want_refused}:
            break
    return cases


def test_the_cli_reads_or_refuses_in_one_line_before_any_lab(tmp_path, history):
    cases = [("trace", *c) for c in _cli_cases("trace", 2, 3, None, tmp_path)]
    cases += [("campaign", *c) for c in _cli_cases("campaign", 1, 3, history[1], tmp_path)]
    assert len(cases) == 9
    work = tmp_path / "w"
    for kind, path, read, why in cases:
        trace, add = (path, []) if kind == "trace" else (history[0], ["--add", path])
        args = ["sandbox", "replay", "--trace", trace, *add, "--site", str(SITE_FILE), "--speedup", NO_SPEEDUP,
                "--workdir", str(work)]
        r = subprocess.run([sys.executable, "-m", "slurmtools", *args], capture_output=True, text=True, cwd=REPO,
                           timeout=120)
        why = f"{why}: exit {r.returncode}, stderr {r.stderr!r}"
        assert "Traceback" not in r.stderr and r.returncode == 2, why
        lines = r.stderr.splitlines()
        blamed = f"--speedup (with --site {SITE_FILE})" if read else f"{path}:"
        assert len(lines) == 1 and lines[0].startswith(f"slurmtools: error: {blamed}"), why
    assert not work.exists()   # no lab was started
