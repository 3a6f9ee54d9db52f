"""A scaled model of a site too large for one machine's sandbox: 1 emulated node per F real nodes (pure).

The sandbox runs one slurmd per node on loopback; one 2-core machine runs about 500 of them faithfully
(docs/sandbox-scale.md, `LAB_NODE_LIMIT`). A larger candidate is replayed as a model in which each emulated node
stands for up to F real nodes of one node type under one leaf (same partitions, rack and NVLink domain), with F
times their GPUs, sockets and memory. Jobs keep their GPUs and CPUs, which is what a site's GPU limits, budgets,
fair-share and priorities count; their node count is divided by F, rounded up.

Why not fewer nodes of the same type with the jobs' node counts divided by F: a one-node job cannot be divided, so
either the load grows F-fold against the capacity or F-1 of every F jobs must be dropped, and then per-user limits,
fair-share and the jobs the report names are no longer the recorded ones. Merging nodes keeps every job and every
GPU; what it loses is placement inside a group of F nodes (a job fits on any free GPUs of an emulated node, even
where in production they would be spread over several real nodes), so waits of jobs that need whole nodes are a
lower bound. `SiteScale.statement` says so in the output.

What Slurm accepts bounds F: GPUs per node at most 1024 (gres bitmap, `sitefile.GPUS_MAX`), CPUs per node a uint16
(`sitefile.CPUS_MAX`): F <= 128 for 8-GPU nodes.

Wiring (for the sandbox's `prepare`): `factor = choose_factor(site, fabric)`; when it is above 1,
`model = scale_site(site, raw_doc, fabric, factor)`, write `model.fabric_doc` as `fabric.toml` next to the
sandbox's site file and `model.site_doc` (its `[site] fabric` already names "fabric.toml") through the usual
`timescale.scaled_site_doc` / `sitecopy.with_trace_users`, with fabric_path None so the relative name stays;
replay `[scale_job(j, model) for j in trace.jobs]`, counting a `ScaleRefused` as a refusal; print
`model.statement`.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace

from slurmtools.errors import ConfigError, SlurmtoolsError
from slurmtools.hostlist import compress, expand
from slurmtools.topology.sitefile import BOARD_PARTS_MAX, CPUS_MAX, GPUS_MAX

#: slurmd processes one 2-core sandbox machine runs with starts within 1 s of a perfect scheduler
#: (measured with benchmarks/bench_sandbox_nodes.py, docs/sandbox-scale.md)
LAB_NODE_LIMIT = 512


class ScaleRefused(SlurmtoolsError):
    """A recorded job the scaled model cannot express as production would see it (one line naming the job)."""


@dataclass(frozen=True)
class SiteScale:
    """The sandbox's model of a site at 1 emulated node per `factor` real nodes."""

    factor: int
    site_doc: dict                       # the site TOML document, its partitions over the emulated nodes
    fabric_doc: dict                     # the fabric TOML document of the emulated nodes
    groups: dict[str, tuple[str, ...]]   # emulated node -> the real nodes it stands for
    real_nodes: int
    statement: str                       # one paragraph for the output: the scaling and what it loses
    #: production's limits a scaled job is checked against (the model's Slurm sees only the scaled ones)
    tier_max_nodes: dict[str, int] = field(default_factory=dict)
    partition_nodes: dict[str, int] = field(default_factory=dict)
    max_gpus_per_node: dict[str | None, int] = field(default_factory=dict)   # GPU type (None: any) -> largest
    max_cpus_per_node: int = 0

    @property
    def emulated_nodes(self) -> int:
        return len(self.groups)


def _where(site) -> str:
    return str(site.source)


def _node_types_used(site, fabric) -> dict[str, object]:
    return {lf.node_type: fabric.node_types[lf.node_type] for lf in fabric.leaves.values() if lf.hosts}


