"""`sacct --parsable2` text (header line, any column order, jobs and steps) -> a typed pandas frame of job runs.

Parsing is vectorised with pyarrow's CSV reader and compute kernels: a million-job dump must reach a full report
in seconds, so nothing here loops over rows in Python except the rare row that needs repair (a job name holding
the `|` delimiter) or a job holding GPUs of several types. The delimiter is read from the header line
(`slurmtools.slurm.parsable`): `-P`, `-p` and `-p --delimiter=X` dumps all read alike, but under `--delimiter=,`
every row with a TRES list needs repair, row by row (correct, slower: `-P` is the fast path).

Facts this relies on (Slurm 22.05): times are local `YYYY-MM-DDTHH:MM:SS` or `Unknown`/`None`; `State` may read
`CANCELLED by 1234`; `sacct -D` prints every run of a requeued job under the same JobIDRaw; steps have a `.` in
JobID; `AllocTRES` reads `billing=2,cpu=2,gres/gpu:h100=16,gres/gpu=16,mem=2000M,node=2`, or the typed items alone
where the site tracks GPUs by type only. Dumps joined one after another repeat the header line (perhaps of another
`-o` order) and print a run active in both windows twice: the careful path follows each header, and a run is one
(JobIDRaw, Start).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from slurmtools.errors import ParseError
from slurmtools.hostlist import NO_HOST
from slurmtools.reports.badrows import BadRow, BadRows
from slurmtools.slurm.parsable import Header, HeaderMismatch, Splitter, read_header
from slurmtools.slurm.tres import GPU_SHARE_NAME

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
    "ntasks": ("ntasks", pa.int32()),
    "alloctres": ("alloc_tres", pa.string()),
    "reqtres": ("req_tres", pa.string()),
    "tresusageinave": ("tres_usage_ave", pa.string()),
    "cluster": ("cluster", pa.string()),
    # read only in a zone with clock changes: which reading of a repeated wall-clock time is meant (`_hints`)
    "elapsedraw": ("elapsed_raw", pa.string()),
    "elapsed": ("elapsed", pa.string()),
}
#: fields read only to read the times of a zone with clock changes (`zone.resolve`): never a bad row for them
_HINTS = ("elapsedraw", "elapsed")
#: the fields a dump must have (a tuple: any one of them); AllocTRES too: without it no run's GPUs are known, and a
#: GPU report of such a dump would count none (it used to, with a note)
REQUIRED = (("JobID", "JobIDRaw"), "State", "Start", "End", "AllocTRES")
#: the fields `sacct -o` should ask for (advise asks for these and its own)
SACCT_FIELDS = ("JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "QOS", "State", "ExitCode",
                "Submit", "Eligible", "Start", "End", "NodeList", "NNodes", "NTasks", "AllocTRES", "ReqTRES",
                "TRESUsageInAve", "Cluster")
#: what the report asks sacct for (`Backend.accounting_dump`): those and ElapsedRaw, which tells the two passes of
#: a repeated wall-clock hour apart (`zone.resolve`)
REPORT_FIELDS = SACCT_FIELDS[:SACCT_FIELDS.index("End") + 1] + ("ElapsedRaw",) + \
    SACCT_FIELDS[SACCT_FIELDS.index("End") + 1:]
_NULLS = ["", "Unknown", "None", "(null)", "N/A"]
_LOW_CARD = ("user", "account", "partition", "qos", "state", "gpu_type", "cluster")

#: the columns and dtypes of `Accounting.jobs`, one row per job run (a requeued job has one row per run)
JOB_COLUMNS: dict[str, str] = {
    "job_id": "str", "job_id_raw": "int64", "name": "str", "user": "category", "account": "category",
    "partition": "category", "qos": "category", "state": "category", "exit_code": "str",
    "submit": "datetime64[s]", "eligible": "datetime64[s]", "start": "datetime64[s]", "end": "datetime64[s]",
    "nodelist": "str", "nnodes": "int32", "gpus": "int32", "gpu_type": "category", "req_gpus": "int32",
    "cluster": "category", "gpu_util_slurm": "float32", "gpu_mem_slurm_mb": "float32",
    # Slurm's energy TRES of the allocation (joules, summed over its steps: `energy=` in AllocTRES, what sacct's
    # ConsumedEnergyRaw prints for a job), where the site gathers energy (AcctGatherEnergyType); NaN otherwise
    "energy_slurm_j": "float64",
}


@dataclass
class Accounting:
    """Job runs from sacct, ready for metrics. `notes` says what was repaired or missing, for the report."""

    jobs: pd.DataFrame
    steps: int = 0
    source: str = ""
    notes: list[str] = field(default_factory=list)
    #: rows skipped as bad, with their line and reason (`slurmtools.reports.badrows`)
    bad: BadRows | None = None


def _header(first_line: str, source: str) -> Header:
    h = read_header(first_line, source)
    h.missing(REQUIRED, source, f"dump with `sacct --parsable2 -o {','.join(REPORT_FIELDS)}` (without --noheader)",
              "sacct ")
    if len(h.delimiter) != 1:
        raise ParseError(source, 1, f"the delimiter {h.delimiter!r} is {len(h.delimiter)} characters; dump with "
                                    f"`sacct --parsable2` or a one-character --delimiter")
    return h


def _fields_of(header: Header, keep: set[str] | None = None, hints: bool = False
               ) -> tuple[list[str], dict, dict[str, str]]:
    """(the header's names we read, their arrow types, our column -> the name as written); `keep`: only these
    (lower-case) names; `hints`: ElapsedRaw and Elapsed too (a zone with clock changes)."""
    names = header.names
    low = [n.strip().lower() for n in names]
    include = [names[i] for i, n in enumerate(low) if n in FIELDS and (keep is None or n in keep)
               and (hints or n not in _HINTS)]
    types = {c: FIELDS[c.strip().lower()][1] for c in include}
    labels = {FIELDS[c.strip().lower()][0]: c for c in include}
    return include, types, labels


BLOCK = 1 << 24
#: times outside [TIME_MIN, TIME_MAX) are not Slurm's (year 1, a clock gone wild): the row is bad
TIME_MIN, TIME_MAX = pa.scalar(1, pa.timestamp("s")), pa.scalar(7258118400, pa.timestamp("s"))  # 1970 .. 2200
#: a GPU count in a TRES list that is not 1 to 9 digits (negative, text, 2^32 and more) makes the row bad
_BAD_GPU = r"(?:^|,)gres/gpu(?::[^=,]*)?=(?:[^,]*[^0-9,][^,]*|\d{10,}|)(?:,|$)"
_NUMBER = r"^\d{1,12}(?:\.\d+)?$"
#: a GPU type that is a MIG slice, as Slurm names it: `1g.10gb` (gres.conf) or, from AutoDetect=nvml, the GPU's
#: name and the profile, `nvidia_a100-sxm4-80gb_3g.40gb` (a compute-instance profile adds `1c.`)
_MIG = re.compile(r"(?:^|_)(?:\d+c\.)?[1-8]g\.\d+gb$")
#: a share of a GPU in a TRES list: gres/shard or gres/mps with a count above 0 (typed or not)
_SHARE = rf"(?:^|,){GPU_SHARE_NAME}=0*[1-9]"


class _Dirty(Exception):
    """The fast path met what only the careful path reads right: a bad row, or a CR inside a line."""


class _WatchCR(io.FileIO):
    """The dump file, noting whether a CR passes by: arrow's reader ends a row at a CR, sacct does not (it prints a
    CR in a job name as it is), so such a dump goes to the careful path."""

    cr = False

    def read(self, size=-1):
        data = super().read(size)
        if not self.cr and b"\r" in data:
            self.cr = True
        return data


@dataclass
class _Runs:
    """Blocks of allocation rows reduced so far, and their steps' GPU use."""

    parts: list = field(default_factory=list)
    step_ids: list = field(default_factory=list)
    step_utils: list = field(default_factory=list)
    #: steps whose gres/gpuutil could not be read per GPU (no NTasks in the dump, or no GPUs in the step's TRES)
    util_unread: int = 0
    step_mems: list = field(default_factory=list)
    #: each step's Cluster ("" without the field), as arrow text (no Python string per step): job ids are per
    #: cluster (`sacct -L`, `-M a,b`)
    step_clusters: list = field(default_factory=list)
    #: each step's job part of JobID (`123_4` of `123_4.batch`), in a dump without JobIDRaw only
    step_jobs: list = field(default_factory=list)
    steps: int = 0
    rows: int = 0
    #: the zone sacct printed its times in, where they are read as UTC instants (None: as written)
    zone: object = None
    #: allocation rows with a repeated wall-clock time that nothing told apart (read as the first pass)
    unresolved: int = 0
    #: per time field: [values given, values not in sacct's standard form, the first such value]
    time_forms: dict = field(default_factory=dict)

    def take(self, t: pa.Table, check: bool = False) -> None:
        """A block of rows, columns already renamed to ours (`check`: raise _Dirty on a bad row)."""
        jobs_t, (ids, utils, mems, clusters, unread, jobs), n, unresolved = _reduce(t, check, self.zone)
        self.unresolved += unresolved
        self.util_unread += unread
        self.parts.append(jobs_t)
        self.step_ids.append(ids)
        self.step_utils.append(utils)
        self.step_mems.append(mems)
        self.step_clusters.append(clusters)
        self.step_jobs.append(jobs)
        self.steps += n
        self.rows += t.num_rows

    def frame(self, have_raw: bool, cluster: str | None = None, source: str = "") -> tuple[pd.DataFrame, list[str]]:
        """(the job runs, notes on the rows left out and on GPUs the report counts in its own way)."""
        table = pa.concat_tables(self.parts) if self.parts else None
        cat = lambda xs, dt: np.concatenate(xs) if xs else np.array([], dt)  # noqa: E731
        notes: list[str] = []
        frame = _finish(table, None, cat(self.step_ids, np.int64), cat(self.step_utils, np.float64), have_raw,
                        cat(self.step_mems, np.float64),
                        pa.concat_arrays(self.step_clusters) if self.step_clusters else None, cluster, source,
                        notes, pa.concat_arrays(self.step_jobs) if self.step_jobs else None)
        mig = [str(t) for t in frame["gpu_type"].cat.categories if _MIG.search(str(t))] if len(frame) else []
        if mig:
            n = int(frame["gpu_type"].isin(mig).sum())
            notes.append(f"{n} job run row(s) held MIG slices ({', '.join(mig)}): each slice counts as one GPU, as "
                         f"Slurm's gres/gpu counts it, not as a fraction of one")
        return frame, notes


