"""Helpers for the site-check tests: copies of the example site with one edit, and the CLI run in-process (the
same `run()` the console script calls, so its error handling is what a user sees)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from slurmtools.resources import example_site

EXAMPLE_TEXT = example_site().read_text()
FABRIC = (example_site().parent / "../../topology/example/fabric.toml").resolve()
#: the example site with its fabric named by absolute path, so a copy in any folder finds it
BASE = EXAMPLE_TEXT.replace('fabric = "../../topology/example/fabric.toml"', f'fabric = "{FABRIC}"')
assert BASE != EXAMPLE_TEXT


def edited(tmp_path: Path, old: str, new: str, text: str = BASE, name: str = "site.toml") -> Path:
    """The example site with `old` replaced by `new` once (the edit must apply)."""
    assert old in text, old
    p = tmp_path / name
    p.write_text(text.replace(old, new, 1))
    return p


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


def fabric_site(tmp_path: Path, *edits: tuple[str, str]) -> tuple[Path, Path]:
    """A copy of the example site whose fabric file is the example fabric with `edits` (old, new) made once each."""
    text = FABRIC.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    fab = tmp_path / "fabric.toml"
    fab.write_text(text)
    return edited(tmp_path, f'fabric = "{FABRIC}"', f'fabric = "{fab}"', text=BASE), fab


def cli(*args: str) -> Result:
    """`slurmtools ARGS` in this process (`tests.inproc.cli`); an exception that escapes the CLI's handler fails the
    test."""
    from tests.inproc import cli as run_cli

    return Result(*run_cli(*args))


def refusal(*args: str) -> str:
    """The one-line error of a command that must refuse with exit 2; returns the line after `slurmtools: error: `."""
    r = cli(*args)
    assert r.code == 2, (r.code, r.out[-500:], r.err)
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("slurmtools: error: "), r.err
    return lines[0][len("slurmtools: error: "):]
