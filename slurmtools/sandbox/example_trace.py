"""A recorded-looking history for a site, as `sacct -X -D --parsable2` prints it: for trying the sandbox before
feeding it a real history, for its lab test and for its benchmark. Deterministic for a seed (stdlib random).

The mix follows GPU clusters: mostly 1-8 GPU single-node jobs and some 2-4 node jobs, log-normal run times, time
limits 1.5-4x the run (whole hours, at least `min_limit_h`), tiers production/standard/scavenger 20/50/30 %, and
arrivals spread over the span so that `load` of the site's GPU-hours is asked for (above 1 makes queues).
Start and End are what an idealised cluster would have recorded (start = submit): the sandbox replays submissions,
shapes and run times, never the recorded starts.
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timezone

HEADER = ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Eligible|Start|End|ElapsedRaw|"
          "TimelimitRaw|NodeList|AllocTRES|ReqTRES|AllocCPUS")
SHAPES = ((1, 1), (1, 1), (1, 2), (1, 4), (1, 8), (1, 8), (2, 16), (4, 32))  # (nodes, GPUs)


def generate(site, n_jobs: int, span_h: float, *, seed: int = 0, load: float = 1.2, start: datetime | None = None,
             run_median_min: float = 25.0, min_limit_h: int = 1, gpus_per_node: int = 8,
             cpus_per_gpu: int = 4) -> str:
    rng = random.Random(seed)
    t0 = int((start or datetime(2026, 11, 2, 8, tzinfo=timezone.utc)).timestamp())
    span = span_h * 3600
    tiers = [t for t in ("production", "standard", "scavenger") if t in site.tiers] or sorted(site.tiers)
    weights = {"production": 0.2, "standard": 0.5, "scavenger": 0.3}
    pairs = [(a.name, t) for a in site.accounts.values() for t in a.tiers]
    part = next((p.name for p in site.partitions.values() if p.default), next(iter(site.partitions)))
    gtype = next(iter(site.gpu_types), None)
    jobs = []
    for i in range(n_jobs):
        nodes, gpus = rng.choice(SHAPES)
        run = min(4 * run_median_min * 60, max(60.0, rng.lognormvariate(math.log(run_median_min * 60), 0.8)))
        tier = rng.choices(tiers, [weights.get(t, 0.3) for t in tiers])[0]
        account = rng.choice(sorted({a for a, t in pairs if t == tier}) or sorted(site.accounts))
        user = f"{account}-u{rng.randrange(4)}"
        jobs.append([nodes, gpus, run, tier, account, user])
    from slurmtools.sandbox.shape import capacity as site_capacity

    _, site_gpus = site_capacity(site)
    asked = sum(g * r for _, g, r, *_ in jobs)
    # arrivals: uniform over the span stretched so that asked / (GPUs x span) == load
    arrive_span = max(60.0, asked / max(1, site_gpus) / load)
    submits = sorted(rng.uniform(0, min(span, arrive_span)) for _ in jobs)
    lines = [HEADER]
    for i, ((nodes, gpus, run, tier, account, user), sub) in enumerate(zip(jobs, submits)):
        jid = 1000 + i
        limit_h = max(min_limit_h, math.ceil(run * rng.uniform(1.5, 4) / 3600))
        s = t0 + int(sub)
        e = s + int(run)
        tres = f"billing={gpus},cpu={gpus * cpus_per_gpu},gres/gpu:{gtype}={gpus},gres/gpu={gpus},node={nodes}" \
            if gtype else f"billing={gpus},cpu={gpus * cpus_per_gpu},gres/gpu={gpus},node={nodes}"
        ts = lambda x: datetime.fromtimestamp(x, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")  # noqa: E731
        lines.append("|".join(map(str, (jid, jid, f"train-{i}", user, account, part, tier, "COMPLETED", "0:0",
                                         ts(s), ts(s), ts(s), ts(e), int(run), limit_h * 60, "gpu01", tres, tres,
                                         gpus * cpus_per_gpu))))
    return "\n".join(lines) + "\n"
