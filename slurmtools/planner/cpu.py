"""CPU jobs (no GPUs: preprocessing, evaluation): the planner's branch for `--gpus 0` / `--cpus N`. Pure.

A CPU job runs on a CPU partition (`gpu_types = []` in the site file): the one named with --partition, else the
site's first (its default partition when that is a CPU one). A CPU partition may hold CPU-only hosts (fabric node
types with `gpus = 0`) and may overlay GPU hosts, capped per host by `max_cpus_per_node` (Slurm's MaxCPUsPerNode).
Tiers apply with their time and node limits; their GPU limits do not. The job asks Slurm for whole numbers of
tasks per node, CPUs per task and memory per node, and for --switches only when it has several nodes that talk.
"""

from __future__ import annotations

import math
from dataclasses import replace

from slurmtools.durations import human, slurm_time
from slurmtools.errors import ConfigError
from slurmtools.hostlist import compress
from slurmtools.planner.packing import HostNeed, leaves_of, pack
from slurmtools.planner.plan import (SHORT_WAIT, WAIT_CAP, WAIT_FRACTION, Directive, Plan, TemplateShape, _hosts_of,
                                     _job_tail, _preemption, _rank_groups, _round_minutes, _safe, _tier)
from slurmtools.planner.request import BEST_TIER, JobRequest, RequestError
from slurmtools.planner.view import ClusterView
from slurmtools.site.model import Partition, Site, Tier
from slurmtools.slurm.releases import SlurmRelease
from slurmtools.topology.sitefile import NodeType


#: per-host launcher templates that run CPU jobs: the launcher starts the host's tasks as its processes
#: (torchrun --nproc-per-node; torch.distributed's gloo backend needs no GPU). accelerate and deepspeed launch one
#: process per GPU in their templates and are refused for CPU jobs.
CPU_LAUNCHERS = ("torchrun",)


def cpu_partition(r: JobRequest, site: Site) -> Partition:
    """The partition for a CPU job, or a one-line refusal saying why there is none."""
    cpu = site.cpu_partitions
    if r.partition:
        if r.partition not in site.partitions:
            raise RequestError("--partition", f"unknown partition {r.partition!r} (known: {', '.join(site.partitions)})")
        p = site.partitions[r.partition]
        if not p.cpu_only:
            where = (f"CPU partitions: {', '.join(c.name for c in cpu)}" if cpu
                     else f"site {site.name} has no CPU partition")
            raise RequestError("--partition", f"partition {p.name} has no CPU-only use: it holds "
                                              f"{'/'.join(p.gpu_types)} GPUs for GPU jobs ({where})")
        return p
    if not cpu:
        parts = "; ".join(f"{p.name}: {'/'.join(p.gpu_types)} GPUs only" for p in site.partitions.values())
        raise RequestError("--gpus", f"site {site.name} has no CPU partition (partitions: {parts}); ask your admins "
                                     "for one, or request GPUs")
    return cpu[0]


def plan_cpu_job(r: JobRequest, site: Site, view: ClusterView, tmpl: TemplateShape,
                 slurm: SlurmRelease | None = None) -> Plan:
    """The plan of a CPU job: partition, tier, tasks x CPUs x memory, placement; no GPU directive."""
    part = cpu_partition(r, site)
    if tmpl.tasks == "per-node" and tmpl.multi_node and tmpl.name not in CPU_LAUNCHERS:
        raise RequestError("--template", f"template {tmpl.name} starts one launcher per host that runs one process "
                                         "per GPU, so a CPU job would start none: use --template torchrun (its "
                                         "processes from --ntasks), mpi (srun starts --ntasks processes) or python")
    pview = _partition_view(view, part)
    if not pview.hosts:
        raise RequestError("--partition", f"no host of partition {part.name} ({part.nodes}) is in the fabric "
                                          f"{view.source or ''}".rstrip())
    _check_overlay(site, part, pview)
    cpu_only = [n for n in _cpu_only(site, view) if n != part.name]
    # CPU-only node types first (the GPU hosts' cores are left to GPU jobs where possible), then by name
    types = sorted({s.node_type for s in pview.hosts.values()},
                   key=lambda n: (pview.node_types[n].gpus > 0, n))
    plans: list[Plan] = []
    errors: list[RequestError] = []
    for name in types:
        try:
            plans.append(_plan_for(r, site, pview, tmpl, part, pview.node_types[name], slurm, cpu_only))
        except RequestError as exc:
            errors.append(exc)
    if not plans:
        raise errors[0]
    return next((p for p in plans if p.starts_now), plans[0])


