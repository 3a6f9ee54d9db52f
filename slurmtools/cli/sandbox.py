"""`slurmtools sandbox`: replay a recorded history through a real slurmctld shaped like a candidate site.

`sandbox replay` is the admin's what-if (docs/sandbox.md); `sandbox example-trace` writes a history to try it with.
Heavy imports happen inside the functions only.
"""

from __future__ import annotations

from typing import List, Optional

import typer

from slurmtools.cli.common import JsonOpt, fail, print_json

sandbox_app = typer.Typer(help="Try a site change or a purchase on your own history, in a real Slurm sandbox.",
                          no_args_is_help=True, rich_markup_mode=None)


def register(app: typer.Typer) -> None:
    app.add_typer(sandbox_app, name="sandbox")


@sandbox_app.command("replay")
def replay_cmd(trace_path: Optional[str] = typer.Option(None, "--trace", help="The history: `sacct -X -D "
                                                        "--parsable2 -o ...` output (fields in docs/sandbox.md)"),
               since: Optional[str] = typer.Option(None, "--since", help="Instead of --trace: ask this cluster's "
                                                   "Slurm for the jobs of the last DURATION (e.g. 7d)"),
               site_path: str = typer.Option(..., "--site", help="The candidate site file to replay through"),
               baseline_path: Optional[str] = typer.Option(None, "--baseline", help="The current site file: "
                                                           "replayed too, and shown side by side"),
               speedup: Optional[float] = typer.Option(None, "--speedup", help="Time acceleration (default: "
                                                       "with --clock faketime at most 20 and the median job's run "
                                                       ">= 12 s; with scaled the largest the trace and sites hold "
                                                       "that keeps it >= 40 s; docs/sandbox.md)"),
               clock: str = typer.Option("faketime", "--clock", help="How time is accelerated: faketime "
                                         "(slurmctld and slurmd on a clock that runs faster, under libfaketime: "
                                         "the more faithful, docs/sandbox.md) or scaled (Slurm in real time, every "
                                         "time in the site and trace divided by the speed-up)"),
               lead_in: float = typer.Option(1.0, "--lead-in", help="Seconds from the lab coming up to the first "
                                             "submission (with --clock faketime: recorded seconds after a fair-share "
                                             "pass of slurmctld): replaying again with another value (e.g. 15) moves "
                                             "the history against slurmctld's periodic passes and shows how much the "
                                             "scheduler's own timing moves preemptions (docs/sandbox.md)"),
               repeat: int = typer.Option(1, "--repeat", help="Replay each site this many times (1 to 10), the "
                                          "history 7 s later each time against slurmctld's periodic passes, and "
                                          "report each figure's spread (the scheduler's own) beside the first "
                                          "replay's"),
               slurm: str = typer.Option("22.05", "--slurm", help="The sandbox's Slurm: 22.05 or 25.11"),
               out: Optional[str] = typer.Option(None, "--out", help="Write the report files into this folder"),
               formats: str = typer.Option("html,csv,json,md", "--formats", help="Report formats for --out"),
               workdir: str = typer.Option(".sandbox", "--workdir", help="The sandbox's own folder (labs, logs)"),
               port_offset: int = typer.Option(8000, "--port-offset", help="Shift every sandbox port by this "
                                               "much (keep clear of a running lab; the default is clear of the "
                                               "demo's and the test suite's labs)"),
               checkpoint_every: str = typer.Option("30m", "--checkpoint-every", help="Replayed jobs save their "
                                                    "progress this often (real time)"),
               save_time: str = typer.Option("30s", "--save-time", help="How long a save on the preemption "
                                             "warning takes (real time)"),
               add: Optional[List[str]] = typer.Option(None, "--add", help="A campaign file ([[campaign]] tables, "
                                                       "site_configs/example/campaign-vision.toml) whose jobs are "
                                                       "added to the history (repeatable)"),
               forecast_band: Optional[str] = typer.Option(None, "--forecast", help="Add the demand forecast's "
                                                           "load after the history: low, mid or high (its error "
                                                           "band)"),
               forecast_days: Optional[int] = typer.Option(None, "--forecast-days", min=1, help="Days of "
                                                           "forecast load to add (default 7)"),
               replay_from: Optional[str] = typer.Option(None, "--from", help="Replay from this time on (a "
                                                         "date-time, UTC when it names no zone, or +DURATION after "
                                                         "the history's first submission): jobs running or queued "
                                                         "then are submitted at it, the running ones with the run "
                                                         "time they had left; earlier ones are left out. The whole "
                                                         "history still feeds --forecast"),
               shapes: str = typer.Option("plain", "--shapes", help="Job shapes: plain (as recorded: what users "
                                          "submit today), planner (what `slurmtools plan` makes of each job), or "
                                          "both (--site twice, plain and planner side by side: what the planner "
                                          "is worth)"),
               node_scale: str = typer.Option("auto", "--node-scale", help="Emulate 1 node per N real ones: auto "
                                              "(1 when the site fits one sandbox machine, 512 nodes; else the "
                                              "smallest N that fits) or a number"),
               json_out: bool = JsonOpt) -> None:
    """Replay the history through a sandbox shaped like --site (and --baseline); waits, utilisation, GPU-hours
    lost to preemption and refusals per tier and account."""
    import sys
    import tomllib
    from pathlib import Path

    from slurmtools.durations import parse_duration
    from slurmtools.sandbox import outcome as oc
    from slurmtools.sandbox.lab import replay
    from slurmtools.sandbox.submission import Checkpointing
    from slurmtools.sandbox import clocks
    from slurmtools.sandbox.trace import load_trace
    from slurmtools.site import load_site
    from slurmtools.slurm.commands import parse_sacct
    from slurmtools.slurm.releases import release_for

    try:
        release = release_for(slurm)
    except Exception as exc:  # noqa: BLE001
        fail(f"--slurm {slurm}: {exc}")
    if release.lab is None:
        fail(f"--slurm {slurm}: the sandbox runs 22.05 or 25.11 (the releases its lab builds)")
    if not 0 <= lead_in <= 3600:
        fail(f"--lead-in {lead_in:g}: expected 0 to 3600 seconds")
    if not 1 <= repeat <= 10:
        fail(f"--repeat {repeat}: expected 1 to 10 replays")
    leads = oc.repeat_lead_ins(lead_in, repeat)
    if leads[-1] > 3600:
        fail(f"--repeat {repeat}: the last replay's lead-in would be {leads[-1]:g} s (at most 3600; lower --lead-in)")
    if clock not in clocks.CLOCKS:
        fail(f"--clock: expected one of {clocks.names()}, got {clock!r}")
    if shapes not in ("plain", "planner", "both"):
        fail(f"--shapes: expected plain, planner or both, got {shapes!r}")
    if shapes == "both" and baseline_path is not None:
        fail("--shapes both: compares plain and planner shapes on --site alone; leave out --baseline")
    ckpt = []
    for opt, text in (("--checkpoint-every", checkpoint_every), ("--save-time", save_time)):
        try:
            ckpt.append(float(parse_duration(text if not text.strip().isdigit() else text + "s")))
        except ValueError as exc:
            fail(f"{opt}: {exc}")
    sites = []
    for opt, path in (("--site", site_path), ("--baseline", baseline_path)):
        if path is None:
            continue
        site = load_site(path)  # ConfigError: one line naming the file and key
        try:
            with open(path, "rb") as fh:
                raw = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            fail(f"{opt} {path}: {exc}")
        sites.append((opt, site, raw))
    limits = {}
    for _, site, _ in sites:
        limits.update({p.name: float(p.max_time) for p in site.partitions.values()})
    from slurmtools.sandbox.report import check_formats

    fmts = check_formats(f.strip() for f in formats.split(",") if f.strip())  # before any replay starts
    if (trace_path is None) == (since is None):
        fail("--trace FILE or --since DURATION: give exactly one (the history to replay)")
    if trace_path is not None:
        # a history of several clusters: the --site's (job ids are per cluster)
        cluster = next((site.cluster_name for opt, site, _ in sites if opt == "--site"), None)
        trace = load_trace(trace_path, partition_limits=limits, cluster=cluster)
    else:
        trace = _from_slurm(since, limits)
    t_from = None
    if replay_from is not None:
        from slurmtools.sandbox.trace import moment

        try:
            t_from = moment(replay_from, trace.first_submit)  # "+7d": after the recorded history's first job
        except ValueError as exc:
            fail(f"--from: {exc}")
    if forecast_days is not None and forecast_band is None:
        fail("--forecast-days: only with --forecast low|mid|high")
    if add or forecast_band:
        from slurmtools.sandbox import campaign as cg

        if forecast_band is not None:
            if forecast_band not in cg.BANDS:
                fail(f"--forecast: expected one of {', '.join(cg.BANDS)}, got {forecast_band!r}")
            notes: list[str] = []
            try:
                extra = cg.forecast_load(trace, forecast_band, forecast_days or 7, 0, notes)
            except cg.ForecastError as exc:
                fail(f"--forecast {forecast_band}: {exc}")
            trace = cg.add_to(trace, extra, notes)
        for path in add or ():
            notes = []
            extra = cg.load_campaigns(path, sites[0][1], trace, notes)  # ConfigError: file and key
            trace = cg.add_to(trace, extra, notes)
    if t_from is not None:
        trace = trace.replayed_from(t_from)  # ParseError: one line, when nothing is left to replay
    job_limits = [j.limit_s for j in trace.jobs if j.limit_s]
    if speedup is None:
        most = min(clocks.max_speedup(clock, job_limits, s)[0] for _, s, _ in sites)
        speedup = clocks.default_speedup(clock, [j.run_s for j in trace.jobs], most)
    scales = [clocks.check(clock, speedup, job_limits, s, where=f"--speedup (with {opt} {s.source})")
              for opt, s, _ in sites]
    progress = _progress_line() if sys.stderr.isatty() and not json_out else None
    from slurmtools.sandbox import planned

    plan = []   # (label, site, raw, scale, planner shapes?)
    if shapes == "both":
        (_, site, raw), scale = sites[0], scales[0]
        plan = [("plain", site, raw, scale, False), ("planner", site, raw, scale, True)]
    else:
        for (opt, site, raw), scale in zip(sites[::-1], scales[::-1]):  # baseline first when there is one
            plan.append(("candidate" if opt == "--site" else "baseline", site, raw, scale, shapes == "planner"))
    results = {}
    for label, site, raw, scale, use_planner in plan:
        model = _model(site, raw, node_scale)
        if model is not None and use_planner:
            fail(f"--shapes {shapes}: the planner's shapes need the real nodes; {site.source} is replayed as a "
                 f"scaled model (--node-scale {model.factor})")
        view = planned.site_view(site)
        shaped, shape_notes = (planned.planner_shapes(trace.jobs, site, view, scale, release) if use_planner
                               else (None, []))
        for k, lead in enumerate(leads):
            name, where = (label, Path(workdir) / label) if k == 0 else (f"{label} {k + 1}/{repeat}",
                                                                          Path(workdir) / f"{label}-{k + 1}")
            try:
                run = replay(trace, site, raw, where, scale, release, port_offset, Checkpointing(*ckpt), name,
                             progress, shaped, model, lead_in_s=lead)
            except KeyboardInterrupt:
                if progress:
                    progress(None)
                fail(f"sandbox: interrupted during the {name} replay; its daemons are stopped (logs in {where})",
                     130)
            if progress:
                progress(None)
            records = parse_sacct(run.sacct_text, f"{name} sandbox sacct")
            got = oc.outcome(trace, run, records, planned.placement_fn(view))
            if k == 0:
                got.lead_in_s = lead
                results[label] = got
            else:
                results[label].repeat_of(got, lead)
        results[label].notes.extend(trace.notes)
        results[label].notes.extend(shape_notes)
        if model is not None:
            results[label].notes.append(model.statement)
        results[label].notes.extend(scale.limits_note(requeue_delay_param=release.requeue_delay))
        results[label].notes.extend(clocks.acceleration_note(scale, results[label].overall.preemptions))
    if out:
        from slurmtools.sandbox.report import write

        for p in write(results, trace, Path(out), fmts):
            typer.echo(f"wrote {p}", err=True)
    if json_out:
        from slurmtools.sandbox.report import to_json

        print_json(to_json(results, trace))   # what sandbox.json holds: each replay, the comparison, the spread
        return
    from slurmtools.sandbox.report import text_table

    typer.echo(text_table(results, trace))


