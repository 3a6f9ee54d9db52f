"""What `scontrol update job` changes, and the job it leaves, as admission control sees both.

slurm_job_modify in job_submit.lua gets the change in `job_desc` (only the fields the update names) and the job
as it stands in `job_rec`. job_rec lacks some of job_desc's fields (measured on 22.05 and 25.11: no num_tasks,
ntasks_per_node, cpus_per_task, sockets_per_node), so the job after the change is the record's fields, then the
change's, plus two things slurmctld already counted for the job (its request TRES string): its GPUs, from which a
per-task job's task count follows, and its CPUs, which stay a floor unless the change names a new task shape.
The Lua's `modified_request` mirrors `modified_request` here line by line. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from slurmtools.policy.request import (INFINITE, JobRequest, RequestError, gpu_counts, node_range,
                                       parse_time_minutes)

#: job_desc fields a modification can carry that admission reads, in the Lua's order
MODIFY_FIELDS = ("account", "qos", "partition", "time_limit", "min_nodes", "max_nodes", "num_tasks",
                 "ntasks_per_node",
                 "cpus_per_task", "sockets_per_node", "min_mem_per_node", "min_mem_per_cpu", "tres_per_job",
                 "tres_per_node", "tres_per_task", "tres_per_socket", "cpus_per_tres", "mem_per_tres")
#: a change naming one of these gives the job a new task shape: the CPUs counted so far are no floor
_SHAPE = ("num_tasks", "ntasks_per_node", "cpus_per_task", "cpus_per_tres")

#: `scontrol update` keys (case-insensitive) -> the job_desc field they set (22.05 and 25.11 scontrol)
UPDATE_KEYS = {
    "account": "account", "partition": "partition", "qos": "qos", "timelimit": "time_limit",
    "numnodes": "min_nodes", "reqnodes": "min_nodes", "numtasks": "num_tasks", "reqprocs": "num_tasks",
    "minmemorynode": "min_mem_per_node", "minmemorycpu": "min_mem_per_cpu", "minmemcpu": "min_mem_per_cpu",
    "minmemnode": "min_mem_per_node", "gres": "tres_per_node", "tresperjob": "tres_per_job",
    "trespernode": "tres_per_node", "trespertask": "tres_per_task", "trespersocket": "tres_per_socket",
    "name": "name", "jobname": "name", "comment": "comment",
}
_MEM = re.compile(r"^([0-9]+)([KMGT]?)$", re.IGNORECASE)


@dataclass(frozen=True)
class UpdateRequest:
    """One `scontrol update job` command as admission control reads it."""

    job_id: str
    #: the fields it changes (None: not changed), in job_desc's form
    change: JobRequest
    #: keys admission does not read (Priority=, Comment=, ...): they pass unchecked
    ignored: tuple[str, ...] = ()
    #: `TimeLimit=+N` / `TimeLimit=-N`: the change in minutes (scontrol itself turns it into the new limit from the
    #: job's current one before it sends the update, so job_submit.lua sees the sum): see `with_time_change`
    time_change: int | None = None
    #: `NumNodes=N` (one count, no range): 25.11's scontrol also sends max_nodes N, 22.05's only min_nodes (the job
    #: keeps its max); `for_release` says which
    one_node_count: bool = False

    def for_release(self, release) -> "UpdateRequest":
        """The change as this release's scontrol sends it (`SlurmRelease.numnodes_update_sets_max`; unknown: as
        22.05, the job keeping its max, the larger count)."""
        if self.one_node_count and release is not None and release.numnodes_update_sets_max:
            return replace(self, change=replace(self.change, max_nodes=self.change.min_nodes), one_node_count=False)
        return self


def parse_update(args: list[str] | tuple[str, ...]) -> UpdateRequest:
    """`JobId=12 NumNodes=4 QOS=production` -> UpdateRequest; a value admission cannot read is one RequestError
    naming the key."""
    job_id = ""
    values: dict = {}
    ignored = []
    time_change = None
    one_count = False
    for a in args:
        key, eq, val = a.partition("=")
        if not eq:
            raise RequestError(f"scontrol update argument {a!r}: expected KEY=VALUE")
        k = key.lower()
        if k in ("jobid", "job_id"):
            job_id = val
            continue
        field = UPDATE_KEYS.get(k)
        if field is None:
            ignored.append(key)
            continue
        if field == "time_limit" and val[:1] in "+-" and val[1:]:
            values.pop(field, None)
            minutes = parse_time_minutes(key, val[1:], "scontrol update")
            time_change = minutes if val[0] == "+" else -minutes
            continue
        if field == "time_limit":
            time_change = None
        if field == "min_nodes":
            # scontrol sends NumNodes=2-8 as min_nodes 2 and max_nodes 8; NumNodes=4 as min_nodes 4, and max_nodes 4
            # only on some releases (`UpdateRequest.for_release`)
            lo, hi = node_range(key, val, "scontrol update")
            values["min_nodes"] = lo
            one_count = val.strip().isdigit()
            if one_count:
                values.pop("max_nodes", None)
            else:
                values["max_nodes"] = hi
            continue
        values[field] = _value(key, field, val)
    if not re.match(r"^[0-9]+(_[0-9]+)?$", job_id):
        raise RequestError("scontrol update: needs JobId=<number> (one job)")
    if "min_mem_per_node" in values and "min_mem_per_cpu" in values:
        raise RequestError("scontrol update: MinMemoryNode and MinMemoryCPU both given; give one")
    return UpdateRequest(job_id, JobRequest(**values), tuple(ignored), time_change, one_count)


def with_time_change(upd: UpdateRequest, current_limit: int | None) -> JobRequest:
    """The change with `TimeLimit=+N/-N` made absolute from the job's current limit, as scontrol does before it
    sends the update (src/scontrol/update_job.c): no change to an UNLIMITED job, no decrement below zero."""
    if upd.time_change is None:
        return upd.change
    if abs(upd.time_change) == INFINITE:
        raise RequestError("scontrol update TimeLimit: UNLIMITED is not an increment or decrement")
    if current_limit is None or current_limit == INFINITE:
        raise RequestError("scontrol update TimeLimit: cannot increment/decrement the limit of a job whose "
                           "TimeLimit is UNLIMITED or unknown (scontrol refuses it too)")
    if current_limit + upd.time_change < 0:
        raise RequestError(f"scontrol update TimeLimit: decrement of {-upd.time_change} min is larger than the "
                           f"job's limit of {current_limit} min (scontrol refuses it too)")
    return replace(upd.change, time_limit=current_limit + upd.time_change)


def _value(key: str, field: str, val: str):
    if field in ("account", "partition", "qos", "name", "comment"):
        return val
    if field == "time_limit":
        return parse_time_minutes(key, val, "scontrol update")
    if field == "num_tasks":
        first = val.split("-", 1)[0]
        if not first.isdigit() or not first.isascii():
            raise RequestError(f"scontrol update {key}: expected a whole number, got {val!r}")
        return int(first)
    if field.startswith("min_mem"):
        m = _MEM.match(val)
        if not m:
            raise RequestError(f"scontrol update {key}: expected memory like 4000, 250G or 2T, got {val!r}")
        n, unit = int(m.group(1)), m.group(2).upper()
        return n * {"": 1, "M": 1, "G": 1024, "T": 1024 * 1024}[unit] if unit != "K" else -(-n // 1024)
    # GRES: scontrol hands `Gres=gpu:h100:3` over as `gres:gpu:h100:3` (measured, 22.05)
    items = [i if i.startswith(("gres:", "gres/")) else "gres:" + i for i in val.split(",") if i]
    return ",".join(items)


def tres_count(text: str | None, name: str) -> int | None:
    """The count of one item (`cpu`, `gres/gpu`) in slurmctld's request TRES string (`cpu=8,...,gres/gpu=4`)."""
    for item in (text or "").split(","):
        k, eq, v = item.partition("=")
        if eq and k == name and v.isdigit() and v.isascii():
            return int(v)
    return None


