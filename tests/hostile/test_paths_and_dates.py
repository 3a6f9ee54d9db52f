"""Paths and dates past what the code under them takes: a symlink loop behind site.fabric (Path.resolve raised
RuntimeError), a $SLURMTOOLS_TEMPLATE_PATH folder that is not one (skipped, so another template planned the job),
a FIFO given as topology JSON (read forever), and report/advise windows past the dates Python and pandas hold
(OverflowError tracebacks). Each is one line naming the file, variable or option."""

from __future__ import annotations

import os

import pytest

from tests.conftest import REPO
from tests.hostile.mutations import bounded
from tests.hostile.site_check_support import edited, refusal

SITE = str(REPO / "site_configs/example/site.toml")
SACCT = str(REPO / "tests/data/reports/sacct-handwritten-22.05-states-P.txt")


def test_a_symlink_loop_behind_site_fabric(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.symlink_to(b)
    b.symlink_to(a)
    p = edited(tmp_path, 'fabric = "', f'fabric = "{a}"  # was "')
    assert refusal("site", "check", str(p)) == (f"{p}: site.fabric: {a}: cannot read: Too many levels of symbolic "
                                                "links")


def test_a_folder_as_site_fabric(tmp_path):
    """Was "no such file", then "<folder>: not a regular file" without the key that names it."""
    p = edited(tmp_path, 'fabric = "', f'fabric = "{tmp_path}"  # was "')
    assert refusal("site", "check", str(p)) == (f"{p}: site.fabric: {tmp_path}: a folder, expected the fabric file "
                                                "(a topology/*.toml)")


@pytest.mark.parametrize("kind,why", [("file", "not a folder"), ("missing", "no such folder")])
def test_template_path_that_is_not_a_folder(tmp_path, monkeypatch, kind, why):
    d = tmp_path / "tpl"
    if kind == "file":
        d.write_text("x")
    monkeypatch.setenv("SLURMTOOLS_TEMPLATE_PATH", str(d))
    line = f"$SLURMTOOLS_TEMPLATE_PATH: {d}: {why}"
    assert refusal("templates", "list", "--site", SITE) == line
    assert refusal("plan", "--site", SITE, "--gpus", "8", "--user", "alice", "--idle", "--slurm-version", "25.11",
                   "--", "python", "x.py") == line


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", ".."])
def test_templates_show_a_path(name):
    line = refusal("templates", "show", "--site", SITE, name)
    assert line.startswith(f"templates show: NAME: unknown template {name!r} (a template is named, not a path) "
                           "(known: accelerate, "), line


def test_a_fifo_as_topology_json(tmp_path):
    p = tmp_path / "t.json"
    os.mkfifo(p)
    with bounded(20, 1 << 30):
        assert refusal("topo", "show", str(p)) == f"{p}: not a regular file"


@pytest.mark.parametrize("opts,line", [
    (("--since", "0001-01-01", "--until", "0001-01-02"), "--since: expected a date from 1970 to 2199, got '0001-01-01'"),
    (("--since", "9999-12-30", "--until", "9999-12-31"), "--since: expected a date from 1970 to 2199, got '9999-12-30'"),
    (("--since", "2026-11-01", "--until", "2026-11-02", "--history", "99999999"),
     "--history: 99999999 days before the window's start (2026-11-01 00:00:00) is before 1970, where Slurm's "
     "accounting begins"),
])
def test_report_dates_out_of_range(tmp_path, opts, line):
    assert refusal("report", "--site", SITE, "--sacct-file", SACCT, "-q", "--epilog-dir", str(tmp_path / "none"),
                   "--format", "json", "--out", str(tmp_path / "o"), *opts) == line


def test_advise_since_before_1970():
    assert refusal("advise", "--site", SITE, "--sacct-file", SACCT, "--user", "alice", "--since", "99999999999d") == (
        "--since: 99999999999d back from now is before 1970, where Slurm's accounting begins")
