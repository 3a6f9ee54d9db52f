"""A replay's results as a terminal table and as report files (HTML with charts, CSV, JSON, Markdown).

Rendering only: every figure was computed in `outcome`. Each result is one label ("baseline", "candidate"); with
two, every figure per group (everything, each tier, each account) is shown side by side with the change
(candidate - baseline). Account and tier names are user data: the HTML page is rendered with Jinja2's autoescape
and its charts escape their labels (`reports.charts`), Markdown cells have `|`, `<`, `>`, `&` and backticks
neutralised, and every CSV goes through `reports.csvsafe`, so no cell is a spreadsheet formula.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from datetime import datetime, timezone
from pathlib import Path

from slurmtools.errors import ConfigError

FORMATS = ("html", "csv", "json", "md")

#: the figures compared per group: (Summary field, human name, kind); kind says how it reads and how its change
#: reads: "h" hours to two decimals, "n" a count, "frac" a fraction shown as a percentage (change in points)
FIGURES = (("wait_median_h", "Wait p50 (h)", "h"), ("wait_p90_h", "Wait p90 (h)", "h"),
           ("wait_max_h", "Wait max (h)", "h"), ("preemptions", "Preemptions", "n"),
           ("gpu_hours_lost", "GPU-hours lost", "h"), ("refused", "Refused", "n"),
           ("never_started", "Never started", "n"), ("utilisation", "Utilisation", "frac"),
           ("leaves_per_multinode_job", "Leaf switches per multi-node job", "x"),
           ("allreduce_gbs", "Allreduce GB/s per GPU (est.)", "x"))
#: figures where a rise is better (the planner-worth comparison's bandwidth)
HIGHER_BETTER = frozenset({"allreduce_gbs"})
#: figures whose change is neither better nor worse: more GPUs for the same work lower utilisation, which is the
#: point of a purchase (for every other figure a rise is worse)
UNTONED = frozenset({"utilisation"})
#: at most this many jobs that did not finish (refused, never started, unfinished) listed per label on the HTML page
#: and in the text (the CSV has them all)
MAX_JOBS_LISTED = 50


def _h(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def text_table(results: dict, trace) -> str:
    labels = list(results)
    lines = []
    for label, r in results.items():
        lines.append(f"{label}: {r.site} ({r.nodes} nodes, {r.gpus} GPUs), Slurm {r.release}, speed-up {r.speedup:g}, "
                     f"replayed {r.span_h:.2f} h in {r.wall_s:.0f} s")
    lines.append(f"{len(trace.jobs)} jobs from {trace.source}")
    head = f"{'group':18} " + " ".join(f"{lab + ' ' + k:>22}" for k in ("wait p50 h", "wait p90 h", "wait max h")
                                        for lab in labels)
    lines.append(head)
    groups = [("all", {lab: results[lab].overall for lab in labels})]
    for attr, prefix in (("by_tier", "tier "), ("by_account", "account ")):
        names = sorted({s.group for lab in labels for s in getattr(results[lab], attr)})
        for n in names:
            groups.append((prefix + n, {lab: next((s for s in getattr(results[lab], attr) if s.group == n), None)
                                        for lab in labels}))
    for name, per in groups:
        cells = []
        for k in ("wait_median_h", "wait_p90_h", "wait_max_h"):
            for lab in labels:
                cells.append(f"{_h(getattr(per[lab], k) if per[lab] else None):>22}")
        lines.append(f"{name:18} " + " ".join(cells))
    lines.append("")
    for label, r in results.items():
        o = r.overall
        lines.append(f"{label}: utilisation {_h(o.utilisation)}, {o.preemptions} preemptions, "
                     f"{o.gpu_hours_lost:.2f} GPU-h lost to preemption, {o.refused} refused, "
                     f"{o.never_started} never started, {o.finished} of {o.jobs} finished")
    for label, r in results.items():
        unfinished = [j for j in r.jobs if j.status == "unfinished"]
        for j in unfinished[:MAX_JOBS_LISTED]:
            lines.append(f"{label}: job {j.key} ({j.tier}, {j.gpus} GPUs) did not finish: {j.why}")
        if len(unfinished) > MAX_JOBS_LISTED:
            lines.append(f"{label}: {len(unfinished) - MAX_JOBS_LISTED} more did not finish (see the CSV)")
    for label, r in results.items():
        o = r.overall
        if o.multinode_jobs:
            lines.append(f"{label}: {o.multinode_jobs} multi-node jobs, {_h(o.leaves_per_multinode_job)} leaf "
                         f"switches each, estimated allreduce {_h(o.allreduce_gbs)} GB/s per GPU (mean)")
    head, rows = _spread_table(results)
    if rows:
        n = 1 + len(results[labels_of(results)[0]].repeats)
        lines.append(f"spread over {n} replays of each (lead-ins {_lead_ins(results)}): lowest to highest")
        widths = [max(len(str(c)) for c in col) for col in zip(head, *rows)]
        for cells in [head, *rows]:
            lines.append("  " + "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip())
    for label, r in results.items():
        for n in r.notes:
            lines.append(f"note ({label}): {n}")
    return "\n".join(lines)


# ---- the figures, shared by every format -------------------------------------------------------------------


def labels_of(results: dict) -> list[str]:
    """The labels in column order: the baseline first, so the change is always later - earlier."""
    return sorted(results, key=lambda lab: (lab != "baseline", list(results).index(lab)))


def groups(results: dict) -> list[tuple[str, str, dict]]:
    """(scope, group, {label: Summary or None}) for everything, each tier, then each account; a group only one
    replay has (a tier the candidate adds) is None for the other."""
    labels = labels_of(results)
    out = [("all", "all", {lab: results[lab].overall for lab in labels})]
    for attr, scope in (("by_tier", "tier"), ("by_account", "account")):
        names = sorted({s.group for lab in labels for s in getattr(results[lab], attr)})
        for n in names:
            out.append((scope, n, {lab: next((s for s in getattr(results[lab], attr) if s.group == n), None)
                                   for lab in labels}))
    return out


def change(before, after):
    """after - before, None when either is unknown."""
    return None if before is None or after is None else after - before


def comparison(results: dict) -> list[dict]:
    """One row per group and figure with each label's value and the change; empty for a single result."""
    labels = labels_of(results)
    if len(labels) != 2:
        return []
    a, b = labels
    rows = []
    for scope, group, per in groups(results):
        for f, _, _ in FIGURES:
            va = getattr(per[a], f) if per[a] else None
            vb = getattr(per[b], f) if per[b] else None
            rows.append({"scope": scope, "group": group, "figure": f, a: va, b: vb, "change": change(va, vb)})
    return rows


