"""sacct --parsable2 ingestion: real dumps, any column order, repairs, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import reports_handmade as hm
from slurmtools.errors import ParseError
from slurmtools.reports.sacct import JOB_COLUMNS, read_sacct

DATA = Path(__file__).resolve().parents[2] / "data" / "reports"
SHARED = Path(__file__).resolve().parents[4] / "shared" / "data" / "traces" / "sacct"


@pytest.mark.parametrize("name", ["slurm2sql_test-data1.csv", "slurm2sql_test-data2.csv"])
def test_real_slurm2sql_dumps(name):
    acc = read_sacct(DATA / name)
    j = acc.jobs
    assert list(j["job_id"]) == ["43974388", "43977780"]
    assert acc.steps == 3  # 43974388.batch, 43974388.0, 43977780.batch
    assert list(j["state"].astype(str)) == ["CANCELLED", "CANCELLED"]  # "CANCELLED by 1300204"
    assert list(j["partition"].astype(str)) == ["jupyter-long", "interactive"]
    assert j.loc[0, "start"] == pd.Timestamp("2019-07-31T22:29:14")
    assert j.loc[0, "end"] == pd.Timestamp("2019-08-01T02:02:39")
    assert pd.isna(j.loc[1, "end"])  # "Unknown"
    assert list(j["gpus"]) == [0, 0]  # AllocTRES is empty in these dumps
    assert {c: str(t) for c, t in j.dtypes.items()} == JOB_COLUMNS


def test_both_real_dumps_read_alike_despite_different_columns():
    a = read_sacct(DATA / "slurm2sql_test-data1.csv").jobs
    b = read_sacct(DATA / "slurm2sql_test-data2.csv").jobs
    pd.testing.assert_frame_equal(a, b)


def test_shared_sacct_traces_sweep():
    if not SHARED.is_dir():
        pytest.skip("../shared/data is not beside this checkout")
    for f in sorted(SHARED.glob("*")):
        acc = read_sacct(f)
        assert len(acc.jobs) > 0 and acc.jobs["start"].notna().all(), f


def test_handmade_dump_shape_and_types():
    acc = read_sacct(hm.TEXT, text=True)
    j = acc.jobs
    assert acc.steps == 2
    assert len(j) == 11  # 13 lines less 2 steps; 102's two runs are two rows
    assert j["job_id_raw"].tolist() == sorted(j["job_id_raw"].tolist())
    r102 = j[j["job_id_raw"] == 102]
    assert r102["state"].astype(str).tolist() == ["PREEMPTED", "COMPLETED"]  # ordered by start
    assert j.loc[j["job_id"] == "104_2", "job_id_raw"].item() == 105
    assert j.loc[j["job_id"] == "106", "gpus"].item() == 16
    assert j.loc[j["job_id"] == "109", "gpus"].item() == 0
    assert j.loc[j["job_id"] == "101", "gpu_util_slurm"].item() == pytest.approx(90)
    assert j.loc[j["job_id"] == "110", "name"].item() == "a|b <script>alert(1)</script>"
    assert any("rejoined" in n and "line 13" in n for n in acc.notes)


def test_column_order_does_not_matter():
    lines = hm.TEXT.strip().split("\n")
    head = lines[0].split("|")
    order = list(reversed(range(len(head))))
    clean = [ln for ln in lines if "alert" not in ln]  # the pipe-in-name row cannot be re-split by column
    shuffled = "\n".join("|".join(ln.split("|")[i] for i in order) for ln in clean) + "\n"
    a = read_sacct("\n".join(clean) + "\n", text=True).jobs
    b = read_sacct(shuffled, text=True).jobs
    pd.testing.assert_frame_equal(a, b)


def test_parsable_trailing_delimiter_and_lowercase_header():
    text = ("jobid|state|start|end|alloctres|\n"
            "5|COMPLETED|2026-11-02T00:00:00|2026-11-02T02:00:00|gres/gpu:h100=2,gres/gpu=2|\n")
    j = read_sacct(text, text=True).jobs
    assert j["gpus"].tolist() == [2] and j["gpu_type"].astype(str).tolist() == ["h100"]


def test_gpus_of_several_types_split_into_rows():
    text = ("JobID|JobIDRaw|State|Start|End|AllocTRES\n"
            "9|9|COMPLETED|2026-11-02T00:00:00|2026-11-02T01:00:00|cpu=4,gres/gpu:a100=2,gres/gpu:h100=1,gres/gpu=3\n")
    j = read_sacct(text, text=True).jobs
    assert sorted(zip(j["gpu_type"].astype(str), j["gpus"])) == [("a100", 2), ("h100", 1)]


def test_missing_required_field_names_it(tmp_path):
    p = tmp_path / "d.txt"
    p.write_text("JobID|State|Start\n1|COMPLETED|2026-11-02T00:00:00\n")
    with pytest.raises(ParseError) as e:
        read_sacct(p)
    assert str(e.value).startswith(f"{p}:1: the header line lacks sacct field(s) End, AllocTRES (read 3 field(s) "
                                   f"separated by '|')") and "\n" not in str(e.value)


def test_a_dump_without_alloctres_is_refused_not_read_as_no_gpus(tmp_path):
    """Without AllocTRES no run's GPUs are known: the report used to count every run as holding none (0 GPU-hours,
    0 % utilisation) with a note; now the dump is refused in one line naming the field."""
    p = tmp_path / "d.txt"
    p.write_text("JobID|JobIDRaw|State|Start|End|ReqTRES\n1|1|COMPLETED|2026-11-02T00:00:00|2026-11-02T01:00:00|"
                 "cpu=1,gres/gpu=8\n")
    with pytest.raises(ParseError, match=r"d.txt:1: the header line lacks sacct field\(s\) AllocTRES \(read 6"):
        read_sacct(p)


def test_bad_time_names_line_and_field(tmp_path):
    """A bad row is skipped and listed (issue 12), not the end of the whole dump."""
    p = tmp_path / "d.txt"
    p.write_text("JobID|State|Start|End|AllocTRES\n1|COMPLETED|2026-11-02T00:00:00|2026-11-02T01:00:00|\n"
                 "2|COMPLETED|yesterday|2026-11-02T01:00:00|\n")
    acc = read_sacct(p)
    assert acc.jobs["job_id"].tolist() == ["1"]
    [bad] = acc.bad.rows
    assert (bad.source, bad.line, bad.reason) == (str(p), 3, "field Start: 'yesterday' is not a time "
                                                             "(YYYY-MM-DDTHH:MM:SS)")


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "e.txt").write_text("")
    with pytest.raises(ParseError, match="empty sacct dump"):
        read_sacct(tmp_path / "e.txt")
    with pytest.raises(ParseError, match="cannot read"):
        read_sacct(tmp_path / "nope.txt")


def test_too_few_fields_is_listed_not_lost():
    text = "JobID|JobName|State|Start|End|AllocTRES\n1|x|COMPLETED|2026-11-02T00:00:00\n"
    acc = read_sacct(text, text=True)
    assert len(acc.jobs) == 0
    assert [(b.line, b.reason) for b in acc.bad.rows] == [(2, "expected 6 fields separated by '|', got 4")]


def test_progress_callback_reaches_the_whole_file(tmp_path):
    from datetime import datetime

    from slurmtools.reports import synth

    p = synth.write(tmp_path / "d.txt", 3000, datetime(2026, 11, 1), 2, nodes=16, node_fmt="gpu{:02d}")
    seen = []
    # small blocks: several callbacks for a small file
    acc = read_sacct(p, on_block=lambda done, total: seen.append((done, total)), block_bytes=1 << 16)
    size = p.stat().st_size
    assert len(seen) > 3 and seen[-1] == (size, size)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert len(acc.jobs) >= 3000


def test_blocks_read_ahead_come_in_order_and_a_late_error_after_them():
    import threading

    from slurmtools.reports.sacct import _read_ahead

    def blocks(n, fail_at=None):
        for i in range(n):
            if i == fail_at:
                raise ValueError(f"block {i}")
            yield i

    assert list(_read_ahead(blocks(50))) == list(range(50))
    got = []
    with pytest.raises(ValueError, match="block 7"):
        for b in _read_ahead(blocks(50, fail_at=7)):
            got.append(b)
    assert got == list(range(7))
    # stopping after the first block ends the reading thread (it would hold the file open)
    ahead = _read_ahead(blocks(10_000))
    assert next(ahead) == 0
    ahead.close()
    assert not [t for t in threading.enumerate() if t.name == "sacct-reader"]


def test_a_dump_of_many_blocks_reads_as_one_block_and_a_bad_row_in_a_late_block_is_listed(tmp_path):
    """Blocks are parsed ahead by another thread: a dump read in 64 KB blocks gives the runs it gives in one block,
    and a bad row near its end sends it to the careful reader, which lists that row."""
    from datetime import datetime

    from slurmtools.reports import synth

    p = synth.write(tmp_path / "d.txt", 2000, datetime(2025, 11, 1), 5, seed=9, arrays=0.2)
    whole = read_sacct(p)
    small = 1 << 16
    assert p.stat().st_size > 20 * small
    seen: list[int] = []
    pd.testing.assert_frame_equal(read_sacct(p, block_bytes=small, on_block=lambda d, t: seen.append(d)).jobs,
                                  whole.jobs)
    assert len(seen) > 20   # it was read in many blocks
    lines = p.read_text().split("\n")
    at = len(lines) - 5
    parts = lines[at].split("|")
    parts[lines[0].split("|").index("NNodes")] = "two"
    lines[at] = "|".join(parts)
    p.write_text("\n".join(lines))
    acc = read_sacct(p, block_bytes=small)
    assert [(b.line, b.reason) for b in acc.bad.rows] == [(at + 1, "field NNodes: 'two' is not a whole number")]
    assert len(acc.jobs) + acc.steps == len(whole.jobs) + whole.steps - 1
