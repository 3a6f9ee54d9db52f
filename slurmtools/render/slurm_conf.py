"""slurm.conf fragments from the site and its fabric: node lines, partitions, priority and preemption.

Pure text rendering. Daemon paths, ports and plugins that depend on the installation stay with the admin
(or the lab script); what follows from the site's tiers and hardware is generated here.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from slurmtools.durations import slurm_time
from slurmtools.hostlist import compress
from slurmtools.site.model import Site
from slurmtools.slurm.releases import SlurmRelease
from slurmtools.topology.sitefile import Fabric


@dataclass(frozen=True)
class NodeLineOptions:
    """Extra NodeName= parameters. `port_base` gives each host its own slurmd port (many slurmd on one machine)."""

    params: tuple[str, ...] = ()
    port_base: int | None = None


def hosts_by_type(fabric: Fabric) -> "OrderedDict[str, list[str]]":
    out: OrderedDict[str, list[str]] = OrderedDict()
    for leaf in fabric.leaves.values():
        out.setdefault(leaf.node_type, []).extend(leaf.hosts)
    return out


def node_features(fabric: Fabric, host: str) -> list[str]:
    """Feature tags a job can ask for with --constraint: node-type features, leaf switch, rack, NVLink domain."""
    from slurmtools.topology.render_slurm import node_features as graph_features

    return list(graph_features(_graph(fabric))[host])


def render_nodes(fabric: Fabric, release: SlurmRelease, opts: NodeLineOptions = NodeLineOptions()) -> str:
    """One NodeName line per (node type, leaf) so each line carries its leaf feature. Cores kept for GPU jobs
    (RestrictedCoresPerGPU) are written where the release has the parameter, else noted in a comment."""
    from slurmtools.topology.render_slurm import node_features as graph_features

    features = graph_features(_graph(fabric))
    lines = []
    port = opts.port_base
    for leaf in fabric.leaves.values():
        nt = fabric.node_types[leaf.node_type]
        # hosts of one leaf share a line only while their features agree (an NVLink domain may end mid-leaf)
        runs: list[list[str]] = []
        for h in leaf.hosts:
            if runs and features[runs[-1][0]] == features[h]:
                runs[-1].append(h)
            else:
                runs.append([h])
        for hosts in runs:
            parts = [f"NodeName={compress(hosts)}"]
            parts += list(opts.params)
            if port is not None:
                parts.append(f"Port={port}-{port + len(hosts) - 1}" if len(hosts) > 1 else f"Port={port}")
                port += len(hosts)
            parts += [f"Sockets={nt.sockets}", f"CoresPerSocket={nt.cores_per_socket}",
                      f"ThreadsPerCore={nt.threads_per_core}", f"RealMemory={nt.memory_mb}"]
            if nt.gpus:
                parts.append(f"Gres=gpu:{nt.gpu_type}:{nt.gpus}")
                if nt.restricted_cores_per_gpu and release.restricted_cores_per_gpu:
                    parts.append(f"RestrictedCoresPerGPU={nt.restricted_cores_per_gpu}")
                elif nt.restricted_cores_per_gpu:
                    lines.append(f"# {compress(hosts)}: RestrictedCoresPerGPU={nt.restricted_cores_per_gpu} from node "
                                 f"type {nt.name} left out: Slurm {release.name} has no such parameter (24.05 and later)")
            feats = features[hosts[0]]
            if feats:
                parts.append("Feature=" + ",".join(feats))
            parts.append("State=UNKNOWN")
            lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"


def render_scheduling(site: Site, release: SlurmRelease) -> str:
    """Priority and preemption settings implied by tiered QoS with preemption by requeue, and the topology
    plugin the site's partitions use (none when they need topology.yaml, which names its own plugins)."""
    has_preemption = any(t.preemptible for t in site.tiers.values())
    lines = [
        "# Tiers are QoS; preemption is by QoS priority, and preempted jobs are requeued.",
        "PriorityType=priority/multifactor",
        "PriorityWeightQOS=100000",
        "PriorityWeightAge=1000",
        "PriorityWeightFairshare=10000",
        "AccountingStorageEnforce=associations,limits,qos",
        f"PreemptType={'preempt/qos' if has_preemption else 'preempt/none'}",
        "PreemptMode=REQUEUE" if has_preemption else "PreemptMode=OFF",
        "JobRequeue=1",
        # makes the preemption warning reach the batch shell's --signal=B: handler at grace start
        release.preempt_signal_conf,
        # the prolog (GPU health, the run's start mark) at allocation, before the batch script starts. Measured
        # with quick restarts of requeued jobs (issue 16): 22.05 skipped the prolog on 12 of 56 with Alloc and
        # on 10 of 47 without it (and killed 9 launches); Alloc,Contain was worse (18 of 48, jobs lost); 25.11
        # with Alloc ran it every time. No flag runs it on every launch in 22.05: the epilog does not depend on
        # it, and `slurmtools admin restart-now` restarts requeued jobs only when it is safe.
        "PrologFlags=Alloc",
        "GresTypes=gpu",
        "AccountingStorageTRES=" + ",".join(["gres/gpu"] + [f"gres/gpu:{g}" for g in site.gpu_types]),
    ]
    kinds = set(site.topology_kinds().values())
    if len(kinds) == 1:
        from slurmtools.render.topology import topology_plugin_line

        lines.append(topology_plugin_line(kinds.pop()))
    else:
        release.require("topology_yaml", f"partitions with different topologies ({', '.join(sorted(kinds))})")
        lines.append("# topology: topology.yaml (one topology per partition; see slurmtools admin render topology)")
    return "\n".join(lines) + "\n"


