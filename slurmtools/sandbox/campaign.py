"""Synthetic load on top of a recorded history: a campaign from a file (`sandbox replay --add`), or the demand
forecast with its error band (`--forecast`). The what-if an admin asks before a campaign or a purchase: "and if
vision runs its 512-GPU sweep next month?", "and if demand grows as forecast?".

Both give `TraceJob`s with `synthetic` set (the campaign's name, or "forecast-<band>") and `start=None` (they have
no recorded start), which `Trace.with_jobs` merges into the trace; `add_to` does that with one note per line.
Reading the campaign file (and the site's fabric, for node shapes) is this module's only I/O.

A campaign file holds one or more `[[campaign]]` tables (site_configs/example/campaign-vision.toml):

    name = "vision-512"          # required; its jobs are keyed "c-vision-512-0", "c-vision-512-1", ...
    account = "vision"           # required; must be an account of the candidate site (add it there for a new one)
    user = "vision-campaign"     # optional; default "campaign-<name>": one synthetic user (per-user limits apply)
    tier = "standard"            # optional; default the site's default_tier; the account must be allowed it
    partition, gpu_type          # optional; default the tier's default partition and that partition's first type
    job_gpus = 64                # required: GPUs per job
    nodes_per_job = 8            # optional; default job_gpus / GPUs per node (whole nodes), 1 below one node
    gpus = 512  OR  jobs = 40    # gpus: the GPUs the campaign keeps busy throughout `duration` if the cluster lets
                                 #   it, i.e. gpus / job_gpus jobs per wave, ceil(duration / run_time) waves
    start = 2026-12-01T00:00:00  # optional; a date-time (UTC when it names no zone) or "+2h" after the history's
                                 #   first submission; default that first submission
    duration = "3d"              # optional; default run_time (one wave)
    run_time = "6h"              # required: each job's run
    time_limit = "8h"            # optional; default run_time x 1.5 in whole minutes, within the tier and partition
    arrival = "burst"            # burst: every job at start; uniform: evenly spaced over duration; poisson: a
    seed = 0                     #   Poisson process over duration conditioned on its count (sorted uniform times,
                                 #   seeded: `seed`, poisson only)

With `arrival = "burst"` and `gpus`, the whole backlog (every wave) is queued at once; with uniform or poisson
arrivals and a duration that is a whole number of runs, `gpus` is what is asked for at the steady state.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from datetime import datetime, timezone
from pathlib import Path

from slurmtools.errors import SlurmtoolsError
from slurmtools.sandbox.trace import FIRST_S, LAST_S, Trace, TraceJob, moment

DAY = 86400.0
ARRIVALS = ("burst", "uniform", "poisson")
BANDS = ("low", "mid", "high")
#: more synthetic jobs than this is a typo (a duration in seconds read as days), not a what-if
MAX_JOBS = 100_000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ForecastError(SlurmtoolsError):
    """The trace cannot support the forecast asked for (too short, no GPU-hours)."""

    exit_code = 2


def _recorded(trace: Trace) -> list[TraceJob]:
    return [j for j in trace.jobs if j.synthetic is None]


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node_shapes(site, partition, gpu_type: str) -> list[tuple[int, int]] | None:
    """(GPUs, CPUs) of each `gpu_type` node of the partition, from the site's fabric; None without a fabric."""
    if site.fabric_path is None:
        return None
    from slurmtools.hostlist import expand
    from slurmtools.topology.sitefile import load_fabric

    fabric = load_fabric(site.fabric_path)
    return [(nt.gpus, nt.cpus) for nt in map(fabric.node_type_of, expand(partition.nodes))
            if nt.gpus and nt.gpu_type == gpu_type]


