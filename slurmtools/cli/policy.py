"""Admission policy commands under `slurmtools admin`: render job-submit, sync-qos, policy check / list /
refresh-usage / replay."""

from __future__ import annotations

from typing import Optional

import typer

from slurmtools.cli.common import JsonOpt, SiteOpt, SlurmVersionOpt, TzOpt, fail, print_json, slurm_release

policy_app = typer.Typer(help="Admission policies: check a request, refresh budget usage, replay past jobs.",
                         no_args_is_help=True)


def register(app: typer.Typer) -> None:
    from slurmtools.cli.admin import admin_app, render_app

    admin_app.add_typer(policy_app, name="policy")
    render_app.command("job-submit")(render_job_submit)
    admin_app.command("sync-qos")(sync_qos)


def _site_fabric(site_path: str | None):
    from slurmtools.policy.engine import load_fabric_for
    from slurmtools.site import load_site

    site = load_site(site_path)
    return site, load_fabric_for(site)


def _slurm_etc() -> str:
    import os

    conf = os.environ.get("SLURM_CONF")
    return os.path.dirname(os.path.abspath(conf)) if conf else "/etc/slurm"


def _write_atomic(path: str, text: str) -> None:
    """Temporary file beside the target, fsync, rename: slurmctld never reads half a file."""
    import os
    import tempfile

    d = os.path.dirname(os.path.abspath(path)) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix=".slurmtools-", dir=d)
    except OSError as exc:
        fail(f"--output {path}: cannot write there ({exc.strerror})")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        os.unlink(tmp)
        fail(f"--output {path}: cannot write there ({exc.strerror})")


def _default_audit_log(site) -> str:
    """The decision log slurmtools.audit writes ($SLURMTOOLS_AUDIT_LOG, else decisions.jsonl in the spool)."""
    import os

    from slurmtools import audit

    if os.environ.get("SLURMTOOLS_AUDIT_LOG") or os.environ.get("SLURMTOOLS_SPOOL_DIR"):
        return str(audit.default_path())
    return str(site.spool_dir / audit.LOG_NAME)


def render_job_submit(
    site: Optional[str] = SiteOpt,
    slurm_version: Optional[str] = SlurmVersionOpt,
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write here (atomically) instead of stdout"),
    usage_file: Optional[str] = typer.Option(None, "--usage-file",
                                             help="Budget usage table the Lua loads (default: slurmtools_usage.lua "
                                                  "beside slurm.conf; written by `admin policy refresh-usage`)"),
    audit_log: Optional[str] = typer.Option(None, "--audit-log", help="Decision log for refusals (default: "
                                                                      "$SLURMTOOLS_AUDIT_LOG, else decisions.jsonl in "
                                                                      "the site's spool_dir)"),
    usage_ttl: int = typer.Option(60, "--usage-ttl", min=0, help="Seconds the Lua keeps the usage table"),
    log_only: bool = typer.Option(False, "--log-only", help="Shadow mode for rollout: log and audit what would be "
                                                           "refused, refuse and change nothing"),
) -> None:
    """Generate job_submit.lua from the site: the same policies and messages as `slurmtools submit`."""
    import os

    from slurmtools.render.job_submit import render_job_submit as render

    s, fabric = _site_fabric(site)
    release = slurm_release(slurm_version)
    uf = usage_file or os.path.join(os.path.dirname(os.path.abspath(output)) if output else _slurm_etc(),
                                    "slurmtools_usage.lua")
    r = render(s, fabric, usage_file=uf, audit_log=audit_log or _default_audit_log(s), usage_ttl=usage_ttl,
               enforce=not log_only)
    if r.cli_only:
        typer.echo(f"slurmtools: note: policies {', '.join(r.cli_only)} have no Lua form; only the CLI enforces "
                   f"them", err=True)
    # one evaluator for every release: it reads only job_desc fields that 22.05 through 25.11 all have, and runs
    # under Lua 5.1 (Debian's 22.05) and 5.3 (25.11 built from source); see docs/policy.md
    text = f"-- for Slurm {release.name} (job_submit/lua)\n" + r.text
    if output:
        _write_atomic(output, text)
        typer.echo(f"wrote {output}", err=True)
    else:
        typer.echo(text, nl=False)


