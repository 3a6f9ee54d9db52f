"""The fast clock: slurmctld, slurmd and their job steps run under libfaketime N times faster than real time, and
the site's durations and the jobs' time limits stay as recorded. Pure; `scripts/slurm-lab` starts the daemons on
that clock (SLURMTOOLS_LAB_FAKETIME) and writes where it started.

Unlike the scaled clock (`timescale.Scale`), every clock inside Slurm speeds up with it, the compiled-in ones too:
the 30 s check of time limits and grace ends, the requeue delay, minute-granular limits, PriorityCalcPeriod. What
does not speed up is real work outside Slurm's clock: launching a job, a scheduling pass's CPU time, a message;
those cost N times more in the sandbox's time (why the sandbox runs no prolog or epilog: `lab.NO_HOOKS`).
Measured against 1x in docs/sandbox.md.

The replayed job's own program keeps real time (its environment is the submitter's, without the preload) and does
1/N of its work, as with the scaled clock. Slurm records times on its fast clock: T = origin + N (wall - origin).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slurmtools.sandbox.timescale import PRIORITY_CALC_MIN, Scale, Speedup, scaled_site_doc


#: timeouts for work that takes real time (a hook, a launch), kept at their real length on the fast clock: the lab's
#: PrologEpilogTimeout (scripts/slurm-lab), Slurm's defaults for the others (slurm.conf(5)); a node that misses one is
#: drained or set down, which the replay would count as lost capacity
REAL_TIMEOUTS_S = {"PrologEpilogTimeout": 30, "TCPTimeout": 2, "BatchStartTimeout": 10, "SlurmdTimeout": 300,
                   "UnkillableStepTimeout": 60}
#: MessageTimeout (Slurm's default) also decides: slurmctld preempts no more jobs for a job within KillWait +
#: MessageTimeout of its last preemption (node_scheduler.c), and at N times its length that window kept a 30x replay
#: from preempting a job a 1x one did (docs/sandbox.md). So it stays as recorded while that leaves a message
#: MESSAGE_FLOOR_S real seconds, and above that speed-up is N times the floor
MESSAGE_TIMEOUT_S = 10
MESSAGE_FLOOR_S = 0.5
#: the largest number of seconds slurm.conf takes for these timeouts (16-bit; 65534 and 65535 mean unset/infinite)
MAX_CONF_SECONDS = 65533


@dataclass(frozen=True)
class FakeClock(Speedup):
    ALIGNS_TO_PRIORITY_PASS = True   # its passes come every 300/N wall seconds, as recorded
    #: while MessageTimeout stays as recorded: 10x and 20x kept a 1x replay's preemptions on the benchmark's first
    #: history on both releases, and all but 1 or 2 of 5 on its second (docs/sandbox.md)
    KEPT_PREEMPTIONS_UP_TO = MESSAGE_TIMEOUT_S / MESSAGE_FLOOR_S
    #: the default speed-up: at most that, and a median run of at least 12 s (20x of the benchmark's 4-minute one)
    DEFAULT_AT_MOST = KEPT_PREEMPTIONS_UP_TO
    DEFAULT_MIN_MEDIAN_RUN_S = 12.0

    @staticmethod
    def bound(limits_s: list[float], site) -> tuple[float, str]:
        """Slurm gets every duration as recorded, so none becomes too small for its units; but the timeouts kept at
        their real length grow N times, and slurm.conf reads each as a 16-bit number of seconds."""
        key = max(REAL_TIMEOUTS_S, key=REAL_TIMEOUTS_S.get)
        real = REAL_TIMEOUTS_S[key]
        return (float(MAX_CONF_SECONDS // real),
                f"{key} keeps its real {real} s, i.e. N x {real} s of Slurm's clock, and slurm.conf takes at most "
                f"{MAX_CONF_SECONDS} s (a 16-bit number)")

    def limit_minutes(self, real_s: float) -> int:
        """Slurm's clock runs N times faster, so the recorded limit is given as it is."""
        return max(1, math.ceil(real_s / 60 - 1e-9))

    def site_seconds(self, real_s: float) -> int:
        return max(1, math.ceil(real_s - 1e-9))

    def priority_pass_s(self) -> float:
        """Slurm's PriorityCalcPeriod as recorded, on a clock N times faster."""
        return 60.0 * PRIORITY_CALC_MIN / self.speedup

    def site_doc(self, doc: dict, fabric_path: str | None) -> dict:
        """The candidate's own durations (only the fabric path made absolute)."""
        return scaled_site_doc(doc, 1, fabric_path)

    def slurm_conf(self, *, requeue_delay_param: bool | None, max_limit_s: float) -> dict[str, str]:
        """The same scheduler settings as a 1x replay (Slurm's defaults for every clock the scaled clock tightens),
        and Slurm's timeouts for work outside its clock N times longer, so that they keep their real length: at
        60x a 30 s epilog timeout would be half a real second, and an epilog slowed by load would drain its node."""
        conf = Scale(1).slurm_conf(requeue_delay_param=requeue_delay_param, max_limit_s=max_limit_s)
        conf.update({k: str(round(v * self.speedup)) for k, v in REAL_TIMEOUTS_S.items()})
        conf["MessageTimeout"] = str(self.message_timeout_s())
        return conf

    def message_timeout_s(self) -> int:
        """MessageTimeout on Slurm's clock: as recorded, or N x MESSAGE_FLOOR_S where that is longer."""
        return max(MESSAGE_TIMEOUT_S, math.ceil(MESSAGE_FLOOR_S * self.speedup - 1e-9))

    def lab_env(self) -> dict[str, str]:
        return {"SLURMTOOLS_LAB_FAKETIME": f"{self.speedup:g}"}

    def wall_time(self, slurm_ts: float, origin: float | None) -> float:
        """A time Slurm recorded on its fast clock as the wall-clock epoch."""
        if origin is None:
            raise ValueError("the fast clock's origin is unknown (the lab wrote no faketime.env)")
        return origin + (slurm_ts - origin) / self.speedup

    def slurm_time(self, wall_ts: float, origin: float | None) -> float:
        if origin is None:
            raise ValueError("the fast clock's origin is unknown (the lab wrote no faketime.env)")
        return origin + (wall_ts - origin) * self.speedup

    def limits_note(self, *, requeue_delay_param: bool | None) -> list[str]:
        s = self.speedup
        notes = [f"slurmctld and slurmd ran under libfaketime {s:g}x faster than real time: every Slurm clock (time "
                 f"limits, grace, the requeue delay, the 30 s timer) runs at the sandbox's speed, but work outside "
                 f"them (a job's launch, a scheduling pass's CPU time, a message) takes {s:g}x longer in the "
                 f"sandbox's time than on a real cluster"]
        mt = self.message_timeout_s()
        if mt > MESSAGE_TIMEOUT_S:
            notes.append(f"MessageTimeout was {mt} s of Slurm's clock, not {MESSAGE_TIMEOUT_S} s, to leave a message "
                         f"{MESSAGE_FLOOR_S:g} real s: after a preemption slurmctld waits KillWait + MessageTimeout "
                         f"before it preempts more jobs for the same job, {mt - MESSAGE_TIMEOUT_S} s longer than on "
                         f"the site; at --speedup {MESSAGE_TIMEOUT_S / MESSAGE_FLOOR_S:g} or less it is as recorded")
        return notes
