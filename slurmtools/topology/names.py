"""Natural sort order of names (gpu2 before gpu10), shared by the graph, its renderers and the planner's view
without importing the graph. Pure."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1 << 18)
def natural(s: str) -> tuple:
    """Sort key that puts gpu2 before gpu10 (cached: fabrics sort the same names many times). Names come from the
    providers' files, so any text must sort: digits are decimal ones (`str.isdigit` also passes `²`, which int()
    refuses), and a run past int()'s digit limit sorts as text."""
    out: list = []
    num = ""
    txt = ""
    for ch in s:
        if ch.isdecimal():
            if txt:
                out.append((1, txt))
                txt = ""
            num += ch
        else:
            if num:
                out.append(_number(num))
                num = ""
            txt += ch
    if num:
        out.append(_number(num))
    if txt:
        out.append((1, txt))
    return tuple(out)


def _number(digits: str) -> tuple:
    try:
        return (0, int(digits))
    except ValueError:   # more digits than int() converts
        return (1, digits)