def _partition_view(view: ClusterView, part: Partition) -> ClusterView:
    """The partition's hosts, any node type; with max_cpus_per_node, at most that many CPUs free per host. The
    live view does not split a host's used CPUs by partition, so the cap is applied to what is free overall
    (an upper bound; Slurm enforces the cap itself)."""
    members = _hosts_of(part.nodes)
    cap = part.max_cpus_per_node
    hosts = {h: (s._replace(cpus_free=min(s.cpus_free, cap)) if cap is not None else s)
             for h, s in view.hosts.items() if h in members}
    leaves = {leaf: tuple(h for h in hs if h in hosts) for leaf, hs in view.leaves.items()}
    return replace(view, hosts=hosts, leaves={k: v for k, v in leaves.items() if v})


def _check_overlay(site: Site, part: Partition, view: ClusterView) -> None:
    """The site rule `check_hosts` enforces when rendering, applied to the view: a CPU partition over GPU hosts
    must cap its CPUs per host below the host's count."""
    for h, s in view.hosts.items():
        nt = view.node_types[s.node_type]
        if nt.gpus and (part.max_cpus_per_node is None or part.max_cpus_per_node >= nt.cpus):
            raise ConfigError(str(site.source), f"partitions.{part.name}.max_cpus_per_node",
                              f"CPU partition {part.name} holds GPU host {h} ({nt.gpus} GPUs, {nt.cpus} CPUs); cap "
                              "its CPUs per host below that so GPU jobs keep their cores")


def _shape(r: JobRequest, part: Partition, nt: NodeType, tmpl: TemplateShape) -> tuple[int, int, int, int]:
    """(nodes, tasks per node, CPUs per task, usable CPUs per host) on hosts of node type `nt`."""
    cpt = r.cpus or 1
    usable = min(nt.cpus, part.max_cpus_per_node or nt.cpus)
    capped = f" (partition {part.name}'s max_cpus_per_node)" if usable < nt.cpus else ""
    if cpt > usable:
        raise RequestError("--cpus", f"{cpt} CPUs per task, but partition {part.name} gives a job at most {usable} "
                                     f"CPUs on one {nt.name} host{capped}")
    per_host = usable // cpt  # tasks one host can take
    if r.nodes is not None:
        nodes = r.nodes
        ntasks = r.ntasks if r.ntasks is not None else nodes
    else:
        ntasks = r.ntasks if r.ntasks is not None else 1
        # the fewest hosts that hold the tasks, evenly spread (always possible: one task per host)
        nodes = next(n for n in range(math.ceil(ntasks / per_host), ntasks + 1) if ntasks % n == 0)
    tpn = ntasks // nodes
    if tpn * cpt > usable:
        raise RequestError("--ntasks", f"{tpn} tasks x {cpt} CPUs = {tpn * cpt} CPUs per host, but partition "
                                       f"{part.name} gives a job at most {usable} CPUs on one {nt.name} host{capped}")
    if not tmpl.multi_node and tpn > 1:
        raise RequestError("--ntasks", f"template {tmpl.name} starts one task, but the job has {ntasks}: use "
                                       "--template mpi (srun starts every task)")
    return nodes, tpn, cpt, usable


