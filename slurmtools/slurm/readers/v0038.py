"""Slurm 22.05's `--json` (openapi/v0.0.38): job states are strings, numbers are plain, node flags are a separate
`state_flags` list, and `sinfo --json` lists one record per node. Captures: tests/data/slurm/*-22.05.8-*.json."""

from __future__ import annotations

from slurmtools.hostlist import expand
from slurmtools.slurm.model import JobInfo, NodeInfo
from slurmtools.slurm.readers.common import count, job_gpus, num, text, ts
from slurmtools.slurm.tres import gpus_in, gpus_used_of, parse_gres, parse_tres


def jobs_argv(flag: str) -> list[str]:
    return ["squeue", flag]


def nodes_argv(flag: str) -> list[str]:
    return ["sinfo", flag]


#: Slurm's NO_VAL: v0.0.38 prints an unlimited `time_limit` as null but a job's unset one (Partition_Limit: it runs
#: under its partition's, which slurmctld packs in its stead where the job has a partition) as this plain number
NO_VAL = 0xFFFFFFFE


def _one_word(record: dict, key: str) -> None:
    """22.05 writes `key` as one word; data_parser's list (23.02 and later) would read as its Python text."""
    if isinstance(record.get(key), list):
        raise ValueError(f"{key} is a list, as data_parser writes it (Slurm 23.02 or later), not 22.05's word")


def job(j: dict) -> JobInfo:
    _one_word(j, "job_state")
    tres = parse_tres(j.get("tres_alloc_str") or j.get("tres_req_str") or "")
    gpus, by_type = job_gpus(j, tres)
    limit = num(j.get("time_limit"))
    if limit == NO_VAL:   # no limit of its own, as data_parser's {"set": false} reads (not 8,171 years)
        limit = None
    arr = num(j.get("array_job_id"))
    return JobInfo(
        job_id=int(j["job_id"]), name=j.get("name") or "", user=j.get("user_name") or "",
        account=j.get("account") or "", partition=j.get("partition") or "", qos=j.get("qos") or "",
        state=j.get("job_state") or "UNKNOWN",
        reason=j.get("state_reason", "") or "", nodes=tuple(expand(j.get("nodes") or "")),
        num_nodes=num(j.get("node_count")) or 0, gpus=gpus, gpus_by_type=by_type,
        time_limit_s=limit * 60 if limit is not None else None, restarts=num(j.get("restart_cnt")) or 0,
        submit_time=ts(j.get("submit_time")), start_time=ts(j.get("start_time")), end_time=ts(j.get("end_time")),
        array_job_id=arr or None, array_task_id=num(j.get("array_task_id")),
        comment=j.get("comment", "") or "", std_out=j.get("standard_output", "") or "", raw=j)


def nodes(data: dict) -> list[dict]:
    return data.get("nodes", [])


def node(n: dict) -> NodeInfo:
    for key in ("state", "features", "active_features"):
        _one_word(n, key)
    used = parse_gres(n.get("gres_used") or "")
    idx: list[int] = []
    for g in used:
        idx.extend(g.indexes)
    feats = n.get("active_features") or n.get("features") or ""
    return NodeInfo(
        name=text(n, "name"), state=str(n.get("state", "unknown")).lower(),
        flags=tuple(str(f).upper() for f in n.get("state_flags", [])),
        cpus=count(n, "cpus"), cpus_alloc=count(n, "alloc_cpus"), memory_mb=count(n, "real_memory"),
        memory_alloc_mb=count(n, "alloc_memory"), gpus_by_type=(gpus := gpus_in(n.get("gres") or "")),
        gpus_used_by_type=gpus_used_of(gpus, gpus_in(n.get("gres_used") or "")), gpus_used_idx=tuple(idx),
        features=tuple(f for f in feats.split(",") if f), partitions=tuple(n.get("partitions", [])),
        reason=n.get("reason", "") or "")
