"""Options whose error said something other than what was wrong: `advise --since 0001-01-01` got the generic
"expected a duration ... or a date" for a well-formed date before 1970, `report --out FILE` said "File exists" after
all the work, `--sacct-file FOLDER` said "no such file", and `plan --tp-size 3` with 8 GPUs was planned (groups that
cannot tile the job, or that a host boundary cuts, were refused only on block partitions of several hosts)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from tests.hostile.site_check_support import refusal

SITE = str(REPO / "site_configs/example/site.toml")
SACCT = str(REPO / "tests/data/reports/sacct-handwritten-22.05-states-P.txt")
PLAN = ("plan", "--site", SITE, "--user", "alice", "--idle", "--slurm-version", "25.11", "--json")


def test_advise_since_a_date_before_1970():
    assert refusal("advise", "--site", SITE, "--sacct-file", SACCT, "--user", "alice", "--since", "0001-01-01") == (
        "--since: expected a date from 1970 to 2199, got '0001-01-01'")


def test_report_out_is_a_file(tmp_path):
    f = tmp_path / "o"
    f.write_text("keep")
    assert refusal("report", "--site", SITE, "--sacct-file", SACCT, "-q", "--epilog-dir", str(tmp_path / "none"),
                   "--format", "json", "--since", "2026-11-01", "--until", "2026-11-02", "--out", str(f)) == (
        f"--out: {f}: not a folder (the report writes several files into a folder, created if missing)")
    assert f.read_text() == "keep"


@pytest.mark.parametrize("cmd", [
    ("report", "--site", SITE, "-q", "--format", "json", "--since", "2026-11-01", "--until", "2026-11-02"),
    ("advise", "--site", SITE, "--user", "alice"),
    (*PLAN, "--gpus", "8", "--right-size"),
])
def test_sacct_file_is_a_folder(tmp_path, cmd):
    extra = ("--out", str(tmp_path / "o"), "--epilog-dir", str(tmp_path / "none")) if cmd[0] == "report" else ()
    tail = ("--", "python", "x.py") if cmd[0] == "plan" else ()
    assert refusal(*cmd, *extra, "--sacct-file", str(tmp_path), *tail) == (
        f"--sacct-file: {tmp_path}: a folder, expected a saved `sacct --parsable2` dump (a file)")


@pytest.mark.parametrize("shape,line", [
    (("--gpus", "8", "--tp-size", "3"), "tensor-parallel groups of 3 GPUs do not divide the job's 8 GPUs"),
    (("--gpus", "8", "--tp-size", "16"), "tensor-parallel groups of 16 GPUs do not divide the job's 8 GPUs"),
    (("--nodes", "2", "--gpus-per-node", "6", "--tp-size", "4"),
     "a tensor-parallel group of 4 GPUs does not divide a host's 6 GPUs: some group would be cut by a host boundary"),
    # --gpus alone: the planner picks 8 per host, then 12 is one host and a half
    (("--gpus", "24", "--tp-size", "12"),
     "a tensor-parallel group of 12 GPUs is not whole hosts of 8 GPUs: some group would be cut by a host boundary"),
])
def test_tp_size_that_cannot_tile_the_job(shape, line):
    assert refusal(*PLAN, *shape, "--", "python", "x.py") == f"request: --tp-size: {line}"


@pytest.mark.parametrize("shape", [("--gpus", "16", "--tp-size", "4"), ("--gpus", "16", "--tp-size", "16"),
                                   ("--gpus", "4", "--tp-size", "2")])
def test_tp_size_that_tiles_the_job_plans(shape):
    from tests.hostile.site_check_support import cli

    r = cli(*PLAN, *shape, "--", "python", "x.py")
    assert r.code == 0, r.err
