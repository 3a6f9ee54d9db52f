"""`slurmtools report`: GPU utilization, waits, waste, budgets and forecast over a window, as HTML/CSV/MD/JSON."""

from __future__ import annotations

import os
from typing import Optional

import typer

from slurmtools.cli.common import SiteOpt, TzOpt
from slurmtools.errors import OptionError, SlurmtoolsError


class BadInput(SlurmtoolsError):
    """Too many of an input's rows are bad to trust a report built from the rest; the message names the input."""

    exit_code = 1


def register(app: typer.Typer) -> None:
    app.command("report")(report)


#: the dates a report window may hold: Slurm's accounting counts Unix time (nothing before 1970), and the reports'
#: pandas timestamps end in 2262, so a date past these was an OverflowError traceback
EARLIEST_YEAR, LATEST_YEAR = 1970, 2199


class DateOutOfRange(OptionError):
    """A well-formed date outside the years the reports hold: said as such, not as a date of the wrong form."""


def _parse_when(text: str, option: str, now=None):
    from datetime import datetime

    for fmt in ("%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"):
        try:
            when = datetime.strptime(text.strip(), fmt)
        except ValueError:
            continue
        if not EARLIEST_YEAR <= when.year <= LATEST_YEAR:
            raise DateOutOfRange(f"{option}: expected a date from {EARLIEST_YEAR} to {LATEST_YEAR}, got {text!r}")
        return when
    if text.strip() == "now":
        return (now or datetime.now()).replace(microsecond=0)

    raise OptionError(f"{option}: expected a date like 2026-11-01 or 2026-11-01T08:00, got {text!r}")


def report_zone(tz: str | None, sacct_file: str | None):
    """The report's time zone (`reports.zone.Zone`): --tz, else this process's (TZ, /etc/localtime), in which sacct
    run from here prints its times. --tz names the zone of a saved dump: sacct run from here prints this
    machine's zone, whatever --tz says."""
    from slurmtools.reports import zone as zone_mod

    if tz is not None:
        if sacct_file is None:
            raise OptionError(f"--tz: {tz}: only with --sacct-file (sacct run from here prints its times in this "
                              f"machine's zone: set TZ instead)")
        try:
            return zone_mod.named(tz.strip())
        except zone_mod.ZoneError as exc:
            raise OptionError(f"--tz: {exc}") from None
    try:
        return zone_mod.local()
    except zone_mod.ZoneError as exc:
        raise OptionError(str(exc)) from None


def check_sacct_file(path: str) -> None:
    """--sacct-file names a saved dump: what is wrong with the path said as it is ("no such file" for a folder
    sent the user looking for a file that was there)."""
    if not os.path.lexists(path):
        raise OptionError(f"--sacct-file: {path}: no such file")
    if os.path.isdir(path):
        raise OptionError(f"--sacct-file: {path}: a folder, expected a saved `sacct --parsable2` dump (a file)")
    if not os.path.isfile(path):
        raise OptionError(f"--sacct-file: {path}: not a regular file (a broken link, a FIFO or a device)")


def window(since: str | None, until: str | None, period: str | None, now=None):
    """(since, until) from the options: --since/--until, or the last whole --period before --until (or today)."""
    from datetime import datetime, timedelta

    now = now or datetime.now()
    if period is not None and since is not None:
        raise OptionError("--period and --since exclude each other")
    if period is not None and period not in ("day", "week", "month"):
        raise OptionError(f"--period: expected day, week or month, got {period!r}")
    if since is not None:
        s = _parse_when(since, "--since", now)
        u = _parse_when(until, "--until", now) if until is not None else now.replace(microsecond=0)
    else:
        period = period or "day"
        today = now.replace(hour=0, minute=0, second=0, microsecond=0)
        if until is not None:   # --until "" is a bad date, not "now"
            u = _parse_when(until, "--until", now)
        elif period == "week":
            u = today - timedelta(days=today.weekday())
        elif period == "month":
            u = today.replace(day=1)
        else:
            u = today
        if period == "day":
            s = u - timedelta(days=1)
        elif period == "week":
            s = u - timedelta(days=7)
        else:
            prev = (u.replace(day=1) - timedelta(days=1)) if u.day == 1 and u.hour == 0 and u.minute == 0 \
                else u
            s = prev.replace(day=1, hour=0, minute=0, second=0)
    if s >= u:
        raise OptionError(f"--since ({s}) must be before --until ({u})")
    return s, u


