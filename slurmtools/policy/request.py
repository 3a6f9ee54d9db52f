"""`JobRequest`: what a policy sees of a job, field for field what job_submit.lua sees in `job_desc` (22.05).

Built either from sbatch-style options (the CLI's submit, replay) or, inside Slurm, by the generated Lua from
`job_desc`. `None` means "not given", which is what Slurm's NO_VAL sentinels mean. The derived counts
(`gpus`, `cpus`, `mem_mb`) are computed by the same rules as the Lua evaluator, so both sides agree.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, replace

from slurmtools.errors import SlurmtoolsError

#: time_limit for `--time=UNLIMITED` (Slurm's INFINITE)
INFINITE = 0xFFFFFFFF


class RequestError(SlurmtoolsError):
    """An sbatch option could not be read; the message names the option."""

    exit_code = 2


@dataclass(frozen=True)
class JobRequest:
    """A job as admission control sees it. Field names are job_desc's names."""

    user_name: str | None = None
    account: str | None = None
    #: the user's default account (job_desc.default_account), used when `account` is not given
    default_account: str | None = None
    qos: str | None = None
    partition: str | None = None
    time_limit: int | None = None  # minutes; INFINITE for UNLIMITED
    min_nodes: int | None = None
    num_tasks: int | None = None
    ntasks_per_node: int | None = None
    cpus_per_task: int | None = None
    min_mem_per_node: int | None = None  # MB
    min_mem_per_cpu: int | None = None  # MB
    tres_per_job: str | None = None  # "gres:gpu:h100:8" (--gpus)
    tres_per_node: str | None = None  # (--gres, --gpus-per-node)
    tres_per_task: str | None = None  # (--gpus-per-task)
    tres_per_socket: str | None = None  # (--gpus-per-socket, needs --sockets-per-node)
    sockets_per_node: int | None = None
    cpus_per_tres: str | None = None  # "gres:gpu:14" (--cpus-per-gpu)
    mem_per_tres: str | None = None  # "gres:gpu:250000" (--mem-per-gpu, MB)
    name: str | None = None
    comment: str | None = None
    script: str = ""
    argv: tuple[str, ...] = ()

    # ---- derived counts: the Lua evaluator mirrors every line of these ----

    @property
    def effective_account(self) -> str | None:
        return self.account or self.default_account

    @property
    def nodes(self) -> int:
        return self.min_nodes if self.min_nodes else 1

    @property
    def tasks(self) -> int:
        if self.num_tasks:
            return self.num_tasks
        if self.ntasks_per_node:
            return self.ntasks_per_node * self.nodes
        return self.nodes

    def gpus_by_type(self) -> dict[str, int]:
        """GPUs by type ("untyped" for `gpu:N`); of --gpus, per node x nodes, per task x tasks, per socket x sockets
        x nodes the largest."""
        best: dict[str, int] = {}
        best_total = 0
        sockets = self.sockets_per_node if self.sockets_per_node else 1
        for text, mult in ((self.tres_per_job, 1), (self.tres_per_node, self.nodes), (self.tres_per_task, self.tasks),
                           (self.tres_per_socket, sockets * self.nodes)):
            counts = {k: v * mult for k, v in gpu_counts(text).items()}
            total = sum(counts.values())
            if total > best_total:
                best, best_total = counts, total
        return best

    @property
    def gpus(self) -> int:
        return sum(self.gpus_by_type().values())

    @property
    def cpus(self) -> int:
        per_task = self.cpus_per_task if self.cpus_per_task else 1
        n = self.tasks * per_task
        per_gpu = sum(gpu_counts(self.cpus_per_tres).values())
        if per_gpu:
            n = max(n, per_gpu * self.gpus)
        return n

    @property
    def mem_mb(self) -> int | None:
        """Memory of the whole job in MB, or None when the job leaves it to the site default."""
        if self.min_mem_per_node is not None:
            return self.min_mem_per_node * self.nodes
        if self.min_mem_per_cpu is not None:
            return self.min_mem_per_cpu * self.cpus
        per_gpu = sum(gpu_counts(self.mem_per_tres).values())
        if per_gpu:
            return per_gpu * self.gpus
        return None

    def with_changes(self, changes: dict[str, str]) -> "JobRequest":
        return replace(self, **changes)

    # ---- construction from sbatch options ----

    @classmethod
    def from_sbatch(cls, args: list[str] | tuple[str, ...] = (), script: str = "", user: str | None = None,
                    default_account: str | None = None) -> "JobRequest":
        """Options from `#SBATCH` lines of `script`, then `args` (the command line wins, as in sbatch)."""
        values: dict = {}
        for line_args in _script_directives(script):
            _apply(values, line_args, where="#SBATCH")
        script_argv: tuple[str, ...] = ()
        rest = _apply(values, list(args), where="option")
        if rest:
            script_argv = tuple(rest[1:])
        # job_submit.lua in 22.05 cannot read a command-line --signal (warn_signal is not exposed), so only the
        # script's own #SBATCH --signal counts, on both sides
        values.pop("script_signal", None)
        per_gpu = values.pop("ntasks_per_gpu", None)
        wrap = values.pop("wrap", None)
        if wrap is not None and not script:
            script = "#!/bin/sh\n" + wrap + "\n"
        req = cls(user_name=user, default_account=default_account, script=script, argv=script_argv, **values)
        if per_gpu and not req.num_tasks:
            # sbatch turns --ntasks-per-gpu into a task count before the controller sees the job
            req = replace(req, num_tasks=per_gpu * req.gpus)
        _client_checks(req)
        return req


