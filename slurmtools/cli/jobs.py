"""`slurmtools plan | submit | explain | templates`: topology-aware job planning from the command line.

Heavy imports (jinja2, networkx through the topology graph) happen inside the command functions only.
"""

from __future__ import annotations

from typing import List, Optional

import typer

from slurmtools.cli.common import JsonOpt, SiteOpt, SlurmVersionOpt, TzOpt, fail, print_json
from slurmtools.cli.plan_cmd import build_request, plan_and_render

templates_app = typer.Typer(help="List and show the job templates (bundled, site and $SLURMTOOLS_TEMPLATE_PATH).",
                            no_args_is_help=True)


def sbatch_env(environ) -> tuple[dict[str, str], list[str]]:
    """The environment `slurmtools submit` runs sbatch in, and the names left out: every SBATCH_* input variable.
    sbatch takes them over the script's #SBATCH lines, so a shell's `SBATCH_PARTITION` or `SBATCH_TIMELIMIT` sent
    the job elsewhere than planned, and `SBATCH_SIGNAL` undid the checkpoint wiring, past the admission check the
    CLI made on the plan."""
    dropped = sorted(k for k in environ if k.startswith("SBATCH_"))
    return {k: v for k, v in environ.items() if not k.startswith("SBATCH_")}, dropped


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
    app.command("submit")(submit)
    app.command("explain")(explain)
    app.add_typer(templates_app, name="templates")


# ------------------------------------------------------------------------------------------------ options
GpusOpt = typer.Option(None, "--gpus", help="Total GPUs; 0: a CPU job (on the site's CPU partition)")
NodesOpt = typer.Option(None, "--nodes", help="Number of hosts (with --gpus-per-node, or whole hosts)")
GpnOpt = typer.Option(None, "--gpus-per-node", help="GPUs on each host")
TypeOpt = typer.Option(None, "--gpu-type", help="GPU type, e.g. h100 (default: the partition's only type)")
TimeOpt = typer.Option("1h", "--time", help='Time limit: "90m", "2h", "1d", "2-00:00:00"')
TierOpt = typer.Option(None, "--tier", help='Tier (QoS) name (default: the site\'s default tier), or "best": the '
                                            "highest-priority tier you may use that fits the job (the plan says when "
                                            "that falls back to a lower tier)")
CkptSignalOpt = typer.Option(None, "--checkpoint-signal", help="The warning signal on preemptible tiers: URG, USR1 "
                                                                 "or USR2 (default: the tier's, URG unless the site "
                                                                 "says otherwise; see docs/checkpoint.md)")
SignalOpt = typer.Option(False, "--handles-signal", help="Your program handles the warning signal (SIGURG at "
                                                        "preemption and before the time limit) itself: pass it on. "
                                                        "Without this, only programs using slurmtools.checkpoint get "
                                                        "it; others run on and are requeued intact when preempted")
CommOpt = typer.Option("allreduce", "--comm", help="How the ranks talk: allreduce | tensor-parallel | pipeline | "
                                                   "independent")
TemplateOpt = typer.Option(None, "--template", help="Template name (see `slurmtools templates list`); default from "
                                                    "the job's shape")
NameOpt = typer.Option("job", "--name", help="Job name")
AccountOpt = typer.Option(None, "--account", help="Account to charge (default: your first account in the site)")
UserOpt = typer.Option(None, "--user", help="Plan as this user (default: you)")
PartOpt = typer.Option(None, "--partition", help="Partition (default: the site's default with the GPU type)")
OutOpt = typer.Option(None, "--output-dir", help="Folder for the job's output file (default: the submit folder)")
WorkOpt = typer.Option(None, "--workdir", help="Folder the job runs in")
EnvOpt = typer.Option(None, "--env", help="KEY=VALUE exported in the job (repeatable)")
VarOpt = typer.Option(None, "--var", help="KEY=VALUE for the template, e.g. master_addr=127.0.0.1, "
                                          "torchrun='python3 my_launcher.py' (repeatable)")
SweepOpt = typer.Option(None, "--sweep", help="Arguments of one array task, as one shell-quoted string "
                                              "(repeatable; with --template array)")
WaitOpt = typer.Option(None, "--max-wait", help="Longest wait for a tighter placement (default: 10% of the "
                                                "time limit, at most 2h)")
