"""A plain-data summary of a site (and its fabric) for `site check` and `cluster show`."""

from __future__ import annotations


def summarise(site, fabric=None) -> dict:
    gpus_total = 0
    if fabric is not None:
        gpus_total = sum(fabric.node_type_of(h).gpus for h in fabric.hosts)
    return {
        "site": site.name,
        "cluster_name": site.cluster_name,
        "source": str(site.source),
        "fabric": str(site.fabric_path) if site.fabric_path else None,
        "hosts": len(fabric.hosts) if fabric else None,
        "gpus_total": gpus_total,
        "partitions": {p.name: {"nodes": p.nodes, "default": p.default, "max_time_s": p.max_time,
                                "gpu_types": list(p.gpu_types)} for p in site.partitions.values()},
        "tiers": {t.name: {"priority": t.priority, "preempted_by": list(t.preempted_by), "grace_time_s": t.grace_time,
                           "max_gpus_per_job": t.max_gpus_per_job, "max_gpus_per_user": t.max_gpus_per_user,
                           "max_walltime_s": t.max_walltime, "max_nodes": t.max_nodes}
                  for t in site.tiers_by_priority()},
        "accounts": {a.name: {"monthly_gpu_hours": a.monthly_gpu_hours, "users": list(a.users),
                              "tiers": list(a.tiers), "over_budget": a.over_budget} for a in site.accounts.values()},
        "gpu_types": {g.name: {"price_per_gpu_hour": g.price_per_gpu_hour, "memory_gb": g.memory_gb}
                      for g in site.gpu_types.values()},
    }
