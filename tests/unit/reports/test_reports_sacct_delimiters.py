"""sacct dumps written with any delimiter (issue 11, class 9): `-P`, `-p` (a delimiter ends every line),
`-p --delimiter=,` and `-P --delimiter=';'`, captured from this project's own Slurm 22.05.8 lab
(tests/data/SOURCES.md), read alike by every reader; a header that lacks fields names exactly those, and the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from slurmtools.errors import ParseError
from slurmtools.reports import capacity
from slurmtools.reports.sacct import read_sacct
from slurmtools.slurm.commands import parse_sacct
from slurmtools.slurm.parsable import Splitter, read_header

DATA = Path(__file__).resolve().parents[2] / "data" / "reports"
LAB = {  # file -> delimiter: one lab, one moment, four ways of writing the same jobs
    "sacct-lab-22.05.8-P.txt": "|", "sacct-lab-22.05.8-p.txt": "|",
    "sacct-lab-22.05.8-p-comma.txt": ",", "sacct-lab-22.05.8-P-semicolon.txt": ";",
}
SLURM2SQL = ["slurm2sql_test-data1.csv", "slurm2sql_test-data2.csv"]


def values(path: Path) -> list[list[str]]:
    """Header and rows of a dump, split by the reader's own splitter."""
    lines = path.read_text().splitlines()
    h = read_header(lines[0], str(path))
    s = Splitter(h, str(path))
    return [h.names] + [s.split(ln, i) for i, ln in enumerate(lines[1:], start=2)]


