"""From job runs, capacity, epilog records and the site to the report's tables. Pure: no I/O, no printing.

Conventions (also in docs/reports.md):
- A run counts inside the window for the part of [start, end) that overlaps [since, until). A run still going has
  end = until; a finished run without an End (Slurm prints `Unknown` after some crashes) counts 0 s and is noted.
- GPU-hours are allocated GPU-hours (AllocTRES x time). Tier = QoS. Untyped GPUs in a partition with a single GPU
  type are counted as that type.
- Utilization % = allocated / available GPU-hours, available = installed minus down/drained time.
- Lost to preemption = for runs that ended PREEMPTED or were requeued, GPUs x (end - last checkpoint) where the
  epilog's record or the decision log gives the run's last checkpoint, else the run's whole GPU-hours (an upper
  bound, marked so: sacct does not know checkpoints).
- Idle GPU-hours = allocated GPU-hours x (1 - mean GPU utilisation), from the epilog's record, else from Slurm's
  own gres/gpuutil, else unknown (not counted).
- Times: the runs' times are UTC instants (`sacct.read_sacct` with the report's zone), `start_s`/`end_s` epoch
  seconds; the window and the days are the report's zone's (`reports.zone`): local days may be 23 or 25 hours
  long. Times shown (the window, bucket and day starts, a run's start and end) are local.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import pandas as pd

from slurmtools.reports import zone as zone_mod
from slurmtools.reports.forecast import Forecast, forecast

RUNNING = ("RUNNING", "SUSPENDED", "REQUEUED", "RESIZING")
SIZE_BINS = [(1, 1, "1"), (2, 4, "2-4"), (5, 8, "5-8"), (9, 16, "9-16"), (17, 64, "17-64"), (65, 10**9, "65+")]
WAIT_BINS_MIN = [0, 1, 5, 15, 60, 240, 1440, np.inf]
WAIT_LABELS = ["<1 min", "1-5 min", "5-15 min", "15-60 min", "1-4 h", "4-24 h", ">1 day"]
WASTE_UTIL_PCT = 30.0  # a run below this mean GPU utilisation is listed among the wasters
#: how the note saying capacity was counted from the cluster's first record begins (the Markdown repeats it)
CAPACITY_NOTE = "capacity counted from"
#: the summary's "0 jobs" of a dump of CPU jobs needs this beside it (the Markdown summary shows it)
CPU_ONLY_NOTE = "CPU-only runs left out:"
#: states of a run that ended because the node failed, not because it was preempted, even when requeued
NODE_FAILURE = ("NODE_FAIL", "BOOT_FAIL")
#: timeline bucket lengths (seconds), the shortest that gives at most TIMELINE_MAX_BUCKETS is used: minutes for
#: a window of minutes, hours for a day, days for a month, weeks for a year
TIMELINE_STEPS = (60, 5 * 60, 15 * 60, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400, 30 * 86400)
TIMELINE_MAX_BUCKETS = 55


@dataclass
class Report:
    since: datetime
    until: datetime
    site: str
    cluster: str
    currency: str
    summary: dict
    tables: dict[str, pd.DataFrame]
    timeline: pd.DataFrame  # bucket start x tier GPU-hours, plus capacity
    wait_hist: pd.DataFrame  # tier x wait bins, counts
    forecasts: list[Forecast]
    notes: list[str] = field(default_factory=list)
    #: tiers whose GPU-hours are not charged against budgets (`slurmtools.policy.usage.uncharged_tiers`)
    uncharged_tiers: tuple[str, ...] = ()
    #: the inputs' rows skipped as bad (`slurmtools.reports.badrows.BadRows`, only inputs that had some)
    bad_rows: list = field(default_factory=list)
    #: the zone of the window and of the times shown (`reports.zone.Zone`; None: UTC)
    zone: object = None


def _secs(a) -> np.ndarray:
    return a.astype("datetime64[s]").astype(np.int64)


def _recat(col: pd.Series, fn) -> pd.Categorical:
    """A categorical with `fn` applied to its categories only (cheap on millions of rows)."""
    c = col.astype("category").cat
    new = np.array([fn(str(x)) for x in c.categories], dtype=object)
    codes = c.codes.to_numpy()
    if len(new) == 0:
        return pd.Categorical([""] * len(codes)) if len(codes) else pd.Categorical([])
    uniq, inv = np.unique(new.astype(str), return_inverse=True)
    return pd.Categorical.from_codes(np.where(codes >= 0, inv[np.maximum(codes, 0)], -1), uniq)


def cpu_only_runs(jobs: pd.DataFrame, lo: int, hi: int) -> int:
    """Runs in [lo, hi) (epoch seconds) that held no GPU: a GPU report leaves them out, and says how many, so a
    dump of CPU jobs does not read as an idle cluster with no jobs. A run without End counts to `hi`."""
    cpu = (~(jobs["gpus"] > 0) & jobs["start"].notna()).to_numpy()
    if not cpu.any():
        return 0
    start = _secs(jobs["start"].to_numpy()[cpu])
    end_raw = jobs["end"].to_numpy()[cpu]
    no_end = pd.isna(end_raw)
    end = np.where(no_end, hi, _secs(np.where(no_end, np.datetime64(0, "s"), end_raw)))
    return int(((start < hi) & (end > lo)).sum())


def cpu_only_note(n: int) -> str:
    return f"{CPU_ONLY_NOTE} {n} job run(s) in the window held no GPU; this is a GPU report, they are not in its figures"


def prepare(jobs: pd.DataFrame, site, until: datetime, notes: list[str], zone=None) -> pd.DataFrame:
    """Runs that held GPUs, with start_s/end_s as epoch seconds, gpu_type resolved and tier named; a run still
    going ends at `until` (a local time of `zone`).

    `row` points back into `jobs` for the text columns (names, ids), fetched only for the rows a table shows."""
    keep = ((jobs["gpus"] > 0) & jobs["start"].notna()).to_numpy()
    # only the typed columns travel; text (names, ids) stays in `jobs` until a table needs a row of it
    j = jobs[["job_id_raw", "user", "account", "partition", "qos", "state", "cluster", "gpus", "gpu_type", "start",
              "end", "submit", "eligible", "gpu_util_slurm"]][keep]
    mem = jobs["gpu_mem_slurm_mb"].to_numpy(dtype=float)[keep] if "gpu_mem_slurm_mb" in jobs.columns else \
        np.full(int(keep.sum()), np.nan)
    u = np.int64(zone_mod.get(zone).instant(until))
    start = _secs(j["start"].to_numpy())
    end_raw = j["end"].to_numpy()
    no_end = pd.isna(end_raw)
    end = np.where(no_end, 0, _secs(np.where(no_end, np.datetime64(0, "s"), end_raw)))
    running = j["state"].isin(RUNNING).to_numpy()
    end = np.where(no_end & running, np.maximum(u, start), end)
    lost = no_end & ~running
    if lost.any():
        notes.append(f"{int(lost.sum())} finished run(s) have no End time in sacct; counted as 0 s")
    end = np.where(lost, start, end)
    gtype = j["gpu_type"].astype("category").reset_index(drop=True)
    if site is not None and "untyped" in set(gtype.cat.categories):
        single = {p.name: p.gpu_types[0] for p in site.partitions.values() if len(p.gpu_types) == 1}
        mask = (gtype == "untyped").to_numpy()
        mapped = [single.get(str(x), "untyped") for x in j["partition"].to_numpy()[mask]]
        missing = sorted(set(mapped) - set(gtype.cat.categories))
        if missing:
            gtype = gtype.cat.add_categories(missing)
        gtype[mask] = mapped
    cluster = site.cluster_name if site else "(none)"
    out = pd.DataFrame({
        "row": np.flatnonzero(keep), "job_id_raw": j["job_id_raw"].to_numpy(),
        "user": j["user"].to_numpy(), "account": j["account"].to_numpy(), "partition": j["partition"].to_numpy(),
        "tier": _recat(j["qos"], lambda x: x or "(none)"), "state": j["state"].to_numpy(),
        "cluster": _recat(j["cluster"], lambda x: x or cluster),
        "gpus": j["gpus"].to_numpy(), "gpu_type": gtype.array,
        "start_s": start, "end_s": end,
        "submit_s": _secs(j["submit"].to_numpy()), "eligible_s": _secs(j["eligible"].to_numpy()),
        "gpu_util_slurm": j["gpu_util_slurm"].to_numpy(), "gpu_mem_slurm_mb": mem,
    })
    for c in ("user", "account", "partition", "state", "gpu_type"):
        out[c] = out[c].astype("category")
    cl = out["cluster"].cat
    run, requeued = run_numbers(out["job_id_raw"].to_numpy(), start, (j["state"] == "RESIZING").to_numpy(),
                                cl.codes.to_numpy() if len(cl.categories) > 1 else None)
    out["requeued"] = requeued
    out["run"] = run
    return out


def run_numbers(job: np.ndarray, start: np.ndarray, resizing: np.ndarray, cluster: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """(each row's run among its job's runs, whether a later run followed it), runs in order of start (then place
    in the frame); `resizing`: the row ended RESIZING; `cluster`: codes of each row's cluster where a frame holds
    several (a job is then its cluster and JobIDRaw).

    One run may be several rows: a job holding GPUs of several types is a row per type (same Start), and a job
    resized while it ran (`scontrol update ... NumNodes=`) gets a new row from the resize on, after a row that
    ended RESIZING (`sacct -D`). Neither is a requeue; every run of a job but its last was requeued. Only jobs of
    more than one row are sorted. The DuckDB engine (`columnar._runs_table`) numbers runs by the same rule."""
    n = len(job)
    run, requeued = np.zeros(n, dtype=np.int32), np.zeros(n, dtype=bool)
    keys = pd.DataFrame({"j": job}) if cluster is None else pd.DataFrame({"j": job, "c": cluster})
    idx = np.flatnonzero(keys.duplicated(keep=False).to_numpy())
    if not len(idx):
        return run, requeued
    sort_keys = (idx, start[idx], job[idx]) if cluster is None else (idx, start[idx], cluster[idx], job[idx])
    o = idx[np.lexsort(sort_keys)]
    j, st, rs = job[o], start[o], resizing[o]
    first = np.ones(len(o), dtype=bool)
    first[1:] = j[1:] != j[:-1]
    if cluster is not None:
        c = cluster[o]
        first[1:] |= c[1:] != c[:-1]
    new = first.copy()
    new[1:] |= (st[1:] != st[:-1]) & ~rs[:-1]
    seq = np.cumsum(new) - 1
    r = (seq - np.maximum.accumulate(np.where(first, seq, 0))).astype(np.int32)
    # the last run of each job: the run of the job's last row, carried back over its rows
    ends = np.flatnonzero(np.r_[first[1:], True])
    last_run = np.repeat(r[ends], np.diff(np.r_[-1, ends]))
    run[o] = r
    requeued[o] = (r < last_run) & ~rs
    return run, requeued


def _jobs(runs: pd.DataFrame) -> int:
    """How many jobs the runs are of: a job is its JobIDRaw, and its cluster where the runs are of several."""
    if len(runs["cluster"].cat.remove_unused_categories().cat.categories) > 1:
        return int(len(runs[["cluster", "job_id_raw"]].drop_duplicates()))
    return int(runs["job_id_raw"].nunique())


def overlap_hours(r: pd.DataFrame, lo: int, hi: int) -> np.ndarray:
    """GPU-hours of each run inside [lo, hi) (epoch seconds)."""
    s = np.maximum(r["start_s"].to_numpy(), lo)
    e = np.minimum(r["end_s"].to_numpy(), hi)
    return np.clip(e - s, 0, None) * r["gpus"].to_numpy() / 3600.0


def _buckets(st, en, g, codes, k, edges) -> np.ndarray:
    """GPU-hours per bucket x code. Runs sorted by start; each bucket looks only at runs that can touch it."""
    order = np.argsort(st, kind="stable")
    st, en, g, codes = st[order], en[order], g[order], codes[order]
    longest = int((en - st).max()) if len(st) else 0
    out = np.zeros((len(edges) - 1, k))
    for i in range(len(edges) - 1):
        lo, hi = edges[i], edges[i + 1]
        a = np.searchsorted(st, lo - longest, side="left")
        b = np.searchsorted(st, hi, side="left")
        if b <= a:
            continue
        ov = np.clip(np.minimum(en[a:b], hi) - np.maximum(st[a:b], lo), 0, None) * g[a:b]
        out[i] = np.bincount(codes[a:b], weights=ov, minlength=k)[:k] / 3600.0
    return out


def bucket_matrix(r: pd.DataFrame, edges: np.ndarray, key: str, labels: np.ndarray | None = None) -> pd.DataFrame:
    """GPU-hours per bucket (rows, labelled by their start: `labels`, local seconds, else the edges) and category
    of `key` (columns)."""
    cat = r[key].astype("category")
    k = len(cat.cat.categories)
    out = _buckets(r["start_s"].to_numpy(), r["end_s"].to_numpy(), r["gpus"].to_numpy(),
                   cat.cat.codes.to_numpy(), k, edges)
    return pd.DataFrame(out, index=pd.to_datetime(edges[:-1] if labels is None else labels, unit="s"),
                        columns=[str(c) for c in cat.cat.categories])


USAGE_COLUMNS = {"day": "datetime64[s]", "tier": "str", "account": "str", "gpu_hours": "float64"}


def daily_usage(r: pd.DataFrame, lo: int, hi: int, zone=None) -> pd.DataFrame:
    """GPU-hours per day, tier and account inside [lo, hi) (instants; lo at a local midnight of `zone`; the last
    day may be partial). Days are local days (23 or 25 hours long on a clock change), `day` their local start.

    The small summary the day cache keeps for history: forecasts and month-to-date budgets need only this."""
    if len(r) == 0 or hi <= lo:
        return pd.DataFrame({k: pd.Series(dtype=v) for k, v in USAGE_COLUMNS.items()})
    z = zone_mod.get(zone)
    tier = r["tier"].astype("category")
    acc = r["account"].astype("category")
    na = len(acc.cat.categories)
    codes = tier.cat.codes.to_numpy().astype(np.int64) * na + acc.cat.codes.to_numpy()
    k = len(tier.cat.categories) * na
    days, edges = z.grid(int(z.clock(np.array([lo]))[0]), hi, 86400)
    m = _buckets(r["start_s"].to_numpy(), r["end_s"].to_numpy(), r["gpus"].to_numpy(), codes, k, edges)
    d, c = np.nonzero(m)
    return pd.DataFrame({"day": pd.to_datetime(days[d], unit="s").astype("datetime64[s]"),
                         "tier": np.asarray(tier.cat.categories.astype(str))[c // na],
                         "account": np.asarray(acc.cat.categories.astype(str))[c % na],
                         "gpu_hours": m[d, c]})


def bucket_seconds(span: int) -> int:
    """The timeline's bucket length for a window of `span` seconds (see TIMELINE_STEPS). A window shorter than
    three minutes gets seconds (at most 20 buckets): even a test window of a minute shows more than one point."""
    if span < 3 * 60:
        return next(b for b in (1, 5, 10, 30) if span / b <= 20)
    for b in TIMELINE_STEPS:
        if span / b <= TIMELINE_MAX_BUCKETS:
            return b
    return TIMELINE_STEPS[-1] * (1 + int(span / TIMELINE_STEPS[-1] / TIMELINE_MAX_BUCKETS))


def timeline_grid(z, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The timeline's buckets over [lo, hi) (instants): (their starts, local seconds; every edge, instants, one
    more; which buckets are kept: not the empty ones at a start the clocks skipped; the bucket length). Buckets
    start on local times from the window's start (whole local days when a bucket is a day or more long)."""
    bsec = bucket_seconds(hi - lo)
    starts, edges = z.grid(int(z.clock(np.array([lo]))[0]), hi, bsec)
    keep = edges[1:] > edges[:-1]
    if not keep.any():
        keep[:] = True
    return starts, edges, keep, bsec


