"""Capture typer's own `--help` (and `--version`) output for `launch.py` to serve without importing typer, and
the option grammar of the commands it runs directly (`launch.DIRECT`).

    .venv/bin/python -m slurmtools.cli.helpgen          # rewrite slurmtools/cli/_help_texts.py
    .venv/bin/python -m slurmtools.cli.helpgen --check  # exit 1 naming the first capture that differs

Run it after changing any command, option or help string; `tests/unit/test_cli_imports.py` fails until then, and
until then `slurmtools --help` is answered by typer itself (the stored key no longer matches the sources).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

#: the program names click shows: the installed script, and `python -m slurmtools`
PROGRAMS = ("slurmtools", "python -m slurmtools")
OUT = Path(__file__).with_name("_help_texts.py")


def command_paths(cmd, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group of the click tree, the root first."""
    out = [path]
    for name, sub in getattr(cmd, "commands", {}).items():
        out.extend(command_paths(sub, path + (name,)))
    return out


def real_output(cmd, args: list[str], prog: str) -> tuple[int, str]:
    """What typer prints for `args` run as `prog`, at the capture width, on a stdout that is not a terminal."""
    from slurmtools.cli.launch import CAPTURE_COLUMNS

    buf = io.StringIO()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(CAPTURE_COLUMNS)
    try:
        with contextlib.redirect_stdout(buf):
            rc = cmd.main(args=list(args), prog_name=prog, standalone_mode=False)
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    return (rc or 0), buf.getvalue()


def grammar(cmd) -> dict[str, dict[str, tuple[str, str, object]]]:
    """How `launch.direct` reads options: {"" for the root, or a `DIRECT` path: {option: (name, kind, default)}},
    kind one of "str", "int", "list" (a repeatable string option), "flag" (on only), and under the key "--" the
    command's positional words ("args"). Root options it cannot read (eager ones such as --version) are left out,
    so a line holding one goes to typer; a direct command with such a parameter stops the capture."""
    from slurmtools.cli.launch import DIRECT

    out: dict[str, dict[str, tuple[str, str, object]]] = {"": {}}
    for p in cmd.params:
        spec = _readable(p)
        if spec is not None and spec[1] != "args":
            out[""].update({o: spec for o in p.opts})
    for path in DIRECT:
        sub = cmd
        for word in path.split():
            sub = sub.commands[word]
        out[path] = {}
        for p in sub.params:
            spec = _readable(p)
            if spec is None:
                raise SystemExit(f"slurmtools: error: launch.DIRECT: `{path}` has {'/'.join(p.opts) or p.name}, which "
                                 "launch cannot read (only plain string, integer and repeatable string options, "
                                 "flags and one list of positional words; no callback, envvar, choice or range)")
            out[path].update({"--": spec} if spec[1] == "args" else {o: spec for o in p.opts})
    return out


def _readable(p) -> tuple[str, str, object] | None:
    """(name, kind, default) for a parameter `launch.direct` reads exactly as click does; None for anything else."""
    from typing import List

    td = getattr(p, "type_descriptor", None)
    ann = getattr(td, "annotation", None)
    special = td is None or any(getattr(td, a, False) for a in ("is_choice", "is_datetime", "is_file", "is_path",
                                                                 "is_ranged", "is_tuple"))
    common = (not special and p.callback is None and p.envvar is None and not p.required and p.expose_value
              and not p.is_eager and getattr(p, "prompt", None) is None)
    if common and getattr(p, "param_type_name", "") == "argument":
        if ann == List[str] and p.nargs == -1 and p.default is None:
            return (p.name, "args", None)
        return None
    plain = (common and getattr(p, "param_type_name", "") == "option" and p.nargs == 1 and not p.secondary_opts
             and not p.count and all(o.startswith("--") for o in p.opts))
    if not plain:
        return None
    if p.multiple:
        return (p.name, "list", None) if ann == List[str] and p.default is None else None
    if ann is str and not p.is_flag and (p.default is None or isinstance(p.default, str)):
        return (p.name, "str", p.default)
    if ann is int and not p.is_flag and p.default is None:
        return (p.name, "int", None)
    if ann is bool and p.is_bool_flag and p.default is False:
        return (p.name, "flag", False)
    return None


def capture() -> tuple[tuple[str, ...], dict[str, dict[str, str]], dict]:
    """(the source files the app was built from, {program: {"args": text}}, the direct commands' grammar) from
    typer's real app."""
    import typer.main

    from slurmtools.cli.main import app

    cmd = typer.main.get_command(app)
    sources = app_sources()
    texts: dict[str, dict[str, str]] = {}
    for prog in PROGRAMS:
        per = texts[prog] = {}
        for args in [["--version"]] + [[*p, "--help"] for p in command_paths(cmd)]:
            rc, text = real_output(cmd, args, prog)
            if rc != 0:
                raise SystemExit(f"slurmtools: error: {' '.join(args)} exited {rc} under typer; not captured")
            per[" ".join(args)] = text
    return sources, texts, grammar(cmd)


def app_sources() -> tuple[str, ...]:
    """The slurmtools modules that building the app loads (paths under the checkout or site-packages), found in a
    fresh interpreter so what this process imported for other reasons does not count."""
    import json
    import subprocess

    code = ("import json, sys, typer.main\n"
            "from slurmtools.cli.main import app\n"
            "typer.main.get_command(app)\n"
            "print(json.dumps(sorted(m.__file__ for n, m in list(sys.modules.items())\n"
            "                        if (n == 'slurmtools' or n.startswith('slurmtools.')) and getattr(m, '__file__', None))))\n")
    files = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    root = Path(__file__).resolve().parents[2]
    return tuple(sorted(str(Path(f).resolve().relative_to(root)) for f in files)) + ("typer",)


def render(sources: tuple[str, ...], texts: dict[str, dict[str, str]], options: dict) -> str:
    from slurmtools.cli.launch import source_key

    lines = ['"""Generated by `python -m slurmtools.cli.helpgen` from typer\'s own output; do not edit."""', "",
             f"SOURCES = {sources!r}", f"KEY = {source_key(sources)!r}", "TEXTS = {"]
    for prog, per in texts.items():
        lines.append(f"    {prog!r}: {{")
        lines.extend(f"        {k!r}: {v!r}," for k, v in per.items())
        lines.append("    },")
    lines.append("}")
    lines.append(f"GRAMMAR = {options!r}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    new = render(*capture())
    if "--check" in argv:
        old = OUT.read_text() if OUT.exists() else ""
        if old != new:
            print(f"slurmtools: error: {OUT} is out of date: run python -m slurmtools.cli.helpgen", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(new)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
