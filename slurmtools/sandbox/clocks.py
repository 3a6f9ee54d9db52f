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


def default_speedup(clock: str, runs_s: list[float], most: float) -> float:
    """The speed-up `clock` uses without --speedup (`timescale.default_speedup`)."""
    return timescale.default_speedup(runs_s, most, CLOCKS[clock])


def check(clock: str, speedup: float, limits_s: list[float], site, *, where: str = "--speedup"):
    """The clock named `clock` at `speedup`, or SpeedupError naming `where` (and what bounds it)."""
    if clock not in CLOCKS:
        raise timescale.SpeedupError(f"--clock {clock}: expected one of {names()}")
    return timescale.check(speedup, limits_s, site, where=where, clock=CLOCKS[clock])


def acceleration_note(scale: Clock, preemptions: int) -> list[str]:
    """What an accelerated replay's preemption figures are worth, said where they are read. Up to the clock's
    `KEPT_PREEMPTIONS_UP_TO`, accelerated replays of the benchmark's histories preempted the jobs a 1x replay did,
    in its order, on one history and nearly so on another; above it (and on the scaled clock at every speed-up)
    they preempted others (docs/sandbox.md)."""
    n = scale.speedup
    if n <= 1 or preemptions <= 0:
        return []
    kept = scale.KEPT_PREEMPTIONS_UP_TO
    if n <= kept:
        return [f"at {n:g}x on this clock (up to {kept:g}x), replays of the benchmark's histories preempted the "
                f"jobs a 1x replay did, in its order, on one history (Slurm 22.05 and 25.11) and all but 1 or 2 of "
                f"5 on another (docs/sandbox.md): --repeat N shows the spread, --speedup 1 replays at real speed"]
    where = (f"only on the fast clock at up to {faketime.FakeClock.KEPT_PREEMPTIONS_UP_TO:g}x" if not kept
             else f"only at up to {kept:g}x")
    return [f"at {n:g}x the preemptions and the GPU-hours they lost are one timing of the history: accelerated "
            f"replays kept which jobs a 1x replay preempted {where} (one history, Slurm 22.05 and 25.11); "
            f"elsewhere these figures (with the waits of the tiers involved) moved by up to 2x against 1x replays in "
            f"the measurements (docs/sandbox.md); --repeat N shows their spread, --speedup 1 replays the history at "
            f"real speed"]