def spread(results: dict) -> list[dict]:
    """Per label, group and figure, the lowest and highest value over the first replay and its repeats
    (`--repeat`): the scheduler's own spread for that timing of the history. Empty without repeats. With two
    labels, `apart` says whether their ranges do not overlap (a change larger than either spread)."""
    labels = labels_of(results)
    if not any(results[lab].repeats for lab in labels):
        return []
    runs = {lab: [(results[lab].overall, results[lab].by_tier, results[lab].by_account)]
            + [(r.overall, r.by_tier, r.by_account) for r in results[lab].repeats] for lab in labels}

    def of(run, scope: str, group: str):
        overall, tiers, accounts = run
        if scope == "all":
            return overall
        return next((s for s in (tiers if scope == "tier" else accounts) if s.group == group), None)

    rows = []
    for scope, group, _ in groups(results):
        for f, _, _ in FIGURES:
            row: dict = {"scope": scope, "group": group, "figure": f}
            ranges = []
            for lab in labels:
                vals = [getattr(x, f) for x in (of(run, scope, group) for run in runs[lab]) if x is not None]
                vals = [v for v in vals if v is not None]
                lo, hi = (min(vals), max(vals)) if vals else (None, None)
                row[f"{lab}_min"], row[f"{lab}_max"], row[f"{lab}_runs"] = lo, hi, len(vals)
                ranges.append((lo, hi))
            if len(labels) == 2:
                (a_lo, a_hi), (b_lo, b_hi) = ranges
                row["apart"] = None if None in (a_lo, b_lo) else (a_hi < b_lo or b_hi < a_lo)
            rows.append(row)
    return rows


def _range(kind: str, lo, hi) -> str:
    if lo is None:
        return "n/a"
    return _value(kind, lo) if lo == hi else f"{_value(kind, lo)} to {_value(kind, hi)}"


def _lead_ins(results: dict) -> str:
    r = results[labels_of(results)[0]]
    leads = [r.lead_in_s] + [x.lead_in_s for x in r.repeats]
    return ", ".join(f"{x:g}" for x in leads if x is not None) + " s"


