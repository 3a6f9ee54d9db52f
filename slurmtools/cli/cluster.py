"""`slurmtools cluster show`: nodes, GPUs free/used by type, partitions and tiers, from the live Slurm."""

from __future__ import annotations

from typing import Optional

import typer

from slurmtools.cli.common import JsonOpt, SiteOpt, print_json

cluster_app = typer.Typer(help="Look at the live cluster.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(cluster_app, name="cluster")


def cluster_state(backend, site) -> dict:
    """Plain data for `cluster show`: counts agree with sinfo's node states and GRES. `site` may be a function
    that loads the site: it then runs while Slurm answers (the queries wait on other processes)."""
    from concurrent.futures import ThreadPoolExecutor

    # four independent Slurm queries: run them side by side (each is a short-lived client process); of the QoS
    # table only names and grace times (sacctmgr is the slowest of the four, and each extra column costs it a trip)
    with ThreadPoolExecutor(max_workers=4) as pool:
        f_nodes, f_parts, f_qos, f_ver = (pool.submit(backend.nodes), pool.submit(backend.partitions),
                                          pool.submit(backend.qos_grace_times), pool.submit(backend.version))
        if callable(site):
            site = site()
        nodes, partitions, grace, version = f_nodes.result(), f_parts.result(), f_qos.result(), f_ver.result()
    by_type: dict[str, dict[str, int]] = {}
    states: dict[str, int] = {}
    for n in nodes:
        states[n.state] = states.get(n.state, 0) + 1
        for t, total in n.gpus_by_type.items():
            used = n.gpus_used_by_type.get(t, 0)
            row = by_type.setdefault(t, {"total": 0, "used": 0, "free": 0, "unavailable": 0})
            row["total"] += total
            row["used"] += used
            if n.schedulable:
                row["free"] += total - used
            else:
                row["unavailable"] += total - used
    return {
        "slurm_version": "{}.{:02d}.{}".format(*version),
        "nodes": [{"name": n.name, "state": n.state, "flags": list(n.flags), "cpus": n.cpus, "cpus_alloc": n.cpus_alloc,
                   "memory_mb": n.memory_mb, "gpus": n.gpus_by_type, "gpus_used": n.gpus_used_by_type,
                   "gpus_free": n.gpus_free, "features": list(n.features), "partitions": list(n.partitions),
                   "reason": n.reason} for n in nodes],
        "node_states": states,
        "gpus": by_type,
        "partitions": [{"name": p.name, "nodes": len(p.nodes), "default": p.default, "state": p.state,
                        "max_time_s": p.max_time_s} for p in partitions],
        "tiers": [{"name": t.name, "priority": t.priority, "preempted_by": list(t.preempted_by),
                   "grace_time_s": t.grace_time, "in_slurm": t.name in grace,
                   "slurm_grace_time_s": grace.get(t.name)}
                  for t in site.tiers_by_priority()],
    }


@cluster_app.command("show")
def show(site: Optional[str] = SiteOpt, json_out: bool = JsonOpt) -> None:
    """Nodes, GPUs free/used by type, partitions and tiers."""
    from slurmtools.cli.common import backend, load_site

    st = cluster_state(backend(), lambda: load_site(site))
    if json_out:
        print_json(st)
        return
    typer.echo(f"Slurm {st['slurm_version']}: {len(st['nodes'])} nodes "
               f"({', '.join(f'{v} {k}' for k, v in sorted(st['node_states'].items()))})")
    for t, row in st["gpus"].items():
        typer.echo(f"  GPUs {t}: {row['free']} free, {row['used']} used, {row['unavailable']} unavailable, "
                   f"{row['total']} total")
    for p in st["partitions"]:
        typer.echo(f"  partition {p['name']}{'*' if p['default'] else ''}: {p['nodes']} nodes, {p['state']}")
    for t in st["tiers"]:
        mark = "" if t["in_slurm"] else "  (missing from Slurm's QoS: run `slurmtools admin render qos`)"
        typer.echo(f"  tier {t['name']}: priority {t['priority']}, grace {t['grace_time_s']}s{mark}")
    typer.echo(f"  {'node':8} {'state':10} {'GPUs free/total':16} features")
    for n in st["nodes"]:
        total = sum(n["gpus"].values())
        typer.echo(f"  {n['name']:8} {n['state']:10} {str(n['gpus_free']) + '/' + str(total):16} "
                   f"{','.join(n['features'])}")
