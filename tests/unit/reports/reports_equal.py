"""Comparing two `metrics.Report`s figure by figure and table by table (the differential test's judge).

Floats are equal to 1e-9 relative (the engines add in different orders); rows of tables keyed by name are
compared after sorting by key (the page and the CSV sort them the same way for both: by value, ties by key);
top-N lists compare as the same rows."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

RTOL = 1e-9


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, float) and math.isnan(a):
            return isinstance(b, float) and math.isnan(b)
        return math.isclose(float(a), float(b), rel_tol=RTOL, abs_tol=1e-9)
    return a == b


def _norm(t: pd.DataFrame) -> pd.DataFrame:
    t = t.copy()
    t.index = pd.Index([str(x) for x in t.index], name=t.index.name)
    t.columns = [str(c) for c in t.columns]
    out = t.reset_index()
    for c in out.columns:
        if isinstance(out[c].dtype, pd.CategoricalDtype) or out[c].dtype == object:
            out[c] = out[c].astype(str)
        elif out[c].dtype == bool:
            out[c] = out[c].astype(np.int64)
    return out.sort_values(list(out.columns), kind="stable").reset_index(drop=True)


def assert_tables_equal(a: pd.DataFrame, b: pd.DataFrame, what: str) -> None:
    if (a is None or a.empty) and (b is None or b.empty):
        return
    na, nb = _norm(a), _norm(b)
    assert list(na.columns) == list(nb.columns), f"{what}: columns {list(na.columns)} != {list(nb.columns)}"
    assert len(na) == len(nb), f"{what}: {len(na)} rows != {len(nb)}"
    for c in na.columns:
        x, y = na[c], nb[c]
        if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y):
            xv, yv = x.to_numpy(dtype=float), y.to_numpy(dtype=float)
            ok = np.isclose(xv, yv, rtol=RTOL, atol=1e-9, equal_nan=True)
            assert ok.all(), f"{what}.{c}: {xv[~ok][:5]} != {yv[~ok][:5]}"
        elif pd.api.types.is_datetime64_any_dtype(x) or pd.api.types.is_datetime64_any_dtype(y):
            assert (pd.to_datetime(x).astype("datetime64[s]").fillna(pd.Timestamp(0)).to_numpy()
                    == pd.to_datetime(y).astype("datetime64[s]").fillna(pd.Timestamp(0)).to_numpy()).all(), \
                f"{what}.{c}: times differ"
        else:
            assert x.astype(str).tolist() == y.astype(str).tolist(), f"{what}.{c}: {x.tolist()[:5]} != {y.tolist()[:5]}"


def assert_reports_equal(old, new) -> None:
    """Every summary figure, note, table, the timeline, the wait histogram and the forecasts."""
    assert list(old.summary) == list(new.summary)
    for k in old.summary:
        assert _same(old.summary[k], new.summary[k]), f"summary {k}: {old.summary[k]!r} != {new.summary[k]!r}"
    assert old.notes == new.notes
    assert list(old.tables) == list(new.tables), f"tables {list(old.tables)} != {list(new.tables)}"
    for k in old.tables:
        assert_tables_equal(old.tables[k], new.tables[k], k)
    assert list(map(str, old.timeline.columns)) == list(map(str, new.timeline.columns))
    assert_tables_equal(old.timeline, new.timeline, "timeline")
    assert_tables_equal(old.wait_hist, new.wait_hist, "wait_hist")
    assert [(f.series, f.horizon_days, f.method) for f in old.forecasts] == \
        [(f.series, f.horizon_days, f.method) for f in new.forecasts]
    for f, g in zip(old.forecasts, new.forecasts):
        assert _same(f.total, g.total) and _same(f.wape_pct, g.wape_pct), f"forecast {f.series} {f.horizon_days}"
    assert (old.site, old.cluster, old.currency, old.uncharged_tiers) == \
        (new.site, new.cluster, new.currency, new.uncharged_tiers)
