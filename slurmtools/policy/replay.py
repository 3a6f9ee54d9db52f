"""Policy replay: a candidate site configuration's policies over past jobs from sacct, before rollout.

Pure: accounting records in, a report out. Each allocation record becomes a `JobRequest` from what sacct kept
(ReqTRES GPUs by type, nodes, CPUs, memory; QoS; account; partition; time limit). sacct does not keep the batch
script, so script-based rules (the checkpoint signal) cannot be replayed and are reported as skipped. Budgets
are replayed month by month: a job counts against its account once it has ended, unless the candidate
configuration would have refused it.

Times are instants (aware datetimes): the caller reads sacct's local wall-clock times in the zone they were
printed in (`slurm.sacct_times`), so jobs are taken in the order they were submitted and a job's GPU-hours count
from the instant it ended, in the autumn change's repeated hour too. Months are that zone's calendar months, as
the admission check's budgets are (`policy.engine.current_usage`: per local month).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Iterable

from slurmtools.policy.base import Decision, PolicyContext, evaluate, load_policies
from slurmtools.policy.request import JobRequest
from slurmtools.policy.usage import uncharged_tiers
from slurmtools.slurm.model import AcctRecord
from slurmtools.slurm.tres import parse_tres, record_tres

#: policies that need the batch script, which sacct does not keep
NEEDS_SCRIPT = ("checkpoint_signal",)
#: the sacct fields a request is rebuilt from (a tuple: any one of them), and its run time (the GPU-hours a refusal
#: would have kept off the cluster); a dump without one cannot be replayed
REPLAY_FIELDS = (("JobID", "JobIDRaw"), "User", "Account", "Partition", "QOS", "ReqTRES",
                 ("TimelimitRaw", "Timelimit"), ("ElapsedRaw", "Elapsed"))


def request_from_record(r: AcctRecord) -> JobRequest:
    req = parse_tres(record_tres(r) or "")   # the readers refuse a record whose request is not known
    nodes = req.nodes or max(1, len(r.nodelist))
    gres = ",".join(f"gres:gpu:{n}" if t == "untyped" else f"gres:gpu:{t}:{n}" for t, n in req.gpus_by_type.items())
    mem_per_node = -(-int(req.mem_mb) // nodes) if req.mem_mb else None
    # the nodes it ran on are known: min and max, so its CPUs (read as tasks) are not spread over more nodes
    return JobRequest(
        user_name=r.user or None, account=r.account or None, qos=r.qos or None, partition=r.partition or None,
        time_limit=(r.timelimit_s // 60) if r.timelimit_s else None, min_nodes=nodes, max_nodes=nodes,
        num_tasks=req.cpu or r.alloc_cpus or None, cpus_per_task=1, min_mem_per_node=mem_per_node,
        tres_per_job=gres or None, name=r.name or None)


@dataclass
class Bucket:
    jobs: int = 0
    refused: int = 0
    rerouted: int = 0
    gpu_hours_refused: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)


@dataclass
class ReplayReport:
    jobs: int
    skipped_policies: tuple[str, ...]
    #: (account, tier) -> bucket
    buckets: dict[tuple[str, str], Bucket]
    #: (job id, account, tier, decision) of every job that would have been treated differently
    changed: list[tuple[str, str, str, Decision]]

    def to_json(self) -> dict:
        return {
            "jobs": self.jobs, "skipped_policies": list(self.skipped_policies),
            "by_account_tier": [
                {"account": a, "tier": t, "jobs": b.jobs, "refused": b.refused, "rerouted": b.rerouted,
                 "gpu_hours_refused": round(b.gpu_hours_refused, 3), "reasons": b.reasons}
                for (a, t), b in sorted(self.buckets.items())],
            "changed": [{"job_id": j, "account": a, "tier": t, "action": d.action, "policy": d.policy,
                         "message": d.message, "changes": d.changes} for j, a, t, d in self.changed],
        }


def _months(zone, times: list) -> list[str]:
    """`YYYY-MM` of each time's month in `zone` (a `reports.zone.Zone`; None: as the datetime reads, UTC for
    sacct's records), "" where the time is None."""
    if zone is None:
        return [t.strftime("%Y-%m") if t is not None else "" for t in times]
    import numpy as np

    have = [t for t in times if t is not None]
    local = iter(zone.to_local(np.array([int(t.timestamp()) for t in have], dtype=np.int64)).tolist())
    return ["" if t is None else datetime.fromtimestamp(next(local), timezone.utc).strftime("%Y-%m") for t in times]


def replay(site, fabric, records: Iterable[AcctRecord], zone=None) -> ReplayReport:
    """`zone`: the zone whose calendar months the budgets are (a `reports.zone.Zone`); None: the records'
    datetimes' own (UTC for sacct's)."""
    def order(r: AcctRecord):
        ts = r.submit or r.start or r.end
        return (ts.timestamp() if ts else 0.0, r.job_id_raw, r.job_id)

    allocs = sorted((r for r in records if r.step is None), key=order)
    submitted = _months(zone, [r.submit or r.start for r in allocs])
    ended = _months(zone, [r.end for r in allocs])
    all_pols = load_policies(site, fabric)
    pols = [p for p in all_pols if p.name not in NEEDS_SCRIPT]
    skipped = tuple(p.name for p in all_pols if p.name in NEEDS_SCRIPT)
    free = uncharged_tiers(site)  # the budget's own definition of what is not charged
    pending: list[tuple[float, str, str, float]] = []  # heap of (end, month, account, GPU-hours) of admitted jobs
    spent: dict[tuple[str, str], float] = {}  # (month, account) -> GPU-hours of admitted jobs ended so far
    buckets: dict[tuple[str, str], Bucket] = {}
    changed = []
    for r, month, end_month in zip(allocs, submitted, ended):
        when = r.submit or r.start
        while pending and when is not None and pending[0][0] <= when.timestamp():
            _, m, acct, gh_done = heapq.heappop(pending)
            spent[(m, acct)] = spent.get((m, acct), 0.0) + gh_done
        usage = {acct: v for (m, acct), v in spent.items() if m == month}
        ctx = PolicyContext(site=site, fabric=fabric, usage=usage, month=month)
        req = request_from_record(r)
        d = evaluate(req, pols, ctx)
        tier = r.qos or site.default_tier
        b = buckets.setdefault((r.account, tier), Bucket())
        b.jobs += 1
        gh = r.alloc_gpus * r.elapsed_s / 3600.0
        if d.action == "deny":
            b.refused += 1
            b.gpu_hours_refused += gh
            b.reasons[d.policy] = b.reasons.get(d.policy, 0) + 1
            changed.append((r.job_id, r.account, tier, d))
            continue
        new_qos = d.changes.get("qos")
        if new_qos and r.qos and new_qos != r.qos:
            b.rerouted += 1
            b.reasons[d.policy] = b.reasons.get(d.policy, 0) + 1
            changed.append((r.job_id, r.account, tier, d))
        final_qos = new_qos or r.qos
        if final_qos not in free and r.end is not None:
            heapq.heappush(pending, (r.end.timestamp(), end_month, r.account, gh))
    return ReplayReport(jobs=len(allocs), skipped_policies=skipped, buckets=buckets, changed=changed)
