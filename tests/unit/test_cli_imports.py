"""Light commands stay light, and the prebuilt help that `slurmtools.cli.launch` serves is typer's own output.

Heavy modules (pandas, numpy, networkx, matplotlib, jinja2, pyarrow, pyslurm; yaml, which only the topology.yaml
reader needs) belong to the commands that use them: `--help` of any command, through typer or through the prebuilt
text, must not import one. The prebuilt text must equal what typer prints, for every command and both program names,
or `launch` must not serve it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmtools.cli import _help_texts, helpgen, launch

HEAVY = ("pandas", "numpy", "networkx", "matplotlib", "jinja2", "pyarrow", "pyslurm", "yaml")
REPO = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in launch._TYPER_ENV and k not in ("COLUMNS",
                                                                                            "SLURMTOOLS_PREBUILT_HELP")}
    env.update(extra)
    return env


def _imported(stderr: str) -> set[str]:
    """Top-level package names from `python -X importtime` lines (`import time: self | cumulative | name`)."""
    out = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "imported package":
                out.add(name.split(".")[0])
    return out


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=_env(**env), cwd=REPO, timeout=60)


@pytest.fixture(scope="module")
def typer_cmd():
    import typer.main

    from slurmtools.cli.main import app

    return typer.main.get_command(app)


def test_every_help_under_typer_imports_no_heavy_module():
    """Each command's --help run through the real typer app, in one fresh interpreter: no heavy module appears."""
    code = ("import json, sys, typer.main\n"
            "from slurmtools.cli.helpgen import command_paths, real_output\n"
            "from slurmtools.cli.main import app\n"
            "cmd = typer.main.get_command(app)\n"
            f"heavy = {HEAVY!r}\n"
            "out = {}\n"
            "for p in [('--version',)] + [(*p, '--help') for p in command_paths(cmd)]:\n"
            "    rc, text = real_output(cmd, list(p), 'slurmtools')\n"
            "    out[' '.join(p)] = [rc, len(text), sorted(h for h in heavy if h in sys.modules)]\n"
            "print(json.dumps(out))\n")
    p = _run([sys.executable, "-c", code])
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert "plan --help" in got and "cluster show --help" in got and "topo import --help" in got
    for args, (rc, size, heavy) in got.items():
        assert (rc, heavy) == (0, []), f"slurmtools {args} imported {heavy}"
        assert size > 10, f"slurmtools {args} printed nothing"


@pytest.mark.parametrize("args", [["--help"], ["plan", "--help"], ["cluster", "--help"], ["cluster", "show", "--help"],
                                  ["topo", "--help"], ["report", "--help"], ["admin", "render", "--help"]])
def test_light_commands_as_processes_import_nothing_heavy(args):
    """A real `python -m slurmtools ARGS` with -X importtime: the prebuilt answer imports neither typer nor a heavy
    module and prints typer's text; forced through typer it imports no heavy module either."""
    fast = _run([sys.executable, "-X", "importtime", "-m", "slurmtools", *args])
    assert fast.returncode == 0, fast.stderr
    mods = _imported(fast.stderr)
    assert "slurmtools" in mods  # the parse works
    assert not mods & {"typer", "pydantic", *HEAVY}, f"prebuilt `{' '.join(args)}` imported {mods & {'typer', *HEAVY}}"
    assert fast.stdout == _help_texts.TEXTS["python -m slurmtools"][" ".join(args)]
    slow = _run([sys.executable, "-X", "importtime", "-m", "slurmtools", *args], SLURMTOOLS_PREBUILT_HELP="0")
    assert slow.returncode == 0, slow.stderr
    mods = _imported(slow.stderr)
    assert "typer" in mods
    assert not mods & set(HEAVY), f"`{' '.join(args)}` under typer imported {mods & set(HEAVY)}"
    assert slow.stdout == fast.stdout


def test_captures_are_current_and_complete(typer_cmd):
    """The stored key matches the sources now, and every command of the app has a capture (and nothing else)."""
    sources = helpgen.app_sources()
    fix = "out of date: run .venv/bin/python -m slurmtools.cli.helpgen"
    assert _help_texts.SOURCES == sources, fix
    assert _help_texts.KEY == launch.source_key(sources), fix
    want = {"--version"} | {" ".join((*p, "--help")) for p in helpgen.command_paths(typer_cmd)}
    for prog in helpgen.PROGRAMS:
        assert set(_help_texts.TEXTS[prog]) == want, fix