def load_campaigns(path: str, site, trace: Trace, notes: list[str] | None = None) -> list[TraceJob]:
    """The jobs of every `[[campaign]]` in `path`, shaped for `site` (the candidate). Raises ConfigError, one line
    naming the file and the key (`campaign[0].job_gpus: ...`); appends what a reader should know to `notes` (what
    was added, a start outside the history's span, a per-user limit the campaign's one user will hit)."""
    from slurmtools.durations import human
    from slurmtools.site.tomlread import Table, load_toml, shown

    src = str(path)
    root = Table(src, load_toml(Path(path)))
    tables = root.table_list("campaign")
    root.check_unknown(" (a campaign file holds [[campaign]] tables)")
    if not tables:
        raise root.error("campaign", "no [[campaign]] table: nothing to add")
    recorded = _recorded(trace) or list(trace.jobs)
    h0 = min(j.submit for j in recorded)
    h_end = max((j.start if j.start is not None else j.submit) + j.run_s for j in recorded)
    taken = {j.key for j in trace.jobs}
    site_file = str(site.source)
    with_cpus = [j.cpus / j.gpus for j in recorded if j.cpus and j.gpus]
    cpus_per_gpu = sorted(with_cpus)[len(with_cpus) // 2] if with_cpus else None
    out: list[TraceJob] = []
    names: set[str] = set()
    for t in tables:
        name = t.str("name")
        if not _NAME.match(name):
            raise t.error("name", f"{shown(name)}: letters, digits, '.', '_' and '-' only (it names the jobs)")
        if name in names:
            raise t.error("name", f"{shown(name)} names two campaigns in this file")
        names.add(name)
        if f"c-{name}-0" in taken:
            raise t.error("name", f"campaign {shown(name)} is already in the trace (added twice?)")
        account = t.str("account")
        acct = site.accounts.get(account)
        if acct is None:
            # the hint only for a name a TOML table can take bare: "add [accounts.] to that file" for an empty one
            hint = (f"; for a what-if with a new account, add [accounts.{account}] to that file"
                    if _NAME.match(account) else "")
            raise t.error("account", f"{shown(account)} is not an account of the candidate site {site_file} "
                                     f"(accounts there: {', '.join(sorted(site.accounts))}){hint}")
        user = t.str("user", f"campaign-{name}")
        if not _NAME.match(user):
            raise t.error("user", f"{shown(user)}: letters, digits, '.', '_' and '-' only")
        tier_name = t.str("tier", site.default_tier)
        tier = site.tiers.get(tier_name)
        if tier is None:
            raise t.error("tier", f"{shown(tier_name)} is not a tier of the candidate site {site_file} "
                                  f"(tiers there: {', '.join(sorted(site.tiers))})")
        if tier_name not in acct.tiers:
            raise t.error("tier", f"account {account} may not use tier {tier_name} in {site_file} "
                                  f"(its tiers: {', '.join(acct.tiers)})")
        default_part = site.default_partition.name if site.default_partition.name in tier.partitions \
            else tier.partitions[0]
        part_name = t.str("partition", default_part)
        part = site.partitions.get(part_name)
        if part is None or part_name not in tier.partitions:
            raise t.error("partition", f"{shown(part_name)} is not a partition tier {tier_name} may use in "
                                       f"{site_file} (those: {', '.join(tier.partitions)})")
        if not part.gpu_types:
            raise t.error("partition", f"{part_name} is a CPU partition; a campaign asks for GPUs")
        gpu_type = t.str("gpu_type", part.gpu_types[0])
        if gpu_type not in part.gpu_types:
            raise t.error("gpu_type", f"{shown(gpu_type)} is not a GPU type of partition {part_name} in "
                                      f"{site_file} (types there: {', '.join(part.gpu_types)})")
        job_gpus = t.int("job_gpus", minimum=1)
        nodes_of = _node_shapes(site, part, gpu_type)
        shapes = None if nodes_of is None else sorted({g for g, _ in nodes_of})
        nodes = t.int("nodes_per_job", None, minimum=1)
        if nodes is None:
            if not shapes:
                raise t.error("nodes_per_job", f"missing, and the site {site_file} has no fabric with {gpu_type} "
                                               f"nodes in partition {part_name} to derive it from")
            per = max(shapes)
            if job_gpus <= per:
                nodes = 1
            elif job_gpus % per:
                raise t.error("job_gpus", f"{job_gpus} GPUs do not fill whole {per}-GPU nodes of partition "
                                          f"{part_name}: use a multiple of {per}, or set nodes_per_job")
            else:
                nodes = job_gpus // per
            where = "job_gpus"
        else:
            where = "nodes_per_job"
            if job_gpus % nodes:
                raise t.error("nodes_per_job", f"job_gpus = {job_gpus} does not divide over {nodes} nodes")
            if shapes is not None and not any(g >= job_gpus // nodes for g in shapes):
                raise t.error("nodes_per_job", f"{job_gpus // nodes} GPUs per node: no {gpu_type} node of "
                                               f"partition {part_name} has that many (most: {max(shapes, default=0)})")
        if shapes is not None:
            fit = sum(1 for g, _ in nodes_of if g >= job_gpus // nodes)
            if nodes > fit:
                raise t.error(where, f"{nodes} nodes of {job_gpus // nodes} {gpu_type} GPUs: partition "
                                     f"{part_name} has {fit}")
        if tier.max_gpus_per_job is not None and job_gpus > tier.max_gpus_per_job:
            raise t.error("job_gpus", f"{job_gpus}: tier {tier_name} allows at most {tier.max_gpus_per_job} GPUs "
                                      f"per job in {site_file}")
        if tier.max_nodes is not None and nodes > tier.max_nodes:
            raise t.error(where, f"{nodes} nodes: tier {tier_name} allows at most {tier.max_nodes} per job in "
                                 f"{site_file}")
        run = t.duration("run_time")
        if run <= 0:
            raise t.error("run_time", "must be longer than 0s")
        cap = min(tier.max_walltime, part.max_time)
        if run > cap:
            raise t.error("run_time", f"{human(run)} is longer than tier {tier_name} and partition {part_name} "
                                      f"allow in {site_file} ({human(cap)})")
        limit = t.duration("time_limit", None)
        if limit is None:
            limit = max(run, min(cap, math.ceil(run * 1.5 / 60) * 60))
        elif limit < run:
            raise t.error("time_limit", f"{human(limit)} is shorter than run_time = {human(run)}: every job would "
                                        f"time out")
        elif limit > cap:
            raise t.error("time_limit", f"{human(limit)}: tier {tier_name} and partition {part_name} allow "
                                        f"{human(cap)} in {site_file}")
        duration = t.duration("duration", run)
        if duration <= 0:
            raise t.error("duration", "must be longer than 0s")
        if duration > LAST_S - FIRST_S:
            raise t.error("duration", "longer than the years 1 to 9999 a date-time can show")
        total, count = t.int("gpus", None, minimum=1), t.int("jobs", None, minimum=1)
        if (total is None) == (count is None):
            raise t.error("gpus", "give gpus (GPUs kept busy) or jobs (how many), exactly one of them")
        if total is not None:
            if total % job_gpus:
                raise t.error("gpus", f"{total} is not a multiple of job_gpus = {job_gpus}")
            count = total // job_gpus * math.ceil(duration / run)
        if count > MAX_JOBS:
            raise t.error("jobs" if total is None else "gpus", f"{count} jobs; at most {MAX_JOBS}")
        try:
            raw = t._get("start", None)
            start = h0 if raw is None else moment(raw, h0)
        except ValueError as exc:
            raise t.error("start", str(exc)) from None
        if start + duration + run > LAST_S:
            raise t.error("duration" if start + run <= LAST_S else "start",
                          f"the campaign would run past {_iso(LAST_S)}, the last time a date-time can show")
        arrival = t.str("arrival", "burst", choices=ARRIVALS)
        seed = t.int("seed", None)
        if seed is not None and arrival != "poisson":
            raise t.error("seed", f"only poisson arrivals are random (arrival = {arrival!r})")
        t.check_unknown()
        if arrival == "burst":
            times = [start] * count
        elif arrival == "uniform":
            times = [start + i * duration / count for i in range(count)]
        else:
            rng = random.Random(f"{seed or 0}:{name}")
            times = sorted(start + rng.uniform(0, duration) for _ in range(count))
        cpus = None
        if cpus_per_gpu:  # the history's median CPUs per GPU, within what the smallest fitting node has
            node_cpus = min((c for g, c in nodes_of or () if g >= job_gpus // nodes), default=None)
            cpus = math.ceil(cpus_per_gpu * job_gpus / nodes)
            cpus = (min(cpus, node_cpus) if node_cpus else cpus) * nodes
        out.extend(TraceJob(key=f"c-{name}-{i}", submit=s, user=user, account=account, tier=tier_name,
                            partition=part_name, nodes=nodes, gpus=job_gpus, gpu_type=gpu_type, cpus=cpus,
                            run_s=float(run), limit_s=float(limit), synthetic=name) for i, s in enumerate(times))
        if notes is not None:
            notes.append(f"added campaign {name} ({src}): {count} job(s) of {job_gpus} {gpu_type} GPUs on {nodes} "
                         f"node(s), {account}/{tier_name} as {user}, {arrival} from {_iso(start)}"
                         + (f" over {human(duration)}" if arrival != "burst" else "")
                         + f", {human(run)} each ({count * job_gpus * run / 3600:g} GPU-hours)")
            if start < h0 or start > h_end:
                gap = h0 - start if start < h0 else start - h_end
                notes.append(f"campaign {name} starts {human(gap)} {'before' if start < h0 else 'after'} the "
                             f"history ({_iso(h0)} to {_iso(h_end)}): "
                             + ("the replay starts that much earlier" if start < h0 else
                                "it meets no recorded load, and the replay runs that much longer"))
            at_once = count if arrival == "burst" else min(count, math.ceil(count * run / duration))
            if tier.max_gpus_per_user is not None and at_once * job_gpus > tier.max_gpus_per_user:
                notes.append(f"campaign {name} asks for up to {at_once * job_gpus} GPUs at once, but tier "
                             f"{tier_name} lets one user run {tier.max_gpus_per_user} and the campaign is one "
                             f"user ({user})")
    return out


def add_to(trace: Trace, jobs: list[TraceJob], notes: list[str]) -> Trace:
    """`trace` with `jobs` merged in (`Trace.with_jobs`), each note its own line in the trace's notes."""
    for i, n in enumerate(notes or [None]):
        trace = trace.with_jobs(jobs if i == 0 else (), note=n)
    return trace


def daily_gpu_hours(trace: Trace) -> tuple[float, list[float], float]:
    """(t0, GPU-hours asked per whole day, GPU-hours asked in the trailing partial day) of the recorded jobs.

    Days are 24-hour windows from the first submission (so the first is whole); a job counts on the day it was
    submitted, for its GPUs x its recorded run. The window holding the last submission is partial: the history
    may have been taken in the middle of it."""
    rec = _recorded(trace)
    t0 = min(j.submit for j in rec)
    whole = int((max(j.submit for j in rec) - t0) // DAY)
    days = [0.0] * (whole + 1)
    for j in rec:
        days[int((j.submit - t0) // DAY)] += j.gpus * j.run_s / 3600
    return t0, days[:whole], days[whole]


def forecast_load(trace: Trace, band: str, days: int, seed: int = 0, notes: list[str] | None = None
                  ) -> list[TraceJob]:
    """Synthetic jobs for the `days` days after the history's last whole day, at the demand forecast's level.

    Semantics: the recorded jobs' GPU-hours asked per day (`daily_gpu_hours`) are forecast `days` ahead by
    `slurmtools.reports.forecast` (the method with the lowest backtest error over `days`-day totals). `band`
    picks the point forecast (mid) or its error band: the point x (1 -/+ the backtest WAPE), as the reports print
    it (low is never below 0). Forecast day 0 is the trailing partial day of the history: what the history already
    asked that day is subtracted from its target. Each day gets jobs drawn (seeded, one stream per day, so a higher
    band adds a superset of a lower band's jobs) from the recorded jobs with GPUs: shape, tier, account, user,
    partition, run time and limit copied, submitted at the drawn job's own time of day; drawing stops once the
    day's target is met (overshooting it by less than one job). Demand here is what was asked and ran, so a
    history capped by a full cluster forecasts that cap; and the methods are flat or weekly, so a growing history
    is forecast at its recent mean (its lag shows in the band). Raises ForecastError when the history has fewer than
    7 + `days` whole days: 7 for the simplest method, `days` to measure its error on at least once."""
    from slurmtools.reports.forecast import METHODS, MIN_FIT, forecast

    import numpy as np
    import pandas as pd

    if band not in BANDS:
        raise ForecastError(f"band: expected one of {', '.join(BANDS)}, got {band!r}")
    if days < 1:
        raise ForecastError(f"days: expected at least 1, got {days}")
    rec = _recorded(trace)
    pool = [j for j in rec if j.gpus and j.run_s > 0]
    t0, daily, partial = daily_gpu_hours(trace)
    need = MIN_FIT + days
    if len(daily) < need:
        raise ForecastError(f"{trace.source}: {len(daily)} whole day(s) of submissions; a {days}-day forecast "
                            f"with its error band needs at least {need} ({MIN_FIT} to fit, {days} to test it on)")
    if not pool:
        raise ForecastError(f"{trace.source}: no recorded job used GPUs: no job mix to draw from")
    f = forecast(pd.Series(daily), days, "GPU-hours asked")
    if f.wape_pct is None:
        raise ForecastError(f"{trace.source}: the forecast's error cannot be measured (no GPU-hours in the days "
                            f"it would be tested on)")
    per_day = METHODS[f.method][0](np.asarray(daily, dtype=float), days)
    w = f.wape_pct / 100
    factor = {"low": max(0.0, 1 - w), "mid": 1.0, "high": 1 + w}[band]
    out: list[TraceJob] = []
    first = len(daily)
    targets = []
    for d in range(days):
        target = max(0.0, float(per_day[d]) * factor - (partial if d == 0 else 0.0))
        targets.append(target)
        rng = random.Random(f"{seed}:{d}")
        day0 = t0 + (first + d) * DAY
        added, n = 0.0, 0
        while added < target:
            j = rng.choice(pool)
            out.append(dataclasses.replace(j, key=f"f-{band}-{d}-{n}", submit=day0 + (j.submit - t0) % DAY,
                                           start=None, state="", array_job=None, array_task=None,
                                           synthetic=f"forecast-{band}"))
            added += j.gpus * j.run_s / 3600
            n += 1
            if len(out) > MAX_JOBS:
                raise ForecastError(f"{trace.source}: more than {MAX_JOBS} forecast jobs: the history's jobs are "
                                    f"too small for its daily GPU-hours")
    if notes is not None:
        from slurmtools.durations import human

        gpuh = sum(j.gpus * j.run_s for j in out) / 3600
        notes.append(f"added the demand forecast ({band}) for {human(days * DAY)} from {_iso(t0 + first * DAY)}: "
                     f"{f.method}, {f.per_day:.0f} GPU-hours/day, backtest error ±{f.wape_pct:.0f}% on {days}-day "
                     f"totals ({f.origins} origin(s)); target {sum(targets):.0f} GPU-hours after the {partial:.0f} "
                     f"the history already asked on the first day; {len(out)} job(s), {gpuh:.0f} GPU-hours, drawn "
                     f"from the history's own jobs")
    return out
