"""What commands print, without typer (so the commands `launch.py` runs directly can share it)."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


#: an ANSI style sequence, as click recognises one (click strips them from output that is not a terminal)
_ANSI = None


def echo(text: str, err: bool = False, nl: bool = True) -> None:
    """`typer.echo` for text, without typer: the line on stdout (stderr with `err`), ANSI style sequences removed
    when the stream is not a terminal, flushed. Commands that run both with and without typer print through this,
    so both print the same."""
    global _ANSI
    stream = sys.stderr if err else sys.stdout
    out = text + "\n" if nl else text
    if not out:
        stream.flush()
        return
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty and "\033" in out:
        if _ANSI is None:
            import re

            _ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")
        out = _ANSI.sub("", out)
    stream.write(out)
    stream.flush()
