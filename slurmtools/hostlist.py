"""Slurm hostlist expressions (`gpu[01-04,07]`), through the maintained python-hostlist library.

A thin seam so the rest of the code depends on two functions, not on the library's API.
"""

from __future__ import annotations

from typing import Iterable

import hostlist as _hl


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
    return _hl.collect_hostlist(list(hosts))
