"""`slurmtools admin restart-now`: the rule (when StartTime=now is safe) and the polling loop's bookkeeping.

What Slurm does with an early StartTime=now is measured in the lab (tests/integration/test_churn_lab.py and the
module docstring of slurmtools/slurm/restart.py); here the loop runs over a scripted sequence of job states."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from slurmtools.slurm.restart import SETTLE_S, next_step, restart_now


@pytest.mark.parametrize("state,reason,since,now,want", [
    ("RUNNING", "None", None, 0, "running"),
    ("COMPLETING", "None", None, 0, "wait"),
    ("PENDING", "BeginTime", None, 0, "wait"),
    ("PENDING", "BeginTime", 10.0, 10.0 + SETTLE_S - 0.1, "wait"),
    ("PENDING", "BeginTime", 10.0, 10.0 + SETTLE_S, "restart"),
    ("PENDING", "JobHeldAdmin", 0.0, 100.0, "held"),
    ("COMPLETED", "None", None, 0, "finished"),
    ("CANCELLED", "None", None, 0, "finished"),
])
def test_next_step(state, reason, since, now, want):
    assert next_step(state, reason, since, now)[0] == want


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


class ScriptedJobs:
    """Each job's state as a function of the clock; records every StartTime update with its time."""

    def __init__(self, clock, script):
        self.clock, self.script, self.updates = clock, script, []

    def job(self, jid):
        if jid not in self.script:
            raise RuntimeError(f"job {jid} is not known to Slurm")
        return SimpleNamespace(state=self.script[jid](self.clock()), reason="BeginTime")

    def update_job(self, jid, **fields):
        self.updates.append((jid, self.clock(), fields))


def test_restart_waits_for_completing_then_settles():
    c = Clock()
    jobs = ScriptedJobs(c, {7: lambda t: "COMPLETING" if t < 3 else "PENDING",
                            8: lambda t: "RUNNING",
                            9: lambda t: "COMPLETED"})
    out = restart_now(jobs, [7, 8, 9, 404], timeout=60, clock=c, sleep=c.sleep, poll_s=0.5)
    assert [(r.job_id, r.outcome) for r in out] == [(7, "restarted"), (8, "running"), (9, "finished"),
                                                     (404, "error")]
    (jid, when, fields), = jobs.updates
    assert jid == 7 and fields == {"StartTime": "now"} and when >= 3 + SETTLE_S
    assert "not known" in out[3].detail


def test_restart_gives_up_after_timeout():
    c = Clock()
    jobs = ScriptedJobs(c, {7: lambda t: "COMPLETING"})
    (r,) = restart_now(jobs, [7], timeout=10, clock=c, sleep=c.sleep, poll_s=1)
    assert r.outcome == "timeout" and "COMPLETING" in r.detail and jobs.updates == []


def test_restart_resets_settling_when_the_job_runs_again():
    c = Clock()
    # pending at 1 s, started by the scheduler at 2 s, requeued again: pending from 5 s
    jobs = ScriptedJobs(c, {7: lambda t: "PENDING" if t < 2 or t >= 5 else "COMPLETING"})
    (r,) = restart_now(jobs, [7], timeout=60, clock=c, sleep=c.sleep, poll_s=0.5)
    assert r.outcome == "restarted" and jobs.updates[0][1] >= 5 + SETTLE_S