def _spread_table(results: dict) -> tuple[list[str], list[list[str]]]:
    """Head and rows of the spread, figures with a value only, for the text, Markdown and HTML reports."""
    labels = labels_of(results)
    kinds = {f: kind for f, _, kind in FIGURES}
    names = {f: name for f, name, _ in FIGURES}
    head = ["Group", "Figure", *labels] + (["Ranges apart"] if len(labels) == 2 else [])
    rows = []
    for row in spread(results):
        if all(row[f"{lab}_min"] is None for lab in labels):
            continue
        cells = [_group_name(row["scope"], row["group"]), names[row["figure"]]]
        cells += [_range(kinds[row["figure"]], row[f"{lab}_min"], row[f"{lab}_max"]) for lab in labels]
        if len(labels) == 2:
            cells.append({True: "yes", False: "no", None: "n/a"}[row["apart"]])
        rows.append(cells)
    return head, rows


def _value(kind: str, v) -> str:
    if v is None:
        return "n/a"
    if kind == "n":
        return f"{int(v):,}"
    if kind == "frac":
        return f"{v * 100:.1f}%"
    return f"{v:,.2f}"


def _delta(kind: str, d) -> str:
    if d is None:
        return "n/a"
    if kind == "n":
        return f"{int(d):+,}"
    if kind == "frac":
        d = round(d * 100, 1)
        return f"{d + 0.0:+.1f} pts"  # + 0.0: no "-0.0"
    return f"{round(d, 2) + 0.0:+,.2f}"


def _tone(f: str, d) -> str:
    """"better", "worse" or "" for a change of figure `f`."""
    if d is None or abs(d) < 1e-9 or f in UNTONED:
        return ""
    if f in HIGHER_BETTER:
        return "better" if d > 0 else "worse"
    return "worse" if d > 0 else "better"


def _group_name(scope: str, group: str) -> str:
    return group if scope == "all" else f"{scope} {group}"


def _facts(results: dict) -> list[tuple[str, list[str]]]:
    """The run facts, one row per fact and a value per label."""
    rs = [results[lab] for lab in labels_of(results)]
    return [("Site file", [r.site for r in rs]), ("Nodes", [f"{r.nodes:,}" for r in rs]),
            ("GPUs", [f"{r.gpus:,}" for r in rs]), ("Slurm", [r.release for r in rs]),
            ("Speed-up", [f"{r.speedup:g}x" for r in rs]), ("Replayed span", [f"{r.span_h:.2f} h" for r in rs]),
            ("Wall time", [f"{r.wall_s:.0f} s" for r in rs]),
            ("Jobs finished", [f"{r.overall.finished:,} of {r.overall.jobs:,}" for r in rs]),
            ("GPU-hours held", [f"{r.overall.gpu_hours:,.2f}" for r in rs])]


def _notes(results: dict) -> list[tuple[str | None, str]]:
    """(label or None, note): a note every replay has (the trace's) once, with no label."""
    labels = labels_of(results)
    out, seen = [], set()
    for lab in labels:
        for n in results[lab].notes:
            common = all(n in results[o].notes for o in labels)
            key = (None if common else lab, n)
            if key not in seen:
                seen.add(key)
                out.append(key)
    return out


def _trace_line(trace, results: dict) -> str:
    if trace is None:
        return f"{max(r.overall.jobs for r in results.values()):,} jobs"
    return f"{len(trace.jobs):,} jobs from {trace.source}"


# ---- Markdown ------------------------------------------------------------------------------------------------


def _md(s) -> str:
    s = str(s)
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("`", "'"), ("\n", " ")):
        s = s.replace(a, b)
    return s


