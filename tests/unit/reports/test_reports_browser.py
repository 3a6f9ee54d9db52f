"""The HTML report in a real browser (Debian's chromium, headless): it loads with no script errors, the charts
(hand-written SVG) are laid out, hostile names stay text, and what the browser shows is true: whole-number ticks
on count axes, human column headers, a timeline of several points for a short window, and the same cost in the
headline as in the Markdown summary. Under CI (CI=true) a missing chromium is a failure, not a skip."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess

import pytest

import reports_handmade as hm
from test_reports_outputs import _report
from test_reports_truth import _one_job

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--enable-logging=stderr", "--v=0"]
PWN = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium is not installed (apt-get install -y chromium); required under CI")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return exe


def _run(exe, tmp_path, *args):
    return subprocess.run([exe, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args], capture_output=True,
                          text=True, timeout=120)


def test_report_opens_in_chromium_with_charts_and_no_script(tmp_path):
    from slurmtools.reports import outputs

    exe = _chromium()
    text = hm.TEXT.replace("a|b <script>alert(1)</script>", "x " + PWN)
    text = text.replace("|bob|nlp|", f"|{PWN}|nlp|")
    page = tmp_path / "report.html"
    page.write_text(outputs.render_html(_report(text)))
    url = page.as_uri()

    dom = _run(exe, tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    title = re.search(r"<title>(.*?)</title>", html, re.S).group(1)
    assert "pwned" not in title and title.startswith("GPU report")
    assert "&lt;script&gt;document.title" in html  # the hostile name is on the page, as text
    svgs = {}
    for chart in ("timeline", "users", "accounts", "wait", "waste"):
        m = re.search(rf'id="chart-{chart}">\s*<svg[^>]*data-chart="{chart}"[^>]*>(.*?)</svg>', html, re.S)
        assert m, chart
        svgs[chart] = m.group(1)
    assert len(re.findall(r'<g id="[a-z]+-bar-\d+"', html)) > 20
    assert "<script" not in "".join(svgs.values())
    # the wait chart counts runs: whole-number ticks only
    ticks = re.findall(r'<g id="wait-ytick-\d+"[^>]*>.*?<text[^>]*>([^<]*)</text>', svgs["wait"], re.S)
    assert len(ticks) >= 2 and all(re.fullmatch(r"\d[\d,]*", t) for t in ticks), ticks
    # human column headers, booleans as words
    heads = re.findall(r"<th>(.*?)</th>", html)
    assert "GPU-hours" in heads and "In the site file" in heads and not [h for h in heads if "_" in h]
    assert not re.search(r"<td[^>]*>(True|False)</td>", html)
    # the same cost string as the Markdown summary
    cost = re.search(r'id="kpi-cost"><b>(.*?)</b>', html).group(1)
    assert cost == "488.40 USD" and f"Cost {cost};" in outputs.render_md(_report(text))
    errors = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert errors == []

    shot = tmp_path / "shot.png"
    p = _run(exe, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", url)
    assert p.returncode == 0 and shot.exists(), p.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    assert (w, h) == (1280, 2000)
    assert len(data) > 50_000  # a blank page compresses to a few KB; charts and tables do not
    assert not [ln for ln in p.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]


def test_short_window_timeline_in_chromium(tmp_path):
    """A three-minute window: a bar per minute with a GPU allocated, and the capacity line drawn across the chart."""
    from datetime import datetime

    from slurmtools.reports import capacity, metrics, outputs
    from slurmtools.reports.sacct import read_sacct
    from slurmtools.site import load_site
    from slurmtools.topology.sitefile import load_fabric

    exe = _chromium()
    site = load_site(None)
    since, until = datetime(2026, 11, 2, 2, 0), datetime(2026, 11, 2, 2, 3)
    cap = capacity.capacity_table(capacity.nodes_from_site(site, load_fabric(site.fabric_path)), None, since, until)
    r = metrics.compute(read_sacct(_one_job("2026-11-02T02:00:30", "2026-11-02T02:02:30", gpus=4), text=True).jobs,
                        site, since, until, capacity=cap)
    page = tmp_path / "report.html"
    page.write_text(outputs.render_html(r))
    dom = _run(exe, tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    svg = re.search(r'<svg[^>]*data-chart="timeline".*?</svg>', dom.stdout, re.S).group(0)
    assert len(re.findall(r'<g id="timeline-bar-\d+"', svg)) == 3  # 02:00, 02:01, 02:02
    labels = re.findall(r'<g id="timeline-xtick-\d+"[^>]*>.*?<text[^>]*>([^<]*)</text>', svg, re.S)
    assert labels == ["02:00", "02:01", "02:02"]
    # the dashed capacity line: a step path across all three buckets (4 vertices and more, not a lone point),
    # from the first bar's left edge to the last bar's right edge, stroked in black
    line = re.search(r'<g id="timeline-capacity"[^>]*>\s*<path d="([^"]*)"[^>]*stroke="#000"[^>]*stroke-dasharray',
                     svg, re.S)
    assert line and len(re.findall(r"[ML]", line.group(1))) >= 4
    xs = [float(x) for x in re.findall(r"[ML]([\d.]+) ", line.group(1))]
    bars = [(float(x), float(w)) for x, w in
            re.findall(r'<g id="timeline-bar-\d+"><rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', svg)]
    assert len(bars) == 3 and min(xs) <= min(x for x, _ in bars) and max(xs) >= max(x + w for x, w in bars)
