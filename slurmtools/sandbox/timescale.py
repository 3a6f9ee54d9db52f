"""What a speed-up does to every time the scheduler sees, and which speed-ups a trace and a site can hold.

Pure. A replay at speed-up N submits each job N times sooner after the first, lets it run 1/N of its recorded
time, and gives Slurm a site whose every duration is 1/N of the candidate's (partition and QoS limits, grace
times, signal leads), with the scheduler's own clocks (main and backfill intervals, backfill resolution and window,
priority age and decay, the requeue delay) tightened by N. Where Slurm counts in coarser units than the scaled
value needs, the speed-up cannot hold and is refused, with the largest one that holds:
- job time limits and partition/QoS wall limits are whole minutes in Slurm: every scaled limit must be >= 1 min;
- GraceTime is whole seconds: every preemptible tier's scaled grace must be >= 1 s.
Clocks Slurm cannot tighten enough are stated in `Scale.limits_note` (PriorityCalcPeriod is whole minutes, the
requeue delay is at least 5 s where the release has no requeue_delay): the accuracy benchmark measures their cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from slurmtools.errors import SlurmtoolsError

#: Slurm's defaults for the clocks a sandbox tightens (slurm.conf(5), backfill.c, job_scheduler.c)
SCHED_INTERVAL_S = 60
SCHED_MIN_INTERVAL_US = 2_000_000
BF_INTERVAL_S = 30
BF_RESOLUTION_S = 60
BF_WINDOW_MIN = 24 * 60
PRIORITY_MAX_AGE_S = 7 * 86400
PRIORITY_DECAY_S = 7 * 86400
PRIORITY_CALC_MIN = 5
REQUEUE_DELAY_S = 121      # cred_expire (120 s) + 1: a requeued job's earliest next start
KILL_WAIT_S = 30
MIN_CRED_EXPIRE_S = 5      # interfaces/cred.c refuses smaller
PERIODIC_TIMEOUT_S = 30    # slurmctld.h: how often slurmctld checks time limits and preemption grace ends (compiled in)


class SpeedupError(SlurmtoolsError):
    """A speed-up the sandbox cannot hold for this trace and site; the message names --speedup."""

    exit_code = 2


@dataclass(frozen=True)
class Speedup:
    """What both clocks share: the wall clock runs N times faster than the recorded history."""

    speedup: float
    #: whether a replay's first submission waits for a fair-share pass by default (`first_submission`): on the
    #: scaled clock the passes are a wall minute or more apart (PriorityCalcPeriod is whole minutes) and not at the
    #: recorded period anyway, so waiting would cost up to that minute per replay and keep nothing faithful
    ALIGNS_TO_PRIORITY_PASS: ClassVar[bool] = False
    #: the largest speed-up at which accelerated replays were measured to preempt the jobs a 1x replay preempts, in
    #: its order (docs/sandbox.md, "Measured accuracy"); 0: at none
    KEPT_PREEMPTIONS_UP_TO: ClassVar[float] = 0
    #: the default speed-up (`default_speedup`) keeps a history's median run at least this many wall-clock seconds
    #: in the sandbox (recorded run / N), and is at most DEFAULT_AT_MOST: where the clock's measured accuracy was
    #: best (docs/sandbox.md)
    DEFAULT_MIN_MEDIAN_RUN_S: ClassVar[float] = 40.0
    DEFAULT_AT_MOST: ClassVar[float] = math.inf

    def sandbox_s(self, real_s: float) -> float:
        """Real (recorded) seconds as the wall-clock seconds the sandbox spends on them: submit gaps, job work."""
        return real_s / self.speedup

    def real_s(self, sandbox_s: float) -> float:
        return sandbox_s * self.speedup

    def first_submission(self, earliest: float, lead_in_s: float, pass_at: float) -> float:
        """Wall time of the history's first submission, `lead_in_s` recorded seconds (`sandbox_s` of them) after a
        fair-share pass of slurmctld: the first of its passes (every `priority_pass_s` wall seconds from
        `pass_at`) that leaves the submission at `earliest` or later. So every replay of a history, at any
        speed-up, meets slurmctld's priority recalculation at the same point of the history (docs/sandbox.md)."""
        period, lead = self.priority_pass_s(), self.sandbox_s(lead_in_s)
        k = max(0, math.ceil((earliest - lead - pass_at) / period - 1e-9))
        return pass_at + k * period + lead


