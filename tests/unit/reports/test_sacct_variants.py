"""Real-world `sacct` output variants the report's reader misread or refused, composed here in sacct's layout (each
test says where the form comes from). Both reading paths (arrow's fast one and the careful one) must agree."""

from __future__ import annotations

import pandas as pd
import pytest

from slurmtools.errors import ParseError
from slurmtools.reports.sacct import read_sacct

H = ("JobID|JobIDRaw|JobName|User|Account|Partition|State|Submit|Start|End|NNodes|NTasks|AllocTRES|ReqTRES|"
     "TRESUsageInAve")


def _row(jid, user="alice", account="proj", state="COMPLETED", start="2026-11-02T01:00:00",
         end="2026-11-02T02:00:00", alloc="billing=8,cpu=8,gres/gpu=2,mem=64G,node=1", req="", ntasks="",
         usage=""):
    return (f"{jid}|{jid}|train|{user}|{account}|gpu|{state}|2026-11-02T00:00:00|{start}|{end}|1|{ntasks}|"
            f"{alloc}|{req}|{usage}")


def _both(text: str):
    """The dump read by both paths, which must agree."""
    data = text.encode()
    fast, careful = read_sacct(data, source="x"), read_sacct(data, source="x", careful=True)
    assert careful.jobs.astype(str).equals(fast.jobs.astype(str))
    assert [(b.line, b.reason) for b in careful.bad.rows] == [(b.line, b.reason) for b in fast.bad.rows]
    assert careful.notes == fast.notes
    return fast


# --- GPUs tracked by type only -------------------------------------------------------------------------------
# slurm.conf(5), AccountingStorageTRES: with "AccountingStorageTRES=gres/gpu:tesla,gres/gpu:volta" (no plain
# gres/gpu) "gres/gpu:tesla" and "gres/gpu:volta" track the jobs, so AllocTRES holds `gres/gpu:tesla=2` and no
# `gres/gpu=` item. The reader counted those GPUs as 0 while naming their type.

def test_gpus_tracked_by_type_only_are_counted():
    acc = _both("\n".join([
        H,
        _row(1, alloc="billing=8,cpu=8,gres/gpu:tesla=2,mem=64G,node=1", req="billing=8,cpu=8,gres/gpu:tesla=2"),
        _row(2, alloc="billing=4,cpu=4,gres/gpu:volta=1,mem=8G,node=1"),
        _row(3, alloc="billing=4,cpu=4,gres/gpu:tesla=1,gres/gpu:volta=3,mem=8G,node=1"),
        "1.batch|1.batch|batch||proj||COMPLETED|2026-11-02T01:00:00|2026-11-02T01:00:00|2026-11-02T02:00:00|1|1|"
        "cpu=8,gres/gpu:tesla=2,mem=64G,node=1||gres/gpuutil=150",
    ]) + "\n")
    j = acc.jobs
    one = j[j["job_id"] == "1"].iloc[0]
    assert (one["gpus"], one["gpu_type"], one["req_gpus"]) == (2, "tesla", 2)
    # the batch step's one task used 150 (summed over its 2 GPUs): 75 % of each
    assert one["gpu_util_slurm"] == 75
    assert j.loc[j["job_id"] == "2", "gpus"].tolist() == [1]
    three = j[j["job_id"] == "3"]
    assert sorted(zip(three["gpu_type"].astype(str), three["gpus"])) == [("tesla", 1), ("volta", 3)]
    assert not any("gpuutil" in n for n in acc.notes)


def test_the_plain_gpu_count_still_wins_where_both_are_given():
    # sacct of a site tracking gres/gpu and its types (PrincetonUniversity/jobstats issue #6):
    # `billing=112,cpu=36,gres/gpu:rtx2080ti=4,gres/gpu=4,mem=180G,node=1`
    acc = _both(H + "\n" + _row(5, alloc="billing=112,cpu=36,gres/gpu:rtx2080ti=4,gres/gpu=4,mem=180G,node=1")
                + "\n")
    assert (acc.jobs["gpus"].tolist(), acc.jobs["gpu_type"].astype(str).tolist()) == ([4], ["rtx2080ti"])


# --- two dumps joined: the header again, mid-file ------------------------------------------------------------
# `cat day1.txt day2.txt`, or a cron job appending each day's `sacct -P ...` to one file: every run of sacct prints
# its header line (src/sacct/sacct.c prints the header unless --noheader). A later run may ask for another `-o`
# order. The reader took the repeated header for a bad job row, and read the later rows by the first header.

def test_a_repeated_header_is_skipped_not_listed_as_a_bad_row():
    text = "\n".join([H, _row(1), H, _row(2)]) + "\n"
    acc = _both(text)
    assert acc.jobs["job_id"].tolist() == ["1", "2"]
    assert acc.bad.rows == []
    assert any("header line(s) repeated inside the dump" in n and "line 3" in n for n in acc.notes)


