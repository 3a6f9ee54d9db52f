"""Entry point: builds the typer app from the command-group modules and turns errors into one line."""

from __future__ import annotations

import typer

from slurmtools import __version__

app = typer.Typer(
    name="slurmtools",
    help="Topology-aware job planning, tiered policy and GPU utilization reports for Slurm GPU clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _one_line_usage_errors() -> None:
    """click shows a usage error (a bad or unknown option, a value out of range, a missing argument) as the usage
    line, a hint and `Error: ...`: four lines. slurmtools says every bad input in one line naming the option, so
    its usage errors do too, with where the options are listed. Help shown for a bare group is not an error and
    keeps its own `show`."""
    import sys

    try:
        from typer.core import _click   # a recent typer carries its own click
    except ImportError:
        import click as _click          # an earlier one (pyproject allows 0.12 on) runs on click itself

    from slurmtools.errors import one_line

    def show(self, file=None) -> None:
        see = f" (see `{self.ctx.command_path} --help`)" if self.ctx is not None else ""
        print(f"slurmtools: error: {one_line(self.format_message())}{see}", file=file or sys.stderr)

    _click.exceptions.UsageError.show = show


_one_line_usage_errors()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"slurmtools {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                        help="Print the version and exit"),
          backend: str = typer.Option(None, "--backend", show_default=False,
                                      help="How to reach Slurm: auto (default: pyslurm when it is built for the "
                                           "running Slurm, else Slurm's commands), commands or pyslurm; also "
                                           "$SLURMTOOLS_BACKEND")) -> None:
    """Topology-aware job planning, tiered policy and GPU utilization reports for Slurm GPU clusters."""
    if backend is not None:
        from slurmtools.slurm.backends import BACKENDS, force

        if not force(backend):  # sets what backends.get_backend, the one place that chooses, reads
            from slurmtools.cli.common import fail

            fail(f"--backend: expected auto, {', '.join(BACKENDS)}; got {backend!r}")


def _register() -> None:
    # Each module only imports typer at the top, so registering every group stays cheap.
    import importlib

    for mod in ("site", "cluster", "admin", "policy", "topo", "jobs", "report", "audit", "slack", "advise", "sandbox"):
        try:
            m = importlib.import_module(f"slurmtools.cli.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name == f"slurmtools.cli.{mod}":
                continue  # command group not built yet
            raise
        m.register(app)


_register()


def run() -> None:
    from slurmtools.cli.launch import guarded

    guarded(app)


if __name__ == "__main__":
    run()
