"""An empty value is not "not given": `--partition "$PART"` with PART unset, `fabric = ""` or `--until ""` once fell
back to the default without a word (the caller's own user name for --user "", the working folder for --out "", no
fabric at all for fabric = ""). Each is refused in one line naming the option or key."""

from __future__ import annotations

import pytest

from tests.hostile.site_check_support import edited, refusal
from tests.conftest import REPO

SITE = str(REPO / "site_configs/example/site.toml")
SACCT = str(REPO / "tests/data/reports/sacct-handwritten-22.05-states-P.txt")


@pytest.mark.parametrize("option", ["--partition", "--gpu-type", "--account", "--user", "--tier", "--template",
                                    "--output-dir", "--workdir"])
def test_plan_refuses_an_empty_option(option):
    """--user "" planned as the caller (root, when an admin ran it); the others took the site's default."""
    user = () if option == "--user" else ("--user", "alice")
    line = refusal("plan", "--site", SITE, "--gpus", "8", *user, "--idle", "--slurm-version", "25.11", "--json",
                   option, "", "--", "python", "x.py")
    assert line == f"request: {option}: an empty value (''): name one, or leave the option out for the default"


def test_an_empty_fabric_path(tmp_path):
    p = edited(tmp_path, 'fabric = "', 'fabric = ""  # was "')
    assert refusal("site", "check", str(p)) == (f"{p}: site.fabric: an empty path: name the fabric file, or leave "
                                                "the key out for a site without one")


def test_topo_show_an_empty_host():
    assert refusal("topo", "show", "--site", SITE, "--host", "") == "--host: no host '' in topology 'example'"


@pytest.mark.parametrize("sizes", ["", "-5,0", "18,x"])
def test_topo_export_block_sizes(sizes):
    assert refusal("topo", "export", "--site", SITE, "-f", "block", "--block-sizes", sizes) == (
        f"--block-sizes: expected whole numbers of at least 1, comma-separated (e.g. 18,36), got {sizes!r}")


def test_gres_files_without_index():
    """Every GPU of a host got the same File= device."""
    assert refusal("topo", "export", "--site", SITE, "-f", "gres.conf", "--gres-files", "/dev/nvidia") == (
        "--gres-files: expected a pattern with {minor} or {index}, got '/dev/nvidia'")


def test_report_empty_until_and_out(tmp_path):
    base = ("report", "--site", SITE, "--sacct-file", SACCT, "-q", "--epilog-dir", str(tmp_path / "none"),
            "--format", "json")
    assert refusal(*base, "--until", "", "--out", str(tmp_path / "o")) == (
        "--until: expected a date like 2026-11-01 or 2026-11-01T08:00, got ''")
    assert not (tmp_path / "o").exists()
    assert refusal(*base, "--since", "2026-11-01", "--until", "2026-11-02", "--out", "") == (
        "--out: an empty path: name the output folder")
