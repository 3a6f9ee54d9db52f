"""A replay's results as a terminal table and as report files (HTML with charts, CSV, JSON, Markdown)."""

from __future__ import annotations

from pathlib import Path


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
        for n in r.notes:
            lines.append(f"note ({label}): {n}")
    return "\n".join(lines)


def write(results: dict, trace, out: Path, formats: tuple[str, ...]) -> list[Path]:
    import json

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    if "json" in formats:
        p = out / "sandbox.json"
        p.write_text(json.dumps({k: v.to_json() for k, v in results.items()}, indent=2, default=str))
        paths.append(p)
    return paths