def _qos_sync_logger(site):
    """One `qos_sync` decision-log record per applied sacctmgr command, with the site's policy hash. A log that
    cannot be written is said in one line per change; the change itself is already made."""
    import getpass

    from slurmtools import audit
    from slurmtools.policy.engine import load_fabric_for
    from slurmtools.policy.fingerprint import policy_hash
    from slurmtools.policy.qos_sync import change_record

    h = policy_hash(site, load_fabric_for(site))
    path = _default_audit_log(site)

    def done(cmd):
        try:
            audit.record("qos_sync", user=getpass.getuser(), details=change_record(cmd), policy=h, path=path)
        except audit.AuditError as exc:
            typer.echo(f"slurmtools: warning: {exc} (the change was made)", err=True)
    return done


def sync_qos(site: Optional[str] = SiteOpt,
             dry_run: bool = typer.Option(False, "--dry-run", help="Print the sacctmgr commands, change nothing"),
             check: bool = typer.Option(False, "--check", help="As --dry-run, and exit 1 when the QoS differ from "
                                                               "the site's tiers (for cron or monitoring)")) -> None:
    """Make the accounting database's QoS match the site's tiers (priority, preemption, grace, limits)."""
    from slurmtools.policy.qos_sync import apply, plan_qos_sync, read_qos
    from slurmtools.render.accounting import as_shell
    from slurmtools.slurm.commands import CommandBackend

    s, _ = _site_fabric(site)
    be = CommandBackend()
    cmds = plan_qos_sync(s, read_qos(be.run))
    if not cmds:
        typer.echo("QoS already match the site's tiers: nothing to do")
        return
    typer.echo(as_shell(cmds), nl=False)
    if check:
        # the commands went to stdout; stderr says why the exit status is 1
        fail(f"the accounting database's QoS differ from the site's tiers: {len(cmds)} sacctmgr command(s) above "
             "would make them match (run `slurmtools admin sync-qos`)", code=1)
    if dry_run:
        return
    apply(cmds, be.run, _qos_sync_logger(s))
    left = plan_qos_sync(s, read_qos(be.run))
    if left:
        fail("sacctmgr accepted the changes but the QoS still differ:\n" + as_shell(left).rstrip(), code=3)
    typer.echo(f"applied {len(cmds)} sacctmgr command(s)")


