"""This month's GPU-hours per account, from accounting records (pure), and the Lua table file that carries
them to job_submit.lua (which cannot query slurmdbd itself; `slurmtools admin policy refresh-usage` rewrites it).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Iterable

from slurmtools.slurm.model import AcctRecord


def month_window(now: datetime) -> tuple[datetime, datetime, str]:
    """[first of this month, now) and its label `YYYY-MM` (budgets are per calendar month)."""
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return start, now, now.strftime("%Y-%m")


def uncharged_tiers(site) -> tuple[str, ...]:
    """The tiers whose GPU-hours are not charged against an account's monthly budget (`charged = false` in the
    site file). The one definition of "charged": admission (`current_usage`, the usage file, `replay`) and the
    report's budget table both go through it, so they cannot disagree on how much of a budget is spent."""
    return tuple(t.name for t in site.tiers.values() if not t.charged)


def gpu_hours_by_account(records: Iterable[AcctRecord], start: datetime, end: datetime,
                         free_tiers: tuple[str, ...] = ()) -> dict[str, float]:
    """GPU-hours of allocations inside [start, end), per account. Jobs in `free_tiers` (`uncharged_tiers(site)`)
    are not counted; a job still running counts up to `end`."""
    out: dict[str, float] = {}
    for r in records:
        if r.step is not None or r.start is None or r.alloc_gpus <= 0 or r.qos in free_tiers:
            continue
        s = max(r.start, start)
        e = min(r.end or end, end)
        secs = (e - s).total_seconds()
        if secs <= 0:
            continue
        out[r.account] = out.get(r.account, 0.0) + r.alloc_gpus * secs / 3600.0
    return out


def _lua_str(s: str) -> str:
    return '"' + "".join(c if c.isalnum() or c in "-_.: " else "\\%d" % ord(c) for c in s) + '"'


def render_usage_lua(usage: dict[str, float], month: str, generated: datetime | None = None) -> str:
    """A Lua chunk returning `{month=..., accounts={name=gpu_hours}}`; job_submit.lua loads it with pcall."""
    gen = (generated or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = ["-- GPU-hours per account for the current month; written by `slurmtools admin policy refresh-usage`.",
             "-- job_submit.lua ignores it when `month` is not the current month.",
             "return {", f"  month = {_lua_str(month)},", f"  generated = {_lua_str(gen)},", "  accounts = {"]
    for a in sorted(usage):
        lines.append(f"    [{_lua_str(a)}] = {float(usage[a])!r},")
    lines += ["  },", "}"]
    return "\n".join(lines) + "\n"
