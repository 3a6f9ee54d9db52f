"""The built-in admission policies. Each reads its `params` from the site once; the generated job_submit.lua
gets the very same `params` and message templates, and its evaluator mirrors each `check` line by line.

Messages are templates with `{name}` slots filled with already formatted strings, so Python and Lua print
byte-identical text.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

from slurmtools.errors import ConfigError
from slurmtools.policy.base import Decision, Policy, PolicyContext
from slurmtools.policy.directives import script_signal_value
from slurmtools.policy.request import ABSURD, INFINITE, JobRequest

MESSAGES = {
    "unknown_qos": "QoS {qos} is not a tier of this site (tiers: {tiers})",
    "unknown_partition": "partition {partition} is not a partition of this site (partitions: {partitions})",
    "tier_account": "account {account} may not use tier {qos} (its tiers: {tiers})",
    "tier_partition": "tier {qos} may not run on partition {partition} (its partitions: {partitions})",
    "over_budget": "account {account} has used {used} of its {budget} GPU-hours for {month}; "
                   "only tier {lowest} is open to it until the budget is raised",
    "gpus_per_job": "tier {qos} allows at most {limit} GPUs per job; this job asks for {gpus}",
    "walltime": "tier {qos} allows a time limit of at most {limit}; this job asks for {time}",
    "nodes": "tier {qos} allows at most {limit} nodes per job; this job asks for {nodes}",
    "gpus_on_cpu_partition": "partition {partition} is a CPU partition: it gives no GPUs, and this job asks for "
                             "{gpus}; {where}",
    "gpus_required": "partition {partition} is for GPU jobs: ask for GPUs (e.g. --gres=gpu:{example}:1); {where}",
    "gpu_type_missing": "partition {partition} needs a GPU type: ask for e.g. --gres=gpu:{example}:N "
                        "instead of an untyped GPU count (GPU types here: {types})",
    "gpu_type_unknown": "partition {partition} has no GPU type {type} (GPU types here: {types})",
    "gpus_per_type": "at most {limit} {type} GPUs per job; this job asks for {gpus} "
                     "(untyped GPUs count against every type's limit)",
    "cpus_per_gpu": "on partition {partition} each GPU comes with at most {per_gpu} CPUs: {gpus} GPUs allow "
                    "{limit} CPUs, this job asks for {cpus}",
    "mem_per_gpu": "on partition {partition} each GPU comes with at most {per_gpu} MB of memory: {gpus} GPUs "
                   "allow {limit} MB, this job asks for {mem} MB",
    "control_char": "this job's {what} holds the control character {char} (sacct prints it raw, so it could forge "
                    "rows of accounting reports): use printable characters only",
    "absurd": "this job's {what} is more than {limit}, beyond any real cluster: ask for what the job needs",
    "internal_error": "the admission policy failed on this job (an internal error the cluster admins find in "
                      "slurmctld's log); the site fails closed, so the job is refused: tell the cluster admins",
    "checkpoint_signal": "tier {qos} is preemptible: add '#SBATCH --signal=B:{signal}@{lead}' to the batch "
                         "script so the job can checkpoint (a --signal on the command line is not visible here)",
    # appended to a refusal that the count below made (`hints`)
    "whole_nodes": "--exclusive gives the job every GPU of each of its nodes ({per_node} a node)",
    "spread": "without -N, Slurm may spread its {what} over {nodes} nodes: add -N {fit} "
              "(or the node count it needs)",
}

#: signal numbers sbatch accepts for the names a checkpoint may use (Linux numbering)
SIGNAL_NUMBERS = {"1": "HUP", "2": "INT", "10": "USR1", "12": "USR2", "15": "TERM", "18": "CONT", "23": "URG"}

_SLOT = re.compile(r"\{([A-Za-z0-9_]+)\}")


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def fmt(key: str, **values: str) -> str:
    """Fill a message template; every value is a string already (Lua formats numbers the same way). Control
    characters a user put into a name become `?`, so a refusal stays one line."""
    return _SLOT.sub(lambda m: _CONTROL.sub("?", values[m.group(1)]), MESSAGES[key])


def slurm_minutes(minutes: int) -> str:
    """Minutes as Slurm prints a time limit: `1-00:00:00`, `12:00:00`; INFINITE as UNLIMITED."""
    if minutes >= INFINITE:
        return "UNLIMITED"
    d, rest = divmod(minutes, 1440)
    h, m = divmod(rest, 60)
    return "%d-%02d:%02d:00" % (d, h, m) if d > 0 else "%02d:%02d:00" % (h, m)


def absurd(what: str) -> str:
    """The refusal of a number beyond ABSURD; names the option or count, never prints the number (Lua could not
    print it exactly)."""
    return fmt("absurd", what=what, limit=str(ABSURD))


def control(what: str, char: str) -> str:
    """The refusal of a job name or comment holding a control character: names the option and the character."""
    return fmt("control_char", what=what, char=char)


def hints(r: JobRequest, recheck, message: str) -> str:
    """What to append to `message`, a policy's refusal of `r`: for each count that made the refusal (the check
    decides otherwise without it), `; ` and the hint. `--exclusive` (whole nodes' GPUs), then a spread job without
    -N (its tasks on as many nodes: the hint proposes -N with its fewest nodes). `recheck(request)` runs the same
    policy again. Mirrored by the Lua's `hints`."""
    out = ""
    if r.whole_nodes:
        d = recheck(replace(r, shared=None))
        if d.action != "deny" or d.message != message:
            out += "; " + fmt("whole_nodes", per_node=str(max(n for _, n in r.node_gpus)))
    if r.spread:
        d = recheck(r.pinned())
        if d.action != "deny" or d.message != message:
            count, unit = r.spread_over
            out += "; " + fmt("spread", what=f"{count} {unit}", nodes=str(r.nodes), fit=str(r.fewest_nodes))
    return out


def _names(xs) -> str:
    return ", ".join(xs)


class Routing(Policy):
    """Default partition and QoS (the site's default tier); unknown tiers and partitions, account and
    partition access per tier. Runs first so that every later policy sees a partition and a tier."""

    name = "routing"
    lua = True

    def configure(self, site, fabric):
        return {
            "default_partition": site.default_partition.name,
            "default_qos": site.default_tier,
            "tiers": {t.name: {"partitions": list(t.partitions)} for t in site.tiers_by_priority()},
            "tier_names": [t.name for t in site.tiers_by_priority()],
            "partitions": list(site.partitions),
            "accounts": {a.name: {"tiers": list(a.tiers)} for a in site.accounts.values()},
        }

    def check(self, r: JobRequest, ctx: PolicyContext) -> Decision:
        p = self.params
        changes = {}
        if not r.partition:
            changes["partition"] = p["default_partition"]
        if not r.qos:
            changes["qos"] = p["default_qos"]
        partition = r.partition or p["default_partition"]
        qos = r.qos or p["default_qos"]
        if qos not in p["tiers"]:
            return Decision.deny(fmt("unknown_qos", qos=qos, tiers=_names(p["tier_names"])))
        if partition not in p["partitions"]:
            return Decision.deny(fmt("unknown_partition", partition=partition, partitions=_names(p["partitions"])))
        account = r.effective_account
        if account and account in p["accounts"] and qos not in p["accounts"][account]["tiers"]:
            return Decision.deny(fmt("tier_account", account=account, qos=qos,
                                     tiers=_names(p["accounts"][account]["tiers"])))
        if partition not in p["tiers"][qos]["partitions"]:
            return Decision.deny(fmt("tier_partition", qos=qos, partition=partition,
                                     partitions=_names(p["tiers"][qos]["partitions"])))
        return Decision.modify(self.name, **changes)


class PartitionGpus(Policy):
    """GPUs only through GPU partitions: a GPU request on a CPU partition (`gpu_types = []`) is refused, since on a
    CPU partition that overlays GPU hosts Slurm would hand out the hosts' GPUs through it, outside the GPU
    partitions' types and rules. With `policy.require_gpus_on_gpu_partitions`, a job without GPUs on a GPU partition
    is refused too, pointing to the CPU partitions (a site decision: many sites let CPU work use spare cores)."""

    name = "partition_gpus"
    lua = True

    def configure(self, site, fabric):
        parts = list(site.partitions.values())
        return {
            "cpu_partitions": [p.name for p in parts if p.cpu_only],
            "gpu_partitions": {p.name: {"example": p.gpu_types[0]} for p in parts if not p.cpu_only},
            "gpu_names": [p.name for p in parts if not p.cpu_only],
            "require_gpus": site.policy.require_gpus_on_gpu_partitions,
        }

    @property
    def active(self) -> bool:
        return bool(self.params["cpu_partitions"]) or self.params["require_gpus"]

    def check(self, r: JobRequest, ctx: PolicyContext) -> Decision:
        p = self.params
        partition = r.partition or ""
        gpus = r.gpus
        if gpus > 0 and partition in p["cpu_partitions"]:
            gpu = p["gpu_names"]
            where = f"GPU jobs go to {_either(gpu)}" if gpu else "this site has no GPU partition"
            return Decision.deny(fmt("gpus_on_cpu_partition", partition=partition, gpus=str(gpus), where=where))
        if gpus == 0 and p["require_gpus"] and partition in p["gpu_partitions"]:
            cpu = p["cpu_partitions"]
            where = f"CPU jobs go to {_either(cpu)}" if cpu else "this site has no CPU partition"
            return Decision.deny(fmt("gpus_required", partition=partition,
                                     example=p["gpu_partitions"][partition]["example"], where=where))
        return Decision.allow()


def _either(xs: list[str]) -> str:
    """Names as a message lists alternatives: `a`, `a or b`, `a, b or c`."""
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " or " + xs[-1]


class Budget(Policy):
    """Monthly GPU-hour budgets: once spent, reject or move the job to the lowest tier (the account's
    `over_budget`). The lowest tier stays open either way: it runs on idle capacity at no charge."""

    name = "budget"
    lua = True

    def configure(self, site, fabric):
        return {
            "lowest": site.lowest_tier.name,
            "accounts": {a.name: {"budget": a.monthly_gpu_hours, "action": a.over_budget}
                         for a in site.accounts.values() if a.monthly_gpu_hours is not None},
        }

    @property
    def active(self) -> bool:
        return bool(self.params["accounts"])

    def check(self, r: JobRequest, ctx: PolicyContext) -> Decision:
        p = self.params
        account = r.effective_account
        if ctx.usage is None or not account or account not in p["accounts"] or r.qos == p["lowest"]:
            return Decision.allow()
        a = p["accounts"][account]
        used = float(ctx.usage.get(account, 0.0))
        if used < a["budget"]:
            return Decision.allow()
        if a["action"] == "scavenger":
            return Decision.modify(self.name, qos=p["lowest"])
        return Decision.deny(fmt("over_budget", account=account, used="%.1f" % used, budget="%.1f" % a["budget"],
                                 month=ctx.month or "this month", lowest=p["lowest"]))


class TierLimits(Policy):
    """GPUs per job, walltime and nodes per tier. GPUs per *user* are left to the QoS MaxTRESPerUser that
    `admin sync-qos` sets: slurmctld counts them against running jobs, which admission cannot see reliably."""

    name = "tier_limits"
    lua = True

    def configure(self, site, fabric):
        return {"tiers": {t.name: {"max_gpus": t.max_gpus_per_job, "max_minutes": t.max_walltime // 60,
                                   "max_nodes": t.max_nodes} for t in site.tiers.values()}}

    def check(self, r: JobRequest, ctx: PolicyContext) -> Decision:
        t = self.params["tiers"].get(r.qos or "")
        if t is None:
            return Decision.allow()
        gpus = r.gpus
        if t["max_gpus"] is not None and gpus > t["max_gpus"]:
            return Decision.deny(fmt("gpus_per_job", qos=r.qos, limit=str(t["max_gpus"]), gpus=str(gpus)))
        if r.time_limit is not None and r.time_limit > t["max_minutes"]:
            return Decision.deny(fmt("walltime", qos=r.qos, limit=slurm_minutes(t["max_minutes"]),
                                     time=slurm_minutes(r.time_limit)))
        if t["max_nodes"] is not None and r.nodes > t["max_nodes"]:
            return Decision.deny(fmt("nodes", qos=r.qos, limit=str(t["max_nodes"]), nodes=str(r.nodes)))
        return Decision.allow()


class GpuType(Policy):
    """On partitions with GPU types, a GPU request must name a type the partition has."""

    name = "gpu_type"
    lua = True

    def configure(self, site, fabric):
        return {"partitions": {p.name: {"types": list(p.gpu_types)} for p in site.partitions.values()
                               if p.gpu_types}}

    @property
    def active(self) -> bool:
        return self.site.policy.require_gpu_type and bool(self.params["partitions"])

    def check(self, r: JobRequest, ctx: PolicyContext) -> Decision:
        part = self.params["partitions"].get(r.partition or "")
        if part is None:
            return Decision.allow()
        types = part["types"]
        for typ in sorted(r.gpus_by_type()):
            if typ == "untyped":
                return Decision.deny(fmt("gpu_type_missing", partition=r.partition, example=types[0],
                                         types=_names(types)))
            if typ not in types:
                return Decision.deny(fmt("gpu_type_unknown", partition=r.partition, type=typ, types=_names(types)))
        return Decision.allow()


class GpuTypeLimits(Policy):
    """Per-type GPU limits per job (`[policy.max_gpus_per_type]`). Closes the loophole Slurm's docs warn about:
    an untyped `--gres=gpu:N` is not counted by a per-type QoS limit, so here it counts against every type."""

    name = "gpu_type_limits"
    lua = True

    def configure(self, site, fabric):
        raw = site.policy.extra.get("max_gpus_per_type", {})
        if not isinstance(raw, dict):
            raise ConfigError(str(site.source), "policy.max_gpus_per_type", f"expected a table, got {raw!r}")
        limits = {}
        for typ, n in raw.items():
            if typ not in site.gpu_types:
                raise ConfigError(str(site.source), f"policy.max_gpus_per_type.{typ}",
                                  f"unknown GPU type {typ!r} (known: {', '.join(site.gpu_types)})")
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ConfigError(str(site.source), f"policy.max_gpus_per_type.{typ}",
                                  f"expected an integer >= 1, got {n!r}")
            limits[typ] = n
        return {"types": [[t, limits[t]] for t in sorted(limits)]}

    @property
    def active(self) -> bool:
        return bool(self.params["types"])

    def check(self, r: JobRequest, ctx: PolicyContext) -> Decision:
        by = r.gpus_by_type()
        untyped = by.get("untyped", 0)
        for typ, limit in self.params["types"]:
            n = by.get(typ, 0) + untyped
            if n > limit:
                return Decision.deny(fmt("gpus_per_type", limit=str(limit), type=typ, gpus=str(n)))
        return Decision.allow()


class CpuMemPerGpu(Policy):
    """CPUs and memory per GPU within the node type's share (x policy.cpu_mem_tolerance), so that GPUs are not
    stranded on nodes whose CPUs or memory another job took. Needs the fabric's node types."""

    name = "cpu_mem_per_gpu"
    lua = True

    def configure(self, site, fabric):
        from slurmtools.hostlist import expand

        out = {}
        if fabric is None:
            return {"partitions": out}
        tol = site.policy.cpu_mem_tolerance
        for p in site.partitions.values():
            nts = []
            for h in expand(p.nodes):
                try:
                    nts.append(fabric.node_type_of(h))
                except KeyError:
                    continue
            nts = [n for n in nts if n.gpus > 0]
            if not nts:
                continue
            # the smallest share on the partition: a job must fit its poorest node
            cpus = min(n.cpus / n.gpus for n in nts)
            mem = min(n.memory_mb / n.gpus for n in nts)
            # --mem=0 is all of each node's memory: the largest node it may land on counts
            out[p.name] = {"cpus_per_gpu": cpus * tol, "mem_per_gpu": mem * tol,
                           "node_mem": max(n.memory_mb for n in nts)}
        return {"partitions": out}

    @property
    def active(self) -> bool:
        return bool(self.params["partitions"])

    def check(self, r: JobRequest, ctx: PolicyContext) -> Decision:
        """At the fewest nodes the job may get, then at the most: CPUs and memory per GPU are tightest at one end or
        the other (`-n 4 --gres=gpu:h100:4 -c 15` on one node has 4 GPUs for 60 CPUs; `-n 4 --gpus=4 --mem=600G`
        on four nodes 2400 GB for 4 GPUs). An `--exclusive` job holds every GPU of its nodes, so it strands none:
        not checked."""
        if r.whole_nodes:
            return Decision.allow()
        if r.nodes != r.fewest_nodes:
            d = self._check(r.pinned())
            if d.action == "deny":
                return d
        return self._check(r)

    def _check(self, r: JobRequest) -> Decision:
        part = self.params["partitions"].get(r.partition or "")
        gpus = r.gpus
        if part is None or gpus == 0:
            return Decision.allow()
        cpu_limit = math.floor(part["cpus_per_gpu"] * gpus + 1e-9)
        cpus = r.cpus
        if cpus > cpu_limit:
            return Decision.deny(fmt("cpus_per_gpu", partition=r.partition, per_gpu="%g" % part["cpus_per_gpu"],
                                     gpus=str(gpus), limit=str(cpu_limit), cpus=str(cpus)))
        mem = r.mem_mb
        if r.min_mem_per_node == 0:  # --mem=0: Slurm gives the job all of each node's memory
            mem = part["node_mem"] * r.nodes
            if mem > ABSURD:
                return Decision.deny(absurd("memory"))
        mem_limit = math.floor(part["mem_per_gpu"] * gpus + 1e-9)
        if mem is not None and mem > mem_limit:
            return Decision.deny(fmt("mem_per_gpu", partition=r.partition, per_gpu="%g" % part["mem_per_gpu"],
                                     gpus=str(gpus), limit=str(mem_limit), mem=str(mem)))
        return Decision.allow()


def _ascii_upper(s: str) -> str:
    """Upper case of ASCII letters only, as Lua's string.upper in the C locale."""
    return "".join(chr(ord(c) - 32) if "a" <= c <= "z" else c for c in s)


def script_signal(script: str) -> str | None:
    """The signal name of the script's --signal as sbatch reads its directives (`B:USR1@300` -> USR1), or None.

    slurmtools.policy.directives reads the directives exactly as sbatch does (column-0 `#SBATCH`/`#SLURM`, its
    words, quotes and option values); the Lua mirrors both."""
    v = script_signal_value(script)
    if v is None:
        return None
    v = re.sub(r"^[RB]+:", "", v, flags=re.ASCII)
    v = _ascii_upper(v.split("@", 1)[0])
    if v.startswith("SIG"):
        v = v[3:]
    return SIGNAL_NUMBERS.get(v, v)


class CheckpointSignal(Policy):
    """Preemptible tiers need a checkpoint signal in the script (`#SBATCH --signal=B:USR1@300`): without it the
    batch shell hears of preemption only KillWait seconds before SIGKILL. Interactive jobs (srun/salloc: no
    script) are exempt."""

    name = "checkpoint_signal"
    lua = True

    def configure(self, site, fabric):
        from slurmtools.warning_signals import USABLE

        # any usable warning signal passes (a job may choose its own: `--checkpoint-signal`); the message names the
        # tier's own choice
        return {"tiers": {t.name: {"signal": t.checkpoint_signal, "lead": t.signal_lead}
                          for t in site.tiers.values() if t.preemptible}, "signals": list(USABLE)}

    @property
    def active(self) -> bool:
        return self.site.policy.require_checkpoint_signal and bool(self.params["tiers"])

    def check(self, r: JobRequest, ctx: PolicyContext) -> Decision:
        t = self.params["tiers"].get(r.qos or "")
        if t is None or r.script == "":
            return Decision.allow()  # no batch script: an interactive srun/salloc, which has nothing to checkpoint
        if script_signal(r.script) in self.params["signals"]:
            return Decision.allow()
        return Decision.deny(fmt("checkpoint_signal", qos=r.qos, signal=t["signal"], lead=str(t["lead"])))


BUILTINS: tuple[type[Policy], ...] = (Routing, PartitionGpus, Budget, TierLimits, GpuType, GpuTypeLimits,
                                      CpuMemPerGpu, CheckpointSignal)