TpOpt = typer.Option(None, "--tp-size", help="GPUs in one tensor-parallel group: on partitions placed by NVLink "
                                              "blocks, each group stays inside one block (--segment)")
IdleOpt = typer.Option(False, "--idle", help="Plan against the declared topology as if idle (no Slurm queries)")
RightSizeOpt = typer.Option(False, "--right-size", help="Apply `slurmtools advise`'s recommendation for this job "
                                                       "shape (your user, --name, GPUs asked); the plan's notes say "
                                                       "what changed from what, and why (docs/advise.md)")
HistSacctOpt = typer.Option(None, "--sacct-file", help="With --right-size: the job history from this saved `sacct "
                                                       "--parsable2` dump instead of sacct")
HistEpilogOpt = typer.Option(None, "--epilog-dir", help="With --right-size: folder of the epilog's GPU records "
                                                        "(default: <site spool_dir>/jobs)")
CpusOpt = typer.Option(None, "--cpus", help="CPU jobs: CPUs per task, like sbatch --cpus-per-task (default 1); "
                                              "--cpus without --gpus makes a CPU job")
NtasksOpt = typer.Option(None, "--ntasks", help="CPU jobs: tasks in all, like sbatch --ntasks (default: one per "
                                                "node), spread evenly over --nodes (default: the fewest hosts "
                                                "that hold them); more than one needs --template mpi")
MemOpt = typer.Option(None, "--mem", help='CPU jobs: memory per node, like sbatch --mem ("16G", "500M"; a bare '
                                          "number is MB; default: the host's memory share for the CPUs asked)")
CmdArg = typer.Argument(None, help="The command to run, after --")
FillOpt = typer.Option(False, "--fill-slack", help="Submit a preemptible array on the lowest tier (or the --tier "
                                                   "named) sized to the idle GPUs now, less the pending demand ahead: "
                                                   "one task of --gpus-per-task GPUs each (docs/slack.md)")
GptOpt = typer.Option(1, "--gpus-per-task", help="With --fill-slack: GPUs of each array task")
MaxTasksOpt = typer.Option(None, "--max-tasks", help="With --fill-slack: at most this many array tasks")


# ------------------------------------------------------------------------------------------------ commands
def plan(command: Optional[List[str]] = CmdArg, gpus: Optional[int] = GpusOpt, nodes: Optional[int] = NodesOpt,
         gpus_per_node: Optional[int] = GpnOpt, gpu_type: Optional[str] = TypeOpt, time: str = TimeOpt,
         tier: Optional[str] = TierOpt, comm: str = CommOpt, template: Optional[str] = TemplateOpt, name: str = NameOpt,
         account: Optional[str] = AccountOpt, user: Optional[str] = UserOpt, partition: Optional[str] = PartOpt,
         output_dir: Optional[str] = OutOpt, workdir: Optional[str] = WorkOpt, env: Optional[List[str]] = EnvOpt,
         var: Optional[List[str]] = VarOpt, sweep: Optional[List[str]] = SweepOpt, max_wait: Optional[str] = WaitOpt,
         tp_size: Optional[int] = TpOpt, handles_signal: bool = SignalOpt, cpus: Optional[int] = CpusOpt,
         ntasks: Optional[int] = NtasksOpt, mem: Optional[str] = MemOpt, idle: bool = IdleOpt,
         checkpoint_signal: Optional[str] = CkptSignalOpt,
         slurm_version: Optional[str] = SlurmVersionOpt, right_size: bool = RightSizeOpt,
         sacct_file: Optional[str] = HistSacctOpt, epilog_dir: Optional[str] = HistEpilogOpt,
         tz: Optional[str] = TzOpt, site_path: Optional[str] = SiteOpt, json_out: bool = JsonOpt) -> None:
    """Dry run: the plan, why each directive was chosen, and the rendered sbatch script."""
    from slurmtools.cli.plan_cmd import plan as run

    run(command=command, gpus=gpus, nodes=nodes, gpus_per_node=gpus_per_node, gpu_type=gpu_type, time=time,
        tier=tier, comm=comm, template=template, name=name, account=account, user=user, partition=partition,
        output_dir=output_dir, workdir=workdir, env=env, var=var, sweep=sweep, max_wait=max_wait, tp_size=tp_size,
        handles_signal=handles_signal, cpus=cpus, ntasks=ntasks, mem=mem, idle=idle,
        checkpoint_signal=checkpoint_signal, slurm_version=slurm_version, right_size=right_size,
        sacct_file=sacct_file, epilog_dir=epilog_dir, tz=tz, site_path=site_path, json_out=json_out)


