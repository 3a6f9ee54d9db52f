"""`sacct --parsable2` text (header line, any column order, jobs and steps) -> a typed pandas frame of job runs.

Parsing is vectorised with pyarrow's CSV reader and compute kernels: a million-job dump must reach a full report
in seconds, so nothing here loops over rows in Python except the rare row that needs repair (a job name holding
the `|` delimiter) or a job holding GPUs of several types. The delimiter is read from the header line
(`slurmtools.slurm.parsable`): `-P`, `-p` and `-p --delimiter=X` dumps all read alike, but under `--delimiter=,`
every row with a TRES list needs repair, row by row (correct, slower: `-P` is the fast path).

Facts this relies on (Slurm 22.05): times are local `YYYY-MM-DDTHH:MM:SS` or `Unknown`/`None`; `State` may read
`CANCELLED by 1234`; `sacct -D` prints every run of a requeued job under the same JobIDRaw; steps have a `.` in
JobID; `AllocTRES` reads `billing=2,cpu=2,gres/gpu:h100=16,gres/gpu=16,mem=2000M,node=2`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from slurmtools.errors import ParseError
from slurmtools.slurm.parsable import Header, Splitter, read_header

#: sacct field (lower case) -> (our column, arrow type read from the text)
FIELDS: dict[str, tuple[str, pa.DataType]] = {
    "jobid": ("job_id", pa.string()),
    "jobidraw": ("job_id_raw", pa.string()),
    "jobname": ("name", pa.string()),
    "user": ("user", pa.string()),
    "account": ("account", pa.string()),
    "partition": ("partition", pa.string()),
    "qos": ("qos", pa.string()),
    "state": ("state", pa.string()),
    "exitcode": ("exit_code", pa.string()),
    "submit": ("submit", pa.timestamp("s")),
    "eligible": ("eligible", pa.timestamp("s")),
    "start": ("start", pa.timestamp("s")),
    "end": ("end", pa.timestamp("s")),
    "nodelist": ("nodelist", pa.string()),
    "nnodes": ("nnodes", pa.int32()),
    "alloctres": ("alloc_tres", pa.string()),
    "reqtres": ("req_tres", pa.string()),
    "tresusageinave": ("tres_usage_ave", pa.string()),
    "cluster": ("cluster", pa.string()),
}
#: the fields a dump must have (a tuple: any one of them)
REQUIRED = (("JobID", "JobIDRaw"), "State", "Start", "End")
#: the fields `sacct -o` should ask for; what `Backend.accounting_dump` is called with
SACCT_FIELDS = ("JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "QOS", "State", "ExitCode",
                "Submit", "Eligible", "Start", "End", "NodeList", "NNodes", "AllocTRES", "ReqTRES",
                "TRESUsageInAve", "Cluster")
_NULLS = ["", "Unknown", "None", "(null)", "N/A"]
_LOW_CARD = ("user", "account", "partition", "qos", "state", "gpu_type", "cluster")

#: the columns and dtypes of `Accounting.jobs`, one row per job run (a requeued job has one row per run)
JOB_COLUMNS: dict[str, str] = {
    "job_id": "str", "job_id_raw": "int64", "name": "str", "user": "category", "account": "category",
    "partition": "category", "qos": "category", "state": "category", "exit_code": "str",
    "submit": "datetime64[s]", "eligible": "datetime64[s]", "start": "datetime64[s]", "end": "datetime64[s]",
    "nodelist": "str", "nnodes": "int32", "gpus": "int32", "gpu_type": "category", "req_gpus": "int32",
    "cluster": "category", "gpu_util_slurm": "float32", "gpu_mem_slurm_mb": "float32",
}


@dataclass
class Accounting:
    """Job runs from sacct, ready for metrics. `notes` says what was repaired or missing, for the report."""

    jobs: pd.DataFrame
    steps: int = 0
    source: str = ""
    notes: list[str] = field(default_factory=list)


def _header(first_line: str, source: str) -> Header:
    h = read_header(first_line, source)
    h.missing(REQUIRED, source, f"dump with `sacct --parsable2 -o {','.join(SACCT_FIELDS)}` (without --noheader)",
              "sacct ")
    if len(h.delimiter) != 1:
        raise ParseError(source, 1, f"the delimiter {h.delimiter!r} is {len(h.delimiter)} characters; dump with "
                                    f"`sacct --parsable2` or a one-character --delimiter")
    return h


BLOCK = 1 << 24


def read_sacct(src: str | Path | bytes, *, text: bool = False, source: str | None = None,
               on_block=None) -> Accounting:
    """Parse a dump: a path, or (with `text=True` / bytes) the text itself, e.g. `Backend.accounting_dump()`.

    `on_block(done_bytes, total_bytes)` is called after each block (about 16 MB), for a progress bar."""
    if isinstance(src, bytes) or text:
        data = src if isinstance(src, bytes) else str(src).encode()
        name = source or "sacct output"
        first = data[:data.find(b"\n") if b"\n" in data else len(data)].decode(errors="replace")
        opener = lambda: io.BytesIO(data)  # noqa: E731
        total = len(data)
    else:
        p = Path(src)
        name = source or str(p)
        try:
            with p.open("rb") as fh:
                first = fh.readline().decode(errors="replace")
        except OSError as exc:
            raise ParseError(name, None, f"cannot read: {exc.strerror or exc}") from None
        opener = lambda: str(p)  # noqa: E731
        total = p.stat().st_size
    if not first.strip():
        raise ParseError(name, 1, "empty sacct dump (expected a header line such as JobID|State|Start|End|...)")
    header = _header(first, name)
    names, delim = header.names, header.delimiter
    low = [n.strip().lower() for n in names]
    include = [names[i] for i, n in enumerate(low) if n in FIELDS]
    types = {names[i]: FIELDS[n][1] for i, n in enumerate(low) if n in FIELDS}

    bad_rows: list[tuple[int, str]] = []

    def on_bad(row) -> str:
        bad_rows.append((row.number, row.text))
        return "skip"

    ropts = pacsv.ReadOptions(column_names=names + ([""] if header.trailing else []), skip_rows=1, block_size=BLOCK)
    popts = pacsv.ParseOptions(delimiter=delim, quote_char=False, escape_char=False, newlines_in_values=False,
                               invalid_row_handler=on_bad)
    copts = pacsv.ConvertOptions(column_types=types, include_columns=include, null_values=_NULLS,
                                 strings_can_be_null=False)  # arrow's own ISO-8601 parser: fast, strict
    parts: list[pa.Table] = []
    step_ids: list[np.ndarray] = []
    step_utils: list[np.ndarray] = []
    step_mems: list[np.ndarray] = []
    nsteps = 0
    renamed = [FIELDS[c.strip().lower()][0] for c in include]

    def take(t: pa.Table) -> None:
        nonlocal nsteps
        jobs_t, ids, utils, mems, n = _reduce(t.rename_columns([FIELDS[c.strip().lower()][0] for c in t.column_names]))
        parts.append(jobs_t)
        step_ids.append(ids)
        step_utils.append(utils)
        step_mems.append(mems)
        nsteps += n

    try:
        # streamed in blocks: step rows and TRES text are reduced away block by block, so peak memory follows
        # the jobs, not the file
        reader = pacsv.open_csv(opener(), read_options=ropts, parse_options=popts, convert_options=copts)
        for i, batch in enumerate(reader, start=1):
            take(pa.Table.from_batches([batch]))
            if on_block is not None:
                on_block(min(i * BLOCK, total), total)
    except pa.ArrowInvalid as exc:
        raise ParseError(name, None, _arrow_message(str(exc), header, opener)) from None
    notes: list[str] = []
    if bad_rows and any(n is None or n < 0 for n, _ in bad_rows):
        # the threaded reader may not know row numbers: find the lines in the text (rare, so a rescan is fine)
        whole = opener()
        blob = whole.getvalue() if isinstance(whole, io.BytesIO) else Path(whole).read_bytes()
        bad_rows = _lines_of(blob, bad_rows)
    if bad_rows:
        extra, fixed_note = _repair(bad_rows, header, include, copts, name)
        take(extra)
        notes.append(fixed_note)
    low_inc = set(renamed)
    if "alloc_tres" not in low_inc:
        notes.append("the dump has no AllocTRES field: GPU counts are unknown (0)")
    if "job_id_raw" not in low_inc:
        notes.append("the dump has no JobIDRaw field: array tasks are told apart by JobID text")
    schema_src = parts[0].schema if parts else None
    table = pa.concat_tables(parts) if parts else None
    jobs = _finish(table, schema_src, np.concatenate(step_ids) if step_ids else np.array([], np.int64),
                   np.concatenate(step_utils) if step_utils else np.array([], np.float64), "job_id_raw" in low_inc,
                   np.concatenate(step_mems) if step_mems else np.array([], np.float64))
    return Accounting(jobs=jobs, steps=nsteps, source=name, notes=notes)


def _lines_of(blob: bytes, rows: list[tuple[int | None, str]]) -> list[tuple[int | None, str]]:
    """The line number of each row's text, in one pass (a `--delimiter=,` dump repairs nearly every row)."""
    wanted = {t for _, t in rows}
    where: dict[str, int] = {}
    for i, ln in enumerate(blob.decode(errors="replace").splitlines(), start=1):
        if ln in wanted:
            where.setdefault(ln, i)
    return [(where.get(t), t) for _, t in rows]


