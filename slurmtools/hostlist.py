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


#: the most names one expression expands to: the library's own cap on one range or one comma-free part, here on
#: the whole list too (the library caps each part alone, so `n0[0-99999],n1[0-99999],...` filled the memory)
MAX_NAMES = _hl.MAX_SIZE


#: NodeList values that name no host (sacct's `None assigned`, an empty field): a job with one never ran anywhere
NO_HOST = frozenset({"", "None assigned", "(null)", "None"})


def _shown(expr: str) -> str:
    """The expression as an error message quotes it: at most 60 characters (a garbled one can be a whole line)."""
    return repr(expr) if len(expr) <= 60 else repr(expr[:60]) + f"... ({len(expr)} characters)"


def _parts(expr: str):
    """The comma-separated parts outside brackets, as the library splits them (it checks the brackets)."""
    if "[" not in expr and "]" not in expr:
        yield from expr.split(",")
        return
    depth, start = 0, 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            yield expr[start:i]
            start = i + 1
    yield expr[start:]


def expand(expr: str) -> list[str]:
    """`gpu[01-03]` -> ["gpu01", "gpu02", "gpu03"]. Raises ValueError on a malformed expression, and on one of more
    than MAX_NAMES names (counted part by part, so a runaway list is refused before it is all built)."""
    if expr is None or not str(expr).strip() or str(expr).strip() in ("(null)", "None"):
        return []
    text = str(expr).strip()
    try:
        if "," not in text:
            return _hl.expand_hostlist(text)
        names: list[str] = []
        for part in _parts(text):
            names.extend(_hl.expand_hostlist(part) if part else ())
            if len(names) > MAX_NAMES:
                raise _hl.BadHostlist(f"more than {MAX_NAMES} names")
        return _hl.remove_duplicates(names)
    except _hl.BadHostlist as exc:
        raise ValueError(f"bad hostlist {_shown(str(expr))}: {exc}") from None
    except RecursionError:   # the library recurses once per [...] group of a name
        raise ValueError(f"bad hostlist {_shown(str(expr))}: too many [...] groups in one name") from None


def compress(hosts: Iterable[str]) -> str:
    """["gpu01", "gpu02", "gpu04"] -> "gpu[01-02,04]" (sorted and merged, as Slurm writes them)."""
    hosts = list(hosts)
    try:
        run = compress_run([hosts])
        return run[0] if run is not None else _hl.collect_hostlist(hosts)
    except ValueError:   # a run of more digits than int() converts (4300): the names one by one, sorted
        return ",".join(sorted(set(hosts)))


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
