"""Reading what runs asked for and used (the I/O side of advise): one sacct dump, read by the report's reader for
the runs, plus the fields only advise needs (CPUs, memory, time limit, TotalCPU, MaxRSS), and the epilog's
per-GPU records. Policy-free: `rules` decides what the numbers mean.

The report's reader (`reports.sacct.read_sacct`) keeps GPU counts, times and Slurm's gres/gpuutil but not the
fields below, so they are read here from the same text through the shared parsable-dump splitter, and joined to
its runs by (JobIDRaw, Start as sacct printed it). The epilog's reader averages utilisation over a run's GPUs;
advise needs it per GPU (how many GPUs were busy) with the memory controller's share, so records are read here with
the report's own record parser (`reports.epilog.parse_record`), which decides each record's job and run.

Times are read as the report reads them (docs/reports.md, "Time zones and clock changes"): sacct's local
wall-clock times become UTC instants of the zone it printed them in (`reports.zone`), so a run across a
daylight-saving change counts the time it ran, and the epilog's epoch seconds meet sacct's times on one clock.
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
    """The `sacct --format` list advise asks for: what the report asks sacct for (ElapsedRaw included: it tells
    the two passes of a repeated wall-clock hour apart), then advise's own."""
    from slurmtools.reports.sacct import REPORT_FIELDS

    return tuple(REPORT_FIELDS) + tuple(f for f in ADVISE_FIELDS if f not in REPORT_FIELDS)


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
              epilog_dir: str | Path | None = None, cluster: str | None = None, zone=None
              ) -> tuple[list[RunUse], list[str]]:
    """(finished runs that ended in [since, until], notes saying what the sources lacked). `until` is inclusive:
    a run that ended in the very second advise was started counts. `cluster`: the site's, kept of a dump holding
    several clusters (`reports.sacct.read_sacct`). `zone` (`reports.zone.Zone`): the zone sacct printed its
    times in, and the window's (None: this machine's, `reports.zone.local()`, as sacct run from here prints
    them); run times are real seconds between its instants, as the report counts them."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import pandas as pd

    from slurmtools.reports import zone as zone_mod
    from slurmtools.reports.sacct import read_sacct

    zone = zone_mod.local() if zone is None else zone_mod.get(zone)
    text, source = dump(since, until, sacct_file=sacct_file, backend=backend)
    # advise's own fields are read beside the report's reader: both spend most of their time in arrow, outside
    # the interpreter's lock (on 2 cores the history read took 1.2 s instead of 1.3 at 100,000 jobs)
    with ThreadPoolExecutor(max_workers=1) as pool:
        own = pool.submit(_extra_fields, text, source, zone)
        acc = read_sacct(text, text=True, source=source, cluster=cluster, zone=zone)
        extra, missing = own.result()
    notes = list(acc.notes)
    if acc.bad is not None and acc.bad.rows:
        notes.append(f"{len(acc.bad.rows)} unreadable sacct row(s) skipped (first: line {acc.bad.rows[0].line}: "
                     f"{acc.bad.rows[0].reason})")
    if missing:
        notes.append(f"the sacct dump has no {', '.join(missing)}: what depends on them is not judged "
                     f"(dump with `sacct --parsable2 --format={','.join(sacct_fields())}`)")
    jobs = acc.jobs
    jobs = jobs[jobs["start"].notna()].reset_index(drop=True)
    # run index: the n-th run of a job by start, as the report counts runs
    run_no = jobs.groupby("job_id_raw", sort=False).cumcount().to_numpy()
    detail, enotes = gpu_detail(epilog_dir, jobs.assign(run=run_no)[["job_id_raw", "run", "start", "end"]],
                                cluster, zone) if epilog_dir is not None else ({}, [])
    notes += enotes
    # the runs' times are UTC instants (as written in UTC); the window's ends are local times of the zone
    end = jobs["end"].to_numpy(dtype="datetime64[s]")
    lo, hi = (np.datetime64(zone.instant(t), "s") for t in (since, until))
    keep = np.flatnonzero(jobs["state"].astype(str).isin(_DONE).to_numpy() & ~np.isnat(end) & (end >= lo)
                          & (end <= hi))
    j = jobs.iloc[keep]
    start = j["start"].to_numpy(dtype="datetime64[s]")
    elapsed = (end[keep] - start).astype(np.int64).tolist()
    # advise's own fields, joined to the runs by (JobIDRaw, Start as sacct printed it: the instant's local time)
    key = pd.DataFrame({"job_id_raw": j["job_id_raw"].to_numpy(), "start": zone.to_local(start.astype(np.int64))})
    facts = key.merge(extra, on=["job_id_raw", "start"], how="left", sort=False) if len(extra) else None
    # plain Python values, one column at a time (iterating pandas' arrow-backed text per row is slow)
    text = [j[c].astype(object).to_numpy().tolist() for c in ("user", "account", "name", "state", "partition",
                                                             "gpu_type")]
    known = [_values(facts, c, len(key)) for c in ("cpus", "mem_mb", "time_limit_s", "total_cpu_s", "max_rss_mb")]
    runs = run_no[keep].tolist()
    none = ((), (), None)
    out = []
    for (jid, run, user, account, name, state, partition, gpu_type, gpus, nnodes, el, sutil, smem, cpus, mem,
         limit, total_cpu, rss) in zip(j["job_id_raw"].to_numpy().tolist(), runs, *text,
                                       j["gpus"].to_numpy().tolist(), j["nnodes"].to_numpy().tolist(), elapsed,
                                       j["gpu_util_slurm"].to_numpy().tolist(),
                                       j["gpu_mem_slurm_mb"].to_numpy().tolist(), *known):
        nodes = nnodes if nnodes > 1 else 1
        utils, mem_utils, gmem = detail.get((jid, run), none) if detail else none
        if gmem is None and smem == smem:  # not NaN
            gmem = float(smem)
        out.append(RunUse(
            job_id=jid, run=run, user=str(user), account=str(account), name=str(name), state=str(state),
            partition=str(partition), gpu_type=str(gpu_type), gpus=int(gpus), nodes=nodes, cpus=int(cpus or 0),
            mem_mb=(mem / nodes) if mem else None, time_limit_s=limit, elapsed_s=int(el), total_cpu_s=total_cpu,
            max_rss_mb=rss, gpu_util=tuple(utils), gpu_mem_util=tuple(mem_utils), gpu_mem_mb=gmem,
            slurm_gpu_util=float(sutil) * gpus if sutil == sutil else None))
    return out, notes


def _extra_fields(text: bytes, source: str, zone=None) -> tuple["pd.DataFrame", list[str]]:
    """A frame of runs keyed by (job_id_raw, start: the time sacct wrote, as seconds of a naive clock) with cpus
    (AllocTRES), mem_mb (ReqTRES: requested, all nodes), time_limit_s, total_cpu_s and max_rss_mb (None where
    unknown), and the advise fields the dump lacks. Read as text columns by arrow's CSV reader; a row whose values
    hold the delimiter (a `|` in a job name) is split by the shared splitter, and a row neither can read was
    already skipped and listed by the report's reader: its run just lacks these facts.

    Keyed by the text sacct wrote, not by the instant, so no second reading of a repeated hour can miss the
    report's. `zone` (`reports.zone.Zone`): where its clocks change, a step is placed on its run by instants
    (`_start_instants`): by wall-clock times, a step begun in the repeated hour's second pass of a run begun in its
    first would be before its run."""
    import io

    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    from slurmtools.slurm.parsable import Splitter, read_header

    first = text[:text.find(b"\n") if b"\n" in text else len(text)].decode(errors="replace")
    header = read_header(first, source)
    low = header.lower()
    idx = {n: i for i, n in enumerate(low)}
    # the same facts under sacct's other names: TimelimitRaw (minutes), and TotalCPU's two parts (sacct's own
    # definition: TotalCPU = UserCPU + SystemCPU)
    alts = {"Timelimit": ("timelimitraw",), "TotalCPU": ("usercpu", "systemcpu")}
    missing = [f for f in ("JobIDRaw",) + ADVISE_FIELDS
               if f.lower() not in idx and not all(a in idx for a in alts.get(f, ("-",)))]
    id_name = "jobidraw" if "jobidraw" in idx else "jobid" if "jobid" in idx else None
    if id_name is None or "start" not in idx:
        return pd.DataFrame(), missing
    # in a zone with clock changes, what reads a step's and a run's Start as an instant (End, ElapsedRaw, Elapsed)
    changes = zone is not None and not zone.fixed
    times = ("end", "elapsedraw", "elapsed") if changes else ()
    cols = [n for n in (id_name, "start", "alloctres", "reqtres", "timelimit", "totalcpu", "maxrss",
                        "timelimitraw", "usercpu", "systemcpu") + times if n in idx]
    names = [header.names[idx[c]] for c in cols]
    odd: list[str] = []

    def keep_odd(row) -> str:
        odd.append(row.text)
        return "skip"

    ro = pacsv.ReadOptions(column_names=header.names + ([""] if header.trailing else []), skip_rows=1,
                           block_size=1 << 24)
    po = pacsv.ParseOptions(delimiter=header.delimiter, quote_char=False, escape_char=False,
                            invalid_row_handler=keep_odd)
    co = pacsv.ConvertOptions(include_columns=names, column_types={n: pa.string() for n in names},
                              strings_can_be_null=False)
    try:
        t = pacsv.read_csv(io.BytesIO(text), read_options=ro, parse_options=po, convert_options=co)
    except pa.ArrowInvalid:
        t, odd = None, text.decode(errors="replace").split("\n")[1:]
    if t is not None:
        t = t.rename_columns(cols)
    if odd:
        split, rows = Splitter(header, source), []
        for line in odd:
            try:
                vals = split.split(line, None)
            except ParseError:
                continue
            rows.append([vals[idx[c]] for c in cols])
        more = pa.table({c: pa.array([r[k] for r in rows], pa.string()) for k, c in enumerate(cols)})
        t = more if t is None else pa.concat_tables([t, more])
    n = t.num_rows
    col = {c: pc.utf8_trim_whitespace(t[c]) if c in cols else pa.array([""] * n, pa.string())
           for c in (id_name, "start", "alloctres", "reqtres", "timelimit", "totalcpu", "maxrss", "timelimitraw",
                     "usercpu", "systemcpu")}
    # End, ElapsedRaw, Elapsed: only a repeated Start's row is read (`_start_instants`), so left as read
    more = {c: t[c] for c in times if c in cols}
    is_step = pc.match_substring(col[id_name], ".")
    is_alloc = pc.and_(pc.and_(pc.invert(is_step), pc.utf8_is_digit(col[id_name])),
                       pc.match_substring_regex(col["start"], r"^\d{4}-"))
    al = {c: pc.filter(v, is_alloc) for c, v in col.items()}
    al_start = _seconds(al["start"])
    out = pd.DataFrame({"job_id_raw": pc.cast(al[id_name], pa.int64()).to_numpy(), "start": al_start,
                        "cpus": _each(al["alloctres"], _cpus), "mem_mb": _each(al["reqtres"], _mem_mb),
                        "time_limit_s": (_each(al["timelimit"], _limit) if "timelimit" in cols
                                         else _each(al["timelimitraw"], _limit_raw)),
                        "total_cpu_s": (_each(al["totalcpu"], _cpu_time) if "totalcpu" in cols
                                        else _summed(_each(al["usercpu"], _cpu_time),
                                                     _each(al["systemcpu"], _cpu_time)))})
    for c in ("cpus", "mem_mb", "time_limit_s", "total_cpu_s"):
        out[c] = out[c].astype(object)  # None stays None (a number column would make it NaN, a float of an int)
    # the clock steps are placed by: the wall clock where it never runs back, else instants
    out["_t"] = _start_instants(zone, al_start, more, _rows(is_alloc)) if changes else al_start
    # one row per run: a (JobIDRaw, Start) listed twice keeps its last line; a Start that is not sacct's time
    # matches no run
    out = out[out["start"] >= 0].drop_duplicates(["job_id_raw", "start"], keep="last").reset_index(drop=True)
    out["max_rss_mb"] = np.nan
    # a step belongs to the run of its job that started last before it (sacct -D lists every run's steps)
    has_rss = pc.and_(is_step, pc.not_equal(col["maxrss"], ""))
    if len(out) and pc.any(has_rss).as_py():
        sid, sst, srss = (pc.filter(col[c], has_rss) for c in (id_name, "start", "maxrss"))
        job = pc.extract_regex(sid, r"^(?P<j>\d{1,18})\.")
        st = _seconds(sst)
        if changes:
            st = _start_instants(zone, st, more, _rows(has_rss))
        stp = pd.DataFrame({"job": pc.cast(pc.struct_field(job, [0]), pa.int64()).to_numpy(zero_copy_only=False),
                            "rss": np.array(_each(srss, _rss_mb), dtype=float), "t": st})
        stp = stp[(stp["t"] >= 0) & stp["rss"].notna() & stp["job"].notna()].astype({"job": "int64"})
        runs = pd.DataFrame({"job": out["job_id_raw"], "t": out["_t"], "row": np.arange(len(out))})
        m = pd.merge_asof(stp.sort_values("t"), runs.sort_values("t"), on="t", by="job", direction="backward")
        m = m[m["row"].notna()]
        peak = m.groupby(m["row"].astype("int64"))["rss"].max()
        out.loc[peak.index, "max_rss_mb"] = peak.to_numpy()
    return out.drop(columns="_t"), missing


def _start_instants(zone, start: "np.ndarray", more: dict, rows: "np.ndarray") -> "np.ndarray":
    """Rows' Start (`start`: local seconds, -1 where no time) as epoch seconds of instants, read as the report
    reads a run's: a Start in a repeated hour by `reports.zone.resolve` with the row's End and ElapsedRaw or
    Elapsed (`more`: those columns of the whole table, `rows`: the rows' places in it; read by the report's own
    `elapsed_seconds`), every other by its one reading; -1 where Start is no time (or one the clocks skipped, a bad row
    to the report). Only repeated Starts read their End and elapsed time: nearly none."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from slurmtools.reports.sacct import elapsed_seconds
    from slurmtools.reports.zone import resolve

    given = start >= 0
    bounds = (int(start[given].min()), int(start[given].max())) if given.any() else None
    first, second, skipped = zone.from_local(start, bounds)
    out = np.where(given & ~skipped, first, -1)
    twice = np.flatnonzero(given & (first != second))
    if len(twice):
        take = pa.array(rows[twice])
        sub = {c: pc.utf8_trim_whitespace(pc.take(v, take)) for c, v in more.items()}
        end = _seconds(sub["end"]) if "end" in sub else np.full(len(twice), -1, dtype=np.int64)
        hints = {k: sub[c] for k, c in (("elapsed_raw", "elapsedraw"), ("elapsed", "elapsed")) if c in sub}
        r = resolve(zone, {"start": (start[twice], np.ones(len(twice), dtype=bool)), "end": (end, end >= 0)},
                    (lambda: elapsed_seconds(pa.table(hints))) if hints else None)
        out[twice] = r.times["start"]
    return out


