"""The report's right-sizing table (pure): one row per job shape with a recommendation, the most GPU time first.
Built here so the report can show it with one call (`right_sizing_table(advice)`); see docs/advise.md."""

from __future__ import annotations

from typing import Iterable

from slurmtools.advise.model import ShapeAdvice

COLUMNS = ("user", "account", "job_name", "gpus", "runs", "gpus_busy", "gpu_util_pct", "cpu_efficiency_pct",
           "time_limit_s", "longest_run_s", "recommendation")


def right_sizing_rows(advice: Iterable[ShapeAdvice]) -> list[dict]:
    rows = []
    for a in advice:
        if not a.findings:
            continue
        u = a.used
        rows.append({"user": a.shape.user, "account": a.account, "job_name": a.shape.name, "gpus": a.shape.gpus,
                     "runs": a.runs, "gpus_busy": u.get("gpus_busy_at_share"),
                     "gpu_util_pct": u.get("gpu_util_pct_median"),
                     "cpu_efficiency_pct": u.get("cpu_efficiency_pct_median"),
                     "time_limit_s": a.asked.get("time_limit_s"), "longest_run_s": u.get("longest_completed_run_s"),
                     "recommendation": a.sentence()})
    return rows


def right_sizing_table(advice: Iterable[ShapeAdvice]):
    """The rows as a pandas frame with the columns above (empty frame, same columns, when nothing to say)."""
    import pandas as pd

    return pd.DataFrame(right_sizing_rows(advice), columns=list(COLUMNS))
