"""The planner's shapes for a trace's jobs: what `slurmtools plan` would have submitted for each recorded job, for
the sandbox's planner-worth comparison (the same history as users submit today, and as the planner shapes it).

Pure. Each job becomes the request a researcher gives `slurmtools plan` (total GPUs and their type, time limit,
tier, account, partition), planned against the site's declared topology as if idle (the sandbox cannot ask the
cluster at each submission), and its directives are kept as sbatch options, with what Slurm reads in time units
scaled: --switches' wait. Identity, time, output and signal directives are the sandbox's own. A job the planner
refuses keeps its plain shape and is named in the notes.
"""

from __future__ import annotations

from slurmtools.sandbox.clocks import Clock

#: directives that shape the allocation (the rest: identity, time, output, signal, are the sandbox's)
SHAPE = ("nodes", "ntasks-per-node", "ntasks", "gpus-per-node", "gpus", "gres", "cpus-per-gpu", "cpus-per-task",
         "mem-per-gpu", "mem", "gres-flags", "switches", "segment", "exclusive", "constraint", "partition")


def _scaled_switches(value: str, scale: Clock) -> str:
    count, _, wait = value.partition("@")
    if not wait:
        return value
    from slurmtools.durations import parse_duration

    secs = scale.site_seconds(parse_duration(wait))
    return f"{count}@{secs // 60}:{secs % 60:02d}"   # minutes:seconds, as sbatch reads it


def planner_shapes(jobs, site, view, scale: Clock, release=None) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """(trace key -> shape options, notes). Arrays: one plan per array (its first task), as for submission."""
    from slurmtools.errors import SlurmtoolsError
    from slurmtools.planner.plan import TemplateShape, plan_job
    from slurmtools.planner.request import JobRequest

    template = TemplateShape(name="sandbox", tasks="per-node", multi_node=True)
    out: dict[str, tuple[str, ...]] = {}
    refused: dict[str, int] = {}
    for j in jobs:
        if not j.gpus:
            continue
        try:
            req = JobRequest(command=("true",), gpus=j.gpus, gpu_type=j.gpu_type, time_limit=int(j.limit_s or 3600),
                             tier=j.tier, account=j.account, partition=j.partition, name=f"sbx-{j.key}",
                             handles_signal=True)
            plan = plan_job(req, site, view, template, slurm=release)
        except (SlurmtoolsError, ValueError) as exc:
            why = str(exc).split(": ", 1)[-1][:120]
            refused[why] = refused.get(why, 0) + 1
            continue
        opts = []
        for d in plan.directives:
            if d.option not in SHAPE or d.option == "partition":
                continue
            value = _scaled_switches(d.value, scale) if d.option == "switches" and d.value else d.value
            opts.append(f"--{d.option}" if value is None else f"--{d.option}={value}")
        out[j.key] = tuple(opts)
    notes = [f"planner refused {n} job(s) ({why}); they keep their recorded shape" for why, n in refused.items()]
    return out, notes


def placement_fn(view):
    """hosts, GPUs per host -> (leaf switches under them, the planner's allreduce bandwidth estimate in GB/s per GPU)
    on the site's declared fabric (`planner.quality.estimate`), for `outcome`."""
    from slurmtools.planner.quality import estimate

    def place(hosts, gpus_per_host):
        known = [h for h in hosts if h in view.hosts]
        if not known:
            return None, None
        e = estimate(view, known, gpus_per_host)
        return e.leaves, round(e.gbytes, 2)
    return place


def site_view(site):
    """The planner's view of the site's declared fabric, as if idle."""
    from slurmtools.planner.live import _view, load_fabric_of

    return _view(load_fabric_of(site), {})
