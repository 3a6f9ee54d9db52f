"""scripts/slurm-build refuses what is not a Slurm source in one line naming it, and a failed build names its log.

These paths end before anything is compiled; the real build of the vendored 25.11 source is exercised by every
`scripts/test` run (the 25.11 lab)."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[2] / "scripts" / "slurm-build"


def run(tmp_path, *args):
    env = dict(os.environ, SLURMTOOLS_SLURM_CACHE=str(tmp_path / "cache"))
    return subprocess.run([str(BUILD), *args], capture_output=True, text=True, env=env, timeout=120)


def make_tar(tmp_path, name: str, files: dict[str, str]) -> Path:
    """A .tar.gz of `files` (paths under one top folder)."""
    src = tmp_path / "src"
    for rel, text in files.items():
        p = src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        p.chmod(0o755)
    top = next(iter(files)).split("/")[0]
    out = tmp_path / name
    with tarfile.open(out, "w:gz") as t:
        t.add(src / top, arcname=top)
    return out


@pytest.mark.parametrize("case, words", [
    ("missing", "no such file"),
    ("not-tar", "not a tar archive"),
    ("not-slurm", "not a Slurm source tarball"),
    ("bad-meta", "has no Version: line"),
])
def test_bad_sources_are_refused_in_one_line(tmp_path, case, words):
    if case == "missing":
        src = tmp_path / "nope.tar.gz"
    elif case == "not-tar":
        src = tmp_path / "x.tar.gz"
        src.write_text("hello")
    elif case == "not-slurm":
        src = make_tar(tmp_path, "y.tar.gz", {"pkg-1.0/README": "hi"})
    else:
        src = make_tar(tmp_path, "z.tar.gz", {"slurm-x/META": "Name: slurm\n", "slurm-x/configure": "#!/bin/sh\n",
                                              "slurm-x/src/slurmctld/x.c": ""})
    p = run(tmp_path, "--slurm-source", str(src))
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(f"slurm-build: error: --slurm-source {src}")
    assert words in p.stderr


@pytest.mark.skipif(os.geteuid() != 0 and os.environ.get("CI") != "true", reason="the build step needs root")
def test_a_failing_configure_names_the_build_log(tmp_path):
    src = make_tar(tmp_path, "slurm-99.1.0.tar.gz", {
        "slurm-99.1.0/META": "Version: 99.1.0\n",
        "slurm-99.1.0/configure": "#!/bin/sh\necho 'configure: error: something is missing' >&2\nexit 1\n",
        "slurm-99.1.0/src/slurmctld/x.c": ""})
    p = run(tmp_path, "--slurm-source", str(src), "--quiet")
    assert p.returncode == 1
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("slurm-build: error: Slurm 99.1.0: configure failed (build log: ")
    log = Path(last.split("build log: ")[1].rstrip(")"))
    assert log.exists() and "something is missing" in log.read_text()
