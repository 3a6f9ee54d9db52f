"""`JobRequest`: what a policy sees of a job, field for field what job_submit.lua sees in `job_desc` (22.05).

Built either from sbatch-style options (the CLI's submit, replay) or, inside Slurm, by the generated Lua from
`job_desc`. `None` means "not given", which is what Slurm's NO_VAL sentinels mean. The derived counts
(`gpus`, `cpus`, `mem_mb`) are computed by the same rules as the Lua evaluator, so both sides agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from slurmtools.errors import SlurmtoolsError
from slurmtools.policy.directives import DirectiveError, getopt, script_options

#: time_limit for `--time=UNLIMITED` (Slurm's INFINITE)
INFINITE = 0xFFFFFFFF
#: the largest number admission accepts anywhere in a request, given or derived (2^40): no real job asks for more
#: GPUs, tasks, CPUs or MB of memory, and below 2^53 Python's integers and Lua's doubles compute and print the
#: same; a larger one is refused on both sides with the same message (`JobRequest.absurd_field`)
ABSURD = 2**40


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
    #: the most nodes the job may get (`-N 2-8`: 8); Slurm may allocate any count up to it
    max_nodes: int | None = None
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
    #: CPUs slurmctld already counts for an existing job (job_rec.min_cpus); only set when a modification is checked
    #: without naming a new task shape (`slurmtools.policy.update`)
    min_cpus: int | None = None
    #: job_desc.shared (slurm.h JOB_SHARED_*): `--exclusive` 0 (the job gets whole nodes), `--oversubscribe` 1,
    #: `--exclusive=user` 2, `=mcs` 3, `=topo` 4 (25.11); None: not given (NO_VAL16)
    shared: int | None = None
    #: not job_desc fields: what the site knows of the job's partition, set by `evaluate` for each partition the job
    #: names (`base.partition_shapes`): its node count (the most nodes a job without -N may be spread over) and the
    #: most GPUs one of its nodes has, by type (what an `--exclusive` job gets on each node)
    node_cap: int | None = None
    node_gpus: tuple[tuple[str, int], ...] = ()
    #: not a job_desc field either: the node limit of the job's tier (its QoS, `MaxTRESPerJob=node=N`), set by
    #: `evaluate` for the QoS the job has at each point (`base.tier_node_limits`); slurmctld gives a job no more nodes
    tier_nodes: int | None = None
    script: str = ""
    argv: tuple[str, ...] = ()

    # ---- derived counts: the Lua evaluator mirrors every line of these ----

    @property
    def effective_account(self) -> str | None:
        return self.account or self.default_account

    @property
    def fewest_nodes(self) -> int:
        """The fewest nodes the job may get: `-N 2-8` 2; `-n 16 --ntasks-per-node=8` 2 (sbatch sends that as min_nodes
        too: slurm_opt_create_job_desc); else 1."""
        n = self.min_nodes if self.min_nodes else 1
        if self.num_tasks and self.ntasks_per_node:
            n = max(n, -(-self.num_tasks // self.ntasks_per_node))
        if self.node_gpus:
            # --gpus=h100:12 needs 2 nodes of 8 (slurmctld shows NumNodes=2 for it, measured on both releases)
            per = dict(self.node_gpus)
            most = max(per.values())
            for typ, count in gpu_counts(self.tres_per_job).items():
                p = most if typ == "untyped" else per.get(typ)
                if p:
                    n = max(n, -(-count // p))
        return n

    @property
    def spread_over(self) -> tuple[int, str]:
        """What Slurm may spread a job without -N over, one node each: its tasks (`-n 16`), else the GPUs of --gpus
        (`--gpus=h100:4` alone ran on 4 nodes with 1 free GPU each, NumTasks=4, on 22.05 and 25.11; with -n the
        tasks bound the nodes: `-n 2 --gpus=h100:4` waited for 2 nodes with 2 free GPUs). (count, unit)"""
        if self.num_tasks:
            return self.num_tasks, "tasks"
        return sum(gpu_counts(self.tres_per_job).values()), "GPUs"

    @property
    def nodes(self) -> int:
        """The most nodes the job may get: `-N 2-8` may run on 8, so per-node GPUs and memory count 8 times. Without
        -N (max_nodes NO_VAL) slurmctld may place each task, or each GPU of --gpus without -n, on its own node (a
        job's max_nodes 0 means the partition's, capped at its QoS's `node=` limit: src/slurmctld/node_scheduler.c
        get_node_cnts), so `-n 16` counts 16 nodes, at most the partition's node count (`node_cap`) and the tier's
        node limit (`tier_nodes`) where the site knows them, never fewer than `fewest_nodes`."""
        n = self.fewest_nodes
        if self.max_nodes:
            return max(n, self.max_nodes)
        s = self.spread_over[0]
        if s > n:
            for cap in (self.node_cap, self.tier_nodes):
                if cap is not None and s > cap:
                    s = cap
            n = max(n, s)
        return n

    @property
    def spread(self) -> bool:
        """No -N and more nodes than the fewest: the tasks (or --gpus' GPUs) may be spread (`-n 8 --gres=gpu:h100:8`
        may get 8 nodes)."""
        return not self.max_nodes and self.nodes > self.fewest_nodes

    def pinned(self) -> "JobRequest":
        """The job on its fewest nodes (`-N <fewest_nodes>`): what the refusal's hint proposes, and the end of a node
        range where CPUs and memory per GPU are tightest."""
        n = self.fewest_nodes
        return replace(self, min_nodes=n, max_nodes=n)

    @property
    def whole_nodes(self) -> bool:
        """`--exclusive` (job_desc.shared 0): slurmctld gives the job every GPU of each node it gets
        (src/slurmctld/job_mgr.c: shared JOB_SHARED_NONE -> whole_node WHOLE_NODE_REQUIRED; node_scheduler.c
        _handle_exclusive_gres, stepmgr/gres_stepmgr.c gres_stepmgr_job_alloc_whole_node), with or without a GPU
        request. `--exclusive=user|mcs|topo` keep others off the nodes (or the topology block) but allocate only
        what the job asks for: they count as asked."""
        return self.shared == 0 and bool(self.node_gpus)

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
        if self.whole_nodes:
            best = self._whole_node_gpus(best, best_total)
        return best

    def _whole_node_gpus(self, asked: dict[str, int], asked_total: int) -> dict[str, int]:
        """GPUs of an `--exclusive` job: every GPU of each of its nodes. Of a type, its most a node x the nodes
        (at least as many nodes as the GPUs it asks for need); an untyped request takes the richest type; no GPU
        request takes each type of the partition (on a partition of several types that counts more than one node
        holds: never fewer)."""
        whole = {}
        for typ, per in self.node_gpus:
            whole[typ] = per * max(self.nodes, -(-asked_total // per))
        if not asked:
            return whole
        top = max(whole.values())
        return {k: max(v, top if k == "untyped" else whole.get(k, 0)) for k, v in asked.items()}

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
        if self.min_cpus:
            n = max(n, self.min_cpus)
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

    def absurd_field(self) -> str | None:
        """The first part of the request (as the user names it) whose number is beyond ABSURD, else None.

        Checked before any policy, in this order, by Python and Lua alike: given numbers, GPU strings, then what
        is derived from them (each product at most ABSURD squared, so Lua's doubles still compare it right)."""
        for what, v in (("--nodes", self.min_nodes), ("--nodes", self.max_nodes), ("--ntasks", self.num_tasks),
                        ("--ntasks-per-node", self.ntasks_per_node), ("--cpus-per-task", self.cpus_per_task),
                        ("--sockets-per-node", self.sockets_per_node), ("--mem", self.min_mem_per_node),
                        ("--mem-per-cpu", self.min_mem_per_cpu), ("--time", self.time_limit)):
            if v is not None and v > ABSURD:
                return what
        for what, text in (("--gpus", self.tres_per_job), ("--gres", self.tres_per_node),
                           ("--gpus-per-task", self.tres_per_task), ("--gpus-per-socket", self.tres_per_socket),
                           ("--cpus-per-gpu", self.cpus_per_tres), ("--mem-per-gpu", self.mem_per_tres)):
            if sum(gpu_counts(text).values()) > ABSURD:
                return what
        if self.tasks > ABSURD:
            return "task count"
        sockets = self.sockets_per_node if self.sockets_per_node else 1
        for text, mult in ((self.tres_per_node, self.nodes), (self.tres_per_task, self.tasks),
                           (self.tres_per_socket, sockets * self.nodes)):
            if sum(gpu_counts(text).values()) * mult > ABSURD:
                return "GPU count"
        per_task = self.cpus_per_task if self.cpus_per_task else 1
        if self.tasks * per_task > ABSURD or sum(gpu_counts(self.cpus_per_tres).values()) * self.gpus > ABSURD:
            return "CPU count"
        mem = self.mem_mb
        if mem is not None and mem > ABSURD:
            return "memory"
        return None

    def control_field(self) -> tuple[str, str] | None:
        """(option, `U+XXXX`) of the first control character in the job name, then the comment, else None.

        Checked before any policy (and before the numbers), by Python and Lua alike: sacct prints a name's line
        breaks raw, so one could forge report rows (docs/reports.md)."""
        for what, text in (("--job-name", self.name), ("--comment", self.comment)):
            char = control_char(text)
            if char is not None:
                return what, char
        return None

    def with_changes(self, changes: dict[str, str]) -> "JobRequest":
        return replace(self, **changes)

    # ---- construction from sbatch options ----

    @classmethod
    def from_sbatch(cls, args: list[str] | tuple[str, ...] = (), script: str = "", user: str | None = None,
                    default_account: str | None = None) -> "JobRequest":
        """Options from `#SBATCH` lines of `script`, then `args` (the command line wins, as in sbatch)."""
        values: dict = {}
        try:
            directives = script_options(script)
        except DirectiveError as exc:
            raise RequestError(str(exc)) from None
        for name, val, written in directives:
            _set(values, name, val, written, where="#SBATCH")
        try:
            opts, rest = getopt(list(args))
        except DirectiveError as exc:
            raise RequestError(f"option {exc}") from None
        for name, val, written in opts:
            _set(values, name, val, written, where="option")
        script_argv = tuple(rest[1:]) if rest else ()
        # job_submit.lua in 22.05 cannot read a command-line --signal (warn_signal is not exposed), so only the
        # script's own #SBATCH --signal counts, on both sides
        values.pop("script_signal", None)
        _tres_per_node(values)
        _shared(values)
        _node_counts(values)
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

#: the control characters refused in a job name or comment, as UTF-8 bytes (the Lua reads bytes): C0 and DEL,
#: C1 (U+0080..U+009F) and the Unicode line and paragraph separators U+2028/U+2029
_CONTROL_BYTES = re.compile(rb"[\x00-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xa8\xa9]")


def control_char(text: str | None) -> str | None:
    """`U+000A` for the first control character of `text` (read as the bytes Slurm stores), else None; mirrors the
    Lua's control_char. A name that is not valid UTF-8 reaches Python with its bytes kept (surrogateescape)."""
    if not text:
        return None
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that no byte stands for
        raw = text.encode("utf-8", "surrogatepass")
    m = _CONTROL_BYTES.search(raw)
    if m is None:
        return None
    b = m.group()
    point = b[0] if len(b) == 1 else b[1] if len(b) == 2 else 0x2000 + b[2] - 0x80
    return "U+%04X" % point


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

    Items that are not GPUs are ignored; `gpu` alone counts 1; a count takes Slurm's suffixes (`1k` is 1024 GPUs,
    measured on 22.05: suffix_mult in src/common/slurm_protocol_defs.c); a count that is not a number counts 1.
    A type listed twice counts its larger count, as Slurm's request does (22.05 and 25.11: `--gpus=h100:2,h100:3`
    asks for and gets 3; `--gpus-per-node=h100:1 --gres=gpu:h100:2`, sent as one tres_per_node, asks for 2).
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
            count = _count(count_text)
        elif len(parts) == 2:
            if _COUNT.match(parts[1]):
                count = _count(parts[1])
            else:
                typ = parts[1]
        elif len(parts) >= 3:
            typ = parts[1]
            count = _count(parts[2])
        out[typ] = max(out.get(typ, 0), count)
    return out