def read_sacct(src: str | Path | bytes, *, text: bool = False, source: str | None = None,
               on_block=None, block_bytes: int = BLOCK, cluster: str | None = None, careful: bool = False,
               zone=None, needs: tuple = ()) -> Accounting:
    """Parse a dump: a path, or (with `text=True` / bytes) the text itself, e.g. `Backend.accounting_dump()`.

    A clean dump is read by arrow's streaming CSV reader. A dump with a bad row (too few fields, text in a number
    or time field, a time outside 1970-2200, End before Start, a GPU count that is not a count...) or a CR inside
    a line is read again by `_read_careful`, which skips each bad row and lists it in `Accounting.bad`.

    `on_block(done_bytes, total_bytes)` is called after each block (`block_bytes`, 16 MB unless given), for a
    progress bar; smaller blocks hold less of the dump in memory at once.

    `careful`: read line by line whatever the dump holds (the path a dump with a bad row takes; both paths read
    every row alike, and the tests compare them).

    A dump of several clusters (`sacct -L`, `-M a,b`, a federation) keys jobs and steps by (Cluster, JobIDRaw):
    job ids are per cluster. With `cluster` (the site's), such a dump keeps that cluster's rows and says how many
    of the others it left out; a ParseError when it holds none of that cluster's. A dump of one cluster is read
    whole, whatever its name.

    `zone` (`reports.zone.Zone`): the zone sacct printed its times in; Submit, Eligible, Start and End are then
    read as UTC instants (`zone.resolve`: a repeated wall-clock time of a change back is read by ElapsedRaw or
    Elapsed where the dump has them; a time the clocks skipped is a bad row). Without it the times stay as
    written (naive local times).

    A dump whose times are not in sacct's standard form (a user's SLURM_TIME_FORMAT, `relative` or `%s`, when it
    was written: most of a time field's values unreadable) is refused in one line naming the field."""
    if zone is not None and zone.is_utc:
        zone = None  # UTC: the times as written are the instants
    if isinstance(src, bytes) or text:
        data = src if isinstance(src, bytes) else str(src).encode()
        name = source or "sacct output"
        first = data[:data.find(b"\n") if b"\n" in data else len(data)].decode(errors="replace")
        opener = lambda: io.BytesIO(data)  # noqa: E731
        raw_opener = opener
        total = len(data)
        has_cr = b"\r" in data
    else:
        p = Path(src)
        name = source or str(p)
        try:
            with p.open("rb") as fh:
                first = fh.readline().decode(errors="replace")
        except OSError as exc:
            raise ParseError(name, None, f"cannot read: {exc.strerror or exc}") from None
        opener = lambda: _WatchCR(str(p))  # noqa: E731
        raw_opener = lambda: p.open("rb")  # noqa: E731
        total = p.stat().st_size
        has_cr = False
    # a dump saved through a Windows editor starts with a UTF-8 byte order mark: not part of the first field's name
    first = first.removeprefix("\ufeff")
    if not first.strip():
        raise ParseError(name, 1, "empty sacct dump (expected a header line such as JobID|State|Start|End|...)")
    header = _header(first, name)
    # fields a caller needs beyond what every reader needs (the report's tables count users and accounts)
    header.missing(needs, name, f"dump with `sacct --parsable2 -o {','.join(REPORT_FIELDS)}`", "sacct ")
    hints = zone is not None and not zone.fixed
    include, types, labels = _fields_of(header, hints=hints)
    try:
        if has_cr or careful:
            raise _Dirty()
        runs, notes = _read_fast(opener, header, include, types, labels, name, total, on_block, block_bytes, zone)
        bad = BadRows(name, "rows", runs.rows)
    except _Dirty:
        runs, notes, bad = _read_careful(raw_opener, header, include, types, labels, name, total, on_block,
                                         block_bytes, zone, hints)
        _time_forms(runs.time_forms, name)
    low_inc = set(labels)
    if "job_id_raw" not in low_inc:
        notes.append("the dump has no JobIDRaw field: array tasks are told apart by JobID text")
    if runs.util_unread:
        why = "the dump has no NTasks field" if "ntasks" not in low_inc else "their NTasks or GPU count is not given"
        notes.append(f"Slurm's gres/gpuutil of {runs.util_unread} step(s) not read: it is a task's use summed over "
                     f"its GPUs, averaged over the step's tasks, so its GPUs' mean needs the tasks and GPUs ({why}; "
                     f"dump with `sacct -o ...,NTasks,AllocTRES,TRESUsageInAve`)")
    if runs.unresolved:
        how = ("the dump has no ElapsedRaw or Elapsed field" if not low_inc & {"elapsed_raw", "elapsed"}
               else "no ElapsedRaw, or a run still going")
        notes.append(f"{runs.unresolved} job run row(s) hold a time in the repeated hour of a change back from "
                     f"daylight-saving time in {zone.name} that nothing tells apart ({how}): read as that hour's "
                     f"first pass")
    jobs, more = runs.frame("job_id_raw" in low_inc, cluster, name)
    return Accounting(jobs=jobs, steps=runs.steps, source=name, notes=notes + more, bad=bad)


