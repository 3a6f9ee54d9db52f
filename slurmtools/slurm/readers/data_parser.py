"""The data_parser `--json` shapes of Slurm 23.02 and later (v0.0.39 ...): numbers wrapped as
{set, infinite, number}, states as lists (base state first, then flags), per-node records from
`scontrol show nodes --json` (`sinfo --json` groups nodes by partition and state instead), and from v0.0.43 on
`squeue --json` filtered to pending and running jobs unless `--states=all` is given,
`standard_output` left as the pattern (`slurm-%j.out`) with the path in `stdout_expanded`.

Captured from Slurm 25.11.7 with v0.0.41 to v0.0.44: tests/data/slurm/*-25.11.7-*.json.
"""

from __future__ import annotations

from slurmtools.hostlist import expand
from slurmtools.slurm.model import JobInfo, NodeInfo
from slurmtools.slurm.readers.common import num, ts
from slurmtools.slurm.tres import gpus_in, parse_gres, parse_tres

_BASE_STATES = {"IDLE", "MIXED", "ALLOCATED", "DOWN", "ERROR", "FUTURE", "UNKNOWN", "COMPLETING"}


def jobs_argv(flag: str) -> list[str]:
    # unlike 22.05, these squeue versions apply their default state filter to --json too: ask for every job the
    # controller still holds (recently ended ones included), as 22.05 gives
    return ["squeue", flag, "--states=all"]


def nodes_argv(flag: str) -> list[str]:
    return ["scontrol", "show", "nodes", flag]


def job(j: dict) -> JobInfo:
    tres = parse_tres(j.get("tres_alloc_str") or j.get("tres_req_str") or "")
    limit = num(j.get("time_limit"))
    arr = num(j.get("array_job_id"))
    states = j.get("job_state") or ["UNKNOWN"]
    # 25.11 lists the base state and its flags (["PENDING", "COMPLETING"] while a requeued run ends); Slurm's
    # own text (scontrol, squeue, 22.05's JSON) says COMPLETING then, and so does this
    state = ("COMPLETING" if "COMPLETING" in states else states[0]) if isinstance(states, list) else str(states)
    task = num(j.get("array_task_id"))
    return JobInfo(
        job_id=int(j["job_id"]), name=j.get("name", ""), user=j.get("user_name", ""), account=j.get("account", ""),
        partition=j.get("partition", ""), qos=j.get("qos", ""), state=state,
        reason=j.get("state_reason", "") or "", nodes=tuple(expand(j.get("nodes") or "")),
        num_nodes=num(j.get("node_count")) or 0, gpus=tres.gpus, gpus_by_type=tres.gpus_by_type,
        time_limit_s=limit * 60 if limit is not None else None, restarts=num(j.get("restart_cnt")) or 0,
        submit_time=ts(j.get("submit_time")), start_time=ts(j.get("start_time")), end_time=ts(j.get("end_time")),
        array_job_id=arr or None, array_task_id=task if arr else None,
        req_switch=num(j.get("required_switches")) or None,
        comment=j.get("comment", "") or "",
        std_out=j.get("stdout_expanded") or j.get("standard_output", "") or "", raw=j)


def nodes(data: dict) -> list[dict]:
    return data.get("nodes", [])


def node(n: dict) -> NodeInfo:
    used = parse_gres(n.get("gres_used") or "")
    idx: list[int] = []
    for g in used:
        idx.extend(g.indexes)
    states = [str(s).upper() for s in (n.get("state") or ["UNKNOWN"])]
    base = next((s for s in states if s in _BASE_STATES), states[0])
    flags = tuple(s for s in states if s != base)
    feats = n.get("active_features") or n.get("features") or []
    if isinstance(feats, str):
        feats = [f for f in feats.split(",") if f]
    return NodeInfo(
        name=n["name"], state=base.lower(), flags=flags,
        cpus=int(n.get("cpus", 0)), cpus_alloc=int(n.get("alloc_cpus", 0)), memory_mb=int(n.get("real_memory", 0)),
        memory_alloc_mb=int(n.get("alloc_memory", 0)), gpus_by_type=gpus_in(n.get("gres") or ""),
        gpus_used_by_type=gpus_in(n.get("gres_used") or ""), gpus_used_idx=tuple(idx),
        features=tuple(feats), partitions=tuple(n.get("partitions", [])),
        reason=n.get("reason", "") or "")
