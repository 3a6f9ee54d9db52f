"""The body of `slurmtools plan`, without typer, and the request and rendering steps `submit` shares with it:
`launch.py` runs `plan` directly when the command line is one it can read from typer's captured grammar (importing
typer and building its option adapters cost more than planning on a 16k-host site), and `cli/jobs.py` registers
the same function with typer for every other command line."""

from __future__ import annotations

from typing import List, Optional

from slurmtools.cli.output import echo, print_json
from slurmtools.errors import OptionError


def _pairs(values: Optional[List[str]], option: str) -> tuple[tuple[str, str], ...]:
    from slurmtools.planner.request import RequestError

    out = []
    for v in values or []:
        if "=" not in v:
            raise RequestError(option, f"expected KEY=VALUE, got {v!r}")
        k, val = v.split("=", 1)
        out.append((k, val))
    return tuple(out)


def _mem_mb(text: str | None) -> int | None:
    """sbatch's --mem forms: a number of MB, or a number with K, M, G or T."""
    import re

    from slurmtools.planner.request import RequestError

    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)B?\s*", text, re.IGNORECASE)
    if not m:
        raise RequestError("--mem", f'expected memory like "16G", "500M" or a number of MB, got {text!r}')
    n, unit = int(m.group(1)), m.group(2).upper()
    if unit == "K":
        return -(-n // 1024)
    return n * {"": 1, "M": 1, "G": 1024, "T": 1024 * 1024}[unit]


def build_request(gpus, nodes, gpus_per_node, gpu_type, time, tier, comm, template, name, account, user, partition,
                  output_dir, workdir, env, var, sweep, max_wait, command, tp_size=None, handles_signal=False,
                  cpus=None, ntasks=None, mem=None, checkpoint_signal=None):
    import shlex

    from slurmtools.durations import parse_duration
    from slurmtools.planner.request import JobRequest, RequestError

    for opt, v in (("--gpu-type", gpu_type), ("--tier", tier), ("--template", template), ("--account", account),
                   ("--user", user), ("--partition", partition), ("--output-dir", output_dir),
                   ("--workdir", workdir)):
        # "" is not "not given": an unset shell variable (--partition "$PART") must not pick the default silently
        if v is not None and not v.strip():
            raise RequestError(opt, f"an empty value ({v!r}): name one, or leave the option out for the default")
    try:
        seconds = parse_duration(time)
    except ValueError as exc:
        raise RequestError("--time", str(exc)) from None
    wait = None
    if max_wait is not None:
        try:
            wait = parse_duration(max_wait)
        except ValueError as exc:
            raise RequestError("--max-wait", str(exc)) from None
    sweeps = []
    for s in sweep or []:
        try:
            sweeps.append(tuple(shlex.split(s)))
        except ValueError as exc:
            raise RequestError("--sweep", f"cannot split {s!r} into arguments: {exc}") from None
    return JobRequest(command=tuple(command or ()), gpus=gpus, nodes=nodes, gpus_per_node=gpus_per_node,
                      gpu_type=gpu_type, time_limit=seconds, tier=tier, comm=comm, template=template, name=name,
                      account=account, user=user, partition=partition, output_dir=output_dir, workdir=workdir,
                      env=_pairs(env, "--env"), template_vars=_pairs(var, "--var"), sweep=tuple(sweeps),
                      max_wait=wait, tp_size=tp_size, handles_signal=handles_signal, cpus=cpus, ntasks=ntasks,
                      mem_mb=_mem_mb(mem), checkpoint_signal=checkpoint_signal)


def plan_and_render(req, site, state):
    from dataclasses import replace

    from slurmtools.planner.plan import plan_job
    from slurmtools.planner.request import check_tp_hosts
    from slurmtools.planner.templates import default_template, find_template, render

    name = req.template
    if name is None and req.cpu_job:  # one task: python (array for a sweep); several: mpi (srun starts them all)
        name = "array" if req.sweep else ("mpi" if (req.ntasks or 1) > 1 or (req.nodes or 1) > 1 else "python")
        req = replace(req, template=name)
    if name is None:
        per = max((nt.gpus for nt in state.view.node_types.values()), default=8)
        name = default_template(req.gpus, req.nodes, per, bool(req.sweep))
        req = replace(req, template=name)
    info = find_template(name, site.source)
    p = plan_job(req, site, state.view, info.shape, state.releases, slurm=state.release, planned=state.planned)
    check_tp_hosts(req, p.gpus_per_node)
    return p, info, render(p, info, site.source)


def plan(*, command: Optional[List[str]], gpus: Optional[int], nodes: Optional[int], gpus_per_node: Optional[int],
         gpu_type: Optional[str], time: str, tier: Optional[str], comm: str, template: Optional[str], name: str,
         account: Optional[str], user: Optional[str], partition: Optional[str], output_dir: Optional[str],
         workdir: Optional[str], env: Optional[List[str]], var: Optional[List[str]], sweep: Optional[List[str]],
         max_wait: Optional[str], tp_size: Optional[int], handles_signal: bool, cpus: Optional[int],
         ntasks: Optional[int], mem: Optional[str], idle: bool, checkpoint_signal: Optional[str],
         slurm_version: Optional[str], right_size: bool, sacct_file: Optional[str], epilog_dir: Optional[str],
         tz: Optional[str], site_path: Optional[str], json_out: bool) -> None:
    """Dry run: the plan, why each directive was chosen, and the rendered sbatch script. Every option is given by
    name, with typer's default where the line has none (the defaults live in `cli/jobs.py`'s declarations only)."""
    from slurmtools.cli import job_checks as checks
    from slurmtools.planner.explain import plan_dict, plan_text
    from slurmtools.planner.live import gather
    from slurmtools.site import load_site

    req = build_request(gpus, nodes, gpus_per_node, gpu_type, time, tier, comm, template, name, account, user,
                        partition, output_dir, workdir, env, var, sweep, max_wait, command, tp_size, handles_signal,
                        cpus, ntasks, mem, checkpoint_signal)
    site = load_site(site_path)
    state = gather(site, idle=idle, slurm_version=slurm_version)
    ident, req = checks.identity(req, site, state, idle=idle)
    sized = None
    if right_size:
        from slurmtools.cli.advise import right_size_request

        req, sized = right_size_request(req, site, state, sacct_file=sacct_file, epilog_dir=epilog_dir, tz=tz)
    elif sacct_file is not None or epilog_dir is not None or tz is not None:
        opt = "--sacct-file" if sacct_file is not None else "--epilog-dir" if epilog_dir is not None else "--tz"
        raise OptionError(f"{opt}: only with --right-size")
    p, info, script = plan_and_render(req, site, state)
    p = checks.after_plan(p, ident)
    if sized is not None:
        from dataclasses import replace

        p = replace(p, notes=tuple(p.notes) + sized.notes)
    problems, folder_notes = checks.folders(req, ident.user)  # submit refuses these; a plan only warns
    if json_out:
        d = plan_dict(p, state.note)
        if sized is not None:
            d["right_size"] = sized.as_dict()
        d["script"] = script
        d["template_path"] = str(info.path)
        d["warnings"] = problems + folder_notes
        print_json(d)
        return
    for w in problems + folder_notes:
        echo(f"slurmtools: warning: {w}", err=True)
    echo(plan_text(p, state.note))
    echo(f"\n# ---- sbatch script (template {info.name}: {info.path})")
    echo(script, nl=False)
