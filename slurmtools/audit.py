"""Append-only JSON-lines decision log: every admission, modification (re-route), refusal, preemption checkpoint,
requeue and QoS sync change, one line each, each carrying the policy hash that decided and its writer's sequence.

API (all of it)::

    from slurmtools import audit
    audit.record("admission_refused", job=None, user="alice", details={"policy": "tier-limits", "message": "..."})
    audit.record("preempted", job=1234, user="bob", details={"qos": "scavenger"}, path="/var/spool/slurmtools/decisions.jsonl")
    for event in audit.read(path): ...
    for problem in audit.verify(path): ...   # gaps, reordered or repeated lines, lines that are not records

Each call is ONE `write()` on a descriptor opened with O_APPEND, so lines from concurrent writers (slurmd hooks on
many nodes, the CLI, job_submit.lua in slurmctld) never interleave on a local filesystem; the file is opened with
O_NOFOLLOW so a symlink planted in its place is refused instead of followed. Where the log lives: the `path`
argument, else `$SLURMTOOLS_AUDIT_LOG`, else `decisions.jsonl` in `$SLURMTOOLS_SPOOL_DIR`, else in
`/var/spool/slurmtools`. Standard library only: the hooks import it.

Why per-writer sequences (docs/policy.md, "The decision log"): writers on many hosts append to one file with no
common lock, so no global order exists to check. Each writer (`writer`, e.g. `epilog@gpu01`,
`job_submit.lua@ctl`) numbers its own records 1, 2, 3 ... under a lock on its own counter file beside the log
(`<log>.seq.<writer>`, `seq_name`); `verify` then finds a deleted line (a gap), a moved line (a number out of
order) and a deleted last line (the counter is ahead of the log). The policy hash (`policy`) is the caller's, else
the one the loaded job_submit.lua left beside the log (`<log>.policy`), else null (which verify reports).

Every line is valid UTF-8 JSON, whatever the values: a byte that is not part of valid UTF-8 (job_submit.lua gets
job options as bytes; os.fsdecode turns such bytes into lone surrogates) is written as the four characters `\\xHH`
(`text`), so the reader never skips a record a user's odd `--account` produced.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import sys
import time as _time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from slurmtools.errors import SlurmtoolsError

#: events other modules write; free-form events are allowed too, these are the ones reports know
EVENTS = ("admission_allowed", "admission_refused", "admission_modified", "preempted", "requeued", "time_limit",
          "node_drained", "qos_sync")
LOG_NAME = "decisions.jsonl"
DEFAULT_SPOOL = "/var/spool/slurmtools"
#: a record larger than this is refused: a log line must stay one atomic write and readable
MAX_LINE = 64 * 1024
#: the latest record time `slurmtools audit show` can print (9999-12-30 UTC: a local date in year 9999 anywhere)
MAX_TIME = 253402128000.0


class AuditError(SlurmtoolsError):
    """The decision log could not be written or read; the message says which file and why."""


def default_path() -> Path:
    env = os.environ.get("SLURMTOOLS_AUDIT_LOG")
    if env:
        return Path(env)
    return Path(os.environ.get("SLURMTOOLS_SPOOL_DIR") or DEFAULT_SPOOL) / LOG_NAME


_WRITER_CHARS = re.compile(r"[^A-Za-z0-9@._-]")


def default_writer() -> str:
    """`<program>@<node>`: $SLURMTOOLS_AUDIT_WRITER, else the program's name and the Slurm node or host name."""
    env = os.environ.get("SLURMTOOLS_AUDIT_WRITER")
    if env:
        return env
    prog = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    return f"{prog or 'python'}@{os.environ.get('SLURMD_NODENAME') or socket.gethostname()}"


def seq_name(writer: str) -> str:
    """The writer id as a file name, one-to-one: `[A-Za-z0-9@._-]` as is (the names counters always had), any
    other byte of its UTF-8 as `%HH` (`a b@n` -> `a%20b@n`, never `a_b@n`'s file); job_submit.lua does the same.
    A name over 200 characters keeps its first 100 and a hash (`%~` cannot come out of the escape)."""
    name = _WRITER_CHARS.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8", "surrogatepass")),
                             writer)
    if len(name) > 200:
        name = f"{name[:100]}%~{hashlib.sha256(name.encode('ascii')).hexdigest()[:32]}"
    return name


def seq_path(log: Path, writer: str) -> Path:
    """The counter file of one writer beside the log (the Lua writer uses the same name)."""
    return Path(f"{log}.seq.{seq_name(text(writer))}")


_SURROGATES = re.compile("[\ud800-\udfff]+")


