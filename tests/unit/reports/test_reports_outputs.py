"""Outputs: hostile strings render as text, every format is written and agrees with the computed numbers."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from datetime import datetime

import pytest

import reports_handmade as hm
from slurmtools.reports import capacity, metrics, outputs
from slurmtools.reports.sacct import read_sacct
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric

HOSTILE = "<script>alert(1)</script>"


def _report(text=hm.TEXT):
    site = load_site(None)
    since, until = datetime.fromisoformat(hm.SINCE), datetime.fromisoformat(hm.UNTIL)
    cap = capacity.capacity_table(capacity.nodes_from_site(site, load_fabric(site.fabric_path)), None, since, until)
    return metrics.compute(read_sacct(text, text=True).jobs, site, since, until, capacity=cap)


def _hostile_text():
    # a user and an account named like markup, and a job name with markup (and a pipe, repaired on input)
    return hm.TEXT.replace("|carol|students|", f"|{HOSTILE}|acct&<b>|")


def test_html_escapes_every_user_string():
    html = outputs.render_html(_report(_hostile_text()))
    assert HOSTILE not in html and "acct&<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as text: in tables and chart labels
    assert "acct&amp;&lt;b&gt;" in html
    assert "<script" not in html.lower()  # the page carries no script at all
    assert html.count("<svg") == 5  # timeline, users, accounts, wait, waste


def test_markdown_cannot_be_broken_by_names():
    md = outputs.render_md(_report(_hostile_text()))
    assert HOSTILE not in md and "&lt;script&gt;" in md
    for line in md.splitlines():
        if line.startswith("|"):
            assert line.count("|") - line.count("\\|") == 5  # 4 cells, no extra column from a name


def test_all_formats_written_and_consistent(tmp_path):
    r = _report()
    files = outputs.write(r, tmp_path, outputs.FORMATS)
    names = {p.name for p in files}
    assert {"report.html", "summary.md", "report.json", "summary.csv", "by_tier.csv", "wait_by_tier.csv",
            "budget.csv", "timeline.csv", "top_waste_jobs.csv", "forecast.csv"} <= names
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["summary"]["gpu_hours"] == pytest.approx(203.5)
    by_tier = {row["tier"]: row["gpu_hours"] for row in doc["tables"]["by_tier"]}
    assert by_tier == pytest.approx({"production": 80, "standard": 117.5, "scavenger": 6})
    with open(tmp_path / "by_account.csv") as fh:
        rows = {r_["account"]: float(r_["gpu_hours"]) for r_ in csv.DictReader(fh)}
    assert rows == pytest.approx({"vision": 86, "nlp": 116, "students": 1.5})
    md = (tmp_path / "summary.md").read_text()
    assert "Utilization 6.6%" in md and len(md.splitlines()) < 30


def test_cli_end_to_end_and_one_line_errors(tmp_path):
    dump = tmp_path / "dump.txt"
    dump.write_text(hm.TEXT)
    ev = tmp_path / "events.txt"
    ev.write_text(hm.EVENTS)
    out = tmp_path / "out"
    run = lambda *a: subprocess.run([sys.executable, "-m", "slurmtools", "report", *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=120)
    p = run("--sacct-file", str(dump), "--events-file", str(ev), "--since", hm.SINCE, "--until", hm.UNTIL,
            "--format", "json,md,html,csv", "--out", str(out), "--epilog-dir", str(tmp_path / "none"))
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "report.json").read_text())
    assert doc["summary"]["available_gpu_hours"] == pytest.approx(2976)
    assert doc["summary"]["utilization_pct"] == pytest.approx(203.5 / 2976 * 100)
    for args, want in [
        (("--format", "pdf"), "--format"),
        (("--since", "last tuesday"), "--since"),
        (("--period", "year"), "--period"),
        (("--sacct-file", str(tmp_path / "missing.txt")), "--sacct-file"),
        (("--events-file", str(tmp_path / "missing.txt")), "--events-file"),
    ]:
        base = {"--sacct-file": str(dump), "--since": hm.SINCE, "--out": str(out)}
        argv = []
        for k, v in base.items():
            if k not in args:
                argv += [k, v]
        if "--period" in args:
            argv = [a for a in argv if a not in ("--since", hm.SINCE)]
        p = run(*argv, *args)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.startswith("slurmtools: error: ") and want in p.stderr, p.stderr
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    bad = tmp_path / "bad.txt"
    bad.write_text("JobID|State\n1|COMPLETED\n")
    p = run("--sacct-file", str(bad), "--since", hm.SINCE, "--out", str(out))
    assert p.returncode == 2 and str(bad) in p.stderr and "Traceback" not in p.stderr


def test_window_from_period():
    from slurmtools.cli.report import window

    now = datetime(2026, 11, 18, 3, 0)  # a Wednesday
    assert window(None, None, "day", now) == (datetime(2026, 11, 17), datetime(2026, 11, 18))
    assert window(None, None, "week", now) == (datetime(2026, 11, 9), datetime(2026, 11, 16))
    assert window(None, None, "month", now) == (datetime(2026, 10, 1), datetime(2026, 11, 1))
    assert window("2026-11-01", "2026-11-02T12:00", None, now) == (datetime(2026, 11, 1),
                                                                   datetime(2026, 11, 2, 12))
