"""How numbers and column names read in the human-facing formats (HTML page, Markdown summary, chart labels).

One function per kind of value, used by every human-facing renderer, so the page's headline and the Markdown
summary can never disagree on a number (CSV and JSON are data: they keep full precision and field names).
"""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np
import pandas as pd


def _missing(v) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and math.isnan(v)) or v is pd.NaT


def num(v) -> str:
    """A count or a quantity: integers with thousands separators, other numbers to one decimal."""
    if _missing(v):
        return "n/a"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        return f"{v:,.1f}" if abs(v) < 1e6 else f"{v:,.0f}"
    return str(v)


def kwh(v) -> str:
    """An amount of energy (kWh) or carbon (kg): three decimals below 1,000, else one."""
    if _missing(v):
        return "n/a"
    return f"{float(v):,.3f}" if abs(float(v)) < 1000 else f"{float(v):,.1f}"


def count(v) -> str:
    """A number of things (runs, jobs, GPUs): never a fraction."""
    return "n/a" if _missing(v) else f"{int(round(float(v))):,}"


def money_amount(v) -> str:
    """An amount of money, to the cent: the one rounding rule for cost."""
    return "n/a" if _missing(v) else f"{float(v):,.2f}"


def money(v, currency: str) -> str:
    return "n/a" if _missing(v) else f"{money_amount(v)} {currency}".rstrip()


def pct(v) -> str:
    return "n/a" if _missing(v) else f"{float(v):.1f}%"


def minutes(v) -> str:
    """A wait: whole minutes up to two hours, then hours to one decimal."""
    if _missing(v):
        return "n/a"
    return f"{v:.0f} min" if v < 120 else f"{v / 60:.1f} h"


def when(v) -> str:
    if _missing(v):
        return "n/a"
    return str(pd.Timestamp(v)) if isinstance(v, (pd.Timestamp, datetime, np.datetime64)) else str(v)


#: report field -> column header. Every column of every table the report makes is here (a unit test checks it);
#: `{cur}` is replaced by the site's currency
HEADERS: dict[str, str] = {
    "runs": "Runs", "jobs": "Jobs", "gpus": "GPUs", "hosts": "Hosts", "run": "Run", "job_id": "Job",
    "user": "User", "account": "Account", "tier": "Tier", "name": "Job name", "state": "State",
    "partition": "Partition", "cluster": "Cluster", "gpu_type": "GPU type", "size": "GPUs per job",
    "gpu_hours": "GPU-hours", "cost": "Cost ({cur})", "available_gpu_hours": "Available GPU-hours",
    "capacity_gpu_hours": "Capacity GPU-hours", "allocated_gpu_hours": "Allocated GPU-hours",
    "utilization_pct": "Utilization %", "idle_gpu_hours": "Idle GPU-hours",
    "share_of_capacity_pct": "Share of capacity %", "share_of_use_pct": "Share of use %",
    "median_wait_min": "Median wait (min)", "p90_wait_min": "p90 wait (min)", "mean_wait_min": "Mean wait (min)",
    "preempted_runs": "Preempted runs", "requeued_runs": "Requeued runs", "requeued": "Requeued",
    "gpu_hours_lost": "GPU-hours lost", "runs_with_checkpoint_time": "Runs with a checkpoint time",
    "upper_bound": "Upper bound", "start": "Start", "end": "End", "last_checkpoint": "Last checkpoint",
    "gpu_util_pct": "Mean GPU utilisation %", "util_source": "Utilisation from",
    "gpu_mem_used_mb": "GPU memory used (MB)", "gpu_hours_measured": "GPU-hours measured",
    "runs_below_threshold": "Runs below threshold", "mean_gpu_util_pct": "Mean GPU utilisation %",
    "monthly_budget_gpu_hours": "Monthly budget (GPU-hours)", "month_to_date_gpu_hours": "Used this month (GPU-hours)",
    "not_charged_gpu_hours": "Of which not charged", "charged_gpu_hours": "Charged (GPU-hours)",
    "budget_used_pct": "Budget used %", "projected_month_gpu_hours": "Projected month (charged GPU-hours)",
    "projected_pct": "Projected % of budget", "status": "Status", "in_site_file": "In the site file",
    "horizon_days": "Horizon (days)", "method": "Method", "forecast_gpu_hours": "Forecast GPU-hours",
    "per_day": "Per day", "backtest_wape_pct": "Backtest error (WAPE %)", "backtest_origins": "Backtest origins",
    "multi_node_runs": "Multi-node runs", "runs_on_more_leaves_than_needed": "Runs on more leaves than needed",
    "their_gpu_hours": "Their GPU-hours", "day": "Day", "leaf": "Leaf switch", "nvlink_domain": "NVLink domain",
    "energy_kwh": "Energy (kWh)", "idle_energy_kwh": "Of which idle GPUs (kWh)", "energy_cost": "Energy cost ({cur})",
    "co2e_kg": "CO2e (kg)", "runs_energy_unknown": "Runs with energy unknown", "energy_source": "Energy from",
    "mode": "Mode", "start_step": "From step", "end_step": "To step", "start_time": "From", "end_time": "To",
    "why": "Why",
}
#: columns holding numbers of things: shown as integers
COUNT_COLUMNS = frozenset({"runs", "jobs", "gpus", "hosts", "run", "preempted_runs", "requeued_runs",
                           "runs_with_checkpoint_time", "runs_below_threshold", "multi_node_runs",
                           "runs_on_more_leaves_than_needed", "horizon_days", "backtest_origins",
                           "runs_energy_unknown", "start_step", "end_step"})
#: energy in kWh: three decimals (a job's GPUs often use well under one kWh)
ENERGY_COLUMNS = frozenset({"energy_kwh", "idle_energy_kwh", "co2e_kg"})


def header(field: str, currency: str = "") -> str:
    """The human header of a report field (fields the table above lacks still lose their underscores)."""
    h = HEADERS.get(field)
    if h is None:
        h = field.replace("_gpu_hours", " GPU-hours").replace("_pct", " %").replace("_", " ")
        h = h[:1].upper() + h[1:]
    return h.replace("{cur}", currency or "cost units").replace(" ()", "")


def cell(field: str, v) -> str:
    """One table cell of the human formats."""
    if isinstance(v, (pd.Timestamp, datetime, np.datetime64)) or v is pd.NaT:
        return when(v)
    if field in ("cost", "energy_cost"):
        return money_amount(v)
    if field in ENERGY_COLUMNS:
        return kwh(v)
    if field in COUNT_COLUMNS and not isinstance(v, str) and not _missing(v):
        return count(v)
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    return num(v)
