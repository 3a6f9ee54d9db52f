"""Classes of real sacct dumps found by a probe of third-party outputs (xdmod's Slurm fixtures, site docs' pastes):
each read the same by every reader of sacct text (the report's, `parse_sacct` for policy replay and the sandbox's
history), or refused in one line naming the file."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from slurmtools.errors import ParseError
from slurmtools.reports import metrics
from slurmtools.reports.sacct import read_sacct
from slurmtools.sandbox.trace import load_trace
from slurmtools.site import find_site_path, load_site
from slurmtools.slurm.commands import parse_sacct
from slurmtools.slurm.parsable import read_header
from slurmtools.slurm.sacct_times import parse_in_zone
from tests.inproc import cli

SITE = str(find_site_path(None))
HEAD = ("JobID|JobIDRaw|User|Account|Partition|QOS|State|Submit|Eligible|Start|End|ElapsedRaw|Timelimit|NodeList|"
        "AllocTRES")
RAN = ("101|101|alice|vision|gpu|standard|COMPLETED|2026-10-01T00:00:00|2026-10-01T00:00:00|2026-10-01T00:01:00|"
       "2026-10-01T01:01:00|3600|1-00:00:00|gpu01|billing=8,cpu=8,gres/gpu:h100=8,gres/gpu=8,mem=64G,node=1")
# Slurm 16.05 wrote a job cancelled while pending with Start = End, the cancel time (xdmod's pozidriv.log); 22.05.8
# writes Start None (checked on the lab); NodeList `None assigned` in both
NEVER = ("102|102|bob|nlp|gpu|standard|CANCELLED by 1001|2026-10-01T00:00:00|2026-10-01T00:00:00|"
         "2026-10-03T00:00:00|2026-10-03T00:00:00|0|1-00:00:00|None assigned|"
         "billing=8,cpu=8,gres/gpu:h100=8,gres/gpu=8,mem=64G,node=1")


def test_a_job_cancelled_while_pending_never_started_in_any_reader():
    """Its Start (= its End, the cancel time) made it a run: two days of "queue wait" in the report's median, and a
    0 s run in the sandbox's history (whose missing time limit then refused the whole history)."""
    text = f"{HEAD}\n{RAN}\n{NEVER}\n"
    jobs = read_sacct(text, text=True).jobs
    assert list(jobs["start"].isna()) == [False, True]
    r = metrics.compute(jobs, load_site(None), datetime(2026, 10, 1), datetime(2026, 10, 4))
    assert r.summary["median_wait_min"] == pytest.approx(1.0) and r.summary["jobs"] == 1
    for records in (parse_sacct(text, "d.txt"), parse_in_zone(text, "d.txt", (), _zone("Europe/Berlin"))[0]):
        assert [r.start is None for r in records] == [False, True]
        assert records[1].end is not None   # when it was cancelled stays known


def test_without_a_nodelist_field_the_start_stays_as_read():
    """No NodeList field says nothing of where a job ran: its Start is kept, not unset."""
    head = HEAD.replace("|NodeList", "")
    text = head + "\n" + "\n".join("|".join(p for i, p in enumerate(ln.split("|")) if i != 13) for ln in (RAN, NEVER))
    assert all(r.start is not None for r in parse_sacct(text, "d.txt"))
    assert not read_sacct(text, text=True).jobs["start"].isna().any()


def _zone(name):
    from slurmtools.reports.zone import get

    return get(name)


def test_policy_replay_needs_the_run_time_it_counts_refused_gpu_hours_by(tmp_path):
    """Without ElapsedRaw or Elapsed every job read as run 0 s: a refused 253 h x 2-GPU job showed 0 GPU-hours."""
    head = "JobID|JobIDRaw|User|Account|Partition|QOS|State|Submit|Start|End|Timelimit|NodeList|AllocTRES|ReqTRES"
    p = tmp_path / "d.txt"
    p.write_text(f"{head}\n1|1|alice|vision|gpu|standard|COMPLETED|2026-10-01T00:00:00|2026-10-01T00:00:00|"
                 f"2026-10-11T13:00:00|12-00:00:00|gpu01|cpu=8,gres/gpu=2,node=1|cpu=8,gres/gpu=2,node=1\n")
    code, out, err = cli("admin", "policy", "replay", "--site", SITE, "--sacct-file", str(p), "--since", "36500d")
    assert code != 0 and len(err.strip().splitlines()) == 1
    assert str(p) in err and "ElapsedRaw or Elapsed" in err


