"""The sandbox's pure layers: a trace from sacct text, the speed-up rules, the sbatch arguments, the scaled site
file, the outcome figures; and the CLI's one-line refusals of bad input (all before any daemon starts)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from datetime import datetime
from pathlib import Path

import pytest

from slurmtools.errors import ParseError
from slurmtools.sandbox import outcome as oc
from slurmtools.sandbox import clocks, sitecopy
from slurmtools.sandbox.example_trace import generate
from slurmtools.sandbox.faketime import MESSAGE_TIMEOUT_S, FakeClock
from slurmtools.sandbox.submission import build, within_second
from slurmtools.sandbox.timescale import Scale, SpeedupError, check, max_speedup, scaled_site_doc
from slurmtools.sandbox.trace import load_trace, trace_from_records, unsettled
from slurmtools.site import load_site
from slurmtools.slurm.commands import parse_sacct

REPO = Path(__file__).resolve().parents[3]
SITE = REPO / "site_configs" / "example" / "site.toml"
HEAD = "JobID|JobIDRaw|User|Account|Partition|QOS|State|Submit|Start|End|TimelimitRaw|NodeList|ReqTRES|AllocTRES"


def _dump(rows: list[str]) -> str:
    return "\n".join([HEAD, *rows]) + "\n"


ROWS = [
    # a requeued job: two runs under one id (sacct -D); the last run is the one replayed
    "10|10|ann|vision|gpu|standard|PREEMPTED|2026-11-02T08:00:00|2026-11-02T08:05:00|2026-11-02T08:35:00|120|gpu01"
    "|billing=8,cpu=32,gres/gpu:h100=8,gres/gpu=8,node=1|",
    "10|10|ann|vision|gpu|standard|COMPLETED|2026-11-02T08:40:00|2026-11-02T09:00:00|2026-11-02T10:00:00|120|gpu02"
    "|billing=8,cpu=32,gres/gpu:h100=8,gres/gpu=8,node=1|",
    # an array of two tasks, 2 nodes x 8 GPUs
    "11_0|12|bo|nlp|gpu|scavenger|COMPLETED|2026-11-02T08:10:00|2026-11-02T08:10:00|2026-11-02T08:40:00|240|gpu[03-04]"
    "|billing=16,cpu=64,gres/gpu:h100=16,gres/gpu=16,node=2|",
    "11_1|13|bo|nlp|gpu|scavenger|COMPLETED|2026-11-02T08:10:00|2026-11-02T08:20:00|2026-11-02T09:20:00|240|gpu[05-06]"
    "|billing=16,cpu=64,gres/gpu:h100=16,gres/gpu=16,node=2|",
    # cancelled while pending: not replayed; still running: not replayed
    "14|14|cy|students|gpu|standard|CANCELLED by 0|2026-11-02T08:15:00|None|2026-11-02T08:16:00|60|None assigned"
    "|billing=1,cpu=4,gres/gpu:h100=1,gres/gpu=1,node=1|",
    "15|15|cy|students|gpu|standard|RUNNING|2026-11-02T08:15:00|2026-11-02T08:15:00|Unknown|60|gpu07"
    "|billing=1,cpu=4,gres/gpu:h100=1,gres/gpu=1,node=1|",
]


def test_trace_from_sacct_keeps_runs_arrays_and_says_what_it_left_out():
    t = trace_from_records(parse_sacct(_dump(ROWS), "h.txt", ()), "h.txt")
    assert [j.key for j in t.jobs] == ["10", "11_0", "11_1"]
    a = t.jobs[0]
    assert (a.user, a.account, a.tier, a.nodes, a.gpus, a.gpu_type, a.cpus) == ("ann", "vision", "standard", 1, 8,
                                                                                "h100", 32)
    assert a.run_s == 3600 and a.limit_s == 7200
    assert a.submit == datetime(2026, 11, 2, 8, 0).timestamp()   # the first submission (local time, as sacct writes it)
    assert a.start == datetime(2026, 11, 2, 9, 0).timestamp()    # the last run's start
    assert (t.jobs[1].array_job, t.jobs[1].array_task, t.jobs[2].array_task) == ("11", 0, 1)
    assert any("1 job(s) never started" in n for n in t.notes)
    assert any("1 job(s) still pending or running" in n for n in t.notes)


def test_trace_without_needed_columns_fails_in_one_line(tmp_path):
    p = tmp_path / "h.txt"
    p.write_text("JobID|User|Account|State|Submit|Start|End\n1|a|b|COMPLETED|x|y|z\n")
    with pytest.raises(ParseError) as e:
        load_trace(str(p))
    msg = str(e.value)
    assert msg.startswith(f"{p}:") and "QOS" in msg and "Timelimit" in msg and "\n" not in msg


def test_speedup_limits_name_the_bound():
    site = load_site(SITE)
    # scavenger's grace (60 s) and a 1 h job limit both bound the speed-up at 60
    assert max_speedup([3600.0], site)[0] == 60
    with pytest.raises(SpeedupError) as e:
        check(61, [3600.0], site)
    assert "--speedup 61" in str(e.value) and "at most 60 holds" in str(e.value)
    most, why = max_speedup([1800.0], site)
    assert most == 30 and "shortest job time limit (30 min)" in why
    with pytest.raises(SpeedupError):
        check(0.5, [3600.0], site)


def test_scaled_clocks_and_requeue_delay_by_release():
    conf = Scale(60).slurm_conf(requeue_delay_param=True, max_limit_s=2 * 86400)
    assert "requeue_delay=1" in conf["SchedulerParameters"] and "_cred_expire" not in conf
    assert "bf_resolution=1" in conf["SchedulerParameters"] and conf["PriorityDecayHalfLife"] == "0-02:48:00"
    old = Scale(60).slurm_conf(requeue_delay_param=False, max_limit_s=3600)
    assert old["_cred_expire"] == "5" and "requeue_delay" not in old["SchedulerParameters"]
    assert len(Scale(60).limits_note(requeue_delay_param=False)) == 3
    only = Scale(2).limits_note(requeue_delay_param=True)   # only the compiled-in 30 s timer is left
    assert len(only) == 1 and "up to 30 sandbox s = 60 real s late" in only[0]
    assert Scale(1).limits_note(requeue_delay_param=False) == []
    assert Scale(1).slurm_conf(requeue_delay_param=True, max_limit_s=60)["SchedulerParameters"].startswith(
        "sched_interval=60,sched_min_interval=2000000,bf_interval=30,bf_resolution=60,bf_window=1440")


def test_submissions_scale_limits_and_runs_and_keep_arrays():
    site = load_site(SITE)
    t = trace_from_records(parse_sacct(_dump(ROWS), "h.txt", ()), "h.txt")
    subs = build(t.jobs, Scale(60), site)
    plain, arr = subs[0], subs[1]
    assert plain.keys == ("10",) and plain.work_s == (60.0,) and "--time=2" in plain.argv
    assert "--gres=gpu:h100:8" in plain.argv and "--qos=standard" in plain.argv and plain.signal_lead == 5
    assert arr.keys == ("11_0", "11_1") and "--array=0,1" in arr.argv and arr.tasks == (0, 1)
    assert arr.work_s == (30.0, 60.0) and "--nodes=2" in arr.argv and "--cpus-per-task=32" in arr.argv
    assert arr.signal_lead == 2 and "--time=4" in arr.argv


def test_within_second_moves_each_submission_inside_its_recorded_second_and_repeats_by_seed(tmp_path):
    site = load_site(SITE)
    (tmp_path / "h.txt").write_text(generate(site, 40, 0.1, seed=3))
    t = load_trace(str(tmp_path / "h.txt"))
    subs = build(t.jobs, Scale(1), site)
    moved = within_second(subs, 1)
    by_key = {s.keys: s for s in subs}
    assert sorted(m.keys for m in moved) == sorted(by_key)
    for m in moved:
        orig = by_key[m.keys]
        assert 0 <= m.at - orig.at < 1 and m.argv == orig.argv and m.work_s == orig.work_s
    assert [m.at for m in moved] == sorted(m.at for m in moved)
    assert within_second(subs, 1) == moved and within_second(subs, 2) != moved
    assert len({round(m.at - by_key[m.keys].at, 6) for m in moved}) > 1   # not one shift for all


@pytest.mark.parametrize("speedup", [1, 10, 60])
def test_first_submission_meets_the_fair_share_pass_at_one_point_of_the_history_at_any_speedup(speedup):
    """On the fast clock slurmctld's fair-share passes come every recorded 5 minutes on Slurm's clock; the first
    submission lands `lead_in` recorded seconds after one of them, the first one not earlier than asked."""
    clock, origin, first_pass = FakeClock(speedup), 1_000_000.0, 1_000_004.0
    for earliest in (1_000_004.5, 1_000_020.0, 1_000_300.0):
        t0 = clock.first_submission(earliest, 8.0, first_pass)
        assert earliest <= t0 < earliest + clock.priority_pass_s()
        after = clock.slurm_time(t0, origin) - clock.slurm_time(first_pass, origin)
        assert after % 300 == pytest.approx(8.0)
    assert Scale(60).priority_pass_s() == 60 and Scale(1).priority_pass_s() == 300   # whole minutes
    assert FakeClock(60).ALIGNS_TO_PRIORITY_PASS and not Scale(60).ALIGNS_TO_PRIORITY_PASS


def test_sandbox_site_file_scales_durations_and_names_trace_users():
    raw = tomllib.loads(SITE.read_text())
    doc = scaled_site_doc(raw, 60, "/abs/fabric.toml")
    names = sitecopy.sandbox_users(["zed", "ann"])
    doc = sitecopy.with_trace_users(doc, [("ann", "vision"), ("zed", "nosuch")], names)
    back = tomllib.loads(sitecopy.dumps(doc))
    assert back["partitions"]["gpu"]["max_time"] == "2880s"
    assert back["tiers"]["scavenger"]["grace_time"] == "1s" and back["tiers"]["standard"]["grace_time"] == "5s"
    assert back["tiers"]["production"]["grace_time"] == 0 and back["tiers"]["production"]["signal_lead"] == "5s"
    assert back["site"]["fabric"] == "/abs/fabric.toml"
    assert names == {"ann": "sbx0001", "zed": "sbx0002"} and "sbx0001" in back["accounts"]["vision"]["users"]
    assert all("sbx0002" not in a.get("users", []) for a in back["accounts"].values())


class _Run:
    label, site_source, release, nodes, gpus, wall_s = "x", "s.toml", "22.05", 2, 16, 10.0
    scale = Scale(60)
    t0 = 1000.0
    clock_origin = None


def _rec(jid, state, start, end):
    ts = lambda v: datetime.fromtimestamp(v).strftime("%Y-%m-%dT%H:%M:%S")  # noqa: E731
    return f"{jid}|{jid}|u|a|gpu|standard|{state}|{ts(1000)}|{ts(start)}|{ts(end)}|60|gpu01|node=1|"


def test_outcome_waits_preemptions_and_lost_gpu_hours_in_real_time():
    site_t = trace_from_records(parse_sacct(_dump(ROWS[:2]), "h.txt", ()), "h.txt")
    run = _Run()
    run.submitted = {"10": 1000.0}
    run.job_ids = {"10": "7"}
    run.refused, run.never_started, run.work_done = {}, {}, {}
    # sandbox: waited 10 s, ran 40 s, preempted, rerun 70 s (work is 3600 real s = 60 sandbox s)
    recs = parse_sacct("\n".join([HEAD, _rec(7, "PREEMPTED", 1010, 1050), _rec(7, "COMPLETED", 1060, 1130)]), "s",
                       ())
    res = oc.outcome(site_t, run, recs)
    j = res.jobs[0]
    assert j.status == "finished" and j.wait_s == 600 and j.runs == 2 and j.preemptions == 1
    assert j.held_s == 110 * 60 and j.work_s == 3600
    assert j.lost_gpu_h == pytest.approx((110 * 60 - 3600) * 8 / 3600)
    assert res.overall.wait_median_h == pytest.approx(600 / 3600)
    assert res.overall.utilisation == pytest.approx(110 * 8 / (16 * 130))


def test_a_run_accounting_left_open_is_unfinished_with_its_reason_not_a_crash():
    """slurmdbd can hold a started run without its end after the queue drained (seen on 22.05 in CI): the outcome
    names it instead of failing on the empty set of ends."""
    site_t = trace_from_records(parse_sacct(_dump(ROWS[:2]), "h.txt", ()), "h.txt")
    run = _Run()
    run.submitted, run.job_ids = {"10": 1000.0}, {"10": "7"}
    run.refused, run.never_started, run.work_done = {}, {}, {}
    ts = datetime.fromtimestamp(1010).strftime("%Y-%m-%dT%H:%M:%S")
    recs = parse_sacct("\n".join([HEAD, f"7|7|u|a|gpu|standard|RUNNING|{ts}|{ts}|Unknown|60|gpu01|node=1|"]), "s", ())
    j = oc.outcome(site_t, run, recs).jobs[0]
    assert (j.status, j.runs) == ("unfinished", 1) and "no run has an end" in j.why, j


def test_unsettled_names_jobs_whose_accounting_is_not_whole_yet():
    head = "JobID|JobIDRaw|Partition|State|Start|End"
    dump = "\n".join([head,
                      "7|7|gpu|PREEMPTED|2026-11-02T08:05:00|2026-11-02T08:35:00",    # -D: an earlier run
                      "7|7|gpu|COMPLETED|2026-11-02T08:40:00|2026-11-02T09:00:00",
                      "9|9|gpu|REQUEUED|2026-11-02T08:05:00|2026-11-02T08:30:00",       # -D: an earlier run
                      "9|9|gpu|COMPLETED|2026-11-02T08:40:00|2026-11-02T09:00:00",
                      "8_0|9|gpu|CANCELLED by 0|None|2026-11-02T08:16:00",              # cancelled while pending
                      "8_1|10|gpu|RUNNING|2026-11-02T08:15:00|Unknown",                 # not closed yet
                      "11|11||COMPLETED|2026-11-02T08:15:00|2026-11-02T08:16:00",       # made from its step alone
                      "12|12|gpu|COMPLETED|2026-11-02T08:15:00|2026-11-02T08:16:00"]) + "\n"
    recs = parse_sacct(dump, "s.txt")
    assert unsettled(recs, ["7", "8_0", "8_1", "11", "12", "13"]) == {"8_1", "11", "13"}
    assert unsettled(recs, ["7", "8_0", "9", "12"]) == set()
    assert unsettled([], ["7"]) == {"7"}


def test_outcome_on_the_fast_clock_reads_slurm_times_back_to_the_wall_clock():
    """The same replay as above, recorded by a Slurm whose clock ran 60x faster from wall second 900: sacct holds
    fast-clock times, and the figures must come out the same."""
    site_t = trace_from_records(parse_sacct(_dump(ROWS[:2]), "h.txt", ()), "h.txt")
    run = _Run()
    run.scale, run.clock_origin = FakeClock(60), 900.0
    run.submitted, run.job_ids = {"10": 1000.0}, {"10": "7"}
    run.refused, run.never_started, run.work_done = {}, {}, {}
    fast = lambda wall: 900 + 60 * (wall - 900)  # noqa: E731
    recs = parse_sacct("\n".join([HEAD, _rec(7, "PREEMPTED", fast(1010), fast(1050)),
                                  _rec(7, "COMPLETED", fast(1060), fast(1130))]), "s", ())
    j = oc.outcome(site_t, run, recs).jobs[0]
    assert j.wait_s == 600 and j.held_s == 110 * 60 and j.preemptions == 1 and j.start == 600 and j.end == 130 * 60
    run.clock_origin = None
    with pytest.raises(ValueError, match="origin"):
        oc.outcome(site_t, run, recs)


def test_fast_clock_gives_slurm_the_recorded_durations():
    site = load_site(SITE)
    raw = tomllib.loads(SITE.read_text())
    fast = clocks.check("faketime", 200, [60.0], site)   # far beyond what the scaled clock can express here
    assert isinstance(fast, FakeClock) and fast.lab_env() == {"SLURMTOOLS_LAB_FAKETIME": "200"}
    t = trace_from_records(parse_sacct(_dump(ROWS), "h.txt", ()), "h.txt")
    subs = build(t.jobs, FakeClock(60), site)
    # recorded limits (120 and 240 min) and the tier's 5-minute signal lead as they are; the work still 1/60
    assert "--time=120" in subs[0].argv and subs[0].work_s == (60.0,) and subs[0].signal_lead == 300
    assert "--time=240" in subs[1].argv and subs[1].work_s == (30.0, 60.0)
    doc = FakeClock(60).site_doc(raw, "/abs/fabric.toml")
    assert doc["partitions"]["gpu"]["max_time"] == "172800s" and doc["tiers"]["scavenger"]["grace_time"] == "60s"
    assert doc["site"]["fabric"] == "/abs/fabric.toml"
    fast_conf = FakeClock(60).slurm_conf(requeue_delay_param=False, max_limit_s=60)
    assert {k: v for k, v in fast_conf.items() if "Timeout" not in k} == Scale(1).slurm_conf(
        requeue_delay_param=False, max_limit_s=60)   # the scheduler sees a 1x replay's settings
    assert fast_conf["PrologEpilogTimeout"] == "1800"   # its real 30 s
    # MessageTimeout also sets how long a preemptor waits before preempting more: as recorded while it leaves a
    # message half a real second, N x that above
    assert fast_conf["MessageTimeout"] == "30" and FakeClock(60).message_timeout_s() == 30
    assert FakeClock(20).slurm_conf(requeue_delay_param=False, max_limit_s=60)["MessageTimeout"] == "10"
    assert FakeClock(10).message_timeout_s() == 10 and FakeClock(21).message_timeout_s() == 11
    assert len(FakeClock(20).limits_note(requeue_delay_param=False)) == 1
    said = FakeClock(60).limits_note(requeue_delay_param=False)[1]
    assert "MessageTimeout was 30 s of Slurm's clock, not 10 s" in said and "20 s longer" in said
    assert FakeClock(10).slurm_time(1100.0, 1000.0) == 2000.0 and FakeClock(10).wall_time(2000.0, 1000.0) == 1100.0
    with pytest.raises(SpeedupError, match="--speedup 0.5"):
        clocks.check("faketime", 0.5, [], site)
    with pytest.raises(SpeedupError, match="--clock sundial"):
        clocks.check("sundial", 10, [], site)
    assert clocks.max_speedup("scaled", [1800.0], site)[0] == 30
    # the fast clock keeps SlurmdTimeout at its real 300 s, N x 300 s of Slurm's, a 16-bit number in slurm.conf
    most, why = clocks.max_speedup("faketime", [1800.0], site)
    assert most == 218 and "SlurmdTimeout" in why and "65533" in why
    assert FakeClock(218).slurm_conf(requeue_delay_param=False, max_limit_s=60)["SlurmdTimeout"] == "65400"
    with pytest.raises(SpeedupError, match=r"--speedup 219: .*SlurmdTimeout.*at most 218 holds"):
        clocks.check("faketime", 219, [], site)


@pytest.mark.parametrize("clock", [Scale(60), FakeClock(60)])
def test_the_sandbox_lab_runs_no_prolog_or_epilog(tmp_path, clock):
    """The overrides the lab applies remove Prolog= and Epilog= (an empty value; scripts/slurm-lab deletes the key):
    their real time would hold nodes N times longer in the sandbox's time."""
    from slurmtools.sandbox.lab import prepare
    from slurmtools.slurm.releases import release_for

    t = trace_from_records(parse_sacct(_dump(ROWS), "h.txt", ()), "h.txt")
    _, overrides, _ = prepare(tmp_path, load_site(SITE), tomllib.loads(SITE.read_text()), t, clock,
                              release_for("25.11"))
    lines = overrides.read_text().splitlines()
    assert "Prolog=" in lines and "Epilog=" in lines, lines
    assert any(ln.startswith("SchedulerParameters=") for ln in lines), lines   # the clock's own settings stay


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "slurmtools", *args], cwd=REPO, capture_output=True, text=True)


