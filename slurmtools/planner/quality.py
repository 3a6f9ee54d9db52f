"""Placement quality: an estimate of the allreduce bandwidth a set of hosts gives, for comparing placements.

The model (documented in docs/planner.md) follows NCCL's bandwidth algorithm, the ring, laid out rail by rail:
one host -> the GPUs' NVLink (or PCIe) bandwidth; several hosts -> each GPU's share of its host's HCAs, scaled
down where the ring leaves a leaf switch. A ring enters and leaves every leaf it visits once per rail, so the
leaf's uplinks must carry one host's worth of bandwidth each way; the job is credited only its fair share of those
uplinks (the fraction of the leaf's hosts it holds), because other jobs under the leaf use the rest. Few leaves
and no thin slivers of a job under a leaf score best. It ranks placements; it does not predict NCCL's numbers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from slurmtools.planner.view import ClusterView


@dataclass(frozen=True)
class Estimate:
    gbytes: float  # estimated allreduce bus bandwidth per GPU, GB/s
    hops: int  # most switch-to-switch links between two of the hosts (host->leaf->host = 2)
    leaves: int
    bottleneck: str


def estimate(view: ClusterView, hosts: Sequence[str], gpus_per_host: int) -> Estimate:
    if not hosts:
        return Estimate(0.0, 0, 0, "no hosts")
    nt_name = view.hosts[hosts[0]].node_type
    nt = view.node_types[nt_name]
    intra = view.nvlink_gbytes(nt_name)
    if len(hosts) == 1:
        what = "NVLink inside one host" if nt.nvlink == "nvswitch" else "PCIe inside one host"
        return Estimate(intra, 0, 1, what)
    nics = max(len(nt.nics), 1)
    nics_used = max(1, round(nics * gpus_per_host / max(nt.gpus, 1)))
    host_net = nics_used * view.link_gbytes
    per_gpu = host_net / max(gpus_per_host, 1)
    per_leaf = Counter(view.hosts[h].leaf for h in hosts)
    factor, where = 1.0, ""
    if len(per_leaf) > 1:
        for leaf, nl in per_leaf.items():
            under = max(len(view.leaves.get(leaf, ())), nl)
            share = view.leaf_uplink_gbytes.get(leaf, float("inf")) * nl / under
            if share / host_net < factor:
                factor, where = share / host_net, leaf
    leaves = list(per_leaf)
    hops = 2
    if len(leaves) > 1:
        hops = 4
        for i, a in enumerate(leaves):
            for b in leaves[i + 1:]:
                if not view.common_spine(a, b):
                    hops = 6
    bw = min(intra, per_gpu * factor)
    if factor < 1.0:
        what = (f"fair share of {where}'s uplinks ({per_leaf[where]} of its {len(view.leaves.get(where, ()))} hosts "
                f"x {view.leaf_uplink_gbytes[where]:g} GB/s) for the ring leaving the leaf")
    elif per_gpu < intra:
        what = f"host network ({nics_used} x {view.link_gbytes:g} GB/s HCAs for {gpus_per_host} GPUs)"
    else:
        what = "NVLink inside each host"
    return Estimate(round(bw, 3), hops, len(leaves), what)