@dataclass(frozen=True)
class Scale(Speedup):
    """The scaled clock: Slurm keeps real time, the site's and the jobs' times shrink. One of the sandbox's clocks
    (`clocks`); `faketime.FakeClock` is the other, with the same methods."""

    @staticmethod
    def bound(limits_s: list[float], site) -> tuple[float, str]:
        """The largest speed-up this clock can express for these limits and site, and what bounds it."""
        return max_speedup(limits_s, site)

    def limit_minutes(self, real_s: float) -> int:
        """A real time limit as whole sandbox minutes (Slurm's unit), at least 1."""
        return max(1, math.ceil(real_s / self.speedup / 60 - 1e-9))

    def site_seconds(self, real_s: float) -> int:
        """A duration Slurm enforces (a signal lead, a --switches wait) as Slurm must be given it, >= 1 s."""
        return max(1, math.ceil(real_s / self.speedup - 1e-9))

    def priority_calc_minutes(self) -> int:
        """PriorityCalcPeriod as the sandbox's Slurm gets it: whole minutes, at least 1."""
        return max(1, round(PRIORITY_CALC_MIN / self.speedup))

    def priority_pass_s(self) -> float:
        """Wall seconds between slurmctld's fair-share passes."""
        return 60.0 * self.priority_calc_minutes()

    def site_doc(self, doc: dict, fabric_path: str | None) -> dict:
        """The sandbox's site document: every duration the scheduler enforces scaled."""
        return scaled_site_doc(doc, self.speedup, fabric_path)

    def lab_env(self) -> dict[str, str]:
        """What `scripts/slurm-lab up` needs for this clock: nothing, Slurm runs in real time."""
        return {}

    def wall_time(self, slurm_ts: float, origin: float | None) -> float:
        """A time Slurm recorded (its own clock) as the wall-clock epoch: the same here."""
        return slurm_ts

    def slurm_time(self, wall_ts: float, origin: float | None) -> float:
        return wall_ts

    def slurm_conf(self, *, requeue_delay_param: bool | None, max_limit_s: float) -> dict[str, str]:
        """slurm.conf keys for the sandbox's scheduler clocks (they replace the lab's own). `max_limit_s`: the
        longest real limit the replay submits, so the backfill window covers every scaled job."""
        s = self.speedup
        sched = [f"sched_interval={max(1, round(SCHED_INTERVAL_S / s))}",
                 f"sched_min_interval={max(1, round(SCHED_MIN_INTERVAL_US / s))}",
                 f"bf_interval={max(1, round(BF_INTERVAL_S / s))}",
                 f"bf_resolution={max(1, round(BF_RESOLUTION_S / s))}",
                 f"bf_window={max(1, math.ceil(max(BF_WINDOW_MIN * 60, max_limit_s) / s / 60))}"]
        conf = {"PriorityMaxAge": _dhms(PRIORITY_MAX_AGE_S / s), "PriorityDecayHalfLife": _dhms(PRIORITY_DECAY_S / s),
                "PriorityCalcPeriod": str(self.priority_calc_minutes()),
                "KillWait": str(max(1, round(KILL_WAIT_S / s)))}
        delay = REQUEUE_DELAY_S / s
        if requeue_delay_param:
            sched.append(f"requeue_delay={max(0, round(delay) - 1)}")
        else:
            conf["_cred_expire"] = str(max(MIN_CRED_EXPIRE_S, round(delay) - 1))
        conf["SchedulerParameters"] = ",".join(sched)
        return conf

    def limits_note(self, *, requeue_delay_param: bool | None) -> list[str]:
        s, out = self.speedup, []
        if PRIORITY_CALC_MIN / s < 1:
            out.append(f"fair-share is recomputed every 1 sandbox minute = {s:g} real minutes (Slurm's "
                       f"PriorityCalcPeriod is whole minutes; a real cluster recomputes every {PRIORITY_CALC_MIN})")
        if not requeue_delay_param and REQUEUE_DELAY_S / s < MIN_CRED_EXPIRE_S + 1:
            out.append(f"a requeued job waits at least {MIN_CRED_EXPIRE_S + 1} sandbox s = "
                       f"{(MIN_CRED_EXPIRE_S + 1) * s:g} real s before its next start (real: {REQUEUE_DELAY_S} s; "
                       f"this release has no requeue_delay, and cred_expire is at least {MIN_CRED_EXPIRE_S} s)")
        if s > 1:
            out.append(f"slurmctld checks time limits and the end of a preempted job's grace every "
                       f"{PERIODIC_TIMEOUT_S} s (compiled in) unless the preemptor's next scheduling pass comes first: "
                       f"up to {PERIODIC_TIMEOUT_S} sandbox s = {PERIODIC_TIMEOUT_S * s:g} real s late (real: "
                       f"{PERIODIC_TIMEOUT_S} s), so preempted jobs may work on past their grace; 22.05 records one "
                       f"that then completes as TIMEOUT")
        return out


