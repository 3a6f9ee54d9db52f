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
