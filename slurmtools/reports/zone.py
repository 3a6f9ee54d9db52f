"""The report's time zone: sacct, sacctmgr and a naive ISO time in an epilog record give local wall-clock times
with no UTC offset; the reports count in real seconds between instants and bucket by local calendar days.

Why: in a zone with daylight-saving time a local day is 23 or 25 hours long once a year each, a run across the
spring change ran an hour less than its wall-clock times say (one across the autumn change an hour more), and
the autumn change's repeated hour prints the same wall-clock time twice. Counted in wall-clock seconds, such runs
were off by an hour, and one that started in the repeated hour's first pass and ended in its second had its End
before its Start and was dropped as a bad row.

Inside the reports every time is a UTC instant (naive `datetime64[s]` of UTC, or epoch seconds), so a duration or
an overlap is a subtraction. A `Zone` turns local wall-clock times into instants (`from_local`: both readings of
a repeated time, and the times the spring change skipped), instants into local times for display (`to_local`),
and gives the edges of local days (`clock`, a local clock that never runs back, for bucketing). Its offsets come
from the zone's own rules (`zoneinfo`, or `time.localtime` for a POSIX TZ string), tabled once for 1970-2200,
the times the readers accept.
"""

from __future__ import annotations

import os
import re
import time
from datetime import datetime

import numpy as np
import pandas as pd

#: the instants a zone's offsets are tabled for (the readers refuse times outside 1970-2200)
_FIRST, _LAST = -2 * 86400, 7258118400 + 2 * 86400
#: the offset is looked at this often; a change between two looks is found to the second by bisection
_STEP = 2 * 86400
#: before every transition
_NEVER = -(2**62)
#: a POSIX TZ string (`CET-1CEST,M3.5.0,M10.5.0/3`, `<+0330>-3:30`, `EST5EDT`): the C library reads it itself
_POSIX_TZ = re.compile(r"^(?:<[^>]+>|[A-Za-z]{3,})[+-]?\d{1,2}(?::\d{1,2}){0,2}(?:(?:<[^>]+>|[A-Za-z]{3,}).*)?$")


class ZoneError(ValueError):
    """A zone that cannot be known: an unknown --tz name, a TZ the C library would silently read as UTC."""


