"""The right-sizing rules (pure): runs grouped by job shape, each rule judged on the share of the shape's runs the
site asks for (`[advise] runs_share`), never on one run, and each verdict stated with its evidence and its fix.

Rules, in the order a recommendation lists them (thresholds: `site.advise`, docs/advise.md):
- gpus: most runs kept fewer GPUs busy than they held -> `--gpus K`;
- gpu_unit: one GPU, barely busy -> a MIG profile, a gres/shard count or MPS, where the GPU type offers one;
- time: the time limit is `time_ratio` x the longest completed run or more -> a shorter `--time`;
- memory_bound: memory controller busy, SM not -> a GPU type with more memory bandwidth, where the site has one;
- cpu: CPUs mostly idle (TotalCPU / CPUs x run time); memory: peak RSS a small share of the request.
"""

from __future__ import annotations

import math
from collections import defaultdict
from operator import attrgetter
from typing import Iterable, Sequence

from slurmtools.advise.model import Finding, RunUse, Shape, ShapeAdvice
from slurmtools.durations import human
from slurmtools.site.model import MIG_PROFILE, AdviseSettings, Site

RULES = ("gpus", "gpu_unit", "time", "memory_bound", "cpu", "memory")
_BY_JOB_AND_RUN = attrgetter("job_id", "run")


def at_share(values: Sequence[float], share: float) -> float:
    """The smallest value that `share` of `values` are at or below (the share-quantile, an observed value)."""
    s = sorted(values)
    return s[max(math.ceil(share * len(s)) - 1, 0)]


def select(runs: Iterable[RunUse], user: str | None = None, account: str | None = None) -> list[RunUse]:
    return [r for r in runs if (user is None or r.user == user) and (account is None or r.account == account)]


def advise(runs: Iterable[RunUse], site: Site) -> list[ShapeAdvice]:
    """Advice per job shape, the shapes with the most GPU time first."""
    # keyed by plain tuples (a Shape per run, hashed and compared, cost a third of advise at 100,000 runs)
    groups: dict[tuple[str, str, int], list[RunUse]] = defaultdict(list)
    for r in runs:
        groups[(r.user, r.name, r.gpus)].append(r)
    out = [advise_shape(Shape(*key), rs, site) for key, rs in groups.items()]
    weight = {a.shape: sum(r.gpus * r.elapsed_s for r in groups[(a.shape.user, a.shape.name, a.shape.gpus)])
              for a in out}
    return sorted(out, key=lambda a: (-weight[a.shape], a.shape.user, a.shape.name, a.shape.gpus))


def advise_shape(shape: Shape, runs: list[RunUse], site: Site) -> ShapeAdvice:
    cfg = site.advise
    runs = sorted(runs, key=_BY_JOB_AND_RUN)
    last = runs[-1]
    busy = [_gpus_busy(r, cfg) for r in runs]
    known = [b for b in busy if b is not None]
    asked = {"gpus": shape.gpus, "gpu_type": last.gpu_type, "cpus": last.cpus, "mem_mb_per_node": last.mem_mb,
             "time_limit_s": last.time_limit_s}
    completed = [r for r in runs if r.state == "COMPLETED"]
    eff = [r.cpu_efficiency_pct for r in runs]  # once per run: the cpu rule reads them again
    effs = [e for e in eff if e is not None]
    rss = [r.max_rss_mb for r in runs if r.max_rss_mb is not None]
    used = {"runs_with_gpu_use": len(known),
            "gpu_use_from": _source(runs),
            "gpus_busy_at_share": at_share([b[0] for b in known], cfg.runs_share) if known else None,
            "gpu_util_pct_median": _median([_busy_util(r, cfg) for r in runs]) if known else None,
            "gpu_mem_util_pct_median": _median([_busy_mem_util(r, cfg) for r in runs if r.gpu_mem_util]),
            "gpu_mem_mb_peak": max((r.gpu_mem_mb for r in runs if r.gpu_mem_mb is not None), default=None),
            "cpu_efficiency_pct_median": _median(effs),
            "max_rss_mb_peak": max(rss) if rss else None,
            "longest_completed_run_s": max((r.elapsed_s for r in completed), default=None),
            "timeouts": sum(r.state == "TIMEOUT" for r in runs)}
    findings: list[Finding] = []
    if len(runs) >= cfg.min_runs:
        gpus = _rule_gpus(shape, busy, cfg)
        findings += [f for f in (gpus, _rule_gpu_unit(shape, runs, gpus, site), _rule_time(shape, runs, cfg),
                                 _rule_memory_bound(shape, runs, site), _rule_cpu(shape, runs, eff, cfg),
                                 _rule_memory(shape, runs, cfg)) if f is not None]
    return ShapeAdvice(shape=shape, account=last.account, gpu_type=last.gpu_type, runs=len(runs), asked=asked,
                       used=used, findings=tuple(findings))


