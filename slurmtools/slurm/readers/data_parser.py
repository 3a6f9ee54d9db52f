"""The data_parser `--json` shapes of Slurm 23.02 and later (v0.0.39 ...): numbers wrapped as
{set, infinite, number}, node states as lists (base state first, then flags), per-node records from
`scontrol show nodes --json` (`sinfo --json` groups nodes by partition and state instead), and from v0.0.43 on
`squeue --json` filtered to pending and running jobs unless `--states=all` is given,
`standard_output` left as the pattern (`slurm-%j.out`) with the path in `stdout_expanded`.

What differs inside the family, read here without asking which parser wrote it (from each parser's source,
src/plugins/data_parser/v0.0.NN/parsers.c):
- `job_state`: v0.0.39 (23.02) prints Slurm's one word for the job (`job_state_string()`: "CONFIGURING" for a
  running job whose nodes boot); v0.0.40 and later list the base state and its flags (["RUNNING", "CONFIGURING"]).
  Both read as that one word, as scontrol, squeue and 22.05's JSON print it.
- job times: plain epoch seconds in v0.0.39, {set, infinite, number} from v0.0.40 on (`common.ts` reads both).
- the switch count of `--switches`: `minimum_switches` up to v0.0.41 (24.05), `required_switches` from v0.0.42.

Captured from Slurm 25.11.7 with v0.0.41 to v0.0.44: tests/data/slurm/*-25.11.7-*.json; v0.0.39 and v0.0.40 are
hand-written from those parsers' sources: tests/data/slurm/*-handwritten-23.*.json.
"""

from __future__ import annotations

from slurmtools.hostlist import expand
from slurmtools.slurm.model import JobInfo, NodeInfo
from slurmtools.slurm.readers.common import count, job_gpus, num, text, ts
from slurmtools.slurm.tres import gpus_in, gpus_used_of, parse_gres, parse_tres

_BASE_STATES = {"IDLE", "MIXED", "ALLOCATED", "DOWN", "ERROR", "FUTURE", "UNKNOWN", "COMPLETING"}

#: the job state flags that have a word of their own, in the order `job_state_string()` (src/common/
#: slurm_protocol_defs.c) tests them: the first one set is the job's state, else its base state (EXPEDITING: 25.11)
_JOB_FLAG_WORDS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "EXPEDITING", "RESIZING", "REQUEUED", "REQUEUE_FED",
                   "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING")


def jobs_argv(flag: str) -> list[str]:
    # unlike 22.05, these squeue versions apply their default state filter to --json too: ask for every job the
    # controller still holds (recently ended ones included), as 22.05 gives
    return ["squeue", flag, "--states=all"]


def nodes_argv(flag: str) -> list[str]:
    return ["scontrol", "show", "nodes", flag]


def job(j: dict) -> JobInfo:
    tres = parse_tres(j.get("tres_alloc_str") or j.get("tres_req_str") or "")
    gpus, by_type = job_gpus(j, tres)
    limit = num(j.get("time_limit"))
    arr = num(j.get("array_job_id"))
    task = num(j.get("array_task_id"))
    # the `--switches` count: v0.0.39 to v0.0.41 call it minimum_switches ("the 'minimum' in the key is incorrect",
    # v0.0.41's own description), v0.0.42 and later required_switches
    switches = j["required_switches"] if "required_switches" in j else j.get("minimum_switches")
    return JobInfo(
        job_id=int(j["job_id"]), name=j.get("name") or "", user=j.get("user_name") or "",
        account=j.get("account") or "", partition=j.get("partition") or "", qos=j.get("qos") or "",
        state=job_state(j.get("job_state")),
        reason=j.get("state_reason", "") or "", nodes=tuple(expand(j.get("nodes") or "")),
        num_nodes=num(j.get("node_count")) or 0, gpus=gpus, gpus_by_type=by_type,
        time_limit_s=limit * 60 if limit is not None else None, restarts=num(j.get("restart_cnt")) or 0,
        submit_time=ts(j.get("submit_time")), start_time=ts(j.get("start_time")), end_time=ts(j.get("end_time")),
        array_job_id=arr or None, array_task_id=task if arr else None,
        req_switch=num(switches) or None,
        comment=j.get("comment", "") or "",
        std_out=j.get("stdout_expanded") or j.get("standard_output", "") or "", raw=j)


def job_state(value) -> str:
    """Slurm's one word for a job's state, as scontrol and squeue print it: v0.0.39's `job_state` is that word;
    v0.0.40 and later list the base state and its flags (["PENDING", "REQUEUED"] while a requeue is under way,
    ["RUNNING", "CONFIGURING"] while the job's nodes boot), which read as `job_state_string()` reads the bits."""
    if not isinstance(value, list):
        return str(value) if value else "UNKNOWN"
    states = [str(s).upper() for s in value]
    flag = next((f for f in _JOB_FLAG_WORDS if f in states), None)
    return flag or (states[0] if states else "UNKNOWN")


def nodes(data: dict) -> list[dict]:
    return data.get("nodes", [])


def node(n: dict) -> NodeInfo:
    used = parse_gres(n.get("gres_used") or "")
    idx: list[int] = []
    for g in used:
        idx.extend(g.indexes)
    if isinstance(n.get("state"), str):   # 22.05's one word ("allocated") would read letter by letter
        raise ValueError(f"state {n['state'][:20]!r} is one word, not data_parser's list (JSON of Slurm 22.05?)")
    states = [str(s).upper() for s in (n.get("state") or ["UNKNOWN"])]
    base = next((s for s in states if s in _BASE_STATES), states[0])
    flags = tuple(s for s in states if s != base)
    feats = n.get("active_features") or n.get("features") or []
    if isinstance(feats, str):
        feats = [f for f in feats.split(",") if f]
    return NodeInfo(
        name=text(n, "name"), state=base.lower(), flags=flags,
        cpus=count(n, "cpus"), cpus_alloc=count(n, "alloc_cpus"), memory_mb=count(n, "real_memory"),
        memory_alloc_mb=count(n, "alloc_memory"), gpus_by_type=(gpus := gpus_in(n.get("gres") or "")),
        gpus_used_by_type=gpus_used_of(gpus, gpus_in(n.get("gres_used") or "")), gpus_used_idx=tuple(idx),
        features=tuple(feats), partitions=tuple(n.get("partitions", [])),
        reason=n.get("reason", "") or "")