class Zone:
    """A time zone's offsets from UTC, as a table of transitions (`at[i]`: the first instant with `offset[i]`).

    Every method takes and gives int64 numpy arrays of epoch seconds (instants) or of local wall-clock seconds
    (a naive local time read as if it were UTC: `datetime64[s]` of local times as integers)."""

    def __init__(self, name: str, offset_of=None, offset: int = 0):
        """`offset_of(t)`: the offset (seconds east of UTC) at instant t; without it, `offset` at every instant."""
        self.name = name
        at, off = [_NEVER], [int(offset_of(_FIRST)) if offset_of is not None else int(offset)]
        t = _FIRST if offset_of is not None else _LAST
        while t < _LAST:
            nxt = min(t + _STEP, _LAST)
            o = int(offset_of(nxt))
            a = t
            while o != off[-1]:
                # the first instant in (a, nxt] whose offset differs from the last one: bisection to the second
                lo, hi = a, nxt
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if int(offset_of(mid)) == off[-1]:
                        lo = mid
                    else:
                        hi = mid
                at.append(hi)
                off.append(int(offset_of(hi)))
                a = hi
            t = nxt
        self.at = np.array(at, dtype=np.int64)
        self.offset = np.array(off, dtype=np.int64)
        #: where each offset's local wall clock starts (the table is increasing: no zone changes twice in an hour)
        self._local_at = self.at + self.offset
        self._local_at[0] = _NEVER
        # the local times each offset alone reads, neither repeated nor skipped: [_safe_lo[i], _safe_hi[i])
        prev = np.concatenate([self.offset[:1], self.offset[:-1]])
        nxt = np.concatenate([self.offset[1:], self.offset[-1:]])
        self._safe_lo = self.at + np.maximum(prev, self.offset)
        self._safe_hi = np.append(self.at[1:], -_NEVER) + np.minimum(self.offset, nxt)

    def __repr__(self) -> str:
        return f"Zone({self.name!r})"

    @property
    def fixed(self) -> bool:
        """One offset over 1970-2200: no clock change to care about."""
        return len(self.at) == 1

    @property
    def is_utc(self) -> bool:
        """Local time is UTC: nothing to convert."""
        return self.fixed and int(self.offset[0]) == 0

    def _seg(self, u: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.at, u, side="right") - 1

    def offset_at(self, u) -> np.ndarray:
        """The offset (seconds east of UTC) at instants `u`."""
        return self.offset[self._seg(np.asarray(u, dtype=np.int64))]

    def to_local(self, u) -> np.ndarray:
        """Instants -> local wall-clock seconds (for display: the repeated hour reads alike in both passes)."""
        u = np.asarray(u, dtype=np.int64)
        if self.fixed:
            return u + self.offset[0]
        return u + self.offset_at(u)

    def clock(self, u) -> np.ndarray:
        """Instants -> a local clock that never runs back, for bucketing by local times: the local time, but in
        the second pass of a repeated hour the last second of its first pass. An instant lies in the bucket of
        local edges [a, b) (each read as its first pass) exactly when a <= clock < b."""
        u = np.asarray(u, dtype=np.int64)
        if self.fixed:
            return u + self.offset[0]
        i = self._seg(u)
        loc = u + self.offset[i]
        prev = self.offset[np.maximum(i - 1, 0)]
        back = np.where(i >= 1, prev - self.offset[i], 0)  # > 0: the clock went back at at[i]
        second = (back > 0) & (u < self.at[i] + back)
        return np.where(second, self.at[i] + prev - 1, loc)

    def from_local(self, loc, bounds: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Local wall-clock seconds -> (the first pass's instant, the second pass's, skipped). The two passes
        differ only in the repeated hour of a change back; a time the clock skipped gets the change's instant
        in both, and `skipped` says so. `bounds`: the least and greatest of `loc` that matter, when known."""
        loc = np.asarray(loc, dtype=np.int64)
        if self.fixed:
            u = loc - self.offset[0]
            return u, u, np.zeros(len(loc), dtype=bool)
        if len(loc):
            lo, hi = bounds if bounds is not None else (int(loc.min()), int(loc.max()))
            i = int(np.searchsorted(self._safe_lo, lo, side="right")) - 1
            if i >= 0 and hi < self._safe_hi[i]:  # all read by one offset (nearly every block of a dump)
                u = loc - self.offset[i]
                return u, u, np.zeros(len(loc), dtype=bool)
        k = np.searchsorted(self._local_at, loc, side="right") - 1
        late = loc - self.offset[k]
        nxt = np.minimum(k + 1, len(self.at) - 1)
        skipped = (k + 1 < len(self.at)) & (late >= self.at[nxt])
        late = np.where(skipped, self.at[nxt], late)
        prev = np.maximum(k - 1, 0)
        early_u = loc - self.offset[prev]
        twice = (k >= 1) & (early_u < self.at[k])
        return np.where(twice, early_u, late), late, skipped

    def instants(self, loc) -> np.ndarray:
        """Local wall-clock seconds -> instants, a repeated time read as its first pass and a skipped one as the
        change's instant (edges of days and buckets, the window's ends)."""
        return self.from_local(loc)[0]

    # --- scalars and pandas values

    def instant(self, when) -> int:
        """A naive local datetime (or Timestamp) -> epoch seconds, as `instants`."""
        return int(self.instants(np.array([_naive_secs(when)], dtype=np.int64))[0])

    def utc(self, when) -> pd.Timestamp:
        """A naive local datetime -> the naive UTC Timestamp of its instant (to the second)."""
        if self.is_utc:
            return pd.Timestamp(when)
        return pd.Timestamp(self.instant(when), unit="s")

    def local(self, when) -> pd.Timestamp:
        """A naive UTC Timestamp (or epoch seconds) -> the naive local Timestamp."""
        u = int(when) if isinstance(when, (int, np.integer)) else _naive_secs(when)
        return pd.Timestamp(int(self.to_local(np.array([u]))[0]), unit="s")

    def grid(self, first_local: int, hi: int, step: int = 86400) -> tuple[np.ndarray, np.ndarray]:
        """Buckets that start on local times: (their starts as local seconds, first_local + k x step while its
        instant is before the instant `hi`; their edges as instants, one more, the last `hi`). Local midnights
        for days (23, 24 or 25 hours long). A start the clocks skipped has the change's instant, so its bucket
        may be empty (no time long). An instant u is in bucket k exactly when k = (clock(u) - first_local) // step
        (`clock`): what the DuckDB engine uses."""
        hi_loc = int(self.clock(np.array([hi]))[0])
        n = max(0, -(-(hi_loc + 1 - first_local) // step))
        starts = first_local + np.arange(n, dtype=np.int64) * step
        e = self.instants(starts)
        keep = e < hi
        return starts[keep], np.append(e[keep], np.int64(hi))

    def sql_clock(self, x: str, lo: int, hi: int) -> str:
        """`clock(x)` as a SQL expression, for x (an integer expression of instants) in [lo, hi]."""
        if self.fixed:
            o = int(self.offset[0])
            return x if o == 0 else f"({x} + {o})"
        i0, i1 = int(self._seg(np.array([lo]))[0]), int(self._seg(np.array([hi]))[0])
        if i0 == i1:
            return f"({x} + {int(self.offset[i0])})"
        parts = []
        for i in range(i0, i1 + 1):
            if i > i0:
                back = int(self.offset[i - 1] - self.offset[i])
                if back > 0:
                    parts.append(f"WHEN {x} < {int(self.at[i]) + back} THEN {int(self.at[i] + self.offset[i - 1]) - 1}")
            if i < i1:
                parts.append(f"WHEN {x} < {int(self.at[i + 1])} THEN {x} + {int(self.offset[i])}")
        return f"(CASE {' '.join(parts)} ELSE {x} + {int(self.offset[i1])} END)"


def _naive_secs(when) -> int:
    t = pd.Timestamp(when)
    if t.tzinfo is not None:
        t = t.tz_convert(None)
    return int(t.value // 10**9)


_ZONES: dict[str, Zone] = {}


def _cached(key: str, make) -> Zone:
    z = _ZONES.get(key)
    if z is None:
        z = _ZONES[key] = make()
    return z


UTC = Zone("UTC")


def named(name: str) -> Zone:
    """The IANA zone `name` (`Europe/Berlin`, `UTC`); ZoneError when this machine's zone data does not know it."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if not isinstance(name, str) or not name.strip():
        raise ZoneError("an empty time zone name")
    try:
        zi = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ZoneError(f"{name!r} is not a time zone this machine knows (an IANA name such as Europe/Berlin "
                        f"or UTC)") from None
    return _cached("zi:" + name, lambda: Zone(name, _zoneinfo_offset(zi)))