def _rows(mask) -> "np.ndarray":
    """The places of a boolean arrow column's true values (null: false)."""
    import numpy as np
    import pyarrow.compute as pc

    return np.flatnonzero(pc.fill_null(mask, False).to_numpy(zero_copy_only=False))


def _seconds(text) -> "np.ndarray":
    """sacct's `YYYY-MM-DDTHH:MM:SS` texts as epoch seconds (the clock's own, as the report reads them); -1 for any
    other text, so it matches no run."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    got = pc.strptime(text, "%Y-%m-%dT%H:%M:%S", "s", error_is_null=True)
    ok = pc.and_(pc.is_valid(got), pc.equal(pc.utf8_length(text), 19))
    secs = pc.cast(pc.fill_null(got, pa.scalar(0, pa.timestamp("s"))), pa.int64()).to_numpy(zero_copy_only=False)
    return np.where(pc.fill_null(ok, False).to_numpy(zero_copy_only=False), secs, -1)


def _values(facts, column: str, n: int) -> list:
    """A merged column of `_extra_fields` as plain values (n of them), None where the run has no row there or the
    row no value."""
    if facts is None:
        return [None] * n
    return [None if v is None or v != v else v for v in facts[column].tolist()]


def _each(col, fn) -> list:
    """`fn` over a text column, called once per distinct value (sacct's empty words are None; errors too)."""
    import numpy as np
    import pyarrow.compute as pc

    def safe(v):
        if v in ("", "Unknown", "None", "(null)", "N/A"):
            return None
        try:
            return fn(v)
        except (ValueError, TypeError):
            return None
    d = pc.dictionary_encode(col)
    if hasattr(d, "combine_chunks"):
        d = d.combine_chunks()
    got = np.array([safe(v) for v in d.dictionary.to_pylist()] + [None], dtype=object)
    return got[pc.fill_null(d.indices, len(got) - 1).to_numpy(zero_copy_only=False)].tolist()


def _rss_mb(v: str) -> float:
    """sacct's MaxRSS -> MB. Slurm measures it in bytes and prints it with a unit (`225.68M`, `231092K`) except
    where no unit applies: under `--noconvert`, or below 1 KiB; a bare number is bytes (a TRES `mem=` without a
    unit is MB, which `parse_mem_mb` reads)."""
    from slurmtools.slurm.tres import parse_mem_mb

    mb = parse_mem_mb(v)
    return mb if v.strip()[-1:].isalpha() else mb / 2**20


def _cpus(alloc: str | None) -> int | None:
    from slurmtools.slurm.tres import parse_tres

    return parse_tres(alloc).cpu or None


def _mem_mb(req: str | None) -> float | None:
    from slurmtools.slurm.tres import parse_tres

    return parse_tres(req).mem_mb or None


def _limit(v: str | None) -> int | None:
    """sacct's Timelimit ("1-00:00:00", "02:00:00"); UNLIMITED and Partition_Limit say no number: None."""
    from slurmtools.durations import parse_duration

    if v is None or not v[:1].isdigit():
        return None
    return parse_duration(v)


def _limit_raw(v: str | None) -> int | None:
    """sacct's TimelimitRaw: whole minutes; UNLIMITED and Partition_Limit say no number: None."""
    from slurmtools.errors import whole_number

    if v is None or not v[:1].isdigit():
        return None
    return whole_number(v) * 60


def _summed(a: list, b: list) -> list:
    """Two columns of seconds added where both are known (UserCPU + SystemCPU), else None."""
    return [None if x is None or y is None else x + y for x, y in zip(a, b)]


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


def gpu_records(path: str | Path, cluster: str | None = None, zone=None) -> tuple[list[dict], list[str]]:
    """The epilog's records under `path`, one dict per file (job_id_raw, run, start, end, utils and mem_utils per
    GPU, gpu_mem_mb), and notes on records skipped. Each record goes through the report's parser
    (`reports.epilog.parse_record`): advise and the report read a record alike, and skip another cluster's
    (`cluster`: the site's). `zone` (the one sacct's times are read in): start and end are UTC instants, on
    sacct's clock; without it, this machine's local times, as the parser gives them."""
    from slurmtools.reports.epilog import parse_record

    root = Path(path)
    if not root.is_dir():
        return [], [f"{root}: no epilog GPU records (folder missing): GPU use from Slurm's gres/gpuutil only"]
    out, skipped = [], []
    for f in sorted(root.rglob("*.json")):
        try:
            d = json.loads(f.read_bytes().decode())
            if not isinstance(d, dict):
                raise ValueError("expected a JSON object")
            rec = parse_record(d, cluster, zone)
        except (OSError, ValueError, RecursionError) as exc:
            skipped.append(f"{f.name}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            continue
        mem_utils = []
        for g in d.get("gpu_accounting") or []:
            m = g.get("mem_util_pct") if isinstance(g, dict) else None
            if isinstance(m, (int, float)) and not isinstance(m, bool) and 0 <= m <= 100:
                mem_utils.append(float(m))
        out.append({"job_id_raw": rec["job_id_raw"], "run": rec["run"], "start": rec["start"], "end": rec["end"],
                    "utils": list(rec["utils"]), "mem_utils": mem_utils, "gpu_mem_mb": rec["gpu_mem_mb"]})
    notes = []
    if skipped:
        notes.append(f"{len(skipped)} unreadable epilog record(s) skipped (first: {skipped[0]})")
    return out, notes


def gpu_detail(path: str | Path, jobs=None, cluster: str | None = None, zone=None
               ) -> tuple[dict[tuple[int, int], tuple[list, list, float | None]], list[str]]:
    """(job, run) -> (SM utilisation per GPU, memory-controller utilisation per GPU, peak GPU memory MB), every
    node of a run merged, and notes. Records are placed on runs as the report places them: records of one
    (job, run) far apart in time are told apart (`reports.epilog.run_parts`), and with `jobs` (sacct's runs:
    job_id_raw, start, end, the run index by start) each lands on the sacct run that had ended when its epilog
    ran (`reports.runmatch.align_to_runs`), not on the number a node hook counted. `zone`: the one `jobs`' times
    were read in (`gpu_records`), so the records' epoch seconds and sacct's runs meet on one clock."""
    import numpy as np
    import pandas as pd

    from slurmtools.reports.epilog import run_parts

    recs, notes = gpu_records(path, cluster, zone)
    if not recs:
        return {}, notes
    f = pd.DataFrame(recs).astype({"job_id_raw": "int64", "run": "int32", "start": "datetime64[s]",
                                   "end": "datetime64[s]", "gpu_mem_mb": "float64"})
    f["_part"] = run_parts(f)
    g = f.groupby(["job_id_raw", "run", "_part"], as_index=False, sort=False).agg(
        start=("start", "min"), end=("end", "max"), utils=("utils", lambda x: sum(x, [])),
        mem_utils=("mem_utils", lambda x: sum(x, [])), gpu_mem_mb=("gpu_mem_mb", "max"))
    g["gpus"] = g["utils"].map(len).astype("int32")
    g["nodes"] = np.int32(1)
    g["gpu_util_pct"] = g["utils"].map(lambda u: float(np.mean(u)) if u else np.nan)
    g = g.drop(columns="_part")
    if jobs is not None and len(jobs):
        from slurmtools.reports.runmatch import align_to_runs

        start = jobs["start"].to_numpy(dtype="datetime64[s]").astype(np.int64).astype(float)
        end = jobs["end"].to_numpy(dtype="datetime64[s]")
        end_s = np.where(pd.isna(end), start, end.astype(np.int64).astype(float))
        runs = pd.DataFrame({"job_id_raw": jobs["job_id_raw"].to_numpy(), "run": jobs["run"].to_numpy(),
                             "start_s": start, "end_s": end_s})
        g, moved = align_to_runs(g, runs)
        if moved:
            notes.append(f"{moved} epilog record(s) placed on sacct's run by time: the run number they carry "
                         f"differs")
    out = {}
    for j, r, u, m, mem in zip(g["job_id_raw"], g["run"], g["utils"], g["mem_utils"], g["gpu_mem_mb"]):
        out[(int(j), int(r))] = (list(u), list(m), None if pd.isna(mem) else float(mem))
    return out, notes
