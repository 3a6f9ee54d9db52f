"""`slurmtools advise`: asked against used per user and job shape, with the smaller request that would have done
(docs/advise.md); `--notify` writes one notice per user for cron."""

from __future__ import annotations

from typing import Optional

import typer

from slurmtools.cli.common import JsonOpt, SiteOpt, TzOpt
from slurmtools.cli.report import DateOutOfRange, _parse_when, check_sacct_file, report_zone
from slurmtools.errors import OptionError


def register(app: typer.Typer) -> None:
    app.command("advise")(advise)


SinceOpt = typer.Option(None, "--since", help='How far back: "30d", "12h", or a date like 2026-11-01 (default: '
                                              "the site's [advise] lookback, 30d)")
SacctOpt = typer.Option(None, "--sacct-file", help="Read this saved `sacct --parsable2` dump instead of calling "
                                                   "sacct (fields: `slurmtools advise --fields`)")
EpilogOpt = typer.Option(None, "--epilog-dir", help="Folder of the epilog's GPU records (default: <site "
                                                    "spool_dir>/jobs)")


def _about(seconds: float) -> str:
    """A span back to a --since date, for people: "412 days", "5 hours", "17 minutes" (`human` gives the exact
    form a duration option takes, which for a date read "in the last 249488756s")."""
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{round(seconds / size)} {unit}"
    return f"{int(round(seconds))} s"


def history_window(since: str | None, site, now=None):
    """(since, until, label) from --since: a duration back from now, or a date; the site's lookback by default."""
    from datetime import datetime, timedelta

    from slurmtools.durations import human, parse_duration_with_unit

    now = (now or datetime.now()).replace(microsecond=0)
    if since is None:
        secs = site.advise.lookback
        return now - timedelta(seconds=secs), now, human(secs)
    try:
        secs = parse_duration_with_unit(since)
    except ValueError:
        try:
            s = _parse_when(since, "--since")
        except DateOutOfRange:
            raise
        except OptionError:
            raise OptionError(f'--since: expected a duration like "30d" or "12h", or a date like 2026-11-01, got '
                              f"{since!r}") from None
        if s >= now:
            raise OptionError(f"--since: {s} is not in the past") from None
        return s, now, f"{_about((now - s).total_seconds())} (since {s})"
    if secs <= 0:
        raise OptionError(f"--since: expected a duration above 0, got {since!r}")
    from slurmtools.cli.report import EARLIEST_YEAR

    if secs > (now - datetime(EARLIEST_YEAR, 1, 1)).total_seconds():  # was an OverflowError traceback
        raise OptionError(f"--since: {since} back from now is before {EARLIEST_YEAR}, where Slurm's accounting "
                          "begins")
    return now - timedelta(seconds=secs), now, human(secs)


def gather_advice(site, since, until, *, sacct_file=None, epilog_dir=None, backend=None, user=None, account=None,
                  zone=None):
    """(advice per shape, runs judged (those of --user/--account), notes): the history read (sacct, epilog
    records) and judged. `zone`: the zone sacct's times and the window are in, as the report reads them
    (`report_zone`; None: this machine's)."""
    from pathlib import Path

    from slurmtools.advise import rules, usage

    if zone is None:
        zone = report_zone(None, sacct_file)
    if sacct_file is None and backend is None:
        from slurmtools.cli.common import backend as get_backend

        backend = get_backend()
    ep = Path(epilog_dir) if epilog_dir is not None else site.spool_dir / "jobs"
    runs, notes = usage.load_runs(since, until, sacct_file=sacct_file, backend=backend, epilog_dir=ep,
                                  cluster=site.cluster_name, zone=zone)
    picked = rules.select(runs, user=user, account=account)
    return rules.advise(picked, site), len(picked), notes