def _read_fast(opener, header: Header, include, types, labels, name, total, on_block, block_bytes: int = BLOCK,
               zone=None) -> tuple[_Runs, list[str]]:
    """Arrow's streaming reader over a clean dump; raises _Dirty at the first sign of a bad row."""
    names, delim = header.names, header.delimiter
    invalid: list[tuple[int, str]] = []

    def on_bad(row) -> str:
        invalid.append((row.number, row.text))
        return "skip"

    ropts = pacsv.ReadOptions(column_names=names + ([""] if header.trailing else []), skip_rows=1,
                              block_size=block_bytes)
    popts = pacsv.ParseOptions(delimiter=delim, quote_char=False, escape_char=False, newlines_in_values=False,
                               invalid_row_handler=on_bad)
    copts = pacsv.ConvertOptions(column_types=types, include_columns=include, null_values=_NULLS,
                                 strings_can_be_null=False)  # arrow's own ISO-8601 parser: fast, strict
    runs = _Runs(zone=zone)

    def take(t: pa.Table) -> None:
        runs.take(t.rename_columns([FIELDS[c.strip().lower()][0] for c in t.column_names]), check=True)

    stream = opener()
    ahead = None
    try:
        # streamed in blocks: step rows and TRES text are reduced away block by block, so peak memory follows
        # the jobs, not the file
        reader = pacsv.open_csv(stream, read_options=ropts, parse_options=popts, convert_options=copts)
        ahead = _read_ahead(reader)
        for i, batch in enumerate(ahead, start=1):
            take(pa.Table.from_batches([batch]))
            if on_block is not None:
                on_block(min(i * block_bytes, total), total)
    except pa.ArrowInvalid:
        raise _Dirty() from None
    finally:
        if ahead is not None:
            ahead.close()  # its thread ends before the file closes
        if hasattr(stream, "close"):
            stream.close()
    if getattr(stream, "cr", False):
        raise _Dirty()
    notes: list[str] = []
    if invalid and any(n is None or n < 0 for n, _ in invalid):
        # the threaded reader may not know row numbers: find the lines in the text (rare, so a rescan is fine)
        whole = opener()
        blob = whole.getvalue() if isinstance(whole, io.BytesIO) else Path(whole.name).read_bytes()
        invalid = _lines_of(blob, invalid)
    if invalid:
        try:
            extra, fixed_note = _repair(invalid, header, include, copts, name)
        except ParseError:
            raise _Dirty() from None
        take(extra)
        notes.append(fixed_note)
    return runs, notes


def _read_ahead(reader, depth: int = 2):
    """The reader's blocks, parsed by a thread of its own up to `depth` blocks ahead: arrow parses the next block
    without the interpreter's lock while this thread reduces the last one (on two cores a dump is read in about
    two thirds of the time). The reader's error comes out here; stopping early stops the thread."""
    import queue
    import threading

    blocks: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                blocks.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for batch in reader:
                if not put(batch):
                    return
            put(end)
        except BaseException as exc:  # handed to the reading thread
            put(exc)

    t = threading.Thread(target=run, name="sacct-reader", daemon=True)
    t.start()
    try:
        while True:
            item = blocks.get()
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        t.join()


def _read_careful(opener, header: Header, include, types, labels, name, total, on_block, block_bytes: int = BLOCK,
                  zone=None, hints: bool = False) -> tuple[_Runs, list[str], BadRows]:
    """The dump line by line (a line ends at LF only), in blocks, with arrow kernels over each block's lines:
    every row that cannot be read or holds what Slurm never writes is skipped and listed with its line number.
    Python runs per row only for rows that need repair (a value holding the delimiter) or are bad."""
    runs = _Runs(zone=zone)
    bad = BadRows(name, "rows")
    rejoined: list[int] = []
    held: set[str] = set()
    replaced: list[int] = []
    with_cr: list[int] = []
    layout = _Layout(header, include, types, labels, Splitter(header, name), name, hints=hints)
    with opener() as fh:
        fh.readline()
        lineno, done = 2, 0
        while True:
            block = fh.read(block_bytes)
            if not block:
                break
            if not block.endswith(b"\n"):
                block += fh.readline()
            done += len(block)
            _careful_block(block, lineno, layout, runs, bad, rejoined, held, replaced, with_cr)
            lineno += block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
            if on_block is not None:
                on_block(min(done, total), total)
    bad.total = runs.rows + len(bad.rows)
    notes = []
    d = header.delimiter
    if rejoined:
        fields = ", ".join(n for n in header.names if n in held)
        notes.append(f"{len(rejoined)} line(s) had the delimiter {d!r} inside {fields} and were rejoined "
                     f"(first: line {min(rejoined)})")
    if replaced:
        notes.append(f"{len(replaced)} line(s) held bytes that are not UTF-8 in a job name or other free text, "
                     f"shown as U+FFFD (first: line {min(replaced)})")
    if with_cr:
        notes.append(f"{len(with_cr)} line(s) hold a carriage return inside a value, kept as text "
                     f"(first: line {min(with_cr)})")
    if layout.repeated:
        notes.append(f"{len(layout.repeated)} header line(s) repeated inside the dump (dumps joined one after "
                     f"another) were skipped, not read as jobs (first: line {layout.repeated[0]})")
    if layout.changed:
        notes.append(f"{len(layout.changed)} header line(s) inside the dump name the fields in another order or "
                     f"with another delimiter: the lines after each were read by it (first: line "
                     f"{layout.changed[0]})")
    return runs, notes, bad


#: a line of field names only (every word starts with a letter): a row's job id starts with a digit, so a data
#: line fails at its first digit
_HEADER_LIKE = r"^[A-Za-z][A-Za-z0-9_]*(?:[^A-Za-z0-9_]+[A-Za-z][A-Za-z0-9_]*)+[^A-Za-z0-9_]?$"


@dataclass
class _Layout:
    """The header in force on the careful path. Two dumps joined (`cat a.txt b.txt`, a cron job appending each
    day's `sacct -P`) repeat the header mid-file, perhaps of another `-o` order or delimiter: the lines after it
    are read by it, not taken for rows of the first layout (a swapped User/Account would read silently wrong)."""

    header: Header
    include: list
    types: dict
    labels: dict
    splitter: Splitter
    source: str
    repeated: list = field(default_factory=list)
    changed: list = field(default_factory=list)
    #: ElapsedRaw and Elapsed are read (`_fields_of`)
    hints: bool = False

    def header_of(self, text: str) -> Header | None:
        """`text` as a header line (naming the fields a dump must have), or None for a row."""
        try:
            h = read_header(text, self.source)
        except ParseError:
            return None
        low = set(h.lower())
        if not all(any(a.lower() in low for a in ((w,) if isinstance(w, str) else w)) for w in REQUIRED):
            return None
        return h

    def switch(self, h: Header, lineno: int) -> None:
        """Read the lines after `lineno` by `h`."""
        low = set(h.lower())
        if (h.names, h.delimiter, h.trailing) == (self.header.names, self.header.delimiter, self.header.trailing):
            self.repeated.append(lineno)
            return
        ours = {c.strip().lower() for c in self.include}
        lack = [c for c in self.include if c.strip().lower() not in low]
        if lack or len(h.delimiter) != 1:
            why = f"lacks {', '.join(lack)}, which line 1 names" if lack else "has a delimiter of several characters"
            raise ParseError(self.source, lineno, f"a header line inside the dump (dumps joined?) {why}: its rows "
                                                  f"cannot be read alike; read each dump on its own")
        self.header = h
        self.include, self.types, self.labels = _fields_of(h, ours, self.hints)
        self.splitter = Splitter(h, self.source)
        self.changed.append(lineno)


def _non_utf8_lines(block: bytes) -> set[int]:
    """0-based indexes of the lines of `block` holding bytes that are not UTF-8 (one decode per such line)."""
    import codecs

    out: set[int] = set()
    pos, line = 0, 0
    view = memoryview(block)
    while pos < len(block):
        try:
            codecs.utf_8_decode(view[pos:], "strict", True)
            break
        except UnicodeDecodeError as exc:
            at = pos + exc.start
            line += block.count(b"\n", pos, at)
            out.add(line)
            nxt = block.find(b"\n", at)
            if nxt < 0:
                break
            line += 1
            pos = nxt + 1
    return out


def _lines(text: bytes) -> pa.Array:
    """The LF-ended lines of `text` (valid UTF-8) as a string array, without the LF: built from offsets, no
    Python object per line."""
    if not text.endswith(b"\n"):
        text += b"\n"
    nl = np.flatnonzero(np.frombuffer(text, np.uint8) == 10)
    offsets = np.concatenate([[0], nl + 1]).astype(np.int32)
    arr = pa.StringArray.from_buffers(len(nl), pa.py_buffer(offsets), pa.py_buffer(text))
    return pc.utf8_slice_codeunits(arr, 0, -1)


