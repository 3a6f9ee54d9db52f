"""A computed `Report` -> files: one HTML page, a CSV per table, a short Markdown summary, one JSON document.

Rendering only: every number here was computed in `metrics`. User-supplied strings are escaped in HTML by
Jinja2's autoescape and by `markupsafe.escape` in the table and chart helpers; Markdown cells have `|`, `<`,
`>`, `&` and backticks neutralised so a job name cannot break a table or smuggle markup into a chat post.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
from markupsafe import Markup, escape

from slurmtools.reports import charts
from slurmtools.reports.metrics import WASTE_UTIL_PCT, Report

FORMATS = ("html", "csv", "md", "json")


def _num(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        return f"{v:,.1f}" if abs(v) < 1e6 else f"{v:,.0f}"
    return str(v)


def _cell(v) -> str:
    if isinstance(v, (pd.Timestamp, datetime)):
        return str(v)
    if isinstance(v, (float, np.floating)) and (math.isnan(v)):
        return "n/a"
    return _num(v) if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) else str(v)


def html_table(df: pd.DataFrame, index_name: str | None) -> Markup:
    if df is None or len(df) == 0:
        return Markup("<p>none</p>")
    parts = ["<table><thead><tr>"]
    if index_name is not None:
        parts.append(f"<th>{escape(index_name)}</th>")
    parts += [f"<th>{escape(str(c).replace('_', ' '))}</th>" for c in df.columns]
    parts.append("</tr></thead><tbody>")
    for idx, row in zip(df.index, df.itertuples(index=False)):
        parts.append("<tr>")
        if index_name is not None:
            parts.append(f'<td class="t">{escape(_cell(idx))}</td>')
        for v in row:
            cls = ' class="t"' if isinstance(v, str) else ""
            parts.append(f"<td{cls}>{escape(_cell(v))}</td>")
        parts.append("</tr>")
    parts.append("</tbody></table>")
    return Markup("".join(parts))


def render_html(r: Report, top: int = 10) -> str:
    import jinja2

    from slurmtools import __version__

    env = jinja2.Environment(loader=jinja2.PackageLoader("slurmtools.reports", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    tl = r.timeline
    tiers = [c for c in tl.columns if c != "capacity_gpu_hours"]
    fmt = "%m-%d %H:%M" if len(tl) > 1 and (tl.index[1] - tl.index[0]) < pd.Timedelta(days=1) else "%Y-%m-%d"
    labels = [d.strftime(fmt) for d in tl.index]
    timeline = charts.stacked_bars("GPU-hours allocated per period by tier (dashed: available capacity)", labels,
                                   {t: tl[t].tolist() for t in tiers},
                                   tl["capacity_gpu_hours"].tolist() if "capacity_gpu_hours" in tl else None,
                                   "capacity", unit=" GPU-h")
    wh = r.wait_hist
    wait = charts.grouped_bars("Queue wait: runs started per wait-time bin and tier", [str(x) for x in wh.index],
                               {str(c): wh[c].tolist() for c in wh.columns})
    bt = r.tables
    users = charts.hbars(f"Top {top} users (GPU-hours)",
                         [(str(k), float(v)) for k, v in bt["by_user"]["gpu_hours"].head(top).items()])
    accounts = charts.hbars(f"Top {top} accounts (GPU-hours)",
                            [(str(k), float(v)) for k, v in bt["by_account"]["gpu_hours"].head(top).items()],
                            color=charts.PALETTE[2])
    waste = charts.hbars(f"Top {top} users by idle GPU-hours allocated",
                         [(str(k), float(v)) for k, v in bt["waste_by_user"]["idle_gpu_hours"].head(top).items()],
                         color=charts.PALETTE[3])
    s = r.summary
    cur = r.currency
    return env.get_template("report.html.j2").render(
        r=r, s=s, t=bt, top=top, waste_pct=WASTE_UTIL_PCT, since=str(pd.Timestamp(r.since)),
        until=str(pd.Timestamp(r.until)), version=__version__,
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        charts={"timeline": timeline, "wait": wait, "users": users, "accounts": accounts, "waste": waste},
        table=html_table, num=_num,
        pct=lambda v: "n/a" if v is None else f"{v:.1f}%",
        money=lambda v: f"{v:,.0f} {cur}" if v is not None else "n/a",
        mins=lambda v: "n/a" if v is None else (f"{v:.0f} min" if v < 120 else f"{v / 60:.1f} h"))


def _md(v) -> str:
    s = _cell(v)
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("`", "'"), ("\n", " ")):
        s = s.replace(a, b)
    return s


def render_md(r: Report, top: int = 5) -> str:
    """A summary short enough for an e-mail or a chat post."""
    s = r.summary
    pct = "n/a" if s["utilization_pct"] is None else f"{s['utilization_pct']:.1f}%"
    lines = [f"**GPU report {_md(r.cluster)}: {pd.Timestamp(r.since)} to {pd.Timestamp(r.until)}**", "",
             f"- Utilization {pct}: {_num(s['gpu_hours'])} of {_num(s['available_gpu_hours'])} available GPU-hours; "
             f"idle capacity {_num(s['idle_capacity_gpu_hours'])} GPU-h",
             f"- Cost {_num(s['cost'])} {_md(r.currency)}; {s['jobs']:,} jobs, {s['users']} users, "
             f"{s['failed_runs']} failed runs",
             f"- Queue wait median {_num(s['median_wait_min'])} min, p90 {_num(s['p90_wait_min'])} min",
             f"- Preempted runs {s['preempted_runs']}, requeued {s['requeued_runs']}, "
             f"{_num(s['gpu_hours_lost_to_preemption'])} GPU-h lost"
             + (" (upper bound: last checkpoint unknown for some runs)" if s.get("gpu_hours_lost_is_upper_bound")
                else " since the last checkpoint" if s.get("lost_runs_with_checkpoint_time") else ""),
             f"- Allocated but idle: {_num(s['idle_gpu_hours_allocated'])} of "
             f"{_num(s['gpu_hours_with_utilization'])} measured GPU-h", ""]
    bt = r.tables
    lines += ["| tier | GPU-h | share | median wait (min) |", "| --- | ---: | ---: | ---: |"]
    wt = bt["wait_by_tier"]
    for tier, row in bt["by_tier"].iterrows():
        med = wt["median_wait_min"].get(tier, float("nan")) if len(wt) else float("nan")
        lines.append(f"| {_md(tier)} | {_num(row['gpu_hours'])} | {_num(row['share_of_use_pct'])}% | {_num(med)} |")
    lines += ["", f"Top {top} users: " + ", ".join(f"{_md(u)} ({_num(v)})" for u, v in
                                                   bt["by_user"]["gpu_hours"].head(top).items())]
    b = bt["budget"]
    if len(b):
        hot = b[b["status"].isin(["over", "on track to exceed"])]
        if len(hot):
            lines.append("Budgets: " + ", ".join(f"{_md(a)} {row['status']} ({_num(row['budget_used_pct'])}%)"
                                                 for a, row in hot.iterrows()))
    nv = bt.get("usage_by_nvlink_domain")
    if nv is not None and len(nv):
        worst = nv.sort_values(["idle_gpu_hours", "gpus"], ascending=[False, False]).head(3)
        lines.append("Most idle NVLink domains: " + ", ".join(
            f"{_md(d)} ({_num(row['idle_gpu_hours'])} GPU-h idle, {_num(row['utilization_pct'])}% used)"
            for d, row in worst.iterrows()))
    for f in r.forecasts:
        if f.horizon_days == 7:
            err = "untested" if f.wape_pct is None else f"±{f.wape_pct:.0f}%"
            lines.append(f"Forecast {_md(f.series)} next 7 days: {_num(f.total)} GPU-h ({err}, {f.method})")
    return "\n".join(lines) + "\n"


def _jsonable(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return None if math.isnan(v) or math.isinf(v) else float(v)
    if isinstance(v, (pd.Timestamp, datetime)):
        return str(v)
    return v


def to_json(r: Report) -> dict:
    tables = {}
    for name, df in r.tables.items():
        d = df.reset_index() if df.index.name or not isinstance(df.index, pd.RangeIndex) else df
        tables[name] = [{str(k): _jsonable(v) for k, v in rec.items()} for rec in d.to_dict(orient="records")]
    tl = r.timeline.reset_index()
    return {"site": r.site, "cluster": r.cluster, "currency": r.currency, "since": str(pd.Timestamp(r.since)),
            "until": str(pd.Timestamp(r.until)), "summary": {k: _jsonable(v) for k, v in r.summary.items()},
            "notes": r.notes, "tables": tables,
            "timeline": [{str(k): _jsonable(v) for k, v in rec.items()} for rec in tl.to_dict(orient="records")]}


def write(r: Report, out: Path, formats: tuple[str, ...], top: int = 10) -> list[Path]:
    """Write the chosen formats into `out` (created); return the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if "html" in formats:
        p = out / "report.html"
        p.write_text(render_html(r, top))
        written.append(p)
    if "md" in formats:
        p = out / "summary.md"
        p.write_text(render_md(r))
        written.append(p)
    if "json" in formats:
        p = out / "report.json"
        p.write_text(json.dumps(to_json(r), indent=1))
        written.append(p)
    if "csv" in formats:
        pd.DataFrame([{k: _jsonable(v) for k, v in r.summary.items()}]).to_csv(out / "summary.csv", index=False)
        written.append(out / "summary.csv")
        for name, df in list(r.tables.items()) + [("timeline", r.timeline)]:
            p = out / f"{name}.csv"
            keep_index = not isinstance(df.index, pd.RangeIndex)
            df.to_csv(p, index=keep_index)
            written.append(p)
    return written