_DIGITS = re.compile(r"^[0-9]+\Z")


def _client_checks(req: "JobRequest") -> None:
    """What sbatch itself refuses before the controller (and job_submit.lua) sees the job (22.05, measured)."""
    job = gpu_counts(req.tres_per_job)
    if job and req.min_nodes and sum(job.values()) < req.min_nodes:
        raise RequestError("option --gpus: fewer GPUs than nodes (-N); sbatch refuses this "
                           "(Failed to validate job spec, --gpus < -N)")
    if req.tres_per_socket and not req.sockets_per_node:
        raise RequestError("option --gpus-per-socket: needs --sockets-per-node; sbatch refuses it without")
    kinds = set()
    for text in (req.tres_per_job, req.tres_per_node, req.tres_per_task, req.tres_per_socket):
        kinds |= {"untyped" if t == "untyped" else "typed" for t in gpu_counts(text)}
    if len(kinds) > 1:
        raise RequestError("option --gres/--gpus*: GPUs asked for both with and without a type; sbatch refuses "
                           "this (Invalid GRES specification)")


def gpu_counts(text: str | None) -> dict[str, int]:
    """GPU counts by type in a job_desc TRES string (`gres:gpu:h100:4,gres:gpu:2`, or `gres/gpu:h100=4` as newer
    releases write tres_per_task); mirrors the Lua parser.

    Items that are not GPUs are ignored; `gpu` alone counts 1; a count that is not a number counts 1.
    """
    out: dict[str, int] = {}
    if not text:
        return out
    for item in text.split(","):
        item = item.strip(" \t\n\r\f\v")
        if item.startswith("gres:") or item.startswith("gres/"):
            item = item[5:]
        # 25.11 writes tres_per_task counts as `gpu:h100=2` (measured), 22.05 as `gpu:h100:2`
        item, eq, count_text = item.partition("=")
        parts = item.split(":")
        if parts[0] != "gpu":
            continue
        typ, count = "untyped", 1
        if eq:
            if len(parts) >= 2:
                typ = parts[1]
            if _DIGITS.match(count_text):
                count = int(count_text)
        elif len(parts) == 2:
            if _DIGITS.match(parts[1]):
                count = int(parts[1])
            else:
                typ = parts[1]
        elif len(parts) >= 3:
            typ = parts[1]
            count = int(parts[2]) if _DIGITS.match(parts[2]) else 1
        out[typ] = out.get(typ, 0) + count
    return out


# ---------------------------------------------------------------------------------------------------------------
# sbatch option parsing (the subset admission control needs; other options are accepted and ignored)

