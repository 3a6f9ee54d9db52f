"""Class 3: one bad sacct row does not abort a report. Each kind of bad row is skipped, listed with its line number
and reason, and takes exactly its own GPU-hours with it; the rows around it are read as if it were not there.
Real lab dumps have no bad row, and the careful reader reads them exactly as the fast one does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmtools.reports import metrics, sacct
from slurmtools.reports.sacct import read_sacct
from tests.hostile import reports_dirty_support as d

REPO = Path(__file__).resolve().parents[2]
CLEAN_GPU_HOURS = sum(g for _, g in d.JOBS)

#: a kind of bad row -> (the bad line, the words its reason must hold). The bad row is job 999 with 50 GPUs, so
#: reading it by mistake would show in the GPU-hours.
BAD = {
    "too few fields": ("999|999|short|alice|vision", "expected 19 fields"),
    "non-ISO time": (d.row(999, 50, Start="24/11/2026 01:00"), "field Start: '24/11/2026 01:00' is not a time"),
    "text in a number column": (d.row(999, 50, NNodes="two"), "field NNodes: 'two' is not a whole number"),
    "year-1 timestamp": (d.row(999, 50, Start="0001-01-01T00:00:00"), "field Start: 0001-01-01 00:00:00 is not "
                                                                       "between 1970 and 2200"),
    "End before Start": (d.row(999, 50, End="2026-11-01T00:00:00"), "field End: 2026-11-01 00:00:00 is before Start"),
    "gres/gpu above 2^32": (d.row(999, 50, AllocTRES="cpu=1,gres/gpu=4294967304,node=1"),
                            "field AllocTRES: a GPU count that is not a count"),
    "negative GPU count": (d.row(999, 50, AllocTRES="cpu=1,gres/gpu=-8,node=1"),
                           "field AllocTRES: a GPU count that is not a count"),
    "GPU count in other digits": (d.row(999, 50, AllocTRES="cpu=1,gres/gpu:h100=\u0663,gres/gpu=\u0663,node=1"),
                                  "field AllocTRES: a GPU count that is not a count"),   # int() read ٣ as 3
    "negative node count": (d.row(999, 50, NNodes="-3"), "field NNodes: -3 is negative"),
    "not a job id": (d.row(999, 50, JobIDRaw="abc"), "field JobIDRaw: 'abc' is not a job id"),
    # both used to end the report with pyarrow's "Failed to parse string" (digits, but no 64-bit job id)
    "job id past 64 bits": (d.row(999, 50, JobIDRaw="99999999999999999999"),
                            "field JobIDRaw: '99999999999999999999' is not a job id"),
    "job id in other digits": (d.row(999, 50, JobIDRaw="\u0669\u0669\u0669"),
                               "field JobIDRaw: '\u0669\u0669\u0669' is not a job id"),
    # a step's use belongs to its job: a step id without one was a crash (past 64 bits) or its use was dropped
    "step id past 64 bits": (d.step(999, 50, "gres/gpuutil=40").replace("999.batch|999.batch",
                                                                        "999.batch|99999999999999999999.batch"),
                             "field JobIDRaw: '99999999999999999999.batch' is not a job id and step"),
    "step id without a job": (d.step(999, 50, "gres/gpuutil=40").replace("999.batch|999.batch", "999.batch|.batch"),
                              "field JobIDRaw: '.batch' is not a job id and step"),
}


def _report(data: bytes, name: str = "dump.txt"):
    acc = read_sacct(data, source=name)
    rep = metrics.compute(acc.jobs, None, d.SINCE, d.UNTIL, notes=acc.notes, bad_rows=[acc.bad])
    return acc, rep


@pytest.mark.parametrize("kind", sorted(BAD))
def test_each_kind_of_bad_row_is_skipped_with_line_and_reason(kind):
    bad_line, words = BAD[kind]
    lines = d.clean_lines()
    lines.insert(3, bad_line)  # line 5 of the file (the header is line 1)
    acc, rep = _report(d.dump(lines))
    assert [(b.line, b.source, b.text) for b in acc.bad.rows] == [(5, "dump.txt", bad_line)]
    assert words in acc.bad.rows[0].reason
    assert acc.bad.total == 9
    assert sorted(acc.jobs["job_id_raw"]) == [j for j, _ in d.JOBS]
    assert rep.summary["gpu_hours"] == pytest.approx(CLEAN_GPU_HOURS)
    assert rep.summary["bad_rows"] == 1
    assert any(n.startswith("1 of 9 rows of dump.txt were bad and skipped") for n in rep.notes)


def test_a_line_of_50000_extra_delimiters_is_a_bad_row_at_once():
    """Fitting that many pieces to the fields took time growing with their square (200,000: minutes); the shared
    splitter refuses more than `MAX_EXTRA_PIECES` before fitting, so the report lists the line and goes on."""
    import time

    bad_line = d.row(999, 50, name="x" + "|" * 50_000)
    lines = d.clean_lines()
    lines.insert(3, bad_line)
    t = time.monotonic()
    acc, rep = _report(d.dump(lines))
    assert time.monotonic() - t < 2
    assert [(b.line, b.text) for b in acc.bad.rows] == [(5, bad_line)]
    assert "50018 '|' on one line for 19 fields: no value holds that many" in acc.bad.rows[0].reason
    assert rep.summary["gpu_hours"] == pytest.approx(CLEAN_GPU_HOURS)


def test_a_job_of_two_gpu_types_is_split_whatever_its_other_tres_items_hold():
    """The split by GPU type reads the GPU items only (checked as counts before): parse_tres now refuses `cpu=٣`,
    which the report does not read, and must not end the report."""
    alloc = "cpu=\u0663,gres/gpu:a100=2,gres/gpu:h100=6,gres/gpu=8,mem=x,node=1"
    acc = read_sacct(d.dump([d.row(1, 8, AllocTRES=alloc)]), source="x")
    assert sorted(zip(acc.jobs["gpu_type"].astype(str), acc.jobs["gpus"])) == [("a100", 2), ("h100", 6)]
    assert not acc.bad.rows


def test_gres_gpu_above_2_32_is_not_wrapped_into_a_small_count():
    """Before: 4294967304 GPUs were read as 8 (int32 wrap), silently."""
    acc = read_sacct(d.dump([d.row(1, 8, AllocTRES="cpu=1,gres/gpu=4294967304,node=1")]), source="x")
    assert len(acc.jobs) == 0 and len(acc.bad.rows) == 1


def test_year_1_no_longer_ends_the_report_with_a_traceback(tmp_path):
    lines = d.clean_lines()
    lines[0] = d.row(101, 1, Start="0001-01-01T00:00:00")
    f = tmp_path / "dump.txt"
    f.write_bytes(d.dump(lines))
    p = _cli(tmp_path, f, "--max-bad-share", "0.2")
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["summary"]["gpu_hours"] == pytest.approx(CLEAN_GPU_HOURS - 1)
    assert doc["bad_rows"]["count"] == 1 and doc["bad_rows"]["rows"][0]["line"] == 2


def test_gpuutil_is_bounded_by_the_steps_gpus_not_by_100():
    """Slurm adds NVML's per-process use over every GPU a task uses (gpu_nvml.c), so 300 is fine on 4 GPUs and
    impossible on 1; a negative or non-numeric value is never Slurm's."""
    lines = [d.row(1, 4), d.step(1, 4, "cpu=00:00:01,gres/gpuutil=300"),
             d.row(2, 1), d.step(2, 1, "cpu=00:00:01,gres/gpuutil=300"),
             d.row(3, 1), d.step(3, 1, "cpu=00:00:01,gres/gpuutil=-5"),
             d.row(4, 1), d.step(4, 1, "gres/gpumem=12G,gres/gpuutil=40")]
    acc = read_sacct(d.dump(lines), source="x")
    assert [b.line for b in acc.bad.rows] == [5, 7]
    assert all("gres/gpuutil" in b.reason for b in acc.bad.rows)
    util = dict(zip(acc.jobs["job_id_raw"], acc.jobs["gpu_util_slurm"]))
    assert util[1] == 75 and util[4] == 40  # the report reads the mean of the step's GPUs: 300 / 4
    assert acc.jobs["gpu_mem_slurm_mb"][acc.jobs["job_id_raw"] == 4].tolist() == [12 * 1024]