def test_cli_refuses_bad_input_in_one_line(tmp_path):
    good = tmp_path / "h.txt"
    good.write_text(generate(load_site(SITE), 20, 0.5, seed=1))
    bad_trace = tmp_path / "bad.txt"
    bad_trace.write_text("JobID|State|Start|End\n1|COMPLETED|x|y\n")
    bad_site = tmp_path / "site.toml"
    bad_site.write_text(SITE.read_text().replace("priority = 1000", "priority = -5").replace(
        '"../../topology/example/fabric.toml"', f'"{REPO}/topology/example/fabric.toml"'))
    cases = [
        (["--trace", str(bad_trace), "--site", str(SITE)], [str(bad_trace), "QOS"]),
        (["--trace", str(good), "--site", str(bad_site)], [str(bad_site), "priority"]),
        (["--trace", str(good), "--site", str(SITE), "--speedup", "500"], ["--speedup", "at most 218 holds"]),
        (["--trace", str(good), "--site", str(SITE), "--clock", "scaled", "--speedup", "500"],
         ["--speedup", "at most 60 holds"]),
        (["--trace", str(good), "--site", str(SITE), "--slurm", "21.08"], ["--slurm 21.08"]),
        (["--site", str(SITE)], ["--trace FILE or --since DURATION"]),
        (["--trace", str(good), "--since", "7d", "--site", str(SITE)], ["give exactly one"]),
        (["--trace", str(good), "--site", str(SITE), "--formats", "pdf"], ["--formats", "pdf"]),
        (["--trace", str(good), "--site", str(SITE), "--shapes", "both", "--baseline", str(SITE)], ["--shapes both"]),
        (["--trace", str(good), "--site", str(SITE), "--node-scale", "0"], ["--node-scale 0", "between 1 and"]),
        (["--trace", str(good), "--site", str(SITE), "--node-scale", "x"], ["--node-scale", "'x'"]),
        (["--trace", str(good), "--site", str(SITE), "--clock", "sundial"], ["--clock", "scaled, faketime"]),
        (["--trace", str(good), "--site", str(SITE), "--lead-in", "-5"], ["--lead-in -5", "0 to 3600"]),
        (["--trace", str(good), "--site", str(SITE), "--repeat", "0"], ["--repeat 0", "1 to 10"]),
        (["--trace", str(good), "--site", str(SITE), "--repeat", "4", "--lead-in", "3590"],
         ["--repeat 4", "3611 s", "at most 3600"]),
    ]
    for args, words in cases:
        r = _cli("sandbox", "replay", *args, "--workdir", str(tmp_path / "w"))
        err = r.stderr.strip()
        assert r.returncode != 0 and len(err.splitlines()) == 1 and err.startswith("slurmtools: error:"), (args, err)
        assert all(w in err for w in words), (args, err)
    assert not (tmp_path / "w").exists()  # nothing was started


