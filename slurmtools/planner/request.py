"""What a researcher asks for: a `JobRequest`. Pure data plus the checks that need no site.

The request says what the job needs (GPUs, time, how its ranks talk); the planner decides how to ask Slurm for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from slurmtools.errors import ConfigError

Comm = Literal["allreduce", "tensor-parallel", "pipeline", "independent"]
COMM_HINTS: tuple[str, ...] = ("allreduce", "tensor-parallel", "pipeline", "independent")
BEST_TIER = "best"


class RequestError(ConfigError):
    """A request field is invalid; the message names the option (`--gpus`, `--time`, ...)."""

    def __init__(self, option: str, message: str):
        super().__init__("request", option, message)


@dataclass(frozen=True)
class JobRequest:
    """A job as the researcher describes it. Either `gpus` (total) or `nodes` x `gpus_per_node`."""

    command: tuple[str, ...] = ()
    gpus: int | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    gpu_type: str | None = None
    time_limit: int = 3600  # seconds
    #: a tier name; "best": the highest-priority tier this user may use that fits (a fallback the plan states);
    #: None: the site's default tier
    tier: str | None = None
    comm: str = "allreduce"
    template: str | None = None  # None: chosen from the job's shape
    name: str = "job"
    account: str | None = None
    user: str | None = None
    partition: str | None = None
    output_dir: str | None = None  # where %x-%j.out goes; None: the submit directory
    workdir: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    template_vars: tuple[tuple[str, str], ...] = ()
    sweep: tuple[tuple[str, ...], ...] = ()  # job arrays: one argument list per task
    max_wait: int | None = None  # cap on the wait for a tighter placement, seconds; None: planner default
    #: GPUs in one tensor-parallel group (they exchange activations every layer): sizes --segment on block fabrics
    tp_size: int | None = None
    #: the program handles the warning signal itself (else only slurmtools.checkpoint's promise lets it through)
    handles_signal: bool = False
    #: the warning signal for preemptible tiers (`--checkpoint-signal`); None: the tier's (site) choice
    checkpoint_signal: str | None = None
    #: CPU jobs (`--gpus 0`, or `--cpus` with no GPU option): CPUs per task (sbatch's --cpus-per-task), the total
    #: tasks (sbatch's --ntasks; None: one per node) and memory per node in MB (None: the node type's share)
    cpus: int | None = None
    ntasks: int | None = None
    mem_mb: int | None = None
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        validate(self)

    @property
    def cpu_job(self) -> bool:
        """No GPUs: `--gpus 0`, or `--cpus N` without --gpus/--gpus-per-node."""
        return self.gpus == 0 or (self.gpus is None and self.gpus_per_node is None and self.cpus is not None)

    @property
    def vars(self) -> dict[str, str]:
        return dict(self.template_vars)


def validate(r: JobRequest) -> None:
    """Shape checks that need no site. Site checks (tiers, partitions, node types) live in the planner."""
    if r.checkpoint_signal is not None:
        from slurmtools.warning_signals import normalize, why_not

        if normalize(r.checkpoint_signal) is None:
            raise RequestError("--checkpoint-signal", why_not(r.checkpoint_signal))
    if r.cpu_job:
        _validate_cpu(r)
    else:
        for opt, v in (("--cpus", r.cpus), ("--ntasks", r.ntasks), ("--mem", r.mem_mb)):
            if v is not None:
                raise RequestError(opt, "is for CPU jobs (--gpus 0); a GPU job gets the CPUs and memory that come "
                                        "with its GPUs (--cpus-per-gpu, --mem-per-gpu)")
    for opt, v in (("--gpus", r.gpus), ("--nodes", r.nodes), ("--gpus-per-node", r.gpus_per_node),
                   ("--tp-size", r.tp_size)):
        if r.cpu_job and opt == "--gpus":
            continue
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            if opt == "--gpus":
                raise RequestError(opt, f"must be a whole number >= 1, or 0 for a CPU job, got {v!r}")
            raise RequestError(opt, f"must be a whole number >= 1, got {v!r}")
    if r.gpus is not None and r.nodes is not None and r.gpus_per_node is None:
        if r.gpus % r.nodes:
            raise RequestError("--gpus", f"{r.gpus} GPUs cannot be spread evenly over {r.nodes} nodes")
    if r.gpus is not None and r.nodes is not None and r.gpus_per_node is not None \
            and r.gpus != r.nodes * r.gpus_per_node:
        raise RequestError("--gpus", f"{r.gpus} GPUs disagrees with --nodes {r.nodes} x --gpus-per-node "
                                     f"{r.gpus_per_node}; give one or the other")
    if r.gpus is None and r.nodes is None and not r.cpu_job:
        raise RequestError("--gpus", "give the total GPUs (--gpus N) or --nodes N with --gpus-per-node G")
    _validate_tp(r)
    if not isinstance(r.time_limit, int) or r.time_limit < 60:
        raise RequestError("--time", f"must be at least one minute, got {r.time_limit!r} s")
    if r.comm not in COMM_HINTS:
        raise RequestError("--comm", f"unknown communication hint {r.comm!r} (known: {', '.join(COMM_HINTS)})")
    if not r.name or any(ch in r.name for ch in "\n\r\0"):
        raise RequestError("--name", "must be a non-empty single line")
    for k, _v in r.env:
        if not k or not (k[0].isalpha() or k[0] == "_") or not all(c.isalnum() or c == "_" for c in k):
            raise RequestError("--env", f"{k!r} is not a valid environment variable name")
    for k, _v in r.template_vars:
        if not k.isidentifier():
            raise RequestError("--var", f"{k!r} is not a valid template variable name")
    if r.max_wait is not None and r.max_wait < 0:
        raise RequestError("--max-wait", "must not be negative")
    if r.sweep and not all(isinstance(a, tuple) for a in r.sweep):
        raise RequestError("--sweep", "each sweep entry must be a list of arguments")
    if len(r.sweep) > 100000:
        raise RequestError("--sweep", "more than 100000 array tasks")


def _validate_tp(r: JobRequest) -> None:
    """--tp-size G: the job's GPUs split into groups of G. G must divide them (else a group is left short), and
    where the GPUs per host are given, a group lies inside one host (G divides them) or spans whole hosts (they
    divide G): a group cut by a host boundary would carry its every-layer traffic off NVLink."""
    g = r.tp_size
    if g is None or r.cpu_job:
        return
    total = r.gpus if r.gpus is not None else (r.nodes * r.gpus_per_node if r.gpus_per_node else None)
    if total is not None and (g > total or total % g):
        raise RequestError("--tp-size", f"tensor-parallel groups of {g} GPUs do not divide the job's {total} GPUs")
    if r.gpus_per_node is not None:
        check_tp_hosts(r, r.gpus_per_node)


def check_tp_hosts(r: JobRequest, gpus_per_node: int) -> None:
    """A tensor-parallel group inside one host or over whole hosts; the planner calls it again once it has chosen
    the GPUs per host for `--gpus N` alone."""
    g, gpn = r.tp_size, gpus_per_node
    if g is None or not gpn:
        return
    if g <= gpn and gpn % g:
        raise RequestError("--tp-size", f"a tensor-parallel group of {g} GPUs does not divide a host's {gpn} GPUs: "
                                        "some group would be cut by a host boundary")
    if g > gpn and g % gpn:
        raise RequestError("--tp-size", f"a tensor-parallel group of {g} GPUs is not whole hosts of {gpn} GPUs: "
                                        "some group would be cut by a host boundary")


def _validate_cpu(r: JobRequest) -> None:
    """A CPU job names no GPU option, and its CPUs, tasks and memory are whole positive numbers."""
    for opt, v in (("--gpus-per-node", r.gpus_per_node), ("--gpu-type", r.gpu_type), ("--tp-size", r.tp_size)):
        if v is not None:
            raise RequestError(opt, "a CPU job (--gpus 0, or --cpus without --gpus) has no GPUs; leave it out")
    for opt, v in (("--cpus", r.cpus), ("--ntasks", r.ntasks), ("--nodes", r.nodes), ("--mem", r.mem_mb)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise RequestError(opt, f"must be a whole number >= 1, got {v!r}")
    if r.ntasks is not None and r.nodes is not None:
        if r.ntasks < r.nodes:
            raise RequestError("--ntasks", f"{r.ntasks} task(s) cannot fill {r.nodes} nodes (one task at least "
                                           "on each)")
        if r.ntasks % r.nodes:
            raise RequestError("--ntasks", f"{r.ntasks} tasks cannot be spread evenly over {r.nodes} nodes")