def write(path: Path, rows: list[list[str]], delim: str) -> Path:
    path.write_text("".join(delim.join(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("name", list(LAB))
def test_lab_dump_in_every_delimiter_reads_the_same_jobs(name):
    acc = read_sacct(DATA / name)
    j = acc.jobs
    assert read_header((DATA / name).read_text().splitlines()[0], name).delimiter == LAB[name]
    assert acc.steps == 6 and j["job_id"].tolist() == ["1", "2", "3", "4", "5"]
    assert j["name"].tolist() == ["eval", "train,llm;v2|run", "fail job", "longone", "nodes,apart"]
    assert j["state"].astype(str).tolist() == ["COMPLETED", "COMPLETED", "FAILED", "RUNNING", "CANCELLED"]
    assert j["nodelist"].tolist() == ["gpu01", "gpu[02-03]", "gpu01", "gpu01", "gpu[05,07]"]
    assert j["gpus"].tolist() == [2, 16, 1, 4, 16] and j["req_gpus"].tolist() == [2, 16, 1, 4, 16]
    assert set(j["gpu_type"].astype(str)) == {"h100"} and set(j["account"].astype(str)) == {"vision", "nlp"}
    assert pd.isna(j.loc[3, "end"]) and j.loc[4, "start"] == pd.Timestamp("2026-11-24T01:01:49")
    pd.testing.assert_frame_equal(j, read_sacct(DATA / "sacct-lab-22.05.8-P.txt").jobs, check_categorical=False)


def test_comma_dump_says_what_it_rejoined():
    notes = read_sacct(DATA / "sacct-lab-22.05.8-p-comma.txt").notes
    assert notes[0] == ("11 line(s) had the delimiter ',' inside JobName, NodeList, AllocTRES, ReqTRES and were "
                        "rejoined (first: line 2)")


def test_replay_reader_reads_comma_and_pipe_dumps_alike():
    pipe = parse_sacct((DATA / "sacct-lab-22.05.8-acct-P.txt").read_text(), "acct-P")
    comma = parse_sacct((DATA / "sacct-lab-22.05.8-acct-p-comma.txt").read_text(), "acct-p-comma")
    assert comma == pipe and len(pipe) == 11
    two = next(r for r in comma if r.job_id == "2" and r.step is None)
    assert (two.name, two.nodelist, two.alloc_gpus, two.alloc_cpus, two.timelimit_s) == \
        ("train,llm;v2|run", ("gpu02", "gpu03"), 16, 2, 86400)
    # a two-character delimiter (dumped once job 4 had ended): the replay reader splits on it; the report reader
    # (arrow) refuses it in one line
    two_char = parse_sacct((DATA / "sacct-lab-22.05.8-P-2char.txt").read_text())
    same = parse_sacct((DATA / "sacct-lab-22.05.8-P.txt").read_text())
    assert [r for r in two_char if r.job_id != "4"] == [r for r in same if r.job_id != "4"]
    assert [r.state for r in two_char if r.job_id == "4"] == ["COMPLETED", "COMPLETED"]
    with pytest.raises(ParseError, match=r"P-2char.txt:1: the delimiter '::' is 2 characters"):
        read_sacct(DATA / "sacct-lab-22.05.8-P-2char.txt")


@pytest.mark.parametrize("name", list(LAB))
def test_header_missing_fields_names_exactly_those_and_the_file(name, tmp_path):
    rows = values(DATA / name)
    keep = [i for i, n in enumerate(rows[0]) if n not in ("State", "End")]
    p = write(tmp_path / name, [[r[i] for i in keep] for r in rows], LAB[name])
    with pytest.raises(ParseError) as e:
        read_sacct(p)
    assert str(e.value).startswith(f"{p}:1: the header line lacks sacct field(s) State, End (read 17 field(s) "
                                   f"separated by {LAB[name]!r}); dump with `sacct --parsable2 -o ")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", SLURM2SQL)
def test_real_slurm2sql_dumps_in_another_delimiter_and_with_a_field_less(name, tmp_path):
    rows = values(DATA / name)
    semi = write(tmp_path / name, rows, ";")
    pd.testing.assert_frame_equal(read_sacct(semi).jobs, read_sacct(DATA / name).jobs)
    assert parse_sacct(semi.read_text()) == parse_sacct((DATA / name).read_text())
    end = rows[0].index("End")
    less = write(tmp_path / f"less-{name}", [r[:end] + r[end + 1:] for r in rows], "|")
    with pytest.raises(ParseError, match=rf"^{less}:1: the header line lacks sacct field\(s\) End \(read "
                                         rf"{len(rows[0]) - 1} field\(s\) separated by '\|'\)"):
        read_sacct(less)


def test_formatted_sacct_output_is_refused_in_one_line():
    p = DATA / "sacct-lab-22.05.8-formatted.txt"  # plain `sacct -o ...`: padded columns, not parsable
    for read in (lambda: read_sacct(p), lambda: parse_sacct(p.read_text(), str(p))):
        with pytest.raises(ParseError) as e:
            read()
        assert str(e.value).startswith(f"{p}:1: a table of blank-padded columns ") and "\n" not in str(e.value)
        assert "sacct -P" in str(e.value)


def test_a_field_named_twice_in_the_header_is_refused_in_one_line(tmp_path):
    """Readers take fields by lower-case name: a second `State` (or `state`) would hide the first, and pyarrow's
    reader failed on it with a traceback."""
    lines = (DATA / "sacct-lab-22.05.8-P.txt").read_text().splitlines()
    p = tmp_path / "dup.txt"
    p.write_text("\n".join([lines[0] + "|state", *(ln + "|COMPLETED" for ln in lines[1:])]) + "\n")
    for read in (lambda: read_sacct(p), lambda: parse_sacct(p.read_text(), str(p))):
        with pytest.raises(ParseError) as e:
            read()
        assert str(e.value).startswith(f"{p}:1: field 'state' appears twice in the header line (fields ")
        assert "\n" not in str(e.value)


def test_a_header_one_field_short_is_refused_not_read_shifted(tmp_path):
    """A header without QOS over lines that still hold it: each line alone splits one way (JobName takes the extra
    piece), every later field shifted by one (the account read as the user...). The first lines all needing that
    repair is the whole dump's fault: report and advise refuse it in one line, skipping no line as bad."""
    from datetime import datetime

    from slurmtools.advise.usage import load_runs
    from slurmtools.slurm.parsable import HeaderMismatch

    lines = (DATA / "sacct-lab-22.05.8-P.txt").read_text().splitlines()
    names = lines[0].split("|")
    k = names.index("QOS")
    p = tmp_path / "short.txt"
    p.write_text("\n".join(["|".join(names[:k] + names[k + 1:]), *lines[1:]]) + "\n")
    want = (f"{p}:1: lines 2-6 all hold more '|'-separated pieces than the header's {len(names) - 1} fields, with "
            f"JobName taking them every time: the header does not match the lines (a field missing from it?)")
    for read in (lambda: read_sacct(p),
                 lambda: load_runs(datetime(2026, 11, 1), datetime(2026, 12, 1), sacct_file=p)):
        with pytest.raises(HeaderMismatch) as e:
            read()
        assert str(e.value).startswith(want) and "\n" not in str(e.value), str(e.value)


def test_a_line_that_splits_two_ways_is_refused_not_guessed(tmp_path):
    # without Start, job 2's name "train,llm;v2|run" could as well be "train" with a user "llm;v2|run" and the
    # two partitions "nlp,gpu" a pending job has (every field after them lines up either way)
    rows = values(DATA / "sacct-lab-22.05.8-P.txt")
    start = rows[0].index("Start")
    p = write(tmp_path / "no-start.txt", [r[:start] + r[start + 1:] for r in rows], ",")
    with pytest.raises(ParseError) as e:
        parse_sacct(p.read_text(), str(p))
    assert str(e.value) == (f"{p}:4: ',' occurs inside values and the line splits into fields in more than one way "
                            f"(JobName, User, Account, Partition differ); dump with a --delimiter no value holds "
                            f"(`sacct -P` writes '|')")


def test_replay_cli_names_the_fields_it_lacks(tmp_path):
    from slurmtools.site import find_site_path

    def replay(*args):
        return subprocess.run([sys.executable, "-m", "slurmtools", "admin", "policy", "replay", "--site",
                               str(find_site_path(None)), *args], capture_output=True, text=True)

    rows = values(DATA / "sacct-lab-22.05.8-acct-p-comma.txt")
    drop = [rows[0].index("ReqTRES"), rows[0].index("QOS")]
    p = write(tmp_path / "acct.txt", [[v for i, v in enumerate(r) if i not in drop] for r in rows], ",")
    r = replay("--sacct-file", str(p))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith(f"slurmtools: error: {p}:1: the header line lacks sacct field(s) QOS, ReqTRES (read "
                               f"17 field(s) separated by ',')")
    r = replay("--since", "3650d", "--sacct-file", str(DATA / "sacct-lab-22.05.8-acct-p-comma.txt"))
    assert r.returncode == 0, r.stderr
    assert "replayed 5 jobs" in r.stdout


@pytest.mark.parametrize("name", ["sacctmgr-event-lab-22.05.8-p.txt", "sacctmgr-event-lab-22.05.8-P.txt"])
def test_capacity_events_from_sacctmgr_p_and_P(name):
    ev = capacity.read_events((DATA / name).read_text(), name)
    assert ev["node"].tolist() == ["gpu16"] and ev["state"].tolist() == ["DRAIN"]
    assert (ev["end"] - ev["start"]).dt.total_seconds().tolist() == [2.0]
