"""The site's `[slack]` table: its settings and price windows, apart from the signal (`slurmtools.slack`) so that
loading a site does not import what reading and deciding the signal need."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Mapping

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
        """From the cached file (written by `to_dict`); unknown keys are ignored, a wrong type is refused."""
        known = {f for f in cls.__dataclass_fields__}
        kw = {k: v for k, v in d.items() if k in known and k != "windows"}
        wins = tuple(PriceWindow(name=w["name"], start_min=int(w["start_min"]), end_min=int(w["end_min"]),
                                 factor=float(w["factor"]), days=tuple(int(x) for x in w.get("days", range(7))))
                     for w in d.get("windows", ()))
        s = cls(**kw, windows=wins)
        if not (isinstance(s.polls, int) and s.polls >= 1 and 0 <= s.light_at < s.heavy_at <= 1):
            raise ValueError("settings out of range")
        return s

    def window_at(self, t: datetime) -> PriceWindow | None:
        """The first window open at `t` (site order), or None."""
        return next((w for w in self.windows if w.active(t)), None)