def submit(command: Optional[List[str]] = CmdArg, gpus: Optional[int] = GpusOpt, nodes: Optional[int] = NodesOpt,
           gpus_per_node: Optional[int] = GpnOpt, gpu_type: Optional[str] = TypeOpt, time: str = TimeOpt,
           tier: Optional[str] = TierOpt, comm: str = CommOpt, template: Optional[str] = TemplateOpt,
           name: str = NameOpt,
           account: Optional[str] = AccountOpt, user: Optional[str] = UserOpt, partition: Optional[str] = PartOpt,
           output_dir: Optional[str] = OutOpt, workdir: Optional[str] = WorkOpt, env: Optional[List[str]] = EnvOpt,
           var: Optional[List[str]] = VarOpt, sweep: Optional[List[str]] = SweepOpt,
           max_wait: Optional[str] = WaitOpt, tp_size: Optional[int] = TpOpt, handles_signal: bool = SignalOpt,
           cpus: Optional[int] = CpusOpt, ntasks: Optional[int] = NtasksOpt, mem: Optional[str] = MemOpt,
           checkpoint_signal: Optional[str] = CkptSignalOpt, fill_slack: bool = FillOpt,
           gpus_per_task: int = GptOpt, max_tasks: Optional[int] = MaxTasksOpt, site_path: Optional[str] = SiteOpt,
           json_out: bool = JsonOpt) -> None:
    """Plan, check admission (when the policy layer is installed), sbatch, and print the job id and output path."""
    import os

    from slurmtools.cli import job_checks as checks
    from slurmtools.cli.common import load_site
    from slurmtools.planner.explain import plan_dict
    from slurmtools.planner.live import gather

    if fill_slack:  # the array's shape is decided from the idle GPUs: refuse what would contradict it, first
        from slurmtools.cli.slack import check_fill_options

        check_fill_options(gpus_per_task, max_tasks, gpus=gpus, nodes=nodes, gpus_per_node=gpus_per_node,
                           sweep=sweep, cpus=cpus, ntasks=ntasks, template=template)
        gpus, nodes, template = gpus_per_task, 1, "array"
    elif gpus_per_task != 1 or max_tasks is not None:
        fail("--gpus-per-task and --max-tasks size a --fill-slack array; add --fill-slack or use --gpus")
    req = build_request(gpus, nodes, gpus_per_node, gpu_type, time, tier, comm, template, name, account, user,
                        partition, output_dir, workdir, env, var, sweep, max_wait, command, tp_size, handles_signal,
                        cpus, ntasks, mem, checkpoint_signal)
    site = load_site(site_path)
    state = gather(site)
    if state.backend is None:
        fail(f"cannot submit: {state.note.split(';')[0]}", code=4)
    fill = None
    if fill_slack:
        from slurmtools.cli.slack import fill_slack_request

        req, fill = fill_slack_request(req, site, state, gpus_per_task, max_tasks)
        if req is None:  # nothing idle to fill: not an error, and nothing submitted
            if json_out:
                print_json({"job_id": None, "fill_slack": fill})
            else:
                typer.echo(f"nothing submitted: {fill['why']}")
            return
    ident, req = checks.identity(req, site, state)
    p, info, script = plan_and_render(req, site, state)
    p = checks.after_plan(p, ident)
    problems, folder_notes = checks.folders(req, ident.user)
    if problems:
        fail(problems[0], code=2)
    preflight_msg = _preflight(script, req, site, state.backend)
    cwd = req.workdir or os.getcwd()
    sub_env, dropped = sbatch_env(os.environ)
    if dropped:
        typer.echo(f"slurmtools: warning: not passed to sbatch: {', '.join(dropped)} (your environment's sbatch "
                   f"defaults would override the plan's #SBATCH directives, which are the whole request; give "
                   f"what you want as slurmtools submit options)", err=True)
    job_id = state.backend.submit(script, options=(), env=sub_env, cwd=cwd)
    out = p.output.replace("%x", p.request.name).replace("%j", str(job_id)).replace("%A", str(job_id))
    out_path = out if os.path.isabs(out) else os.path.join(cwd, out)
    if json_out:
        d = plan_dict(p, state.note)
        d.update(job_id=job_id, output_path=out_path, preflight=preflight_msg)
        if fill is not None:
            d["fill_slack"] = fill
        print_json(d)
        return
    typer.echo(preflight_msg)
    if fill is not None:
        typer.echo(f"fill-slack: {fill['why']}")
    for n in ident.notes + tuple(folder_notes):
        typer.echo(f"note: {n}")
    what = (f"CPU job, {p.nodes} x {p.tasks_per_node} task(s) x {p.cpus_per_task} CPU(s)" if p.cpu_job
            else f"{p.nodes} x {p.gpus_per_node} {p.gpu_type} GPUs")
    typer.echo(f"submitted job {job_id}: {what}, tier {p.tier}, "
               f"{'--switches=' + str(p.switches) + '@' + str(p.switch_wait) + 's' if p.switches else 'no switch limit'}")
    typer.echo(f"output: {out_path}" + (" (%a: the array task id)" if "%a" in out_path else ""))