def test_cr_in_a_job_name_is_kept_as_text_and_cannot_forge_a_row():
    """sacct prints a CR in a job name as it is (seen on 22.05). Arrow's reader ends a row at a CR, so a name of
    `x<CR><a whole row>` in the last field would read as a second, forged row charging someone else."""
    header = "JobIDRaw|User|Account|QOS|State|Start|End|AllocTRES|JobName"
    forged = "777|victim|nlp|standard|COMPLETED|2026-11-02T00:00:00|2026-11-02T23:00:00|gres/gpu=64|f"
    data = (f"{header}\n"
            f"5|mallory|vision|standard|COMPLETED|2026-11-02T01:00:00|2026-11-02T02:00:00|gres/gpu=1|x\r{forged}\n"
            f"6|alice|vision|standard|COMPLETED|2026-11-02T01:00:00|2026-11-02T02:00:00|gres/gpu=2|plain\n").encode()
    acc = read_sacct(data, source="x")
    assert sorted(acc.jobs["job_id_raw"]) == [5, 6]
    assert "victim" not in set(acc.jobs["user"].astype(str))
    assert acc.jobs.loc[acc.jobs["job_id_raw"] == 5, "name"].item() == f"x\r{forged}"
    assert acc.bad.rows == []
    assert any("carriage return" in n and "line 2" in n for n in acc.notes)


