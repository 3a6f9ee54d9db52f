"""Demand forecast per tier: a few simple methods, each backtested on the history it is given, the best one kept.

Demand here is GPU-hours per day (allocated, so it is capped by what the cluster could run). Methods are
deliberately plain and explainable: the mean of the last 7 days, the mean of the last 28 days, and the last week
repeated (seasonal naive). The error is measured the way the forecast is used: the total over the next h days,
forecast from every past day that leaves h days to check against, reported as WAPE (sum |F - A| / sum A).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

MIN_FIT = 7  # days a method needs before it can forecast


def _mean_last(k: int):
    def f(hist: np.ndarray, h: int) -> np.ndarray:
        return np.full(h, hist[-k:].mean())
    return f


def _seasonal_naive(hist: np.ndarray, h: int) -> np.ndarray:
    week = hist[-7:]
    return np.resize(week, h)


METHODS = {"mean of last 7 days": (_mean_last(7), 7), "mean of last 28 days": (_mean_last(28), 28),
           "last week repeated": (_seasonal_naive, 7)}


@dataclass(frozen=True)
class Forecast:
    series: str
    horizon_days: int
    method: str
    total: float  # forecast GPU-hours (or the series' unit) over the next horizon_days
    per_day: float
    wape_pct: float | None  # backtest error of the chosen method; None when history is too short to test
    origins: int  # how many past forecasts the error is measured on
    errors: dict  # method -> WAPE % (None where untestable)


def backtest(values: np.ndarray, h: int, method: str) -> tuple[float | None, int]:
    """WAPE % of the method's h-day totals forecast from every origin with enough history before and h days after."""
    f, need = METHODS[method]
    n = len(values)
    origins = range(max(need, MIN_FIT), n - h + 1)
    fc, act = [], []
    for t in origins:
        fc.append(f(values[:t], h).sum())
        act.append(values[t:t + h].sum())
    if not fc:
        return None, 0
    a = np.asarray(act)
    denom = np.abs(a).sum()
    if denom == 0:
        return (0.0 if np.allclose(fc, 0) else None), len(fc)
    return float(np.abs(np.asarray(fc) - a).sum() / denom * 100), len(fc)


def forecast(daily: pd.Series, h: int, name: str = "") -> Forecast:
    """Pick the method with the lowest backtest WAPE (ties: the simplest, in METHODS order) and forecast h days."""
    v = np.asarray(daily, dtype=float)
    errs: dict[str, float | None] = {}
    counts: dict[str, int] = {}
    for m, (_, need) in METHODS.items():
        if len(v) < need:
            errs[m], counts[m] = None, 0
            continue
        errs[m], counts[m] = backtest(v, h, m)
    tested = {m: e for m, e in errs.items() if e is not None}
    if tested:
        best = min(tested, key=lambda m: (tested[m], list(METHODS).index(m)))
    else:
        usable = [m for m, (_, need) in METHODS.items() if len(v) >= need]
        best = usable[0] if usable else None
    if best is None:
        per = float(v.mean()) if len(v) else 0.0
        return Forecast(name, h, f"mean of {len(v)} day(s) (too little history to choose)", per * h, per, None, 0,
                        errs)
    f, _ = METHODS[best]
    fc = f(v, h)
    return Forecast(name, h, best, float(fc.sum()), float(fc.mean()), errs[best], counts[best], errs)