def _preflight(script: str, req, site, backend) -> str:
    try:
        from slurmtools.policy.engine import preflight
        from slurmtools.policy.request import JobRequest as PolicyRequest
    except ImportError:
        return "admission preflight: not available in this installation (skipped); Slurm still enforces its limits"
    from slurmtools.planner.plan import _whoami

    preq = PolicyRequest.from_sbatch(script=script, user=req.user or _whoami())
    decision = preflight(preq, site, backend)
    if decision.action == "deny":
        fail(f"admission refused: {decision.message}", code=2)
    if decision.action == "modify":
        return f"admission preflight: allowed with changes {decision.changes} ({decision.policy})"
    return "admission preflight: allowed"


def explain(job_id: int = typer.Argument(..., help="Job id"), site_path: Optional[str] = SiteOpt,
            json_out: bool = JsonOpt) -> None:
    """Where a pending or running job sits (switches, NVLink domains), its quality score, and why it waits."""
    from slurmtools.cli.common import load_site
    from slurmtools.planner.explain import job_report, job_text
    from slurmtools.planner.live import gather

    site = load_site(site_path)
    state = gather(site)
    if state.backend is None:
        fail(f"cannot explain job {job_id}: {state.note.split(';')[0]}", code=4)
    job = state.backend.job(job_id)
    domains = _domains(state.graph, job.nodes)
    r = job_report(job, state.view, domains=domains)
    if json_out:
        print_json(r)
        return
    typer.echo(job_text(r))


def _domains(graph, hosts) -> dict[str, str]:
    try:
        from slurmtools.topology.queries import domain_of
    except ImportError:
        return {}
    out = {}
    for h in hosts:
        try:
            ds = domain_of(graph, h)
        except (ValueError, KeyError):
            continue
        if ds:
            out[h] = ds[0]
    return out


@templates_app.command("list")
def templates_list(site_path: Optional[str] = SiteOpt, json_out: bool = JsonOpt) -> None:
    """Templates on the search path ($SLURMTOOLS_TEMPLATE_PATH, the site's job_templates/, bundled)."""
    from slurmtools.cli.common import load_site
    from slurmtools.planner.templates import list_templates

    site = load_site(site_path)
    ts = list_templates(site.source)
    if json_out:
        print_json([{"name": t.name, "origin": t.origin, "path": str(t.path), "description": t.description,
                     "tasks": t.shape.tasks, "multi_node": t.shape.multi_node, "array": t.shape.array} for t in ts])
        return
    for t in ts:
        typer.echo(f"{t.name:<12} {t.origin:<8} {t.description}")


@templates_app.command("show")
def templates_show(name: str = typer.Argument(..., help="Template name"), site_path: Optional[str] = SiteOpt) -> None:
    """Print a template's source and where it was found."""
    from slurmtools.cli.common import load_site
    from slurmtools.planner.templates import find_template

    site = load_site(site_path)
    t = find_template(name, site.source, where=("templates show", "NAME"))
    typer.echo(f"# {t.name} ({t.origin}): {t.path}")
    typer.echo(t.path.read_text(encoding="utf-8"), nl=False)
