"""The hand-written SVG charts: nice scales (whole numbers on count axes), a capacity line across every bucket
even when there is one, thinned x labels when buckets are many, user strings as text, and no matplotlib."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from slurmtools.reports import charts

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = "<script>alert('x')</script>&\"$x$"


def _tree(svg) -> ET.Element:
    return ET.fromstring(str(svg))  # well-formed XML, or this raises


def _texts(root: ET.Element, cls: str) -> list[str]:
    return ["".join(g.find(f"{NS}text").itertext()) for g in root.iter(f"{NS}g") if g.get("class") == cls]


@pytest.mark.parametrize("vmax,integer,expect", [
    (2, True, [0, 1, 2]), (0.3, True, [0, 1]), (0, True, [0, 1]), (7, True, [0, 2, 4, 6, 8]),
    (128, False, [0, 50, 100, 150]), (0.3, False, [0, 0.1, 0.2, 0.3]), (1, False, [0, 0.2, 0.4, 0.6, 0.8, 1]),
    (23_456, False, [0, 5000, 10000, 15000, 20000, 25000]), (float("nan"), False, [0, 0.2, 0.4, 0.6, 0.8, 1]),
])
def test_nice_ticks(vmax, integer, expect):
    ticks = charts.nice_ticks(vmax, integer=integer)
    assert ticks == pytest.approx(expect)
    step = ticks[1] - ticks[0]
    assert round(step / 10 ** math.floor(math.log10(step)), 6) in (1, 2, 5)  # 1/2/5 x 10^k
    assert ticks[-1] >= (0 if math.isnan(vmax) else vmax)


def test_count_axis_ticks_are_whole_numbers_and_value_axis_ticks_are_readable():
    root = _tree(charts.grouped_bars("wait", "Wait", ["<5 min", "5-30 min"], {"a": [1, 2], "b": [0, 1]}))
    ticks = _texts(root, "ytick")
    assert ticks == ["0", "1", "2"]
    root = _tree(charts.stacked_bars("tl", "T", ["a", "b"], {"s": [12_000, 30_000]}))
    assert _texts(root, "ytick") == ["0", "10k", "20k", "30k"]


def test_one_bucket_still_shows_the_capacity_line_across_it():
    root = _tree(charts.stacked_bars("timeline", "T", ["02:00"], {"standard": [2.0]}, [128.0], "available"))
    g = root.find(f".//{NS}g[@id='timeline-capacity']")
    path = g.find(f"{NS}path")
    assert path.get("stroke") == "#000" and path.get("stroke-dasharray") and path.get("fill") == "none"
    xs = [float(x) for x in re.findall(r"[ML]([\d.]+) ", path.get("d"))]
    rect = root.find(f".//{NS}g[@id='timeline-bar-0']/{NS}rect")
    x, w = float(rect.get("x")), float(rect.get("width"))
    assert min(xs) <= x and max(xs) >= x + w and max(xs) - min(xs) > 100  # the whole bucket, not a point
    # above the bar: the scale reaches the capacity
    ys = {float(y) for y in re.findall(r"[ML][\d.]+ ([\d.]+)", path.get("d"))}
    assert len(ys) == 1 and ys.pop() < float(rect.get("y"))


def test_capacity_line_spans_every_bucket_and_many_buckets_get_thinned_labels():
    labels = [f"11-{d:02d}" for d in range(1, 56)]
    root = _tree(charts.stacked_bars("timeline", "T", labels, {"a": [1.0] * 55}, [4.0] * 55, "available"))
    shown = _texts(root, "xtick")
    assert 2 <= len(shown) <= charts.MAX_X_LABELS and shown[0] == "11-01" and set(shown) <= set(labels)
    d = root.find(f".//{NS}g[@id='timeline-capacity']/{NS}path").get("d")
    assert len(re.findall(r"[ML]", d)) == 2 * 55
    assert len(root.findall(f".//{NS}g[@class='xtick']")) == len(shown)
    ten = _tree(charts.stacked_bars("t", "T", labels[:8], {"a": [1.0] * 8}))
    assert _texts(ten, "xtick") == labels[:8]  # few buckets: every label


def test_user_strings_are_text_never_markup():
    items = [(HOSTILE, 3.0), ("bob", 1.0)]
    for svg in (charts.hbars("users", HOSTILE, items),
                charts.stacked_bars("timeline", HOSTILE, [HOSTILE], {HOSTILE: [1.0]}, [2.0], HOSTILE, HOSTILE),
                charts.grouped_bars("wait", HOSTILE, [HOSTILE], {HOSTILE: [1.0]}, ylabel=HOSTILE)):
        s = str(svg)
        assert "<script" not in s and "&lt;script&gt;" in s
        root = _tree(s)
        assert not [e for e in root.iter() if e.tag.replace(NS, "") not in
                    {"svg", "title", "text", "g", "rect", "line", "path"}]
        assert any(HOSTILE[:17] in "".join(e.itertext()) for e in root.iter(f"{NS}text"))
    assert 'aria-label="&lt;script&gt;' in str(charts.hbars("users", HOSTILE, items))


def test_empty_inputs_still_draw_a_chart():
    assert "no data" in str(charts.hbars("users", "Top users", []))
    for svg in (charts.stacked_bars("timeline", "T", [], {}, [], "available"),
                charts.grouped_bars("wait", "W", [], {})):
        root = _tree(svg)
        assert len(_texts(root, "ytick")) >= 2


def test_charts_module_does_not_import_matplotlib():
    code = ("import sys\n"
            "from slurmtools.reports import charts\n"
            "charts.stacked_bars('t', 'T', ['a'], {'s': [1.0]}, [2.0], 'available')\n"
            "charts.hbars('u', 'U', [('a', 1.0)]); charts.grouped_bars('w', 'W', ['a'], {'s': [1]})\n"
            "print('matplotlib' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False"]
