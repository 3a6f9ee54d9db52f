"""Reading what runs asked for and used (the I/O side of advise): one sacct dump, read by the report's reader for
the runs, plus the fields only advise needs (CPUs, memory, time limit, TotalCPU, MaxRSS), and the epilog's
per-GPU records. Policy-free: `rules` decides what the numbers mean.

The report's reader (`reports.sacct.read_sacct`) keeps GPU counts, times and Slurm's gres/gpuutil but not the
fields below, so they are read here from the same text through the shared parsable-dump splitter, and joined to
its runs by (JobIDRaw, Start). The epilog's reader averages utilisation over a run's GPUs; advise needs it per GPU
(how many GPUs were busy) with the memory controller's share, so records are read here with the report's own
record parser (`reports.epilog.parse_record`), which decides each record's job and run.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from slurmtools.advise.model import RunUse
from slurmtools.errors import ParseError, SlurmError

#: sacct fields advise reads beyond the report's (`reports.sacct.SACCT_FIELDS`)
ADVISE_FIELDS = ("Timelimit", "TotalCPU", "MaxRSS")
#: states of runs that are over (their time and use are final)
_DONE = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "REQUEUED",
         "BOOT_FAIL", "DEADLINE"}


def sacct_fields() -> tuple[str, ...]:
    """The `sacct --format` list advise asks for: the report's fields, then its own."""
    from slurmtools.reports.sacct import SACCT_FIELDS

    return tuple(SACCT_FIELDS) + tuple(f for f in ADVISE_FIELDS if f not in SACCT_FIELDS)


def dump(since: datetime, until: datetime, *, sacct_file: str | Path | None = None, backend=None
         ) -> tuple[bytes, str]:
    """(the dump's text, its name): a saved `sacct --parsable2` dump, or sacct asked through the backend."""
    if sacct_file is not None:
        try:
            return Path(sacct_file).read_bytes(), str(sacct_file)
        except OSError as exc:
            raise ParseError(str(sacct_file), None, f"cannot read: {exc.strerror or exc}") from None
    if backend is None or getattr(backend, "accounting_dump", None) is None:
        raise SlurmError("sacct", "no accounting source: give --sacct-file PATH or run where sacct works")
    return backend.accounting_dump(since, until, list(sacct_fields())).encode(), "sacct"


def load_runs(since: datetime, until: datetime, *, sacct_file: str | Path | None = None, backend=None,
              epilog_dir: str | Path | None = None) -> tuple[list[RunUse], list[str]]:
    """(finished runs that ended in [since, until), notes saying what the sources lacked)."""
    import pandas as pd

    from slurmtools.reports.sacct import read_sacct

    text, source = dump(since, until, sacct_file=sacct_file, backend=backend)
    acc = read_sacct(text, text=True, source=source)
    notes = list(acc.notes)
    if acc.bad is not None and acc.bad.rows:
        notes.append(f"{len(acc.bad.rows)} unreadable sacct row(s) skipped (first: line {acc.bad.rows[0].line}: "
                     f"{acc.bad.rows[0].reason})")
    extra, missing = _extra_fields(text, source)
    if missing:
        notes.append(f"the sacct dump has no {', '.join(missing)}: what depends on them is not judged "
                     f"(dump with `sacct --parsable2 --format={','.join(sacct_fields())}`)")
    detail, enotes = gpu_detail(epilog_dir) if epilog_dir is not None else ({}, [])
    notes += enotes
    jobs = acc.jobs
    jobs = jobs[jobs["start"].notna()].reset_index(drop=True)
    # run index: the n-th run of a job by start, as the report counts runs
    run_no = jobs.groupby("job_id_raw", sort=False).cumcount().to_numpy()
    lo, hi = pd.Timestamp(since), pd.Timestamp(until)
    out = []
    for i, r in enumerate(jobs.itertuples(index=False)):
        if str(r.state) not in _DONE or pd.isna(r.end) or not lo <= r.end < hi:
            continue
        start = pd.Timestamp(r.start)
        e = extra.get((int(r.job_id_raw), start.isoformat()), {})
        nodes = max(int(r.nnodes), 1)
        utils, mem_utils, gmem = detail.get((int(r.job_id_raw), int(run_no[i])), ((), (), None))
        slurm_util = None if pd.isna(r.gpu_util_slurm) else float(r.gpu_util_slurm)
        if gmem is None and not pd.isna(r.gpu_mem_slurm_mb):
            gmem = float(r.gpu_mem_slurm_mb)
        out.append(RunUse(
            job_id=int(r.job_id_raw), run=int(run_no[i]), user=str(r.user), account=str(r.account),
            name=str(r.name), state=str(r.state), partition=str(r.partition), gpu_type=str(r.gpu_type),
            gpus=int(r.gpus), nodes=nodes, cpus=int(e.get("cpus") or 0),
            mem_mb=(e["mem_mb"] / nodes) if e.get("mem_mb") else None,
            time_limit_s=e.get("time_limit_s"), elapsed_s=int((pd.Timestamp(r.end) - start).total_seconds()),
            total_cpu_s=e.get("total_cpu_s"), max_rss_mb=e.get("max_rss_mb"),
            gpu_util=tuple(utils), gpu_mem_util=tuple(mem_utils), gpu_mem_mb=gmem, slurm_gpu_util=slurm_util))
    return out, notes


