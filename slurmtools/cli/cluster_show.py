"""The body of `slurmtools cluster show`, without typer: `launch.py` runs it directly when the command line is one
it can read from typer's captured grammar (importing typer costs more than the command's four Slurm queries), and
`cli/cluster.py` registers the same function with typer for every other command line."""

from __future__ import annotations

import sys


def cluster_state(backend, site) -> dict:
    """Plain data for `cluster show`: counts agree with sinfo's node states and GRES. `site` may be a function
    that loads the site: it then runs while Slurm answers (the queries wait on other processes)."""
    # four independent Slurm queries: run them side by side (each is a short-lived client process); of the QoS
    # table only names and grace times (sacctmgr is the slowest of the four, and each extra column costs it a trip)
    queries = _side_by_side((backend.nodes, backend.partitions, backend.qos_grace_times, backend.version))
    if callable(site):
        try:
            site = site()
        except BaseException:
            queries(errors=False)  # the site's error is the one to show; the queries' children end first
            raise
    nodes, partitions, grace, version = queries()
    return summary(nodes, partitions, grace, version, site)


def summary(nodes, partitions, grace: dict, version: tuple, site) -> dict:
    """`cluster show`'s plain data from what Slurm answered (pure): node states, GPUs total, used, free on nodes that
    take jobs and unavailable on the others, partitions, and the site's tiers beside Slurm's QoS grace times."""
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


def _side_by_side(calls):
    """Start each call in a thread of its own; the returned function waits for all of them and gives their
    results in order, or raises the first call's error (unless `errors=False`). (Plain threads, not
    concurrent.futures: it imports logging, a fifth of this command's own start-up.)"""
    import threading

    results: list = [None] * len(calls)
    failures: list = [None] * len(calls)

    def one(i: int) -> None:
        try:
            results[i] = calls[i]()
        except BaseException as exc:  # handed to the caller below
            failures[i] = exc

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(calls))]
    for t in threads:
        t.start()

    def wait(errors: bool = True) -> list:
        for t in threads:
            t.join()
        for exc in failures:
            if exc is not None and errors:
                raise exc
        return results

    return wait


def show(site: str | None = None, json_out: bool = False) -> None:
    """Nodes, GPUs free/used by type, partitions and tiers."""
    from slurmtools.slurm.backend import get_backend

    backend = get_backend()

    def load():  # imported only now: the Slurm queries are already running
        from slurmtools.site import load_site

        return load_site(site)

    st = cluster_state(backend, load)
    from slurmtools.cli.output import print_json

    if json_out:
        print_json(st)
        return
    lines = [f"Slurm {st['slurm_version']}: {len(st['nodes'])} nodes "
             f"({', '.join(f'{v} {k}' for k, v in sorted(st['node_states'].items()))})"]
    for t, row in st["gpus"].items():
        lines.append(f"  GPUs {t}: {row['free']} free, {row['used']} used, {row['unavailable']} unavailable, "
                     f"{row['total']} total")
    for p in st["partitions"]:
        lines.append(f"  partition {p['name']}{'*' if p['default'] else ''}: {p['nodes']} nodes, {p['state']}")
    for t in st["tiers"]:
        mark = "" if t["in_slurm"] else "  (missing from Slurm's QoS: run `slurmtools admin render qos`)"
        lines.append(f"  tier {t['name']}: priority {t['priority']}, grace {t['grace_time_s']}s{mark}")
    lines.append(f"  {'node':8} {'state':10} {'GPUs free/total':16} features")
    for n in st["nodes"]:
        total = sum(n["gpus"].values())
        lines.append(f"  {n['name']:8} {n['state']:10} {str(n['gpus_free']) + '/' + str(total):16} "
                     f"{','.join(n['features'])}")
    sys.stdout.write("\n".join(lines) + "\n")
