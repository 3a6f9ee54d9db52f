"""The HTML report's charts, written by hand as SVG and inlined in the page: no JavaScript, no CDN, readable
offline and in e-mail archives.

Hand-written rather than drawn by matplotlib: matplotlib cost about 1 s per report (its import and five
figures), which broke the nightly run's 2-second goal; these are plain string building, a few milliseconds.
Every string that can come from users (user, account, tier names) and every title passes through
`markupsafe.escape`, so it is text, never markup. No `<style>` (inlined, it would style the whole page), no
script, no external reference. Ids carry the chart's `name` (`<name>-bar-<n>`, `<name>-xtick-<n>`,
`<name>-ytick-<n>`, `<name>-capacity`) so several charts on one page never share an id.
"""

from __future__ import annotations

import math

from markupsafe import Markup, escape

from slurmtools.reports import fmt

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
#: at most this many x labels on a bar chart; more buckets get every k-th label, so labels never overlap
MAX_X_LABELS = 8
FONT = "system-ui, sans-serif"


def _text(label, width: int | None = None) -> Markup:
    """A user-supplied label as escaped text on one line, shortened to `width` characters."""
    s = str(label).replace("\n", " ")
    if width is not None and len(s) > width:
        s = s[:width - 1] + "…"
    return escape(s)


