"""Small builders for synthetic cluster views (pure data, no Slurm)."""

from __future__ import annotations

from dataclasses import replace

from slurmtools.planner.view import ClusterView, HostState
from slurmtools.topology.sitefile import NodeType

NT = NodeType(name="n8", gpu_type="h100", gpus=8, sockets=2, cores_per_socket=56, threads_per_core=1,
              memory_mb=2_000_000, nvlink="nvswitch", nvlinks_per_gpu=18,
              nics=tuple(f"mlx5_{i}" for i in range(8)), pcie_switches=4, features=(), nvlink_gbytes_per_link=25.0)


def make_view(free_by_leaf: list[list[int]], uplink: float | None = None, spines_per_leaf=None) -> ClusterView:
    """free_by_leaf[i][j]: free GPUs on host j under leaf i (8-GPU hosts)."""
    hosts, leaves = {}, {}
    n = 0
    for i, frees in enumerate(free_by_leaf):
        names = []
        for f in frees:
            n += 1
            h = f"h{n:05d}"
            cpus = NT.cpus * f // NT.gpus
            mem = NT.memory_mb * f // NT.gpus
            hosts[h] = HostState(h, f"leaf{i + 1}", NT.name, NT.gpus, f, cpus, mem)
            names.append(h)
        leaves[f"leaf{i + 1}"] = tuple(names)
    up = {leaf: (uplink if uplink is not None else len(hs) * 8 * 50.0) for leaf, hs in leaves.items()}
    sp = {leaf: (spines_per_leaf or {}).get(leaf, ("spine1",)) for leaf in leaves}
    return ClusterView(hosts=hosts, leaves=leaves, leaf_spines=sp, node_types={NT.name: NT}, link_gbytes=50.0,
                       leaf_uplink_gbytes=up, live=True, source="synthetic")


def busy(view: ClusterView, hosts: list[str]) -> ClusterView:
    hs = dict(view.hosts)
    for h in hosts:
        hs[h] = hs[h]._replace(gpus_free=0, cpus_free=0, mem_free_mb=0)
    return replace(view, hosts=hs)