def _zoneinfo_offset(zi):
    def offset_of(t: int) -> int:
        return int(datetime.fromtimestamp(t, zi).utcoffset().total_seconds())
    return offset_of


def local() -> Zone:
    """The zone of this process, which sacct (run from here, or on the cluster that wrote the dump) printed its
    times in: TZ when set (an IANA name, or a POSIX TZ string the C library reads), else /etc/localtime, else UTC
    (what the C library does). A TZ that is neither is a ZoneError, not read as UTC."""
    tz = os.environ.get("TZ")
    if tz is not None:
        name = tz[1:] if tz.startswith(":") else tz
        if not name.strip():
            return UTC  # TZ="" is UTC to the C library
        try:
            return named(name)
        except ZoneError:
            pass
        if _POSIX_TZ.match(name):
            time.tzset()
            return _cached("posix:" + name, lambda: Zone(name, lambda t: time.localtime(t).tm_gmtoff))
        raise ZoneError(f"TZ={tz} is not a time zone this machine knows (the C library would read its times as "
                        f"UTC); set TZ to an IANA name such as Europe/Berlin, or name the zone with --tz")
    path = "/etc/localtime"
    if not os.path.exists(path):
        return UTC
    real = os.path.realpath(path)
    key = real.split("/zoneinfo/", 1)[1] if "/zoneinfo/" in real else None
    if key:
        try:
            return named(key)
        except ZoneError:
            pass

    def make() -> Zone:
        from zoneinfo import ZoneInfo

        with open(path, "rb") as fh:
            zi = ZoneInfo.from_file(fh, key=path)
        return Zone(key or path, _zoneinfo_offset(zi))
    return _cached("file:" + real, make)


def get(zone) -> Zone:
    """`zone` as a Zone: None is UTC (what the reports read before they knew zones: times as written)."""
    if zone is None:
        return UTC
    if isinstance(zone, Zone):
        return zone
    return named(str(zone))


def skipped_why(zone: Zone, loc: int) -> str:
    """Why local time `loc` (wall-clock seconds) is none: the clocks skipped it (from when to when)."""
    k = int(np.searchsorted(zone._local_at, loc, side="right") - 1)
    t = int(zone.at[min(k + 1, len(zone.at) - 1)])
    a = pd.Timestamp(t + int(zone.offset[k]), unit="s")
    b = pd.Timestamp(t + int(zone.offset[min(k + 1, len(zone.at) - 1)]), unit="s")
    return f"is no time in {zone.name}: the clocks went from {a:%H:%M} to {b:%H:%M} that night"


class Resolved:
    """Local times of runs read as instants (`resolve`): arrays of epoch seconds (meaningless where the input was
    missing), where each input was a time the clocks skipped, the rows whose End is before their Start however
    read, and the rows where a repeated time was read as its first pass with nothing to tell the passes apart."""

    def __init__(self, times: dict, skipped: dict, backwards: np.ndarray, unresolved: np.ndarray):
        self.times, self.skipped, self.backwards, self.unresolved = times, skipped, backwards, unresolved


