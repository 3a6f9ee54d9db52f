"""The HTML report's charts, drawn by matplotlib as SVG and inlined in the page: no JavaScript, no CDN, readable
offline and in e-mail archives.

matplotlib is imported inside the functions (only writing HTML pays for it) and driven through `Figure` alone,
never pyplot, so no global state or GUI backend is touched. Text is written as SVG `<text>` (svg.fonttype none),
which matplotlib XML-escapes; labels that can come from users (user, account, tier names) additionally have `$`
escaped so matplotlib never reads them as mathtext. The SVG's own `<style>` is dropped: inlined, it would style
the whole page.
"""

from __future__ import annotations

import io
import math
import re

from markupsafe import Markup, escape

from slurmtools.reports import fmt

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _safe(label: str, width: int | None = None) -> str:
    """A user-supplied label as literal text for matplotlib (no mathtext), shortened to `width` characters."""
    s = str(label).replace("\n", " ")
    if width is not None and len(s) > width:
        s = s[:width - 1] + "…"
    return s.replace("$", r"\$")


def _figure(width_in: float, height_in: float, left: float = 0.7, right: float = 0.2, top: float = 0.35,
            bottom: float = 0.45):
    """A figure with fixed margins in inches (matplotlib's constrained layout doubles the drawing time, and the
    HTML report is on the nightly run's clock)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in))
    fig.subplots_adjust(left=left / width_in, right=1 - right / width_in, top=1 - top / height_in,
                        bottom=bottom / height_in)
    return fig, fig.subplots()


def _style(ax, title: str) -> None:
    ax.set_title(_safe(title), loc="left", fontsize=11, fontweight="bold")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=8)
    ax.set_axisbelow(True)


def _value_axis(axis, integer: bool) -> None:
    """Readable tick labels; a count axis (runs) gets whole numbers only."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    axis.set_major_locator(MaxNLocator(nbins=5, integer=integer, min_n_ticks=2))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: fmt.count(v) if integer else _tick(v)))


def _tick(v: float) -> str:
    if abs(v) >= 10000:
        return f"{v / 1000:,.0f}k"
    if v == int(v):
        return f"{int(v):,}"
    return f"{v:,.3g}"


def _svg(fig, name: str, title: str) -> Markup:
    """The figure as one inline `<svg>` element, with an accessible name."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<style[^>]*>.*?</style>", "", text, count=1, flags=re.S)
    text = re.sub(r"<metadata>.*?</metadata>", "", text, count=1, flags=re.S)
    text = text.replace("<svg ", f'<svg class="chart" data-chart="{name}" role="img" '
                                 f'aria-label="{escape(title)}" ', 1)
    return Markup(text.strip())


def _gid(artists, name: str, start: int = 0) -> int:
    """Give each bar an id the browser test can count (`<name>-bar-<n>`); returns the next free number."""
    for i, a in enumerate(artists, start):
        a.set_gid(f"{name}-bar-{i}")
    return start + len(artists)


def stacked_bars(name: str, title: str, labels: list[str], series: dict[str, list[float]],
                 line: list[float] | None = None, line_label: str = "", ylabel: str = "") -> Markup:
    """Bars stacked by series (e.g. tiers) per label (e.g. hour), with an optional step line (e.g. capacity)
    drawn across each bar's whole width, so even a single bucket shows it."""
    import numpy as np

    fig, ax = _figure(9.5, 3.4, right=1.7)
    _style(ax, title)
    n = len(labels)
    x = np.arange(n)
    base = np.zeros(n)
    nbar = 0
    for si, (sname, vals) in enumerate(series.items()):
        v = np.asarray(vals, dtype=float)
        bars = ax.bar(x, v, bottom=base, width=0.85, color=PALETTE[si % len(PALETTE)], label=_safe(sname, 24))
        nbar = _gid([b for b, val in zip(bars, v) if val > 0], name, nbar)
        base = base + v
    if line is not None and n:
        y = list(line) + [line[-1]]
        ax.step(np.arange(n + 1) - 0.5, y, where="post", color="#000", linewidth=1.3, linestyle="--",
                label=_safe(line_label))
    step = max(1, math.ceil(n / 8))
    ax.set_xticks(x[::step], [_safe(s) for s in labels[::step]])
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(bottom=0)
    _value_axis(ax.yaxis, integer=False)
    if ylabel:
        ax.set_ylabel(_safe(ylabel), fontsize=8)
    ax.grid(axis="y", color="#ddd")
    if series or line is not None:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    return _svg(fig, name, title)


def hbars(name: str, title: str, items: list[tuple[str, float]], color: str = PALETTE[0]) -> Markup:
    """Horizontal bars, one per (label, value), the first on top; each value written at its bar's end."""
    fig, ax = _figure(5.2, 0.95 + 0.24 * max(len(items), 1), left=1.3, right=0.1, bottom=0.3)
    _style(ax, title)
    if not items:
        ax.text(0.0, 0.5, "no data", transform=ax.transAxes, fontsize=9)
        ax.set_axis_off()
        return _svg(fig, name, title)
    y = list(range(len(items)))
    vals = [float(v) for _, v in items]
    bars = ax.barh(y, vals, color=color, height=0.7)
    _gid(bars, name)
    ax.set_yticks(y, [_safe(lab, 18) for lab, _ in items])
    ax.invert_yaxis()
    top = max(vals + [1e-9])
    for yi, v in zip(y, vals):
        ax.text(v + top * 0.01, yi, fmt.num(v), va="center", fontsize=7)
    ax.set_xlim(0, top * 1.18)
    _value_axis(ax.xaxis, integer=False)
    ax.grid(axis="x", color="#eee")
    return _svg(fig, name, title)


def grouped_bars(name: str, title: str, labels: list[str], series: dict[str, list[float]],
                 count_axis: bool = True, ylabel: str = "") -> Markup:
    """Bars side by side per label (e.g. wait-time bins per tier); a count axis has whole-number ticks."""
    import numpy as np

    fig, ax = _figure(9.5, 3.2, right=1.7)
    _style(ax, title)
    n, k = len(labels), max(len(series), 1)
    x = np.arange(n)
    w = 0.8 / k
    nbar = 0
    for si, (sname, vals) in enumerate(series.items()):
        bars = ax.bar(x - 0.4 + w * (si + 0.5), np.asarray(vals, dtype=float), width=w,
                      color=PALETTE[si % len(PALETTE)], label=_safe(sname, 24))
        nbar = _gid(bars, name, nbar)
    ax.set_xticks(x, [_safe(s) for s in labels])
    ax.set_ylim(bottom=0)
    top = max([float(v) for vals in series.values() for v in vals] + [0.0])
    if top < 1:
        ax.set_ylim(0, 1)
    _value_axis(ax.yaxis, integer=count_axis)
    if ylabel:
        ax.set_ylabel(_safe(ylabel), fontsize=8)
    ax.grid(axis="y", color="#ddd")
    if series:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    return _svg(fig, name, title)
