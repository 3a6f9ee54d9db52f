"""The per-user notices of `advise --notify` (pure text): the evidence and the fix together, so a user can act on
the message alone. Delivery (files, sendmail) is `deliver`."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from slurmtools.advise.model import ShapeAdvice
from slurmtools.durations import human


@dataclass(frozen=True)
class Notice:
    user: str
    subject: str
    body: str
    shapes: int  # job shapes with a recommendation


def notices(advice: Iterable[ShapeAdvice], cluster: str, window: str) -> list[Notice]:
    """One notice per user with at least one finding, users in name order; users with nothing to say get none."""
    by_user: dict[str, list[ShapeAdvice]] = defaultdict(list)
    for a in advice:
        if a.findings:
            by_user[a.shape.user].append(a)
    return [_notice(u, by_user[u], cluster, window) for u in sorted(by_user)]


def _notice(user: str, shapes: list[ShapeAdvice], cluster: str, window: str) -> Notice:
    lines = [f"Hello {user},", "",
             f"slurmtools compared what your jobs on cluster {cluster} asked for with what they used, over the last "
             f"{window}. For the job shapes below a smaller request would have done the same work:", ""]
    for a in shapes:
        lines.append(f"* `{a.shape.name}` ({a.shape.gpus} GPU(s), {a.runs} run(s), account {a.account}):")
        lines.append(f"  {a.sentence()}.")
        lines.append(f"  asked: {_asked(a)}")
        lines.append(f"  used: {_used(a)}")
        lines.append("")
    lines += ["`slurmtools plan --right-size ...` applies these to a job of the same name "
              "and GPU count, and says so in the plan.",
              "Run `slurmtools advise` for the details; the thresholds are the site's ([advise] in the site file)."]
    subject = f"slurmtools: right-sizing advice for {user} on {cluster} ({len(shapes)} job shape(s))"
    return Notice(user, subject, "\n".join(lines) + "\n", len(shapes))


def _asked(a: ShapeAdvice) -> str:
    x = a.asked
    parts = [f"{x['gpus']} {a.gpu_type or 'GPU'} GPU(s)" if x["gpus"] else "no GPUs"]
    if x.get("cpus"):
        parts.append(f"{x['cpus']} CPUs")
    if x.get("mem_mb_per_node"):
        parts.append(f"{x['mem_mb_per_node'] / 1024:.0f} GB per node")
    if x.get("time_limit_s"):
        parts.append(f"time limit {human(x['time_limit_s'])}")
    return ", ".join(parts)


def _used(a: ShapeAdvice) -> str:
    u = a.used
    parts = []
    if u.get("gpus_busy_at_share") is not None:
        parts.append(f"{u['gpus_busy_at_share']} GPU(s) busy in most runs ({u['gpu_use_from']})")
    if u.get("gpu_util_pct_median") is not None:
        parts.append(f"busy GPUs {u['gpu_util_pct_median']:.0f}% utilised (median)")
    if u.get("cpu_efficiency_pct_median") is not None:
        parts.append(f"CPU efficiency {u['cpu_efficiency_pct_median']:.0f}% (median)")
    if u.get("max_rss_mb_peak") is not None:
        parts.append(f"peak memory {u['max_rss_mb_peak'] / 1024:.1f} GB")
    if u.get("longest_completed_run_s"):
        parts.append(f"longest completed run {human(u['longest_completed_run_s'])}")
    return ", ".join(parts) or "not measured"
