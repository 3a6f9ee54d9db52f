"""Slurm hostlist expressions (`gpu[01-04,07]`), through the maintained python-hostlist library.

A thin seam so the rest of the code depends on two functions, not on the library's API. `compress` runs the
library's own collection algorithm (python-hostlist's `collect_hostlist`) step for step, with its regular
expression compiled once and its sort done on plain tuples: the same string for every input, several times
faster, which matters when topology.conf is written for thousands of switches.
"""

from __future__ import annotations

import re
from typing import Iterable

import hostlist as _hl

# python-hostlist's own patterns (collect_hostlist / collect_hostlist_1)
_FORBIDDEN = re.compile(r"[][,]")
_PARTS = re.compile(r"^(.*?)([0-9]+)?([^0-9]*)$")
_DIGITS = "0123456789"


def _parts(left: str) -> tuple[str, str | None, str]:
    """`_PARTS.match(left).group(1, 2, 3)` without the backtracking: the text before the last run of digits,
    that run (None when there is no digit at all) and the non-digits after it."""
    j = len(left)
    while j and left[j - 1] not in _DIGITS:
        j -= 1
    if not j:
        return "", None, left
    head = left[:j].rstrip(_DIGITS)
    if "\n" in head:       # the pattern's "." stops at a newline: let it decide (and fail) as the library does
        return _PARTS.match(left).group(1, 2, 3)
    return head, left[len(head):j], left[j:]


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
    left_right: list[tuple[str, str]] = []
    for host in hosts:
        host = host.strip()
        if host == "":
            continue
        if _FORBIDDEN.search(host):
            return _hl.collect_hostlist(hosts)   # the library's own error
        left_right.append((host, ""))
    looping = True
    while looping:
        left_right, looping = _collect_once(left_right)
    return ",".join([left + right for left, right in left_right])


def _collect_once(left_right: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], bool]:
    """One pass of python-hostlist's `collect_hostlist_1`: collect the rightmost number of each left part into
    ranges, moving it to the right part. Same sort order, same groups, same output."""
    entries = []
    remaining: set[str] = set()
    for left, right in left_right:
        host = left + right
        remaining.add(host)
        prefix, num_str, suffix = _parts(left)
        if num_str is None:
            # no number left: the whole host moves to the right part (the library's (host, None) group)
            entries.append(((host, ""), -1, -1, host, None))
        else:
            suffix += right
            entries.append(((prefix, suffix), int(num_str), len(num_str), host, suffix))
    entries.sort()
    results: list[tuple[str, str]] = []
    needs_another_loop = False
    i, n = 0, len(entries)
    while i < n:
        (prefix, _), _, _, _, suffix = entries[i]
        j = i + 1
        while j < n and entries[j][0][0] == prefix and entries[j][4] == suffix and \
                (suffix is not None or entries[j][0][1] == ""):
            j += 1
        if suffix is None:
            results.append(("", prefix))
            remaining.remove(prefix)
        else:
            range_list = []
            for k in range(i, j):
                _, num_int, num_width, host, _ = entries[k]
                if host not in remaining:
                    continue
                low = num_int
                while True:
                    host = "%s%0*d%s" % (prefix, num_width, num_int, suffix)
                    if host in remaining:
                        remaining.remove(host)
                        num_int += 1
                    else:
                        break
                range_list.append((low, num_int - 1, num_width))
            needs_another_loop = True
            if len(range_list) == 1 and range_list[0][0] == range_list[0][1]:
                results.append((prefix, "%0*d%s" % (range_list[0][2], range_list[0][0], suffix)))
            else:
                results.append((prefix, "[" + ",".join([_hl.format_range(lo, hi, w) for lo, hi, w in range_list])
                                + "]" + suffix))
        i = j
    assert not remaining
    return results, needs_another_loop