_COUNT = re.compile(r"^([0-9]+)([A-Za-z]*)\Z")
#: Slurm's count suffixes (case-insensitive)
COUNT_SUFFIX = {"": 1, "k": 1024, "kib": 1024, "kb": 1000, "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
                "g": 1024**3, "gib": 1024**3, "gb": 1000**3, "t": 1024**4, "tib": 1024**4, "tb": 1000**4,
                "p": 1024**5, "pib": 1024**5, "pb": 1000**5}


def _count(text: str) -> int:
    m = _COUNT.match(text)
    if not m:
        return 1
    mult = COUNT_SUFFIX.get(m.group(2).lower())
    if mult is None:
        return 1
    return _big_int(m.group(1)) * mult


# ---------------------------------------------------------------------------------------------------------------
# sbatch option parsing (the subset admission control needs; other options are accepted and ignored)

#: sbatch's long option names (slurmtools.policy.directives) -> what admission keeps of them; others are read and
#: left alone (sbatch takes them; admission has no rule on them)
_OPTION_KEYS = {
    "partition": "partition", "qos": "qos", "account": "account", "time": "time", "nodes": "nodes",
    "ntasks": "ntasks", "ntasks-per-node": "ntasks_per_node", "cpus-per-task": "cpus_per_task", "mem": "mem",
    "mem-per-cpu": "mem_per_cpu", "gres": "gres", "gpus": "gpus", "gpus-per-node": "gpus_per_node",
    "gpus-per-task": "gpus_per_task", "gpus-per-socket": "gpus_per_socket", "sockets-per-node": "sockets_per_node",
    "ntasks-per-gpu": "ntasks_per_gpu", "cpus-per-gpu": "cpus_per_gpu", "mem-per-gpu": "mem_per_gpu",
    "comment": "comment", "job-name": "name", "signal": "signal", "wrap": "wrap", "tres-per-task": "tres_per_task",
    "exclusive": "exclusive", "oversubscribe": "oversubscribe",
}
#: `--exclusive=VALUE` (case-insensitive) -> job_desc.shared (arg_set_exclusive in src/common/slurm_opt.c; topo is
#: 25.11's: 22.05's sbatch refuses it, so no such job reaches its controller)
_EXCLUSIVE = {"exclusive": 0, "oversubscribe": 1, "user": 2, "mcs": 3, "topo": 4}
#: sbatch's memory sizes (str_to_mbytes in src/common/proc_args.c): MB by default, a K/M/G/T suffix, each optionally
#: followed by B (`--mem=100GB` is 100G, not 100 GB of 1000^3)
_MEM = re.compile(r"^(\d+)(?:([KMGT])B?)?$", re.IGNORECASE)