def _careful_block(block: bytes, first_line: int, layout: _Layout, runs: _Runs, bad: BadRows, rejoined, held,
                   replaced, with_cr) -> None:
    try:
        block.decode()
        non_utf8: set[int] = set()
    except UnicodeDecodeError:
        non_utf8 = _non_utf8_lines(block)
        block = block.decode(errors="replace").encode()
    lines = _lines(block)
    lineno = np.arange(first_line, first_line + len(lines), dtype=np.int64)
    # a CRLF dump: the CR before the LF is not data
    lines = pc.replace_substring_regex(lines, "\r$", "")
    keep = pc.greater(pc.utf8_length(lines), 0).to_numpy(zero_copy_only=False)  # arrow skips empty lines too
    lines, lineno = lines.filter(pa.array(keep)), lineno[keep]
    bad_bytes = {first_line + i for i in non_utf8}
    at = 0
    for i in map(int, np.flatnonzero(_flag(pc.match_substring_regex(lines, _HEADER_LIKE)))):  # none in a plain dump
        h = layout.header_of(lines[i].as_py())
        if h is not None:
            if i > at:
                _careful_lines(lines[at:i], lineno[at:i], bad_bytes, layout, runs, bad, rejoined, held, replaced,
                               with_cr)
            layout.switch(h, int(lineno[i]))
            at = i + 1
    if at < len(lines):
        _careful_lines(lines[at:], lineno[at:], bad_bytes, layout, runs, bad, rejoined, held, replaced, with_cr)


def _careful_lines(lines: pa.Array, lineno: np.ndarray, bad_bytes: set[int], layout: _Layout, runs: _Runs,
                   bad: BadRows, rejoined, held, replaced, with_cr) -> None:
    """Lines read by one header (`_careful_block` cuts a block at a header line)."""
    header, include, types, labels, splitter = (layout.header, layout.include, layout.types, layout.labels,
                                                layout.splitter)
    names, d, n = header.names, header.delimiter, len(header.names)
    body = pc.replace_substring_regex(lines, re.escape(d) + "$", "") if header.trailing else lines
    parts = pc.split_pattern(body, d)
    ok = pc.equal(pc.list_value_length(parts), n).to_numpy(zero_copy_only=False)
    m = int(ok.sum())
    flat = pc.list_flatten(parts.filter(pa.array(ok)))
    columns = {c: [flat.take(pa.array(np.arange(m, dtype=np.int64) * n + names.index(c)))] for c in include}
    order = [np.flatnonzero(ok)]
    fixed: list[list[str]] = []
    fixed_at: list[int] = []
    for i in np.flatnonzero(~ok):
        text = lines[i].as_py()
        try:
            values = splitter.split(text, int(lineno[i]))
        except HeaderMismatch:
            raise   # the whole dump, not this line
        except ParseError as exc:
            bad.rows.append(BadRow(bad.source, int(lineno[i]), _reason(exc), text))
            continue
        held.update(nm for nm, v in zip(names, values) if d in v)
        rejoined.append(int(lineno[i]))
        fixed.append(values)
        fixed_at.append(i)
    if fixed:
        for c in include:
            k = names.index(c)
            columns[c].append(pa.array([v[k] for v in fixed], pa.string()))
        order.append(np.array(fixed_at, dtype=np.int64))
    rows = np.concatenate(order)
    values = {c: pa.concat_arrays([a.cast(pa.string()) for a in columns[c]]) for c in include}
    reasons = np.full(len(rows), None, dtype=object)
    typed = {}
    for c in include:
        typed[FIELDS[c.strip().lower()][0]] = _convert(values[c], types[c], c, reasons, runs.time_forms)
    t = pa.table(typed) if typed else pa.table({})
    for mask, why in _problems(t, labels, runs.zone):
        for i in np.flatnonzero(mask):
            if reasons[i] is None:
                reasons[i] = why(int(i))
    # bytes that are not UTF-8: read as U+FFFD in free text (a job name), a bad row anywhere else
    for j in np.flatnonzero(np.isin(lineno[rows], list(bad_bytes))) if bad_bytes else []:
        if reasons[j] is not None:
            continue
        where = [c for c in include if "\ufffd" in (values[c][j].as_py() or "") and _kind_of(c) != "text"]
        if where:
            reasons[j] = f"field {where[0]}: bytes that are not UTF-8"
        else:
            replaced.append(int(lineno[rows[j]]))
    cr = pc.match_substring(lines, "\r").to_numpy(zero_copy_only=False)
    good = np.array([r is None for r in reasons], dtype=bool)
    with_cr.extend(int(x) for x in lineno[rows[good & cr[rows]]])
    for j in np.flatnonzero(~good):
        bad.rows.append(BadRow(bad.source, int(lineno[rows[j]]), reasons[j], lines[int(rows[j])].as_py()))
    if good.any():
        runs.take(t.filter(pa.array(good)))


def _kind_of(field_name: str) -> str:
    from slurmtools.slurm.parsable import _kind

    return _kind(field_name)


def _reason(exc: ParseError) -> str:
    """The message of a ParseError without its `file:line: ` prefix (the bad-row list has its own columns)."""
    s = str(exc)
    prefix = f"{exc.source}:{exc.line}: " if exc.line is not None else f"{exc.source}: "
    return s[len(prefix):] if s.startswith(prefix) else s


def _convert(values: pa.Array, typ: pa.DataType, label: str, reasons: np.ndarray, forms: dict | None = None
             ) -> pa.Array:
    """Text -> the field's type, as arrow's reader would; a value that does not convert is null and its row gets
    a reason. `forms` counts, per time field, the values given and those not in sacct's standard form."""
    if typ == pa.string():
        return values
    nulls = pc.is_in(values, pa.array(_NULLS)).to_numpy(zero_copy_only=False)
    if pa.types.is_timestamp(typ):
        got = pc.strptime(values, format="%Y-%m-%dT%H:%M:%S", unit="s", error_is_null=True)
        got = pc.coalesce(got, pc.strptime(values, format="%Y-%m-%d %H:%M:%S", unit="s", error_is_null=True))
        what = "is not a time (YYYY-MM-DDTHH:MM:SS)"
    else:
        fits = pc.match_substring_regex(values, r"^-?\d{1,9}$")
        got = pc.cast(pc.if_else(fits, values, pa.scalar(None, pa.string())), pa.int64()).cast(typ)
        what = "is not a whole number"
    wrong = pc.is_null(got).to_numpy(zero_copy_only=False) & ~nulls
    if forms is not None and pa.types.is_timestamp(typ):
        f = forms.setdefault(label, [0, 0, None])
        f[0] += int((~nulls).sum())
        f[1] += int(wrong.sum())
        if f[2] is None and wrong.any():
            f[2] = values[int(np.argmax(wrong))].as_py()
    for i in np.flatnonzero(wrong):
        if reasons[i] is None:
            reasons[i] = f"field {label}: {values[int(i)].as_py()!r} {what}"
    return pc.if_else(pa.array(nulls), pa.scalar(None, typ), got)


def _flag(a) -> np.ndarray:
    """A boolean arrow result as numpy, null read as False."""
    return pc.fill_null(a, False).to_numpy(zero_copy_only=False).astype(bool)


#: a time field is in another form than sacct's standard one when more than this share of its values are
TIME_FORM_SHARE = 0.5
#: SLURM_TIME_FORMAT=relative's forms (Slurm's `slurm_make_time_str`): `14:00:00` today, `Ystday 14:00`,
#: `Tomorr 08:00`, `Tue 14:00` within the week, `12 Mar 14:00`, `12 Mar 2025 14:00`
_RELATIVE = re.compile(r"^(?:\d\d:\d\d:\d\d|(?:Ystday|Tomorr|Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d\d:\d\d|"
                       r"\s?\d{1,2} [A-Z][a-z]{2}(?: \d{4})? \d\d:\d\d)$")


