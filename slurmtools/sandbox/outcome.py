"""What a replay showed, in real (unscaled) time: per job, then per tier and per account, candidate against
baseline. Pure: the trace, the replay's bookkeeping and the sandbox's own sacct in, plain dataclasses out.

Definitions (docs/sandbox.md): wait = from the job's submission to its first start; GPU-hours lost to preemption =
a preempted job's GPUs x (the time all its runs held them - its work), which counts work redone after a lost save
and the saves themselves; utilisation = GPU time held / (the site's GPUs x the replay's span, from the first
submission to the last end); refused = sbatch said no (job_submit.lua, an association or QoS limit at submit);
never started = pending for a reason that cannot clear while nothing else ran, then cancelled; finished = the
job's program did all its work (Slurm 22.05 calls a preempted job that completes after its grace deadline TIMEOUT).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

from slurmtools.sandbox.trace import Trace


@dataclass(frozen=True)
class JobOutcome:
    key: str
    tier: str
    account: str
    gpus: int
    nodes: int
    status: str                   # finished | refused | never_started | unfinished
    why: str = ""                 # the refusal or pending reason
    wait_s: float | None = None   # real seconds
    runs: int = 0
    preemptions: int = 0
    held_s: float = 0.0           # real seconds all runs held the allocation
    work_s: float = 0.0           # real seconds of work
    start: float | None = None    # real seconds after the trace's first submission
    end: float | None = None
    leaf_switches: int | None = None   # leaf switches under the last run's hosts
    allreduce_gbs: float | None = None  # the planner's allreduce bandwidth estimate for those hosts, GB/s per GPU

    @property
    def lost_gpu_h(self) -> float:
        if not self.preemptions:
            return 0.0
        return max(0.0, self.held_s - self.work_s) * self.gpus / 3600


@dataclass(frozen=True)
class Summary:
    """One group's figures (a tier, an account, or everything). Hours are real hours."""

    group: str
    jobs: int
    finished: int
    refused: int
    never_started: int
    wait_median_h: float | None
    wait_p90_h: float | None
    wait_max_h: float | None
    preemptions: int
    gpu_hours: float
    gpu_hours_lost: float
    utilisation: float | None = None
    multinode_jobs: int = 0
    leaves_per_multinode_job: float | None = None   # mean over the multi-node jobs that ran
    allreduce_gbs: float | None = None              # mean estimated allreduce bandwidth of those jobs


@dataclass(frozen=True)
class RepeatRun:
    """A further replay of the same history through the same sandbox, the first submission `lead_in_s` after the
    lab came up (`--repeat`): its figures only. Their spread beside the first replay's is the scheduler's own
    answer to another timing of the history against slurmctld's periodic passes."""

    lead_in_s: float
    wall_s: float
    overall: Summary
    by_tier: list[Summary]
    by_account: list[Summary]


@dataclass
class ReplayResult:
    label: str
    site: str
    release: str
    speedup: float
    nodes: int
    gpus: int
    span_h: float
    wall_s: float
    jobs: list[JobOutcome]
    overall: Summary
    by_tier: list[Summary]
    by_account: list[Summary]
    notes: list[str] = field(default_factory=list)
    lead_in_s: float | None = None                           # the first replay's lead-in
    repeats: list[RepeatRun] = field(default_factory=list)   # the further replays (`--repeat`), in order

    def repeat_of(self, other: "ReplayResult", lead_in_s: float) -> None:
        """Keep `other`'s figures as a further replay of this one."""
        self.repeats.append(RepeatRun(lead_in_s, other.wall_s, other.overall, other.by_tier, other.by_account))

    def to_json(self) -> dict:
        d = asdict(self)
        d["jobs"] = [dict(asdict(j), lost_gpu_h=round(j.lost_gpu_h, 4)) for j in self.jobs]
        return d


#: seconds between the lead-ins of repeated replays: not a divisor of slurmctld's 30 s and 60 s passes (nor of their
#: scaled forms at the usual speed-ups), so each replay meets them at another phase
REPEAT_STEP_S = 7.0


def repeat_lead_ins(first: float, replays: int) -> list[float]:
    """The lead-in of each of `replays` replays of one history (`--repeat`), the first one's `first`."""
    return [first + REPEAT_STEP_S * k for k in range(replays)]