def _arrow_message(msg: str, header: Header, opener=None) -> str:
    """Arrow's conversion error -> `line N: field F: ...`; the line is found by rescanning (errors only)."""
    import re

    m = re.search(r"column #(\d+): (?:Row #(\d+): )?(.*)", msg)
    if not m:
        return msg.splitlines()[0]
    col = int(m.group(1))
    names = header.names
    field_name = names[col] if col < len(names) else f"#{col}"
    line = int(m.group(2)) + 1 if m.group(2) else None
    bad = re.search(r"invalid value '(.*)'", m.group(3))
    if line is None and bad is not None and opener is not None:
        src = opener()
        blob = src.getvalue() if isinstance(src, io.BytesIO) else Path(src).read_bytes()
        want = bad.group(1)
        for i, ln in enumerate(blob.decode(errors="replace").splitlines()[1:], start=2):
            parts = Splitter(header, "").pieces(ln)
            if col < len(parts) and parts[col] == want:
                line = i
                break
    where = f"line {line}: " if line else ""
    return f"{where}field {field_name}: {m.group(3)}"


def _repair(bad_rows, header: Header, include, copts, source) -> tuple[pa.Table, str]:
    """Rows with another count of fields: values that hold the delimiter (a job name with `|`, a TRES list under
    `--delimiter=,`) are rejoined where exactly one split fits; anything else is refused with its line."""
    names, d = header.names, header.delimiter
    splitter = Splitter(header, source)
    sep = "\x1e" if d == "\x1f" else "\x1f"
    fixed_lines = []
    held: set[str] = set()
    for number, text in bad_rows:
        values = splitter.split(text, number)
        held.update(n for n, v in zip(names, values) if d in v)
        fixed_lines.append(sep.join(values))
    ro = pacsv.ReadOptions(column_names=names, skip_rows=0)
    po = pacsv.ParseOptions(delimiter=sep, quote_char=False, escape_char=False)
    try:
        extra_table = pacsv.read_csv(io.BytesIO("\n".join(fixed_lines).encode()), read_options=ro,
                                     parse_options=po, convert_options=copts)
    except pa.ArrowInvalid as exc:
        raise ParseError(source, bad_rows[0][0], _arrow_message(str(exc), header)) from None
    fields = ", ".join(n for n in names if n in held)
    return (extra_table.select(include),
            f"{len(bad_rows)} line(s) had the delimiter {d!r} inside {fields} and were rejoined "
            f"(first: line {bad_rows[0][0]})")


