"""Append-only JSON-lines decision log: every admission refusal, preemption and requeue, one line each.

API (all of it)::

    from slurmtools import audit
    audit.record("admission_refused", job=None, user="alice", details={"policy": "tier-limits", "message": "..."})
    audit.record("preempted", job=1234, user="bob", details={"qos": "scavenger"}, path="/var/spool/slurmtools/decisions.jsonl")
    for event in audit.read(path): ...

Each call is ONE `write()` on a descriptor opened with O_APPEND, so lines from concurrent writers (slurmd hooks on
many nodes, the CLI, job_submit helpers) never interleave on a local filesystem; the file is opened with
O_NOFOLLOW so a symlink planted in its place is refused instead of followed. Where the log lives: the `path`
argument, else `$SLURMTOOLS_AUDIT_LOG`, else `decisions.jsonl` in `$SLURMTOOLS_SPOOL_DIR`, else in
`/var/spool/slurmtools`. Standard library only: the hooks import it.
"""

from __future__ import annotations

import json
import os
import time as _time
from pathlib import Path
from typing import Any, Iterator

from slurmtools.errors import SlurmtoolsError

#: events other modules write; free-form events are allowed too, these are the ones reports know
EVENTS = ("admission_refused", "admission_modified", "preempted", "requeued", "time_limit", "node_drained")
LOG_NAME = "decisions.jsonl"
DEFAULT_SPOOL = "/var/spool/slurmtools"
#: a record larger than this is refused: a log line must stay one atomic write and readable
MAX_LINE = 64 * 1024


class AuditError(SlurmtoolsError):
    """The decision log could not be written or read; the message says which file and why."""


def default_path() -> Path:
    env = os.environ.get("SLURMTOOLS_AUDIT_LOG")
    if env:
        return Path(env)
    return Path(os.environ.get("SLURMTOOLS_SPOOL_DIR") or DEFAULT_SPOOL) / LOG_NAME


def record(event: str, job: int | str | None = None, user: str | None = None,
           details: dict[str, Any] | None = None, *, path: str | os.PathLike | None = None,
           time: float | None = None) -> dict[str, Any]:
    """Append one event; returns the record written. Raises AuditError (one line) if it cannot."""
    if not isinstance(event, str) or not event or any(c.isspace() for c in event):
        raise AuditError(f"audit: event must be a non-empty word, got {event!r}")
    rec: dict[str, Any] = {
        "time": round(_time.time() if time is None else float(time), 3),
        "event": event,
        "job": _job_id(job),
        "user": user,
        "details": details or {},
    }
    try:
        line = json.dumps(rec, sort_keys=True, separators=(",", ":"), default=str) + "\n"
    except (TypeError, ValueError) as e:
        raise AuditError(f"audit: details of {event!r} are not JSON-serialisable: {e}") from None
    data = line.encode("utf-8", "replace")
    if len(data) > MAX_LINE:
        raise AuditError(f"audit: record of {event!r} is {len(data)} bytes, over the {MAX_LINE}-byte limit")
    p = Path(path) if path is not None else default_path()
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
    return rec


def read(path: str | os.PathLike | None = None, strict: bool = False) -> Iterator[dict[str, Any]]:
    """Yield the records in order. A torn or foreign line is skipped, or raises AuditError when `strict`."""
    p = Path(path) if path is not None else default_path()
    try:
        f = open(p, "rb")
    except FileNotFoundError:
        return
    except OSError as e:
        raise AuditError(f"audit: cannot read {p}: {e.strerror}") from None
    with f:
        for n, raw in enumerate(f, 1):
            try:
                rec = json.loads(raw)
                if not isinstance(rec, dict) or "event" not in rec:
                    raise ValueError("not an event record")
            except ValueError as e:
                if strict:
                    raise AuditError(f"{p}:{n}: bad decision-log line: {e}") from None
                continue
            yield rec


def _job_id(job: int | str | None) -> int | str | None:
    if job is None or isinstance(job, int):
        return job
    s = str(job).strip()
    return int(s) if s.isdigit() else s
