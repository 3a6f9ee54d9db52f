"""Small inline SVG charts for the HTML report: no JavaScript, no CDN, readable offline and in e-mail archives.

Every label that can come from users (user, account, tier names) passes through `markupsafe.escape`; the result
is returned as `Markup` so the (autoescaping) template inserts it as is.
"""

from __future__ import annotations

from markupsafe import Markup, escape

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _fmt(v: float) -> str:
    if abs(v) >= 10000:
        return f"{v / 1000:.0f}k"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


def stacked_bars(title: str, labels: list[str], series: dict[str, list[float]], line: list[float] | None = None,
                 line_label: str = "", width: int = 760, height: int = 260, unit: str = "") -> Markup:
    """Bars stacked by series (e.g. tiers) per label (e.g. day), with an optional line (e.g. capacity)."""
    left, right, top, bottom = 56, 140, 28, 40
    pw, ph = width - left - right, height - top - bottom
    n = max(len(labels), 1)
    totals = [sum(s[i] for s in series.values()) for i in range(len(labels))]
    vmax = max(totals + (line or []) + [1e-9])
    bw = pw / n
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
           f'<title>{escape(title)}</title>',
           f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
    for k in range(5):
        y = top + ph - ph * k / 4
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
                   f'<text x="{left - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">'
                   f'{_fmt(vmax * k / 4)}</text>')
    for i, lab in enumerate(labels):
        base = 0.0
        for si, (name, vals) in enumerate(series.items()):
            v = vals[i]
            if v <= 0:
                continue
            h = ph * v / vmax
            y = top + ph - ph * (base + v) / vmax
            out.append(f'<rect class="bar" x="{left + i * bw + 1:.1f}" y="{y:.1f}" width="{max(bw - 2, 1):.1f}" '
                       f'height="{h:.1f}" fill="{PALETTE[si % len(PALETTE)]}"><title>{escape(lab)} '
                       f'{escape(name)}: {_fmt(v)}{escape(unit)}</title></rect>')
            base += v
        step = max(1, n // 8)
        if i % step == 0:
            out.append(f'<text x="{left + i * bw + bw / 2:.1f}" y="{top + ph + 14}" font-size="10" '
                       f'text-anchor="middle">{escape(lab)}</text>')
    if line:
        pts = " ".join(f"{left + i * bw + bw / 2:.1f},{top + ph - ph * v / vmax:.1f}" for i, v in enumerate(line))
        out.append(f'<polyline points="{pts}" fill="none" stroke="#000" stroke-width="1.5" stroke-dasharray="4 3"/>')
    ly = top
    for si, name in enumerate(series):
        out.append(f'<rect x="{left + pw + 10}" y="{ly}" width="10" height="10" fill="{PALETTE[si % len(PALETTE)]}"/>'
                   f'<text x="{left + pw + 24}" y="{ly + 9}" font-size="11">{escape(name)}</text>')
        ly += 16
    if line:
        out.append(f'<line x1="{left + pw + 10}" x2="{left + pw + 20}" y1="{ly + 5}" y2="{ly + 5}" stroke="#000" '
                   f'stroke-dasharray="4 3"/><text x="{left + pw + 24}" y="{ly + 9}" font-size="11">'
                   f'{escape(line_label)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def hbars(title: str, items: list[tuple[str, float]], width: int = 370, unit: str = "", color: str = PALETTE[0]
          ) -> Markup:
    """Horizontal bars, one per (label, value), largest first as given."""
    row = 18
    left, top = 120, 26
    height = top + row * max(len(items), 1) + 8
    vmax = max([v for _, v in items] + [1e-9])
    pw = width - left - 60
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
           f'<title>{escape(title)}</title>',
           f'<text x="4" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
    for i, (lab, v) in enumerate(items):
        y = top + i * row
        short = lab if len(lab) <= 18 else lab[:17] + "…"
        out.append(f'<text x="{left - 4}" y="{y + 12}" font-size="11" text-anchor="end">{escape(short)}</text>'
                   f'<rect class="bar" x="{left}" y="{y + 2}" width="{max(pw * v / vmax, 0.5):.1f}" height="{row - 5}" '
                   f'fill="{color}"><title>{escape(lab)}: {_fmt(v)}{escape(unit)}</title></rect>'
                   f'<text x="{left + pw * v / vmax + 4:.1f}" y="{y + 12}" font-size="10">{_fmt(v)}</text>')
    if not items:
        out.append(f'<text x="4" y="{top + 12}" font-size="11">no data</text>')
    out.append("</svg>")
    return Markup("".join(out))


def grouped_bars(title: str, labels: list[str], series: dict[str, list[float]], width: int = 760,
                 height: int = 240) -> Markup:
    """Bars side by side per label (e.g. wait-time bins per tier)."""
    left, right, top, bottom = 56, 140, 28, 40
    pw, ph = width - left - right, height - top - bottom
    n, k = max(len(labels), 1), max(len(series), 1)
    vmax = max([v for s in series.values() for v in s] + [1e-9])
    gw = pw / n
    bw = (gw - 6) / k
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
           f'<title>{escape(title)}</title>',
           f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
    for q in range(5):
        y = top + ph - ph * q / 4
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
                   f'<text x="{left - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{_fmt(vmax * q / 4)}</text>')
    for i, lab in enumerate(labels):
        for si, (name, vals) in enumerate(series.items()):
            v = vals[i]
            h = ph * v / vmax
            out.append(f'<rect class="bar" x="{left + i * gw + 3 + si * bw:.1f}" y="{top + ph - h:.1f}" '
                       f'width="{max(bw - 1, 1):.1f}" height="{h:.1f}" fill="{PALETTE[si % len(PALETTE)]}">'
                       f'<title>{escape(name)} {escape(lab)}: {_fmt(v)}</title></rect>')
        out.append(f'<text x="{left + i * gw + gw / 2:.1f}" y="{top + ph + 14}" font-size="10" '
                   f'text-anchor="middle">{escape(lab)}</text>')
    for si, name in enumerate(series):
        out.append(f'<rect x="{left + pw + 10}" y="{top + si * 16}" width="10" height="10" '
                   f'fill="{PALETTE[si % len(PALETTE)]}"/><text x="{left + pw + 24}" y="{top + si * 16 + 9}" '
                   f'font-size="11">{escape(name)}</text>')
    out.append("</svg>")
    return Markup("".join(out))
