"""The epilog's run identity from Slurm's own job record (issue 16).

The field sets are what `scontrol show job` printed inside the lab's epilog (captured 2026-11-24 on Slurm 22.05.8
and 25.11.7; `now` is the epilog's own clock at that moment), for a run that completed, one requeued by
`scontrol requeue` and one requeued by preemption.
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from slurmtools.hooks.run_identity import identify, slurm_time, start_from_sacct, was_requeued


def t(s: str) -> float:
    v = slurm_time(s)
    assert v is not None
    return v


# 22.05.8: job 2 requeued by scontrol 8 s after its start (prolog at 05:11:18); its epilog:
REQUEUED_22 = {"JobState": "COMPLETING", "Reason": "None", "Requeue": "1", "Restarts": "1", "ExitCode": "0:0",
               "RunTime": "00:00:00", "StartTime": "2026-11-24T05:11:26", "EndTime": "2026-11-24T05:21:26"}
# 22.05.8: job 4 ran 5 s and completed
DONE_22 = {"JobState": "COMPLETING", "Reason": "None", "Requeue": "1", "Restarts": "0", "ExitCode": "0:0",
           "RunTime": "00:00:05", "StartTime": "2026-11-24T05:12:28", "EndTime": "2026-11-24T05:12:33",
           "PreemptTime": "None"}
# 25.11.7: job 11 preempted (scavenger, PreemptMode=REQUEUE); environment had SLURM_JOB_START_TIME=1795498028
PREEMPTED_25 = {"JobState": "COMPLETING", "Reason": "None", "Restarts": "1", "RunTime": "00:00:00",
                "StartTime": "2026-11-24T05:28:19", "EndTime": "2026-11-24T05:38:19"}


def test_requeued_run_on_22_05_without_prolog_mark_is_run_0_and_start_left_for_sacct():
    now = t("2026-11-24T05:11:26") + 0.5
    ident = identify(REQUEUED_22, env_restarts=1, env_start=None, mark_start=None, mark_restarts=None, now=now)
    assert (ident.run, ident.requeued) == (0, True)
    # scontrol's StartTime is the requeue time here, not the run's start: never taken
    assert ident.start is None and ident.start_source is None


def test_requeued_run_keeps_the_prolog_mark_of_its_own_run_only():
    now = t("2026-11-24T05:11:26") + 0.5
    ok = identify(REQUEUED_22, 1, None, mark_start=1795497078.5, mark_restarts=0, now=now)
    assert (ok.run, ok.start, ok.start_source) == (0, 1795497078.5, "prolog")
    stale = identify(REQUEUED_22, 1, None, mark_start=1795497000.0, mark_restarts=1, now=now)
    assert stale.run == 0 and stale.start is None and "ignored" in stale.notes[0]


def test_completed_run_takes_slurms_start_time():
    now = t("2026-11-24T05:12:33") + 0.1
    ident = identify(DONE_22, env_restarts=0, env_start=None, mark_start=None, mark_restarts=None, now=now)
    assert (ident.run, ident.requeued, ident.start, ident.start_source) == (0, False, t("2026-11-24T05:12:28"),
                                                                            "slurm")


def test_preempted_run_on_25_11_takes_the_environment_start():
    now = t("2026-11-24T05:28:19") + 0.2
    ident = identify(PREEMPTED_25, env_restarts=1, env_start=1795498028, mark_start=None, mark_restarts=None,
                     now=now)
    assert (ident.run, ident.requeued, ident.start, ident.start_source) == (0, True, 1795498028.0, "slurm")


def test_later_completed_run_is_counted_from_restarts():
    done = dict(DONE_22, Restarts="3")
    now = t("2026-11-24T05:12:33") + 0.1
    assert identify(done, 3, None, None, None, now).run == 3


def test_no_limit_requeued_run_has_unknown_end():
    f = dict(REQUEUED_22, EndTime="Unknown")
    assert was_requeued(f, 1, t("2026-11-24T05:11:27")) is True


def test_unreadable_record_falls_back_to_the_mark_then_the_count():
    assert identify(None, 2, None, 10.0, 1, 100.0).as_tuple() == (1, 10.0, "prolog", None)
    ident = identify(None, 2, None, None, None, 100.0)
    assert ident.run == 2 and ident.requeued is None and "may be 1 ahead" in ident.notes[0]


def test_start_from_sacct_picks_the_runs_row():
    out = "2026-11-24T05:27:07\n2026-11-24T05:29:30\nUnknown\n"
    assert start_from_sacct(out, 1) == t("2026-11-24T05:29:30")
    assert start_from_sacct(out, 0) == t("2026-11-24T05:27:07")
    assert start_from_sacct(out, 5) is None


@pytest.mark.parametrize("bad", ["", "Unknown", "None", "2026-13-01T00:00:00", "2026-11-24 05:27:07",
                                 "２０２６-11-24T05:27:07", "2026-11-24T05:27:0x"])
def test_slurm_time_refuses_what_is_not_a_time(bad):
    assert slurm_time(bad) is None


@given(st.integers(min_value=0, max_value=50), st.booleans(), st.integers(min_value=60, max_value=86400))
def test_run_index_is_restarts_less_one_exactly_when_requeued(run, requeued, limit):
    """Whatever the run and the time limit: a requeued run's record (restarts already counted, EndTime in the
    future) gives back its own index, and so does a completed one."""
    now = 1795498000.0
    if requeued:
        f = {"JobState": "COMPLETING", "Restarts": str(run + 1), "StartTime": "2026-11-24T05:26:40",
             "EndTime": _fmt(now + limit)}
    else:
        f = {"JobState": "COMPLETING", "Restarts": str(run), "StartTime": "2026-11-24T05:20:00",
             "EndTime": _fmt(now - 1)}
    ident = identify(f, None, None, None, None, now + 0.5)
    assert ident.run == run and ident.requeued is requeued


def _fmt(epoch: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def test_array_tasks_are_named_by_array_and_task_for_scontrol():
    """CI, 2026-11-24: a preempted array task requeued "job 299" (its SLURM_JOB_ID, the array's own id) and
    Slurm requeued every task of the array, cancelling its sibling mid-run. Hooks and the library name an array
    task ARRAYJOB_TASK."""
    from slurmtools.checkpoint import slurm_job_ref
    from slurmtools.hooks.common import JobEnv

    task = {"SLURM_JOB_ID": "299", "SLURM_ARRAY_JOB_ID": "299", "SLURM_ARRAY_TASK_ID": "1"}
    assert slurm_job_ref(task) == "299_1"
    assert JobEnv.from_environ(task).slurm_ref == "299_1"
    plain = {"SLURM_JOB_ID": "300"}
    assert slurm_job_ref(plain) == "300" and JobEnv.from_environ(plain).slurm_ref == "300"
    assert slurm_job_ref({}) is None and JobEnv.from_environ({}).slurm_ref is None
    odd = {"SLURM_JOB_ID": "301", "SLURM_ARRAY_JOB_ID": "x", "SLURM_ARRAY_TASK_ID": "1"}
    assert slurm_job_ref(odd) == "301" and JobEnv.from_environ(odd).slurm_ref == "301"
