"""A computed `Report` -> files: one HTML page, a CSV per table, a short Markdown summary, one JSON document.

Rendering only: every number here was computed in `metrics`. User-supplied strings are escaped in HTML by
Jinja2's autoescape and by `markupsafe.escape` in the table and chart helpers; Markdown cells have `|`, `<`,
`>`, `&` and backticks neutralised so a job name cannot break a table or smuggle markup into a chat post; every
CSV goes through `csvsafe.write_csv`, so no cell is a spreadsheet formula. Every format says how many input rows
were skipped as bad, and `bad_rows.csv` (always written) lists them.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
from markupsafe import Markup, escape

from slurmtools.reports import charts, fmt
from slurmtools.reports.badrows import FILE_NAME as BAD_ROWS_FILE
from slurmtools.reports.badrows import BadRows
from slurmtools.reports.csvsafe import write_csv
from slurmtools.reports.energy import IDLE_GPU_UTIL_PCT
from slurmtools.reports.metrics import CAPACITY_NOTE, CPU_ONLY_NOTE, WASTE_UTIL_PCT, Report

FORMATS = ("html", "csv", "md", "json")


def html_table(df: pd.DataFrame, index_name: str | None, currency: str = "") -> Markup:
    """A table with human headers (`fmt.header`) and cells formatted by `fmt.cell`, every string escaped."""
    if df is None or len(df) == 0:
        return Markup("<p>none</p>")
    parts = ["<table><thead><tr>"]
    if index_name is not None:
        parts.append(f"<th>{escape(fmt.header(index_name, currency))}</th>")
    parts += [f"<th>{escape(fmt.header(str(c), currency))}</th>" for c in df.columns]
    parts.append("</tr></thead><tbody>")
    cols = [str(c) for c in df.columns]
    for idx, row in zip(df.index, df.itertuples(index=False)):
        parts.append("<tr>")
        if index_name is not None:
            parts.append(f'<td class="t">{escape(fmt.cell(index_name, idx))}</td>')
        for c, v in zip(cols, row):
            cls = ' class="t"' if isinstance(v, str) else ""
            parts.append(f"<td{cls}>{escape(fmt.cell(c, v))}</td>")
        parts.append("</tr>")
    parts.append("</tbody></table>")
    return Markup("".join(parts))


def _bucket_label(step: pd.Timedelta, multi_day: bool) -> tuple[str, str]:
    """(strftime format for a bucket's start, the bucket's name in the chart's title)."""
    if step >= pd.Timedelta(days=1):
        return "%Y-%m-%d", "week" if step >= pd.Timedelta(days=7) and step < pd.Timedelta(days=28) else \
            "day" if step < pd.Timedelta(days=7) else "period"
    secs = int(step.total_seconds())
    name = {1: "second", 60: "minute", 300: "5 minutes", 900: "15 minutes", 3600: "hour"}.get(
        secs, f"{secs} s" if secs < 60 else f"{secs / 3600:g} h")
    return ("%m-%d %H:%M" if multi_day else "%H:%M:%S" if secs < 60 else "%H:%M"), name


def timeline_chart(r: Report) -> Markup:
    """Mean GPUs allocated per bucket, stacked by tier, against the GPUs available (dashed)."""
    tl = r.timeline
    tiers = [c for c in tl.columns if c != "capacity_gpu_hours"]
    starts = list(tl.index)
    ends = starts[1:] + [pd.Timestamp(r.until)]
    hours = [max((b - a).total_seconds() / 3600.0, 1e-9) for a, b in zip(starts, ends)]
    if r.zone is not None and not r.zone.fixed and starts:
        # a bucket over a clock change is an hour longer or shorter than its local times say
        at = np.append(r.zone.instants(np.array([pd.Timestamp(t).value // 10**9 for t in starts], dtype=np.int64)),
                       r.zone.instant(r.until))
        hours = [max(float(b - a) / 3600.0, 1e-9) for a, b in zip(at[:-1], at[1:])]
    step = (ends[0] - starts[0]) if starts else pd.Timedelta(days=1)
    multi_day = bool(starts) and (pd.Timestamp(r.until) - starts[0]) > pd.Timedelta(days=1)
    tf, per = _bucket_label(step, multi_day)
    labels = [d.strftime(tf) for d in starts]
    cap = [v / h for v, h in zip(tl["capacity_gpu_hours"], hours)] if "capacity_gpu_hours" in tl else None
    return charts.stacked_bars("timeline", f"GPUs allocated by tier, mean per {per} (dashed: GPUs available)",
                               labels, {t: [v / h for v, h in zip(tl[t], hours)] for t in tiers}, cap,
                               "available", ylabel="GPUs")


def render_html(r: Report, top: int = 10) -> str:
    import jinja2

    from slurmtools import __version__

    env = jinja2.Environment(loader=jinja2.PackageLoader("slurmtools.reports", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    wh = r.wait_hist
    wait = charts.grouped_bars("wait", "Queue wait: runs started per wait-time bin and tier",
                               [str(x) for x in wh.index], {str(c): wh[c].tolist() for c in wh.columns},
                               count_axis=True, ylabel="runs")
    bt = r.tables
    users = charts.hbars("users", f"Top {top} users (GPU-hours)",
                         [(str(k), float(v)) for k, v in bt["by_user"]["gpu_hours"].head(top).items()])
    accounts = charts.hbars("accounts", f"Top {top} accounts (GPU-hours)",
                            [(str(k), float(v)) for k, v in bt["by_account"]["gpu_hours"].head(top).items()],
                            color=charts.PALETTE[2])
    waste = charts.hbars("waste", f"Top {top} users by idle GPU-hours allocated",
                         [(str(k), float(v)) for k, v in bt["waste_by_user"]["idle_gpu_hours"].head(top).items()],
                         color=charts.PALETTE[3])
    s = r.summary
    cur = r.currency
    return env.get_template("report.html.j2").render(
        r=r, s=s, t=bt, top=top, waste_pct=WASTE_UTIL_PCT, since=str(pd.Timestamp(r.since)),
        until=str(pd.Timestamp(r.until)), version=__version__,
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        charts={"timeline": timeline_chart(r), "wait": wait, "users": users, "accounts": accounts, "waste": waste},
        table=lambda df, index_name: html_table(df, index_name, cur), num=fmt.num, count=fmt.count,
        pct=fmt.pct, money=lambda v: fmt.money(v, cur), mins=fmt.minutes, kwh=fmt.kwh, idle_pct=IDLE_GPU_UTIL_PCT,
        free_tiers=", ".join(r.uncharged_tiers))


def _md(v) -> str:
    s = fmt.num(v) if not isinstance(v, str) else v
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("`", "'"), ("\n", " ")):
        s = s.replace(a, b)
    return s


def _unpriced(s: dict) -> str:
    """What the cost leaves out: GPU-hours of types the site file gives no price (not costed at 0 as if free)."""
    gh = s.get("unpriced_gpu_hours") or 0.0
    return f", without {fmt.num(gh)} GPU-hours of GPU types the site file gives no price" if gh > 0 else ""


def render_md(r: Report, top: int = 5) -> str:
    """A summary short enough for an e-mail or a chat post."""
    s = r.summary
    lines = [f"**GPU report {_md(r.cluster)}: {pd.Timestamp(r.since)} to {pd.Timestamp(r.until)}**", "",
             f"- Utilization {fmt.pct(s['utilization_pct'])}: {fmt.num(s['gpu_hours'])} of "
             f"{fmt.num(s['available_gpu_hours'])} available GPU-hours; "
             f"idle capacity {fmt.num(s['idle_capacity_gpu_hours'])} GPU-hours",
             f"- Cost {_md(fmt.money(s['cost'], r.currency))}{_unpriced(s)}; {fmt.count(s['jobs'])} jobs, "
             f"{fmt.count(s['users'])} users, {fmt.count(s['failed_runs'])} failed runs",
             f"- Queue wait median {fmt.minutes(s['median_wait_min'])}, p90 {fmt.minutes(s['p90_wait_min'])}",
             f"- Preempted runs {fmt.count(s['preempted_runs'])}, requeued {fmt.count(s['requeued_runs'])}, "
             f"{fmt.num(s['gpu_hours_lost_to_preemption'])} GPU-hours lost"
             + (" (upper bound: last checkpoint unknown for some runs)" if s.get("gpu_hours_lost_is_upper_bound")
                else " since the last checkpoint" if s.get("lost_runs_with_checkpoint_time") else ""),
             f"- Allocated but idle: {fmt.num(s['idle_gpu_hours_allocated'])} of "
             f"{fmt.num(s['gpu_hours_with_utilization'])} measured GPU-hours",
             f"- Bad input rows skipped: {fmt.count(s['bad_rows'])} (listed in {s['bad_rows_file']})", ""]
    if s.get("energy_kwh") is not None:
        lines.insert(-1, f"- GPU energy {fmt.kwh(s['energy_kwh'])} kWh"
                     + (f" ({fmt.kwh(s['idle_energy_kwh'])} kWh on idle GPUs)" if s.get("idle_energy_kwh") is not None
                        else "")
                     + (f"; energy cost {_md(fmt.money(s['energy_cost'], r.currency))}"
                        if s.get("energy_cost") is not None else "")
                     + (f"; {fmt.kwh(s['co2e_kg'])} kg CO2e" if s.get("co2e_kg") is not None else "")
                     + (f"; unknown for {fmt.count(s['runs_energy_unknown'])} runs" if s.get("runs_energy_unknown")
                        else ""))
    lines += [f"- Note: {_md(n)}" for n in r.notes if n.startswith((CAPACITY_NOTE, CPU_ONLY_NOTE))]
    if lines[-1] != "":
        lines.append("")
    bt = r.tables
    heads = [fmt.header(c) for c in ("tier", "gpu_hours", "share_of_use_pct", "median_wait_min")]
    lines += ["| " + " | ".join(heads) + " |", "| --- | ---: | ---: | ---: |"]
    wt = bt["wait_by_tier"]
    for tier, row in bt["by_tier"].iterrows():
        med = wt["median_wait_min"].get(tier, float("nan")) if len(wt) else float("nan")
        lines.append(f"| {_md(tier)} | {fmt.num(row['gpu_hours'])} | {fmt.num(row['share_of_use_pct'])} | "
                     f"{fmt.num(med)} |")
    lines += ["", f"Top {top} users (GPU-hours): " + ", ".join(f"{_md(u)} ({fmt.num(v)})" for u, v in
                                                   bt["by_user"]["gpu_hours"].head(top).items())]
    b = bt["budget"]
    if len(b):
        hot = b[b["status"].isin(["over", "on track to exceed"])]
        if len(hot):
            lines.append("Budgets: " + ", ".join(f"{_md(a)} {row['status']} ({fmt.pct(row['budget_used_pct'])} charged)"
                                                 for a, row in hot.iterrows()))
    rs = bt.get("right_sizing")
    if rs is not None and len(rs):
        lines.append(f"Right-sizing: {fmt.count(len(rs))} job shape(s) used less than they asked; first: "
                     + _md(str(rs["recommendation"].iloc[0])))
    nv = bt.get("usage_by_nvlink_domain")
    if nv is not None and len(nv):
        worst = nv.sort_values(["idle_gpu_hours", "gpus"], ascending=[False, False]).head(3)
        lines.append("Most idle NVLink domains: " + ", ".join(
            f"{_md(d)} ({fmt.num(row['idle_gpu_hours'])} GPU-hours idle, {fmt.pct(row['utilization_pct'])} used)"
            for d, row in worst.iterrows()))
    for f in r.forecasts:
        if f.horizon_days == 7:
            err = "untested" if f.wape_pct is None else f"±{f.wape_pct:.0f}%"
            lines.append(f"Forecast {_md(f.series)} next 7 days: {fmt.num(f.total)} GPU-hours ({err}, {f.method})")
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
            "notes": r.notes, "tables": tables, "bad_rows": bad_rows_doc(r.bad_rows),
            "timeline": [{str(k): _jsonable(v) for k, v in rec.items()} for rec in tl.to_dict(orient="records")]}


def bad_rows_doc(inputs: list[BadRows]) -> dict:
    """The bad rows for the JSON document: the count, the file listing them, and each input's share."""
    return {"count": sum(len(b.rows) for b in inputs), "file": BAD_ROWS_FILE,
            "inputs": [{"source": b.source, "what": b.what, "total": b.total, "bad": len(b.rows)} for b in inputs],
            "rows": [{"source": x.source, "line": x.line, "reason": x.reason} for b in inputs for x in b.rows]}


def write_bad_rows(inputs: list[BadRows], out: Path) -> Path:
    """`bad_rows.csv` in `out`: source, line, reason and the row's text as read (made safe for spreadsheets like
    every CSV), header only when no row was bad."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [(x.source, x.line, x.reason, x.text) for b in inputs for x in b.rows]
    frame = pd.DataFrame(rows, columns=["source", "line", "reason", "text"]).astype({"line": "Int64"})
    return write_csv(frame, out / BAD_ROWS_FILE)


def write(r: Report, out: Path, formats: tuple[str, ...], top: int = 10) -> list[Path]:
    """Write the chosen formats into `out` (created), and `bad_rows.csv` whatever the formats; return the files
    written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [write_bad_rows(r.bad_rows, out)]
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
        written.append(write_csv(pd.DataFrame([{k: _jsonable(v) for k, v in r.summary.items()}]),
                                 out / "summary.csv"))
        for name, df in list(r.tables.items()) + [("timeline", r.timeline)]:
            written.append(write_csv(df, out / f"{name}.csv", index=not isinstance(df.index, pd.RangeIndex)))
    return written