def report(
    since: Optional[str] = typer.Option(None, "--since", help="Window start (2026-11-01 or 2026-11-01T08:00)"),
    until: Optional[str] = typer.Option(None, "--until", help="Window end (default: now, or the end of --period)"),
    period: Optional[str] = typer.Option(None, "--period", help="day | week | month: the last whole one "
                                                                "(default day)"),
    fmt: str = typer.Option("html,md", "--format", help="Comma list of html, csv, md, json"),
    out: str = typer.Option(..., "--out", help="Output folder (created)"),
    sacct_file: Optional[str] = typer.Option(None, "--sacct-file", help="Read this saved `sacct --parsable2` dump "
                                                                        "instead of calling sacct"),
    events_file: Optional[str] = typer.Option(None, "--events-file",
                                              help="Saved `sacctmgr -P show event format=NodeName,TimeStart,"
                                                   "TimeEnd,State,Reason` (node down/drain time)"),
    epilog_dir: Optional[str] = typer.Option(None, "--epilog-dir", help="Folder of the epilog's GPU records "
                                                                        "(default: <site spool_dir>/jobs)"),
    cache_dir: Optional[str] = typer.Option(None, "--cache", help="Per-day cache folder (default: none)"),
    history_days: int = typer.Option(56, "--history", min=0, help="Days before the window read for the "
                                                                 "forecast and month-to-date budgets"),
    top: int = typer.Option(10, "--top", min=1, help="Rows in the top-N tables and charts"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines even on a terminal"),
    tz: Optional[str] = TzOpt,
    max_bad_share: Optional[float] = typer.Option(
        None, "--max-bad-share", help="Fail when more than this share of an input's rows (sacct lines, epilog "
                                      "records) is bad, e.g. 0.01 for 1% (default: the site's [reports] "
                                      "max_bad_share, else 0.01); bad rows are skipped and listed in bad_rows.csv"),
    site_path: Optional[str] = SiteOpt,
) -> None:
    """Utilization report: GPU-hours vs capacity, cost, queue wait, preemption, waste, budgets, forecast."""
    import time
    from datetime import datetime, timedelta
    from pathlib import Path

    import pandas as pd

    from slurmtools.cli.common import load_site
    from slurmtools.reports import badrows, ingest, metrics, outputs

    if max_bad_share is not None and not 0.0 <= max_bad_share <= 1.0:
        raise OptionError(f"--max-bad-share: expected a share from 0 to 1 (0.01 is 1%), got {max_bad_share:g}")
    formats = tuple(f.strip() for f in fmt.split(",") if f.strip())
    bad = [f for f in formats if f not in outputs.FORMATS]
    if bad or not formats:
        raise OptionError(f"--format: expected a comma list of {', '.join(outputs.FORMATS)}, got {fmt!r}")
    if not out.strip():   # Path("") is the working folder: the report would land there unasked
        raise OptionError("--out: an empty path: name the output folder")
    if os.path.lexists(out) and not os.path.isdir(out):   # mkdir said only "File exists", after all the work
        raise OptionError(f"--out: {out}: not a folder (the report writes several files into a folder, created "
                          "if missing)")
    zone = report_zone(tz, sacct_file)
    s, u = window(since, until, period, now=None if tz is None else zone.local(int(time.time())).to_pydatetime())
    if history_days > (s - datetime(EARLIEST_YEAR, 1, 1)).days:
        raise OptionError(f"--history: {history_days} days before the window's start ({s}) is before "
                          f"{EARLIEST_YEAR}, where Slurm's accounting begins")
    if sacct_file is not None:
        check_sacct_file(sacct_file)
    events_text = None
    if events_file is not None:
        try:
            # bytes that are not UTF-8 stay (as surrogates) for the reader to skip their row, not the file
            events_text = Path(events_file).read_bytes().decode("utf-8", "surrogateescape")
        except OSError as exc:
            raise OptionError(f"--events-file: {events_file}: {exc.strerror or exc}") from None
    site = load_site(site_path)
    progress = ingest.Progress(False if quiet else None)
    backend = None
    if sacct_file is None:
        from slurmtools.cli.common import backend as get_backend

        backend = get_backend()
    month_start = pd.Timestamp(u - timedelta(seconds=1)).replace(day=1, hour=0, minute=0, second=0).to_pydatetime()
    load_since = min(s - timedelta(days=history_days), month_start)
    bad: list = []
    # with the day cache (cron, long histories) the runs stay in their Parquet files and, from
    # columnar.LARGE_RUNS runs on, the DuckDB engine computes the report (proven equal to `metrics.compute`)
    jobs, history, notes, _ = ingest.load_jobs(s, u, history_since=load_since, sacct_file=sacct_file,
                                               backend=backend, cache_dir=cache_dir, progress=progress, bad_rows=bad,
                                               lazy=cache_dir is not None, cluster=site.cluster_name, zone=zone,
                                               needs=REPORT_NEEDS)
    compute, first_job = metrics.compute, ingest.first_job
    if cache_dir is not None:
        from slurmtools.reports.columnar import engine_for

        compute, first_job, jobs = engine_for(jobs)
    first = first_job(jobs, history, zone=zone)
    cap, events, cnotes = ingest.load_capacity(site, s, u, backend=backend, events_text=events_text,
                                               events_source=events_file or "sacctmgr show event",
                                               first_job=first, bad_rows=bad, zone=zone)
    cnotes += _hosts_check(site, jobs, cap, sacct_file, site_path)
    ep_path = epilog_dir if epilog_dir is not None else str(site.spool_dir / "jobs")
    epilog, enotes = ingest.load_epilog(ep_path, bad_rows=bad, cluster=site.cluster_name, zone=zone)
    share, where = _max_bad_share(max_bad_share, site)
    try:
        badrows.check_share(bad, share, where)
    except badrows.TooManyBadRows as exc:
        try:
            listed = outputs.write_bad_rows(bad, Path(out))
        except OSError as oerr:
            raise OptionError(f"--out: {out}: {oerr.strerror or oerr}") from None
        raise BadInput(f"{exc}; the list: {listed}") from None
    if epilog_dir is None and enotes and "folder missing" in enotes[0]:
        enotes = [f"no epilog GPU records at {ep_path}; GPU efficiency from Slurm's gres/gpuutil only"]
    progress("computing metrics")
    fabric = None
    if site.fabric_path is not None:
        from slurmtools.topology.sitefile import load_fabric

        fabric = load_fabric(site.fabric_path)
    rep = compute(jobs, site, s, u, capacity=cap, events=events, epilog=epilog, top=top,
                  notes=notes + cnotes + enotes, history=history, fabric=fabric, bad_rows=bad, zone=zone)
    _add_right_sizing(rep, site, s, u, sacct_file, backend, ep_path, progress, zone)
    progress("writing " + ", ".join(formats))
    try:
        written = outputs.write(rep, Path(out), formats, top=top)
    except OSError as exc:
        raise OptionError(f"--out: {out}: {exc.strerror or exc}") from None
    for p in written:
        if p.suffix in (".html", ".md", ".json") or p.name == badrows.FILE_NAME:
            typer.echo(str(p))
    if "csv" in formats:
        tables = sum(1 for p in written if p.suffix == ".csv" and p.name != badrows.FILE_NAME)
        typer.echo(f"{out}/*.csv ({tables} tables)")


#: fields a saved dump needs for the report's own tables, beyond what the reader needs: without them every run
#: read as one blank user and account (the headline's user count, the per-account costs and budgets)
REPORT_NEEDS = ("User", "Account")


def _hosts_check(site, jobs, cap, sacct_file, site_path) -> list[str]:
    """GPU runs on hosts the capacity does not hold: refused when it is every one of them and the capacity is the
    site file's (a dump of another cluster, or the bundled example site: nothing of the report would be this
    cluster's), else a note (nodes retired since, or missing from the site's partitions). Also refused: runs of a
    cluster other than the site's (job ids and capacity are per cluster)."""
    from slurmtools.hostlist import compress
    from slurmtools.reports.capacity import hosts_outside
    from slurmtools.reports.ingest import gpu_runs_by_nodelist
    from slurmtools.site.load import find_site_path

    source = sacct_file or "sacct"
    fresh = jobs if hasattr(jobs, "columns") else jobs.fresh
    if "cluster" in fresh.columns:
        named = sorted({str(c) for c in fresh["cluster"].dropna().unique() if str(c)})
        if named and site.cluster_name not in named:
            raise BadInput(f"{source}: its runs are of cluster {', '.join(named)}, not of {site.cluster_name}, the "
                           f"cluster the site file ({find_site_path(site_path)}) names (cluster_name): report it "
                           "with that cluster's site file (--site)")
    if cap is None or not len(cap):
        return []
    gpu_runs = gpu_runs_by_nodelist(jobs)
    if not gpu_runs:
        _gpus_recorded(jobs, cap, source)
    out = hosts_outside(gpu_runs, set(cap["node"]))
    if not out.runs:
        return []
    shown = compress(out.hosts[:200]) + (f" and {len(out.hosts) - 200} more" if len(out.hosts) > 200 else "")
    if out.entirely == out.placed and site.fabric_path is not None:   # not one GPU-hour on the site's nodes
        raise BadInput(f"{source}: none of its GPU runs ran on a node of the site's partitions (its hosts "
                       f"{shown} are not among them; site file {find_site_path(site_path)}): report it with that "
                       "cluster's site file (--site)")
    return [f"{out.runs} of {out.placed} GPU run(s) ran on host(s) the capacity does not hold ({shown}): their "
            "GPU-hours count, those hosts' GPUs do not (retired nodes, or missing from the site's partitions?)"]


def _gpus_recorded(jobs, cap, source: str) -> None:
    """Refused: a dump of which no run names a GPU while runs ran on the site's GPU nodes. Slurm writes a job's
    GPUs into AllocTRES only when slurm.conf's AccountingStorageTRES lists gres/gpu, which its default does not:
    such a dump does not say which runs held GPUs, and a report of it would show the cluster idle."""
    from slurmtools.hostlist import compress
    from slurmtools.reports.capacity import hosts_outside
    from slurmtools.reports.ingest import gpu_runs_by_nodelist

    gpu_hosts = set(cap.loc[cap["gpus"] > 0, "node"]) if "gpus" in cap.columns else set(cap["node"])
    every = gpu_runs_by_nodelist(jobs, gpus_only=False)
    on = hosts_outside(every, gpu_hosts)
    ran = on.placed - on.entirely
    if ran:
        hosts = [h for h in hosts_outside(every, set()).hosts if h in gpu_hosts]   # every host, by the same reading
        raise BadInput(f"{source}: none of its {ran} run(s) on the site's GPU nodes ({compress(hosts[:200])}) names "
                       "a GPU in AllocTRES: Slurm records a job's GPUs there only when slurm.conf's "
                       "AccountingStorageTRES lists gres/gpu (its default does not), so the dump does not say which "
                       "runs held GPUs; add gres/gpu to AccountingStorageTRES (jobs are recorded from then on)")


#: the longest window the right-sizing section reads again (advise's own sacct fields); longer reports say so
RIGHT_SIZING_MAX_DAYS = 35


def _add_right_sizing(rep, site, since, until, sacct_file, backend, epilog_dir, progress, zone) -> None:
    """The admins' right-sizing table (`slurmtools advise`'s advice for every user, one row per job shape with a
    recommendation) as the report's `right_sizing` table; a note says why when it is left out."""
    from slurmtools.errors import SlurmtoolsError

    if (until - since).total_seconds() > RIGHT_SIZING_MAX_DAYS * 86400:
        rep.notes.append(f"right-sizing left out: the window is longer than {RIGHT_SIZING_MAX_DAYS} days "
                         "(run `slurmtools advise --since ...` for it)")
        return
    progress("right-sizing")
    from slurmtools.advise.section import right_sizing_table
    from slurmtools.cli.advise import gather_advice

    try:
        advice, _, notes = gather_advice(site, since, until, sacct_file=sacct_file, epilog_dir=epilog_dir,
                                         backend=backend, zone=zone)
    except SlurmtoolsError as exc:
        rep.notes.append(f"right-sizing left out: {exc}")
        return
    rep.tables["right_sizing"] = right_sizing_table(advice)
    # the sacct dump's own notes (read by the same reader) are the report's already
    rep.notes.extend(f"right-sizing: {n}" for n in [n for n in notes if n not in rep.notes][:3])


def _max_bad_share(option: float | None, site) -> tuple[float, str]:
    """The tolerated share of bad rows and where it was set: the option, the site file, or the default."""
    from slurmtools.reports.badrows import DEFAULT_MAX_SHARE

    if option is not None:
        return option, "--max-bad-share"
    settings = getattr(site, "reports", None)
    if settings is not None and settings.max_bad_share is not None:
        return settings.max_bad_share, f"{site.source} [reports] max_bad_share"
    return DEFAULT_MAX_SHARE, "the default max_bad_share"