_VALUE_OPTS = {
    "-p": "partition", "--partition": "partition", "-q": "qos", "--qos": "qos", "-A": "account",
    "--account": "account", "-t": "time", "--time": "time", "-N": "nodes", "--nodes": "nodes", "-n": "ntasks",
    "--ntasks": "ntasks", "--ntasks-per-node": "ntasks_per_node", "-c": "cpus_per_task",
    "--cpus-per-task": "cpus_per_task", "--mem": "mem", "--mem-per-cpu": "mem_per_cpu", "--gres": "gres",
    "-G": "gpus", "--gpus": "gpus", "--gpus-per-node": "gpus_per_node", "--gpus-per-task": "gpus_per_task",
    "--gpus-per-socket": "gpus_per_socket", "--sockets-per-node": "sockets_per_node", "--ntasks-per-gpu": "ntasks_per_gpu",
    "--cpus-per-gpu": "cpus_per_gpu", "--mem-per-gpu": "mem_per_gpu", "--comment": "comment", "-J": "name",
    "--job-name": "name", "--signal": "signal", "--wrap": "wrap",
    # accepted and ignored, but they take a value
    "-o": None, "--output": None, "-e": None, "--error": None, "-D": None, "--chdir": None, "-w": None,
    "--nodelist": None, "-x": None, "--exclude": None, "--switches": None, "-C": None, "--constraint": None,
    "--begin": None, "--dependency": None, "-d": None, "--export": None, "--array": None, "-a": None,
    "--mail-type": None, "--mail-user": None, "--nice": None, "--requeue": False, "--no-requeue": False,
    "--exclusive": False, "-H": False, "--hold": False, "--test-only": False, "--parsable": False,
    "-Q": False, "--quiet": False, "-v": False, "--wait": False, "-W": False, "--open-mode": None,
    "--time-min": None, "--distribution": None, "-m": None, "--gpu-bind": None, "--cpu-bind": None,
    "--reservation": None, "--uid": None, "--gid": None, "--priority": None, "--profile": None,
}
#: flags that may also carry a value (`--exclusive`, `--exclusive=topo`); ignored by admission control either way
_OPTIONAL_VALUE = frozenset({"--exclusive"})
_MEM = re.compile(r"^(\d+)([KMGT]?)$", re.IGNORECASE)
_MEM_SCALE = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def _script_directives(script: str) -> list[list[str]]:
    """Option lists of the `#SBATCH` lines before the first command, as sbatch reads them."""
    out = []
    for i, line in enumerate(script.splitlines()):
        s = line.strip()
        if i == 0 and s.startswith("#!"):
            continue
        if not s or (s.startswith("#") and not s.startswith("#SBATCH")):
            continue
        if not s.startswith("#SBATCH"):
            break
        body = s[len("#SBATCH"):].split("#", 1)[0]
        try:
            out.append(shlex.split(body))
        except ValueError as exc:
            raise RequestError(f"#SBATCH line {i + 1}: {exc}") from None
    return out


def _apply(values: dict, args: list[str], where: str) -> list[str]:
    """Read options into `values`; return what follows them (script path and its arguments)."""
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-") or a == "-":
            return args[i:]
        if a == "--":
            return args[i + 1:]
        if a.startswith("--") and "=" in a:
            opt, val = a.split("=", 1)
            takes = _VALUE_OPTS.get(opt, "unknown")
            if takes is False and opt not in _OPTIONAL_VALUE:
                raise RequestError(f"{where} {opt}: takes no value")
        else:
            opt, val = a, None
            if not a.startswith("--") and len(a) > 2:  # -N2, -pgpu
                opt, val = a[:2], a[2:]
            takes = _VALUE_OPTS.get(opt, "unknown")
            if takes is not False and val is None:
                if takes == "unknown":
                    raise RequestError(f"{where} {opt}: unknown sbatch option (write --name=value)")
                if i + 1 >= len(args):
                    raise RequestError(f"{where} {opt}: needs a value")
                i += 1
                val = args[i]
        if takes == "unknown" and not opt.startswith("--"):
            raise RequestError(f"{where} {opt}: unknown sbatch option")
        if takes:
            _set(values, takes, opt, val, where)
        i += 1
    return []


