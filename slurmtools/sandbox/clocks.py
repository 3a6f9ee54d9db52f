"""The sandbox's clocks, by name: how a replay speeds time up. `scaled` (`timescale.Scale`: Slurm in real time,
the site's and jobs' times divided by N, the scheduler's intervals tightened) or `faketime` (`faketime.FakeClock`:
Slurm's daemons on a clock N times faster, everything as recorded). Both offer the same methods; the CLI and the
benchmark pick one here and nothing else asks which it is.
"""

from __future__ import annotations

from slurmtools.sandbox import faketime, timescale

CLOCKS = {"scaled": timescale.Scale, "faketime": faketime.FakeClock}
#: either clock, for annotations
Clock = timescale.Scale | faketime.FakeClock


def names() -> str:
    return ", ".join(CLOCKS)


def max_speedup(clock: str, limits_s: list[float], site) -> tuple[float, str]:
    """The largest speed-up `clock` can express for this trace and site, and what bounds it."""
    return CLOCKS[clock].bound(limits_s, site)


def check(clock: str, speedup: float, limits_s: list[float], site, *, where: str = "--speedup"):
    """The clock named `clock` at `speedup`, or SpeedupError naming `where` (and what bounds it)."""
    if clock not in CLOCKS:
        raise timescale.SpeedupError(f"--clock {clock}: expected one of {names()}")
    return timescale.check(speedup, limits_s, site, where=where, clock=CLOCKS[clock])


def acceleration_note(speedup: float, preemptions: int) -> list[str]:
    """What an accelerated replay's preemption figures are worth, said where they are read: accelerated replays of
    one history preempt other jobs than its 1x replays do, with either clock (docs/sandbox.md, measured)."""
    if speedup <= 1 or preemptions <= 0:
        return []
    return [f"at {speedup:g}x the preemptions and the GPU-hours they lost are one timing of the history: "
            f"accelerated replays kept which jobs a 1x replay preempted only on the fast clock at up to 20x (one "
            f"history, Slurm 25.11); elsewhere these figures (with the waits of the tiers involved) moved by up to 2x "
            f"against 1x replays in the measurements (docs/sandbox.md); --repeat N shows their spread, --speedup 1 "
            f"replays the history at real speed"]
