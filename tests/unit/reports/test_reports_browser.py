"""The HTML report in a real browser (Debian's chromium, headless): it loads with no script errors, the charts
are laid out, and hostile names stay text. Under CI (CI=true) a missing chromium is a failure, not a skip."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess

import pytest

import reports_handmade as hm
from test_reports_outputs import _report

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
    for chart in ("chart-timeline", "chart-users", "chart-accounts", "chart-wait", "chart-waste"):
        m = re.search(rf'id="{chart}">\s*<svg[^>]*>(.*?)</svg>', html, re.S)
        assert m, chart
    assert len(re.findall(r'<rect class="bar"', html)) > 20
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
