"""GPU energy in the report: kWh, its cost and carbon per job run, user, account, tier and GPU type, the energy
of GPUs allocated but idle apart, and the training-loop helper's slack windows. Pure: no I/O.

Where the numbers come from (docs/telemetry.md):
- The epilog's record of each run and node: per GPU the NVML energy counter (mJ) at the run's start (the
  prolog's mark) and end. A run's GPU energy is the sum of end - start over the GPUs whose both counters are
  known (`record_energy`), exactly as recorded; GPUs whose energy is unknown are counted, never guessed.
- Slurm's energy TRES of the allocation (sacct, `energy_slurm_j`), where the site gathers energy: used for a
  run only when the epilog has no GPU energy for it (its scope is the site's AcctGatherEnergyType: a node's
  IPMI reading covers more than the GPUs), and said so per run (`energy_source`).
- Idle: a GPU with known energy and an accounting utilisation at or below IDLE_GPU_UTIL_PCT counts its whole
  energy as idle; unknown where the GPU's utilisation is unknown.
A run only partly inside the report's window counts the share of its energy that its in-window GPU-hours are
of its whole GPU-hours (a counter is read only at the run's start and end); runs wholly inside count exactly.
Price (`[energy] price_per_kwh`, the site's currency) and carbon factor (`carbon_kg_per_kwh`) are optional:
without them the cost and CO2e columns are left out, not zero.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd

#: a GPU at or below this accounting utilisation (%) over the run sat idle: its energy counts as idle
#: (the same default as `[advise] gpu_idle_pct`)
IDLE_GPU_UTIL_PCT = 5.0
MJ_PER_KWH = 3.6e9
J_PER_KWH = 3.6e6
#: NVML's energy counter (nvmlDeviceGetTotalEnergyConsumption) is an unsigned 64-bit count of mJ
MAX_COUNTER_MJ = 2**64 - 1
WINDOW_KEYS = ("mode", "start_step", "end_step", "start_time", "end_time", "why")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def record_energy(d: dict) -> dict:
    """One epilog record's GPU energy: energy_mj (sum over GPUs with both counters, NaN when none), idle_energy_mj
    (NaN when a GPU with energy has no utilisation), energy_gpus (known), energy_unknown_gpus.
    Raises ValueError naming the field when `gpu_energy` holds what the epilog never writes."""
    ge = d.get("gpu_energy")
    out = {"energy_mj": np.nan, "idle_energy_mj": np.nan, "energy_gpus": 0, "energy_unknown_gpus": 0}
    if ge is None:
        return out
    if not isinstance(ge, list):
        raise ValueError("field gpu_energy: expected a list of objects")
    util: dict = {}
    acc = d.get("gpu_accounting")
    if isinstance(acc, list):
        util = {g.get("gpu"): g.get("gpu_util_pct") for g in acc if isinstance(g, dict)}
    total = idle = 0
    known = unknown = 0
    idle_known = True
    seen: set[str] = set()
    for g in ge:
        if not isinstance(g, dict):
            raise ValueError("field gpu_energy: expected a list of objects")
        if g.get("gpu") is not None:  # a GPU listed twice would count its energy twice
            if repr(g["gpu"]) in seen:
                raise ValueError(f"field gpu_energy: GPU {g['gpu']!r} listed twice")
            seen.add(repr(g["gpu"]))
        s, e = g.get("start_mj"), g.get("end_mj")
        for key, v in (("start_mj", s), ("end_mj", e)):
            # NVML's counter is an unsigned 64-bit count of mJ: more is no reading of it
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_COUNTER_MJ):
                raise ValueError(f"field gpu_energy.{key}: {v!r} is not an energy counter (mJ)")
        if s is None or e is None or e < s:
            unknown += 1
            continue
        known += 1
        total += e - s
        u = util.get(g.get("gpu"))
        if not _number(u):
            idle_known = False
        elif u <= IDLE_GPU_UTIL_PCT:
            idle += e - s
    out["energy_gpus"], out["energy_unknown_gpus"] = known, unknown
    if known:
        out["energy_mj"] = float(total)
        out["idle_energy_mj"] = float(idle) if idle_known else np.nan
    return out


def record_windows(d: dict) -> list[dict] | None:
    """The slack windows an epilog record carries (already checked by the epilog), the fields the report shows.
    Raises ValueError naming the field for a time or step the epilog never writes (outside RECORD_T_MIN to
    RECORD_T_MAX, past int64; the epilog leaves such a value null): the windows table could not show it, and the
    report stopped on it."""
    from slurmtools.hooks.common import MAX_STEP, RECORD_T_MAX, RECORD_T_MIN

    ws = d.get("slack_windows")
    if not isinstance(ws, list):
        return None
    out = [{k: w.get(k) for k in WINDOW_KEYS} for w in ws if isinstance(w, dict) and isinstance(w.get("mode"), str)]
    for w in out:
        for k in ("start_time", "end_time"):
            v = w[k]
            if v is not None and (not _number(v) or not RECORD_T_MIN <= v <= RECORD_T_MAX):
                raise ValueError(f"field slack_windows.{k}: {v!r} is not epoch seconds of 1971-2199")
        for k in ("start_step", "end_step"):
            v = w[k]
            if v is not None and (type(v) is not int or not -MAX_STEP - 1 <= v <= MAX_STEP):
                raise ValueError(f"field slack_windows.{k}: {v!r} is not a step (a whole number of int64)")
    return out or None


def merge_energy(m: dict, r: dict) -> None:
    """Add node record `r`'s energy fields into run `m` (records of one run's nodes): energies summed over the
    nodes that know theirs; idle energy unknown once a node with energy has none."""
    for k in ("energy_gpus", "energy_unknown_gpus"):
        m[k] = m[k] + r[k]
    if np.isnan(r["energy_mj"]):
        return
    if np.isnan(m["energy_mj"]):
        m["energy_mj"], m["idle_energy_mj"] = r["energy_mj"], r["idle_energy_mj"]
        return
    m["energy_mj"] = m["energy_mj"] + r["energy_mj"]
    m["idle_energy_mj"] = m["idle_energy_mj"] + r["idle_energy_mj"]  # NaN stays NaN: some GPU's idle unknown


def add_energy(runs: pd.DataFrame, jobs: pd.DataFrame, epilog: pd.DataFrame | None, site, top: int = 10
               ) -> tuple[dict[str, pd.DataFrame], dict, list[str]]:
    """Energy tables, summary figures and notes for the report's runs (`metrics.compute`'s frame: job_id_raw,
    run, user, account, tier, gpu_type, gpus, gpu_hours, row -> `jobs`)."""
    price = getattr(getattr(site, "energy", None), "price_per_kwh", None)
    carbon = getattr(getattr(site, "energy", None), "carbon_kg_per_kwh", None)
    n = len(runs)
    gpu_mj = np.full(n, np.nan)
    idle_mj = np.full(n, np.nan)
    unknown_gpus = np.zeros(n, dtype=np.int64)
    if epilog is not None and len(epilog) and "energy_mj" in epilog.columns:
        ep = epilog.drop_duplicates(["job_id_raw", "run"], keep="last")
        idx = pd.MultiIndex.from_arrays([ep["job_id_raw"].to_numpy(), ep["run"].to_numpy()])
        key = pd.MultiIndex.from_arrays([runs["job_id_raw"].to_numpy(), runs["run"].to_numpy()])

        def pick(col, fill):
            return pd.Series(ep[col].to_numpy(), index=idx).reindex(key).to_numpy(dtype=float) if len(ep) else \
                np.full(n, fill)

        gpu_mj = pick("energy_mj", np.nan)
        idle_mj = pick("idle_energy_mj", np.nan)
        unknown_gpus = np.nan_to_num(pick("energy_unknown_gpus", 0)).astype(np.int64)
    slurm_j = jobs["energy_slurm_j"].to_numpy(dtype=float)[runs["row"].to_numpy()] \
        if "energy_slurm_j" in jobs.columns and n else np.full(n, np.nan)
    # the in-window share of each run (1 for a run wholly inside the window)
    whole_h = (runs["end_s"].to_numpy() - runs["start_s"].to_numpy()) * runs["gpus"].to_numpy() / 3600.0
    share = np.where(whole_h > 0, np.clip(runs["gpu_hours"].to_numpy() / np.where(whole_h > 0, whole_h, 1), 0, 1),
                     1.0)
    from_gpu = ~np.isnan(gpu_mj)
    from_slurm = ~from_gpu & ~np.isnan(slurm_j)
    kwh = np.where(from_gpu, gpu_mj / MJ_PER_KWH, np.where(from_slurm, slurm_j / J_PER_KWH, np.nan)) * share
    idle_kwh = np.where(from_gpu, idle_mj / MJ_PER_KWH, np.nan) * share
    e = pd.DataFrame({"job_id_raw": runs["job_id_raw"].to_numpy(), "run": runs["run"].to_numpy(),
                      "user": runs["user"].astype(str).to_numpy(), "account": runs["account"].astype(str).to_numpy(),
                      "tier": runs["tier"].astype(str).to_numpy(), "gpu_type": runs["gpu_type"].astype(str).to_numpy(),
                      "gpus": runs["gpus"].to_numpy(), "energy_kwh": kwh, "idle_energy_kwh": idle_kwh,
                      "energy_source": np.where(from_gpu, "gpu counters", np.where(from_slurm, "slurm", "")),
                      "unknown": np.isnan(kwh) | (unknown_gpus > 0)})
    if price is not None:
        e["energy_cost"] = e["energy_kwh"] * price
    if carbon is not None:
        e["co2e_kg"] = e["energy_kwh"] * carbon
    extra = [c for c in ("energy_cost", "co2e_kg") if c in e.columns]
    tables: dict[str, pd.DataFrame] = {}
    notes: list[str] = []
    if n and not np.isnan(kwh).all():
        for key in ("user", "account", "tier", "gpu_type"):
            g = e.groupby(key)
            t = pd.DataFrame({"runs": g.size(), "energy_kwh": g["energy_kwh"].sum(min_count=1),
                              "idle_energy_kwh": g["idle_energy_kwh"].sum(min_count=1)})
            for c in extra:
                t[c] = g[c].sum(min_count=1)
            t["runs_energy_unknown"] = g["unknown"].sum().astype(np.int64)
            tables[f"energy_by_{key}"] = t.sort_values("energy_kwh", ascending=False)
        known = e[~np.isnan(kwh)].sort_values("energy_kwh", ascending=False).head(top * 5)
        text = jobs.iloc[runs["row"].to_numpy()[known.index.to_numpy()]]
        per = pd.DataFrame({"job_id": text["job_id"].astype(str).to_numpy(), "run": known["run"].to_numpy(),
                            "user": known["user"].to_numpy(), "account": known["account"].to_numpy(),
                            "tier": known["tier"].to_numpy(), "gpu_type": known["gpu_type"].to_numpy(),
                            "gpus": known["gpus"].to_numpy(), "energy_kwh": known["energy_kwh"].to_numpy(),
                            "idle_energy_kwh": known["idle_energy_kwh"].to_numpy(),
                            "energy_source": known["energy_source"].to_numpy()})
        for c in extra:
            per[c] = known[c].to_numpy()
        tables["energy_jobs"] = per
    unknown_runs = int(e["unknown"].sum()) if n else 0
    if unknown_runs and tables:
        notes.append(f"energy unknown for {unknown_runs} run(s) or some of their GPUs (no prolog mark of the run, a "
                     "counter reset, GPUs without the counter, no epilog record): not counted")
    total = float(np.nansum(kwh)) if n and not np.isnan(kwh).all() else None
    summary = {
        "energy_kwh": total,
        "energy_kwh_gpu_counters": float(np.nansum(np.where(from_gpu, kwh, np.nan))) if from_gpu.any() else None,
        "energy_kwh_slurm": float(np.nansum(np.where(from_slurm, kwh, np.nan))) if from_slurm.any() else None,
        "idle_energy_kwh": float(np.nansum(idle_kwh)) if (~np.isnan(idle_kwh)).any() else None,
        "energy_cost": total * price if total is not None and price is not None else None,
        "co2e_kg": total * carbon if total is not None and carbon is not None else None,
        "price_per_kwh": price, "carbon_kg_per_kwh": carbon,
        "runs_with_energy": int((~np.isnan(kwh)).sum()), "runs_energy_unknown": unknown_runs,
    }
    return tables, summary, notes


def windows_table(epilog: pd.DataFrame | None, jobs_of: set[int] | None = None, zone=None) -> pd.DataFrame | None:
    """One row per slack window of the epilog's runs (a window recorded by several nodes or runs once), or None
    when no record has any. `jobs_of`: only these jobs (the report's). Times are shown as local times of `zone`
    (the report's), else of this process."""
    if epilog is None or not len(epilog) or "slack_windows" not in epilog.columns:
        return None
    rows, seen = [], set()
    for job, ws in zip(epilog["job_id_raw"].to_numpy(), epilog["slack_windows"].to_numpy()):
        if not isinstance(ws, list) or (jobs_of is not None and int(job) not in jobs_of):
            continue
        for w in ws:
            k = (int(job), w.get("start_step"), w.get("start_time"), w.get("mode"))
            if k in seen:
                continue
            seen.add(k)
            rows.append({"job_id": str(int(job)), **w})
    if not rows:
        return None
    t = pd.DataFrame(rows, columns=["job_id", *WINDOW_KEYS])
    for c in ("start_time", "end_time"):  # local time, as the report shows every time
        if zone is None:
            t[c] = pd.to_datetime([pd.Timestamp(datetime.fromtimestamp(v)).floor("s") if _number(v) else pd.NaT
                                   for v in t[c]])
        else:
            t[c] = pd.to_datetime([zone.local(int(np.floor(v))) if _number(v) else pd.NaT for v in t[c]])
    for c in ("start_step", "end_step"):
        t[c] = pd.to_numeric(t[c], errors="coerce").astype("Int64")
    return t.sort_values(["job_id", "start_time", "start_step"], kind="stable").reset_index(drop=True)
