"""Each trace job's sbatch arguments in the sandbox: its recorded shape, user, account, tier and partition, its
time limit and run time scaled, and the checkpointing program (`job_program`) as its batch script.

Pure. Jobs of one recorded array are submitted as one array job (`--array=` with the recorded task ids), at the
first task's submission time, as Slurm saw them. The request shape is what users submit without slurmtools: a
node count and GPUs per node (or GPUs per job when they do not divide evenly), CPUs per node when sacct kept them.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from slurmtools.sandbox.clocks import Clock
from slurmtools.sandbox.trace import TraceJob


@dataclass(frozen=True)
class Checkpointing:
    """The replayed jobs' checkpoint model, in real seconds (docs/sandbox.md)."""

    every_s: float = 1800.0
    save_s: float = 30.0


@dataclass(frozen=True)
class Submission:
    """One sbatch call: `keys` are the trace jobs it submits (several for an array), `at` its real submit time."""

    keys: tuple[str, ...]
    at: float
    user: str
    argv: tuple[str, ...]          # sbatch options, without the script and its arguments
    work_s: tuple[float, ...]      # sandbox seconds of work, per key
    tasks: tuple[int, ...] = ()    # array task ids, per key (empty for a plain job)
    #: `#SBATCH --signal=B:URG@LEAD` in the batch script (sandbox seconds), for tiers that can be preempted: in the
    #: script, where the site's checkpoint_signal policy looks for it, as slurmtools' own templates put it
    signal_lead: int | None = None


def job_name(key: str) -> str:
    return f"sbx-{key}"


def build(jobs: tuple[TraceJob, ...], scale: Clock, site, shapes: dict[str, tuple[str, ...]] | None = None
          ) -> list[Submission]:
    """Submissions in submit order. Tiers that can be preempted get the warning signal with the site's signal lead
    scaled (the checkpoint-on-signal wiring slurmtools gives such jobs). `shapes`: each job's shape options from
    elsewhere (the planner's, `sandbox.planned`) instead of the plain shape the history recorded."""
    shapes = shapes or {}
    arrays: dict[str, list[TraceJob]] = {}
    plain: list[TraceJob] = []
    for j in jobs:
        (arrays.setdefault(j.array_job, []) if j.array_job is not None else plain).append(j)
    out = [Submission((j.key,), j.submit, j.user, tuple(_options(j, scale, site, shape=shapes.get(j.key))),
                      (scale.sandbox_s(j.run_s),),
                      signal_lead=_lead(j, scale, site)) for j in plain]
    for aid, tasks in arrays.items():
        tasks.sort(key=lambda t: t.array_task)
        first = min(tasks, key=lambda t: t.submit)
        opts = _options(first, scale, site, name=f"sbx-{aid}", shape=shapes.get(first.key))
        opts.append("--array=" + ",".join(str(t.array_task) for t in tasks))
        out.append(Submission(tuple(t.key for t in tasks), first.submit, first.user, tuple(opts),
                              tuple(scale.sandbox_s(t.run_s) for t in tasks), tuple(t.array_task for t in tasks),
                              _lead(first, scale, site)))
    out.sort(key=lambda s: (s.at, s.keys[0]))
    return out


def within_second(subs: list[Submission], seed: int) -> list[Submission]:
    """`subs` each moved later by a random fraction of a second (seeded), in submit order again. sacct keeps submit
    times in whole seconds, so where in its second each job arrived is not in the history: replays that differ
    only there show how much of the scheduler's answer the history leaves open (`benchmarks/bench_sandbox.py`)."""
    rng = random.Random(seed)
    moved = [replace(s, at=s.at + rng.random()) for s in subs]
    moved.sort(key=lambda s: (s.at, s.keys[0]))
    return moved


def _options(j: TraceJob, scale: Clock, site, name: str | None = None, shape: tuple[str, ...] | None = None
             ) -> list[str]:
    limit = j.limit_s if j.limit_s is not None else 0
    o = [f"--job-name={name or job_name(j.key)}", f"--account={j.account}", f"--qos={j.tier}",
         f"--time={scale.limit_minutes(limit)}", "--requeue", "--output=/dev/null", "--chdir=/tmp"]
    if j.partition:
        o.append(f"--partition={j.partition}")
    # it held whole nodes in history: last, so that a planner shape's own --exclusive=topo does not take it back
    # (sbatch keeps the last)
    whole = ["--exclusive"] if j.exclusive else []
    if shape is not None:
        return o + list(shape) + whole
    o += whole
    o.append(f"--nodes={j.nodes}")
    if j.gpus:
        typed = f"{j.gpu_type}:" if j.gpu_type else ""
        if j.gpus % j.nodes == 0:
            o.append(f"--gres=gpu:{typed}{j.gpus // j.nodes}")
        else:
            o.append(f"--gpus={typed}{j.gpus}")
    if j.cpus:
        o += ["--ntasks-per-node=1", f"--cpus-per-task={math.ceil(j.cpus / j.nodes)}"]
    return o


def _lead(j: TraceJob, scale: Clock, site) -> int | None:
    tier = site.tiers.get(j.tier)
    if tier is None or not tier.preempted_by:
        return None
    return scale.site_seconds(tier.signal_lead)