def test_bytes_that_are_not_utf8_in_a_job_name_are_a_note_in_replay_and_history(tmp_path):
    """The report read them as U+FFFD with a note; the policy replay and the sandbox's history refused the whole
    file with the codec's message, which names no line."""
    head = ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|Submit|Eligible|Start|End|ElapsedRaw|"
            "TimelimitRaw|NodeList|AllocTRES|ReqTRES|AllocCPUS")
    line = ("7|7|caf\xe9|alice|vision|gpu|standard|COMPLETED|2026-10-01T00:00:00|2026-10-01T00:00:00|"
            "2026-10-01T00:00:05|2026-10-01T01:00:05|3600|120|gpu01|cpu=8,gres/gpu=8,node=1|cpu=8,gres/gpu=8,node=1|8")
    p = tmp_path / "latin1.txt"
    p.write_bytes((head + "\n" + line + "\n").encode("latin-1"))
    code, out, err = cli("admin", "policy", "replay", "--site", SITE, "--sacct-file", str(p), "--since", "36500d",
                         "--json")
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert any("not UTF-8" in n and "line 2" in n for n in notes), notes
    trace = load_trace(str(p))
    assert len(trace.jobs) == 1 and any("not UTF-8" in n and "line 2" in n for n in trace.notes)


@pytest.mark.parametrize("header", ["JobID           JobName  AllocCPUS      State ", "JobID  Name  State",
                                    "JobID AllocTRES State"])
def test_sacct_default_table_is_told_as_such(header):
    """sacct's blank-padded table (its default output) was refused as "cannot tell the delimiter", or, with even
    padding, read with blanks as the delimiter."""
    with pytest.raises(ParseError, match="blank-padded columns.*sacct -P") as e:
        read_header(header, "t.txt")
    assert str(e.value).startswith("t.txt:1:") and "\n" not in str(e.value)
    assert read_header("JobID\tState", "t.txt").names == ["JobID", "State"]   # a tab is a delimiter sacct takes


def test_gpu_hours_of_an_unpriced_type_are_left_out_of_the_cost_and_said_so():
    """A GPU type the site file gives no price was costed at 0: "Cost 0.00 USD" in the headline for 10 GPU-hours of
    h200, a note alone saying why. Both engines now count those GPU-hours apart and the headline names them."""
    from slurmtools.reports import columnar, outputs

    head = "JobIDRaw|User|Account|QOS|State|Submit|Start|End|NodeList|AllocTRES"
    text = (f"{head}\n1|u1|vision|standard|COMPLETED|2026-10-01T09:00:00|2026-10-01T10:00:00|2026-10-01T20:00:00|gpu01|"
            f"cpu=8,gres/gpu:h200=1,gres/gpu=1,node=1\n"
            f"2|u1|vision|standard|COMPLETED|2026-10-01T09:00:00|2026-10-01T10:00:00|2026-10-01T11:00:00|gpu02|"
            f"cpu=8,gres/gpu:h100=1,gres/gpu=1,node=1\n")
    jobs = read_sacct(text, text=True).jobs
    site = load_site(None)
    for compute in (metrics.compute, columnar.compute):
        r = compute(jobs, site, datetime(2026, 10, 1), datetime(2026, 10, 2))
        assert r.summary["cost"] == pytest.approx(2.40) and r.summary["unpriced_gpu_hours"] == pytest.approx(10.0)
        assert "without 10.0 GPU-hours of GPU types the site file gives no price" in outputs.render_md(r)
        assert any(n.endswith("left out of the cost: h200") for n in r.notes)


