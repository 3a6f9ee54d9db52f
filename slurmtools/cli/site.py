"""`slurmtools site check [PATH]`: validate a site file and summarise it."""

from __future__ import annotations

from typing import Optional

import typer

from slurmtools.cli.common import JsonOpt, print_json

site_app = typer.Typer(help="Inspect and validate the site configuration.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(site_app, name="site")


@site_app.command("check")
def check(path: Optional[str] = typer.Argument(None, help="Site file (default: the site lookup order)"),
          json_out: bool = JsonOpt) -> None:
    """Validate a site file (and its fabric file) and print a summary."""
    from slurmtools.durations import human
    from slurmtools.site import load_site
    from slurmtools.site.summary import summarise

    site = load_site(path)
    fabric = None
    if site.fabric_path:
        from slurmtools.topology.sitefile import load_fabric

        fabric = load_fabric(site.fabric_path)
    info = summarise(site, fabric)
    if json_out:
        print_json(info)
        return
    typer.echo(f"site {site.name} (cluster {site.cluster_name}) from {site.source}: OK")
    if fabric:
        typer.echo(f"  fabric {fabric.name}: {len(fabric.hosts)} hosts, {info['gpus_total']} GPUs, "
                   f"{len(fabric.leaves)} leaf switches, {len(fabric.spines)} spine switches")
    for p in site.partitions.values():
        typer.echo(f"  partition {p.name}{' (default)' if p.default else ''}: {p.nodes}, "
                   f"max time {human(p.max_time)}, GPU types {', '.join(p.gpu_types)}")
    for t in site.tiers_by_priority():
        pre = f"preemptible by {', '.join(t.preempted_by)} after {human(t.grace_time)}" if t.preemptible \
            else "not preemptible"
        lim = f"max {t.max_gpus_per_job or 'any'} GPUs/job, {human(t.max_walltime)}"
        typer.echo(f"  tier {t.name} (priority {t.priority}): {pre}; {lim}")
    for a in site.accounts.values():
        budget = f"{a.monthly_gpu_hours:g} GPU-h/month" if a.monthly_gpu_hours is not None else "no budget"
        typer.echo(f"  account {a.name}: {budget}, users {', '.join(a.users) or '-'}")
