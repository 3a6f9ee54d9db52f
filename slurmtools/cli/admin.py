"""`slurmtools admin ...`: render the Slurm side of the site (slurm.conf fragment, gres.conf, topology.conf, sacctmgr)."""

from __future__ import annotations

from typing import List, Optional

import typer

from slurmtools.cli.common import SiteOpt

admin_app = typer.Typer(help="Admin tools: render Slurm configuration from the site description.", no_args_is_help=True)
render_app = typer.Typer(help="Render Slurm configuration from the site and its fabric.", no_args_is_help=True)
admin_app.add_typer(render_app, name="render")


def register(app: typer.Typer) -> None:
    app.add_typer(admin_app, name="admin")


def _site_and_fabric(site_path: str | None, need_fabric: bool):
    from slurmtools.errors import ConfigError
    from slurmtools.site import load_site
    from slurmtools.topology.sitefile import load_fabric

    site = load_site(site_path)
    if site.fabric_path is None:
        if need_fabric:
            raise ConfigError(str(site.source), "site.fabric", "this command needs a fabric file (site.fabric)")
        return site, None
    return site, load_fabric(site.fabric_path)


@render_app.command("slurm-conf")
def render_slurm_conf(
    site: Optional[str] = SiteOpt,
    node_param: List[str] = typer.Option([], "--node-param", help="Extra NodeName parameter, e.g. NodeAddr=10.0.0.1"),
    node_port_base: Optional[int] = typer.Option(None, "--node-port-base",
                                                 help="Give each node its own slurmd port from this one up "
                                                      "(several slurmd on one host, as in test labs)"),
) -> None:
    """Print the slurm.conf part that follows from the site: node lines, partitions, tiers' priority and preemption."""
    from slurmtools.render.slurm_conf import NodeLineOptions, render_slurm_conf as render

    for p in node_param:
        if "=" not in p:
            from slurmtools.cli.common import fail
            fail(f"--node-param: expected KEY=VALUE, got {p!r}")
    s, fabric = _site_and_fabric(site, need_fabric=False)
    typer.echo(render(s, fabric, NodeLineOptions(tuple(node_param), node_port_base)), nl=False)


@render_app.command("qos")
def render_qos(site: Optional[str] = SiteOpt) -> None:
    """Print the sacctmgr commands that create the site's tiers as QoS (priority, preemption, grace, limits)."""
    from slurmtools.render.accounting import as_shell, render_qos as render

    s, _ = _site_and_fabric(site, need_fabric=False)
    typer.echo(as_shell(render(s)), nl=False)


@render_app.command("accounts")
def render_accounts(site: Optional[str] = SiteOpt,
                    extra_user: List[str] = typer.Option([], "--extra-user",
                                                         help="Also give this user every tier (e.g. a test user)")) -> None:
    """Print the sacctmgr commands that create the site's accounts and users with their allowed tiers."""
    from slurmtools.render.accounting import as_shell, render_accounts as render

    s, _ = _site_and_fabric(site, need_fabric=False)
    typer.echo(as_shell(render(s, tuple(extra_user))), nl=False)


@render_app.command("gres-conf")
def render_gres(site: Optional[str] = SiteOpt,
                device_dir: str = typer.Option("/dev", "--device-dir", help="Folder of the nvidiaN device files")) -> None:
    """Print gres.conf: one line per GPU with File=, Cores= and Links=."""
    from slurmtools.render.slurm_conf import render_gres_conf

    _, fabric = _site_and_fabric(site, need_fabric=True)
    typer.echo(render_gres_conf(fabric, device_dir), nl=False)


@render_app.command("topology-conf")
def render_topology(site: Optional[str] = SiteOpt) -> None:
    """Print topology.conf (topology/tree) for the site's fabric."""
    from slurmtools.render.slurm_conf import render_topology_conf

    _, fabric = _site_and_fabric(site, need_fabric=True)
    typer.echo(render_topology_conf(fabric), nl=False)