def _int(opt: str, val: str, where: str, minimum: int = 1) -> int:
    if not _DIGITS.match(val) or int(val) < minimum:
        raise RequestError(f"{where} {opt}: expected a whole number >= {minimum}, got {val!r}")
    return int(val)


def _mem(opt: str, val: str, where: str) -> int:
    m = _MEM.match(val.strip())
    if not m:
        raise RequestError(f"{where} {opt}: expected memory like 4000, 250G or 2T, got {val!r}")
    return int(math.ceil(int(m.group(1)) * _MEM_SCALE[m.group(2).upper()]))


def _gpu_spec(opt: str, val: str, where: str) -> str:
    """`h100:4` / `4` / `gpu:h100:4` (for --gres) -> job_desc form `gres:gpu:h100:4`."""
    v = val.strip()
    if opt == "--gres":
        items = []
        for item in v.split(","):
            if not re.match(r"^[A-Za-z_][\w.-]*(:[\w.-]+){0,2}$", item):
                raise RequestError(f"{where} --gres: expected gpu[:type]:count, got {val!r}")
            items.append("gres:" + item)
        return ",".join(items)
    if not re.match(r"^([A-Za-z_][\w.-]*:)?\d+$", v):
        raise RequestError(f"{where} {opt}: expected [type:]count, got {val!r}")
    return "gres:gpu:" + v


def _set(values: dict, key: str, opt: str, val: str, where: str) -> None:
    if key in ("partition", "qos", "account", "comment", "name"):
        values[key] = val
    elif key == "time":
        values["time_limit"] = parse_time_minutes(opt, val, where)
    elif key == "nodes":
        first = val.split("-", 1)[0]
        values["min_nodes"] = _int(opt, first, where)
    elif key == "ntasks":
        values["num_tasks"] = _int(opt, val, where)
    elif key == "ntasks_per_node":
        values["ntasks_per_node"] = _int(opt, val, where)
    elif key == "cpus_per_task":
        values["cpus_per_task"] = _int(opt, val, where)
    elif key == "mem":
        values["min_mem_per_node"] = _mem(opt, val, where)
        values.pop("min_mem_per_cpu", None)
    elif key == "mem_per_cpu":
        values["min_mem_per_cpu"] = _mem(opt, val, where)
        values.pop("min_mem_per_node", None)
    elif key == "gres":
        values["tres_per_node"] = _gpu_spec(opt, val, where)
    elif key == "gpus":
        values["tres_per_job"] = _gpu_spec(opt, val, where)
    elif key == "gpus_per_node":
        values["tres_per_node"] = _gpu_spec(opt, val, where)
    elif key == "gpus_per_task":
        values["tres_per_task"] = _gpu_spec(opt, val, where)
    elif key == "gpus_per_socket":
        values["tres_per_socket"] = _gpu_spec(opt, val, where)
    elif key == "ntasks_per_gpu":
        values["ntasks_per_gpu"] = _int(opt, val, where)
    elif key == "sockets_per_node":
        values["sockets_per_node"] = _int(opt, val, where)
    elif key == "cpus_per_gpu":
        values["cpus_per_tres"] = "gres:gpu:%d" % _int(opt, val, where)
    elif key == "mem_per_gpu":
        values["mem_per_tres"] = "gres:gpu:%d" % _mem(opt, val, where)
    elif key == "signal":
        values["script_signal"] = val  # kept apart: job_submit.lua cannot see command-line --signal
    elif key == "wrap":
        values["wrap"] = val


def parse_time_minutes(opt: str, val: str, where: str = "option") -> int:
    """Slurm --time forms -> whole minutes, rounded up as Slurm does; UNLIMITED/INFINITE -> INFINITE."""
    from slurmtools.durations import parse_duration

    v = val.strip()
    if v.lower() in ("unlimited", "infinite"):
        return INFINITE
    if not re.match(r"^[\d:-]+$", v):
        raise RequestError(f"{where} {opt}: expected a Slurm time like 90, 1:30:00 or 2-00:00:00, got {val!r}")
    try:
        seconds = parse_duration(v)
    except ValueError:
        raise RequestError(f"{where} {opt}: expected a Slurm time like 90, 1:30:00 or 2-00:00:00, "
                           f"got {val!r}") from None
    return -(-seconds // 60)