def test_invalid_utf8_in_a_job_name_is_kept_elsewhere_skipped():
    lines = [d.row(1, 1).encode(), d.row(2, 2, name="NAME").encode().replace(b"NAME", b"n\xffx"),
             d.row(3, 4, user="u").encode().replace(b"|u|", b"|\xfe\xff|")]
    acc = read_sacct(d.dump_bytes(lines), source="x")
    assert sorted(acc.jobs["job_id_raw"]) == [1, 2]
    assert acc.jobs.loc[acc.jobs["job_id_raw"] == 2, "name"].item() == "n\ufffdx"
    assert [(b.line, b.reason) for b in acc.bad.rows] == [(4, "field User: bytes that are not UTF-8")]
    assert any("not UTF-8" in n and "line 3" in n for n in acc.notes)


def test_a_job_name_holding_the_delimiter_and_a_bad_row_together():
    """The careful reader still rejoins a name holding `|` while it skips a bad row beside it."""
    lines = d.clean_lines()
    lines[1] = d.row(102, 2, name="a|b|c")
    lines.append(d.row(999, 50, Start="garbage"))
    acc, rep = _report(d.dump(lines))
    assert [b.line for b in acc.bad.rows] == [10]
    assert acc.jobs.loc[acc.jobs["job_id_raw"] == 102, "name"].item() == "a|b|c"
    assert rep.summary["gpu_hours"] == pytest.approx(CLEAN_GPU_HOURS)


BAD_VALUES = st.sampled_from([("Start", "yesterday"), ("End", "2026-13-40T99:00:00"), ("NNodes", "1.5"),
                              ("Submit", "0001-01-01T00:00:00"), ("End", "2026-11-01T00:00:00"),
                              ("AllocTRES", "gres/gpu=99999999999"), ("NNodes", "-1"), ("JobIDRaw", "x1"),
                              ("Eligible", "3000-01-01T00:00:00")])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 8), BAD_VALUES), min_size=1, max_size=6))
def test_bad_rows_anywhere_leave_the_good_rows_exactly(spoil):
    """Any mix of bad rows at any place: the good rows read exactly as in the clean dump, each bad row is listed
    once with its own line number."""
    clean = read_sacct(d.dump(d.clean_lines()), source="x").jobs
    lines = d.clean_lines()
    expected_lines = []
    for pos, (field, value) in sorted(spoil, key=lambda x: -x[0]):
        lines.insert(pos, d.row(999, 50, **{field: value}))
    for i, ln in enumerate(lines, start=2):
        if ln.startswith("999|"):
            expected_lines.append(i)
    acc = read_sacct(d.dump(lines), source="x")
    assert [b.line for b in acc.bad.rows] == expected_lines
    assert acc.jobs.astype(str).equals(clean.astype(str))


def _real_dumps() -> list[Path]:
    here = sorted((REPO / "tests" / "data" / "reports").glob("sacct-lab-*.txt"))
    shared = sorted((REPO.parent / "shared" / "data" / "traces" / "sacct").glob("*.csv"))
    return [p for p in here + shared if "formatted" not in p.name and "2char" not in p.name]


@pytest.mark.parametrize("path", _real_dumps(), ids=lambda p: p.name)
def test_real_dumps_have_no_bad_rows_and_the_careful_reader_agrees(path, monkeypatch):
    fast = read_sacct(path)
    assert fast.bad.rows == [] and fast.bad.total > 0

    def dirty(*a, **k):
        raise sacct._Dirty()

    monkeypatch.setattr(sacct, "_read_fast", dirty)
    careful = read_sacct(path)
    assert careful.bad.rows == []
    assert careful.jobs.astype(str).equals(fast.jobs.astype(str))
    assert (careful.steps, careful.notes) == (fast.steps, fast.notes)