def _val(v) -> float:
    """A plotted value: missing or non-finite reads as nothing drawn."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return 0.0
    return f if math.isfinite(f) else 0.0


def nice_ticks(vmax: float, integer: bool = False, nbins: int = 5) -> list[float]:
    """Ticks 0, s, 2s, ... up to the first at or above `vmax`, with s = 1, 2 or 5 x 10^k (at least 1 on a count
    axis, so it never reads "0.5 runs"); at least two ticks, so an empty chart still has a scale."""
    if not math.isfinite(vmax) or vmax <= 0:
        vmax = 1.0
    raw = vmax / nbins
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw * (1 - 1e-9))
    if integer:
        step = max(1.0, float(round(step)))
    n = max(1, math.ceil(vmax / step - 1e-9))
    return [round(i * step, 10) for i in range(n + 1)]


def _tick(v: float) -> str:
    if abs(v) >= 10000:
        return f"{v / 1000:,.0f}k"
    if v == int(v):
        return f"{int(v):,}"
    return f"{v:,.3g}"


def thin(n: int, most: int = MAX_X_LABELS) -> int:
    """Label every k-th of `n` buckets so at most `most` labels show."""
    return max(1, math.ceil(n / most))


def _open(name: str, title: str, width: int, height: int, x: float) -> list[str]:
    t = escape(title)
    return [f'<svg class="chart" data-chart="{escape(name)}" role="img" aria-label="{t}" '
            f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'font-family="{FONT}">',
            f"<title>{t}</title>",
            f'<text x="{x}" y="18" font-size="14" font-weight="bold">{t}</text>']


def _y_axis(out: list[str], name: str, ticks: list[float], integer: bool, left: float, right: float,
            y_of, ylabel: str, top: float, bottom: float) -> None:
    """Horizontal grid lines with their tick labels, the axis line, and the axis name written upwards."""
    for i, v in enumerate(ticks):
        y = y_of(v)
        lab = fmt.count(v) if integer else _tick(v)
        out.append(f'<g id="{escape(name)}-ytick-{i}" class="ytick"><line x1="{left:.1f}" x2="{right:.1f}" '
                   f'y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/><text x="{left - 5:.1f}" y="{y + 3.5:.1f}" '
                   f'font-size="11" text-anchor="end">{lab}</text></g>')
    out.append(f'<line x1="{left:.1f}" x2="{left:.1f}" y1="{top:.1f}" y2="{bottom:.1f}" stroke="#333"/>')
    if ylabel:
        cy = (top + bottom) / 2
        out.append(f'<text x="14" y="{cy:.1f}" font-size="11" text-anchor="middle" '
                   f'transform="rotate(-90 14 {cy:.1f})">{_text(ylabel)}</text>')


def _x_labels(out: list[str], name: str, labels: list[str], left: float, slot: float, y0: float) -> None:
    """A tick and a label under every k-th bucket (`thin`), so many buckets stay readable."""
    step = thin(len(labels))
    for j, i in enumerate(range(0, len(labels), step)):
        x = left + (i + 0.5) * slot
        out.append(f'<g id="{escape(name)}-xtick-{j}" class="xtick"><line x1="{x:.1f}" x2="{x:.1f}" '
                   f'y1="{y0:.1f}" y2="{y0 + 4:.1f}" stroke="#333"/><text x="{x:.1f}" y="{y0 + 16:.1f}" '
                   f'font-size="11" text-anchor="middle">{_text(labels[i])}</text></g>')


def _legend(out: list[str], x: float, y: float, names: list[str], line_label: str | None) -> None:
    for si, sname in enumerate(names):
        yy = y + si * 17
        out.append(f'<rect x="{x:.1f}" y="{yy:.1f}" width="11" height="11" fill="{PALETTE[si % len(PALETTE)]}"/>'
                   f'<text x="{x + 16:.1f}" y="{yy + 9.5:.1f}" font-size="11">{_text(sname, 24)}</text>')
    if line_label is not None:
        yy = y + len(names) * 17 + 5.5
        out.append(f'<line x1="{x:.1f}" x2="{x + 12:.1f}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#000" '
                   f'stroke-width="1.5" stroke-dasharray="4 3"/>'
                   f'<text x="{x + 16:.1f}" y="{yy + 4:.1f}" font-size="11">{_text(line_label, 24)}</text>')


def _bar(name: str, k: int, x: float, y: float, w: float, h: float, color: str, tip: str) -> str:
    return (f'<g id="{escape(name)}-bar-{k}"><rect x="{x:.2f}" y="{y:.2f}" width="{max(w, 0.5):.2f}" '
            f'height="{max(h, 0.0):.2f}" fill="{color}"><title>{tip}</title></rect></g>')


def stacked_bars(name: str, title: str, labels: list[str], series: dict[str, list[float]],
                 line: list[float] | None = None, line_label: str = "", ylabel: str = "") -> Markup:
    """Bars stacked by series (e.g. tiers) per label (e.g. hour), with an optional dashed step line (e.g.
    capacity) across each bucket's whole width, so even a single bucket shows it."""
    width, height = 900, 320
    left, right, top, bottom = 62, 165, 34, 42
    pw, ph = width - left - right, height - top - bottom
    n = len(labels)
    vals = {s: [_val(v) for v in vs] for s, vs in series.items()}
    cap = [float(v) if v is not None and math.isfinite(float(v)) else None for v in line] if line is not None \
        else None
    totals = [sum(vs[i] for vs in vals.values()) for i in range(n)]
    ticks = nice_ticks(max(totals + [v for v in (cap or []) if v is not None] + [0.0]))
    vmax = ticks[-1]
    slot = pw / max(n, 1)
    y_of = lambda v: top + ph - ph * v / vmax  # noqa: E731
    out = _open(name, title, width, height, left)
    _y_axis(out, name, ticks, False, left, left + pw, y_of, ylabel, top, top + ph)
    k = 0
    base = [0.0] * n
    for si, (sname, vs) in enumerate(vals.items()):
        color = PALETTE[si % len(PALETTE)]
        for i in range(n):
            v = vs[i]
            if v > 0:
                y0, y1 = y_of(base[i]), y_of(base[i] + v)
                out.append(_bar(name, k, left + (i + 0.075) * slot, y1, 0.85 * slot, y0 - y1, color,
                                f"{_text(labels[i])} {_text(sname)}: {fmt.num(v)}"))
                k += 1
                base[i] += v
    out.append(f'<line x1="{left:.1f}" x2="{left + pw:.1f}" y1="{top + ph:.1f}" y2="{top + ph:.1f}" '
               f'stroke="#333"/>')
    _x_labels(out, name, labels, left, slot, top + ph)
    if cap is not None and n:
        # a step line: each bucket's value from its left edge to its right edge; a gap where it is unknown
        d, pen = [], False
        for i, v in enumerate(cap[:n]):
            if v is None:
                pen = False
                continue
            y = y_of(v)
            d.append(f"{'L' if pen else 'M'}{left + i * slot:.1f} {y:.1f} L{left + (i + 1) * slot:.1f} {y:.1f}")
            pen = True
        if d:
            out.append(f'<g id="{escape(name)}-capacity" class="capacity"><path d="{" ".join(d)}" fill="none" '
                       f'stroke="#000" stroke-width="1.5" stroke-dasharray="5 3"><title>{_text(line_label)}'
                       f'</title></path></g>')
    _legend(out, left + pw + 14, top, list(vals), line_label if cap is not None else None)
    out.append("</svg>")
    return Markup("".join(out))