def resolve(zone: Zone, times: dict[str, tuple[np.ndarray, np.ndarray]], elapsed=None) -> Resolved:
    """`times`: name -> (local wall-clock seconds, whether given), with `start` and `end` (either may be absent)
    and any of `submit`, `eligible` (times before the start). `elapsed`: the run's ElapsedRaw (seconds, NaN where
    unknown), or a function giving it (called only where some time is repeated).

    A time in the repeated hour of a change back has two readings. Start and End are read so that End - Start is
    the elapsed time (or the nearest above it: a suspended job's ElapsedRaw leaves out its suspended time; then
    the nearest below); without it, so that End is not before Start; a Start no reading of the Submit comes before
    is left out where another fits; where both readings still fit, as the first pass, and the row is counted in
    `unresolved`. Submit and Eligible are read so that they are not after the Start, else as the first pass
    (counted likewise where both fit)."""
    n = len(next(iter(times.values()))[0]) if times else 0
    out: dict[str, np.ndarray] = {}
    skipped: dict[str, np.ndarray] = {}
    passes = {}
    twice = False
    for name, (loc, given) in times.items():
        bounds = None
        if given.any():
            bounds = (int(np.min(loc, where=given, initial=np.iinfo(np.int64).max)),
                      int(np.max(loc, where=given, initial=np.iinfo(np.int64).min)))
        first, second, gap = zone.from_local(loc, bounds)
        passes[name] = (first, second, given)
        skipped[name] = gap & given
        twice = twice or (first is not second and bool(((first != second) & given).any()))
    unresolved = np.zeros(n, dtype=bool)
    zero = (np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, bool))
    s0, s1, sg = passes.get("start", zero)
    e0, e1, eg = passes.get("end", zero)
    both = sg & eg
    if not twice:  # no repeated time here (nearly always): one reading of each
        out = {name: p[0] for name, p in passes.items()}
        return Resolved(out, skipped, both & (e0 < s0), unresolved)
    if callable(elapsed):
        elapsed = elapsed()
    cands = [(s0, e0), (s0, e1), (s1, e0), (s1, e1)]
    fits = [~both | (e >= s) for s, e in cands]
    differs = [np.ones(n, bool), e1 != e0, s1 != s0, (s1 != s0) & (e1 != e0)]
    backwards = both & ~(fits[0] | fits[1] | fits[2] | fits[3])
    if "submit" in passes:
        # a job starts after it was submitted: a Start before every reading of its Submit is no reading (Submit
        # 02:40 in the first pass, a 20-minute run 02:10-02:30: the second pass), where another reading fits
        x0, _, xg = passes["submit"]
        after = [fits[k] & (~(xg & sg) | (x0 <= s)) for k, (s, _) in enumerate(cands)]
        some = after[0] | after[1] | after[2] | after[3]
        fits = [np.where(some, a, f) for a, f in zip(after, fits)]
    pick = np.full(n, 0, dtype=np.int64)
    for k in (3, 2, 1):  # the first that fits, in the order of the list
        pick = np.where(fits[k], k, pick)
    pick = np.where(fits[0], 0, pick)
    many = sum((f & d).astype(np.int64) for f, d in zip(fits, differs)) > 1
    if elapsed is not None:
        el = np.asarray(elapsed, dtype=float)
        known = both & ~np.isnan(el) & many
        if known.any():
            big = np.float64(1e15)
            scores = []
            for (s, e), f in zip(cands, fits):
                d = (e - s).astype(float)
                scores.append(np.where(f, np.where(d >= el, d - el, big + (el - d)), np.inf))
            best = np.argmin(np.vstack(scores), axis=0)
            pick = np.where(known, best, pick)
            many &= ~known
    unresolved |= many & ((s0 != s1) | (e0 != e1))
    start = np.where(pick >= 2, s1, s0)
    end = np.where(pick % 2 == 1, e1, e0)
    if "start" in passes:
        out["start"] = start
    if "end" in passes:
        out["end"] = end
    for name in ("submit", "eligible"):
        if name not in passes:
            continue
        x0, x1, xg = passes[name]
        ok0, ok1 = ~sg | (x0 <= start), ~sg | (x1 <= start)
        out[name] = np.where(ok0 | ~ok1, x0, x1)
        unresolved |= xg & (x0 != x1) & ok0 & ok1
    return Resolved(out, skipped, backwards, unresolved)