def test_a_header_of_another_column_order_reads_the_rows_after_it_by_it():
    other = H.replace("User|Account", "Account|User")
    later = "2|2|train|proj2|bob|gpu|FAILED|2026-11-02T00:00:00|2026-11-02T03:00:00|2026-11-02T04:00:00|1||" \
            "billing=8,cpu=8,gres/gpu=4,mem=64G,node=1||"
    acc = _both("\n".join([H, _row(1), other, later]) + "\n")
    j = acc.jobs.set_index("job_id")
    assert (j.loc["1", "user"], j.loc["1", "account"]) == ("alice", "proj")
    assert (j.loc["2", "user"], j.loc["2", "account"], j.loc["2", "gpus"]) == ("bob", "proj2", 4)
    assert acc.bad.rows == []
    assert any("another order" in n for n in acc.notes)


def test_a_header_of_another_delimiter_mid_file_is_followed():
    comma_free = H.replace("|", ";")
    later = _row(2).replace("|", ";")
    acc = _both("\n".join([H, _row(1), comma_free, later]) + "\n")
    assert acc.jobs["job_id"].tolist() == ["1", "2"] and acc.jobs["gpus"].tolist() == [2, 2]


def test_a_later_header_lacking_a_field_refuses_in_one_line_naming_it():
    short = "JobIDRaw|JobID|State|User|Start|End|AllocTRES"
    text = "\n".join([H, _row(1), short, "2|2|FAILED|bob|2026-11-02T03:00:00|2026-11-02T04:00:00|gres/gpu=4"])
    for careful in (False, True):
        with pytest.raises(ParseError, match=r"x:3: a header line inside the dump .*lacks JobName"):
            read_sacct((text + "\n").encode(), source="x", careful=careful)


def test_a_job_name_of_field_names_is_still_a_row():
    # a row's job id starts with a digit: only a line of names alone can be a header
    acc = _both(H + "\n" + _row(1).replace("|train|", "|JobID State Start End|", 1) + "\n")
    assert acc.jobs["job_id"].tolist() == ["1"]


# --- a byte order mark ---------------------------------------------------------------------------------------
# a dump opened and saved in a Windows editor starts with U+FEFF (and often has CRLF line ends): the reader
# refused the whole dump ("expected a header line of field names").

def test_a_byte_order_mark_before_the_header_is_not_part_of_it():
    plain = _both(H + "\n" + _row(1) + "\n")
    acc = _both("\ufeff" + H + "\r\n" + _row(1) + "\r\n")
    assert acc.jobs.astype(str).equals(plain.jobs.astype(str))
    assert pd.Timestamp(acc.jobs["end"].iloc[0]) == pd.Timestamp("2026-11-02T02:00:00")


# --- the same run in two joined dumps ------------------------------------------------------------------------
# `sacct -S d -E d+1` lists every job active in the window (sacct(1), --starttime/--endtime), so a cron job
# appending each day's dump prints a job spanning midnight in both: RUNNING with End `Unknown` (parse_time.c,
# _make_time_str_internal: time 0 is "Unknown") in the first, COMPLETED in the second. Its GPU-hours counted twice.

def test_a_run_in_two_joined_dumps_is_one_run_as_the_later_dump_has_it():
    day1 = _row(7, state="RUNNING", start="2026-11-01T22:00:00", end="Unknown")
    day2 = _row(7, state="COMPLETED", start="2026-11-01T22:00:00", end="2026-11-02T03:00:00")
    acc = _both("\n".join([H, day1, _row(8), H, day2, _row(8)]) + "\n")
    j = acc.jobs
    assert j["job_id"].tolist() == ["7", "8"]
    seven = j.iloc[0]
    assert (seven["state"], seven["end"]) == ("COMPLETED", pd.Timestamp("2026-11-02T03:00:00"))
    assert any("2 job run row(s) printed again" in n for n in acc.notes)


def test_requeued_runs_and_never_started_rows_are_not_taken_for_repeats():
    # `sacct -D`: every run of a requeued job under one JobIDRaw, each with its own Start
    rows = [_row(9, state="REQUEUED", start="2026-11-02T01:00:00", end="2026-11-02T01:30:00"),
            _row(9, state="COMPLETED", start="2026-11-02T01:32:01", end="2026-11-02T02:00:00"),
            _row(10, state="CANCELLED by 1234", start="None", end="2026-11-02T01:00:00", alloc=""),
            _row(10, state="CANCELLED by 1234", start="None", end="2026-11-02T01:00:00", alloc="")]
    acc = _both("\n".join([H, *rows]) + "\n")
    assert acc.jobs["job_id"].tolist() == ["9", "9", "10", "10"]
    assert acc.jobs["state"].astype(str).tolist() == ["REQUEUED", "COMPLETED", "CANCELLED", "CANCELLED"]
    assert not any("printed again" in n for n in acc.notes)


def test_a_repeated_run_of_several_gpu_types_is_split_once():
    alloc = "billing=4,cpu=4,gres/gpu:a100=1,gres/gpu:h100=2,gres/gpu=3,mem=8G,node=1"
    acc = _both("\n".join([H, _row(11, alloc=alloc), _row(11, alloc=alloc)]) + "\n")
    assert sorted(zip(acc.jobs["gpu_type"].astype(str), acc.jobs["gpus"])) == [("a100", 1), ("h100", 2)]