def _plan_for(r: JobRequest, site: Site, view: ClusterView, tmpl: TemplateShape, part: Partition, nt: NodeType,
              slurm: SlurmRelease | None, cpu_only: list[str]) -> Plan:
    notes: list[str] = []
    nodes, tpn, cpt, usable = _shape(r, part, nt, tmpl)
    if nodes > 1 and not tmpl.multi_node:
        raise RequestError("--template", f"template {tmpl.name} runs on one node, but the job needs {nodes} nodes")
    cpus_node = tpn * cpt
    if r.mem_mb is not None:
        if r.mem_mb > nt.memory_mb:
            raise RequestError("--mem", f"{r.mem_mb} MB per node, but one {nt.name} host of partition {part.name} has "
                                        f"{nt.memory_mb} MB")
        mem, why_mem = r.mem_mb, "the memory per node you asked for (--mem)"
    else:
        mem = nt.memory_mb * cpus_node // nt.cpus
        why_mem = (f"the {nt.name} host's memory share for the job's CPUs: {nt.memory_mb} MB x {cpus_node}/{nt.cpus} "
                   "CPUs (give --mem to ask for another amount)")
    tier, account = _tier(r, site, part, 0, nodes, notes)
    tier_obj = site.tiers[tier]
    need = HostNeed(0, cpus_node, mem, nt.name)
    spread_ok = r.comm == "independent"
    hosts_now = pack(view, need, nodes, spread_ok=spread_ok)
    idle = _partition_view(view.idle(), part)
    hosts_empty = pack(idle, need, nodes, spread_ok=spread_ok)
    if hosts_empty is None:
        n_hosts = sum(1 for s in view.hosts.values() if s.node_type == nt.name)
        raise RequestError("--nodes", f"{nodes} node(s) x {cpus_node} CPUs do not fit in partition {part.name} even "
                                      f"when it is empty ({n_hosts} {nt.name} hosts)")
    starts_now = hosts_now is not None
    leaves_empty = len(leaves_of(idle, hosts_empty))
    leaves_now = len(leaves_of(view, hosts_now)) if hosts_now else None
    if not starts_now:
        notes.append(f"must queue: partition {part.name} has no {nodes} {nt.name} host(s) with {cpus_node} CPUs and "
                     f"{mem} MB free now; no start is predicted for CPU jobs (running jobs' releases are counted in "
                     "GPUs)")
    if nt.gpus:
        notes.append(f"partition {part.name} overlays GPU hosts: the job's {cpus_node} CPUs and {mem} MB per host "
                     "keep a whole-host GPU job (it asks for all of a host's CPUs and memory) off those hosts until it "
                     "ends" + (f"; CPU partitions on CPU-only hosts: {', '.join(cpu_only)}" if cpu_only else ""))

    switches: int | None = None
    wait: int | None = None
    why_switch = ""
    if nodes > 1 and not spread_ok:
        max_wait = r.max_wait if r.max_wait is not None else min(WAIT_CAP, int(r.time_limit * WAIT_FRACTION))
        if starts_now:
            switches, wait = leaves_now, SHORT_WAIT
            why_switch = (f"the job's {nodes} hosts talk (--comm {r.comm}): {leaves_now} leaf switch(es) can hold it "
                          f"now (the empty partition: {leaves_empty}); the {human(SHORT_WAIT)} wait only covers the "
                          "gap until the scheduler runs")
        else:
            switches, wait = leaves_empty, _round_minutes(max(max_wait, SHORT_WAIT))
            why_switch = (f"the job's {nodes} hosts talk (--comm {r.comm}) and it does not fit now; once hosts free "
                          f"up Slurm keeps it under {leaves_empty} leaf switch(es) for up to {human(wait)} before "
                          "spreading it")
    elif nodes > 1:
        notes.append("--comm independent: the tasks do not talk, so hosts may be spread over any leaf switches "
                     "(no --switches)")

    d: list[Directive] = []
    add = lambda o, v, why: d.append(Directive(o, v, why))  # noqa: E731
    add("job-name", _safe("--name", r.name), "the name you gave; output files are named after it")
    add("partition", part.name, f"a CPU job (no GPUs): partition {part.name} is "
                                + ("the one you named" if r.partition else "the site's first CPU partition")
                                + (f" ({part.description})" if part.description else ""))
    add("qos", tier_obj.qos, _tier_why(r, tier_obj, nodes))
    if account:
        add("account", _safe("--account", account), "the account the job runs under (a CPU job uses none of its "
                                                     "GPU-hours)")
    add("time", slurm_time(r.time_limit), f"your time limit ({human(r.time_limit)}), within tier {tier}'s "
                                          f"{human(tier_obj.max_walltime)} and the partition's {human(part.max_time)}")
    ntasks = nodes * tpn
    add("nodes", str(nodes), "the hosts you asked for (--nodes)" if r.nodes is not None else
        (f"the fewest {nt.name} hosts that hold {ntasks} task(s) x {cpt} CPUs evenly (at most {usable} CPUs per host"
         + (f", partition {part.name}'s max_cpus_per_node)" if usable < nt.cpus else ")")))
    spread = f"{ntasks} task(s) over {nodes} host(s)" + (" (--ntasks)" if r.ntasks is not None else
                                                           "; one task per host (give --ntasks for more)")
    why_cpt = ("the CPUs per task you asked for (--cpus)" if r.cpus is not None else
               "one CPU per task, Slurm's own default (give --cpus for more)")
    launcher = tmpl.name in CPU_LAUNCHERS
    if launcher:  # one launcher task per host holds all of its processes' CPUs
        add("ntasks-per-node", "1", f"one {tmpl.name} per host starts the host's {tpn} process(es): {spread}")
        add("cpus-per-task", str(cpus_node), f"the launcher's {tpn} process(es) x {cpt} CPU(s): {why_cpt}")
    else:
        add("ntasks-per-node", str(tpn), spread)
        add("cpus-per-task", str(cpt), why_cpt)
    add("mem", f"{mem}M", why_mem)
    if switches:
        add("switches", f"{switches}@{slurm_time(wait or 0)}", why_switch)
    env: list[tuple[str, str]] = []
    step_cpus = cpus_node if launcher else cpt
    if step_cpus > 1:
        # srun does not take --cpus-per-task from the allocation since Slurm 22.05: the job's steps would get one CPU
        env.append(("SRUN_CPUS_PER_TASK", str(step_cpus)))
    output, array_size, signal = _job_tail(r, tmpl, tier, tier_obj, slurm, notes, add, env)
    env.extend(r.env)
    predicted = hosts_now or hosts_empty
    return Plan(request=r, template=tmpl, partition=part.name, tier=tier, qos=tier_obj.qos, account=account,
                gpu_type="", node_type=nt.name, nodes=nodes, gpus_per_node=0, tasks_per_node=1 if launcher else tpn,
                cpus_per_gpu=0,
                mem_per_gpu_mb=0, time_limit=r.time_limit, switches=switches, switch_wait=wait,
                leaves_now=leaves_now, leaves_empty=leaves_empty, hosts=tuple(predicted), starts_now=starts_now,
                preemptible=tier_obj.preemptible, directives=tuple(d), env=tuple(env), nic_map={}, quality=None,
                live=view.live, notes=tuple(notes), array_size=array_size, output=output, checkpoint_signal=signal,
                rank_groups=_rank_groups(view) if nodes > 1 and not spread_ok else (),
                start_in=0 if starts_now else None, cpu_job=True, cpus_per_task=step_cpus, mem_per_node_mb=mem,
                cpu_procs_per_node=tpn if launcher else 0)


def _cpu_only(site: Site, view: ClusterView) -> list[str]:
    """CPU partitions whose hosts (those in the view) have no GPUs."""
    out = []
    for p in site.cpu_partitions:
        hs = [view.hosts[h] for h in _hosts_of(p.nodes) if h in view.hosts]
        if hs and all(not view.node_types[s.node_type].gpus for s in hs):
            out.append(p.name)
    return out


def _tier_why(r: JobRequest, t: Tier, nodes: int) -> str:
    how = {None: "the site's default tier", BEST_TIER: "the highest-priority tier you may use that fits"}.get(
        r.tier, "the tier you asked for")
    lim = [f"{nodes} <= {t.max_nodes} nodes"] if t.max_nodes else []
    return (f"tier {t.name}: {how} ({_preemption(t)}; a CPU job uses no GPUs, so only its time and node limits "
            f"apply: {', '.join(lim) or 'no node limit'})")