def render_partitions(site: Site, release: SlurmRelease) -> str:
    several = len(set(site.topology_kinds().values())) > 1
    lines = []
    for p in site.partitions.values():
        qos = [t.name for t in site.tiers_by_priority() if p.name in t.partitions]
        parts = [f"PartitionName={p.name}", f"Nodes={p.nodes}", f"Default={'YES' if p.default else 'NO'}",
                 f"MaxTime={slurm_time(p.max_time)}", "State=UP"]
        if p.max_cpus_per_node is not None:  # a CPU partition over GPU hosts: GPU jobs keep the other cores
            parts.append(f"MaxCPUsPerNode={p.max_cpus_per_node}")
        if qos:
            parts.append("AllowQos=" + ",".join(qos))
        if several:
            parts.append(f"Topology={p.topology}")
        if not p.allow_partial_nodes:
            pass  # whole nodes for multi-node jobs are chosen by the planner; Slurm keeps sharing allowed
        lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"


def render_slurm_conf(site: Site, fabric: Fabric | None, release: SlurmRelease,
                      node_opts: NodeLineOptions = NodeLineOptions()) -> str:
    out = [f"# Generated by slurmtools from {site.source} for Slurm {release.name}", render_scheduling(site, release)]
    if fabric is not None:
        from slurmtools.site.load import check_hosts

        check_hosts(site, fabric)  # GPU partitions hold GPU hosts; CPU partitions over GPU hosts cap their CPUs
        out.append("# Nodes from the fabric " + str(fabric.source))
        out.append(render_nodes(fabric, release, node_opts))
    out.append(render_partitions(site, release))
    return "\n".join(out)


def _graph(fabric: Fabric):
    from slurmtools.topology.build_site import build_site

    return build_site(fabric)


def render_topology_conf(fabric: Fabric) -> str:
    """topology/tree from the fabric's graph (one renderer for the site file and for discovered fabrics)."""
    from slurmtools.topology.render_slurm import render_topology_conf as render

    return render(_graph(fabric))


def site_topology(site: Site, fabric: Fabric, release: SlurmRelease, block_sizes=None,
                  force_yaml: bool = False) -> tuple[str, str]:
    """(file name, text) of the topology Slurm needs for the site: topology.conf when every partition uses one
    kind, topology.yaml when they differ (or when asked for)."""
    from slurmtools.render import topology as topo

    t = _graph(fabric)
    kinds = site.topology_kinds()
    used = set(kinds.values())
    if force_yaml or len(used) > 1:
        default = kinds[site.default_partition.name]
        return "topology.yaml", topo.render_topology_yaml(t, release, kinds, default, block_sizes)
    kind = used.pop()
    if kind == "block":
        return "topology.conf", topo.render_block_conf(topo.block_layout(t, release, block_sizes), t.name)
    if kind == "flat":
        return "topology.conf", "# topology/flat: no topology.conf needed\n"
    from slurmtools.topology.render_slurm import render_topology_conf as render

    return "topology.conf", render(t)


def render_gres_conf(fabric: Fabric, device_dir: str = "/dev") -> str:
    """Per-GPU lines with File=, Cores= (the GPU's socket) and Links= (NVLinks to each peer), from the graph.
    File= by index: the site declares its GPUs, not their device minors, and the lab's fake devices follow it."""
    from slurmtools.topology.render_slurm import render_gres_conf as render

    return render(_graph(fabric), device_dir.rstrip("/") + "/nvidia{index}")