# ---------------------------------------------------------------------------------------------- measures
def _gpus_busy(r: RunUse, cfg: AdviseSettings) -> tuple[int, str] | None:
    """(GPUs that did work, where that is known from): the epilog's per-GPU utilisation above the idle mark, else
    Slurm's gres/gpuutil (a sum over GPUs: the GPUs it is worth, rounded up); None when neither says."""
    if r.gpu_util:
        return sum(u > cfg.gpu_idle_pct for u in r.gpu_util), "epilog"
    if r.slurm_gpu_util is not None:
        return math.ceil(r.slurm_gpu_util / 100.0 - 1e-9) if r.slurm_gpu_util > cfg.gpu_idle_pct else 0, "slurm"
    return None


def _busy_util(r: RunUse, cfg: AdviseSettings) -> float | None:
    """The SM utilisation of the GPUs that worked (mean), or of the one busiest GPU's worth from Slurm's sum."""
    if r.gpu_util:
        b = [u for u in r.gpu_util if u > cfg.gpu_idle_pct]
        return sum(b) / len(b) if b else 0.0
    s = r.slurm_gpu_util
    if s is not None:
        n = math.ceil(s / 100.0 - 1e-9)
        return s / (n if n > 1 else 1)
    return None


def _busy_mem_util(r: RunUse, cfg: AdviseSettings) -> float | None:
    """The memory controller's utilisation on the GPUs that worked (mean); None without per-GPU records."""
    if not r.gpu_mem_util or len(r.gpu_mem_util) != len(r.gpu_util):
        return None
    pairs = [(u, m) for u, m in zip(r.gpu_util, r.gpu_mem_util) if u > cfg.gpu_idle_pct or m > cfg.gpu_idle_pct]
    return sum(m for _, m in pairs) / len(pairs) if pairs else 0.0


def _median(xs: list) -> float | None:
    v = sorted(x for x in xs if x is not None)
    if not v:
        return None
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def _source(runs: list[RunUse]) -> str:
    if any(r.gpu_util for r in runs):
        return "epilog"
    if any(r.slurm_gpu_util is not None for r in runs):
        return "slurm gres/gpuutil"
    return "none"


def _of_last(cnt: int, n: int, shape: Shape) -> str:
    return f"{cnt} of your last {n} `{shape.name}` runs"


# ---------------------------------------------------------------------------------------------- rules
def _rule_gpus(shape: Shape, busy: list, cfg: AdviseSettings) -> Finding | None:
    known = [b for b in busy if b is not None]
    if shape.gpus < 2 or len(known) < cfg.min_runs:
        return None
    k = max(int(at_share([b[0] for b in known], cfg.runs_share)), 1)
    if k >= shape.gpus:
        return None
    cnt = sum(b[0] <= k for b in known)
    how = "" if all(s == "epilog" for _, s in known) else " (by Slurm's gres/gpuutil, GPU time worth that many)"
    return Finding("gpus", f"{_of_last(cnt, len(known), shape)} used at most {k} of {shape.gpus} GPUs{how}",
                   f"plan with --gpus {k}", {"gpus": (shape.gpus, k)})