def _time_forms(forms: dict, source: str) -> None:
    """A ParseError when a time field as a whole is not in sacct's standard form: the dump was written under a
    user's SLURM_TIME_FORMAT (`relative`, `%s`, ...), and every row would be bad for it."""
    for label, (given, wrong, example) in forms.items():
        if not given or wrong <= TIME_FORM_SHARE * given:
            continue
        ex = str(example).strip()
        fmt = ("=%s" if ex.isdigit() else "=relative" if _RELATIVE.match(str(example)) else None)
        written = (f"the dump was written under SLURM_TIME_FORMAT{fmt}" if fmt
                   else "the dump was written under a SLURM_TIME_FORMAT other than standard")
        raise ParseError(source, None, f"{label} values like {example!r} are not sacct's standard times "
                                       f"(YYYY-MM-DDTHH:MM:SS; {wrong:,} of {given:,}): {written}; write it again "
                                       f"with SLURM_TIME_FORMAT=standard")


def _problems(t: pa.Table, labels: dict[str, str], zone=None) -> list[tuple[np.ndarray, object]]:
    """What Slurm never writes, over a block of typed rows (our column names): (mask of rows, reason of row i).
    Times and counts are checked on every row; GPU counts and the job id on allocation rows; GPU use on steps
    (what the report reads of each). The fast path makes the same checks inside `_reduce`. `zone`: the zone the
    times are in (a time the clocks skipped; End before Start however a repeated time is read)."""
    out = _row_problems(t, labels, zone)
    if not t.num_rows:
        return out
    raw_col = t["job_id_raw"] if "job_id_raw" in t.column_names else t["job_id"]
    is_step = _flag(pc.match_substring(raw_col, "."))
    for c in ("alloc_tres", "req_tres"):
        if c in t.column_names:
            m = _bad_gpu_counts(t[c]) & ~is_step
            out.append((m, lambda i, c=c: f"field {labels[c]}: a GPU count that is not a count of 0 to 999999999 "
                                          f"in {t[c][i].as_py()!r}"))
    if "job_id_raw" in t.column_names:
        m = _bad_job_ids(t["job_id_raw"]) & ~is_step
        out.append((m, lambda i: f"field {labels['job_id_raw']}: {t['job_id_raw'][i].as_py()!r} is not a job id"))
        m = _bad_step_ids(t["job_id_raw"]) & is_step
        out.append((m, lambda i: f"field {labels['job_id_raw']}: {t['job_id_raw'][i].as_py()!r} is not a job id "
                                 f"and step"))
    if "tres_usage_ave" in t.column_names:
        m, why = _usage_problems(t, labels)
        out.append((m & is_step, why))
    return out


def _row_problems(t: pa.Table, labels: dict[str, str], zone=None, instants=None) -> list[tuple[np.ndarray, object]]:
    """Times outside 1970-2200, End before Start, a negative node count: cheap, over every row. In a zone with
    clock changes, also a time the clocks skipped, and End before Start is judged on the instants (`instants`:
    `_instants` of the block, when the caller has it)."""
    out = []
    cols = t.column_names
    for c in ("submit", "eligible", "start", "end"):
        if c in cols and t[c].type == pa.timestamp("s"):
            col = t[c]
            m = _flag(pc.or_(pc.less(col, TIME_MIN), pc.greater_equal(col, TIME_MAX)))
            out.append((m, lambda i, c=c, col=col: f"field {labels[c]}: {col[i].as_py()} is not between 1970 and "
                                                   f"2200"))
    if zone is not None and not zone.fixed and t.num_rows:
        from slurmtools.reports.zone import skipped_why

        got = instants if instants is not None else _instants(t, zone)
        if got is not None:
            r, local = got
            for c, m in r.skipped.items():
                if m.any():
                    out.append((m, lambda i, c=c: f"field {labels[c]}: {t[c][i].as_py():%Y-%m-%dT%H:%M:%S} "
                                                  f"{skipped_why(zone, int(local[c][i]))} (sacct never prints it)"))
            if r.backwards.any():
                # however a repeated hour's times are read
                out.append((r.backwards, lambda i: f"field {labels['end']}: {t['end'][i].as_py()} is before "
                                                   f"{labels['start']} {t['start'][i].as_py()}"))
    elif "start" in cols and "end" in cols and t["start"].type == t["end"].type == pa.timestamp("s"):
        m = _flag(pc.less(t["end"], t["start"]))
        out.append((m, lambda i: f"field {labels['end']}: {t['end'][i].as_py()} is before {labels['start']} "
                                 f"{t['start'][i].as_py()}"))
    for c in ("nnodes", "ntasks"):
        if c in cols and pa.types.is_integer(t[c].type):
            m = _flag(pc.less(t[c], 0))
            out.append((m, lambda i, c=c: f"field {labels[c]}: {t[c][i].as_py()} is negative"))
    return out


_TIMES = ("submit", "eligible", "start", "end")


def elapsed_seconds(t: pa.Table) -> np.ndarray | None:
    """Each row's elapsed seconds from ElapsedRaw, else Elapsed (`[D-]HH:MM:SS`, `MM:SS`); NaN where neither
    reads (a hint only: never a bad row)."""
    out = None
    if "elapsed_raw" in t.column_names:
        v = pc.cast(t["elapsed_raw"], pa.string())
        ok = pc.match_substring_regex(v, r"^\d{1,12}$")
        out = pc.cast(pc.if_else(ok, v, pa.scalar(None, pa.string())), pa.float64()).to_numpy(zero_copy_only=False)
    if "elapsed" in t.column_names:
        m = pc.extract_regex(pc.cast(t["elapsed"], pa.string()),
                             r"^(?:(?P<d>\d{1,5})-)?(?:(?P<h>\d{1,2}):)?(?P<m>\d{1,2}):(?P<s>\d{1,2})$")
        part = [pc.cast(pc.if_else(pc.equal(pc.struct_field(m, [k]), ""), "0", pc.struct_field(m, [k])),
                        pa.float64()).to_numpy(zero_copy_only=False) for k in range(4)]
        e = part[0] * 86400 + part[1] * 3600 + part[2] * 60 + part[3]
        out = e if out is None else np.where(np.isnan(out), e, out)
    return None if out is None else out.astype(float)


def _instants(t: pa.Table, zone):
    """(`zone.resolve` of the block's Submit, Eligible, Start and End, their local seconds), or None without
    any time field."""
    from slurmtools.reports.zone import resolve

    times, local = {}, {}
    for c in _TIMES:
        if c in t.column_names and t[c].type == pa.timestamp("s"):
            col = t[c]
            v = pc.fill_null(pc.cast(col, pa.int64()), 0).to_numpy(zero_copy_only=False)
            given = _flag(pc.is_valid(col))
            times[c], local[c] = (v, given), v
    if not times:
        return None
    return resolve(zone, times, lambda: elapsed_seconds(t)), local


def _bad_job_ids(raw) -> np.ndarray:
    """Allocation rows whose JobIDRaw is not a job id: 1 to 18 ASCII digits (what fits a 64-bit id)."""
    return ~_flag(pc.match_substring_regex(raw, r"^[0-9]{1,18}$"))


def _bad_step_ids(raw) -> np.ndarray:
    """Step rows whose JobIDRaw does not start with a job id and a dot (`1234.batch`): their use belongs to no
    job."""
    return ~_flag(pc.match_substring_regex(raw, r"^[0-9]{1,18}\."))


def _bad_gpu_counts(tres) -> np.ndarray:
    """Rows whose TRES list holds a GPU count that is not 1 to 9 digits (once per distinct TRES string)."""
    return _flag(_by_value(tres, lambda v: pc.match_substring_regex(v, _BAD_GPU)))