def hbars(name: str, title: str, items: list[tuple[str, float]], color: str = PALETTE[0]) -> Markup:
    """Horizontal bars, one per (label, value), the first on top; each value written at its bar's end."""
    row = 22
    left, right, top = 128, 56, 32
    width = 500
    height = top + row * max(len(items), 1) + 30
    pw = width - left - right
    out = _open(name, title, width, height, 6)
    if not items:
        out.append(f'<text x="6" y="{top + 14}" font-size="12">no data</text></svg>')
        return Markup("".join(out))
    vals = [_val(v) for _, v in items]
    ticks = nice_ticks(max(vals))
    vmax = ticks[-1]
    x_of = lambda v: left + pw * v / vmax  # noqa: E731
    ybot = top + row * len(items)
    for i, v in enumerate(ticks):
        x = x_of(v)
        out.append(f'<g id="{escape(name)}-xtick-{i}" class="xtick"><line x1="{x:.1f}" x2="{x:.1f}" '
                   f'y1="{top:.1f}" y2="{ybot:.1f}" stroke="#eee"/><text x="{x:.1f}" y="{ybot + 15:.1f}" '
                   f'font-size="11" text-anchor="middle">{_tick(v)}</text></g>')
    for i, ((lab, _), v) in enumerate(zip(items, vals)):
        y = top + i * row
        out.append(f'<text x="{left - 6}" y="{y + 15:.1f}" font-size="11" text-anchor="end">{_text(lab, 18)}</text>')
        out.append(_bar(name, i, left, y + 3, x_of(v) - left, row - 6, color, f"{_text(lab)}: {fmt.num(v)}"))
        out.append(f'<text x="{x_of(v) + 4:.1f}" y="{y + 15:.1f}" font-size="10">{fmt.num(v)}</text>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{ybot}" stroke="#333"/></svg>')
    return Markup("".join(out))


def grouped_bars(name: str, title: str, labels: list[str], series: dict[str, list[float]],
                 count_axis: bool = True, ylabel: str = "") -> Markup:
    """Bars side by side per label (e.g. wait-time bins per tier); a count axis has whole-number ticks."""
    width, height = 900, 300
    left, right, top, bottom = 62, 165, 34, 42
    pw, ph = width - left - right, height - top - bottom
    n, k = len(labels), max(len(series), 1)
    vals = {s: [_val(v) for v in vs] for s, vs in series.items()}
    ticks = nice_ticks(max([v for vs in vals.values() for v in vs] + [0.0]), integer=count_axis)
    vmax = ticks[-1]
    slot = pw / max(n, 1)
    w = 0.8 * slot / k
    y_of = lambda v: top + ph - ph * v / vmax  # noqa: E731
    out = _open(name, title, width, height, left)
    _y_axis(out, name, ticks, count_axis, left, left + pw, y_of, ylabel, top, top + ph)
    nb = 0
    for si, (sname, vs) in enumerate(vals.items()):
        color = PALETTE[si % len(PALETTE)]
        for i in range(n):
            v = vs[i]
            val = fmt.count(v) if count_axis else fmt.num(v)
            out.append(_bar(name, nb, left + (i + 0.1) * slot + si * w, y_of(v), w, ph * v / vmax, color,
                            f"{_text(sname)} {_text(labels[i])}: {val}"))
            nb += 1
    out.append(f'<line x1="{left:.1f}" x2="{left + pw:.1f}" y1="{top + ph:.1f}" y2="{top + ph:.1f}" '
               f'stroke="#333"/>')
    _x_labels(out, name, labels, left, slot, top + ph)
    _legend(out, left + pw + 14, top, list(vals), None)
    out.append("</svg>")
    return Markup("".join(out))
