"""Demand forecast: exact on series whose answer is known, and measured on real GPU demand (Helios, Alibaba)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from slurmtools.reports.forecast import backtest, forecast

DATA = Path(__file__).resolve().parents[2] / "data" / "reports"


def test_constant_series_is_forecast_exactly():
    f = forecast(pd.Series([100.0] * 60), 7)
    assert f.total == pytest.approx(700) and f.wape_pct == pytest.approx(0)
    assert f.method == "mean of last 7 days"  # the simplest of the tied methods


def test_weekly_pattern_is_caught_by_seasonal_naive():
    week = [10, 100, 100, 100, 100, 100, 10]
    series = pd.Series(week * 12, dtype=float)
    f7 = forecast(series, 7)  # any whole week totals the same: the 7-day mean is exact too
    assert f7.wape_pct == pytest.approx(0) and f7.total == pytest.approx(sum(week))
    f30 = forecast(series, 30)  # 30 days = 4 weeks + 2 days: only the repeated week gets the 2 days right
    assert f30.method == "last week repeated" and f30.wape_pct == pytest.approx(0)
    assert f30.total == pytest.approx(4 * sum(week) + 10 + 100)
    assert f30.errors["mean of last 7 days"] > 0


def test_short_history_says_it_is_untested():
    f = forecast(pd.Series([5.0, 6.0, 7.0]), 30)
    assert f.wape_pct is None and f.origins == 0 and "too little history" in f.method
    f = forecast(pd.Series([5.0] * 20), 30)
    assert f.wape_pct is None and f.total == pytest.approx(150)


def test_backtest_counts_origins():
    v = np.arange(40, dtype=float)
    err, n = backtest(v, 7, "mean of last 7 days")
    assert n == 40 - 7 - 7 + 1
    # a rising series: the trailing mean always lags by 7 days -> a known, positive error
    assert err > 0


def test_helios_venus_daily_gpus():
    # SenseTime Helios "Venus": GPUs per virtual cluster per day, 2020-04..09 (CC BY 4.0)
    df = pd.read_csv(DATA / "venus_cluster_gpu_number.csv", parse_dates=["date"])
    total = df.set_index("date")["total"].astype(float)
    assert len(total) == 181
    f7, f30 = forecast(total, 7, "venus"), forecast(total, 30, "venus")
    assert f7.origins > 100 and f30.origins > 100
    # quota changes in steps: recent-level methods are within a few percent on this history
    assert f7.wape_pct < 5 and f30.wape_pct < 10
    assert total.min() * 7 <= f7.total <= total.max() * 7


def alibaba_daily_demand() -> pd.DataFrame:
    """GPU-hours per day by QoS class from Alibaba's PAI v2023 pod list (GPU pods that were scheduled)."""
    p = pd.read_csv(DATA / "openb_pod_list_default.csv")
    p = p[(p["num_gpu"] > 0) & (p["scheduled_time"] > 0) & (p["deletion_time"] > p["scheduled_time"])]
    gpus = p["num_gpu"] * np.where(p["num_gpu"] == 1, p["gpu_milli"] / 1000.0, 1.0)
    days = int(p["deletion_time"].max() // 86400) + 1
    out = {}
    for q, g in p.assign(g=gpus).groupby("qos"):
        daily = np.zeros(days)
        for d in range(days):
            lo, hi = d * 86400, (d + 1) * 86400
            ov = np.clip(np.minimum(g["deletion_time"], hi) - np.maximum(g["scheduled_time"], lo), 0, None)
            daily[d] = (ov * g["g"]).sum() / 3600
        out[q] = daily
    return pd.DataFrame(out)


def test_alibaba_demand_per_qos():
    d = alibaba_daily_demand()
    assert {"LS", "BE"} <= set(d.columns) and len(d) > 60
    for q in d.columns:
        if d[q].sum() == 0:
            continue
        for h in (7, 30):
            f = forecast(d[q], h, q)
            assert np.isfinite(f.total) and f.total >= 0
            assert f.wape_pct is not None and f.origins >= len(d) - 28 - h
            # the chosen method is the best of those tested
            assert f.wape_pct == min(e for e in f.errors.values() if e is not None)