def _md_table(head: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    lines = ["| " + " | ".join(_md(h) for h in head) + " |",
             "| " + " | ".join("---" if i < left else "---:" for i in range(len(head))) + " |"]
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return lines + [""]


def render_md(results: dict, trace) -> str:
    labels = labels_of(results)
    two = len(labels) == 2
    title = f"{labels[1]} vs {labels[0]}" if two else labels[0]
    lines = [f"# Capacity sandbox: {_md(title)}", "", _md(_trace_line(trace, results)), "", "## Runs", ""]
    lines += _md_table(["", *labels], [[name, *vals] for name, vals in _facts(results)], left=len(labels) + 1)
    gs = groups(results)
    if two:
        a, b = labels
        lines.append(f"Change = {_md(b)} - {_md(a)}; utilisation change in percentage points.")
        lines.append("")
        for f, name, kind in FIGURES:
            rows = []
            for scope, group, per in gs:
                va = getattr(per[a], f) if per[a] else None
                vb = getattr(per[b], f) if per[b] else None
                rows.append([_group_name(scope, group), _value(kind, va), _value(kind, vb),
                             _delta(kind, change(va, vb))])
            lines += [f"## {name}", ""] + _md_table(["Group", a, b, "Change"], rows)
    else:
        (lab,) = labels
        rows = [[_group_name(scope, group)] + [_value(kind, getattr(per[lab], f)) for f, _, kind in FIGURES]
                for scope, group, per in gs]
        lines += ["## Per group", ""] + _md_table(["Group"] + [name for _, name, _ in FIGURES], rows)
    head, rows = _spread_table(results)
    if rows:
        lines += ["## Spread over repeated replays", "",
                  _md(f"Each replay run {1 + len(results[labels[0]].repeats)} times, the first submission "
                      f"{_lead_ins(results)} after its lab came up: the lowest to the highest value of each figure "
                      "(the scheduler's own spread for that history)."), ""]
        lines += _md_table(head, rows, left=2)
    notes = _notes(results)
    if notes:
        lines += ["## Notes", ""]
        lines += [f"- {'' if lab is None else f'({_md(lab)}) '}{_md(n)}" for lab, n in notes]
        lines.append("")
    return "\n".join(lines)


# ---- HTML ----------------------------------------------------------------------------------------------------


def _charts(results: dict) -> dict:
    from slurmtools.reports import charts

    labels = labels_of(results)
    tiers = [(scope, g, per) for scope, g, per in groups(results) if scope in ("all", "tier")]
    names = [g for _, g, _ in tiers]

    def series(f: str, suffix: str = "") -> dict[str, list]:
        return {f"{lab}{suffix}": [getattr(per[lab], f) if per[lab] else None for _, _, per in tiers]
                for lab in labels}

    wait = {**series("wait_median_h", " p50"), **series("wait_p90_h", " p90")}
    wait = {k: wait[k] for k in [f"{lab} {q}" for q in ("p50", "p90") for lab in labels]}
    admission = {**series("refused", " refused"), **series("never_started", " never started")}
    return {
        "wait": charts.grouped_bars("sandbox-wait", "Queue wait p50 and p90 per tier (hours)", names, wait,
                                    count_axis=False, ylabel="hours"),
        "lost": charts.grouped_bars("sandbox-lost", "GPU-hours lost to preemption per tier", names,
                                    series("gpu_hours_lost"), count_axis=False, ylabel="GPU-hours"),
        "admission": charts.grouped_bars("sandbox-admission", "Jobs refused and never started per tier", names,
                                         admission, count_axis=True, ylabel="jobs"),
    }


def _html_tables(results: dict) -> list[dict]:
    labels = labels_of(results)
    two = len(labels) == 2
    out = []
    for title, scopes in (("Everything and per tier", ("all", "tier")), ("Per account", ("account",))):
        rows = []
        for scope, group, per in groups(results):
            if scope not in scopes:
                continue
            cells = []
            for f, _, kind in FIGURES:
                vs = [getattr(per[lab], f) if per[lab] else None for lab in labels]
                cells += [(_value(kind, v), "") for v in vs]
                if two:
                    d = change(*vs)
                    cells.append((_delta(kind, d), f"change {_tone(f, d)}".strip()))
            rows.append({"group": _group_name(scope, group), "cells": cells})
        out.append({"title": title, "rows": rows})
    return out


def _kpis(results: dict) -> list[dict]:
    labels = labels_of(results)
    last = labels[-1]
    out = []
    for f, name, kind in FIGURES:
        v = getattr(results[last].overall, f)
        k = {"name": name, "value": _value(kind, v), "change": None, "tone": ""}
        if len(labels) == 2:
            d = change(getattr(results[labels[0]].overall, f), v)
            k.update(change=f"{_delta(kind, d)} vs {labels[0]}", tone=_tone(f, d))
        out.append(k)
    return out


def render_html(results: dict, trace) -> str:
    import jinja2

    from slurmtools import __version__

    labels = labels_of(results)
    env = jinja2.Environment(loader=jinja2.PackageLoader("slurmtools.reports", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    unstarted = [{"label": lab, "key": j.key, "tier": j.tier, "account": j.account, "gpus": j.gpus,
                  "status": j.status.replace("_", " "), "why": j.why}
                 for lab in labels
                 for j in [j for j in results[lab].jobs if j.status != "finished"][:MAX_JOBS_LISTED]]
    return env.get_template("sandbox.html.j2").render(
        labels=labels, two=len(labels) == 2, trace_line=_trace_line(trace, results), facts=_facts(results),
        kpis=_kpis(results), figures=FIGURES, tables=_html_tables(results), charts=_charts(results),
        spread=_spread_table(results), lead_ins=_lead_ins(results),
        repeats=1 + len(results[labels[0]].repeats),
        notes=_notes(results), unstarted=unstarted, max_listed=MAX_JOBS_LISTED, version=__version__,
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


# ---- data formats --------------------------------------------------------------------------------------------


def to_json(results: dict, trace) -> dict:
    doc = {lab: results[lab].to_json() for lab in labels_of(results)}
    doc["comparison"] = comparison(results)
    doc["spread"] = spread(results)
    if trace is not None:
        doc["trace"] = {"source": trace.source, "jobs": len(trace.jobs), "notes": list(trace.notes)}
    return doc


def write_csvs(results: dict, out: Path) -> list[Path]:
    import pandas as pd

    from slurmtools.reports.csvsafe import write_csv
    from slurmtools.sandbox.outcome import JobOutcome, Summary

    labels = labels_of(results)
    runs = [{"label": lab, "site": r.site, "release": r.release, "speedup": r.speedup, "nodes": r.nodes,
             "gpus": r.gpus, "span_h": r.span_h, "wall_s": r.wall_s, "notes": "; ".join(r.notes)}
            for lab in labels for r in [results[lab]]]
    sfields = [f.name for f in fields(Summary)]
    summary = [{"label": lab, "scope": scope, **asdict(per[lab])}
               for scope, _, per in groups(results) for lab in labels if per[lab] is not None]
    jfields = [f.name for f in fields(JobOutcome)]
    jobs = [{"label": lab, **asdict(j), "lost_gpu_h": j.lost_gpu_h} for lab in labels for j in results[lab].jobs]
    written = [
        write_csv(pd.DataFrame(runs, columns=["label", "site", "release", "speedup", "nodes", "gpus", "span_h",
                                              "wall_s", "notes"]), out / "sandbox_runs.csv"),
        write_csv(pd.DataFrame(summary, columns=["label", "scope", *sfields]), out / "sandbox_summary.csv"),
        write_csv(pd.DataFrame(jobs, columns=["label", *jfields, "lost_gpu_h"]).astype(
            {"leaf_switches": "Int64"}), out / "sandbox_jobs.csv"),
    ]
    rows = spread(results)
    if rows:
        cols = ["scope", "group", "figure"] + [f"{lab}_{k}" for lab in labels for k in ("min", "max", "runs")]
        written.append(write_csv(pd.DataFrame(rows, columns=cols + (["apart"] if len(labels) == 2 else [])),
                                 out / "sandbox_spread.csv"))
    if len(labels) == 2:
        # long form: a figure's values share a column, so counts read as 1.0 here (sandbox_summary.csv has them
        # as whole numbers)
        written.append(write_csv(pd.DataFrame(comparison(results),
                                              columns=["scope", "group", "figure", *labels, "change"]),
                                 out / "sandbox_comparison.csv"))
    return written


def check_formats(formats) -> tuple[str, ...]:
    """The formats asked for, or a one-line ConfigError naming --formats and the valid names."""
    formats = tuple(formats)
    bad = [f for f in formats if f not in FORMATS]
    valid = ", ".join(FORMATS)
    if bad:
        raise ConfigError("--formats", "", f"unknown format {', '.join(repr(b) for b in bad)} (valid: {valid})")
    if not formats:
        raise ConfigError("--formats", "", f"no format given (valid: {valid})")
    return formats


def write(results: dict, trace, out: Path, formats: tuple[str, ...]) -> list[Path]:
    """Write the chosen formats into `out` (created); return the files written. `results`: label -> ReplayResult
    (one, or "baseline" and "candidate"). The formats are checked before anything is written."""
    formats = check_formats(formats)
    if not results:
        raise ValueError("no replay result to report")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    if "html" in formats:
        p = out / "sandbox.html"
        p.write_text(render_html(results, trace))
        paths.append(p)
    if "md" in formats:
        p = out / "sandbox.md"
        p.write_text(render_md(results, trace))
        paths.append(p)
    if "json" in formats:
        p = out / "sandbox.json"
        p.write_text(json.dumps(to_json(results, trace), indent=2, default=str))
        paths.append(p)
    if "csv" in formats:
        paths += write_csvs(results, out)
    return paths