def advise(user: Optional[str] = typer.Option(None, "--user", help="Only this user's jobs"),
           account: Optional[str] = typer.Option(None, "--account", help="Only this account's jobs"),
           since: Optional[str] = SinceOpt, sacct_file: Optional[str] = SacctOpt,
           epilog_dir: Optional[str] = EpilogOpt, tz: Optional[str] = TzOpt,
           notify: bool = typer.Option(False, "--notify", help="Write one notice per user with advice (files in "
                                                               "--out, or mail when the site says [advise] mail = "
                                                               "true); silent unless something fails"),
           out: Optional[str] = typer.Option(None, "--out", help="--notify: folder for the notices (<user>.txt)"),
           show_all: bool = typer.Option(False, "--all", help="Also list job shapes with nothing to change"),
           fields: bool = typer.Option(False, "--fields", help="Print the sacct --format list advise reads, and "
                                                               "exit"),
           site_path: Optional[str] = SiteOpt, json_out: bool = JsonOpt) -> None:
    """Asked against used per user and job shape (name, GPU count): GPUs, CPUs, memory and time, with a
    recommendation and its evidence."""
    from slurmtools.cli.common import load_site, print_json

    if fields:
        from slurmtools.advise.usage import sacct_fields

        typer.echo(",".join(sacct_fields()))
        return
    if user is not None and account is not None:
        raise OptionError("--user and --account exclude each other")
    if out is not None and not notify:
        raise OptionError("--out: only with --notify")
    zone = report_zone(tz, sacct_file)
    if sacct_file is not None:
        check_sacct_file(sacct_file)
    site = load_site(site_path)
    if notify and not site.advise.mail and out is None:
        raise OptionError("--notify: give --out DIR for the notice files (or set [advise] mail = true in the site "
                          "file)")
    # with --tz, "now" is the dump's zone's wall clock, as the report's window reads it
    s, u, label = history_window(since, site, now=None if tz is None else _now_in(zone))
    advice, nruns, notes = gather_advice(site, s, u, sacct_file=sacct_file, epilog_dir=epilog_dir, user=user,
                                         account=account, zone=zone)
    if notify:
        _notify(advice, site, label, out, json_out)
        return
    shown = [a for a in advice if a.findings or show_all]
    if json_out:
        print_json({"since": s.isoformat(), "until": u.isoformat(), "runs": nruns, "notes": notes,
                    "shapes": [a.as_dict() for a in shown]})
        return
    for n in notes:
        typer.echo(f"note: {n}", err=True)
    if not shown:
        who = f" of user {user}" if user else f" of account {account}" if account else ""
        typer.echo(f"nothing to change: {nruns} finished run(s){who} in the last {label} give no recommendation")
        return
    for a in shown:
        typer.echo(f"{a.shape.user}  {a.shape.name}  ({a.shape.gpus} GPU(s), {a.runs} run(s), account {a.account})")
        typer.echo(f"  {a.sentence() + '.' if a.findings else 'nothing to change'}")


def _now_in(zone):
    """This instant as a naive local time of `zone`."""
    import time

    return zone.local(int(time.time())).to_pydatetime()


def _notify(advice, site, label: str, out: str | None, json_out: bool) -> None:
    """Cron: notices written or mailed; no output unless --json or an error (then one line and exit 1)."""
    from slurmtools.advise import deliver
    from slurmtools.advise.notify import notices
    from slurmtools.cli.common import print_json

    msgs = notices(advice, site.cluster_name, label)
    if out is not None:
        done = [str(p) for p in deliver.write_files(msgs, out)]
    else:
        done = deliver.mail(msgs, site.advise.mail_domain)
    if json_out:
        print_json({"notices": [{"user": m.user, "shapes": m.shapes, "to": d} for m, d in zip(msgs, done)]})


def right_size_request(req, site, state, *, sacct_file=None, epilog_dir=None, tz=None):
    """`plan --right-size`: (the request with its shape's recommendation applied, RightSize). The history is the
    site's lookback, read as `advise` reads it (the live sacct through the plan's backend, or --sacct-file, its
    times in --tz or this machine's zone, `report_zone`)."""
    from slurmtools.advise.rightsize import right_size

    zone = report_zone(tz, sacct_file)
    if sacct_file is None and state.backend is None:
        raise OptionError(f"--right-size: no job history without Slurm ({state.note.split(';')[0]}); give "
                          f"--sacct-file PATH")
    if sacct_file is not None:
        check_sacct_file(sacct_file)
    # with --tz, "now" is the dump's zone's wall clock, as advise's window reads it
    s, u, label = history_window(None, site, now=None if tz is None else _now_in(zone))
    advice, nruns, _ = gather_advice(site, s, u, sacct_file=sacct_file, epilog_dir=epilog_dir,
                                     backend=state.backend, user=req.user, zone=zone)
    return right_size(req, advice, nruns, label)