def _extra_fields(text: bytes, source: str) -> tuple[dict, list[str]]:
    """(JobIDRaw, Start) -> {cpus (AllocTRES), mem_mb (ReqTRES: requested, all nodes), time_limit_s, total_cpu_s,
    max_rss_mb}, and the advise fields the dump lacks. A row that cannot be split or read is left to the report's reader, which
    already skipped and listed it; its run just lacks these facts."""
    from slurmtools.slurm.parsable import Splitter, read_header
    from slurmtools.slurm.tres import parse_mem_mb, parse_tres

    lines = text.decode(errors="replace").split("\n")
    header = read_header(lines[0], source)
    low = header.lower()
    idx = {n: i for i, n in enumerate(low)}
    id_col = idx.get("jobidraw", idx.get("jobid"))
    missing = [f for f in ("JobIDRaw",) + ADVISE_FIELDS if f.lower() not in idx]
    if id_col is None or "start" not in idx:
        return {}, missing
    split = Splitter(header, source)

    def get(vals, name):
        i = idx.get(name)
        v = vals[i].strip() if i is not None and i < len(vals) else ""
        return None if v in ("", "Unknown", "None", "(null)", "N/A") else v

    allocs: dict[tuple[int, str], dict] = {}
    steps: dict[int, list[tuple[str, float]]] = {}
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            vals = split.split(line, n)
            jid, start = vals[id_col].strip(), get(vals, "start")
            if start is None:
                continue
            if "." in jid:
                rss = get(vals, "maxrss")
                if rss is not None and jid.split(".")[0].isdigit():
                    steps.setdefault(int(jid.split(".")[0]), []).append((start, parse_mem_mb(rss)))
                continue
            if not jid.isdigit():
                continue
            allocs[(int(jid), start)] = {
                "cpus": parse_tres(get(vals, "alloctres")).cpu or None,
                "mem_mb": parse_tres(get(vals, "reqtres")).mem_mb or None,
                "time_limit_s": _limit(get(vals, "timelimit")),
                "total_cpu_s": _cpu_time(get(vals, "totalcpu")),
            }
        except (ParseError, ValueError, IndexError):
            continue
    # a step belongs to the run of its job that started last before it (sacct -D lists every run's steps)
    for jid, ss in steps.items():
        starts = sorted(s for (j, s) in allocs if j == jid)
        for st, rss in ss:
            owner = max((s for s in starts if s <= st), default=None)
            if owner is not None:
                e = allocs[(jid, owner)]
                e["max_rss_mb"] = max(e.get("max_rss_mb") or 0.0, rss)
    return allocs, missing


def _limit(v: str | None) -> int | None:
    """sacct's Timelimit ("1-00:00:00", "02:00:00"); UNLIMITED and Partition_Limit say no number: None."""
    from slurmtools.durations import parse_duration

    if v is None or not v[:1].isdigit():
        return None
    return parse_duration(v)


def _cpu_time(v: str | None) -> float | None:
    """sacct's TotalCPU: [D-][H:]M:S[.fff] -> seconds."""
    if v is None:
        return None
    days = 0
    if "-" in v:
        d, v = v.split("-", 1)
        days = int(d)
    parts = v.split(":")
    if not 2 <= len(parts) <= 3:
        raise ValueError(f"TotalCPU {v!r}")
    secs = float(parts[-1]) + int(parts[-2]) * 60 + (int(parts[0]) * 3600 if len(parts) == 3 else 0)
    return days * 86400 + secs


def gpu_detail(path: str | Path) -> tuple[dict[tuple[int, int], tuple[list, list, float | None]], list[str]]:
    """(job, run) -> (SM utilisation per GPU, memory-controller utilisation per GPU, peak GPU memory MB) from the
    epilog's records under `path` (every node of a run merged), and notes on records skipped. Each record goes
    through the report's parser, so advise and the report agree on which run a record belongs to."""
    from slurmtools.reports.epilog import parse_record

    root = Path(path)
    if not root.is_dir():
        return {}, [f"{root}: no epilog GPU records (folder missing): GPU use from Slurm's gres/gpuutil only"]
    out: dict[tuple[int, int], tuple[list, list, float | None]] = {}
    skipped = []
    for f in sorted(root.rglob("*.json")):
        try:
            d = json.loads(f.read_bytes().decode())
            if not isinstance(d, dict):
                raise ValueError("expected a JSON object")
            rec = parse_record(d)
        except (OSError, ValueError, RecursionError) as exc:
            skipped.append(f"{f.name}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            continue
        mem_utils = []
        for g in d.get("gpu_accounting") or []:
            m = g.get("mem_util_pct") if isinstance(g, dict) else None
            if isinstance(m, (int, float)) and not isinstance(m, bool) and 0 <= m <= 100:
                mem_utils.append(float(m))
        key = (rec["job_id_raw"], rec["run"])
        utils, mems, peak = out.get(key, ([], [], None))
        gm = rec["gpu_mem_mb"]
        if gm == gm:  # not NaN
            peak = gm if peak is None else max(peak, gm)
        out[key] = (utils + list(rec["utils"]), mems + mem_utils, peak)
    notes = []
    if skipped:
        notes.append(f"{len(skipped)} unreadable epilog record(s) skipped (first: {skipped[0]})")
    return out, notes