def test_planner_shapes_scale_the_switch_wait_and_placement_counts_leaves():
    from slurmtools.sandbox.planned import placement_fn, planner_shapes, site_view

    site = load_site(SITE)
    t = trace_from_records(parse_sacct(_dump(ROWS), "h.txt", ()), "h.txt")
    view = site_view(site)
    shapes, notes = planner_shapes(t.jobs, site, view, Scale(60))
    assert notes == []
    two = shapes["11_0"]   # 16 GPUs: two whole hosts under one leaf, the planner's 2-minute wait scaled to 2 s
    assert "--nodes=2" in two and "--gpus-per-node=h100:8" in two and "--switches=1@0:02" in two
    assert not any(o.startswith(("--time", "--signal", "--qos", "--account", "--job-name")) for o in two)
    subs = build(t.jobs, Scale(60), site, shapes)
    assert "--switches=1@0:02" in subs[1].argv and "--qos=scavenger" in subs[1].argv
    place = placement_fn(view)
    one_leaf, two_leaves = place(("gpu01", "gpu02"), 8), place(("gpu04", "gpu05"), 8)
    assert one_leaf[0] == 1 and two_leaves[0] == 2 and two_leaves[1] < one_leaf[1]


def test_a_preempted_job_that_finished_after_its_grace_deadline_counts_as_preempted_and_finished():
    """22.05 ends such a run TIMEOUT; the job's program saved all its work, so it finished, and it was preempted."""
    t = trace_from_records(parse_sacct(_dump(ROWS[:2]), "h.txt", ()), "h.txt")
    run = _Run()
    run.submitted, run.job_ids, run.refused, run.never_started = {"10": 1000.0}, {"10": "7"}, {}, {}
    recs = parse_sacct("\n".join([HEAD, _rec(7, "TIMEOUT", 1010, 1071)]), "s", ())
    run.work_done = {"10": True}
    j = oc.outcome(t, run, recs).jobs[0]
    assert (j.status, j.preemptions, j.runs) == ("finished", 1, 1)
    run.work_done = {"10": False}   # a TIMEOUT without the work done is a job that hit its limit
    j = oc.outcome(t, run, recs).jobs[0]
    assert (j.status, j.preemptions) == ("unfinished", 0)