def text(s: str) -> str:
    """`s` as valid UTF-8 text, as job_submit.lua writes bytes: each byte os.fsdecode could not decode (a lone
    surrogate U+DC80..U+DCFF) becomes the four characters `\\xHH`, the same bytes joined that do decode stay
    characters, and any other lone surrogate becomes `\\uXXXX`. A str that encodes as UTF-8 comes back as it is."""
    if not _SURROGATES.search(s):
        return s
    return _SURROGATES.sub(_surrogate_text, s)


def _surrogate_text(m: re.Match) -> str:
    run = m.group()
    if all("\udc80" <= c <= "\udcff" for c in run):
        return run.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(text(c) if "\udc80" <= c <= "\udcff" else f"\\u{ord(c):04x}" for c in run)


def _texts(obj: Any) -> Any:
    """Every str of a record (keys too) through `text`; other values as json.dumps would see them."""
    if isinstance(obj, str):
        return text(obj)
    if isinstance(obj, dict):
        return {(text(k) if isinstance(k, str) else k): _texts(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_texts(v) for v in obj]
    return obj


def policy_path(log: Path) -> Path:
    """Where the loaded job_submit.lua leaves its policy hash, for writers that do not evaluate the policy."""
    return Path(f"{log}.policy")


def current_policy(log: Path) -> str | None:
    try:
        text = policy_path(log).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if re.fullmatch(r"[0-9a-f]{16,64}", text) else None


def record(event: str, job: int | str | None = None, user: str | None = None,
           details: dict[str, Any] | None = None, *, path: str | os.PathLike | None = None,
           time: float | None = None, policy: str | None = None, writer: str | None = None) -> dict[str, Any]:
    """Append one event; returns the record written. Raises AuditError (one line) if it cannot.

    The writer's counter is locked from reading the next number until the line is written, so concurrent
    processes of one writer id (epilogs of one node) still number their lines 1, 2, 3 in file order."""
    import fcntl

    if not isinstance(event, str) or not event or any(c.isspace() for c in event):
        raise AuditError(f"audit: event must be a non-empty word, got {event!r}")
    when = _time.time() if time is None else _record_time(time)
    p = Path(path) if path is not None else default_path()
    w = text(writer or default_writer())
    rec: dict[str, Any] = {
        "time": round(when, 3),
        "event": event,
        "job": _job_id(job),
        "user": user,
        "details": details or {},
        "policy": policy or current_policy(p),
        "writer": w,
        "seq": 0,
    }
    sp = seq_path(p, w)
    try:
        sfd = os.open(sp, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as e:
        raise AuditError(f"audit: cannot open the sequence file {sp}: {e.strerror}") from None
    try:
        fcntl.flock(sfd, fcntl.LOCK_EX)
        rec["seq"] = (_counter(os.pread(sfd, 64, 0)) or 0) + 1
        data = _line(rec)
        _append(p, data)
        os.pwrite(sfd, b"%d\n" % rec["seq"], 0)
        os.ftruncate(sfd, len(b"%d\n" % rec["seq"]))
    except OSError as e:
        raise AuditError(f"audit: cannot update the sequence file {sp}: {e.strerror}") from None
    finally:
        os.close(sfd)
    return rec


def _record_time(time: Any) -> float:
    """A caller's record time, refused unless `audit show` can print it: NaN, 1e300 or a negative time used to be
    written and then stopped every `audit show` of the log with a traceback."""
    try:
        t = float(time)
    except (TypeError, ValueError, OverflowError):
        t = float("nan")
    if isinstance(time, bool) or not 0 <= t <= MAX_TIME:
        raise AuditError(f"audit: time must be seconds since 1970 from 0 to {MAX_TIME:.0f} (year 9999), "
                         f"got {time!r}")
    return t


_COUNTER = re.compile(rb"\s*(\d+)")


def _counter(raw: bytes) -> int | None:
    """The number a counter file starts with (as the Lua writer reads it); None when it holds none."""
    m = _COUNTER.match(raw)
    return int(m.group(1)) if m else None


def _line(rec: dict[str, Any]) -> bytes:
    try:
        line = json.dumps(_texts(rec), sort_keys=True, separators=(",", ":"),
                          default=lambda o: text(str(o))) + "\n"
    except (TypeError, ValueError, RecursionError) as e:
        raise AuditError(f"audit: details of {rec['event']!r} are not JSON-serialisable: {e}") from None
    data = line.encode("utf-8", "replace")
    if len(data) > MAX_LINE:
        raise AuditError(f"audit: record of {rec['event']!r} is {len(data)} bytes, over the {MAX_LINE}-byte limit")
    return data


def _append(p: Path, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(p, flags, 0o644)
    except OSError as e:
        raise AuditError(f"audit: cannot open {p}: {e.strerror}") from None
    try:
        n = os.write(fd, data)
        if n != len(data):  # a short write on a regular file means the disk is full; say so, do not retry halves
            raise AuditError(f"audit: short write to {p} ({n} of {len(data)} bytes)")
    except OSError as e:
        raise AuditError(f"audit: cannot write {p}: {e.strerror}") from None
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Problem:
    """One thing `verify` found: the log line it is about (0: the log as a whole) and what is wrong."""

    line: int
    message: str


def verify(path: str | os.PathLike | None = None) -> list[Problem]:
    """Check the log: every line a record with a policy hash, each writer's numbers 1, 2, 3 ... in file order with
    none missing, and each writer's counter file (when readable) not ahead of its last line."""
    p = Path(path) if path is not None else default_path()
    problems: list[Problem] = []
    last: dict[str, tuple[int, int]] = {}  # writer -> (seq, line)
    try:
        f = open(p, "rb")
    except OSError as e:
        return [Problem(0, f"{p}: cannot read: {e.strerror}")]
    with f:
        for n, raw in enumerate(f, 1):
            try:
                rec = json.loads(raw)
                if not isinstance(rec, dict) or not isinstance(rec.get("event"), str):
                    raise ValueError("no event")
            except (ValueError, RecursionError):
                problems.append(Problem(n, "not a decision record (torn, edited or foreign line)"))
                continue
            w, seq = rec.get("writer"), rec.get("seq")
            if not rec.get("policy"):
                problems.append(Problem(n, f"{rec['event']} record carries no policy hash"))
            if not isinstance(w, str) or not w or isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
                problems.append(Problem(n, f"{rec['event']} record has no writer and sequence number"))
                continue
            prev_seq, prev_line = last.get(w, (0, 0))
            where = f"after seq {prev_seq} (line {prev_line})" if prev_line else "as its first line in this log"
            if seq == prev_seq + 1:
                pass
            elif seq > prev_seq + 1:
                k = seq - prev_seq - 1
                problems.append(Problem(n, f"writer {w}: seq {seq} {where}: {k} record(s) missing"))
            else:
                problems.append(Problem(n, f"writer {w}: seq {seq} {where}: out of order or repeated"))
            if seq > prev_seq:
                last[w] = (seq, n)
    for w, (seq, n) in sorted(last.items()):
        sp = seq_path(p, w)
        try:
            raw = sp.read_bytes()
        except OSError:
            continue
        at = _counter(raw)
        if at is None and raw.strip():  # the writer restarts at 1 after it: say why its numbers repeat
            problems.append(Problem(0, f"writer {w}: its counter file {sp} holds no number"))
        elif at is not None and at > seq:
            problems.append(Problem(0, f"writer {w}: its counter is at {at} but its last record is seq {seq} "
                                       f"(line {n}): {at - seq} record(s) missing from the end"))
    return problems


def read(path: str | os.PathLike | None = None, strict: bool = False,
         skipped: list | None = None) -> Iterator[dict[str, Any]]:
    """Yield the records in order. A torn or foreign line is skipped (and, given `skipped`, appended to it as
    (line number, reason, text)), or raises AuditError when `strict`."""
    for _n, _text, rec in read_lines(path, strict, skipped):
        yield rec


def read_lines(path: str | os.PathLike | None = None, strict: bool = False,
               skipped: list | None = None) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(line number, the line's text, record) for every record, as `read`. Blank lines are not records and not
    skipped ones; a line that is not UTF-8 is skipped like a torn one (its text shows U+FFFD)."""
    p = Path(path) if path is not None else default_path()
    try:
        f = open(p, "rb")
    except FileNotFoundError:
        return
    except OSError as e:
        raise AuditError(f"audit: cannot read {p}: {e.strerror}") from None
    with f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            text = raw.decode("utf-8", "replace").rstrip("\n")
            try:
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ValueError(f"not UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})") from None
                try:
                    rec = json.loads(line)
                except (ValueError, RecursionError):
                    raise ValueError("not a decision record (torn or not JSON)") from None
                if not isinstance(rec, dict) or not isinstance(rec.get("event"), str):
                    raise ValueError("not a decision record (no event)")
            except ValueError as e:
                if strict:
                    raise AuditError(f"{p}:{n}: bad decision-log line: {e}") from None
                if skipped is not None:
                    skipped.append((n, str(e), text))
                continue
            yield n, text, rec


def _job_id(job: int | str | None) -> int | str | None:
    if job is None or isinstance(job, int):
        return job
    s = str(job).strip()
    return int(s) if s.isdigit() else s