def _usage_problems(t: pa.Table, labels: dict[str, str]) -> tuple[np.ndarray, object]:
    """Slurm's gres/gpuutil is the sum over the GPUs a task uses (NVML's per-process SM use added up over
    devices in gpu_nvml.c), so it can pass 100 but never 100 x the step's GPUs; gres/gpumem is a size. The text
    is looked at once per distinct usage string."""
    usage = t["tres_usage_ave"]
    d = pc.dictionary_encode(usage).combine_chunks() if isinstance(usage, pa.ChunkedArray) else \
        pc.dictionary_encode(usage)
    words = d.dictionary

    def item(pattern):
        got = pc.extract_regex(words, pattern)
        return pc.struct_field(got, [0]), _flag(pc.is_valid(got))

    util, has_util = item(r"(?:^|,)gres/gpuutil=(?P<v>[^,]*)")
    mem, has_mem = item(r"(?:^|,)gres/gpumem=(?P<v>[^,]*)")
    if not (has_util.any() or has_mem.any()):
        return np.zeros(t.num_rows, dtype=bool), None
    util_ok = _flag(pc.match_substring_regex(util, _NUMBER))
    util_v = np.where(util_ok, pc.cast(pc.if_else(pa.array(util_ok), util, "0"), pa.float64()).to_numpy(
        zero_copy_only=False), 0.0)
    mem_ok = _flag(pc.match_substring_regex(mem, r"^\d{1,18}(?:\.\d+)?[KMGTP]?$"))
    codes = d.indices.to_numpy(zero_copy_only=False)
    gpus = np.ones(t.num_rows)
    if "alloc_tres" in t.column_names:
        gpus = np.maximum(_gpus(t["alloc_tres"]), 1)
    wrong_word = has_mem & ~mem_ok | has_util & ~util_ok
    m = wrong_word[codes] | (has_util[codes] & (util_v[codes] > 100.0 * gpus))

    def why(i: int) -> str:
        return (f"field {labels['tres_usage_ave']}: gres/gpuutil is not a percentage of the step's GPUs (at most "
                f"100 per GPU) or gres/gpumem is not a size, in {usage[i].as_py()!r}")
    return m, why


def _lines_of(blob: bytes, rows: list[tuple[int | None, str]]) -> list[tuple[int | None, str]]:
    """The line number of each row's text, in one pass (a `--delimiter=,` dump repairs nearly every row)."""
    wanted = {t for _, t in rows}
    where: dict[str, int] = {}
    for i, ln in enumerate(blob.decode(errors="replace").split("\n"), start=1):  # arrow's rows end at LF (or CR)
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


def _int_of(arr, pattern: str, missing: str = "0") -> np.ndarray:
    def f(values):
        got = pc.extract_regex(values, pattern)
        return pc.cast(pc.if_else(pc.is_valid(got), pc.struct_field(got, [0]), missing), pa.int64())
    return _by_value(arr, f).to_numpy(zero_copy_only=False)


def _gpus(arr) -> np.ndarray:
    """The GPU count of each TRES list: `gres/gpu=N` where the list has it, else the sum of its typed items.

    Why: with `AccountingStorageTRES=gres/gpu:tesla,gres/gpu:volta` (no plain gres/gpu; slurm.conf(5), "will track
    jobs that explicitly request those GPU types") AllocTRES reads `...,gres/gpu:tesla=2,...` alone, and those GPUs
    were counted as 0 while the row still named its type. Lists already checked by `_bad_gpu_counts`."""
    def f(values):
        plain = pc.extract_regex(values, r"(?:^|,)gres/gpu=(?P<n>\d{1,9})(?:,|$)")
        typed = pc.extract_regex(values, r"(?:^|,)gres/gpu:[^=,]+=(?P<n>\d{1,9})(?:,|$)")
        n = pc.cast(pc.coalesce(pc.struct_field(plain, [0]), pc.struct_field(typed, [0]), pa.scalar("0")),
                    pa.int64())
        several = _flag(pc.and_(pc.is_null(pc.struct_field(plain, [0])),
                                pc.greater(pc.count_substring(values, "gres/gpu:"), 1)))
        if not several.any():
            return n
        out = n.to_numpy(zero_copy_only=False).copy()
        for i in np.flatnonzero(several):  # typed items only, of several types: rare, once per distinct list
            out[i] = sum(int(m) for m in re.findall(r"(?:^|,)gres/gpu:[^=,]+=(\d{1,9})(?=,|$)", values[int(i)].as_py()))
        return pa.array(out)
    return _by_value(arr, f).to_numpy(zero_copy_only=False)


def _reduce(table: pa.Table, check: bool = False, zone=None) -> tuple[pa.Table, "_StepUse", int, int]:
    """One block: allocation rows with TRES reduced to GPU counts and type (and `gpu_share`: a share of a GPU and
    no whole one); steps reduced to (job, gpuutil, gpumem MB, cluster). With `check` (the fast path), raise _Dirty
    on a row `_problems` would list, reusing what the reduction computes anyway. With `zone`, the allocation
    rows' times become UTC instants; the last item is how many of them had a repeated time nothing told apart."""
    whole = _instants(table, zone) if zone is not None and table.num_rows else None
    if check and any(m.any() for m, _ in _row_problems(table, {}, zone, whole)):
        raise _Dirty()
    raw_col = table["job_id_raw"] if "job_id_raw" in table.column_names else table["job_id"]
    is_step = pc.match_substring(raw_col, ".")
    steps = table.filter(is_step)
    jobs = table.filter(pc.invert(is_step))
    if check and "job_id_raw" in steps.column_names and _bad_step_ids(steps["job_id_raw"]).any():
        raise _Dirty()
    use = _step_gpu_util(steps, check)
    n = jobs.num_rows
    if "job_id" not in jobs.column_names:
        jobs = jobs.append_column("job_id", jobs["job_id_raw"])
    if "job_id_raw" in jobs.column_names:
        try:
            if check and _bad_job_ids(jobs["job_id_raw"]).any():
                raise _Dirty()
            raw = pc.cast(jobs["job_id_raw"], pa.int64())  # allocations' raw ids are plain numbers
        except pa.ArrowInvalid:
            raw_num = pc.extract_regex(jobs["job_id_raw"], r"^(?P<id>\d+)")
            raw = pc.cast(pc.if_else(pc.is_valid(raw_num), pc.struct_field(raw_num, [0]), "-1"), pa.int64())
    else:
        raw = pa.array(np.zeros(n, dtype=np.int64))  # decided in _finish, over all blocks at once

    alloc = _col(jobs, "alloc_tres", "")
    req = _col(jobs, "req_tres", "")
    if check and n and ((("alloc_tres" in jobs.column_names) and _bad_gpu_counts(alloc).any())
                        or (("req_tres" in jobs.column_names) and _bad_gpu_counts(req).any())):
        raise _Dirty()
    gpus = _gpus(alloc)
    energy = _int_of(alloc, r"(?:^|,)energy=(?P<j>\d{1,18})(?:,|$)", missing="-1")
    req_gpus = _gpus(req)

    def first_type(values):
        t = pc.extract_regex(values, r"gres/gpu:(?P<t>[^=,]+)=(?P<n>\d+)")
        return pc.if_else(pc.is_valid(t), pc.struct_field(t, [0]), "")

    typed = _by_value(alloc, first_type)
    gpu_type = pc.if_else(pc.not_equal(typed, ""), typed, pc.if_else(pc.greater(pa.array(gpus), 0), "untyped", ""))
    multi = _by_value(alloc, lambda v: pc.greater(pc.count_substring(v, "gres/gpu:"), 1))

    def first_word(values):
        w = pc.extract_regex(values, r"^(?P<s>[A-Z_]+)")
        return pc.if_else(pc.is_valid(w), pc.struct_field(w, [0]), "UNKNOWN")

    instants = None
    if whole is not None and n:
        at = np.flatnonzero(~_flag(is_step))
        instants = ({c: v[at] for c, v in whole[0].times.items()}, whole[0].unresolved[at])
    unresolved = int(instants[1].sum()) if instants is not None else 0

    def ts(name):
        c = _col(jobs, name, None)
        if c.type != pa.timestamp("s"):
            return pa.array([None] * n, type=pa.timestamp("s"))
        if instants is not None and name in instants[0]:
            return pa.array(instants[0][name].astype("datetime64[s]"), mask=~_flag(pc.is_valid(c)))
        return c

    out = {
        "job_id": jobs["job_id"], "job_id_raw": raw, "name": _col(jobs, "name", ""),
        "user": _col(jobs, "user", ""), "account": _col(jobs, "account", ""),
        "partition": _col(jobs, "partition", ""), "qos": _col(jobs, "qos", ""),
        "state": _by_value(jobs["state"], first_word), "exit_code": _col(jobs, "exit_code", ""),
        "submit": ts("submit"), "eligible": ts("eligible"), "start": _started(jobs, ts("start")), "end": ts("end"),
        "nodelist": _col(jobs, "nodelist", ""),
        "nnodes": pc.cast(pc.fill_null(jobs["nnodes"], 0), pa.int32()) if "nnodes" in jobs.column_names
        else pa.array(np.zeros(n, dtype=np.int32)),
        "gpus": pa.array(gpus.astype(np.int32)), "gpu_type": gpu_type,
        "req_gpus": pa.array(req_gpus.astype(np.int32)), "cluster": _col(jobs, "cluster", ""),
        "energy_slurm_j": pa.array(np.where(energy >= 0, energy, np.nan).astype(np.float64)),
        "alloc_multi": pc.if_else(multi, alloc, ""),
        "gpu_share": pa.array((gpus == 0) & _flag(_by_value(alloc, lambda v: pc.match_substring_regex(v, _SHARE)))),
    }
    return pa.table({k: (v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v) for k, v in out.items()}), \
        use, steps.num_rows, unresolved


