"""`slurmtools cluster show`: nodes, GPUs free/used by type, partitions and tiers, from the live Slurm (the body is
`cluster_show.py`, which `launch.py` may run without typer)."""

from __future__ import annotations

from typing import Optional

import typer

from slurmtools.cli.common import JsonOpt, SiteOpt

cluster_app = typer.Typer(help="Look at the live cluster.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(cluster_app, name="cluster")


@cluster_app.command("show")
def show(site: Optional[str] = SiteOpt, json_out: bool = JsonOpt) -> None:
    """Nodes, GPUs free/used by type, partitions and tiers."""
    from slurmtools.cli.cluster_show import show as run

    run(site=site, json_out=json_out)
