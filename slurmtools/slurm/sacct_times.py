"""sacct's local wall-clock times read as instants of the zone sacct printed them in, in `AcctRecord`s.

parse_sacct reads each local time as the C library does: a time in the autumn change's repeated hour as its first
pass. A run from the first pass into the second then read an hour short (or End before Start), and a job started or
submitted in the second pass read as an hour early (out of order with the first pass's). `parse_in_zone` reads a
dump's job lines' Submit, Start and End again as the report reads a dump (`reports.zone.resolve`, the one home of
that rule; docs/reports.md, "Time zones and clock changes"), where that reading differs from the C library's: by
ElapsedRaw or Elapsed, else so that End is not before Start (and Start not before every reading of the Submit),
else as the first pass, counted in a note. A Submit, Start or End the spring change skipped is refused in one line
naming the line and field (sacct never prints one). The sandbox's trace reader and `admin policy replay` use it.

Standard library at import; `reports.zone` (numpy, pandas) only where a zone has clock changes.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Callable, Sequence

from slurmtools.errors import ParseError

#: the times read again (Eligible keeps the C library's reading: no reader of these records uses it)
TIMES = ("Submit", "Start", "End")
#: the local times `reports.zone` tables clock changes for (1970 to 2200, what the report reads); a time outside
#: them keeps the C library's reading
_TABLED = (0, 7258118400)


def wall_clock(row: dict[str, str], lineno: int) -> tuple | None:
    """One sacct line's times as written: None for a step (its times are not read again); for a job line (its line
    number, its Submit, Start and End in seconds as if UTC, None when unset or not a naive local time, whether it
    gives ElapsedRaw or Elapsed)."""
    if "." in row.get("JobID", row.get("JobIDRaw", "")):
        return None
    wall = []
    for name in TIMES:
        v = row.get(name)
        secs = None
        if v not in (None, "", "Unknown", "None", "N/A"):
            try:
                dt = datetime.fromisoformat(v)
            except ValueError:
                dt = None   # parse_sacct refuses it in one line
            if dt is not None and dt.tzinfo is None:
                secs = int(dt.replace(tzinfo=timezone.utc).timestamp())
        wall.append(secs)
    return (lineno, *wall, bool(row.get("ElapsedRaw") or row.get("Elapsed")))


def parse_in_zone(text: str, source: str, required: Sequence, zone, check: Callable | None = None,
                  what: str = "the dump", hint: str | None = None) -> tuple[list, tuple[str, ...]]:
    """(`parse_sacct(text, source, required, check, hint)`'s records with their job lines' times read in `zone` (a
    `reports.zone.Zone`, this process's or another: `--tz`; None: as parse_sacct reads them, in this process's
    zone), notes). `what` names the input in the note (`the history has no ElapsedRaw or Elapsed`)."""
    from slurmtools.slurm.commands import parse_sacct

    if zone is None:
        return parse_sacct(text, source, required, check, hint), ()
    seen: list = []

    def keep(row: dict[str, str], lineno: int) -> None:
        if check is not None:
            check(row, lineno)
        seen.append(wall_clock(row, lineno))

    records = parse_sacct(text, source, required, keep, hint)
    return read_in_zone(records, seen, zone, source, what)


def read_in_zone(records: list, seen: list, zone, source: str, what: str = "the dump"
                 ) -> tuple[list, tuple[str, ...]]:
    """(`records` with the times of their job lines read as the report reads them in `zone`, where that is not
    what parse_sacct read (the C library, in this process's zone: a repeated time as its first pass; every time,
    where `zone` is another); a note counting the lines whose repeated time nothing told apart). `seen`: one
    `wall_clock` entry per record. A Submit, Start or End the spring change skipped is a ParseError naming the
    line and field."""
    import numpy as np

    from slurmtools.reports.zone import resolve, skipped_why

    if len(seen) != len(records):   # parse_sacct makes one record per line it checks
        raise AssertionError(f"{len(records)} records of {len(seen)} checked lines")
    rows = [i for i, s in enumerate(seen) if s is not None]
    if not rows:
        return records, ()
    lines = np.array([seen[i][0] for i in rows], dtype=np.int64)
    loc, given = {}, {}
    for k, name in enumerate(TIMES, start=1):
        v = [seen[i][k] for i in rows]
        given[name] = np.array([x is not None for x in v], dtype=bool)
        loc[name] = np.array([0 if x is None else x for x in v], dtype=np.int64)
    tabled = np.logical_and.reduce([~given[n] | ((loc[n] >= _TABLED[0]) & (loc[n] < _TABLED[1])) for n in TIMES])
    for n in TIMES:
        given[n] &= tabled
    elapsed = np.array([records[i].elapsed_s if seen[i][4] else np.nan for i in rows], dtype=float)
    r = resolve(zone, {n.lower(): (loc[n], given[n]) for n in TIMES}, elapsed)
    skipped = [(int(lines[j]), k, n) for k, n in enumerate(TIMES) for j in np.flatnonzero(r.skipped[n.lower()])]
    if skipped:
        line, _, n = min(skipped)
        j = int(np.searchsorted(lines, line))
        when = datetime.fromtimestamp(int(loc[n][j]), timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        raise ParseError(source, line, f"{n}: {when} {skipped_why(zone, int(loc[n][j]))} (sacct never prints it)")
    moved = np.zeros(len(rows), dtype=bool)
    for n in TIMES:
        held = np.array([_instant(getattr(records[i], n.lower())) for i in rows], dtype=np.int64)
        given[n] &= held != _instant(None)   # a time parse_sacct left unset stays so (the Start of a job run nowhere)
        moved |= given[n] & (r.times[n.lower()] != held)
    out = list(records)
    for j in np.flatnonzero(moved):
        i = rows[j]
        out[i] = replace(records[i], **{n.lower(): datetime.fromtimestamp(int(r.times[n.lower()][j]), timezone.utc)
                                        for n in TIMES if given[n][j]})
    unresolved = int(np.count_nonzero(r.unresolved))
    if not unresolved:
        return out, ()
    how = (f"{what} has no ElapsedRaw or Elapsed" if not any(seen[i][4] for i in rows)
           else "no ElapsedRaw on the line, or a Submit that fits either pass")
    return out, (f"{unresolved} job line(s) hold a time in the repeated hour of a change back from daylight-saving "
                 f"time in {zone.name} that nothing tells apart ({how}): read as that hour's first pass",)


def _instant(when: datetime | None) -> int:
    """What parse_sacct read (an aware datetime) in epoch seconds; unset: a value no time read here has."""
    return -(2**62) if when is None else int(when.timestamp())
