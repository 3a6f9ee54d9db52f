"""Natural sort order of names (gpu2 before gpu10), shared by the graph, its renderers and the planner's view
without importing the graph. Pure."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1 << 18)
def natural(s: str) -> tuple:
    """Sort key that puts gpu2 before gpu10 (cached: fabrics sort the same names many times)."""
    out: list = []
    num = ""
    txt = ""
    for ch in s:
        if ch.isdigit():
            if txt:
                out.append((1, txt))
                txt = ""
            num += ch
        else:
            if num:
                out.append((0, int(num)))
                num = ""
            txt += ch
    if num:
        out.append((0, int(num)))
    if txt:
        out.append((1, txt))
    return tuple(out)
