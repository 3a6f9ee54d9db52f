"""Durations as people and Slurm write them: "90s", "5m", "2h", "1d12h", "2-00:00:00", "30:00", "1:00:00".

Pure functions; the site config and the sacct/squeue parsers share them.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

#: time limits (partition MaxTime, QoS MaxWall, --time) go through time_str2mins (src/common/parse_time.c): the
#: seconds in a signed int, rounded up to minutes by adding 59 in that int, so past INT_MAX - 59 s it overflows
#: (sbatch -t 35791394 becomes 2957761-01:03:00, sacctmgr MaxWall=35791394 changes nothing; measured on 22.05.8 and
#: 25.11.7); whole minutes: 35,791,393 min = 2,147,483,580 s
TIME_LIMIT_MAX = (2**31 - 1 - 59) // 60 * 60

_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# numbers are ASCII digits: `\d` would also match `٣`, which int() and Decimal() read as 3 (re.ASCII keeps `\s` and
# the units to ASCII too)
_HUMAN = re.compile(r"^\s*(?:([0-9]+(?:\.[0-9]+)?)\s*([smhdw])\s*)+$", re.IGNORECASE | re.ASCII)
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([smhdw])", re.IGNORECASE | re.ASCII)
_SLURM = re.compile(r"^(?:([0-9]+)-)?([0-9]+)(?::([0-9]+))?(?::([0-9]+))?$", re.ASCII)
#: digits in one Slurm-form number beyond which int() refuses with a message of its own (4300); no duration needs 100
_MAX_DIGITS = 100


def parse_duration(text: str | int | float) -> int:
    """Seconds in `text`. Raises ValueError with the offending text.

    Bare integers are minutes, as in Slurm's --time; "M:S", "H:M:S" and "D-H[:M[:S]]" follow Slurm too.
    """
    if isinstance(text, bool):
        raise ValueError(f"expected a duration, got {text!r}")
    if isinstance(text, (int, float)):
        if isinstance(text, float) and not math.isfinite(text):
            raise ValueError(f"expected a duration, got {text!r}")
        if text < 0:
            raise ValueError(f"duration must not be negative, got {text!r}")
        return int(text * 60)
    s = str(text).strip()
    if not s:
        raise ValueError("expected a duration, got an empty string")
    if _HUMAN.match(s):
        # exact decimals: float("9" * 400) is inf, and int(inf) is not a ValueError
        return int(sum(Decimal(n) * _UNIT[u.lower()] for n, u in _PART.findall(s)))
    m = _SLURM.match(s)
    if m and max(len(g or "") for g in m.groups()) <= _MAX_DIGITS:
        days, a, b, c = m.groups()
        if days is not None:
            # D-H, D-H:M, D-H:M:S
            h, mi, se = int(a), int(b or 0), int(c or 0)
            return int(days) * 86400 + h * 3600 + mi * 60 + se
        if b is None:
            return int(a) * 60  # minutes
        if c is None:
            return int(a) * 60 + int(b)  # M:S
        return int(a) * 3600 + int(b) * 60 + int(c)
    raise ValueError(f'expected a duration like "5m", "2h", "1d" or "2-00:00:00", got {text!r}')


class UnitMissing(ValueError):
    """A duration written as a bare number, whose unit the reader would have to guess."""


_BARE = re.compile(r"^\s*[0-9]+(?:\.[0-9]+)?\s*$", re.ASCII)


def parse_duration_with_unit(text: str) -> int:
    """Seconds in `text` like `parse_duration`, but a bare number (300, "300") raises UnitMissing: config files say
    the unit, since a bare number means minutes to sbatch --time and seconds in Slurm's GraceTime."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if isinstance(text, float) and not math.isfinite(text):
            raise ValueError(f"expected a duration, got {text!r}")
        raise UnitMissing(f"say the unit of {text!r}")
    if not isinstance(text, str):
        raise ValueError(f"expected a duration, got {text!r}")
    if _BARE.match(text):
        raise UnitMissing(f"say the unit of {text!r}")
    return parse_duration(text)


def slurm_time(seconds: int) -> str:
    """Slurm's D-HH:MM:SS form, rounded up to whole minutes (Slurm limits are in minutes)."""
    minutes = -(-int(seconds) // 60)
    d, rem = divmod(minutes, 1440)
    h, m = divmod(rem, 60)
    return f"{d}-{h:02d}:{m:02d}:00" if d else f"{h:02d}:{m:02d}:00"


def human(seconds: float) -> str:
    s = int(round(seconds))
    if s % 86400 == 0 and s:
        return f"{s // 86400}d"
    if s % 3600 == 0 and s:
        return f"{s // 3600}h"
    if s % 60 == 0 and s:
        return f"{s // 60}m"
    return f"{s}s"
