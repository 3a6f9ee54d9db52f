"""The site's `[slack]` table: its settings and price windows, apart from the signal (`slurmtools.slack`) so that
loading a site does not import what reading and deciding the signal need."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Mapping

from slurmtools.durations import TIME_LIMIT_MAX
from slurmtools.errors import shown as _shown

if TYPE_CHECKING:
    from datetime import datetime

#: where the cached signal is read from when neither the caller nor the environment says
DEFAULT_CACHE = "/var/spool/slurmtools/slack.json"
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


@dataclass(frozen=True)
class PriceWindow:
    """Hours when the site wants more (cheap energy, nights) or less (peak price) done: the score is multiplied by
    `factor` while the window is open. Times are the node's local time; a window whose end is before its start
    runs past midnight and belongs to the day it starts on."""

    name: str
    start_min: int  # minutes after midnight
    end_min: int  # minutes after midnight, 1440 = midnight at the end of the day
    factor: float
    days: tuple[int, ...] = tuple(range(7))  # Monday = 0

    def active(self, t: datetime) -> bool:
        m = t.hour * 60 + t.minute
        day = t.weekday()
        if self.start_min < self.end_min:
            return day in self.days and self.start_min <= m < self.end_min
        # past midnight: the late part belongs to today, the early part to yesterday's window
        return (day in self.days and m >= self.start_min) or ((day - 1) % 7 in self.days and m < self.end_min)


@dataclass(frozen=True)
class SlackSettings:
    """The site's `[slack]` table (docs/slack.md); defaults apply where the site says nothing."""

    #: seconds between two polls of Slurm (or reads of the cached file); the library never asks more often
    poll_interval: int = 60
    #: score at or above which the mode is heavy, at or below which it is light (moderate between)
    heavy_at: float = 0.5
    light_at: float = 0.15
    #: hysteresis: a mode changes only once the score is past a threshold by `margin` ...
    margin: float = 0.05
    #: ... for this many consecutive polls
    polls: int = 3
    #: a cached signal older than this is no signal (the mode holds)
    max_age: int = 600
    cache_file: str = DEFAULT_CACHE
    windows: tuple[PriceWindow, ...] = ()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["windows"] = [asdict(w) for w in self.windows]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SlackSettings":
        """From the cached file (written by `to_dict`, every key since the format's first version): every value
        checked as the site loader checks it, since a wrong one would raise or decide inside a training loop later,
        and none filled in with a default; unknown keys are ignored. A ValueError names the key ("max_age: ...")."""
        if not isinstance(d, Mapping):
            raise ValueError(f"expected a table, got {_shown(d)}")
        interval = _bounded_whole(d, "poll_interval", 1, TIME_LIMIT_MAX)
        heavy = _bounded_real(d, "heavy_at", 0.0, 1.0)
        light = _bounded_real(d, "light_at", 0.0, 1.0)
        if light >= heavy:
            raise ValueError(f"light_at: expected a score below heavy_at ({heavy:g}), got {light:g}")
        margin = _bounded_real(d, "margin", 0.0, 1.0)
        if light + margin >= heavy - margin:
            raise ValueError(f"margin: {margin:g} makes the bands around light_at and heavy_at meet")
        polls = _bounded_whole(d, "polls", 1, TIME_LIMIT_MAX)
        max_age = _bounded_whole(d, "max_age", interval, TIME_LIMIT_MAX)
        cache = d.get("cache_file")
        if not isinstance(cache, str):
            raise ValueError(f"cache_file: expected a path, got {_shown(cache)}")
        raw = d.get("windows")
        if not isinstance(raw, (list, tuple)):
            raise ValueError(f"windows: expected a list, got {_shown(raw)}")
        wins = []
        for i, w in enumerate(raw):
            at = f"windows[{i}]"
            if not isinstance(w, Mapping) or not isinstance(w.get("name"), str):
                raise ValueError(f"{at}: expected a table with a name, got {_shown(w)}")
            days = w.get("days")
            if not isinstance(days, (list, tuple)) or not all(type(x) is int and 0 <= x <= 6 for x in days):
                raise ValueError(f"{at}.days: expected day numbers 0 (Monday) to 6, got {_shown(days)}")
            wins.append(PriceWindow(name=w["name"], start_min=_bounded_whole(w, "start_min", 0, 1439, at),
                                    end_min=_bounded_whole(w, "end_min", 0, 1440, at),
                                    factor=_bounded_real(w, "factor", 0.0, math.inf, at), days=tuple(days)))
        return cls(poll_interval=interval, heavy_at=heavy, light_at=light, margin=margin, polls=polls,
                   max_age=max_age, cache_file=cache, windows=tuple(wins))

    def window_at(self, t: datetime) -> PriceWindow | None:
        """The first window open at `t` (site order), or None."""
        return next((w for w in self.windows if w.active(t)), None)


def _bounded_whole(d: Mapping[str, Any], key: str, lo: int, hi: int = 1 << 53, at: str = "") -> int:
    """`d[key]` as a whole number in [lo, hi] (true and 1.0 are not: the writer writes ints; absent is not)."""
    name = f"{at}.{key}" if at else key
    v = d.get(key)
    if type(v) is not int or not lo <= v <= hi:
        span = f"from {lo} to {hi}" if hi < 1 << 53 else f"{lo} or more"
        raise ValueError(f"{name}: expected a whole number {span}, got {_shown(v)}")
    return v


def _bounded_real(d: Mapping[str, Any], key: str, lo: float, hi: float, at: str = "") -> float:
    """`d[key]` as a finite number in [lo, hi] (NaN compares false to everything and would freeze a mode)."""
    name = f"{at}.{key}" if at else key
    v = d.get(key)
    if type(v) not in (int, float) or not math.isfinite(v) or not lo <= v <= hi:
        span = f"from {lo:g} to {hi:g}" if hi < math.inf else f"{lo:g} or more"
        raise ValueError(f"{name}: expected a finite number {span}, got {_shown(v)}")
    return float(v)