def _col(table: pa.Table, name: str, default):
    if name in table.column_names:
        return table[name]
    return pa.array([default] * table.num_rows) if table.num_rows else pa.array([], type=pa.string())


def _by_value(arr, fn):
    """Apply `fn` (an arrow kernel over strings) once per distinct value: TRES and State strings repeat a lot."""
    d = pc.dictionary_encode(arr).combine_chunks() if isinstance(arr, pa.ChunkedArray) else pc.dictionary_encode(arr)
    return pc.take(fn(d.dictionary), d.indices)


def _int_of(arr, pattern: str) -> np.ndarray:
    def f(values):
        got = pc.extract_regex(values, pattern)
        return pc.cast(pc.if_else(pc.is_valid(got), pc.struct_field(got, [0]), "0"), pa.int64())
    return _by_value(arr, f).to_numpy(zero_copy_only=False)


def _reduce(table: pa.Table) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray, int]:
    """One block: allocation rows with TRES reduced to GPU counts and type; steps reduced to (job, gpuutil,
    gpumem MB)."""
    raw_col = table["job_id_raw"] if "job_id_raw" in table.column_names else table["job_id"]
    is_step = pc.match_substring(raw_col, ".")
    steps = table.filter(is_step)
    jobs = table.filter(pc.invert(is_step))
    ids, utils, mems = _step_gpu_util(steps)
    n = jobs.num_rows
    if "job_id" not in jobs.column_names:
        jobs = jobs.append_column("job_id", jobs["job_id_raw"])
    if "job_id_raw" in jobs.column_names:
        try:
            raw = pc.cast(jobs["job_id_raw"], pa.int64())  # allocations' raw ids are plain numbers
        except pa.ArrowInvalid:
            raw_num = pc.extract_regex(jobs["job_id_raw"], r"^(?P<id>\d+)")
            raw = pc.cast(pc.if_else(pc.is_valid(raw_num), pc.struct_field(raw_num, [0]), "-1"), pa.int64())
    else:
        raw = pa.array(np.zeros(n, dtype=np.int64))  # decided in _finish, over all blocks at once

    alloc = _col(jobs, "alloc_tres", "")
    gpus = _int_of(alloc, r"gres/gpu=(?P<n>\d+)")
    req_gpus = _int_of(_col(jobs, "req_tres", ""), r"gres/gpu=(?P<n>\d+)")

    def first_type(values):
        t = pc.extract_regex(values, r"gres/gpu:(?P<t>[^=,]+)=(?P<n>\d+)")
        return pc.if_else(pc.is_valid(t), pc.struct_field(t, [0]), "")

    typed = _by_value(alloc, first_type)
    gpu_type = pc.if_else(pc.not_equal(typed, ""), typed, pc.if_else(pc.greater(pa.array(gpus), 0), "untyped", ""))
    multi = _by_value(alloc, lambda v: pc.greater(pc.count_substring(v, "gres/gpu:"), 1))

    def first_word(values):
        w = pc.extract_regex(values, r"^(?P<s>[A-Z_]+)")
        return pc.if_else(pc.is_valid(w), pc.struct_field(w, [0]), "UNKNOWN")

    def ts(name):
        c = _col(jobs, name, None)
        return c if c.type == pa.timestamp("s") else pa.array([None] * n, type=pa.timestamp("s"))

    out = {
        "job_id": jobs["job_id"], "job_id_raw": raw, "name": _col(jobs, "name", ""),
        "user": _col(jobs, "user", ""), "account": _col(jobs, "account", ""),
        "partition": _col(jobs, "partition", ""), "qos": _col(jobs, "qos", ""),
        "state": _by_value(jobs["state"], first_word), "exit_code": _col(jobs, "exit_code", ""),
        "submit": ts("submit"), "eligible": ts("eligible"), "start": ts("start"), "end": ts("end"),
        "nodelist": _col(jobs, "nodelist", ""),
        "nnodes": pc.cast(pc.fill_null(jobs["nnodes"], 0), pa.int32()) if "nnodes" in jobs.column_names
        else pa.array(np.zeros(n, dtype=np.int32)),
        "gpus": pa.array(gpus.astype(np.int32)), "gpu_type": gpu_type,
        "req_gpus": pa.array(req_gpus.astype(np.int32)), "cluster": _col(jobs, "cluster", ""),
        "alloc_multi": pc.if_else(multi, alloc, ""),
    }
    return pa.table({k: (v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v) for k, v in out.items()}), \
        ids, utils, mems, steps.num_rows


