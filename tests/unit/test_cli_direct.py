"""Commands `slurmtools.cli.launch` runs without typer (`launch.DIRECT`): each command line it reads, it reads as
typer does (same command, same option values, same backend); every other line goes to typer, which gives the usage
errors; and a direct run prints what the typer app prints, errors included, without importing typer."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import unittest.mock as um
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmtools.cli import _help_texts, launch

REPO = Path(__file__).resolve().parents[2]


def _clean_env() -> dict[str, str]:
    drop = (*launch._TYPER_ENV, "SLURMTOOLS_DIRECT", "SLURMTOOLS_PREBUILT_HELP", "SLURMTOOLS_BACKEND", "COLUMNS")
    return {k: v for k, v in os.environ.items() if k not in drop}


def typer_reading(args: list[str]):
    """What the typer app makes of `args`: ("path", backend, {option: value}) when it runs a direct command's body,
    "other" when it runs something else, or the exit code of a usage error."""
    import typer.main

    from slurmtools.cli.main import app

    seen = []
    patches = []
    for path, (module, func) in launch.DIRECT.items():
        patches.append(um.patch.object(importlib.import_module(module), func,
                                       lambda *a, _p=path, **kw: seen.append((_p, a, kw))))
    with um.patch.dict(os.environ, _clean_env(), clear=True):
        for p in patches:
            p.start()
        try:
            code = typer.main.get_command(app).main(args=list(args), prog_name="slurmtools", standalone_mode=False)
            if isinstance(code, int) and code and not seen:
                # outside standalone mode click returns the code of a typer.Exit (fail(): a refused --backend)
                return code
        except SystemExit as exc:
            return exc.code
        except Exception as exc:  # click's usage errors, typer.Exit from fail()
            return getattr(exc, "exit_code", 1)
        finally:
            for p in patches:
                p.stop()
        backend = os.environ.get("SLURMTOOLS_BACKEND")
    if not seen:
        return "other"
    (path, a, kw), = seen
    assert a == (), "the typer command must hand its options to the body by name"
    return path, backend, kw


def direct_reading(args: list[str]):
    with um.patch.dict(os.environ, _clean_env(), clear=True):
        return launch.direct(list(args))


@pytest.mark.parametrize("args", [
    ["cluster", "show"], ["cluster", "show", "--json"], ["cluster", "show", "--site", "a.toml", "--json"],
    ["cluster", "show", "--json", "--site=a.toml"], ["--backend", "commands", "cluster", "show"],
    ["--backend=auto", "cluster", "show", "--site", "x y.toml"],
    ["plan", "--json"], ["plan", "--idle", "--json", "--gpus", "64", "--tier", "production", "--", "python", "t.py"],
    ["plan", "--gpus=08", "python", "--env", "A=1", "--env=B=2", "t.py", "--", "--lr", "-1"], ["plan", "--"],
    ["plan", "--time", "2h", "--comm=pipeline", "--name", "x", "--sweep", "a b", "--sweep", "c", "--handles-signal"],
    ["--backend", "commands", "plan", "--site", "s.toml", "--nodes", "2", "--gpus-per-node", "4", "--", "--"],
])
def test_common_lines_are_run_directly_and_read_as_typer_reads_them(args):
    got = direct_reading(args)
    assert got is not None, f"{args} should not need typer"
    path, root, options = got
    assert typer_reading(args) == (path, root.get("backend"), options)


@pytest.mark.parametrize("args", [
    ["cluster", "show", "--site"], ["cluster", "show", "--site", "--json"], ["cluster", "show", "--json", "--json"],
    ["cluster", "show", "--json=1"], ["cluster", "show", "-h"], ["cluster", "show", "extra"],
    ["cluster", "show", "--sit", "a"], ["cluster", "show", "--", "--json"], ["cluster", "--json", "show"],
    ["--version", "cluster", "show"], ["cluster", "show", "--help"], ["cluster", "show", "--site="],
    ["--backend", "cluster", "show"], ["cluster"], [],
    ["plan", "--gpus", "x"], ["plan", "--gpus", "+8"], ["plan", "--gpus", "-1"], ["plan", "--gpus", "\u0668"],
    ["plan", "--gpus", "8", "--gpus", "9"], ["plan", "--env"], ["plan", "-"], ["plan", "-g", "8"], ["plan", "--=x"],
    ["plan", "--name=-x"], ["plan", "--idle=yes"], ["plan", "--gpus", ""], ["plan", "--help"],
])
def test_lines_click_might_read_otherwise_go_to_typer(args):
    assert direct_reading(args) is None


def test_stale_grammar_or_opt_out_goes_to_typer(monkeypatch):
    assert direct_reading(["cluster", "show"]) is not None
    monkeypatch.setattr(_help_texts, "KEY", "00000000")
    assert direct_reading(["cluster", "show"]) is None
    monkeypatch.undo()
    with um.patch.dict(os.environ, {"SLURMTOOLS_DIRECT": "0"}):
        assert launch.direct(["cluster", "show"]) is None


WORDS = st.sampled_from(["--backend", "commands", "auto", "bogus", "--site", "a.toml", "--site=b.toml", "--site=",
                         "--json", "--json=yes", "cluster", "show", "plan", "--", "-j", "x", "--sit", "--help",
                         "--version", "", "--gpus", "8", "08", "-1", "--env", "A=1", "--idle", "--time", "python"])


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, max_size=7))
def test_whatever_is_run_directly_typer_reads_the_same(args):
    """Any line: when launch would run it directly, typer runs the same body with the same options and backend
    (or, for a backend typer refuses, launch hands the line to typer: `run` checks it with `backends.force`)."""
    got = direct_reading(args)
    if got is None:
        return
    path, root, options = got
    from slurmtools.slurm.backends import BACKENDS

    if root.get("backend") not in (None, "auto", *BACKENDS):
        assert typer_reading(args) == 2
        return
    assert typer_reading(args) == (path, root.get("backend"), options)


def _process(argv: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "slurmtools", *argv], capture_output=True,
                          text=True, cwd=REPO, timeout=120, env={**_clean_env(), **env})


def _imported(stderr: str) -> set[str]:
    return {ln.rsplit("|", 1)[1].strip().split(".")[0] for ln in stderr.splitlines()
            if ln.startswith("import time:") and "|" in ln}


def _said(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if not ln.startswith("import time:")]


@pytest.mark.parametrize("argv, env", [
    (["cluster", "show", "--site", "/nonexistent/site.toml"], {}),
    (["--backend", "bogus", "cluster", "show"], {}),
    (["cluster", "show", "--json"], {"SLURM_CONF": "/nonexistent/slurm.conf", "SLURMTOOLS_BACKEND": "commands"}),
])
def test_direct_errors_are_typers_errors_without_typer(argv, env):
    """Without a reachable Slurm (unit tests): a missing site file, a backend typer refuses and an unreachable
    Slurm end the same way on both paths, in one line; only the bad backend needed typer."""
    direct = _process(argv, **env)
    typer_ = _process(argv, SLURMTOOLS_DIRECT="0", **env)
    assert direct.returncode == typer_.returncode != 0
    assert _said(direct.stderr) == _said(typer_.stderr) and len(_said(direct.stderr)) == 1, direct.stderr
    assert _said(direct.stderr)[0].startswith("slurmtools: error: ")
    assert ("typer" in _imported(direct.stderr)) == ("bogus" in argv)
    assert "typer" in _imported(typer_.stderr)


def test_a_closed_pipe_ends_a_command_quietly_as_click_does():
    """`slurmtools cluster show --json | head -1`: the reader goes away; the command ends with exit 1 and no
    traceback (what click does for typer's commands), not a BrokenPipeError at exit."""
    code = ("import sys\nfrom slurmtools.cli.launch import guarded\n"
            "def body():\n    sys.stdout.write('x')\n    raise BrokenPipeError(32, 'Broken pipe')\n"
            "guarded(body)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert (p.returncode, p.stderr) == (1, "")


PLAN = ["plan", "--idle", "--site", str(REPO / "site_configs" / "example" / "site.toml"), "--user", "alice"]


@pytest.mark.parametrize("argv", [
    [*PLAN, "--json", "--gpus", "16", "--tier", "production", "--", "python", "train.py", "--lr", "0.1"],
    [*PLAN, "--gpus", "8", "--env", "A=1", "--name", "x", "--", "python", "train.py"],
    [*PLAN, "--gpus", "4", "--comm", "bogus", "--", "python", "train.py"],
    [*PLAN, "--gpus", "4", "--sacct-file", "x.txt", "--", "python", "train.py"],
    [*PLAN[:-1], "nobody", "--gpus", "4", "--", "python", "train.py"],
])
def test_plan_prints_the_same_with_and_without_typer(argv):
    """`plan` (JSON, text, and three errors: a bad option value, an option that needs another, a user of no
    account) prints the same on both paths, with the same exit code; the direct one never imports typer."""
    direct = _process(argv)
    typer_ = _process(argv, SLURMTOOLS_DIRECT="0")
    assert (direct.returncode, direct.stdout, _said(direct.stderr)) == \
        (typer_.returncode, typer_.stdout, _said(typer_.stderr))
    assert "typer" not in _imported(direct.stderr) and "typer" in _imported(typer_.stderr)
    if direct.returncode:
        assert len(_said(direct.stderr)) == 1 and _said(direct.stderr)[0].startswith("slurmtools: error: ")
    else:
        assert "#SBATCH" in direct.stdout