@policy_app.command("check", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def check(ctx: typer.Context,
          site: Optional[str] = SiteOpt,
          script: Optional[str] = typer.Option(None, "--script", help="Batch script whose #SBATCH lines count too"),
          user: Optional[str] = typer.Option(None, "--user", help="User the job is for (default: you)"),
          default_account: Optional[str] = typer.Option(None, "--default-account",
                                                        help="The user's default account, used when -A is not given"),
          no_usage: bool = typer.Option(False, "--no-usage", help="Do not read this month's usage (skip budgets)"),
          json_out: bool = JsonOpt) -> None:
    """Run the site's policies on sbatch options (after --), e.g. `admin policy check -- -q standard --gpus=h100:8`."""
    import getpass

    from slurmtools.policy import JobRequest, preflight

    s, _ = _site_fabric(site)
    text = ""
    if script:
        try:
            with open(script) as fh:
                text = fh.read()
        except OSError as exc:
            fail(f"--script {script}: {exc.strerror}")
    req = JobRequest.from_sbatch(list(ctx.args), script=text, user=user or getpass.getuser(),
                                 default_account=default_account)
    if script and req.name is None:  # sbatch names the job after its script file: job_submit.lua sees that name
        import dataclasses
        import os

        req = dataclasses.replace(req, name=os.path.basename(script))
    backend = None
    if not no_usage:
        from slurmtools.cli.common import backend as get_backend

        backend = get_backend()
    d = preflight(req, s, backend)
    if json_out:
        print_json({"action": d.action, "message": d.message, "changes": d.changes, "policy": d.policy})
    else:
        _say(d)
    if d.action == "deny":
        raise typer.Exit(1)


def _say(d) -> None:
    """One line for a decision: refused (by which policy, why), allowed with changes, or allowed."""
    if d.action == "deny":
        typer.echo(f"refused by {d.policy}: {d.message}")
    elif d.action == "modify":
        typer.echo("allowed with changes " + ", ".join(f"{k}={v}" for k, v in d.changes.items()) + f" ({d.policy})")
    else:
        typer.echo("allowed")


@policy_app.command("check-update", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def check_update(ctx: typer.Context,
                 site: Optional[str] = SiteOpt,
                 no_usage: bool = typer.Option(False, "--no-usage",
                                               help="Do not read this month's usage (skip budgets)"),
                 json_out: bool = JsonOpt) -> None:
    """Run the site's policies on an `scontrol update job` before it is made, e.g.
    `admin policy check-update JobId=12 QOS=production NumNodes=4` (the job as it would be after the change)."""
    from slurmtools.errors import SlurmError
    from slurmtools.policy import preflight
    from slurmtools.policy.update import (modified_request, parse_show_job, parse_update, record_request,
                                         text_refusal, with_time_change)
    from slurmtools.slurm.commands import CommandBackend

    s, _ = _site_fabric(site)
    upd = parse_update(list(ctx.args))
    be = CommandBackend()  # the job's record as scontrol shows it: what job_rec holds for job_submit.lua
    try:
        show = parse_show_job(be.run(["scontrol", "show", "job", "-o", upd.job_id]), upd.job_id)
        script = be.run(["scontrol", "write", "batch_script", upd.job_id, "-"])
    except SlurmError as exc:
        fail(f"JobId={upd.job_id}: {exc}")
    current, tres_req = record_request(show, script=script)
    try:
        upd = upd.for_release(be.slurm_release())
    except SlurmError:
        pass   # the release unknown: the change as 22.05 sends it (the job keeps its max, the larger count)
    req, touched = modified_request(current, with_time_change(upd, current.time_limit), tres_req)
    d = text_refusal(upd.change)  # a new Name/Comment with a control character, as slurm_job_modify refuses it
    if d is None and touched:
        d = preflight(req, s, None if no_usage else be)
    if json_out:
        print_json({"action": d.action if d else "allow", "message": d.message if d else "",
                    "changes": d.changes if d else {}, "policy": d.policy if d else "", "ignored": list(upd.ignored)})
    elif d is None:
        typer.echo("allowed: the update changes nothing admission checks"
                   + (f" ({', '.join(upd.ignored)})" if upd.ignored else ""))
    else:
        _say(d)
    if d is not None and d.action == "deny":
        raise typer.Exit(1)


@policy_app.command("list")
def list_policies(site: Optional[str] = SiteOpt) -> None:
    """The registered policies (built-in and plugins) and which ones this site runs."""
    from slurmtools.policy import load_policies, registry

    s, fabric = _site_fabric(site)
    active = {p.name: p for p in load_policies(s, fabric)}
    for name, cls in registry().items():
        where = ("CLI + job_submit.lua" if cls.lua else "CLI only") if name in active else "inactive"
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        typer.echo(f"{name:18} {where:22} {doc}")


@policy_app.command("refresh-usage")
def refresh_usage(site: Optional[str] = SiteOpt,
                  output: Optional[str] = typer.Option(None, "--output", "-o",
                                                       help="Usage table for job_submit.lua (default: "
                                                            "slurmtools_usage.lua beside slurm.conf)")) -> None:
    """Write this month's GPU-hours per account (from sacct) where job_submit.lua reads its budgets."""
    import os

    from slurmtools.cli.common import backend as get_backend
    from slurmtools.policy.engine import current_usage
    from slurmtools.policy.usage import render_usage_lua

    s, _ = _site_fabric(site)
    usage, month = current_usage(s, get_backend())
    path = output or os.path.join(_slurm_etc(), "slurmtools_usage.lua")
    _write_atomic(path, render_usage_lua(usage, month))
    typer.echo(f"wrote {path}: {month}, " + (", ".join(f"{a} {h:.1f} GPU-h" for a, h in sorted(usage.items()))
                                           or "no GPU usage yet"))


def _submissions(records: list, cluster: str, source: str) -> tuple[list, list[str]]:
    """A saved dump's job records as the live replay asks sacct for them (`--allocations`, no `--duplicates`): one
    record per job, its last run (`sacct -D` lists every run of a requeued or resized job), no federation sibling
    withdrawn because the job ran elsewhere (REVOKED, listed only with -D), and of a dump of several clusters the
    site's (job ids are per cluster). Notes say what was left out."""
    from slurmtools.slurm.commands import one_cluster
    from slurmtools.slurm.tres import with_gres_requests

    allocs = [r for r in records if r.step is None]
    revoked = sum(r.state == "REVOKED" for r in allocs)
    allocs, notes = one_cluster([r for r in allocs if r.state != "REVOKED"], cluster, source, "--site")
    allocs, gres_notes = with_gres_requests(allocs)
    notes += gres_notes
    if revoked:
        notes.append(f"{revoked} federation sibling record(s) REVOKED (the job ran on another cluster) left out")

    def when(r):
        return tuple(t.timestamp() if t is not None else float("-inf") for t in (r.submit, r.start, r.end))

    last: dict[tuple[str, str], tuple] = {}
    for i, r in enumerate(allocs):
        k = (r.extra.get("Cluster", ""), r.job_id)
        if k not in last or (when(r), i) >= last[k][0]:
            last[k] = ((when(r), i), r)
    kept = [r for _, r in sorted(last.values(), key=lambda x: x[0][1])]
    from slurmtools.errors import ParseError
    from slurmtools.slurm.tres import record_tres

    blank = None
    for r in kept:
        try:
            if record_tres(r) is None:
                blank = r
                break
        except ValueError as exc:
            raise ParseError(source, None, f"job {r.job_id}: {exc}") from None
    if blank is not None:   # a record from before Slurm kept TRES: replayed, it would ask for no GPU at all
        raise ParseError(source, None, f"job {blank.job_id}: ReqTRES and AllocTRES are both empty and no GRES column "
                                       "says its GPUs, so what it asked for is not known (a record from before Slurm "
                                       "kept TRES?)")
    if len(kept) < len(allocs):
        notes.append(f"{len(allocs) - len(kept)} earlier run(s) of requeued or resized jobs (sacct -D) left out: "
                     f"each job is replayed once, as its last run (what sacct lists without --duplicates)")
    return kept, notes


def _live_records(start, end, zone) -> tuple[list, list[str]]:
    """The jobs of [start, end) from the backend's accounting (`--allocations`, no `--duplicates`): sacct's text
    read with the times in `zone` (`parse_in_zone`), as `sandbox replay --since` reads it; a backend without
    sacct's text (none of slurmtools' own) gives its records as they read them."""
    from slurmtools.cli.common import backend as get_backend
    from slurmtools.slurm.commands import ACCT_FIELDS
    from slurmtools.slurm.sacct_times import parse_in_zone

    b = get_backend()
    dump = getattr(b, "accounting_dump", None)
    if dump is None:
        return b.accounting(start, end, all_users=True, steps=False, duplicates=False), []
    text = dump(start, end, ACCT_FIELDS, all_users=True, steps=False, duplicates=False)
    records, notes = parse_in_zone(text, "sacct", (("JobID", "JobIDRaw"),), zone)
    return records, list(notes)


@policy_app.command("replay")
def replay_cmd(site: Optional[str] = typer.Option(..., "--site", help="Candidate site file to replay"),
               since: str = typer.Option("30d", "--since", help="How far back, e.g. 30d, 12h"),
               sacct_file: Optional[str] = typer.Option(None, "--sacct-file",
                                                        help="`sacct --parsable2` dump (with header) instead of "
                                                             "asking Slurm"),
               show: int = typer.Option(20, "--show", min=0, help="How many changed jobs to list"),
               tz: Optional[str] = TzOpt, json_out: bool = JsonOpt) -> None:
    """Run a candidate configuration's policies over past jobs; report what would be refused or re-routed."""
    from datetime import datetime, timedelta, timezone

    from slurmtools.cli.report import report_zone
    from slurmtools.durations import parse_duration
    from slurmtools.policy.replay import replay
    from slurmtools.slurm.sacct_times import parse_in_zone

    try:
        secs = parse_duration(since)
    except ValueError as exc:
        fail(f"--since: {exc}")
    # sacct's local times are read as instants of this zone (--tz: the dump's; else this machine's, in which sacct
    # run from here prints them), as the report reads them: submissions in the order they were made and a job's
    # GPU-hours counted from the instant it ended, in the autumn change's repeated hour too; budgets are per month
    # of this zone's calendar, as admission counts them
    zone = report_zone(tz, sacct_file)
    s, fabric = _site_fabric(site)
    end = datetime.now(timezone.utc)
    start = end - timedelta(seconds=secs)
    if sacct_file:
        from slurmtools.errors import ParseError
        from slurmtools.policy.replay import REPLAY_FIELDS
        from slurmtools.slurm.parsable import decode_dump

        try:
            with open(sacct_file, "rb") as fh:
                text, text_notes = decode_dump(fh.read(), sacct_file)
        except OSError as exc:
            fail(f"--sacct-file {sacct_file}: {exc.strerror or exc}")
        if not text.strip():
            raise ParseError(sacct_file, 1, "empty; expected `sacct --parsable2` output with its header line")
        try:
            records, zone_notes = parse_in_zone(text, sacct_file, REPLAY_FIELDS, zone)
        except (ValueError, KeyError) as exc:
            raise ParseError(sacct_file, None, f"cannot read sacct output: {exc}") from None
        records = [r for r in records if (r.submit or r.start or r.end) is None or (r.submit or r.start or r.end) >= start]
        records, notes = _submissions(records, s.cluster_name, sacct_file)
        notes += [*zone_notes, *text_notes]
    else:
        records, notes = _live_records(start, end, zone)
    rep = replay(s, fabric, records, zone)
    if json_out:
        print_json({**rep.to_json(), "notes": notes})
        return
    typer.echo(f"replayed {rep.jobs} jobs from the last {since} against {s.source}")
    for n in notes:
        typer.echo(f"  note: {n}")
    if rep.skipped_policies:
        typer.echo(f"  not replayable (sacct keeps no batch script): {', '.join(rep.skipped_policies)}")
    typer.echo(f"  {'account':12} {'tier':12} {'jobs':>6} {'refused':>8} {'rerouted':>9} {'GPU-h refused':>14}  reasons")
    for (a, t), b in sorted(rep.buckets.items()):
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(b.reasons.items())) or "-"
        typer.echo(f"  {a:12} {t:12} {b.jobs:6d} {b.refused:8d} {b.rerouted:9d} {b.gpu_hours_refused:14.1f}  {reasons}")
    for job, a, t, d in rep.changed[:show]:
        what = d.message if d.action == "deny" else "re-routed: " + ", ".join(f"{k}={v}" for k, v in d.changes.items())
        typer.echo(f"  job {job} ({a}/{t}): {what}")
    if len(rep.changed) > show:
        typer.echo(f"  ... and {len(rep.changed) - show} more (--show N, or --json)")

