"""How big a site's sandbox is: nodes and GPUs from its fabric (pure)."""

from __future__ import annotations


def capacity(site) -> tuple[int, int]:
    """(nodes, GPUs) of the site's GPU partitions' nodes, from its fabric file."""
    from slurmtools.hostlist import expand
    from slurmtools.topology.sitefile import load_fabric

    fabric = load_fabric(site.fabric_path)
    nodes: set[str] = set()
    for p in site.partitions.values():
        nodes.update(expand(p.nodes))
    gpus = 0
    for h in nodes:
        gpus += fabric.node_type_of(h).gpus
    return len(nodes), gpus
