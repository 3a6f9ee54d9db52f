"""The planner: a JobRequest + the site + a cluster view -> a Plan (every sbatch directive with its reason).

Pure: it reads the view it is given and never talks to Slurm. The CLI builds the view (live or idle) and the
list of upcoming GPU releases; the templates render the plan.
"""

from __future__ import annotations

import functools
import getpass
import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from slurmtools.durations import human, slurm_time
from slurmtools.hostlist import compress, compress_run, expand
from slurmtools.planner.packing import (HostNeed, _natural, eligible_by_leaf, first_fit, leaves_of, min_leaves, pack,
                                        pack_empty)
from slurmtools.planner.quality import Estimate, estimate
from slurmtools.planner.request import BEST_TIER, JobRequest, RequestError
from slurmtools.planner.view import ClusterView
from slurmtools.site.model import Partition, Site, Tier
from slurmtools.slurm.model import RUNNING_STATES
from slurmtools.slurm.releases import SlurmRelease
from slurmtools.topology.sitefile import NodeType

#: characters allowed in a user-supplied value that ends up on an #SBATCH line (no space, quote, newline, $, `)
_DIRECTIVE_SAFE = re.compile(r"^[A-Za-z0-9._%/@:+,=~-]+$")
#: the share of a job's time limit worth spending in the queue for a tighter placement, and its cap
WAIT_FRACTION = 0.10
WAIT_CAP = 2 * 3600
#: wait asked for when the best placement is available now: covers the gap until the scheduler runs
SHORT_WAIT = 120


@dataclass(frozen=True)
class TemplateShape:
    """What the planner needs to know about a template: how many tasks it starts and whether it is an array."""

    name: str
    tasks: str = "per-node"  # "per-node" (a launcher per host), "per-gpu" (one rank per GPU, e.g. MPI)
    multi_node: bool = True
    array: bool = False


@dataclass(frozen=True)
class Release:
    """GPUs a running job gives back on a host when it reaches its time limit (from squeue)."""

    host: str
    gpus: int
    in_seconds: int
    job_id: int = 0
    qos: str = ""  # the running job's QoS: a tier it may preempt gives its GPUs back after its grace time


@dataclass(frozen=True)
class Planned:
    """A pending job Slurm has planned (`squeue --start`): from `in_seconds` on, its hosts are taken."""

    job_id: int
    qos: str
    in_seconds: int
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class Directive:
    option: str  # without the leading dashes, e.g. "switches"
    value: str | None  # None for flags such as --requeue
    why: str

    @property
    def text(self) -> str:
        return f"--{self.option}" if self.value is None else f"--{self.option}={self.value}"


@dataclass(frozen=True)
class Quality:
    plan: Estimate  # the predicted placement now
    best_empty: Estimate  # the best the empty cluster allows
    best_now: Estimate  # the best the cluster allows now (what the plan aims for)
    first_fit: Estimate | None  # a topology-blind first fit now, for comparison

    @property
    def vs_empty(self) -> float:
        return _ratio(self.plan.gbytes, self.best_empty.gbytes)

    @property
    def vs_now(self) -> float:
        return _ratio(self.plan.gbytes, self.best_now.gbytes)


@dataclass(frozen=True)
class Plan:
    request: JobRequest
    template: TemplateShape
    partition: str
    tier: str
    qos: str
    account: str | None
    gpu_type: str
    node_type: str
    nodes: int
    gpus_per_node: int
    tasks_per_node: int
    cpus_per_gpu: int
    mem_per_gpu_mb: int
    time_limit: int
    switches: int | None  # --switches count, None when not used
    switch_wait: int | None
    leaves_now: int | None  # fewest leaves that hold the job now (None: does not fit now)
    leaves_empty: int  # fewest leaves on the empty cluster
    hosts: tuple[str, ...]  # predicted placement (Slurm makes the final choice)
    starts_now: bool
    preemptible: bool
    directives: tuple[Directive, ...]
    env: tuple[tuple[str, str], ...]  # planner-set environment (NCCL), then the user's
    nic_map: Mapping[int, tuple[str, ...]]  # GPU index -> nearest HCAs
    quality: Quality | None  # None for CPU jobs: no GPU allreduce to estimate
    live: bool
    notes: tuple[str, ...] = ()
    array_size: int = 0
    output: str = ""
    checkpoint_signal: str | None = None
    #: rank order of multi-node jobs: host groups (hostlist expressions, each an NVLink domain or a leaf switch's
    #: hosts) in the order ranks fill them, so consecutive ranks share the fastest links
    rank_groups: tuple[str, ...] = ()
    #: running jobs Slurm is predicted to preempt for this one (lower tiers on the predicted hosts)
    preempts: tuple[int, ...] = ()
    #: predicted seconds until the job starts: 0 now, the victims' grace time when it preempts, the running jobs'
    #: time limits when it queues; None when nothing predicts it
    start_in: int | None = None
    #: pending jobs queued ahead that hold hosts the job could otherwise use
    behind: tuple[int, ...] = ()
    #: a CPU job (no GPUs; gpu_type "" and gpus_per_node 0): its CPUs per task and memory per node
    cpu_job: bool = False
    cpus_per_task: int = 0
    mem_per_node_mb: int = 0
    #: CPU jobs under a launcher per host (torchrun): the processes it starts on each host
    cpu_procs_per_node: int = 0

    def directive(self, option: str) -> Directive | None:
        return next((d for d in self.directives if d.option == option), None)

    @property
    def procs_per_node(self) -> int:
        """Processes a per-host launcher (torchrun) starts on each host: one per GPU, or a CPU job's tasks."""
        return self.cpu_procs_per_node if self.cpu_job else self.gpus_per_node

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node


