"""What several unit tests run in this process: the CLI as its console script runs it, and a commands backend
whose sacct prints a given text (slurmtools' reading of sacct's text; what the real sacct prints is checked by the
lab tests, `tests/integration/test_sacct_window_lab.py` and the sandbox's)."""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stderr, redirect_stdout
from unittest import mock


def cli(*args: str) -> tuple[int, str, str]:
    """`slurmtools ARGS` in this process, as the console script runs it: (exit code, stdout, stderr)."""
    from slurmtools.cli.main import run

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with mock.patch.object(sys, "argv", ["slurmtools", *args]), redirect_stdout(out), redirect_stderr(err):
        try:
            run()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def sacct_printing(text: str):
    """A commands backend whose sacct prints `text` (`argv`: the command line it was run with)."""
    from slurmtools.slurm.commands import CommandBackend

    class Backend(CommandBackend):
        argv: list = []

        def run(self, argv, *a, **kw):
            self.argv = list(argv)
            return text
    return Backend(env={})