def test_an_accelerated_replay_that_preempted_says_what_its_preemption_figures_are_worth():
    assert clocks.acceleration_note(Scale(1), 7) == []      # real speed: nothing to warn about
    assert clocks.acceleration_note(Scale(30), 0) == []     # no preemption figure to read
    (note,) = clocks.acceleration_note(Scale(30), 4)
    assert note.startswith("at 30x the preemptions and the GPU-hours they lost are one timing of the history")
    assert "--repeat N" in note and "--speedup 1" in note and "docs/sandbox.md" in note
    # the scaled clock kept a 1x replay's preemptions at no speed-up measured, so even 10x gets the warning
    (note,) = clocks.acceleration_note(Scale(10), 4)
    assert "one timing of the history" in note and "only on the fast clock at up to 20x" in note


def test_the_fast_clock_says_its_preemptions_were_measured_faithful_only_up_to_20x():
    (at20,) = clocks.acceleration_note(FakeClock(20), 4)
    assert at20.startswith("at 20x on this clock (up to 20x), replays of the benchmark's histories preempted")
    assert "one timing" not in at20 and "--repeat N" in at20
    (at30,) = clocks.acceleration_note(FakeClock(30), 4)
    assert "one timing of the history" in at30 and "only at up to 20x" in at30
    assert FakeClock(20).message_timeout_s() == MESSAGE_TIMEOUT_S < FakeClock(30).message_timeout_s()


def test_the_default_speed_up_is_each_clocks_measured_best():
    """Without --speedup: the scaled clock keeps the median run >= 40 s (its best start accuracy); the fast clock
    goes to at most 20x (where it kept a 1x replay's preemptions) and keeps the median run >= 12 s (20x of the
    benchmark's 4-minute median)."""
    four_min, hour, minute = [200.0, 240.0, 300.0], [3600.0] * 3, [60.0] * 3
    assert clocks.default_speedup("scaled", four_min, 30) == 6
    assert clocks.default_speedup("scaled", hour, float("inf")) == 90
    assert clocks.default_speedup("scaled", hour, 30) == 30              # what the site's units hold comes first
    assert clocks.default_speedup("faketime", four_min, 218) == 20
    assert clocks.default_speedup("faketime", hour, 218) == 20           # never past what was measured faithful
    assert clocks.default_speedup("faketime", minute, 218) == 5
    assert clocks.default_speedup("faketime", [5.0], 218) == 1
    assert clocks.default_speedup("faketime", [], 218) == 1
