"""Slurm 22.05's `--json` (openapi/v0.0.38): job states are strings, numbers are plain, node flags are a separate
`state_flags` list, and `sinfo --json` lists one record per node. Captures: tests/data/slurm/*-22.05.8-*.json."""

from __future__ import annotations

from slurmtools.hostlist import expand
from slurmtools.slurm.model import JobInfo, NodeInfo
from slurmtools.slurm.readers.common import num, ts
from slurmtools.slurm.tres import gpus_in, parse_gres, parse_tres


def jobs_argv(flag: str) -> list[str]:
    return ["squeue", flag]


def nodes_argv(flag: str) -> list[str]:
    return ["sinfo", flag]


def job(j: dict) -> JobInfo:
    tres = parse_tres(j.get("tres_alloc_str") or j.get("tres_req_str") or "")
    limit = num(j.get("time_limit"))
    arr = num(j.get("array_job_id"))
    return JobInfo(
        job_id=int(j["job_id"]), name=j.get("name", ""), user=j.get("user_name", ""), account=j.get("account", ""),
        partition=j.get("partition", ""), qos=j.get("qos", ""), state=j.get("job_state") or "UNKNOWN",
        reason=j.get("state_reason", "") or "", nodes=tuple(expand(j.get("nodes") or "")),
        num_nodes=num(j.get("node_count")) or 0, gpus=tres.gpus, gpus_by_type=tres.gpus_by_type,
        time_limit_s=limit * 60 if limit is not None else None, restarts=num(j.get("restart_cnt")) or 0,
        submit_time=ts(j.get("submit_time")), start_time=ts(j.get("start_time")), end_time=ts(j.get("end_time")),
        array_job_id=arr or None, array_task_id=num(j.get("array_task_id")),
        comment=j.get("comment", "") or "", std_out=j.get("standard_output", "") or "", raw=j)


def nodes(data: dict) -> list[dict]:
    return data.get("nodes", [])


def node(n: dict) -> NodeInfo:
    used = parse_gres(n.get("gres_used") or "")
    idx: list[int] = []
    for g in used:
        idx.extend(g.indexes)
    feats = n.get("active_features") or n.get("features") or ""
    return NodeInfo(
        name=n["name"], state=str(n.get("state", "unknown")).lower(),
        flags=tuple(str(f).upper() for f in n.get("state_flags", [])),
        cpus=int(n.get("cpus", 0)), cpus_alloc=int(n.get("alloc_cpus", 0)), memory_mb=int(n.get("real_memory", 0)),
        memory_alloc_mb=int(n.get("alloc_memory", 0)), gpus_by_type=gpus_in(n.get("gres") or ""),
        gpus_used_by_type=gpus_in(n.get("gres_used") or ""), gpus_used_idx=tuple(idx),
        features=tuple(f for f in feats.split(",") if f), partitions=tuple(n.get("partitions", [])),
        reason=n.get("reason", "") or "")
