"""Plain-language text for plans and for jobs already in Slurm (`slurmtools explain JOBID`). Pure."""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from slurmtools.durations import human
from slurmtools.hostlist import compress
from slurmtools.planner.packing import HostNeed, pack
from slurmtools.planner.plan import Plan
from slurmtools.planner.quality import estimate
from slurmtools.planner.view import ClusterView
from slurmtools.slurm.model import RUNNING_STATES

#: squeue reasons people meet most, in words
REASONS = {
    "Resources": "waiting for resources: not enough free GPUs/hosts of the requested shape right now",
    "Priority": "jobs with higher priority are queued ahead of it",
    "BeginTime": "not allowed to start yet (a requeued job waits about 2 minutes, or --begin was given)",
    "Dependency": "waiting for the jobs it depends on",
    "DependencyNeverSatisfied": "its dependency can never be met; cancel it",
    "QOSMaxGRESPerUser": "the tier's per-user GPU limit is reached by your running jobs",
    "QOSMaxGRESPerJob": "the job asks for more GPUs than its tier allows per job",
    "QOSMaxWallDurationPerJobLimit": "the time limit is over the tier's maximum",
    "QOSMaxNodePerJobLimit": "the job asks for more nodes than its tier allows",
    "ReqNodeNotAvail": "a requested node is down, drained or reserved",
    "PartitionTimeLimit": "the time limit is over the partition's maximum",
    "JobHeldUser": "held by its owner (scontrol release JOBID)",
    "JobHeldAdmin": "held by an administrator",
    "launch_failed_requeued_held": "a node failed to start it; it was requeued and held",
    "None": "no reason reported (it is about to start or is running)",
    "NonZeroExitCode": "its program exited with a non-zero code (see the job's output file)",
    "TimeLimit": "it ran past its time limit",
    "OutOfMemory": "it used more memory than it asked for",
}


def plan_dict(plan: Plan, note: str = "") -> dict[str, Any]:
    if plan.cpu_job:
        return _cpu_plan_dict(plan, note)
    q = plan.quality
    return {
        "partition": plan.partition, "tier": plan.tier, "qos": plan.qos, "account": plan.account,
        "gpu_type": plan.gpu_type, "node_type": plan.node_type, "nodes": plan.nodes,
        "gpus_per_node": plan.gpus_per_node, "tasks_per_node": plan.tasks_per_node,
        "cpus_per_gpu": plan.cpus_per_gpu, "mem_per_gpu_mb": plan.mem_per_gpu_mb, "time_limit_s": plan.time_limit,
        "switches": plan.switches, "switch_wait_s": plan.switch_wait, "leaves_now": plan.leaves_now,
        "leaves_empty": plan.leaves_empty, "predicted_hosts": list(plan.hosts), "starts_now": plan.starts_now,
        "preempts": list(plan.preempts), "start_in_s": plan.start_in, "queued_behind": list(plan.behind),
        "preemptible": plan.preemptible, "template": plan.template.name, "output": plan.output,
        "directives": [{"option": d.text, "why": d.why} for d in plan.directives],
        "env": dict(plan.env), "nic_map": {str(k): list(v) for k, v in plan.nic_map.items()},
        "quality": {
            "allreduce_gbytes": q.plan.gbytes, "best_empty_gbytes": q.best_empty.gbytes,
            "best_now_gbytes": q.best_now.gbytes,
            "first_fit_gbytes": q.first_fit.gbytes if q.first_fit else None,
            "vs_empty": q.vs_empty, "vs_now": q.vs_now, "hops": q.plan.hops, "bottleneck": q.plan.bottleneck,
        },
        "live": plan.live, "note": note, "notes": list(plan.notes), "rank_groups": list(plan.rank_groups),
    }


def _cpu_plan_dict(plan: Plan, note: str) -> dict[str, Any]:
    """A CPU job's plan: the GPU keys are left out, not zeroed (there is no GPU allreduce to estimate)."""
    return {
        "cpu_job": True, "partition": plan.partition, "tier": plan.tier, "qos": plan.qos, "account": plan.account,
        "node_type": plan.node_type, "nodes": plan.nodes, "tasks_per_node": plan.tasks_per_node,
        "cpus_per_task": plan.cpus_per_task, "mem_per_node_mb": plan.mem_per_node_mb,
        "launcher_procs_per_node": plan.cpu_procs_per_node or None,  # torchrun: processes its one task starts
        "time_limit_s": plan.time_limit, "switches": plan.switches, "switch_wait_s": plan.switch_wait,
        "leaves_now": plan.leaves_now, "leaves_empty": plan.leaves_empty, "predicted_hosts": list(plan.hosts),
        "starts_now": plan.starts_now, "start_in_s": plan.start_in, "preemptible": plan.preemptible,
        "template": plan.template.name, "output": plan.output,
        "directives": [{"option": d.text, "why": d.why} for d in plan.directives], "env": dict(plan.env),
        "live": plan.live, "note": note, "notes": list(plan.notes), "rank_groups": list(plan.rank_groups),
    }