@sandbox_app.command("example-trace")
def example_trace_cmd(out: str = typer.Option(..., "--out", help="Write the history here"),
                      jobs: int = typer.Option(200, "--jobs", min=1, max=1_000_000, help="How many jobs"),
                      hours: float = typer.Option(3.0, "--hours", min=0.01, max=24 * 366,
                                                  help="Over how many hours (a year at most)"),
                      load: float = typer.Option(1.2, "--load", min=0.01, max=100.0,
                                                 help="GPU-hours asked / the site's"),
                      seed: int = typer.Option(0, "--seed", help="Random seed"),
                      run_median: float = typer.Option(25.0, "--run-median", min=1.0, max=60 * 24 * 30,
                                                       help="Median run time of the jobs, minutes (30 days at "
                                                            "most)"),
                      site_path: Optional[str] = typer.Option(None, "--site", help="Site the jobs are shaped for "
                                                              "(default: the bundled example site)")) -> None:
    """Write a recorded-looking history (sacct -X -D --parsable2) for a site, to try the sandbox with."""
    from slurmtools.cli.common import load_site
    from slurmtools.sandbox.example_trace import generate

    text = generate(load_site(site_path), jobs, hours, seed=seed, load=load, run_median_min=run_median)
    try:
        with open(out, "w") as fh:
            fh.write(text)
    except OSError as exc:
        fail(f"--out {out}: {exc.strerror or exc}")
    typer.echo(f"wrote {jobs} jobs over {hours:g} h to {out}", err=True)