def _q(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def summarise(group: str, jobs: list[JobOutcome], capacity_gpu_s: float | None = None) -> Summary:
    waits = sorted(j.wait_s / 3600 for j in jobs if j.wait_s is not None)
    held = sum(j.held_s * j.gpus for j in jobs)
    multi = [j for j in jobs if j.nodes > 1 and j.leaf_switches is not None]
    return Summary(
        group=group, jobs=len(jobs), finished=sum(j.status == "finished" for j in jobs),
        refused=sum(j.status == "refused" for j in jobs), never_started=sum(j.status == "never_started" for j in jobs),
        wait_median_h=statistics.median(waits) if waits else None, wait_p90_h=_q(waits, 0.9),
        wait_max_h=max(waits) if waits else None, preemptions=sum(j.preemptions for j in jobs),
        gpu_hours=held / 3600, gpu_hours_lost=sum(j.lost_gpu_h for j in jobs),
        utilisation=(held / capacity_gpu_s) if capacity_gpu_s else None, multinode_jobs=len(multi),
        leaves_per_multinode_job=statistics.mean(j.leaf_switches for j in multi) if multi else None,
        allreduce_gbs=statistics.mean(j.allreduce_gbs for j in multi if j.allreduce_gbs is not None)
        if any(j.allreduce_gbs is not None for j in multi) else None)


def outcome(trace: Trace, run, records, placement=None) -> ReplayResult:
    """`records`: the sandbox's sacct allocation records (`-X -D`: one per run). `placement(hosts, gpus_per_host)`
    -> (leaf switches, estimated allreduce GB/s) describes where each job's last run was placed."""
    s = run.scale.speedup
    clock = run.scale

    def wall(ts: float) -> float:   # Slurm's recorded time on the wall clock the replay was fed by
        return clock.wall_time(ts, run.clock_origin)

    runs_of: dict[str, list] = {}
    key_of = {v: k for k, v in run.job_ids.items()}
    for r in records:
        if r.step is not None:
            continue
        k = key_of.get(r.job_id)
        if k is not None:
            runs_of.setdefault(k, []).append(r)
    out = []
    for j in trace.jobs:
        base = dict(key=j.key, tier=j.tier, account=j.account, gpus=j.gpus, nodes=j.nodes, work_s=j.run_s)
        if j.key in run.refused:
            out.append(JobOutcome(status="refused", why=run.refused[j.key], **base))
            continue
        rs = sorted(runs_of.get(j.key, []), key=lambda r: r.start.timestamp() if r.start else float("inf"))
        started = [r for r in rs if r.start is not None]
        if j.key in run.never_started and not started:
            out.append(JobOutcome(status="never_started", why=run.never_started[j.key], **base))
            continue
        if not started:
            out.append(JobOutcome(status="unfinished", why="no run in the sandbox's accounting", **base))
            continue
        if all(r.end is None for r in started):
            out.append(JobOutcome(status="unfinished", why="started, but no run has an end in the sandbox's "
                                  "accounting", runs=len(started), **base))
            continue
        sub = run.submitted[j.key]
        first = wall(started[0].start.timestamp())
        last_end = max(wall(r.end.timestamp()) for r in started if r.end is not None)
        held = sum(wall(r.end.timestamp()) - wall(r.start.timestamp()) for r in started if r.end is not None)
        # the job's own word (its program saved all its work) where the replay has it, else Slurm's state
        done = run.work_done.get(j.key, rs[-1].state == "COMPLETED")
        leaves = gbs = None
        hosts = tuple(started[-1].nodelist)
        if placement is not None and hosts:
            leaves, gbs = placement(hosts, j.gpus_per_node)
        out.append(JobOutcome(
            status="finished" if done else "unfinished", why="" if done else f"last state {rs[-1].state}" + (
                f"; cancelled by the sandbox while pending ({run.never_started[j.key]}) after {len(started)} runs"
                if j.key in run.never_started else ""),
            wait_s=max(0.0, first - sub) * s, runs=len(started),
            # every run before the last was preempted (nothing else requeues a replayed job); the last was too when
            # Slurm says so, or when it ended TIMEOUT with the work done (22.05's word for a preempted job that
            # finished after its grace deadline: a job that did its work never reaches its own limit)
            preemptions=len(started) - 1 + (rs[-1].state in ("PREEMPTED", "REQUEUED")
                                            or (rs[-1].state == "TIMEOUT" and done)),
            held_s=held * s, start=(first - run.t0) * s, end=(last_end - run.t0) * s, leaf_switches=leaves,
            allreduce_gbs=gbs, **{**base, "work_s": j.run_s}))
    ends = [j.end for j in out if j.end is not None]
    span_s = max(ends) if ends else 0.0
    cap = run.gpus * span_s if run.gpus and span_s else None
    tiers = sorted({j.tier for j in out})
    accounts = sorted({j.account for j in out})
    return ReplayResult(
        label=run.label, site=run.site_source, release=run.release, speedup=s, nodes=run.nodes, gpus=run.gpus,
        span_h=span_s / 3600, wall_s=run.wall_s, jobs=out, overall=summarise("all", out, cap),
        by_tier=[summarise(t, [j for j in out if j.tier == t], cap) for t in tiers],
        by_account=[summarise(a, [j for j in out if j.account == a], cap) for a in accounts])
