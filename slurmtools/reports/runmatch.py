"""Epilog records and decision-log events matched to sacct's rows of job runs by time, not by run number.

Why: a run's number as a node hook counted it can be wrong (slurmd skips the prolog on some quick restarts, and
records written before issue 16 counted from the prolog's marks), while `sacct -D` prints one row per run with
Slurm's own Start and End. A record belongs to the run that had ended when its epilog ran: run k's epilog
starts after run k's End and finishes before run k+1 can start, so the run with the latest End at or before
the record's time is the one. Rows without a usable time keep the number they carry.
Pure: frames in, frames out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: seconds a record's time may precede sacct's End of its run (sacct rounds to whole seconds)
END_SLACK_S = 2
#: the longest a node epilog can run after its run ended and still be matched to it (PrologEpilogTimeout-sized)
MAX_EPILOG_DELAY_S = 3600


def _secs(col: pd.Series) -> np.ndarray:
    """datetime64 column -> float epoch seconds, NaN where missing."""
    v = col.to_numpy(dtype="datetime64[s]")
    out = v.astype(np.int64).astype(float)
    out[pd.isna(v)] = np.nan
    return out


def align_to_runs(records: pd.DataFrame, runs: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """`records` (job_id_raw, run, start, end, ...) with `run` replaced by the index of sacct's run each belongs
    to (`runs`: job_id_raw, run, start_s, end_s), rows that land on one run merged (GPUs and utilisation of one
    run's nodes are already merged per record key; a decision-log row and an epilog row of one run become one).
    Returns (frame, how many rows changed run)."""
    if records is None or not len(records) or runs is None or not len(runs):
        return records, 0
    rec = records.reset_index(drop=True)
    if "end" not in rec.columns and "start" not in rec.columns:
        return records, 0  # nothing to place by time: the run numbers stand
    nat = pd.Series(pd.NaT, index=rec.index, dtype="datetime64[s]")
    t = _secs(rec["end"] if "end" in rec.columns else nat)
    s = _secs(rec["start"] if "start" in rec.columns else nat)
    key = np.where(np.isnan(t), s, t)  # the epilog's time; a start where only that is known
    by_start = np.isnan(t) & ~np.isnan(s)
    ok = ~np.isnan(key)
    if not ok.any():
        return records, 0
    left = pd.DataFrame({"i": np.flatnonzero(ok), "job_id_raw": rec["job_id_raw"].to_numpy()[ok],
                         "k": (key[ok] + np.where(by_start[ok], 0, END_SLACK_S)).astype(np.int64)})
    r = runs[["job_id_raw", "run", "start_s", "end_s"]]
    got = np.full(len(rec), -1, dtype=np.int64)
    for col, rows in (("end_s", ~by_start[ok]), ("start_s", by_start[ok])):
        lf = left[rows]
        if not len(lf):
            continue
        right = r.rename(columns={col: "k"})[["job_id_raw", "run", "k"]].astype({"k": np.int64})
        m = pd.merge_asof(lf.sort_values("k"), right.sort_values("k"), on="k", by="job_id_raw",
                          direction="backward")
        m = m.dropna(subset=["run"])
        if col == "end_s":  # an epilog long after every run of the job ended is not one of these runs
            ends = dict(zip(zip(r["job_id_raw"], r["run"]), r["end_s"]))
            keep = [key[i] - ends[(j, int(n))] <= MAX_EPILOG_DELAY_S
                    for i, j, n in zip(m["i"], m["job_id_raw"], m["run"])]
            m = m[np.array(keep, dtype=bool)] if len(m) else m
        got[m["i"].to_numpy()] = m["run"].to_numpy(dtype=np.int64)
    new_run = np.where(got >= 0, got, rec["run"].to_numpy(dtype=np.int64))
    changed = int((new_run != rec["run"].to_numpy(dtype=np.int64)).sum())
    rec = rec.assign(run=new_run.astype(rec["run"].dtype))
    if not rec.duplicated(["job_id_raw", "run"]).any():
        return rec, changed
    return _merge_same_run(rec), changed


def _merge_same_run(rec: pd.DataFrame) -> pd.DataFrame:
    """Rows that now name one run -> one row: GPUs and nodes of epilog rows summed, utilisation weighted by
    GPUs, memory, checkpoint and end the latest, start the earliest, the reported flags any."""
    g = rec.assign(_w=rec["gpus"].where(rec["gpu_util_pct"].notna(), 0).astype(float),
                   _u=(rec["gpu_util_pct"].astype(float) * rec["gpus"]).where(rec["gpu_util_pct"].notna(), 0.0))
    agg = {c: "first" for c in rec.columns if c not in ("job_id_raw", "run")}
    agg.update({"gpus": "sum", "nodes": "sum", "gpu_mem_mb": "max", "last_checkpoint": "max", "start": "min",
                "end": "max", "_w": "sum", "_u": "sum"})
    for c in ("preempted_reported", "time_limit_reported"):
        if c in rec.columns:
            agg[c] = "any"
    for c in ("energy_mj", "idle_energy_mj"):  # each row's GPUs' energy: summed, unknown only if all are
        if c in rec.columns:
            agg[c] = lambda v: v.sum(min_count=1)
    for c in ("energy_gpus", "energy_unknown_gpus"):
        if c in rec.columns:
            agg[c] = "sum"
    agg = {c: f for c, f in agg.items() if c in g.columns}
    out = g.groupby(["job_id_raw", "run"], as_index=False, sort=False).agg(agg)
    util = np.where(out["_w"] > 0, out["_u"] / out["_w"].where(out["_w"] > 0, 1), np.nan)
    # a run whose utilisation is known only from rows without GPUs counted keeps their plain mean
    plain = rec.groupby(["job_id_raw", "run"], sort=False)["gpu_util_pct"].mean().to_numpy()
    out["gpu_util_pct"] = np.where(np.isnan(util), plain, util)
    out = out.drop(columns=["_w", "_u"])
    return out[list(rec.columns)].astype(rec.dtypes.to_dict())