def _rule_gpu_unit(shape: Shape, runs: list[RunUse], gpus: Finding | None, site: Site) -> Finding | None:
    cfg = site.advise
    target = gpus.changes["gpus"][1] if gpus is not None else shape.gpus
    gt = site.gpu_types.get(runs[-1].gpu_type)
    if target != 1 or gt is None or not (gt.mig_profiles or gt.shards_per_gpu or gt.mps):
        return None
    utils = [u for u in (_peak_util(r) for r in runs) if u is not None]
    if len(utils) < cfg.min_runs:
        return None
    q = at_share(utils, cfg.runs_share)
    if q > cfg.fraction_util_pct:
        return None
    cnt = sum(u <= q for u in utils)
    mems = [r.gpu_mem_mb for r in runs if r.gpu_mem_mb is not None]
    mem_q = at_share(mems, cfg.runs_share) if len(mems) >= cfg.min_runs else None
    mem_text = f", {mem_q / 1024:.1f} GB of GPU memory at most" if mem_q is not None else ""
    evidence = f"{_of_last(cnt, len(utils), shape)} kept their one GPU at most {q:.0f}% busy{mem_text}"
    fix = _smaller_unit(gt, q, mem_q)
    if fix is None:
        return None
    return Finding("gpu_unit", evidence, fix)


def _peak_util(r: RunUse) -> float | None:
    if r.gpu_util:
        return max(r.gpu_util)
    return r.slurm_gpu_util


def _smaller_unit(gt, util: float, mem_mb: float | None) -> str | None:
    """The smallest unit of `gt` that holds `util` percent of one GPU's compute and `mem_mb` (with a tenth to
    spare): a MIG profile (needs the memory known: a slice has its own), else shards, else MPS."""
    if gt.mig_profiles and mem_mb is not None:
        fits = []
        for p in gt.mig_profiles:
            m = MIG_PROFILE.fullmatch(p)
            slices, gb = int(m.group(1)), int(m.group(2))
            if slices / 7 * 100 >= util and gb * 1024 >= mem_mb * 1.1:
                fits.append((slices, gb, p))
        if fits:
            p = min(fits)[2]
            return f"ask for a MIG slice instead of a whole {gt.name}: --gres=gpu:{p}:1"
    if gt.shards_per_gpu:
        n = max(math.ceil(util / 100 * gt.shards_per_gpu), 1)
        if n < gt.shards_per_gpu:
            return f"share a GPU: --gres=shard:{n} (of {gt.shards_per_gpu} per {gt.name})"
    if gt.mps:
        pct = min(max(math.ceil(util / 10) * 10, 10), 100)
        if pct < 100:
            return f"share a GPU through MPS: --gres=mps:{pct} (percent of one {gt.name})"
    return None


def round_time(seconds: float) -> int:
    """Up to a limit people write: 5 minutes under 1 hour, 15 minutes under a day, else a whole hour."""
    step = 300 if seconds < 3600 else 900 if seconds < 86400 else 3600
    return max(int(math.ceil(seconds / step) * step), 300)


def _rule_time(shape: Shape, runs: list[RunUse], cfg: AdviseSettings) -> Finding | None:
    done = [r for r in runs if r.state == "COMPLETED" and r.time_limit_s and r.elapsed_s > 0]
    if len(done) < cfg.min_runs or any(r.state == "TIMEOUT" for r in runs):
        return None
    limit = runs[-1].time_limit_s
    if not limit:
        return None
    longest = max(r.elapsed_s for r in done)
    if limit < cfg.time_ratio * longest:
        return None
    new = round_time(longest * cfg.time_headroom)
    if new >= limit:
        return None
    return Finding("time", f"your time limit ({human(limit)}) is {limit / longest:.0f}x your longest run "
                           f"({human(longest)}) in {len(done)} completed `{shape.name}` runs",
                   f"use --time {human(new)}", {"time_limit": (limit, new)})