def _model(site, raw: dict, node_scale: str):
    """The scaled model of `site` (`sandbox.scaling`) when it needs one or --node-scale asks for one, else None."""
    from slurmtools.sandbox import scaling
    from slurmtools.topology.sitefile import load_fabric

    fabric = load_fabric(site.fabric_path)
    if node_scale == "auto":
        factor = scaling.choose_factor(site, fabric)
    else:
        try:
            factor = int(node_scale)
        except ValueError:
            fail(f"--node-scale: expected auto or a whole number, got {node_scale!r}")
        top = scaling.largest_factor(site, fabric)
        if not 1 <= factor <= top:
            fail(f"--node-scale {node_scale}: between 1 and {top} for {site.source} (Slurm's limits on GPUs and "
                 f"CPUs per node)")
    return scaling.scale_site(site, raw, fabric, factor) if factor > 1 else None


def _from_slurm(since: str, limits: dict):
    """The history from this cluster's accounting: every run of every job that ended in the last `since`. sacct's
    text is read as a --trace file is (`trace_from_text`: the same checks, and the times as instants of this
    machine's zone, the autumn change's repeated hour told apart by ElapsedRaw): the backend's records have read
    each time already, a repeated one as its first pass, and no longer say which times were printed alike."""
    from datetime import datetime, timedelta, timezone

    from slurmtools.cli.common import backend
    from slurmtools.durations import parse_duration
    from slurmtools.sandbox.trace import trace_from_records, trace_from_text
    from slurmtools.slurm.commands import ACCT_FIELDS

    try:
        secs = parse_duration(since)
    except ValueError as exc:
        fail(f"--since: {exc}")
    end = datetime.now(timezone.utc)
    b = backend()
    source = f"sacct (last {since})"
    dump = getattr(b, "accounting_dump", None)
    if dump is None:   # a backend without sacct's text (none of slurmtools' own): its records as they read them
        records = b.accounting(end - timedelta(seconds=secs), end, all_users=True, steps=False, duplicates=True)
        return trace_from_records(records, source, partition_limits=limits)
    # what `accounting(steps=False, duplicates=True)` asks sacct (pyslurm's backend too: its filter has no
    # --duplicates), with ACCT_FIELDS: ElapsedRaw among them
    text = dump(end - timedelta(seconds=secs), end, ACCT_FIELDS, all_users=True, steps=False, duplicates=True)
    if not text.strip():   # no header either: no job, said as the records' reader says it
        return trace_from_records([], source, partition_limits=limits)
    return trace_from_text(text, source, partition_limits=limits)


def _progress_line():
    import sys

    def show(line):
        if line is None:
            sys.stderr.write("\n")
        else:
            sys.stderr.write("\r" + line[:110].ljust(110))
        sys.stderr.flush()
    return show