def _started(jobs: pa.Table, start):
    """Start, unset for a run whose NodeList names no host: it ran nowhere (Slurm 16.05 wrote a job cancelled while
    pending with Start = End, the time it was cancelled, which the report counted as a wait and a run). Kept as
    read without a NodeList field, which cannot tell."""
    if "nodelist" not in jobs.column_names or not jobs.num_rows:
        return start
    hosts = jobs["nodelist"]
    nowhere = pc.or_(pc.is_null(hosts), pc.is_in(pc.utf8_trim_whitespace(pc.fill_null(hosts, "")),
                                                 value_set=pa.array(sorted(NO_HOST))))
    return pc.if_else(nowhere, pa.scalar(None, type=start.type), start)


def _finish(table: pa.Table | None, schema, step_ids: np.ndarray, step_utils: np.ndarray,
            have_raw: bool, step_mems: np.ndarray | None = None, step_clusters: pa.Array | None = None,
            cluster: str | None = None, source: str = "", notes: list[str] | None = None,
            step_jobs: pa.Array | None = None) -> pd.DataFrame:
    if table is None or table.num_rows == 0:
        return empty_jobs()
    if step_clusters is None or len(step_clusters) != len(step_ids):
        step_clusters = _blank(len(step_ids))
    if step_jobs is None or len(step_jobs) != len(step_ids):
        step_jobs = _blank(len(step_ids))
    names = [c for c in pc.unique(table["cluster"]).to_pylist() if c]
    several = len(names) > 1
    if several and cluster is not None:
        # job ids are per cluster: the site's own rows, the others counted in a note (`sacct -M` dumps one)
        from slurmtools.slurm.parsable import pick_cluster

        pick_cluster(source, names, cluster)
        mine = pc.equal(table["cluster"], cluster)
        left = table.num_rows - pc.sum(mine).as_py()
        table = table.filter(mine)
        at = _flag(pc.equal(step_clusters, cluster))
        step_ids, step_utils, step_clusters = step_ids[at], step_utils[at], step_clusters.filter(pa.array(at))
        step_jobs = step_jobs.filter(pa.array(at))
        step_mems = step_mems[at] if step_mems is not None and len(step_mems) == len(at) else step_mems
        if notes is not None:
            notes.append(f"{left} job run row(s) of other clusters ({', '.join(n for n in names if n != cluster)}) "
                         f"left out: the site file names cluster {cluster} (the dump holds {len(names)} clusters)")
        several = False
    shared = pc.fill_null(table["gpu_share"], False)
    if notes is not None and pc.any(shared).as_py():
        first = table["job_id"].filter(shared)[0].as_py()
        notes.append(f"{pc.sum(shared).as_py()} job run(s) held shares of a GPU (gres/shard or gres/mps) and no whole "
                     f"GPU: not counted in GPU-hours, which count whole GPUs (first: job {first})")
    table = table.drop_columns(["gpu_share"])
    if not have_raw:
        # without JobIDRaw, "123_4" is not a number: plain ids keep their value, others get a negative code, coded
        # alongside the steps' job parts so `123_4.batch` and `77+1.0` join their own array task or het component
        # (their leading number, the array's or het job's, is no allocation row's id)
        n = table.num_rows
        keys = _text_keys(pa.concat_arrays([pc.cast(table["job_id"], pa.string()).combine_chunks(),
                                            pc.cast(step_jobs, pa.string())]))
        table = table.set_column(table.column_names.index("job_id_raw"), "job_id_raw", pa.array(keys[:n]))
        step_ids = keys[n:]
    alloc_multi = table["alloc_multi"]
    multi = pc.not_equal(alloc_multi, "").to_numpy(zero_copy_only=False)
    table = table.drop_columns(["alloc_multi"])
    # a dump of several clusters: a job is (Cluster, JobIDRaw), each cluster counts its own ids
    by = pc.fill_null(pc.index_in(table["cluster"], value_set=pa.array(names, pa.string())), -1).to_numpy(
        zero_copy_only=False) if several else None
    cols = {}
    for k in table.column_names:
        # categories in order of first appearance in the dump (encoded before the rows are sorted)
        cols[k] = pc.dictionary_encode(table[k]) if k in _LOW_CARD else table[k]
    table = pa.table(cols)
    order, seen = _once(table["start"].to_numpy(), table["job_id_raw"].to_numpy(), by)
    if seen and notes is not None:
        notes.append(f"{seen} job run row(s) printed again (the same job and start: dumps of overlapping windows "
                     f"joined) were counted once, as the later row has it")
    if not multi.any():
        # sorted by job and start here, in arrow, before pandas makes its columns
        table = table.take(order)
    elif seen:
        kept = np.sort(order)
        table, multi = table.take(kept), multi[kept]
        alloc_multi = alloc_multi.take(pa.array(kept))
        by = by[kept] if by is not None else None
    frame = table.to_pandas()
    if several:
        key = pd.MultiIndex.from_arrays([frame["cluster"].astype(str).to_numpy(), frame["job_id_raw"].to_numpy()])
        step_key = [step_clusters.to_numpy(zero_copy_only=False).astype(str), step_ids]
    else:
        key, step_key = frame["job_id_raw"].to_numpy(), step_ids
    if len(step_ids) and notes is not None:
        _note_lost_steps(key, step_key, step_ids if have_raw else step_jobs, several, notes)
    frame["gpu_util_slurm"] = np.float32(np.nan)
    if len(step_ids):
        best = pd.Series(step_utils).groupby(step_key).max()
        frame["gpu_util_slurm"] = best.reindex(key).to_numpy().astype(np.float32)
    frame["gpu_mem_slurm_mb"] = np.float32(np.nan)
    if len(step_ids) and step_mems is not None and len(step_mems):
        peak = pd.Series(step_mems).groupby(step_key).max()  # the busiest step; NaN where no step had gpumem
        frame["gpu_mem_slurm_mb"] = peak.reindex(key).to_numpy().astype(np.float32)
    if multi.any():
        frame = _split_multi_type(frame, np.asarray(alloc_multi.to_pylist(), dtype=object), multi)
        codes = frame["cluster"].cat.codes.to_numpy() if several else None
        frame = frame.iloc[_run_order(frame["start"].to_numpy(), frame["job_id_raw"].to_numpy(), codes)]
    return frame.reset_index(drop=True)


def _text_keys(ids: pa.Array) -> np.ndarray:
    """JobIDRaw stand-ins from JobID text: a plain id keeps its value, any other text a negative code of its own
    (in order of first appearance), alike wherever the same text appears."""
    ids = pc.fill_null(ids, "")
    plain = pc.match_substring_regex(ids, r"^[0-9]{1,18}$")
    value = pc.cast(pc.if_else(plain, ids, "0"), pa.int64()).to_numpy(zero_copy_only=False)
    codes = pc.dictionary_encode(ids).indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return np.where(_flag(plain), value, -(codes + 1))