def plan_job(request: JobRequest, site: Site, view: ClusterView, template: TemplateShape,
             releases: Sequence[Release] = (), slurm: SlurmRelease | None = None,
             planned: Sequence[Planned] = ()) -> Plan:
    """Choose partition, tier, shape, placement constraint, binding and environment for `request`. `slurm` is the
    release that will run the job (None: unknown, and what depends on it is left out with a note)."""
    if request.cpu_job:  # no GPUs: its own branch (slurmtools.planner.cpu), on the site's CPU partitions
        from slurmtools.planner.cpu import plan_cpu_job

        return plan_cpu_job(request, site, view, template, slurm)
    partition = _partition(request, site)
    gpu_type = _gpu_type(request, site, partition)
    pview = _restrict(view, _hosts_of(partition.nodes), gpu_type)
    node_types = sorted({t for per in pview.layout().values() for t in per})
    if not node_types:
        raise RequestError("--gpu-type", f"no host of partition {partition.name} has {gpu_type} GPUs in the fabric "
                                         f"{view.source or ''}".rstrip())
    best: Plan | None = None
    errors: list[RequestError] = []
    for nt_name in node_types:
        try:
            p = _plan_for(request, site, pview, template, releases, partition, gpu_type, pview.node_types[nt_name],
                          slurm, planned)
        except RequestError as exc:
            errors.append(exc)
            continue
        if best is None or _better(p, best):
            best = p
    if best is None:
        raise errors[0]
    return best


def _better(a: Plan, b: Plan) -> bool:
    ka = (not a.starts_now, a.leaves_now or 10**9, -a.quality.plan.gbytes)
    kb = (not b.starts_now, b.leaves_now or 10**9, -b.quality.plan.gbytes)
    return ka < kb


