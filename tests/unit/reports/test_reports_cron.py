"""scripts/cron-report: dated folders, latest link, lock against overlap, retention, one-line failures."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from slurmtools.reports import synth

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "cron-report"
ENV = {**os.environ, "SLURMTOOLS": f"{sys.executable} -m slurmtools"}


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    p = tmp_path_factory.mktemp("cron") / "dump.txt"
    today = datetime.combine(date.today(), datetime.min.time())
    synth.write(p, 400, today - timedelta(days=3), 3, nodes=16, node_fmt="gpu{:02d}", seed=5,
                account_names=["vision", "nlp", "students"])
    return p


def run(*args, env=ENV):
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=180, env=env)


def test_nightly_run_writes_a_dated_folder(tmp_path, dump):
    p = run("--root", str(tmp_path), "--", "--sacct-file", str(dump))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "" and p.stderr == ""  # cron mails nothing on success
    stamp = (date.today() - timedelta(days=1)).isoformat()
    d = tmp_path / "day" / stamp
    assert (d / "report.html").is_file() and (d / "summary.md").is_file() and (d / "by_tier.csv").is_file()
    assert os.readlink(tmp_path / "day" / "latest") == stamp
    assert stamp in (d / "summary.md").read_text()
    assert any((tmp_path / "cache").rglob("*.parquet"))  # the day cache is kept for the next night


def test_overlapping_run_is_refused(tmp_path, dump):
    (tmp_path / "day").mkdir()
    holder = subprocess.Popen(["flock", str(tmp_path / ".cron-report.lock"), "sleep", "30"])
    try:
        time.sleep(0.5)
        p = run("--root", str(tmp_path), "--", "--sacct-file", str(dump))
    finally:
        holder.kill()
        holder.wait()
    assert p.returncode == 1
    assert p.stderr.startswith("cron-report: another cron-report is still running") and p.stderr.count("\n") == 1


def test_failure_is_one_line_and_non_zero(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("JobID|State\n1|COMPLETED\n")
    p = run("--root", str(tmp_path), "--", "--sacct-file", str(bad))
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("cron-report: report for day ")
    assert str(bad) in p.stderr and "lacks sacct field" in p.stderr
    assert not list((tmp_path / "day").iterdir())  # no half-written folder left behind
    p = run("--period", "year", "--root", str(tmp_path))
    assert p.returncode == 2 and "--period" in p.stderr


def test_retention_removes_old_reports_only(tmp_path, dump):
    old = tmp_path / "day" / "2020-01-01"
    old.mkdir(parents=True)
    (old / "report.html").write_text("old")
    t = time.time() - 100 * 86400
    os.utime(old, (t, t))
    recent = tmp_path / "day" / "2026-01-01"
    recent.mkdir()
    p = run("--root", str(tmp_path), "--keep", "30", "--", "--sacct-file", str(dump))
    assert p.returncode == 0, p.stderr
    assert not old.exists() and recent.exists() and (tmp_path / "day" / "latest").is_symlink()
