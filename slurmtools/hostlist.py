"""Slurm hostlist expressions (`gpu[01-04,07]`), through the maintained python-hostlist library.

A thin seam so the rest of the code depends on these functions, not on the library's API; the one thing written
here is telling when names are a plain run (`compress_run`), whose expression the library would write alike.
"""

from __future__ import annotations

import operator
import re
from itertools import chain, islice
from typing import Iterable, Sequence

import hostlist as _hl

#: a name ending in its number, with a prefix the library accepts as it is (no blank, bracket or comma to strip
#: or refuse); the lazy prefix leaves the whole trailing number to the second group
_NUMBERED = re.compile(r"([^\s\[\],]*?)([0-9]+)")


def expand(expr: str) -> list[str]:
    """`gpu[01-03]` -> ["gpu01", "gpu02", "gpu03"]. Raises ValueError on a malformed expression."""
    if expr is None or not str(expr).strip() or str(expr).strip() in ("(null)", "None"):
        return []
    try:
        return _hl.expand_hostlist(str(expr).strip())
    except _hl.BadHostlist as exc:
        raise ValueError(f"bad hostlist {expr!r}: {exc}") from None


def compress(hosts: Iterable[str]) -> str:
    """["gpu01", "gpu02", "gpu04"] -> "gpu[01-02,04]" (sorted and merged, as Slurm writes them)."""
    hosts = list(hosts)
    run = compress_run([hosts])
    return run[0] if run is not None else _hl.collect_hostlist(hosts)


def compress_run(groups: Sequence[Sequence[str]]) -> list[str] | None:
    """Each group's expression, as the library writes it, when the groups one after another are one run of
    consecutive numbers of one width after one prefix, ascending (a fabric's leaves: `gpu[00001-00032]`,
    `gpu[00033-00064]`, ...); else None, and `compress` each group.

    Why: the library's general collection costs about 3 us a host, and the planner writes every leaf of a
    16,384-host partition as a rank group on each plan (55 ms). The run is checked by passes that each run in C
    (equal lengths; the prefix and ASCII digits column by column; strictly ascending), so its n names are the n
    numbers from the first to the last; a property test compares the expressions with the library's."""
    if not groups or not all(groups):
        return None
    names = list(chain.from_iterable(groups))
    m = _NUMBERED.fullmatch(names[0])
    if m is None:
        return None
    prefix, first = m.groups()
    size, cut, n = len(names[0]), len(prefix), len(names)
    if len(set(map(len, names))) != 1:
        return None
    joined = "".join(names)
    for col in range(size):
        chars = joined[col::size]  # this column of every name
        ok = (chars == prefix[col] * n) if col < cut else (chars.isascii() and chars.isdigit())
        if not ok:
            return None
    if not all(map(operator.lt, names, islice(names, 1, None))) or int(names[-1][cut:]) - int(first) != n - 1:
        return None
    return [g[0] if len(g) == 1 else f"{prefix}[{g[0][cut:]}-{g[-1][cut:]}]" for g in groups]