def _plan_for(r: JobRequest, site: Site, view: ClusterView, tmpl: TemplateShape, releases: Sequence[Release],
              part: Partition, gpu_type: str, nt: NodeType, slurm: SlurmRelease | None = None,
              planned: Sequence[Planned] = ()) -> Plan:
    notes: list[str] = []
    nodes, gpn = _shape(r, part, nt, tmpl)
    if nodes > 1 and not tmpl.multi_node:
        raise RequestError("--template", f"template {tmpl.name} runs on one node, but the job needs {nodes} nodes")
    total = nodes * gpn
    tier, account = _tier(r, site, part, total, nodes, notes)
    # CPUs and memory per GPU: the GPU's own socket's share, so --gres-flags=enforce-binding can be met.
    gpus_per_socket = max(1, nt.gpus // nt.sockets)
    cpus_per_gpu = max(1, (nt.cores_per_socket * nt.threads_per_core) // gpus_per_socket)
    mem_per_gpu = nt.memory_mb // max(nt.gpus, 1)
    tasks = gpn if tmpl.tasks == "per-gpu" else 1
    need = HostNeed(gpn, cpus_per_gpu * gpn, mem_per_gpu * gpn, nt.name)
    spread_ok = r.comm == "independent"
    domain, why_domain = None, ""
    if r.comm == "tensor-parallel" and nodes > 1 and view.domain_of:
        domain, why_domain = _pick_domain(view, need, nodes)
        if domain:
            view = _restrict(view, frozenset(h for h, d in view.domain_of.items() if d == domain), gpu_type)

    hosts_empty = pack_empty(view, need, nodes)
    if hosts_empty is None:
        n_fit = len(pack_empty(view, need, 1) and [h for h, s in view.hosts.items() if s.node_type == nt.name] or [])
        raise RequestError("--gpus", f"{nodes} node(s) x {gpn} {gpu_type} GPUs do not fit in partition "
                                     f"{part.name} even when it is empty ({n_fit} {nt.name} hosts)")
    leaves_empty = len(leaves_of(view, hosts_empty))
    hosts_now = pack(view, need, nodes, spread_ok=spread_ok)
    starts_now = hosts_now is not None
    if spread_ok:
        best_now_hosts = pack(view, need, nodes)
    else:
        best_now_hosts = hosts_now
    leaves_now = len(leaves_of(view, best_now_hosts)) if best_now_hosts else None
    ff = first_fit(view, need, nodes)

    q_empty = estimate(view, hosts_empty, gpn)  # the estimate depends on where hosts are, not on what is free
    preempts: tuple[int, ...] = ()
    behind: tuple[int, ...] = ()
    start_in: int | None = 0 if starts_now else None
    predicted = hosts_now
    if not starts_now:
        predicted, start_in, preempts, behind = _predict_start(r, site, tier, view, need, nodes, spread_ok, releases,
                                                               planned, notes)
        if best_now_hosts is None and predicted:
            best_now_hosts = predicted
            leaves_now = len(leaves_of(view, predicted))
    q_now = estimate(view, best_now_hosts, gpn) if best_now_hosts else q_empty
    q_plan = estimate(view, predicted, gpn) if predicted else q_empty
    q_ff = estimate(view, ff, gpn) if ff else None
    quality = Quality(q_plan, q_empty, q_now, q_ff)

    # --switches: the fewest leaves now; ask for fewer (with a wait) when releases make that likely soon.
    switches: int | None = None
    wait: int | None = None
    max_wait = r.max_wait if r.max_wait is not None else min(WAIT_CAP, int(r.time_limit * WAIT_FRACTION))
    why_switch = ""
    if nodes > 1 and not spread_ok:
        if starts_now:
            switches, wait = leaves_now, SHORT_WAIT
            why_switch = (f"the job needs {nodes} whole hosts; {leaves_now} leaf switch(es) can hold it now, the fewest "
                          f"possible now (the empty partition would need {leaves_empty})")
            if leaves_now > leaves_empty and r.comm != "pipeline":
                better = _tighter_soon(view, need, nodes, leaves_now, releases, max_wait)
                if better is not None:
                    n_better, t_better = better
                    gain = _gain_if(view, need, nodes, releases, t_better, gpn, q_plan)
                    # fewer leaves means fewer hops and less exposure to other jobs' traffic on shared uplinks;
                    # wait unless the model says the tighter placement is slower
                    if gain >= 1.0:
                        switches, wait = n_better, _round_minutes(t_better + 60)
                        why_switch = (f"{leaves_now} leaf switches could hold the job now, but running jobs free "
                                      f"enough hosts for {n_better} within about {human(t_better)} (their time limits), "
                                      f"which is worth waiting for (fewer hops; estimated {gain:.2f}x the allreduce bandwidth; "
                                      f"the wait is capped at {human(max_wait)}, {int(WAIT_FRACTION * 100)}% of the "
                                      f"time limit); after {human(wait)} Slurm may spread it further")
            if wait == SHORT_WAIT:
                why_switch += f"; the {human(SHORT_WAIT)} wait only covers the gap until the scheduler runs"
        elif preempts:
            switches, wait = leaves_now, SHORT_WAIT
            why_switch = (f"the job starts by preempting lower-tier jobs on {leaves_now} leaf switch(es); the "
                          f"{human(SHORT_WAIT)} wait only covers the gap until the scheduler runs")
        else:
            switches, wait = leaves_empty, _round_minutes(max(max_wait, SHORT_WAIT))
            why_switch = (f"the job does not fit now; once hosts free up Slurm keeps it under {leaves_empty} leaf "
                          f"switch(es) (the fewest the partition allows) for up to {human(wait)} before spreading it")
    if r.comm == "pipeline" and switches:
        notes.append("pipeline stages exchange activations point to point; no wait is taken for a tighter placement")

    nic_map = {g: view.nearest_nics(nt.name, g) for g in range(nt.gpus)}
    env: list[tuple[str, str]] = []
    if nodes > 1 and r.comm != "independent" and nt.nics:
        used = gpn if gpn == nt.gpus else nt.gpus  # which GPUs Slurm gives is known only at run time
        hcas = []
        for g in range(used):
            for n in nic_map[g]:
                if n not in hcas:
                    hcas.append(n)
        env.append(("NCCL_IB_HCA", "=" + ",".join(hcas)))
        if len(nt.nics) >= nt.gpus:
            env.append(("NCCL_CROSS_NIC", "0"))

    d: list[Directive] = []
    add = lambda o, v, why: d.append(Directive(o, v, why))  # noqa: E731
    add("job-name", _safe("--name", r.name), "the name you gave; output files are named after it")
    add("partition", part.name, f"partition {part.name} holds the {gpu_type} hosts"
                                + (" (the site's default)" if part.default and not r.partition else ""))
    tier_obj = site.tiers[tier]
    add("qos", tier_obj.qos, _tier_why(r, tier_obj, total, nodes))
    if account:
        add("account", _safe("--account", account), "the account charged for the GPU-hours")
    add("time", slurm_time(r.time_limit), f"your time limit ({human(r.time_limit)}), within tier {tier}'s "
                                          f"{human(tier_obj.max_walltime)} and the partition's {human(part.max_time)}")
    add("nodes", str(nodes), f"{total} GPUs as {nodes} host(s) x {gpn}"
                             + (" (whole hosts: multi-node jobs get all GPUs of each host)"
                                if nodes > 1 and gpn == nt.gpus else ""))
    add("ntasks-per-node", str(tasks), "one launcher per host; it starts one process per GPU" if tasks == 1
        else "one task (rank) per GPU")
    add("gpus-per-node", f"{gpu_type}:{gpn}", f"{gpn} {gpu_type} GPU(s) on each host")
    add("cpus-per-gpu", str(cpus_per_gpu), f"a {nt.name} host has {nt.cores_per_socket * nt.threads_per_core} CPUs "
                                           f"per socket for its {gpus_per_socket} GPUs per socket: {cpus_per_gpu} "
                                           "CPUs per GPU from the GPU's own socket")
    add("mem-per-gpu", f"{mem_per_gpu}M", f"the host's {nt.memory_mb} MB shared over its {nt.gpus} GPUs")
    add("gres-flags", "enforce-binding", "CPUs must come from the sockets local to the allocated GPUs")
    if tasks > 1:
        add("gpu-bind", "closest", "each rank sees the GPU(s) closest to its CPUs")
    if domain:
        add("constraint", domain, why_domain)
    if switches:
        add("switches", f"{switches}@{slurm_time(wait or 0)}", why_switch)
    for option, value, why in _block_directives(r, part, view, nodes, gpn, slurm, notes):
        add(option, value, why)
    output, array_size, signal = _job_tail(r, tmpl, tier, tier_obj, slurm, notes, add, env)
    env.extend(r.env)  # the user's last: they may override ours
    rank_groups = _rank_groups(view) if nodes > 1 and r.comm != "independent" else ()
    return Plan(request=r, template=tmpl, partition=part.name, tier=tier, qos=tier_obj.qos, account=account,
                gpu_type=gpu_type, node_type=nt.name, nodes=nodes, gpus_per_node=gpn, tasks_per_node=tasks,
                cpus_per_gpu=cpus_per_gpu, mem_per_gpu_mb=mem_per_gpu, time_limit=r.time_limit,
                switches=switches, switch_wait=wait, leaves_now=leaves_now, leaves_empty=leaves_empty,
                hosts=tuple(predicted or hosts_empty), starts_now=starts_now, preemptible=tier_obj.preemptible,
                directives=tuple(d), env=tuple(env), nic_map=nic_map, quality=quality, live=view.live,
                notes=tuple(notes), array_size=array_size, output=output, checkpoint_signal=signal,
                rank_groups=rank_groups, preempts=preempts, start_in=start_in, behind=behind)


def _job_tail(r: JobRequest, tmpl: TemplateShape, tier: str, tier_obj: Tier, slurm: SlurmRelease | None,
              notes: list[str], add, env: list[tuple[str, str]]) -> tuple[str, int, str | None]:
    """Directives every job gets the same way, GPU or CPU: output, working folder, the array, and the requeue and
    warning-signal wiring of preemptible tiers. Returns (output pattern, array size, checkpoint signal)."""
    out_dir = _safe("--output-dir", r.output_dir.rstrip("/")) + "/" if r.output_dir else ""
    pattern = "%x-%A_%a.out" if tmpl.array else "%x-%j.out"
    output = out_dir + pattern
    add("output", output, "where the job's output goes (%x job name, %j job id" +
        (", %A array job, %a task)" if tmpl.array else ")"))
    if r.workdir:
        add("chdir", _safe("--workdir", r.workdir), "the directory the job runs in")
    array_size = 0
    if tmpl.array:
        if not r.sweep:
            raise RequestError("--sweep", f"template {tmpl.name} runs a sweep: give at least one --sweep ARGS")
        array_size = len(r.sweep)
        add("array", f"0-{array_size - 1}", f"one array task per sweep entry ({array_size})")
    elif r.sweep:
        raise RequestError("--sweep", f"template {tmpl.name} is not a sweep; use --template array")
    signal = None
    if tier_obj.preemptible:
        signal, why_signal = checkpoint_signal(r, tier_obj)
        lead, why_lead = signal_lead(tier_obj.signal_lead, r.time_limit)
        if why_lead:
            notes.append(why_lead)
        add("requeue", None, f"tier {tier} is preemptible (by {', '.join(tier_obj.preempted_by)}): a preempted run is "
                             "queued again instead of lost")
        add("open-mode", "append", "a requeued run appends to the same output file instead of truncating it")
        when = (f"{human(lead)} before the time limit and at preemption" if lead else "at preemption only")
        to = ("the script passes it on to your program (--handles-signal)" if r.handles_signal else
              "the script passes it on only to a program that said it handles it (slurmtools.checkpoint does); "
              "any other program runs on and Slurm requeues it, intact, when the grace time ends")
        add("signal", f"B:{signal}@{lead}",
            f"the batch shell gets SIG{signal} ({why_signal}) {when} (grace {human(tier_obj.grace_time)}); {to}")
        env.append(("SLURMTOOLS_CHECKPOINT_SIGNAL", signal))
        env.append(("SLURMTOOLS_SIGNAL_LEAD", str(lead)))
        if r.handles_signal:
            env.append(("SLURMTOOLS_FORWARD_SIGNAL", "1"))
        elif slurm is not None and slurm.preempted_exit_requeued:
            # the wiring stops a program that keeps no checkpoint at preemption: Slurm requeues it cleanly
            env.append(("SLURMTOOLS_PREEMPTED_EXIT_REQUEUED", "1"))
    elif r.handles_signal:
        notes.append(f"--handles-signal: tier {tier} is never preempted; no warning signal is asked for")
    return output, array_size, signal


# ------------------------------------------------------------------------------------------------- pieces

def _partition(r: JobRequest, site: Site) -> Partition:
    if r.partition:
        if r.partition not in site.partitions:
            raise RequestError("--partition", f"unknown partition {r.partition!r} (known: {', '.join(site.partitions)})")
        if site.partitions[r.partition].cpu_only:
            gpu_parts = [p.name for p in site.partitions.values() if not p.cpu_only]
            raise RequestError("--partition", f"partition {r.partition} is a CPU partition (no GPUs): name a GPU "
                                              f"partition ({', '.join(gpu_parts) or 'the site has none'}) or ask for "
                                              "--gpus 0")
        return site.partitions[r.partition]
    if r.gpu_type:
        for p in [site.default_partition, *site.partitions.values()]:
            if r.gpu_type in p.gpu_types:
                return p
    if site.default_partition.cpu_only:  # a CPU default partition takes bare sbatch jobs; GPU jobs go elsewhere
        return next((p for p in site.partitions.values() if not p.cpu_only), site.default_partition)
    return site.default_partition


def _gpu_type(r: JobRequest, site: Site, part: Partition) -> str:
    if r.gpu_type:
        if r.gpu_type not in part.gpu_types:
            raise RequestError("--gpu-type", f"partition {part.name} has no {r.gpu_type!r} GPUs "
                                             f"(it has: {', '.join(part.gpu_types)})")
        return r.gpu_type
    if len(part.gpu_types) == 1:
        return part.gpu_types[0]
    raise RequestError("--gpu-type", f"partition {part.name} has several GPU types ({', '.join(part.gpu_types)}); "
                                     "choose one")


@functools.lru_cache(maxsize=32)
def _hosts_of(expr: str) -> frozenset[str]:
    return frozenset(expand(expr))


def _restrict(view: ClusterView, hosts: set[str], gpu_type: str) -> ClusterView:
    from dataclasses import replace

    key = ("restrict", hosts, gpu_type)
    if view.memo.get(key) is True:  # already known to keep every host
        return view
    ok_types = {n for n, nt in view.node_types.items() if nt.gpu_type == gpu_type}
    if len(ok_types) == len(view.node_types) and hosts.issuperset(view.hosts):
        view.memo[key] = True
        return view
    keep = {h: s for h, s in view.hosts.items() if s.node_type in ok_types and h in hosts}
    if len(keep) == len(view.hosts):
        view.memo[key] = True
        return view
    leaves = {leaf: tuple(h for h in hs if h in keep) for leaf, hs in view.leaves.items()}
    return replace(view, hosts=keep, leaves={k: v for k, v in leaves.items() if v})


def _shape(r: JobRequest, part: Partition, nt: NodeType, tmpl: TemplateShape) -> tuple[int, int]:
    per = nt.gpus
    if r.nodes is not None and r.gpus_per_node is not None:
        nodes, gpn = r.nodes, r.gpus_per_node
    elif r.nodes is not None:
        nodes = r.nodes
        gpn = r.gpus // r.nodes if r.gpus is not None else per
    else:
        g = r.gpus
        if g <= per:
            nodes, gpn = 1, g
        elif g % per == 0:
            nodes, gpn = g // per, per
        elif part.allow_partial_nodes:
            nodes = next(n for n in range(math.ceil(g / per), g + 1) if g % n == 0)
            gpn = g // nodes
        else:
            lo, hi = g // per * per, (g // per + 1) * per
            raise RequestError("--gpus", f"{g} GPUs is not a whole number of {per}-GPU {nt.name} hosts and partition "
                                         f"{part.name} gives multi-node jobs whole hosts: ask for {lo} or {hi}")
    if gpn > per:
        raise RequestError("--gpus-per-node", f"{gpn} GPUs per node, but a {nt.name} host has {per}")
    if nodes > 1 and gpn != per and not part.allow_partial_nodes:
        raise RequestError("--gpus-per-node", f"partition {part.name} gives multi-node jobs whole hosts: use "
                                              f"--gpus-per-node {per} (or one node)")
    return nodes, gpn


def _user_accounts(site: Site, user: str) -> list[str]:
    return [a.name for a in site.accounts.values() if user in a.users]


def _tier(r: JobRequest, site: Site, part: Partition, gpus: int, nodes: int,
          notes: list[str]) -> tuple[str, str | None]:
    user = r.user or _whoami()
    if r.account:
        if r.account not in site.accounts:
            raise RequestError("--account", f"unknown account {r.account!r} (known: {', '.join(site.accounts)})")
        account: str | None = r.account
    else:
        mine = _user_accounts(site, user)
        account = mine[0] if mine else None
    allowed = site.accounts[account].tiers if account else tuple(site.tiers)

    def misfit(t: Tier) -> str | None:
        if t.name not in allowed:
            return f"account {account} may not use tier {t.name}"
        if t.partitions and part.name not in t.partitions:
            return f"tier {t.name} does not run on partition {part.name}"
        if t.max_gpus_per_job is not None and gpus > t.max_gpus_per_job:
            return f"{gpus} GPUs is over tier {t.name}'s {t.max_gpus_per_job} GPUs per job"
        if t.max_nodes is not None and nodes > t.max_nodes:
            return f"{nodes} nodes is over tier {t.name}'s {t.max_nodes} nodes per job"
        if r.time_limit > t.max_walltime:
            return f"{human(r.time_limit)} is over tier {t.name}'s {human(t.max_walltime)} time limit"
        if r.time_limit > part.max_time:
            return f"{human(r.time_limit)} is over partition {part.name}'s {human(part.max_time)} time limit"
        return None

    if r.tier == BEST_TIER:
        reasons = []
        for t in site.tiers_by_priority():
            why = misfit(t)
            if why is None:
                if reasons:  # a fallback is the user's choice (--tier best), and the plan says so
                    notes.append(f"--tier best: tier {t.name} ({_preemption(t)}) because " + "; ".join(reasons))
                return t.name, account
            reasons.append(why)
        raise RequestError("--tier", "no tier fits: " + "; ".join(reasons))
    name = r.tier if r.tier is not None else site.default_tier
    if name not in site.tiers:
        raise RequestError("--tier", f"unknown tier {name!r} (known: {', '.join(site.tiers)}, or best)")
    why = misfit(site.tiers[name])
    if why:
        fits = [f"{t.name} ({_preemption(t)})" for t in site.tiers_by_priority() if misfit(t) is None]
        which = "the tier you asked for" if r.tier is not None else "the site's default tier"
        raise RequestError("--tier", f"{why} ({which}); "
                           + (f"tiers that fit: {', '.join(fits)}: choose one with --tier" if fits
                              else "no tier fits"))
    return name, account


def _preemption(t: Tier) -> str:
    return f"preemptible by {', '.join(t.preempted_by)}" if t.preemptible else "never preempted"


def _tier_why(r: JobRequest, t: Tier, gpus: int, nodes: int) -> str:
    how = {None: "the site's default tier", BEST_TIER: "the highest-priority tier you may use that fits"}.get(
        r.tier, "the tier you asked for")
    lim = []
    if t.max_gpus_per_job:
        lim.append(f"{gpus} <= {t.max_gpus_per_job} GPUs per job")
    if t.max_nodes:
        lim.append(f"{nodes} <= {t.max_nodes} nodes")
    return f"tier {t.name}: {how} ({_preemption(t)}; limits checked: {', '.join(lim) or 'none'})"


def checkpoint_signal(r: JobRequest, tier: Tier) -> tuple[str, str]:
    """The warning signal of a preemptible tier's job, and why: the job's --checkpoint-signal, else the tier's.

    Both are from slurmtools.warning_signals.USABLE (the request and the site loader refuse others); the plan
    exports it as SLURMTOOLS_CHECKPOINT_SIGNAL, which the wiring traps and slurmtools.checkpoint handles."""
    from slurmtools.warning_signals import normalize

    if r.checkpoint_signal is not None:
        return normalize(r.checkpoint_signal) or r.checkpoint_signal, "--checkpoint-signal"
    return tier.checkpoint_signal, f"tier {tier.name}'s checkpoint_signal"


def signal_lead(tier_lead: int, time_limit: int) -> tuple[int, str | None]:
    """The --signal lead that fits the time limit, and why it differs from the tier's (None: it does not).

    Slurm sends the warning when at most lead + 30 s remain and checks every 30 s (measured: up to 60 s early),
    so a lead near the time limit warns at start. Kept within half the time limit, the warning comes after the
    job has run; below 4 minutes there is no room for one, and @0 warns at preemption only."""
    if 2 * tier_lead <= time_limit:
        return tier_lead, None
    if time_limit >= 240:
        lead = time_limit // 2
        return lead, (f"--signal lead shortened from the tier's {human(tier_lead)} to {human(lead)}, half the "
                      f"{human(time_limit)} time limit: Slurm sends the warning up to 60 s early, so the tier's lead "
                      "would warn at or near the start")
    return 0, (f"--signal lead 0 (no time-limit warning, the warning comes at preemption only): a "
               f"{human(time_limit)} time limit leaves no room for the tier's {human(tier_lead)} lead, and Slurm "
               "sends the warning up to 60 s early")


def _whoami() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (containers): no account can be inferred
        return ""


def _safe(option: str, value: str) -> str:
    """A user value for an #SBATCH line: refused (not mangled) when it could break the line or the shell."""
    if not _DIRECTIVE_SAFE.match(value or ""):
        raise RequestError(option, f"{value!r} may only hold letters, digits and . _ % / @ : + , = ~ - "
                                   "(it goes on an #SBATCH line)")
    return value


def _rank_groups(view: ClusterView) -> tuple[str, ...]:
    """The job's possible hosts as groups that share the fastest links (a multi-node NVLink domain, else a leaf
    switch), groups and hosts in natural name order: ranks filled group by group keep neighbours together.
    A layout table (every host of the partition, never its free GPUs): derived once per view."""
    got = view.memo.get("rank_groups")
    if got is None:
        got = view.memo["rank_groups"] = _derive_rank_groups(view)
    return got


def _derive_rank_groups(view: ClusterView) -> tuple[str, ...]:
    groups: dict[str, Sequence[str]] = {}
    hosts, domain_of = view.hosts, view.domain_of
    for leaf, members in view.leaves.items():
        if not domain_of and all(map(hosts.__contains__, members)):  # the usual leaf: its hosts as they are, no copy
            if members:
                groups[f"leaf:{leaf}"] = members
            continue
        for h in members:
            if h in hosts:
                groups.setdefault(domain_of.get(h) or f"leaf:{leaf}", []).append(h)
    run = compress_run(list(groups.values()))
    if run is not None:  # one ascending run of names, group after group: already in natural order
        return tuple(run)
    ordered = sorted((sorted(hs, key=_natural) for hs in groups.values()), key=lambda hs: _natural(hs[0]))
    return tuple(compress(hs) for hs in ordered)


def _block_directives(r: JobRequest, part: Partition, view: ClusterView, nodes: int, gpn: int,
                      slurm: SlurmRelease | None, notes: list[str]) -> list[tuple[str, str, str]]:
    """--segment and --exclusive=topo on a partition placed by topology/block (NVLink domains as blocks).

    A segment is a set of hosts Slurm keeps inside one block: sized from the tensor-parallel group, whose every
    layer's traffic then stays on NVLink. Exclusive blocks keep other jobs off the NVLink switches the job's
    tensor-parallel traffic uses."""
    if part.topology != "block" or nodes < 2:
        if r.tp_size and part.topology != "block" and nodes > 1:
            notes.append(f"--tp-size: partition {part.name} is not placed by blocks (topology {part.topology}): "
                         "no --segment")
        return []
    if slurm is None:
        notes.append("the Slurm release is unknown (no Slurm answered; give --slurm-version): --segment and "
                     "--exclusive=topo are left out")
        return []
    if not slurm.segment:
        notes.append(f"Slurm {slurm.name} has no --segment or --exclusive=topo: left out")
        return []
    sizes: dict[str, int] = {}
    for h, d in view.domain_of.items():
        if h in view.hosts:
            sizes[d] = sizes.get(d, 0) + 1
    block = min(sizes.values()) if sizes else None
    out: list[tuple[str, str, str]] = []
    seg = 0
    if r.tp_size:
        total = nodes * gpn
        if r.tp_size > total or total % r.tp_size:
            raise RequestError("--tp-size", f"tensor-parallel groups of {r.tp_size} GPUs do not divide the job's "
                                            f"{total} GPUs")
        if r.tp_size <= gpn:
            notes.append(f"--tp-size {r.tp_size}: each tensor-parallel group fits in one host (NVLink inside the "
                         "host carries it): no --segment")
        else:
            if r.tp_size % gpn:
                raise RequestError("--tp-size", f"a tensor-parallel group of {r.tp_size} GPUs is not whole hosts of "
                                                f"{gpn} GPUs")
            seg = r.tp_size // gpn
            if block is not None and seg > block:
                raise RequestError("--tp-size", f"a tensor-parallel group of {seg} hosts does not fit in one block "
                                                f"of partition {part.name} (the smallest NVLink block has {block} "
                                                "hosts)")
            out.append(("segment", str(seg), f"each tensor-parallel group ({r.tp_size} GPUs = {seg} hosts) stays "
                                             "inside one NVLink block, so its per-layer traffic never leaves NVLink"))
    if seg or r.comm == "tensor-parallel":
        out.append(("exclusive", "topo", "no other job shares the job's NVLink blocks: their switches carry its "
                                         "tensor-parallel traffic"))
    return out


def _pick_domain(view: ClusterView, need: HostNeed, nodes: int) -> tuple[str | None, str]:
    """For tensor-parallel jobs on multi-node NVLink domains: the domain that holds the job now with the least
    room to spare (best fit), else the largest domain that could hold it once free; None when none is big enough."""
    free: dict[str, int] = {}
    size: dict[str, int] = {}
    elig = {h for hs in eligible_by_leaf(view, need).values() for h in hs}
    for h, d in view.domain_of.items():
        if h not in view.hosts or view.hosts[h].node_type != need.node_type:
            continue
        size[d] = size.get(d, 0) + 1
        free[d] = free.get(d, 0) + (h in elig)
    now = sorted((free[d], d) for d in free if free[d] >= nodes)
    if now:
        d = now[0][1]
        return d, (f"tensor-parallel traffic stays on NVLink: multi-node NVLink domain {d} has {free[d]} free hosts "
                   f"for the job's {nodes} (the domain with the least room to spare that fits now)")
    later = sorted((-size[d], d) for d in size if size[d] >= nodes)
    if later:
        d = later[0][1]
        return d, (f"tensor-parallel traffic stays on NVLink: no NVLink domain has {nodes} free hosts now; domain "
                   f"{d} ({size[d]} hosts) will hold the job once hosts free up")
    return None, ""


def _predict_start(r: JobRequest, site: Site, tier: str, view: ClusterView, need: HostNeed, nodes: int,
                   spread_ok: bool, releases: Sequence[Release], planned: Sequence[Planned],
                   notes: list[str]) -> tuple[tuple[str, ...] | None, int | None, tuple[int, ...], tuple[int, ...]]:
    """Where and when a job that does not fit now starts: (hosts, seconds, jobs it preempts, jobs queued ahead).

    First by preemption: running jobs of tiers this tier may preempt give their hosts back after their grace time
    (Slurm preempts rather than queue). Then by the running jobs' time limits, with the hosts that pending jobs of
    at least this tier's priority are planned on (`squeue --start`) taken from the time they start."""
    mine = site.tiers[tier]
    by_qos = {t.qos: t for t in site.tiers.values()}
    victims = [x for x in releases if x.qos in by_qos and tier in by_qos[x.qos].preempted_by]
    if victims:
        freed: dict[str, int] = {}
        for x in victims:
            freed[x.host] = freed.get(x.host, 0) + x.gpus
        hosts = pack(view.with_free(freed), need, nodes, spread_ok=spread_ok)
        if hosts:
            used = set(hosts)
            jobs = tuple(sorted({x.job_id for x in victims if x.host in used}))
            grace = max((by_qos[x.qos].grace_time for x in victims if x.job_id in jobs), default=0)
            notes.append(f"no free hosts now: tier {tier} preempts job(s) {', '.join(map(str, jobs))} "
                         f"({', '.join(sorted({by_qos[x.qos].name for x in victims if x.job_id in jobs}))}), which "
                         f"get up to {human(grace)} of grace time to checkpoint; predicted hosts {compress(hosts)}")
            return tuple(hosts), grace, jobs, ()
    ahead = [p for p in planned if p.hosts and (p.qos not in by_qos or by_qos[p.qos].priority >= mine.priority)]
    for t in sorted({x.in_seconds for x in releases} | {0}):
        freed = {}
        for x in releases:
            if x.in_seconds <= t:
                freed[x.host] = freed.get(x.host, 0) + x.gpus
        v = view.with_free(freed).with_taken(h for p in ahead if p.in_seconds <= t for h in p.hosts)
        hosts = pack(v, need, nodes, spread_ok=spread_ok)
        if hosts:
            behind = tuple(sorted({p.job_id for p in ahead if p.in_seconds <= t}))
            notes.append(f"must queue: predicted to start within about {human(t)} on {compress(hosts)}, when running "
                         "jobs reach their time limits (an upper bound)"
                         + (f", after job(s) {', '.join(map(str, behind))} queued ahead" if behind else ""))
            return tuple(hosts), t, (), behind
    notes.append("must queue: the running jobs' time limits do not free enough hosts; no start can be predicted")
    return None, None, (), ()


def _count_fit(view: ClusterView, need: HostNeed) -> int:
    return sum(len(v) for v in eligible_by_leaf(view, need).values())


def _tighter_soon(view: ClusterView, need: HostNeed, k: int, now_leaves: int, releases: Sequence[Release],
                  max_wait: int) -> tuple[int, int] | None:
    """(fewest leaves, seconds) at the earliest release time within max_wait that beats `now_leaves`."""
    freed: dict[str, int] = {}
    for t in sorted({x.in_seconds for x in releases if 0 <= x.in_seconds <= max_wait}):
        for x in releases:
            if x.in_seconds == t:
                freed[x.host] = freed.get(x.host, 0) + x.gpus
        v = view.with_free(freed)
        caps = [len(hs) for hs in eligible_by_leaf(v, need).values()]
        n = min_leaves(caps, k)
        if n is not None and n < now_leaves:
            return n, t
    return None


def _gain_if(view: ClusterView, need: HostNeed, k: int, releases: Sequence[Release], t: int, gpn: int,
             q_now: Estimate) -> float:
    freed: dict[str, int] = {}
    for x in releases:
        if x.in_seconds <= t:
            freed[x.host] = freed.get(x.host, 0) + x.gpus
    v = view.with_free(freed)
    hosts = pack(v, need, k)
    if not hosts:
        return 0.0
    return _ratio(estimate(v, hosts, gpn).gbytes, q_now.gbytes)


def _round_minutes(s: int) -> int:
    return int(math.ceil(s / 60.0) * 60)


def _ratio(a: float, b: float) -> float:
    return round(a / b, 4) if b else 0.0


def releases_from_jobs(jobs: Sequence, now) -> list[Release]:
    """Running jobs' GPUs per host and when their time limits end (an upper bound on when they free up)."""
    out: list[Release] = []
    for j in jobs:
        if j.state not in RUNNING_STATES or not j.nodes or j.start_time is None or not j.time_limit_s:
            continue
        left = int((j.start_time - now).total_seconds()) + j.time_limit_s
        per = max(1, j.gpus // max(len(j.nodes), 1)) if j.gpus else 0
        for h in j.nodes:
            out.append(Release(h, per, max(0, left), j.job_id, j.qos))
    return out


def planned_from_starts(starts: Sequence, now) -> list[Planned]:
    """Slurm's planned pending jobs (backend ScheduledStart) as seconds from now."""
    out = []
    for s in starts:
        if s.nodes and s.start is not None:
            out.append(Planned(s.job_id, s.qos, max(0, int((s.start - now).total_seconds())), tuple(s.nodes)))
    return out


def placement_text(plan: Plan) -> str:
    return compress(plan.hosts) if plan.hosts else "-"


__all__ = ["Directive", "Plan", "Planned", "Quality", "Release", "TemplateShape", "plan_job", "planned_from_starts",
           "releases_from_jobs"]
