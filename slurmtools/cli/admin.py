"""`slurmtools admin ...`: render the Slurm side of the site (slurm.conf fragment, gres.conf, topology.conf, sacctmgr)."""

from __future__ import annotations

from typing import List, Optional

import typer

from slurmtools.cli.common import SiteOpt, SlurmVersionOpt, slurm_release

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
    slurm_version: Optional[str] = SlurmVersionOpt,
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
    release = slurm_release(slurm_version)
    typer.echo(render(s, fabric, release, NodeLineOptions(tuple(node_param), node_port_base)), nl=False)


@render_app.command("qos")
def render_qos(site: Optional[str] = SiteOpt, slurm_version: Optional[str] = SlurmVersionOpt,
               only: Optional[str] = typer.Option(None, "--only", help="create: only the QoS names (before slurmctld "
                                                  "starts); settings: only their limits (once it runs)")) -> None:
    """Print the sacctmgr commands that create the site's tiers as QoS (priority, preemption, grace, limits)."""
    from slurmtools.render.accounting import as_shell, render_qos as render

    if only not in (None, "create", "settings"):
        from slurmtools.cli.common import fail
        fail(f"--only: expected create or settings, got {only!r}")
    s, _ = _site_and_fabric(site, need_fabric=False)
    if slurm_version:
        slurm_release(slurm_version)  # an unknown release is refused here too
    typer.echo(as_shell(render(s, only)), nl=False)


@render_app.command("accounts")
def render_accounts(site: Optional[str] = SiteOpt,
                    extra_user: List[str] = typer.Option([], "--extra-user",
                                                         help="Also give this user every tier (e.g. a test user)")) -> None:
    """Print the sacctmgr commands that create the site's accounts and users with their allowed tiers."""
    from slurmtools.render.accounting import as_shell, render_accounts as render

    s, _ = _site_and_fabric(site, need_fabric=False)
    typer.echo(as_shell(render(s, tuple(extra_user))), nl=False)


@render_app.command("gres-conf")
def render_gres(site: Optional[str] = SiteOpt, slurm_version: Optional[str] = SlurmVersionOpt,
                device_dir: str = typer.Option("/dev", "--device-dir", help="Folder of the nvidiaN device files")) -> None:
    """Print gres.conf: one line per GPU with File=, Cores= and Links=."""
    from slurmtools.render.slurm_conf import render_gres_conf

    _, fabric = _site_and_fabric(site, need_fabric=True)
    if slurm_version:
        slurm_release(slurm_version)
    typer.echo(render_gres_conf(fabric, device_dir), nl=False)


BlockSizesOpt = typer.Option(None, "--block-sizes", help="topology/block: BlockSizes in nodes, e.g. 4,16 (default: "
                                                         "the largest block, then doublings that fit a switch)")


def _topology(site: Optional[str], slurm_version: Optional[str], block_sizes: Optional[str]):
    from slurmtools.render.slurm_conf import site_topology

    s, fabric = _site_and_fabric(site, need_fabric=True)
    return site_topology(s, fabric, slurm_release(slurm_version), _sizes(block_sizes))


def _sizes(text: Optional[str]):
    if not text:
        return None
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        from slurmtools.cli.common import fail
        fail(f"--block-sizes: expected comma-separated node counts like 4,16, got {text!r}")


@render_app.command("topology-conf")
def render_topology(site: Optional[str] = SiteOpt, slurm_version: Optional[str] = SlurmVersionOpt,
                    block_sizes: Optional[str] = BlockSizesOpt) -> None:
    """Print topology.conf (tree or block, as the site's partitions say) for the site's fabric."""
    name, text = _topology(site, slurm_version, block_sizes)
    if name != "topology.conf":
        from slurmtools.cli.common import fail
        fail("the site's partitions use different topologies: they need topology.yaml "
             "(slurmtools admin render topology-yaml)")
    typer.echo(text, nl=False)


@render_app.command("topology-yaml")
def render_topology_yaml(site: Optional[str] = SiteOpt, slurm_version: Optional[str] = SlurmVersionOpt,
                         block_sizes: Optional[str] = BlockSizesOpt) -> None:
    """Print topology.yaml: one topology per kind the site's partitions use (Slurm 25.05 and later)."""
    from slurmtools.render.slurm_conf import site_topology

    s, fabric = _site_and_fabric(site, need_fabric=True)
    _, text = site_topology(s, fabric, slurm_release(slurm_version), _sizes(block_sizes), force_yaml=True)
    typer.echo(text, nl=False)


