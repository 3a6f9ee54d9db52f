"""`slurmtools audit show|verify`: read and check the decision log (slurmtools.audit)."""

from __future__ import annotations

from typing import List, Optional

import typer

from slurmtools.cli.common import fail

audit_app = typer.Typer(help="The decision log: show records, verify that none is missing or out of order.",
                        no_args_is_help=True)

LogOpt = typer.Option(None, "--log", help="The decision log (default: $SLURMTOOLS_AUDIT_LOG, else decisions.jsonl "
                                          "in $SLURMTOOLS_SPOOL_DIR, else in /var/spool/slurmtools)")


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")


def _path(log: Optional[str]):
    from pathlib import Path

    from slurmtools import audit

    p = Path(log) if log else audit.default_path()
    if not p.is_file():
        fail(f"--log {p}: no such file" if log else f"decision log {p}: no such file (give --log)")
    return p


def _when(option: str, text: Optional[str]) -> Optional[float]:
    """A time bound: an ISO date/time (local time unless it says otherwise) or a duration ago ("2h", "7d")."""
    if text is None:
        return None
    import time
    from datetime import datetime

    from slurmtools.durations import parse_duration

    try:
        return time.time() - parse_duration(text)
    except ValueError:
        pass
    try:
        d = datetime.fromisoformat(text)
    except ValueError:
        fail(f"{option}: expected a date/time like 2026-11-24T10:00 or a duration ago like 2h, got {text!r}")
    return (d if d.tzinfo else d.astimezone()).timestamp()


@audit_app.command("show")
def show(log: Optional[str] = LogOpt,
         job: Optional[str] = typer.Option(None, "--job", help="Only this job id"),
         user: Optional[str] = typer.Option(None, "--user", help="Only this user"),
         event: Optional[List[str]] = typer.Option(None, "--event", help="Only these events (repeatable)"),
         since: Optional[str] = typer.Option(None, "--since", help='From this time: "2026-11-24T10:00" or "2h" ago'),
         until: Optional[str] = typer.Option(None, "--until", help="Up to this time (same forms)"),
         json_out: bool = typer.Option(False, "--json", help="The matching records as JSON lines")) -> None:
    """One line per record: time, event, job, user, policy hash, writer#seq, details."""
    import json
    from datetime import datetime

    from slurmtools import audit

    p = _path(log)
    lo, hi = _when("--since", since), _when("--until", until)
    try:
        for rec in audit.read(p):
            t = rec.get("time")
            t = float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None
            if job is not None and str(rec.get("job")) != job:
                continue
            if user is not None and rec.get("user") != user:
                continue
            if event and rec.get("event") not in event:
                continue
            if (lo is not None or hi is not None) and t is None:
                continue
            if (lo is not None and t < lo) or (hi is not None and t > hi):
                continue
            if json_out:
                typer.echo(json.dumps(rec, sort_keys=True))
                continue
            when = datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds") if t is not None else "-"
            details = json.dumps(rec.get("details") or {}, sort_keys=True, separators=(",", ":"))
            typer.echo(f"{when} {rec.get('event')} job={rec.get('job') if rec.get('job') is not None else '-'} "
                       f"user={rec.get('user') or '-'} policy={rec.get('policy') or '-'} "
                       f"{rec.get('writer') or '-'}#{rec.get('seq') if rec.get('seq') is not None else '-'} "
                       f"{details}")
    except audit.AuditError as exc:
        fail(str(exc))


@audit_app.command("verify")
def verify(log: Optional[str] = LogOpt) -> None:
    """Check every line: a record with a policy hash, each writer's sequence without gaps or reordering. Exit 1 and
    one line per problem (with its line number) when anything is wrong."""
    from slurmtools import audit

    p = _path(log)
    problems = audit.verify(p)
    if not problems:
        typer.echo(f"{p}: every record present and in order")
        return
    for pr in problems:
        typer.echo(f"{p}:{pr.line}: {pr.message}" if pr.line else f"{p}: {pr.message}")
    raise typer.Exit(1)