def _cpu_plan_text(plan: Plan, note: str) -> list[str]:
    lines = [f"note: {note}"] if note else []
    if plan.cpu_procs_per_node:
        shape = (f"{plan.nodes} x 1 {plan.template.name} starting {plan.cpu_procs_per_node} process(es), "
                 f"{plan.cpus_per_task} CPU(s)")
    else:
        shape = f"{plan.nodes} x {plan.tasks_per_node} task(s) x {plan.cpus_per_task} CPU(s)"
    lines.append(f"plan: CPU job (no GPUs): {shape} and {plan.mem_per_node_mb} MB per host ({plan.node_type}) on "
                 f"partition {plan.partition}, tier {plan.tier}, template {plan.template.name}")
    when = "starts now" if plan.starts_now else "must queue (no start can be predicted)"
    lines.append(f"placement: {when}; predicted hosts {compress(plan.hosts) if plan.hosts else '-'} under "
                 f"{plan.leaves_now if plan.leaves_now is not None else '-'} leaf switch(es) (empty partition: "
                 f"{plan.leaves_empty}); Slurm makes the final choice")
    return lines


def plan_text(plan: Plan, note: str = "") -> str:
    if plan.cpu_job:
        return "\n".join(_cpu_plan_text(plan, note) + _plan_body(plan))
    q = plan.quality
    lines = []
    if note:
        lines.append(f"note: {note}")
    where = compress(plan.hosts) if plan.hosts else "-"
    lines.append(f"plan: {plan.nodes} x {plan.gpus_per_node} {plan.gpu_type} GPUs on partition {plan.partition}, "
                 f"tier {plan.tier}, template {plan.template.name}")
    if plan.starts_now:
        when = "starts now"
    elif plan.preempts:
        when = (f"starts by preempting job(s) {', '.join(map(str, plan.preempts))} (within their grace time, "
                f"{plan.start_in}s)")
    elif plan.start_in is not None:
        when = f"must queue (predicted start within about {plan.start_in}s)"
    else:
        when = "must queue (no start can be predicted)"
    lines.append(f"placement: {when}; predicted hosts {where} under "
                 f"{plan.leaves_now if plan.leaves_now is not None else '-'} leaf switch(es) "
                 f"(empty cluster: {plan.leaves_empty}); Slurm makes the final choice within the constraint")
    ff = f", topology-blind first fit {q.first_fit.gbytes:g} GB/s" if q.first_fit else ""
    lines.append(f"quality: estimated allreduce {q.plan.gbytes:g} GB/s per GPU ({q.plan.bottleneck}; {q.plan.hops} "
                 f"hops) = {q.vs_empty:.2f} of the empty cluster's best ({q.best_empty.gbytes:g}) and {q.vs_now:.2f} "
                 f"of the best now ({q.best_now.gbytes:g}){ff}")
    return "\n".join(lines + _plan_body(plan))


def _plan_body(plan: Plan) -> list[str]:
    """Directives with their reasons, the environment, the rank order and the notes (GPU and CPU plans alike)."""
    lines = ["directives:"]
    for d in plan.directives:
        lines.append(f"  {d.text}")
        lines.append(f"      {d.why}")
    if plan.env:
        lines.append("environment:")
        for k, v in plan.env:
            why = _env_why(k, plan)
            lines.append(f"  {k}={v}" + (f"   ({why})" if why else ""))
    if plan.rank_groups:
        lines.append(f"rank order: ranks fill one group before the next ({', '.join(plan.rank_groups)}): each is an "
                     "NVLink domain or a leaf switch's hosts, so neighbouring ranks share the fastest links "
                     "(the template turns it into a host file or node ranks)")
    for n in plan.notes:
        lines.append(f"note: {n}")
    return lines