def _finish(table: pa.Table | None, schema, step_ids: np.ndarray, step_utils: np.ndarray,
            have_raw: bool, step_mems: np.ndarray | None = None) -> pd.DataFrame:
    if table is None or table.num_rows == 0:
        return empty_jobs()
    if not have_raw:
        # without JobIDRaw, "123_4" is not a number: plain ids keep their value, others get a negative code
        ids = table["job_id"].to_numpy().astype(str)
        plain = np.char.isdigit(ids)
        codes, _ = pd.factorize(ids)
        raw = pa.array(np.where(plain, np.where(plain, ids, "0").astype(np.int64), -(codes + 1)))
        table = table.set_column(table.column_names.index("job_id_raw"), "job_id_raw", raw)
    alloc_multi = table["alloc_multi"]
    multi = pc.not_equal(alloc_multi, "").to_numpy(zero_copy_only=False)
    table = table.drop_columns(["alloc_multi"])
    cols = {}
    for k in table.column_names:
        cols[k] = pc.dictionary_encode(table[k]) if k in _LOW_CARD else table[k]
    frame = pa.table(cols).to_pandas()
    frame["gpu_util_slurm"] = np.float32(np.nan)
    if len(step_ids):
        best = pd.Series(step_utils).groupby(step_ids).max()
        frame["gpu_util_slurm"] = best.reindex(frame["job_id_raw"].to_numpy()).to_numpy().astype(np.float32)
    frame["gpu_mem_slurm_mb"] = np.float32(np.nan)
    if len(step_ids) and step_mems is not None and len(step_mems):
        peak = pd.Series(step_mems).groupby(step_ids).max()  # the busiest step; NaN where no step had gpumem
        frame["gpu_mem_slurm_mb"] = peak.reindex(frame["job_id_raw"].to_numpy()).to_numpy().astype(np.float32)
    if multi.any():
        frame = _split_multi_type(frame, np.asarray(alloc_multi.to_pylist(), dtype=object), multi)
    order = np.lexsort((frame["start"].to_numpy(), frame["job_id_raw"].to_numpy()))
    return frame.iloc[order].reset_index(drop=True)