def _dhms(seconds: float) -> str:
    t = max(1, round(seconds))
    d, t = divmod(t, 86400)
    h, t = divmod(t, 3600)
    m, sec = divmod(t, 60)
    return f"{d}-{h:02d}:{m:02d}:{sec:02d}"


def max_speedup(limits_s: list[float], site) -> tuple[float, str]:
    """The largest speed-up the trace's time limits and the site's durations can hold, and what bounds it."""
    bounds: list[tuple[float, str]] = []
    if limits_s:
        shortest = min(limits_s)
        bounds.append((shortest / 60, f"the shortest job time limit ({shortest / 60:g} min) must stay >= 1 "
                                      f"sandbox minute"))
    for name, t in site.tiers.items():
        if t.preempted_by and t.grace_time:
            bounds.append((float(t.grace_time), f"tier {name}'s grace_time ({t.grace_time} s) must stay >= 1 "
                                                f"sandbox second"))
        bounds.append((t.max_walltime / 60, f"tier {name}'s max_walltime must stay >= 1 sandbox minute"))
    for name, p in site.partitions.items():
        bounds.append((p.max_time / 60, f"partition {name}'s max_time must stay >= 1 sandbox minute"))
    if not bounds:
        return math.inf, "nothing bounds it"
    value, why = min(bounds, key=lambda b: b[0])
    return max(1.0, math.floor(value * 1000) / 1000), why


def default_speedup(runs_s: list[float], most: float, clock: type[Speedup] | None = None) -> float:
    """The speed-up used without --speedup: the largest that holds (`most`) and the clock's measured defaults
    allow (`DEFAULT_AT_MOST`, a median run >= `DEFAULT_MIN_MEDIAN_RUN_S`). On the scaled clock a 40 s median run
    gave the smallest start error (0.59 % of the span, Slurm 22.05, 2026-11-24); the fast clock kept starts and
    preemptions at 20x, a 12 s median run, on both releases (2026-11-28)."""
    import statistics

    clock = clock or Scale
    if not runs_s:
        return 1.0
    by_run = math.floor(statistics.median(runs_s) / clock.DEFAULT_MIN_MEDIAN_RUN_S)
    return max(1.0, min(most, clock.DEFAULT_AT_MOST, by_run))


def check(speedup: float, limits_s: list[float], site, *, where: str = "--speedup", clock=None):
    """`clock` (a clock class, `Scale` by default) at `speedup`, or SpeedupError naming `where`, the bound it breaks
    and the largest that holds."""
    clock = clock or Scale
    if not math.isfinite(speedup) or speedup < 1:
        raise SpeedupError(f"{where} {speedup:g}: must be a number >= 1")
    most, why = clock.bound(limits_s, site)
    if speedup > most + 1e-9:
        raise SpeedupError(f"{where} {speedup:g}: the sandbox cannot hold it: {why}; at most {most:g} holds for "
                           f"this trace and site")
    return clock(float(speedup))


#: the site file's durations (table, key, default when absent) the sandbox scales; every one is written out
SITE_DURATIONS = (("partitions", "max_time", "7d"), ("tiers", "max_walltime", "7d"), ("tiers", "grace_time", 0),
                  ("tiers", "signal_lead", "5m"))


def scaled_site_doc(doc: dict, speedup: float, fabric_path: str | None) -> dict:
    """The candidate site's TOML document with every duration the scheduler enforces divided by `speedup` (as
    whole seconds), and its fabric path made absolute so the copy can live anywhere."""
    from slurmtools.durations import parse_duration

    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in doc.items()}
    for table, key, default in SITE_DURATIONS:
        entries = out.get(table) or {}
        out[table] = {name: dict(body) for name, body in entries.items()}
        for name, body in out[table].items():
            secs = parse_duration(body.get(key, default))
            if secs:
                body[key] = f"{max(1, round(secs / speedup))}s"
            else:
                body[key] = 0 if key == "grace_time" else body.get(key, default)
    if fabric_path is not None:
        out["site"] = dict(out.get("site") or {})
        out["site"]["fabric"] = fabric_path
    return out