def test_a_dump_whose_runs_on_gpu_nodes_name_no_gpu_is_refused(tmp_path):
    """Slurm's default AccountingStorageTRES leaves gres/gpu out, and then no AllocTRES names a GPU: the report read
    every run as CPU-only and showed the cluster idle (Frontier's dumps, probe of 2026-11-28). One GPU run in the
    dump, or runs only on hosts the site has no GPUs on, and the report goes on."""
    head = "JobID|JobIDRaw|User|Account|QOS|State|Submit|Start|End|NodeList|AllocTRES"
    cpu = ("1|1|u1|vision|standard|COMPLETED|2026-10-01T09:00:00|2026-10-01T10:00:00|2026-10-01T20:00:00|gpu[01-02]|"
           "billing=64,cpu=64,mem=500G,node=2")
    gpu = ("2|2|u1|vision|standard|COMPLETED|2026-10-01T09:00:00|2026-10-01T10:00:00|2026-10-01T11:00:00|gpu03|"
           "cpu=8,gres/gpu:h100=1,gres/gpu=1,node=1")
    args = ["--since", "2026-10-01", "--until", "2026-10-02", "--format", "md"]
    p = tmp_path / "untracked.txt"
    p.write_text(f"{head}\n{cpu}\n")
    code, out, err = cli("report", "--sacct-file", str(p), "--out", str(tmp_path / "a"), *args)
    assert code != 0 and len(err.strip().splitlines()) == 1, err
    assert str(p) in err and "1 run(s) on the site's GPU nodes (gpu[01-02])" in err and "AccountingStorageTRES" in err
    p.write_text(f"{head}\n{cpu}\n{gpu}\n")
    code, out, err = cli("report", "--sacct-file", str(p), "--out", str(tmp_path / "b"), *args)
    assert code == 0, err


OLD_HEAD = ("JobID|JobIDRaw|User|Account|Partition|QOS|State|Submit|Eligible|Start|End|ElapsedRaw|Timelimit|NodeList|"
            "ReqTRES|AllocTRES|AllocCPUS")


def _old(job, req):
    return (f"{job}|{job}|alice|vision|gpu|standard|COMPLETED|2026-10-01T00:00:00|2026-10-01T00:00:00|"
            f"2026-10-01T00:00:01|2026-10-01T10:00:01|36000|1-00:00:00|gpu01|{req}|"
            "billing=12,cpu=12,gres/gpu=2,mem=31000M,node=1|12")


def test_a_dump_whose_reqtres_never_names_gres_asks_for_what_it_held():
    """Slurm 16.05/17.02 kept no GRES in ReqTRES (xdmod's phillips.log): a 2-GPU job read as asking for none, so a
    policy replay admitted it as a CPU job and the sandbox replayed it `--exclusive` (a whole 8-GPU node)."""
    from slurmtools.policy.replay import request_from_record
    from slurmtools.sandbox.trace import trace_from_records
    from slurmtools.slurm.tres import with_gres_requests

    records = parse_sacct(f"{OLD_HEAD}\n{_old(1, 'cpu=12,node=1')}\n{_old(2, 'cpu=12,mem=31000M,node=1')}\n", "d.txt")
    fixed, notes = with_gres_requests(records)
    assert [r.req_gpus for r in fixed] == [2, 2] and len(notes) == 1 and "2 job(s)" in notes[0]
    assert request_from_record(fixed[0]).tres_per_job == "gres:gpu:2"
    trace = trace_from_records(records, "d.txt")
    assert [(j.gpus, j.exclusive) for j in trace.jobs] == [(2, False), (2, False)]
    assert any("ReqTRES names no GRES" in n for n in trace.notes)
    # beside a job whose ReqTRES names its GPUs, one without asked for none: held more, it ran exclusive
    mixed = parse_sacct(f"{OLD_HEAD}\n{_old(1, 'cpu=12,node=1')}\n{_old(2, 'cpu=12,gres/gpu=2,node=1')}\n", "d.txt")
    assert with_gres_requests(mixed) == (mixed, [])


def test_a_report_of_a_dump_without_users_or_accounts_is_refused(tmp_path):
    """Without User and Account every run read as one blank user and account: "2 jobs, 1 users" and a budget row
    of account "" (the report reader itself reads such dumps for the tests' small tables; the CLI refuses)."""
    p = tmp_path / "d.txt"
    p.write_text("JobIDRaw|State|Start|End|NodeList|AllocTRES\n1|COMPLETED|2026-10-01T10:00:00|2026-10-01T11:00:00|"
                 "gpu01|cpu=8,gres/gpu=1,node=1\n")
    code, out, err = cli("report", "--sacct-file", str(p), "--since", "2026-10-01", "--until", "2026-10-02",
                         "--out", str(tmp_path / "o"))
    assert code != 0 and len(err.strip().splitlines()) == 1
    assert f"{p}:1: the header line lacks sacct field(s) User, Account" in err