def _cli(tmp_path, dump_path, *args, env=None):
    return subprocess.run([sys.executable, "-m", "slurmtools.cli.main", "report", "--since", "2026-11-02",
                           "--until", "2026-11-03", "--format", "csv,json,md,html", "--out", str(tmp_path / "out"),
                           "--sacct-file", str(dump_path), "--epilog-dir", str(tmp_path / "no-epilog"), "-q", *args],
                          capture_output=True, text=True, timeout=180, env=env, cwd=REPO)


def test_more_bad_rows_than_the_share_fails_in_one_line_and_still_lists_them(tmp_path):
    lines = d.clean_lines()
    lines[2] = d.row(103, 3, Start="nope")  # 1 of 8 rows: 12.5 %
    f = tmp_path / "dump.txt"
    f.write_bytes(d.dump(lines))
    p = _cli(tmp_path, f, "--max-bad-share", "0.1")
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [
        f"slurmtools: error: 1 of 8 rows of {f} were bad and skipped (12.50%), more than --max-bad-share allows "
        f"(10%); the list: {tmp_path / 'out' / 'bad_rows.csv'}"]
    assert not (tmp_path / "out" / "report.html").exists()
    listed = (tmp_path / "out" / "bad_rows.csv").read_text().splitlines()
    assert listed[1].startswith(f"{f},4,field Start: 'nope' is not a time")
    ok = _cli(tmp_path, f, "--max-bad-share", "0.125")
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "out" / "report.html").exists()


def test_the_share_comes_from_the_site_file_and_defaults_to_1_percent(tmp_path):
    site = (REPO / "site_configs" / "example" / "site.toml").read_text()
    assert "max_bad_share = 0.01" in site  # the documented default, in the example
    lines = d.clean_lines()
    lines[2] = d.row(103, 3, Start="nope")
    f = tmp_path / "dump.txt"
    f.write_bytes(d.dump(lines))
    p = _cli(tmp_path, f)
    assert p.returncode == 1 and "[reports] max_bad_share allows (1%)" in p.stderr
    mine = tmp_path / "site.toml"
    mine.write_text(site.replace("max_bad_share = 0.01", "max_bad_share = 0.5")
                    .replace('fabric = "', f'fabric = "{REPO / "site_configs" / "example"}/'))
    p = _cli(tmp_path, f, "--site", str(mine))
    assert p.returncode == 0, p.stderr
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(site.replace("max_bad_share = 0.01", "max_bad_share = 2"))
    p = _cli(tmp_path, f, "--site", str(wrong))
    assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1
    assert "reports.max_bad_share" in p.stderr and "from 0 to 1" in p.stderr
    p = _cli(tmp_path, f, "--max-bad-share", "5")
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "slurmtools: error: --max-bad-share: expected a share from 0 to 1 (0.01 is 1%), got 5"]


def test_every_output_shows_the_count_and_where_the_list_is(tmp_path):
    lines = d.clean_lines()
    lines[2] = d.row(103, 3, Start="nope")
    f = tmp_path / "dump.txt"
    f.write_bytes(d.dump(lines))
    p = _cli(tmp_path, f, "--max-bad-share", "0.5")
    assert p.returncode == 0, p.stderr
    out = tmp_path / "out"
    assert "bad input rows skipped: 1 (listed in bad_rows.csv)" in (out / "report.html").read_text()
    assert "- Bad input rows skipped: 1 (listed in bad_rows.csv)" in (out / "summary.md").read_text()
    doc = json.loads((out / "report.json").read_text())
    assert doc["summary"]["bad_rows"] == 1 and doc["bad_rows"]["file"] == "bad_rows.csv"
    assert doc["bad_rows"]["inputs"] == [{"source": str(f), "what": "rows", "total": 8, "bad": 1}]
    import csv

    rows = list(csv.DictReader((out / "summary.csv").open(newline="")))
    assert rows[0]["bad_rows"] == "1" and rows[0]["bad_rows_file"] == "bad_rows.csv"
    clean = tmp_path / "clean.txt"
    clean.write_bytes(d.dump(d.clean_lines()))
    p = _cli(tmp_path, clean)
    assert p.returncode == 0, p.stderr
    assert "- Bad input rows skipped: 0 (listed in bad_rows.csv)" in (out / "summary.md").read_text()
    assert (out / "bad_rows.csv").read_bytes() == b"source,line,reason,text\r\n"
