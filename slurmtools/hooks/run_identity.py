"""Which run of a job a node epilog is closing, and when that run started, from what Slurm itself says.

Why not from the prolog: slurmd does not always run the prolog. Measured on Slurm 22.05 with PrologFlags=Alloc,
a requeued job restarted at once (`scontrol update StartTime=now` while the previous run was still completing)
launched with no prolog in 12 of 56 restarts (slurmd logs `reissued job credential`); 25.11 ran it every time.
So the prolog's start mark is a hint, checked against Slurm, never the run's identity (issue 16).

Facts this module relies on (measured in the labs, 22.05.8 and 25.11.7, `scontrol show job` in the epilog):
- Restarts (and SLURM_JOB_RESTART_COUNT in the epilog's environment) are already incremented when this run
  was requeued (by `scontrol requeue` or by preemption): the run's index is then Restarts - 1.
- A requeued run's record shows StartTime = the requeue time and EndTime = StartTime + TimeLimit, in the future
  (the pending next run's expectation, or Unknown without a limit); a run that ended for good shows its real
  StartTime and an EndTime that has passed. So EndTime after "now" (or Unknown) means requeued.
- 25.11 also gives the epilog SLURM_JOB_START_TIME = the run's real start, requeued or not; 22.05 gives none.

Pure and standard library only (hooks start at every job end): no re, no time.strptime (it imports re).
"""

from __future__ import annotations

import time

#: how far past "now" EndTime must be to read as the next run's expectation (clock granularity is 1 s)
FUTURE_SLACK_S = 1.0


class RunIdentity:
    """The run's index (0 = first run), its start (epoch s) and where the start came from, and whether this run
    was requeued; each None where Slurm's record did not say."""

    __slots__ = ("run", "start", "start_source", "requeued", "notes")

    def __init__(self, run=None, start=None, start_source=None, requeued=None, notes=None):
        self.run, self.start, self.start_source, self.requeued = run, start, start_source, requeued
        self.notes = list(notes or ())

    def as_tuple(self):
        return self.run, self.start, self.start_source, self.requeued


def slurm_time(text: str | None) -> float | None:
    """`2026-11-24T05:27:07` (scontrol's local time) -> epoch seconds; None for Unknown/None/garbage."""
    t = (text or "").strip()
    if len(t) != 19 or t[4] != "-" or t[7] != "-" or t[10] != "T" or t[13] != ":" or t[16] != ":":
        return None
    parts = (t[0:4], t[5:7], t[8:10], t[11:13], t[14:16], t[17:19])
    if not all(p.isascii() and p.isdigit() for p in parts):
        return None
    y, mo, d, h, mi, s = (int(p) for p in parts)
    if not (1970 <= y < 2200 and 1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 61):
        return None
    try:
        return float(time.mktime((y, mo, d, h, mi, s, 0, 0, -1)))
    except (OverflowError, ValueError):
        return None


def _count(v) -> int | None:
    s = (v if isinstance(v, str) else "").strip()
    return int(s) if s.isascii() and s.isdigit() and len(s) < 10 else None


def was_requeued(fields: dict | None, restarts: int | None, now: float) -> bool | None:
    """Whether the run the epilog closes was requeued, from Slurm's job record read in the epilog; None when
    the record is missing (scontrol unreachable)."""
    if not fields:
        return None
    if restarts == 0:
        return False  # no restart counted yet: this run cannot have been requeued
    state = fields.get("JobState", "")
    if state in ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT"):
        return True  # the epilog ran after Slurm had already finished the requeue
    end = fields.get("EndTime")
    if end in (None, "", "Unknown", "None"):
        return True  # a run that ended for good always has its end; only the pending next run has none
    e = slurm_time(end)
    if e is None:
        return None
    return e > now + FUTURE_SLACK_S


def identify(fields: dict | None, env_restarts: int | None, env_start: int | None, mark_start: float | None,
             mark_restarts: int | None, now: float) -> RunIdentity:
    """The run this epilog closes. Slurm's word first (its restart count and requeue state, 25.11's start in the
    environment, the StartTime of a run that ended for good); the prolog's mark only where it agrees with Slurm
    on the run; `start` None only when neither knows (the epilog then asks sacct, see `start_from_sacct`)."""
    ident = RunIdentity()
    restarts = _count((fields or {}).get("Restarts"))
    if restarts is None:
        restarts = env_restarts
    requeued = was_requeued(fields, restarts, now)
    ident.requeued = requeued
    if restarts is not None and requeued is not None:
        ident.run = restarts - 1 if requeued else restarts
    elif mark_restarts is not None:
        ident.run = mark_restarts  # Slurm's record unreadable: the prolog's count at launch is the best left
        ident.notes.append("Slurm's job record unreadable; run taken from the prolog's mark")
    elif restarts is not None:
        ident.run = restarts
        ident.notes.append("Slurm's job record unreadable and no prolog mark; run = restart count (may be 1 ahead "
                           "if this run was requeued)")
    mark_ok = mark_start is not None and (mark_restarts is None or ident.run is None or mark_restarts == ident.run)
    if mark_start is not None and not mark_ok:
        ident.notes.append(f"prolog start mark of run {mark_restarts} ignored: this is run {ident.run}")
    if env_start:
        ident.start, ident.start_source = float(env_start), "slurm"
    elif mark_ok:
        ident.start, ident.start_source = mark_start, "prolog"
    elif requeued is False and fields:
        s = slurm_time(fields.get("StartTime"))
        if s is not None:
            ident.start, ident.start_source = s, "slurm"
    return ident


def start_from_sacct(text: str, run: int, job_id: int | str | None = None) -> float | None:
    """The start of run `run` from `sacct -j J -D -X -n -P -o Start` output (one line per run, oldest first;
    a pending next run prints Unknown and is last), or with `job_id` from `-o JobIDRaw,Start`: only the rows of
    that job. slurmdbd answers `-j J` with the rows whose job id, array job id or heterogeneous leader is J
    (25.11 as_mysql_jobacct_process.c `_setup_job_cond_selected_steps`), so the array task carrying the array's
    id, and a heterogeneous leader, got their siblings' rows counted as their own runs."""
    starts = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if job_id is not None:
            raw, sep, line = line.partition("|")
            if not sep or raw.strip() != str(job_id):
                continue
        starts.append(slurm_time(line))
    return starts[run] if 0 <= run < len(starts) else None