def _int(opt: str, val: str, where: str, minimum: int = 1) -> int:
    if not _DIGITS.match(val) or _big_int(val) < minimum:
        raise RequestError(f"{where} {opt}: expected a whole number >= {minimum}, got {val!r}")
    return _big_int(val)


def _big_int(digits: str) -> int:
    """int() of a digit string; past 30 digits a stand-in that is as absurd (Python refuses int() of more than
    4300 digits, and no count or size has 30)."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 30 else 10**30


def _mem(opt: str, val: str, where: str) -> int:
    m = _MEM.match(val.strip())
    if not m:
        raise RequestError(f"{where} {opt}: expected memory like 4000, 250G or 2T, got {val!r}")
    n = _big_int(m.group(1))
    scale = (m.group(2) or "").upper()
    return n * 1024 * 1024 if scale == "T" else n * 1024 if scale == "G" else -(-n // 1024) if scale == "K" else n


def _gpu_spec(opt: str, val: str, where: str) -> str:
    """`h100:4` / `4` / `h100:4,a100:2` / `gpu:h100:4` or `gres/gpu:h100:4` (for --gres) -> job_desc form
    `gres:gpu:h100:4`, one item per comma as sbatch sends them (xfmt_tres, gres_prepend_tres_type)."""
    v = val.strip()
    if opt == "--gres":
        items = []
        for item in v.split(","):
            if item.startswith("gres/"):  # 25.11's TRES form; sbatch drops the doubled prefix
                item = item[5:]
            if not re.match(r"^[A-Za-z_][\w.-]*(:[\w.-]+){0,2}$", item):
                raise RequestError(f"{where} --gres: expected gpu[:type]:count, got {val!r}")
            items.append("gres:" + item)
        return ",".join(items)
    items = []
    for item in v.split(","):
        m = re.match(r"^([A-Za-z_][\w.-]*:)?\d+([A-Za-z]*)$", item)
        if not m or m.group(2).lower() not in COUNT_SUFFIX:
            raise RequestError(f"{where} {opt}: expected [type:]count, got {val!r}")
        items.append("gres:gpu:" + item)
    return ",".join(items)


def _set(values: dict, name: str, val: str | None, opt: str, where: str) -> None:
    key = _OPTION_KEYS.get(name)
    if key == "exclusive":
        # --exclusive alone is JOB_SHARED_NONE; the last of --exclusive/--oversubscribe sets job_desc.shared
        shared = _EXCLUSIVE.get("exclusive" if val is None else val.lower())
        if shared is None:
            raise RequestError(f"{where} {opt}: expected --exclusive or --exclusive=user|mcs|topo|oversubscribe, "
                               f"got {val!r} (sbatch refuses it: Invalid --exclusive specification)")
        values["shared"] = shared
        values["exclusive_given"] = True
        return
    if key == "oversubscribe":
        values["shared"] = _EXCLUSIVE["oversubscribe"]
        values["oversubscribe_given"] = True
        return
    if key is None or val is None:
        return
    if key in ("partition", "qos", "account", "comment", "name"):
        values[key] = val
    elif key == "time":
        minutes = parse_time_minutes(opt, val, where)
        # sbatch sends a limit of zero as INFINITE (arg_set_time_limit): `-t 0` is "no limit", not "no time"
        values["time_limit"] = INFINITE if minutes == 0 else minutes
    elif key == "nodes":
        values["min_nodes"], values["max_nodes"] = node_range(opt, val, where)
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
        # kept apart from --gpus-per-node: sbatch sends both in tres_per_node (see _tres_per_node)
        values["gres"] = None if val.strip().lower() == "none" else _gpu_spec(opt, val, where)
    elif key == "gpus":
        values["tres_per_job"] = _gpu_spec(opt, val, where)
    elif key == "gpus_per_node":
        values["gpus_per_node"] = _gpu_spec(opt, val, where)
    elif key == "gpus_per_task":
        values["tres_per_task"] = _gpu_spec(opt, val, where)
    elif key == "tres_per_task":
        values["tres_per_task"] = ",".join(i for i in val.split(",") if i.startswith(("gres/gpu", "gres:gpu")))
        for item in val.split(","):
            name, eq, count = item.partition("=")
            if name == "cpu" and eq:  # sbatch sets cpus_per_task from it (_set_tres_per_task_from_sibling_opt)
                values["cpus_per_task"] = _int(opt + " cpu=", count, where)
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


def _tres_per_node(values: dict) -> None:
    """tres_per_node as sbatch sends it (slurm_opt_create_job_desc): --gpus-per-node's items, then --gres's, both
    kept (`--gpus-per-node=h100:8 --gres=shard:1` asks for 8 GPUs); --gres=none sends nothing."""
    parts = [values.pop(k) for k in ("gpus_per_node", "gres") if values.get(k)]
    values.pop("gpus_per_node", None)
    values.pop("gres", None)
    if parts:
        values["tres_per_node"] = ",".join(parts)


def _shared(values: dict) -> None:
    """sbatch refuses --exclusive together with --oversubscribe (-s), wherever each is given (_validate_share_options
    in src/common/slurm_opt.c)."""
    exclusive = values.pop("exclusive_given", False)
    oversubscribe = values.pop("oversubscribe_given", False)
    if exclusive and oversubscribe:
        raise RequestError("option --exclusive: given with --oversubscribe (-s); sbatch refuses the pair "
                           "(--exclusive and --oversubscribe options are mutually exclusive)")


def _node_counts(values: dict) -> None:
    """min_nodes and max_nodes as sbatch 25.11 sends them with a task count. With -N (src/sbatch/opt.c
    _opt_verify): a range's top is cut to the tasks (`-N 2-8 -n 4` sends max_nodes 4) and fewer tasks than nodes
    make both the task count (`-N 4 -n 2`: 2-2). Without -N (slurm_opt_create_job_desc): `-n 16
    --ntasks-per-node=8` sends min_nodes 2 (tasks / per node, rounded up) and no max_nodes."""
    tasks = values.get("num_tasks")
    if tasks is None:
        return
    if "min_nodes" in values:
        lo, hi = values["min_nodes"], values["max_nodes"]
        if tasks < hi:
            values["max_nodes"] = hi = tasks
        if tasks < lo:
            values["min_nodes"] = values["max_nodes"] = tasks
    elif values.get("ntasks_per_node"):
        values["min_nodes"] = -(-tasks // values["ntasks_per_node"])


def node_range(opt: str, val: str, where: str = "option") -> tuple[int, int]:
    """`-N 4` -> (4, 4), `-N 2-8` -> (2, 8), 25.11's `-N 2,4,8` -> (2, 8): min_nodes and max_nodes as sbatch and
    scontrol send them (verify_node_count in src/common/proc_args.c); any other form is refused naming the option."""
    lo = hi = None
    for item in val.split(","):
        a, dash, b = item.partition("-")
        if not _DIGITS.match(a) or (dash and not _DIGITS.match(b)):
            raise RequestError(f"{where} {opt}: expected a whole number of nodes like 4, 2-8 or 2,4,8, got {val!r}")
        first, last = _big_int(a), _big_int(b) if dash else _big_int(a)
        if last < first:
            raise RequestError(f"{where} {opt}: the node range {item!r} ends below its start")
        lo = first if lo is None else min(lo, first)
        hi = last if hi is None else max(hi, last)
    if lo is None:
        raise RequestError(f"{where} {opt}: expected a whole number of nodes like 4, 2-8 or 2,4,8, got {val!r}")
    return lo, hi   # `-N 0` (sbatch takes it: min_nodes 0) counts as one node, as slurmctld's job_desc reads it


def parse_time_minutes(opt: str, val: str, where: str = "option") -> int:
    """Slurm --time forms -> whole minutes, rounded up as Slurm does; UNLIMITED/INFINITE -> INFINITE."""
    from slurmtools.durations import parse_duration

    v = val.strip()
    if v.lower() in ("unlimited", "infinite", "-1"):  # time_str2secs: "-1" is INFINITE too
        return INFINITE
    if not re.match(r"^[\d:-]+$", v):
        raise RequestError(f"{where} {opt}: expected a Slurm time like 90, 1:30:00 or 2-00:00:00, got {val!r}")
    try:
        seconds = parse_duration(v)
    except ValueError:
        raise RequestError(f"{where} {opt}: expected a Slurm time like 90, 1:30:00 or 2-00:00:00, "
                           f"got {val!r}") from None
    return -(-seconds // 60)