def test_every_capture_equals_typer_output(typer_cmd):
    """Each stored text, for both program names, is byte for byte what typer prints now."""
    n = 0
    for prog, texts in _help_texts.TEXTS.items():
        for args, text in texts.items():
            rc, real = helpgen.real_output(typer_cmd, args.split(), prog)
            assert rc == 0
            assert text == real, f"`{prog} {args}` differs from typer: run .venv/bin/python -m slurmtools.cli.helpgen"
            n += 1
    assert n >= 2 * 40


@pytest.mark.parametrize("args", [["--help"], ["plan", "--help"], ["admin", "policy", "check-update", "--help"],
                                  ["--version"]])
def test_installed_script_and_module_print_what_typer_prints(tmp_path, args):
    """Whole processes, under both program names click can detect: the prebuilt answer equals typer's."""
    script = tmp_path / "slurmtools"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom slurmtools.cli.launch import run\nsys.exit(run())\n")
    script.chmod(0o755)
    for argv in ([str(script), *args], [sys.executable, "-m", "slurmtools", *args]):
        fast = _run(argv)
        real = _run(argv, SLURMTOOLS_PREBUILT_HELP="0")
        assert (fast.returncode, real.returncode) == (0, 0), real.stderr
        assert fast.stdout == real.stdout
        assert fast.stdout.startswith("slurmtools 0" if args == ["--version"] else "Usage: ")
    assert _run([str(script), "plan", "--help"]).stdout.startswith("Usage: slurmtools plan [OPTIONS]")


def test_narrow_terminal_goes_to_typer():
    """Below the capture width typer wraps differently: the launcher must not serve the capture."""
    p = _run([sys.executable, "-X", "importtime", "-m", "slurmtools", "plan", "--help"], COLUMNS="60")
    assert p.returncode == 0
    assert "typer" in _imported(p.stderr)
    assert p.stdout != _help_texts.TEXTS["python -m slurmtools"]["plan --help"]
    assert max(len(line) for line in p.stdout.splitlines()) <= 58


def test_stale_key_unknown_program_or_variables_are_not_served(monkeypatch):
    monkeypatch.setattr(launch, "program_name", lambda: "slurmtools")
    monkeypatch.setattr(launch, "_columns", lambda: 200)
    for k in launch._TYPER_ENV + ("SLURMTOOLS_PREBUILT_HELP",):
        monkeypatch.delenv(k, raising=False)
    assert launch.prebuilt(["plan", "--help"]) == _help_texts.TEXTS["slurmtools"]["plan --help"]
    monkeypatch.setenv("TYPER_USE_RICH", "1")
    assert launch.prebuilt(["plan", "--help"]) is None
    monkeypatch.delenv("TYPER_USE_RICH")
    monkeypatch.setattr(_help_texts, "KEY", "00000000")
    assert launch.prebuilt(["plan", "--help"]) is None
    monkeypatch.undo()
    monkeypatch.setattr(launch, "program_name", lambda: "st")
    monkeypatch.setattr(launch, "_columns", lambda: 200)
    assert launch.prebuilt(["plan", "--help"]) is None


TOKENS = st.sampled_from(["--help", "--version", "plan", "cluster", "show", "admin", "render", "qos", "--gpus", "8",
                          "-h", "--json", "topo", "nosuch", ""])


@settings(max_examples=300, deadline=None)
@given(st.lists(TOKENS, max_size=5))
def test_only_exact_captured_argument_lists_are_served(args):
    """Any other argument list (options before --help, unknown commands, `-h`) goes to typer."""
    import unittest.mock as um

    with um.patch.object(launch, "program_name", lambda: "slurmtools"), \
            um.patch.object(launch, "_columns", lambda: 120), um.patch.dict(os.environ, {}, clear=False):
        for k in launch._TYPER_ENV + ("SLURMTOOLS_PREBUILT_HELP",):
            os.environ.pop(k, None)
        got = launch.prebuilt(list(args))
    want = _help_texts.TEXTS["slurmtools"].get(" ".join(args))
    assert got == want


def test_no_help_text_of_any_command_shows_an_escaped_percent():
    """click prints help as written: a `%%` (argparse's escape) reached users as `10%%` in `plan --help`."""
    import typer

    from slurmtools.cli.main import app

    def walk(cmd, ctx):   # typer's own click (typer._click in 0.29): commands and groups by what they answer
        yield ctx.command_path, cmd.get_help(ctx)
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                yield from walk(sub, sub.context_class(sub, info_name=name, parent=ctx))

    root = typer.main.get_command(app)
    helps = dict(walk(root, root.context_class(root, info_name="slurmtools")))
    assert len(helps) > 40 and "slurmtools plan" in helps
    assert [path for path, text in helps.items() if "%%" in text] == []