@render_app.command("topology")
def render_topology_files(out_dir: str = typer.Option(..., "--out-dir", help="Folder of slurm.conf"),
                          site: Optional[str] = SiteOpt, slurm_version: Optional[str] = SlurmVersionOpt,
                          block_sizes: Optional[str] = BlockSizesOpt) -> None:
    """Write topology.conf or topology.yaml into OUT_DIR, whichever the site needs, and remove the other one
    (Slurm reads topology.yaml first: a stale one would hide a new topology.conf). Prints the file written."""
    from pathlib import Path

    from slurmtools.cli.common import fail

    d = Path(out_dir)
    if not d.is_dir():
        fail(f"--out-dir: {out_dir}: not a folder")
    name, text = _topology(site, slurm_version, block_sizes)
    target = d / name
    tmp = d / (name + ".new")
    tmp.write_text(text)
    tmp.chmod(0o644)   # slurmctld reads it as SlurmUser: not root's alone under a 077 umask
    tmp.replace(target)
    other = d / ("topology.yaml" if name == "topology.conf" else "topology.conf")
    if other.exists():
        other.unlink()
    typer.echo(str(target))


@render_app.command("node-expectations")
def render_node_expectations(
    source: Optional[str] = typer.Argument(None, help="Topology JSON, fabric TOML, or a provider's input (default: "
                                                      "the site's fabric)", show_default=False),
    site: Optional[str] = SiteOpt,
    host: List[str] = typer.Option([], "--host", help="Only these hosts (default: every host of the graph)"),
    out: Optional[str] = typer.Option(None, "--out", help="Write the file here (e.g. /etc/slurm/"
                                                          "slurmtools-node-expectations.json) instead of stdout"),
) -> None:
    """Print the node expectations the prolog checks each node's links against (GPU count, NVLinks and PCIe per
    GPU, HCA rate): install it as /etc/slurm/slurmtools-node-expectations.json on every node (configless too),
    owned by root. Facts the graph does not state are null and not checked; a summary of what will and will not be
    checked goes to stderr."""
    from slurmtools.cli.common import fail
    from slurmtools.cli.topo import load_topology
    from slurmtools.render.node_expectations import UnreadableFact, document, dumps, summary

    t = load_topology(source, site)
    try:
        doc = document(t, host or None)
    except KeyError as e:
        fail(f"--host: no host {e.args[0]!r} in topology {t.name!r}")
    except UnreadableFact as e:
        fail(str(e))
    text = dumps(doc)
    for line in summary(doc):
        typer.echo(line, err=True)
    if out is None:
        typer.echo(text, nl=False)
        return
    from pathlib import Path

    target = Path(out)
    if not target.parent.is_dir():
        fail(f"--out: {target.parent}: not a folder")
    tmp = target.with_name(target.name + ".new")
    tmp.write_text(text)
    tmp.chmod(0o644)
    tmp.replace(target)
    typer.echo(str(target), err=True)


@admin_app.command("restart-now")
def restart_now_cmd(jobs: List[int] = typer.Argument(..., help="Requeued job ids to start without the requeue hold"),
                    timeout: float = typer.Option(180.0, "--timeout", min=1.0,
                                                  help="Seconds to wait for each job's previous run to finish"),
                    json_out: bool = typer.Option(False, "--json", help="Machine-readable JSON output")) -> None:
    """Start requeued jobs now (StartTime=now), but only once each job's previous run has finished on every node
    and settled: earlier, Slurm 22.05 may skip the prolog or kill the rerun (docs/checkpoint.md)."""
    import json

    from slurmtools.cli.common import backend
    from slurmtools.slurm.restart import restart_now

    results = restart_now(backend(), list(jobs), timeout=timeout)
    if json_out:
        typer.echo(json.dumps([r.as_dict() for r in results], indent=2))
    else:
        for r in results:
            typer.echo(f"job {r.job_id}: {r.outcome}" + (f" ({r.detail})" if r.detail else "")
                       + f" after {r.waited_s:g} s")
    bad = [r for r in results if r.outcome not in ("restarted", "running")]
    if bad:
        typer.echo(f"slurmtools: error: job {bad[0].job_id}: {bad[0].outcome}: {bad[0].detail}"
                   + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""), err=True)
        raise typer.Exit(1)