def _rule_memory_bound(shape: Shape, runs: list[RunUse], site: Site) -> Finding | None:
    cfg = site.advise
    if not any(r.gpu_mem_util for r in runs):
        return None  # only the epilog's per-GPU records carry the memory controller's share
    pairs = [(_busy_util(r, cfg), _busy_mem_util(r, cfg)) for r in runs]
    pairs = [(s, m) for s, m in pairs if s is not None and m is not None]
    if len(pairs) < cfg.min_runs:
        return None
    bound = [(s, m) for s, m in pairs if m >= cfg.memory_bound_mem_pct and s <= cfg.memory_bound_sm_pct]
    if len(bound) < cfg.runs_share * len(pairs):
        return None
    sm, mem = _median([s for s, _ in bound]), _median([m for _, m in bound])
    evidence = (f"{_of_last(len(bound), len(pairs), shape)} were memory-bound (memory controller {mem:.0f}% busy, "
                f"SM {sm:.0f}%, medians)")
    cur = site.gpu_types.get(runs[-1].gpu_type)
    cur_bw = cur.memory_bandwidth_gbs if cur is not None else None
    offered = {t for p in site.partitions.values() for t in p.gpu_types}
    better = [g for g in site.gpu_types.values() if g.name in offered and g.memory_bandwidth_gbs is not None
              and cur_bw is not None and g.memory_bandwidth_gbs > cur_bw]
    if not better:
        why = "no GPU type here has more memory bandwidth" if cur_bw is not None else \
            f"the site states no memory_bandwidth_gbs for {runs[-1].gpu_type}"
        return Finding("memory_bound", f"{evidence} ({why})", "")
    best = max(better, key=lambda g: g.memory_bandwidth_gbs)
    return Finding("memory_bound", evidence,
                   f"plan with --gpu-type {best.name} ({best.memory_bandwidth_gbs:g} GB/s against "
                   f"{cur.name}'s {cur_bw:g} GB/s)", {"gpu_type": (cur.name, best.name)})


def _rule_cpu(shape: Shape, runs: list[RunUse], eff: list[float | None], cfg: AdviseSettings
              ) -> Finding | None:
    """`eff`: each run's `cpu_efficiency_pct`, in the order of `runs`."""
    known = [(r, e) for r, e in zip(runs, eff) if e is not None]
    if len(known) < cfg.min_runs:
        return None
    low = sum(e < cfg.cpu_efficiency_pct for _, e in known)
    if low < cfg.runs_share * len(known):
        return None
    q = at_share([e for _, e in known], cfg.runs_share)
    rs = [r for r, _ in known]
    cpus = rs[-1].cpus
    evidence = f"{_of_last(low, len(rs), shape)} kept their {cpus} CPUs at most {q:.0f}% busy"
    if shape.gpus == 0 and rs[-1].nodes == 1:
        need = max(math.ceil(cpus * q / 100 * 1.25), 1)
        if need < cpus:
            return Finding("cpu", evidence, f"plan with --cpus {need}", {"cpus": (cpus, need)})
    return Finding("cpu", evidence + " (GPU jobs get the CPUs that come with their GPUs)", "")


def _rule_memory(shape: Shape, runs: list[RunUse], cfg: AdviseSettings) -> Finding | None:
    rs = [r for r in runs if r.max_rss_mb is not None and r.mem_mb]
    if len(rs) < cfg.min_runs:
        return None
    peak = max(r.max_rss_mb for r in rs)
    asked = rs[-1].mem_mb
    if peak > asked * cfg.memory_used_pct / 100:
        return None
    evidence = f"your last {len(rs)} `{shape.name}` runs peaked at {_gb(peak)} of the {_gb(asked)} asked per node"
    if shape.gpus == 0:
        new = max(math.ceil(peak * 1.5 / 1024), 1) * 1024
        if new < asked:
            return Finding("memory", evidence, f"plan with --mem {new // 1024}G", {"mem_mb": (int(asked), new)})
    return Finding("memory", evidence + " (GPU jobs get the memory that comes with their GPUs)", "")


def _gb(mb: float) -> str:
    return f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:.0f} MB"