def largest_factor(site, fabric) -> int:
    """The largest F whose emulated nodes Slurm still takes (GPUs and CPUs per node)."""
    best = None
    for nt in _node_types_used(site, fabric).values():
        f = CPUS_MAX // nt.cpus
        if nt.gpus:
            f = min(f, GPUS_MAX // nt.gpus)
        best = f if best is None else min(best, f)
    return max(1, best or 1)


def _plan_groups(site, fabric, factor: int) -> list[tuple[str, str, tuple[str, ...]]]:
    """(leaf, node type, real hosts) per emulated node: hosts of one leaf, in order, that share node type,
    partitions, rack and NVLink domain, at most `factor` to a group."""
    parts = {p.name: set(expand(p.nodes)) for p in site.partitions.values()}
    domain = fabric.nvlink_domain_of_host()
    out = []
    for leaf in fabric.leaves.values():
        buckets: dict[tuple, list[str]] = {}
        for h in leaf.hosts:
            key = (tuple(sorted(n for n, hs in parts.items() if h in hs)), fabric.rack_of_host(h), domain.get(h))
            buckets.setdefault(key, []).append(h)
        for hosts in buckets.values():
            for i in range(0, len(hosts), factor):
                out.append((leaf.name, leaf.node_type, tuple(hosts[i:i + factor])))
    return out


def emulated_count(site, fabric, factor: int) -> int:
    """How many emulated nodes the model at `factor` has."""
    return len(_plan_groups(site, fabric, factor))


def choose_factor(site, fabric, limit: int = LAB_NODE_LIMIT) -> int:
    """The smallest F (1 when the site fits) at which the model has at most `limit` nodes. Raises ConfigError
    naming the site when even the largest F Slurm takes leaves more."""
    top = largest_factor(site, fabric)
    if emulated_count(site, fabric, top) <= limit:
        lo, hi = 1, top          # the count never grows with the factor: the smallest that fits, by bisection
        while lo < hi:
            mid = (lo + hi) // 2
            if emulated_count(site, fabric, mid) <= limit:
                hi = mid
            else:
                lo = mid + 1
        return lo
    raise ConfigError(_where(site), "partitions", f"{emulated_count(site, fabric, top)} emulated nodes at the "
                                                  f"largest factor Slurm takes (1:{top}) is more than one sandbox "
                                                  f"machine runs ({limit}); the sandbox cannot model this site")


def _type_doc(nt, k: int) -> dict:
    d = {"gpu_type": nt.gpu_type, "gpus": nt.gpus * k, "sockets": nt.sockets * k,
         "cores_per_socket": nt.cores_per_socket, "threads_per_core": nt.threads_per_core,
         "memory_mb": nt.memory_mb * k, "nvlink": "none", "nics": list(nt.nics),
         "pcie_switches": nt.pcie_switches * k if nt.pcie_switches * k <= BOARD_PARTS_MAX else 0,
         "features": list(nt.features)}
    if not nt.gpus:
        del d["gpu_type"]
    if nt.restricted_cores_per_gpu:
        d["restricted_cores_per_gpu"] = nt.restricted_cores_per_gpu
    return d


def scale_site(site, site_doc: dict, fabric, factor: int, *, fabric_file: str = "fabric.toml") -> SiteScale:
    """The model of `site` (loaded, with its raw TOML document `site_doc` and its loaded `fabric`) at 1 emulated
    node per `factor` real nodes. Each emulated node is named after the first real node it stands for; its node
    type is the real one with `-xK` added (K real nodes), K times the GPUs, sockets and memory, and no NVLink (the
    real nodes of a group share none). The site document's `[site] fabric` becomes `fabric_file` (write the fabric
    document there, relative to the site file); partitions list the emulated nodes; tiers' `max_nodes` and
    partitions' `max_cpus_per_node` are scaled with the nodes. Raises ConfigError (one line naming the site) for a
    factor below 1 or above what Slurm takes."""
    where = _where(site)
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
        raise ConfigError(where, "", f"scale factor {factor!r}: expected a whole number of real nodes per emulated "
                                     f"node, 1 or more")
    top = largest_factor(site, fabric)
    if factor > top:
        worst = min(_node_types_used(site, fabric).values(),
                    key=lambda nt: min(CPUS_MAX // nt.cpus, GPUS_MAX // nt.gpus if nt.gpus else CPUS_MAX))
        raise ConfigError(where, "", f"scale factor {factor}: node type {worst.name} x {factor} is "
                                     f"{worst.gpus * factor} GPUs and {worst.cpus * factor} CPUs, more than Slurm "
                                     f"takes on one node ({GPUS_MAX} GPUs, {CPUS_MAX} CPUs); the largest factor "
                                     f"for this site is {top}")
    plan = _plan_groups(site, fabric, factor)
    groups = {hosts[0]: hosts for _, _, hosts in plan}
    of_real = {h: e for e, hosts in groups.items() for h in hosts}

    types: dict[str, dict] = {}
    leaves: dict[str, list[tuple[str, str]]] = {}
    for leaf, nt_name, hosts in plan:
        tname = f"{nt_name}-x{len(hosts)}"
        types.setdefault(tname, _type_doc(fabric.node_types[nt_name], len(hosts)))
        leaves.setdefault(leaf, []).append((hosts[0], tname))
    fdoc: dict = {"fabric": {"name": f"{fabric.name}-1to{factor}", "link": fabric.link}, "node_types": types}
    fleaves, split_of = [], {}
    for leaf in fabric.leaves.values():
        by_type: dict[str, list[str]] = {}
        for host, tname in leaves.get(leaf.name, []):
            by_type.setdefault(tname, []).append(host)
        for i, (tname, hosts) in enumerate(by_type.items()):
            # a fabric leaf holds one node type: the group of fewer than F nodes at a leaf's end gets its own entry
            name = leaf.name if i == 0 else f"{leaf.name}-rest{i}"
            if i:
                split_of[name] = leaf.name
            d = {"name": name, "hosts": compress(hosts), "node_type": tname}
            if leaf.rack:
                d["rack"] = leaf.rack
            fleaves.append(d)
    fdoc["leaves"] = fleaves
    if fabric.rail_leaves:
        fdoc["rail_leaves"] = [{"name": r.name, "leaf": r.leaf, "nics": list(r.nics)}
                               for r in fabric.rail_leaves.values()]
    if fabric.spines:
        spines = []
        for s in fabric.spines.values():
            ls = list(s.leaves) + [x for x, of in split_of.items() if of in s.leaves]
            d = {"name": s.name, "leaves": ls}
            if s.uplinks_per_leaf:
                d["uplinks_per_leaf"] = s.uplinks_per_leaf
            spines.append(d)
        fdoc["spines"] = spines
    for key, src in (("racks", fabric.racks), ("nvlink_domains", fabric.nvlink_domains)):
        if src:
            fdoc[key] = [{"name": n, "hosts": compress(sorted({of_real[h] for h in hosts if h in of_real}))}
                         for n, hosts in src.items()]

    doc = copy.deepcopy(site_doc)
    doc.setdefault("site", {})["fabric"] = fabric_file
    for name, p in site.partitions.items():
        pdoc = doc["partitions"][name]
        pdoc["nodes"] = compress(sorted({of_real[h] for h in expand(p.nodes)}))
        if p.max_cpus_per_node is not None:
            pdoc["max_cpus_per_node"] = min(CPUS_MAX, p.max_cpus_per_node * factor)
    for name, t in site.tiers.items():
        if t.max_nodes is not None:
            doc["tiers"][name]["max_nodes"] = math.ceil(t.max_nodes / factor)

    used = _node_types_used(site, fabric)
    gpn: dict[str | None, int] = {}
    for nt in used.values():
        if nt.gpus:
            gpn[nt.gpu_type] = max(gpn.get(nt.gpu_type, 0), nt.gpus)
            gpn[None] = max(gpn.get(None, 0), nt.gpus)
    real = sum(len(h) for h in groups.values())
    partial = sum(1 for h in groups.values() if len(h) < factor)
    statement = (f"scaled model 1:{factor}: {len(groups)} emulated nodes for {real} real ones, each standing for up "
                 f"to {factor} nodes of one type under one leaf with {factor}x their GPUs, CPUs and memory"
                 + (f" ({partial} stand for fewer: a group never spans leaves, partitions, racks or NVLink domains)"
                    if partial else "")
                 + f"; jobs keep their GPUs and CPUs, their node count divided by {factor} rounded up; tiers' "
                   f"max_nodes divided likewise, jobs over production's limits refused before submission. Not "
                   f"modelled: placement inside a group of {factor} nodes (a job may take free GPUs that production "
                   f"would find spread over several nodes), so waits of whole-node jobs are a lower bound.")
    return SiteScale(factor=factor, site_doc=doc, fabric_doc=fdoc, groups=groups, real_nodes=real,
                     statement=statement,
                     tier_max_nodes={n: t.max_nodes for n, t in site.tiers.items() if t.max_nodes is not None},
                     partition_nodes={n: len(expand(p.nodes)) for n, p in site.partitions.items()},
                     max_gpus_per_node=gpn, max_cpus_per_node=max((nt.cpus for nt in used.values()), default=0))


def scale_job(job, model: SiteScale):
    """The recorded job as the model runs it: node count divided by the factor (rounded up), GPUs and CPUs kept.
    Raises ScaleRefused (one line naming the job) for a job production would never run and the model would: more
    nodes than its tier's max_nodes or its partition has, or more GPUs or CPUs per node than any node holds."""
    f = model.factor
    if job.nodes < 1:
        raise ScaleRefused(f"job {job.key}: {job.nodes} nodes; the scaled model needs a node count of 1 or more")
    limit = model.tier_max_nodes.get(job.tier)
    if limit is not None and job.nodes > limit:
        raise ScaleRefused(f"job {job.key}: {job.nodes} nodes is more than tier {job.tier}'s max_nodes ({limit}); "
                           f"the model at 1:{f} could not refuse it as production does")
    have = model.partition_nodes.get(job.partition) if job.partition else None
    if have is not None and job.nodes > have:
        raise ScaleRefused(f"job {job.key}: {job.nodes} nodes is more than partition {job.partition} has ({have})")
    gmax = model.max_gpus_per_node.get(job.gpu_type, 0 if job.gpu_type else model.max_gpus_per_node.get(None, 0))
    if job.gpus and not gmax:
        raise ScaleRefused(f"job {job.key}: no node has {job.gpu_type or 'any'} GPUs; production never starts it")
    if job.gpus and job.gpus_per_node > gmax:
        what = f"{job.gpu_type} " if job.gpu_type else ""
        raise ScaleRefused(f"job {job.key}: {job.gpus_per_node} {what}GPUs per node is more than any node holds "
                           f"({gmax}); production never starts it, the model at 1:{f} would")
    if job.cpus and model.max_cpus_per_node and -(-job.cpus // job.nodes) > model.max_cpus_per_node:
        raise ScaleRefused(f"job {job.key}: {-(-job.cpus // job.nodes)} CPUs per node is more than any node holds "
                           f"({model.max_cpus_per_node})")
    if f == 1:
        return job
    if job.exclusive and gmax:
        # it held whole real nodes: in the model, those nodes' GPUs; --exclusive would take whole emulated nodes,
        # F real ones each
        job = replace(job, exclusive=False, gpus=job.nodes * gmax)
    return replace(job, nodes=math.ceil(job.nodes / f))
