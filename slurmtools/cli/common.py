"""Helpers shared by the CLI modules: site loading from --site, JSON output, one-line errors."""

from __future__ import annotations

import typer

from slurmtools.cli.output import print_json  # noqa: F401  (re-exported: the commands import it from here)

SiteOpt = typer.Option(None, "--site", help="Site file (default: $SLURMTOOLS_SITE, /etc/slurmtools/site.toml, "
                                            "else the bundled example site)", show_default=False)
JsonOpt = typer.Option(False, "--json", help="Machine-readable JSON output")
#: the zone of a saved sacct dump (`report`, `advise`), checked by `cli.report.report_zone`
TzOpt = typer.Option(None, "--tz", help="The time zone a --sacct-file dump was written in, an IANA name such as "
                                        "Europe/Berlin (default: this machine's, TZ)")
SlurmVersionOpt = typer.Option(None, "--slurm-version", help="Slurm release that will read the output, e.g. 25.11 "
                                                             "(default: the installed `scontrol --version`)",
                               show_default=False)


def slurm_release(version: str | None):
    """The release to render for: the one named, else the installed Slurm's (never a guess)."""
    from slurmtools.slurm.releases import release_for

    if version:
        return release_for(version)
    from slurmtools.slurm.commands import installed_version

    return release_for(installed_version())


def load_site(path: str | None):
    from slurmtools.site import load_site as _load

    return _load(path)


def backend():
    from slurmtools.slurm.backend import get_backend

    return get_backend()


def fail(message: str, code: int = 2) -> None:
    """End the command with one line on stderr and a non-zero exit."""
    from slurmtools.errors import short_quotes

    typer.echo(f"slurmtools: error: {short_quotes(message)}", err=True)
    raise typer.Exit(code)