def text_refusal(change: JobRequest):
    """The refusal of an update whose new name or comment holds a control character (policy "request"), else
    None; checked before anything else, on the change alone (a name the job got before the rule blocks nothing).
    Mirrors slurm_job_modify's control_refusal."""
    from slurmtools.policy.base import Decision
    from slurmtools.policy.builtin import control

    bad = JobRequest(name=change.name, comment=change.comment).control_field()
    return None if bad is None else Decision.deny(control(*bad), "request")


def modified_request(current: JobRequest, change: JobRequest, tres_req: str | None) -> tuple[JobRequest, bool]:
    """(the job after the change, whether the change touches anything admission reads)."""
    new = {f: getattr(change, f) for f in MODIFY_FIELDS if getattr(change, f) is not None}
    if not new:
        return current, False
    merged = replace(current, **new)
    if "min_mem_per_node" in new and "min_mem_per_cpu" not in new:
        merged = replace(merged, min_mem_per_cpu=None)
    if "min_mem_per_cpu" in new and "min_mem_per_node" not in new:
        merged = replace(merged, min_mem_per_node=None)
    gpus_now = tres_count(tres_req, "gres/gpu")
    per_task = sum(gpu_counts(current.tres_per_task).values())
    if merged.num_tasks is None and merged.ntasks_per_node is None and per_task and gpus_now:
        # job_rec has no task count: a per-task GPU job's follows from the GPUs slurmctld counts for it
        merged = replace(merged, num_tasks=max(1, gpus_now // per_task))
    if not any(f in new for f in _SHAPE):
        merged = replace(merged, min_cpus=tres_count(tres_req, "cpu"))
    if change.user_name:
        merged = replace(merged, user_name=change.user_name)
    return merged, True


def record_request(show: dict[str, str], script: str = "") -> tuple[JobRequest, str]:
    """The fields of `scontrol show job -o` that job_rec exposes to job_submit.lua, as a JobRequest, and the
    request TRES string (22.05's `TRES=` of a pending job, 25.11's `ReqTRES=`: `show_job.request_tres`)."""

    def text(k):
        v = show.get(k, "")
        return None if v in ("", "(null)", "N/A") else v

    def mem(k):
        v = text(k)
        if v is None:
            return None
        m = _MEM.match(v)
        return _value(k, "min_mem_per_node", v) if m else None

    limit = text("TimeLimit")
    if limit == "Partition_Limit":   # no limit of its own (NO_VAL), as job_rec.time_limit holds it: unset
        limit = None
    nodes = text("NumNodes")  # `1` (22.05), `1-1` (25.11), `2-8` for a range
    lo, _, hi = (nodes or "").partition("-")
    req = JobRequest(
        user_name=(text("UserId") or "").split("(", 1)[0] or None, account=text("Account"), qos=text("QOS"),
        partition=text("Partition"),
        time_limit=parse_time_minutes("TimeLimit", limit, "scontrol show job") if limit else None,
        min_nodes=int(lo) if lo.isdigit() and lo.isascii() else None,
        max_nodes=int(hi) if hi.isdigit() and hi.isascii() else None,
        min_mem_per_node=mem("MinMemoryNode"), min_mem_per_cpu=mem("MinMemoryCPU"),
        tres_per_job=text("TresPerJob"), tres_per_node=text("TresPerNode"), tres_per_task=text("TresPerTask"),
        tres_per_socket=text("TresPerSocket"), cpus_per_tres=text("CpusPerTres"), mem_per_tres=text("MemPerTres"),
        script=script)
    from slurmtools.slurm.show_job import request_tres

    return req, request_tres(show)


def parse_show_job(text: str, job_id: str | None = None) -> dict[str, str]:
    """`scontrol show job -o` of one job -> its fields (`slurm.show_job`; `job_id` picks its record where scontrol
    printed an array's tasks or a heterogeneous job's components); RequestError in one line when text the job's
    owner chose holds one of its field names, so the check never judges another job than the real one."""
    from slurmtools.slurm.show_job import AmbiguousRecord, parse_show_job as fields

    try:
        return fields(text, job_id)
    except AmbiguousRecord as exc:
        raise RequestError(f"scontrol show job: {exc}; check this update by hand") from None