def _env_why(k: str, plan: Plan) -> str:
    if k == "NCCL_IB_HCA":
        pairs = ", ".join(f"GPU{g}->{'/'.join(n)}" for g, n in sorted(plan.nic_map.items()))
        return f"only the HCAs nearest the job's GPUs ({pairs})"
    if k == "NCCL_CROSS_NIC":
        return "rail-optimised hosts: keep each ring on one rail"
    if k == "SRUN_CPUS_PER_TASK" and plan.cpu_job:
        return "srun does not take --cpus-per-task from the job since Slurm 22.05: each step gets the CPUs per task"
    return ""


def job_report(job, view: ClusterView, gpus_per_node: int | None = None,
               domains: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Placement, quality and waiting reason of a job Slurm knows. `view` is the live view; the job's own GPUs
    are handed back to compute "the best now" for a job of this shape."""
    hosts = [h for h in job.nodes if h in view.hosts]
    per = gpus_per_node or (job.gpus // max(job.num_nodes, 1) if job.gpus else 0)
    out: dict[str, Any] = {"job_id": job.job_id, "state": job.state, "reason": job.reason,
                           "reason_text": REASONS.get(job.reason, job.reason), "nodes": list(job.nodes),
                           "switches_requested": job.req_switch}
    if job.state == "PENDING" and job.req_switch:
        out["reason_text"] += (f"; it also asks for at most {job.req_switch} leaf switch(es) (--switches), which it "
                               "waits for until its switch wait time passes")
    if not hosts or not per:
        return out
    leaves = Counter(view.hosts[h].leaf for h in hosts)
    out["leaves"] = {leaf: compress([h for h in hosts if view.hosts[h].leaf == leaf]) for leaf in leaves}
    if domains:
        out["nvlink_domains"] = sorted({domains.get(h, h) for h in hosts})
    nt = view.node_types[view.hosts[hosts[0]].node_type]
    need = HostNeed(per, 0, 0, nt.name)
    mine = estimate(view, hosts, per)
    empty = view.idle()
    best_empty = pack(empty, need, len(hosts))
    own = view.with_free({h: per for h in hosts}) if job.state in RUNNING_STATES else view
    best_now = pack(own, need, len(hosts))
    e_empty = estimate(empty, best_empty, per) if best_empty else None
    e_now = estimate(own, best_now, per) if best_now else None
    out["quality"] = {
        "allreduce_gbytes": mine.gbytes, "hops": mine.hops, "bottleneck": mine.bottleneck,
        "best_empty_gbytes": e_empty.gbytes if e_empty else None,
        "best_now_gbytes": e_now.gbytes if e_now else None,
        "vs_empty": round(mine.gbytes / e_empty.gbytes, 4) if e_empty and e_empty.gbytes else None,
        "vs_now": round(mine.gbytes / e_now.gbytes, 4) if e_now and e_now.gbytes else None,
        "leaves_used": len(leaves), "leaves_best_empty": len({empty.hosts[h].leaf for h in best_empty or []}),
    }
    return out


def job_text(r: dict[str, Any]) -> str:
    reason = r.get("reason")
    said = "" if not reason or reason == "None" else \
        f" ({reason})" if r.get("reason_text") in (None, "", reason) else f" ({reason}: {r['reason_text']})"
    lines = [f"job {r['job_id']}: {r['state']}{said}"]
    if r.get("switches_requested"):
        lines.append(f"asked for at most {r['switches_requested']} leaf switch(es)")
    if r.get("leaves"):
        lines.append("placement: " + "; ".join(f"{leaf}: {hs}" for leaf, hs in r["leaves"].items()))
    if r.get("nvlink_domains"):
        lines.append(f"NVLink domains: {', '.join(r['nvlink_domains'])} (GPUs talk over NVLink only inside one)")
    q = r.get("quality")
    if q:
        ve = f"{q['vs_empty']:.2f}" if q["vs_empty"] is not None else "-"
        vn = f"{q['vs_now']:.2f}" if q["vs_now"] is not None else "-"
        lines.append(f"quality: estimated allreduce {q['allreduce_gbytes']:g} GB/s per GPU ({q['bottleneck']}; "
                     f"{q['hops']} hops) = {ve} of the empty cluster's best, {vn} of the best now; "
                     f"{q['leaves_used']} leaf switch(es) used, {q['leaves_best_empty']} at best")
    return "\n".join(lines)


def wait_text(seconds: int | None) -> str:
    return human(seconds) if seconds else "-"
