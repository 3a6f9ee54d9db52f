"""GPU-hours lost since the last checkpoint, from the epilog's record or the decision log (hand-computed).

In reports_handmade.py run 0 of job 102 (standard, 4 GPUs) ran 02:10-05:10, was PREEMPTED and requeued: 12 GPU-h,
the upper bound when its last checkpoint is unknown."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

import reports_handmade as hm
from slurmtools import audit
from slurmtools.reports import ingest, metrics, outputs
from slurmtools.reports.sacct import read_sacct
from slurmtools.site import load_site

SINCE, UNTIL = datetime.fromisoformat(hm.SINCE), datetime.fromisoformat(hm.UNTIL)


def _report(epilog):
    return metrics.compute(read_sacct(hm.TEXT, text=True).jobs, load_site(None), SINCE, UNTIL, epilog=epilog)


def _spool(tmp_path, records=(), events=()):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    for i, r in enumerate(records):
        (jobs / f"{r['job']}.{r['run']}.gpu0{i}.json").write_text(json.dumps(r))
    for ev, job, det in events:
        audit.record(ev, job=job, user="bob", details=det, path=tmp_path / audit.LOG_NAME)
    return jobs


def test_unknown_checkpoint_keeps_the_whole_run_as_upper_bound():
    r = _report(None)
    p = r.tables["preemption_by_tier"]
    assert p.loc["standard", "gpu_hours_lost"] == pytest.approx(12)
    assert bool(p.loc["standard", "upper_bound"]) and p.loc["standard", "runs_with_checkpoint_time"] == 0
    assert r.summary["gpu_hours_lost_is_upper_bound"] is True
    row = r.tables["preempted_runs"].iloc[0]
    assert row["job_id"] == "102" and row["run"] == 0 and bool(row["upper_bound"])
    assert row["gpu_hours_lost"] == pytest.approx(12)
    assert "12.0 GPU-hours lost (upper bound: last checkpoint unknown for some runs)" in outputs.render_md(r)


def test_checkpoint_from_the_epilog_record(tmp_path):
    # saved at 04:40, preempted at 05:10: 4 GPUs x 0.5 h = 2 GPU-h lost
    jobs = _spool(tmp_path, [{"job": 102, "run": 0, "restart_count": 1, "gpus": [0, 1, 2, 3],
                              "last_checkpoint": "2026-11-02T04:40:00"}])
    ep, notes = ingest.load_epilog(jobs)
    assert notes == []
    r = _report(ep)
    p = r.tables["preemption_by_tier"]
    assert p.loc["standard", "gpu_hours_lost"] == pytest.approx(2)
    assert not bool(p.loc["standard", "upper_bound"]) and p.loc["standard", "runs_with_checkpoint_time"] == 1
    assert r.summary["gpu_hours_lost_to_preemption"] == pytest.approx(2)
    assert r.summary["gpu_hours_lost_is_upper_bound"] is False and r.summary["lost_runs_with_checkpoint_time"] == 1
    row = r.tables["preempted_runs"].iloc[0]
    assert str(row["last_checkpoint"]) == "2026-11-02 04:40:00" and not bool(row["upper_bound"])
    assert "2.0 GPU-hours lost since the last checkpoint" in outputs.render_md(r)


def test_checkpoint_from_the_decision_log_beside_the_jobs_folder(tmp_path):
    # epoch seconds as the epilog writes them (local time, like sacct's): 04:10 -> 4 GPUs x 1 h = 4 GPU-h
    t = datetime(2026, 11, 2, 4, 10).timestamp()
    jobs = _spool(tmp_path, events=[("preempted", 102, {"run": 0, "reported_by": "job", "last_checkpoint": t}),
                                    ("admission_refused", None, {"last_checkpoint": t}),
                                    ("requeued", 102, {"run": 0})])
    ep, notes = ingest.load_epilog(jobs)
    assert notes == []
    r = _report(ep)
    assert r.tables["preemption_by_tier"].loc["standard", "gpu_hours_lost"] == pytest.approx(4)
    assert r.summary["gpu_hours_lost_is_upper_bound"] is False


def test_checkpoint_before_the_run_started_loses_all_of_it_but_is_known(tmp_path):
    # resumed from a checkpoint of 01:00, never saved again before the 02:10-05:10 run was preempted: 12 GPU-h
    jobs = _spool(tmp_path, events=[("requeued", 102, {"run": 0, "last_checkpoint": "2026-11-02T01:00:00"})])
    r = _report(ingest.load_epilog(jobs)[0])
    p = r.tables["preemption_by_tier"]
    assert p.loc["standard", "gpu_hours_lost"] == pytest.approx(12)
    assert not bool(p.loc["standard", "upper_bound"])


def test_checkpoint_of_another_run_does_not_count(tmp_path):
    # run 1 (05:20-07:20) finished normally; its checkpoint says nothing about run 0
    jobs = _spool(tmp_path, [{"job": 102, "run": 1, "last_checkpoint": "2026-11-02T07:00:00"}])
    r = _report(ingest.load_epilog(jobs)[0])
    assert r.tables["preemption_by_tier"].loc["standard", "gpu_hours_lost"] == pytest.approx(12)
    assert r.summary["gpu_hours_lost_is_upper_bound"] is True


def test_unreadable_decision_is_a_note(tmp_path):
    jobs = _spool(tmp_path, events=[("preempted", 102, {"run": 0, "last_checkpoint": "not a time"})])
    ep, notes = ingest.load_epilog(jobs)
    assert len(notes) == 1 and "decisions.jsonl:1: event preempted of job 102: field details.last_checkpoint" in notes[0]
    assert _report(ep).tables["preemption_by_tier"].loc["standard", "gpu_hours_lost"] == pytest.approx(12)


def test_preempted_runs_in_html_and_csv(tmp_path):
    r = _report(None)
    outputs.write(r, tmp_path / "out", ("html", "csv"))
    html = (tmp_path / "out" / "report.html").read_text()
    assert "preemptions / GPU-hours lost (upper bound)" in html
    head = (tmp_path / "out" / "preempted_runs.csv").read_text().splitlines()[0]
    assert head == ("job_id,run,tier,user,state,requeued,gpus,start,end,last_checkpoint,gpu_hours,gpu_hours_lost,"
                    "upper_bound")


def test_self_requeued_run_is_preempted_unless_the_decision_log_says_time_limit(tmp_path):
    """A job that checkpoints and requeues itself ends REQUEUED in sacct, not PREEMPTED, whether the warning was a
    preemption or its time limit: REQUEUED counts as preempted, except where the decision log has the job's own
    `time_limit` report for that run. A `preempted` event makes a run count as preempted whatever sacct says."""
    text = hm.TEXT.replace("PREEMPTED|ft|102|", "REQUEUED|ft|102|")
    assert text != hm.TEXT

    def report(epilog):
        return metrics.compute(read_sacct(text, text=True).jobs, load_site(None), SINCE, UNTIL, epilog=epilog)

    plain = report(None).tables["preemption_by_tier"]
    assert plain.loc["standard", "preempted_runs"] == 1 and plain.loc["standard", "requeued_runs"] == 1
    (tmp_path / "a").mkdir()
    jobs = _spool(tmp_path / "a", events=[("preempted", 102, {"run": 0, "reported_by": "job"}),
                                          ("requeued", 102, {"run": 0}), ("preempted", 999, {"run": 0})])
    ep, notes = ingest.load_epilog(jobs)
    assert notes == []
    p = report(ep).tables["preemption_by_tier"]
    assert p.loc["standard", "preempted_runs"] == 1 and p.loc["standard", "requeued_runs"] == 1
    assert int(p["preempted_runs"].sum()) == 1  # job 999 is not in sacct's window: nothing invented
    (tmp_path / "b").mkdir()
    jobs = _spool(tmp_path / "b", events=[("time_limit", 102, {"run": 0, "reported_by": "job"}),
                                          ("requeued", 102, {"run": 0})])
    ep, notes = ingest.load_epilog(jobs)
    assert notes == [] and bool(ep["time_limit_reported"].any())
    p = report(ep).tables["preemption_by_tier"]
    assert p.loc["standard", "preempted_runs"] == 0 and p.loc["standard", "requeued_runs"] == 1


def test_records_numbered_alike_for_two_runs_are_placed_on_sacct_runs_by_time(tmp_path):
    """Issue 16: slurmd skipped the prolog of a quick restart, and the epilog of run 0 (02:10-05:10, preempted)
    numbered its record and its decision-log event run 1, clashing with the real run 1 (05:20-07:20). The
    report places each on the sacct run that had ended when its epilog ran: run 0 keeps its checkpoint (2 GPU-h
    lost, not the whole 12 as an upper bound) and each run its own utilisation."""
    at = lambda hhmmss: datetime.fromisoformat(f"2026-11-02T{hhmmss}").timestamp()  # noqa: E731
    recs = [{"job": 102, "run": 1, "gpus": [0, 1, 2, 3], "start": None, "end": at("05:10:03"),
             "gpu_accounting": [{"gpu": i, "gpu_util_pct": 20} for i in range(4)]},
            {"job": 102, "run": 1, "gpus": [0, 1, 2, 3], "start": at("05:20:00"), "end": at("07:20:02"),
             "gpu_accounting": [{"gpu": i, "gpu_util_pct": 90} for i in range(4)]}]
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    for r, node in zip(recs, ("gpu14", "gpu07")):
        (jobs / f"102.1.{node}.json").write_text(json.dumps(r))
    audit.record("preempted", job=102, user="bob", path=tmp_path / audit.LOG_NAME, time=at("05:10:04"),
                 details={"run": 1, "reported_by": "job", "last_checkpoint": at("04:40:00"), "run_end": at("05:10:03")})
    audit.record("requeued", job=102, user="bob", path=tmp_path / audit.LOG_NAME, time=at("05:10:04"),
                 details={"run": 1, "run_end": at("05:10:03")})
    ep, notes = ingest.load_epilog(jobs)
    assert notes == [] and len(ep) == 2  # two runs kept apart although both say run 1
    r = _report(ep)
    p = r.tables["preemption_by_tier"]
    assert p.loc["standard", "gpu_hours_lost"] == pytest.approx(2)
    assert p.loc["standard", "preempted_runs"] == 1 and not bool(p.loc["standard", "upper_bound"])
    assert any("placed on sacct's run by time" in n for n in r.notes)
    waste = r.tables["top_waste_jobs"]
    assert "102" in set(waste["job_id"])  # run 0 at 20 % is a waster; run 1 at 90 % is not
    row = waste[waste["job_id"] == "102"].iloc[0]
    assert row["gpu_util_pct"] == pytest.approx(20) and row["gpu_hours"] == pytest.approx(12)


def test_preempted_run_that_finished_in_the_grace_time_is_not_lost(tmp_path):
    """Issue 16, measured on Slurm 22.05: a preempted job whose program ends on its own after the grace deadline
    but before Slurm's next grace check is marked TIMEOUT and not requeued; its work is done. The decision log says
    Slurm preempted it (PreemptTime was set): the report counts it as finished in the grace time, neither
    preempted nor lost, as sacct (TIMEOUT) says."""
    text = hm.TEXT.replace("COMPLETED|a|b <script>", "TIMEOUT|a|b <script>")
    assert text != hm.TEXT
    jobs = _spool(tmp_path, events=[("preempted", 110, {"run": 0, "preempt_time": "2026-11-02T12:59:00"})])
    ep, notes = ingest.load_epilog(jobs)
    r = metrics.compute(read_sacct(text, text=True).jobs, load_site(None), SINCE, UNTIL, epilog=ep)
    p = r.tables["preemption_by_tier"]
    assert p.loc["standard", "preempted_runs"] == 1  # job 102's run 0 only
    assert p.loc["standard", "gpu_hours_lost"] == pytest.approx(12)
    assert r.summary["runs_finished_in_preemption_grace"] == 1 and r.summary["failed_runs"] == 1  # 103