def _kept(edges: np.ndarray, keep: np.ndarray) -> np.ndarray:
    return np.append(edges[:-1][keep], edges[-1])


def _group(r: pd.DataFrame, key: str, prices: dict[str, float]) -> pd.DataFrame:
    g = r.groupby(key, observed=True)
    out = pd.DataFrame({"runs": g.size(), "gpu_hours": g["gpu_hours"].sum(), "cost": g["cost"].sum()})
    return out


def compute(jobs: pd.DataFrame, site, since: datetime, until: datetime, *, capacity: pd.DataFrame | None = None,
            events: pd.DataFrame | None = None, epilog: pd.DataFrame | None = None, top: int = 10,
            notes: list[str] | None = None, history: pd.DataFrame | None = None, fabric=None,
            bad_rows: list | None = None, zone=None) -> Report:
    """The report over [since, until). `jobs` must hold every run active in the window (more is fine);
    `history` is `daily_usage` of earlier runs NOT in `jobs` (from the day cache), for forecast and budgets;
    `bad_rows` the inputs' rows skipped as bad (`badrows.BadRows`), counted in the summary and the notes.
    `zone` (`reports.zone.Zone`, None: UTC): since and until are its local times, the jobs' and epilog's times
    UTC instants; days are its local days."""
    from slurmtools.reports.badrows import FILE_NAME

    z = zone_mod.get(zone)
    notes = list(notes or [])
    bad_rows = [b for b in (bad_rows or []) if b.rows]
    notes += [f"{b.summary()}; the list: {FILE_NAME}" for b in bad_rows]
    lo = z.instant(since)
    hi = z.instant(until)
    all_runs = prepare(jobs, site, until, notes, z)
    cpu_only = cpu_only_runs(jobs, lo, hi)
    if cpu_only:
        notes.append(cpu_only_note(cpu_only))
    if epilog is not None and len(epilog):
        from slurmtools.reports.runmatch import align_to_runs

        # the run each record belongs to is sacct's run that had ended when its epilog ran, not the number the
        # node counted (slurmd skips the prolog on some quick restarts)
        epilog, moved = align_to_runs(epilog, all_runs)
        if moved:
            notes.append(f"{moved} epilog or decision-log record(s) placed on sacct's run by time: the run number "
                         "they carry differs")
    all_runs["win_gpu_hours"] = overlap_hours(all_runs, lo, hi)
    prices = {n: t.price_per_gpu_hour for n, t in (site.gpu_types.items() if site else [])}
    # categories no GPU run uses (CPU-only jobs' empty type) are not GPU types
    used_types = all_runs["gpu_type"].cat.remove_unused_categories().cat.categories
    unknown_types = sorted(set(map(str, used_types)) - set(prices) - {""})
    runs = all_runs[(all_runs["win_gpu_hours"] > 0) | ((all_runs["start_s"] >= lo) & (all_runs["start_s"] < hi))]
    runs = runs.reset_index(drop=True)
    runs["gpu_hours"] = runs["win_gpu_hours"]
    gcat = runs["gpu_type"].cat
    price_of = np.array([prices.get(str(c), 0.0) for c in gcat.categories] + [0.0])
    runs["cost"] = runs["gpu_hours"].to_numpy() * price_of[gcat.codes.to_numpy()]
    # GPU-hours of types the site file gives no price: the cost leaves them out, and says how many
    unpriced_of = np.array([str(c) not in prices for c in gcat.categories] + [False])
    unpriced_gh = float(runs["gpu_hours"].to_numpy()[unpriced_of[gcat.codes.to_numpy()]].sum())
    if unknown_types and len(runs):
        notes.append(f"GPU type(s) without a price in the site file, left out of the cost: {', '.join(unknown_types)}")

    # --- efficiency: epilog utilisation, else Slurm's gres/gpuutil
    util = runs["gpu_util_slurm"].to_numpy(dtype=float).copy()
    source = np.where(np.isnan(util), 0, 1).astype(np.int8)
    if epilog is not None and len(epilog):
        # the epilog's restart_count is the run's index among sacct -D's runs of the job
        ep = epilog.dropna(subset=["gpu_util_pct"]).drop_duplicates(["job_id_raw", "run"], keep="last")
        m = pd.Series(ep["gpu_util_pct"].to_numpy(dtype=float),
                      index=pd.MultiIndex.from_arrays([ep["job_id_raw"].to_numpy(), ep["run"].to_numpy()]))
        key = pd.MultiIndex.from_arrays([runs["job_id_raw"].to_numpy(), runs["run"].to_numpy()])
        got = m.reindex(key).to_numpy(dtype=float) if len(m) else np.full(len(runs), np.nan)
        have = ~np.isnan(got)
        util = np.where(have, got, util)
        source = np.where(have, 2, source).astype(np.int8)
    runs["gpu_util_pct"] = util
    runs["util_source"] = pd.Categorical.from_codes(source, ["", "slurm", "epilog"])
    runs["idle_gpu_hours"] = runs["gpu_hours"] * (1 - np.clip(util, 0, 100) / 100.0)

    total_gh = float(runs["gpu_hours"].sum())
    # --- capacity
    cap_total = cap_avail = None
    if capacity is not None and len(capacity):
        cap_total = float(capacity["gpu_hours"].sum())
        cap_avail = float(capacity["available_gpu_hours"].sum())

    def with_capacity(t: pd.DataFrame, cap: pd.Series | None) -> pd.DataFrame:
        if cap is None:
            t["available_gpu_hours"] = np.nan
        else:
            t = t.join(cap.rename("available_gpu_hours"), how="outer").fillna(
                {"runs": 0, "gpu_hours": 0.0, "cost": 0.0})
        t["utilization_pct"] = t["gpu_hours"] / t["available_gpu_hours"] * 100
        t["idle_gpu_hours"] = (t["available_gpu_hours"] - t["gpu_hours"]).clip(lower=0)
        return t

    tables: dict[str, pd.DataFrame] = {}
    cap_by_type = cap_by_part = cap_by_cluster = None
    if capacity is not None and len(capacity):
        cap_by_type = capacity.groupby("gpu_type")["available_gpu_hours"].sum()
        parts = capacity.assign(partition=capacity["partitions"].str.split(",")).explode("partition")
        cap_by_part = parts.groupby("partition")["available_gpu_hours"].sum()
        cluster_name = site.cluster_name if site else "(none)"
        cap_by_cluster = pd.Series({cluster_name: cap_avail})
    tables["by_cluster"] = with_capacity(_group(runs, "cluster", prices), cap_by_cluster)
    tables["by_partition"] = with_capacity(_group(runs, "partition", prices), cap_by_part)
    tables["by_gpu_type"] = with_capacity(_group(runs, "gpu_type", prices), cap_by_type)
    for key in ("tier", "account", "user"):
        t = _group(runs, key, prices)
        t["share_of_capacity_pct"] = t["gpu_hours"] / cap_avail * 100 if cap_avail else np.nan
        t["share_of_use_pct"] = t["gpu_hours"] / total_gh * 100 if total_gh else np.nan
        idle = runs.groupby(key, observed=True)["idle_gpu_hours"].sum(min_count=1)
        t["idle_gpu_hours"] = idle
        tables[f"by_{key}"] = t.sort_values("gpu_hours", ascending=False)

    # --- queue wait: runs that started inside the window
    started = runs[(runs["start_s"] >= lo) & (runs["start_s"] < hi)]
    elig = started["eligible_s"].to_numpy()
    sub = started["submit_s"].to_numpy()
    nat = np.iinfo(np.int64).min
    ref = np.where(elig != nat, elig, sub)
    wait_min = np.where(ref != nat, np.clip(started["start_s"].to_numpy() - ref, 0, None) / 60.0, np.nan)
    w = pd.DataFrame({"tier": started["tier"].to_numpy(), "gpus": started["gpus"].to_numpy(), "wait_min": wait_min})
    size = np.full(len(w), "", dtype=object)
    for a, b, lab in SIZE_BINS:
        size[(w["gpus"] >= a) & (w["gpus"] <= b)] = lab
    w["size"] = pd.Categorical(size, categories=[s[2] for s in SIZE_BINS])

    def wait_stats(key):
        g = w.dropna(subset=["wait_min"]).groupby(key, observed=True)["wait_min"]
        return pd.DataFrame({"runs": g.size(), "median_wait_min": g.median(), "p90_wait_min": g.quantile(0.9),
                             "mean_wait_min": g.mean()})

    tables["wait_by_tier"] = wait_stats("tier")
    tables["wait_by_size"] = wait_stats("size")
    wbin = pd.cut(w["wait_min"], WAIT_BINS_MIN, right=False, labels=WAIT_LABELS)
    wait_hist = pd.crosstab(wbin, w["tier"]).reindex(WAIT_LABELS, fill_value=0) if len(w) else \
        pd.DataFrame(index=WAIT_LABELS)

    # --- preemption and requeue: runs that ended inside the window
    ended = runs[(runs["end_s"] > lo) & (runs["end_s"] <= hi)]
    rq = ended["requeued"].to_numpy()
    pre = preempted_mask(ended, epilog)
    lostmask = pre | rq
    # lost: GPUs x (end - last checkpoint) where the epilog or the decision log knows the checkpoint, else the
    # whole run (an upper bound). A checkpoint before the run's start (resumed from, never saved again) loses it all.
    ck = np.full(len(ended), np.nan)
    if epilog is not None and len(epilog) and "last_checkpoint" in epilog.columns:
        ec = epilog.dropna(subset=["last_checkpoint"])
        if len(ec):
            cs = pd.Series(_secs(ec["last_checkpoint"].to_numpy()).astype(float),
                           index=pd.MultiIndex.from_arrays([ec["job_id_raw"].to_numpy(), ec["run"].to_numpy()]))
            cs = cs.groupby(level=[0, 1]).max()
            ck = cs.reindex(pd.MultiIndex.from_arrays([ended["job_id_raw"].to_numpy(),
                                                       ended["run"].to_numpy()])).to_numpy(dtype=float)
    known_ck = lostmask & ~np.isnan(ck)
    st, en, ng = ended["start_s"].to_numpy(), ended["end_s"].to_numpy(), ended["gpus"].to_numpy()
    c = np.clip(np.nan_to_num(ck), st, en)
    since_ck = np.clip(np.minimum(en, hi) - np.maximum(c, lo), 0, None) * ng / 3600.0
    lost = np.where(lostmask, np.where(known_ck, since_ck, ended["gpu_hours"].to_numpy()), 0.0)
    bound = lostmask & ~known_ck
    pt = pd.DataFrame({"tier": ended["tier"].to_numpy(), "preempted": pre, "requeued": rq, "lost": lost,
                       "known": known_ck, "bound": bound})
    g = pt.groupby("tier", observed=True)
    tables["preemption_by_tier"] = pd.DataFrame({"preempted_runs": g["preempted"].sum(),
                                                 "requeued_runs": g["requeued"].sum(),
                                                 "gpu_hours_lost": g["lost"].sum(),
                                                 "runs_with_checkpoint_time": g["known"].sum(),
                                                 "upper_bound": g["bound"].any()})
    li = np.flatnonzero(lostmask)
    li = li[np.argsort(-lost[li], kind="stable")][:top * 5]
    lr = ended.iloc[li]
    ltext = jobs.iloc[lr["row"].to_numpy()]
    tables["preempted_runs"] = pd.DataFrame({
        "job_id": ltext["job_id"].astype(str).to_numpy(), "run": lr["run"].to_numpy(),
        "tier": lr["tier"].astype(str).to_numpy(), "user": lr["user"].astype(str).to_numpy(),
        "state": lr["state"].astype(str).to_numpy(), "requeued": rq[li], "gpus": lr["gpus"].to_numpy(),
        "start": pd.to_datetime(z.to_local(st[li]), unit="s"), "end": pd.to_datetime(z.to_local(en[li]), unit="s"),
        "last_checkpoint": _local_or_nat(z, np.where(known_ck[li], ck[li], np.nan)),
        "gpu_hours": lr["gpu_hours"].to_numpy(), "gpu_hours_lost": lost[li], "upper_bound": bound[li]})

    # --- waste
    known = runs[~np.isnan(runs["gpu_util_pct"].to_numpy())]
    wasters = known[known["gpu_util_pct"] < WASTE_UTIL_PCT]
    # most idle first; ties in job, start and dump order, as the DuckDB engine orders them (a sort that is not
    # stable put tied runs in either order)
    wasters = wasters.iloc[np.lexsort((wasters["row"].to_numpy(), wasters["start_s"].to_numpy(),
                                       wasters["job_id_raw"].to_numpy(), -wasters["idle_gpu_hours"].to_numpy()))]
    w5 = wasters.head(top * 5)
    text = jobs.iloc[w5["row"].to_numpy()]
    tables["top_waste_jobs"] = pd.DataFrame({
        "job_id": text["job_id"].astype(str).to_numpy(), "user": w5["user"].astype(str).to_numpy(),
        "account": w5["account"].astype(str).to_numpy(), "tier": w5["tier"].astype(str).to_numpy(),
        "name": text["name"].astype(str).to_numpy(), "gpus": w5["gpus"].to_numpy(),
        "gpu_hours": w5["gpu_hours"].to_numpy(), "gpu_util_pct": w5["gpu_util_pct"].to_numpy(),
        "idle_gpu_hours": w5["idle_gpu_hours"].to_numpy(), "util_source": w5["util_source"].astype(str).to_numpy()})
    if not np.isnan(runs["gpu_mem_slurm_mb"].to_numpy(dtype=float)).all():
        # the site accounts gres/gpumem: GPU memory used per job (Slurm's TRESUsageInAve, the busiest step)
        tables["top_waste_jobs"]["gpu_mem_used_mb"] = w5["gpu_mem_slurm_mb"].to_numpy(dtype=float)
    if len(known):
        gk = known.groupby("user", observed=True)
        eff = pd.DataFrame({"gpu_hours_measured": gk["gpu_hours"].sum(), "idle_gpu_hours": gk["idle_gpu_hours"].sum(),
                            "runs_below_threshold": gk["gpu_util_pct"].apply(lambda s: int((s < WASTE_UTIL_PCT).sum()))})
        eff["mean_gpu_util_pct"] = (1 - eff["idle_gpu_hours"] / eff["gpu_hours_measured"]) * 100
        tables["waste_by_user"] = eff.sort_values("idle_gpu_hours", ascending=False)
    else:
        tables["waste_by_user"] = pd.DataFrame(columns=["gpu_hours_measured", "idle_gpu_hours",
                                                        "runs_below_threshold", "mean_gpu_util_pct"])

    # --- daily usage: the history (cache) plus everything loaded; feeds budgets and the forecast (local days)
    lo_l, hi_l = (int(x) for x in z.clock(np.array([lo, hi])))
    day0 = int(z.clock(np.array([all_runs["start_s"].min()]))[0]) // 86400 * 86400 if len(all_runs) else hi_l
    day0 = min(max(day0, hi_l - 400 * 86400), lo_l - lo_l % 86400)
    usage = daily_usage(all_runs, int(z.instants(np.array([day0]))[0]), hi, z)
    if history is not None and len(history):
        usage = pd.concat([history[history["day"] < pd.Timestamp(until)], usage], ignore_index=True)

    # --- budget burn: the calendar month that holds the window's last second
    last = pd.Timestamp(until) - pd.Timedelta(seconds=1)
    m0 = pd.Timestamp(year=last.year, month=last.month, day=1)
    m1 = m0 + pd.offsets.MonthBegin(1)
    mlo, mhi = z.instant(m0), hi
    frac = (mhi - mlo) / (z.instant(m1) - mlo)
    from slurmtools.policy.usage import uncharged_tiers

    free = list(uncharged_tiers(site)) if site else []
    mu = usage[usage["day"] >= m0]
    bg = mu.groupby("account")["gpu_hours"].sum()
    nc = mu[mu["tier"].isin(free)].groupby("account")["gpu_hours"].sum()
    rows = []
    accounts = dict(site.accounts) if site else {}
    for name in sorted(set(accounts) | set(bg.index[bg > 0])):
        used = float(bg.get(name, 0.0))
        charged = used - float(nc.get(name, 0.0))
        budget = accounts[name].monthly_gpu_hours if name in accounts else None
        proj = charged / frac if frac > 0 else np.nan
        rows.append({"account": name, "monthly_budget_gpu_hours": budget, "month_to_date_gpu_hours": used,
                     "not_charged_gpu_hours": used - charged, "charged_gpu_hours": charged,
                     "budget_used_pct": charged / budget * 100 if budget else np.nan,
                     "projected_month_gpu_hours": proj,
                     "projected_pct": proj / budget * 100 if budget else np.nan,
                     "status": ("no budget" if budget is None else "over" if charged > budget
                                else "on track to exceed" if proj > budget else "ok"),
                     "in_site_file": name in accounts})
    tables["budget"] = pd.DataFrame(rows).set_index("account") if rows else pd.DataFrame()
    first_data = usage["day"].min() if len(usage) else None
    if first_data is not None and first_data > m0 + pd.Timedelta(days=1):
        notes.append(f"budget burn covers usage from {first_data.date()} only (the month began {m0.date()}); "
                     f"pass a longer --history or keep the cache to see the whole month")

    # --- utilization over time by tier: buckets from the window's start on its zone's wall clock
    starts, edges, keep, _ = timeline_grid(z, lo, hi)
    if len(runs):
        timeline = bucket_matrix(runs, edges, "tier", starts).iloc[np.flatnonzero(keep)].copy()
    else:
        timeline = pd.DataFrame(index=pd.to_datetime(starts[keep], unit="s"))
    edges = _kept(edges, keep)
    if capacity is not None and len(capacity):
        gpus_total = capacity["gpus"].sum()
        from slurmtools.reports.capacity import down_seconds

        gp = dict(zip(capacity["node"], capacity["gpus"]))
        # never before the cluster's first record (ingest.load_capacity sets counted_from)
        c0 = int(pd.Timestamp(capacity["counted_from"].min()).value // 10**9) \
            if "counted_from" in capacity.columns else lo
        capcol = []
        for a_, b_ in zip(edges[:-1], edges[1:]):
            a_ = min(max(a_, c0), b_)
            d = down_seconds(events, pd.to_datetime(a_, unit="s"), pd.to_datetime(b_, unit="s")) \
                if events is not None and len(events) and b_ > a_ else {}
            capcol.append((gpus_total * (b_ - a_) - sum(gp.get(n, 0) * s for n, s in d.items())) / 3600.0)
        timeline["capacity_gpu_hours"] = capcol
    timeline.index.name = "bucket_start"

    # --- forecast per tier from whole days of history up to `until`
    forecasts: list[Forecast] = []
    full_days = usage[usage["day"] + pd.Timedelta(days=1) <= pd.Timestamp(until)]
    if len(full_days):
        daily = full_days.pivot_table(index="day", columns="tier", values="gpu_hours", aggfunc="sum", fill_value=0.0)
        daily = daily.reindex(pd.date_range(daily.index.min(), pd.Timestamp(until) - pd.Timedelta(days=1),
                                            freq="D"), fill_value=0.0)
        daily.index.name = "day"
        for tier in daily.columns:
            for h in (7, 30):
                forecasts.append(forecast(daily[tier], h, str(tier)))
        tables["demand_daily_by_tier"] = daily
    if forecasts:
        tables["forecast"] = pd.DataFrame([{"tier": f.series, "horizon_days": f.horizon_days, "method": f.method,
                                            "forecast_gpu_hours": f.total, "per_day": f.per_day,
                                            "backtest_wape_pct": f.wape_pct, "backtest_origins": f.origins}
                                           for f in forecasts])
    # --- placement: leaf switches spanned against the fewest that could hold the job (needs the fabric file)
    if fabric is not None and len(runs):
        tables.update(placement(runs, jobs, fabric, capacity))
    if fabric is not None:
        nv = nvlink_usage(runs, jobs, fabric, capacity, lo, hi)
        if nv is not None:
            tables["usage_by_nvlink_domain"] = nv

    summary = {
        "since": str(pd.Timestamp(since)), "until": str(pd.Timestamp(until)),
        "runs": int(len(runs)), "jobs": _jobs(runs),
        "users": int(runs["user"].nunique()), "accounts": int(runs["account"].nunique()),
        "gpu_hours": total_gh, "cost": float(runs["cost"].sum()), "unpriced_gpu_hours": unpriced_gh,
        "installed_gpu_hours": cap_total, "available_gpu_hours": cap_avail,
        "down_gpu_hours": (cap_total - cap_avail) if cap_total is not None else None,
        "utilization_pct": total_gh / cap_avail * 100 if cap_avail else None,
        "idle_capacity_gpu_hours": max(cap_avail - total_gh, 0.0) if cap_avail is not None else None,
        "preempted_runs": int(tables["preemption_by_tier"]["preempted_runs"].sum()),
        "requeued_runs": int(tables["preemption_by_tier"]["requeued_runs"].sum()),
        "gpu_hours_lost_to_preemption": float(tables["preemption_by_tier"]["gpu_hours_lost"].sum()),
        "lost_runs_with_checkpoint_time": int(known_ck.sum()),
        "gpu_hours_lost_is_upper_bound": bool(bound.any()),
        "gpu_hours_with_utilization": float(known["gpu_hours"].sum()),
        "idle_gpu_hours_allocated": float(known["idle_gpu_hours"].sum()),
        "median_wait_min": float(np.nanmedian(wait_min)) if np.isfinite(wait_min).any() else None,
        "p90_wait_min": float(np.nanpercentile(wait_min, 90)) if np.isfinite(wait_min).any() else None,
        # a run that was preempted (and killed by the warning signal, say) failed only because of it
        "failed_runs": int(((runs["state"] == "FAILED").to_numpy() & ~preempted_mask(runs, epilog)).sum()),
        # preempted, but the program ended on its own in the grace time (Slurm 22.05 may say TIMEOUT): not lost
        "runs_finished_in_preemption_grace": int(finished_in_grace(runs, epilog).sum()),
        # input rows skipped as bad (a torn line, a year-1 time...), listed with line and reason in FILE_NAME
        "bad_rows": sum(len(b.rows) for b in bad_rows), "bad_rows_file": FILE_NAME,
    }
    # --- energy (issue 13): kWh, cost and carbon from the epilog's GPU counters or Slurm's energy TRES
    from slurmtools.reports.energy import add_energy, windows_table

    etables, esummary, enotes = add_energy(runs, jobs, epilog, site, top)
    tables.update(etables)
    summary.update(esummary)
    notes += enotes
    windows = windows_table(epilog, set(runs["job_id_raw"].tolist()), zone if zone is None else z)
    if windows is not None:
        tables["slack_windows"] = windows
    return Report(since=since, until=until, site=site.name if site else "", cluster=site.cluster_name if site else "",
                  currency=site.currency if site else "", summary=summary, tables=tables, timeline=timeline,
                  wait_hist=wait_hist, forecasts=forecasts, notes=notes, uncharged_tiers=tuple(free),
                  bad_rows=bad_rows, zone=z)


def _local_or_nat(z, secs: np.ndarray) -> pd.DatetimeIndex:
    """Float epoch seconds (NaN: unknown) -> local times (NaT)."""
    secs = np.asarray(secs, dtype=float)
    known = ~np.isnan(secs)
    loc = z.to_local(np.where(known, secs, 0).astype(np.int64)).astype(float)
    return pd.to_datetime(np.where(known, loc, np.nan), unit="s")


def _reported(runs: pd.DataFrame, epilog: pd.DataFrame | None, column: str) -> np.ndarray:
    """Whether the decision log / epilog flagged each run (by job and run number) with `column`."""
    out = np.zeros(len(runs), dtype=bool)
    if epilog is None or not len(epilog) or column not in epilog.columns:
        return out
    rep = epilog[epilog[column].astype(bool)]
    if len(rep):
        keys = set(zip(rep["job_id_raw"].to_numpy().tolist(), rep["run"].to_numpy().tolist()))
        out = np.array([(j, r) in keys for j, r in zip(runs["job_id_raw"].to_numpy().tolist(),
                                                       runs["run"].to_numpy().tolist())], dtype=bool)
    return out


def preempted_mask(runs: pd.DataFrame, epilog: pd.DataFrame | None) -> np.ndarray:
    """Which runs ended by preemption: sacct says PREEMPTED or REQUEUED, or a later run of the same job shows it
    was requeued (whatever its own state: a program killed by the warning signal ends FAILED), or the decision
    log says the job reported a preemption and the run did not finish on its own. Not a run that ended for a node
    failure, nor one the decision log says was requeued at its time limit (self-requeued runs end REQUEUED either
    way), nor a job's last run that ended COMPLETED or TIMEOUT although Slurm had preempted it: its program
    finished during the grace time (Slurm 22.05 marks a job ending after the grace deadline TIMEOUT, measured in
    the churn test, issue 16), so nothing of it was lost."""
    state = runs["state"].astype(str)
    pre = state.isin(["PREEMPTED", "REQUEUED"]).to_numpy() | (runs["requeued"].to_numpy()
                                                               & ~state.isin(NODE_FAILURE).to_numpy())
    pre &= ~_reported(runs, epilog, "time_limit_reported")
    finished = state.isin(["COMPLETED", "TIMEOUT"]).to_numpy() & ~runs["requeued"].to_numpy()
    return pre | (_reported(runs, epilog, "preempted_reported") & ~finished)


def finished_in_grace(runs: pd.DataFrame, epilog: pd.DataFrame | None) -> np.ndarray:
    """A job's last run that Slurm preempted (the decision log says so) but whose program ended on its own during
    the grace time: COMPLETED, or TIMEOUT where the grace deadline had passed (Slurm 22.05)."""
    state = runs["state"].astype(str)
    return (_reported(runs, epilog, "preempted_reported") & state.isin(["COMPLETED", "TIMEOUT"]).to_numpy()
            & ~runs["requeued"].to_numpy())


def _leaf_share(nodelist: str, leaf_of: dict[str, str]) -> dict[str, float]:
    from slurmtools.hostlist import expand

    try:
        hosts = expand(nodelist) if ("[" in nodelist or "," in nodelist) else [nodelist]
    except ValueError:
        return {}
    hosts = [h for h in hosts if h in leaf_of]
    out: dict[str, float] = {}
    for h in hosts:
        out[leaf_of[h]] = out.get(leaf_of[h], 0.0) + 1.0 / len(hosts)
    return out


def placement(runs: pd.DataFrame, jobs: pd.DataFrame, fabric, capacity: pd.DataFrame | None) -> dict:
    """Runs spanning more leaf switches than their node count needs, and allocated vs idle GPU-hours per leaf.

    A run's GPU-hours are spread evenly over its hosts. Work is done once per distinct NodeList string."""
    leaf_of = {h: leaf.name for leaf in fabric.leaves.values() for h in leaf.hosts}
    biggest = max((len(leaf.hosts) for leaf in fabric.leaves.values()), default=1)
    nl = jobs["nodelist"].iloc[runs["row"].to_numpy()].astype("category")
    cats = list(nl.cat.categories)
    shares = [_leaf_share(str(c), leaf_of) for c in cats]
    codes = nl.cat.codes.to_numpy()
    gh = runs["gpu_hours"].to_numpy()
    per_leaf: dict[str, float] = {}
    by_code = np.bincount(codes[codes >= 0], weights=gh[codes >= 0], minlength=len(cats))
    for i, sh in enumerate(shares):
        for leaf, f in sh.items():
            per_leaf[leaf] = per_leaf.get(leaf, 0.0) + by_code[i] * f
    nleaves = np.array([len(sh) for sh in shares] + [0])[codes]
    nhosts = np.array([_hosts(str(c)) if sh else 0 for c, sh in zip(cats, shares)] + [0])[codes]
    needed = np.maximum(1, -(-nhosts // biggest))
    spread = (nleaves > needed) & (nhosts > 1)
    multi = nhosts > 1
    t = pd.DataFrame({"tier": runs["tier"].astype(str).to_numpy(), "multi": multi, "spread": spread,
                      "gh": np.where(spread, gh, 0.0)})
    g = t.groupby("tier")
    out = {"placement_by_tier": pd.DataFrame({"multi_node_runs": g["multi"].sum(),
                                              "runs_on_more_leaves_than_needed": g["spread"].sum(),
                                              "their_gpu_hours": g["gh"].sum()})}
    rows = []
    cap_leaf = {}
    if capacity is not None and len(capacity):
        for node, avail in zip(capacity["node"], capacity["available_gpu_hours"]):
            if node in leaf_of:
                cap_leaf[leaf_of[node]] = cap_leaf.get(leaf_of[node], 0.0) + float(avail)
    for leaf in fabric.leaves:
        used = per_leaf.get(leaf, 0.0)
        avail = cap_leaf.get(leaf, np.nan)
        rows.append({"leaf": leaf, "gpu_hours": used, "available_gpu_hours": avail,
                     "idle_gpu_hours": max(avail - used, 0.0) if avail == avail else np.nan,
                     "utilization_pct": used / avail * 100 if avail else np.nan})
    out["usage_by_leaf"] = pd.DataFrame(rows).set_index("leaf")
    return out


def nvlink_usage(runs: pd.DataFrame, jobs: pd.DataFrame, fabric, capacity: pd.DataFrame | None, lo: int,
                 hi: int) -> pd.DataFrame | None:
    """Per NVLink domain of the topology graph: GPUs, capacity and available GPU-hours in [lo, hi), allocated and
    idle GPU-hours. None when the fabric has no NVLink domain (PCIe-only hosts).

    A run's GPU-hours are spread evenly over its hosts (GPUs per node = GPUs / nodes); a host's share goes to the
    domains holding its GPUs, by the number of its GPUs in each. Available = capacity less the hosts' down/drain
    time (from the capacity table, where there is one); idle = available - allocated."""
    from slurmtools.topology.build_site import build_site  # networkx: only when a fabric is in play
    from slurmtools.topology.queries import domain_gpus, nvlink_domains

    t = build_site(fabric)
    domains = nvlink_domains(t)
    if not domains:
        return None
    in_dom: dict[str, dict[str, int]] = {}  # host -> domain -> its GPUs there
    for d in domains:
        for g in domain_gpus(t, d.name):
            in_dom.setdefault(g.host, {}).setdefault(d.name, 0)
            in_dom[g.host][d.name] += 1
    alloc = {d.name: 0.0 for d in domains}
    if len(runs):
        nl = jobs["nodelist"].iloc[runs["row"].to_numpy()].astype("category")
        codes = nl.cat.codes.to_numpy()
        gh = runs["gpu_hours"].to_numpy()
        by_code = np.bincount(codes[codes >= 0], weights=gh[codes >= 0], minlength=len(nl.cat.categories))
        for i, c in enumerate(nl.cat.categories):
            if by_code[i] == 0:
                continue
            hosts = _host_list(str(c))
            for h in hosts:
                doms = in_dom.get(h)
                if not doms:
                    continue
                n = sum(doms.values())
                for d, k in doms.items():
                    alloc[d] += by_code[i] / len(hosts) * k / n
    hours = (hi - lo) / 3600.0
    avail_of: dict[str, tuple[int, float]] = {}
    if capacity is not None and len(capacity):
        avail_of = {n: (int(g), float(a)) for n, g, a in
                    zip(capacity["node"], capacity["gpus"], capacity["available_gpu_hours"])}
    rows = []
    for d in domains:
        cap = d.gpus * hours
        avail = 0.0
        for h in d.hosts:
            k = in_dom[h][d.name]
            g, a = avail_of.get(h, (0, np.nan))
            avail += a * k / g if g else k * hours
        used = alloc[d.name]
        rows.append({"nvlink_domain": d.name, "hosts": len(d.hosts), "gpus": d.gpus, "capacity_gpu_hours": cap,
                     "available_gpu_hours": avail, "allocated_gpu_hours": used,
                     "idle_gpu_hours": max(avail - used, 0.0),
                     "utilization_pct": used / avail * 100 if avail else np.nan})
    return pd.DataFrame(rows).set_index("nvlink_domain")


def _host_list(nodelist: str) -> list[str]:
    from slurmtools.hostlist import expand

    try:
        return expand(nodelist) if ("[" in nodelist or "," in nodelist) else [nodelist]
    except ValueError:
        return []


def _hosts(nodelist: str) -> int:
    from slurmtools.hostlist import expand

    try:
        return len(expand(nodelist)) if ("[" in nodelist or "," in nodelist) else 1
    except ValueError:
        return 0