_MEM_UNIT_MB = {"": 1 / 2**20, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2, "P": 1024.0**3}


def _step_gpu_util(steps: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Slurm's own `gres/gpuutil` (percent) and `gres/gpumem` (MB; sacct prints it with a unit suffix, bytes
    without one) from the steps' TRESUsageInAve: (job raw ids, util, mem), NaN where a step lacks one; empty if
    no step has either."""
    none = (np.array([], np.int64), np.array([], np.float64), np.array([], np.float64))
    if steps.num_rows == 0 or "tres_usage_ave" not in steps.column_names:
        return none
    tres = steps["tres_usage_ave"]
    have = pc.or_(pc.match_substring(tres, "gres/gpuutil="), pc.match_substring(tres, "gres/gpumem="))
    if not pc.any(have).as_py():
        return none
    s = steps.filter(have)

    def num(pattern):
        return pc.extract_regex(s["tres_usage_ave"], pattern)

    util = num(r"gres/gpuutil=(?P<u>[\d.]+)")
    u = pc.cast(pc.struct_field(util, [0]), pa.float64()).to_numpy(zero_copy_only=False)
    mem = num(r"gres/gpumem=(?P<v>[\d.]+)(?P<unit>[KMGTP]?)")
    v = pc.cast(pc.struct_field(mem, [0]), pa.float64()).to_numpy(zero_copy_only=False)
    units = pc.fill_null(pc.struct_field(mem, [1]), "").to_numpy(zero_copy_only=False)
    m = v * pd.Series(units, dtype=object).map(_MEM_UNIT_MB).to_numpy(dtype=np.float64)
    raw = s["job_id_raw"] if "job_id_raw" in s.column_names else s["job_id"]
    ids = pc.cast(pc.struct_field(pc.extract_regex(raw, r"^(?P<i>\d+)"), [0]), pa.int64()).to_numpy(
        zero_copy_only=False)
    return ids, u, m


def _split_multi_type(frame: pd.DataFrame, alloc: np.ndarray, multi: np.ndarray) -> pd.DataFrame:
    """A job holding GPUs of several types becomes one row per type, so every row has a single GPU type."""
    from slurmtools.slurm.tres import parse_tres

    keep = frame[~multi]
    rows = []
    for i in np.flatnonzero(multi):
        t = parse_tres(alloc[i])
        for typ, cnt in t.gpus_by_type.items():
            r = frame.iloc[i].copy()
            r["gpu_type"], r["gpus"] = typ, cnt
            rows.append(r)
    extra = pd.DataFrame(rows)
    out = pd.concat([keep, extra], ignore_index=True)
    for k in _LOW_CARD:
        out[k] = out[k].astype("category")
    out["gpus"] = out["gpus"].astype("int32")
    return out


def empty_jobs() -> pd.DataFrame:
    """A frame with the job columns and no rows (what a window without jobs yields)."""
    return pd.DataFrame({k: pd.Series(dtype=v) for k, v in JOB_COLUMNS.items()})