def _note_lost_steps(key, step_key, names, several: bool, notes: list[str]) -> None:
    """Say how many steps reporting GPU use have no allocation row in the dump (a dump cut by hand, `sacct -s`
    picking the steps' state): their use belongs to no job run, so the report leaves it out."""
    if several:
        lost = ~pd.MultiIndex.from_arrays(step_key).isin(key)
    else:
        lost = ~np.isin(step_key, key)
    if lost.any():
        first = names[int(np.argmax(lost))]
        first = first.as_py() if isinstance(first, pa.Scalar) else first
        notes.append(f"{int(lost.sum())} step(s) reporting GPU use (gres/gpuutil, gres/gpumem) have no allocation "
                     f"row in the dump: their use is left out, it belongs to no job run here (first: job {first})")


def _blank(n: int) -> pa.Array:
    """n empty Cluster values (a dump without the field), built in arrow."""
    return pc.fill_null(pa.nulls(n, pa.string()), "")


def _once(start: np.ndarray, job_id_raw: np.ndarray, cluster: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """(`_run_order` less the rows that repeat an earlier one's job and start, how many such rows).

    Why: a day's `sacct -S d -E d+1` lists every job active that day, so dumps of consecutive days joined (a cron
    job appending to one file) print a job that spans midnight twice, RUNNING then COMPLETED; its GPU-hours were
    counted twice. Runs of a requeued job (`-D`) and the rows of a resize start at other times; rows never started
    are all kept. Of a repeated run the last row in the dump is kept (the later dump knows its end)."""
    order = _run_order(start, job_id_raw, cluster)
    s, r = start[order], job_id_raw[order]
    again = (r[1:] == r[:-1]) & (s[1:] == s[:-1]) & ~np.isnat(s[1:])
    if cluster is not None:
        c = cluster[order]
        again &= c[1:] == c[:-1]
    if not again.any():
        return order, 0
    return order[np.concatenate([~again, [True]])], int(again.sum())


def _run_order(start: np.ndarray, job_id_raw: np.ndarray, cluster: np.ndarray | None = None) -> np.ndarray:
    """The frame's order: by job (JobIDRaw, then cluster in a dump of several), then start (never started last),
    then place in the dump (a stable sort)."""
    if cluster is None:
        return np.lexsort((start, job_id_raw))
    return np.lexsort((start, cluster, job_id_raw))


_MEM_UNIT_MB = {"": 1 / 2**20, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2, "P": 1024.0**3}


class _StepUse(NamedTuple):
    """What the steps of a block say about GPU use: per step with a gres/gpuutil or gres/gpumem figure, its job,
    the mean utilisation of its GPUs (percent, NaN where unknown), the GPU memory (MB) and its cluster."""

    ids: np.ndarray
    util: np.ndarray
    mem: np.ndarray
    clusters: pa.Array
    #: steps that report gres/gpuutil but whose GPUs' mean cannot be told (no task count, no GPU in their TRES)
    util_unread: int
    #: in a dump without JobIDRaw, the job part of each step's JobID (`ids` are then coded in `_finish`)
    jobs: pa.Array


def _step_gpu_util(steps: pa.Table, check: bool = False) -> _StepUse:
    """Slurm's own `gres/gpuutil` and `gres/gpumem` (MB; sacct prints it with a unit suffix, bytes without one) from
    the steps' TRESUsageInAve.

    Slurm's gres/gpuutil is not a percentage of a GPU: slurmstepd adds up each of a task's processes' SM use over
    every GPU it sees (`_get_gpuutil` in gpu_nvml.c) and slurmdbd stores the step's total divided by its tasks
    (`_average_tres_usage`). The mean utilisation of the step's GPUs is therefore gpuutil x NTasks / the step's GPUs
    (its AllocTRES gres/gpu). A batch step is one task; any other step needs NTasks in the dump, else its figure is
    not read (counted in `util_unread`, said in the report's notes), never taken for a percentage."""
    none = _StepUse(np.array([], np.int64), np.array([], np.float64), np.array([], np.float64), _blank(0), 0,
                    _blank(0))
    if steps.num_rows == 0 or "tres_usage_ave" not in steps.column_names:
        return none
    tres = steps["tres_usage_ave"]
    have = pc.or_(pc.match_substring(tres, "gres/gpuutil="), pc.match_substring(tres, "gres/gpumem="))
    if not pc.any(have).as_py():
        return none
    s = steps.filter(have)
    if check and _usage_problems(s, {})[0].any():
        raise _Dirty()

    def num(pattern):
        return pc.extract_regex(s["tres_usage_ave"], pattern)

    util = num(r"gres/gpuutil=(?P<u>[\d.]+)")
    u = pc.cast(pc.struct_field(util, [0]), pa.float64()).to_numpy(zero_copy_only=False)
    mem = num(r"gres/gpumem=(?P<v>[\d.]+)(?P<unit>[KMGTP]?)")
    v = pc.cast(pc.struct_field(mem, [0]), pa.float64()).to_numpy(zero_copy_only=False)
    units = pc.fill_null(pc.struct_field(mem, [1]), "")
    # each unit's factor looked up in arrow, not by a Python lookup per step
    at = pc.index_in(units, value_set=pa.array(list(_MEM_UNIT_MB))).to_numpy(zero_copy_only=False)
    m = v * np.array(list(_MEM_UNIT_MB.values()))[at]
    if "job_id_raw" in s.column_names:
        raw = s["job_id_raw"]
        ids = pc.cast(pc.struct_field(pc.extract_regex(raw, r"^(?P<i>\d+)"), [0]), pa.int64()).to_numpy(
            zero_copy_only=False)
        jobs = _blank(0)
    else:
        # the whole job part: `123_4.batch` is array task 123_4's, `77+1.0` het component 77+1's, not job 123's or
        # 77's (JobID text before the step's dot; a het step `2010.0+1` is job 2010's)
        raw = s["job_id"]
        ids = np.zeros(s.num_rows, np.int64)
        jobs = pc.fill_null(pc.struct_field(pc.extract_regex(raw, r"^(?P<j>[^.]*)"), [0]), "")
        jobs = jobs.combine_chunks() if isinstance(jobs, pa.ChunkedArray) else jobs
    # the step's GPUs and tasks: the mean over its GPUs is the figure x tasks / GPUs
    gpus = (_gpus(s["alloc_tres"]).astype(np.float64)
            if "alloc_tres" in s.column_names else np.zeros(s.num_rows))
    tasks = np.full(s.num_rows, np.nan)
    if "ntasks" in s.column_names:
        tasks = pc.cast(s["ntasks"], pa.float64()).to_numpy(zero_copy_only=False)
    batch = _flag(pc.match_substring_regex(raw, r"\.batch$"))
    tasks = np.where(np.isnan(tasks) & batch, 1.0, tasks)  # the batch script is the batch step's one task
    known = (gpus > 0) & (tasks > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_gpu = np.where(known, u * tasks / np.where(known, gpus, 1.0), np.nan)
    unread = int((~np.isnan(u) & ~known).sum())
    clusters = pc.fill_null(s["cluster"], "").combine_chunks() if "cluster" in s.column_names else \
        _blank(s.num_rows)
    return _StepUse(ids, per_gpu, m, clusters, unread, jobs)


def _split_multi_type(frame: pd.DataFrame, alloc: np.ndarray, multi: np.ndarray) -> pd.DataFrame:
    """A job holding GPUs of several types becomes one row per type, so every row has a single GPU type."""
    from slurmtools.slurm.tres import parse_tres

    keep = frame[~multi]
    rows = []
    for i in np.flatnonzero(multi):
        # its GPU items only: they passed `_bad_gpu_counts`; the rest of the list is not read here
        t = parse_tres(",".join(it for it in alloc[i].split(",") if it.startswith("gres/gpu") and "=" in it))
        total = sum(t.gpus_by_type.values()) or 1
        for typ, cnt in t.gpus_by_type.items():
            r = frame.iloc[i].copy()
            r["gpu_type"], r["gpus"] = typ, cnt
            r["energy_slurm_j"] = r["energy_slurm_j"] * cnt / total  # the job's energy shared by GPU count
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
