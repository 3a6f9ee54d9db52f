"""The policy interface, its decision type and the registry sites extend through entry points.

A policy is a pure decision: `check(request, ctx) -> Decision`. It never shells out; whatever it needs from
outside (this month's GPU-hours per account, the fabric) arrives in `PolicyContext`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

from slurmtools.errors import ConfigError

if TYPE_CHECKING:
    from slurmtools.policy.request import JobRequest
    from slurmtools.site.model import Site
    from slurmtools.topology.sitefile import Fabric

ENTRY_POINT_GROUP = "slurmtools.policies"
#: the only job_desc fields a policy may change (never `extra`: slurmctld 22.05.8 crashes when it is written)
MODIFIABLE = ("partition", "qos")


@dataclass(frozen=True)
class Decision:
    """allow, deny (with the one line the user sees) or modify (set fields, e.g. a default partition)."""

    action: str  # "allow" | "deny" | "modify"
    message: str = ""
    changes: dict[str, str] = field(default_factory=dict)
    #: the policy that denied, or the policies that modified (comma separated)
    policy: str = ""

    @classmethod
    def allow(cls) -> "Decision":
        return cls("allow")

    @classmethod
    def deny(cls, message: str, policy: str = "") -> "Decision":
        return cls("deny", message=message, policy=policy)

    @classmethod
    def modify(cls, policy: str = "", **changes: str) -> "Decision":
        bad = [k for k in changes if k not in MODIFIABLE]
        if bad:
            raise ValueError(f"policy {policy}: may not change {', '.join(bad)} (only {', '.join(MODIFIABLE)})")
        return cls("modify", changes=dict(changes), policy=policy) if changes else cls("allow")

    @property
    def allowed(self) -> bool:
        return self.action != "deny"


@dataclass(frozen=True)
class PolicyContext:
    """What the policies know beyond the request: the site, its fabric and this month's usage."""

    site: "Site"
    fabric: "Fabric | None" = None
    #: GPU-hours used this month per account; None when unknown (budgets are then not checked)
    usage: dict[str, float] | None = None
    month: str = ""

    @cached_property
    def shapes(self) -> dict[str, dict]:
        """`partition_shapes(site, fabric)`, computed once for this context."""
        return partition_shapes(self.site, self.fabric)

    @cached_property
    def tier_nodes(self) -> dict[str, int]:
        """`tier_node_limits(site)`, computed once for this context."""
        return tier_node_limits(self.site)


def partition_shapes(site: "Site", fabric: "Fabric | None") -> dict[str, dict]:
    """What evaluation knows of each partition's nodes: `{"nodes": N, "gpus": [[type, most a node], ...]}` (types
    sorted). `nodes` bounds a job without -N spread task by task (`JobRequest.nodes`); `gpus` is what an
    `--exclusive` job gets on each node: the fabric's node types of the partition's hosts (hosts the fabric lacks
    and GPU-less node types left out; no fabric: none, so `--exclusive` counts as asked). job_submit.lua gets the
    same table (`PARTITION_SHAPES`), and the policy hash covers it."""
    from slurmtools.hostlist import expand

    out: dict[str, dict] = {}
    for p in site.partitions.values():
        hosts = expand(p.nodes)
        most: dict[str, int] = {}
        for h in hosts if fabric is not None else ():
            try:
                nt = fabric.node_type_of(h)
            except KeyError:
                continue
            if nt.gpus > 0 and nt.gpu_type:
                most[nt.gpu_type] = max(most.get(nt.gpu_type, 0), nt.gpus)
        out[p.name] = {"nodes": len(hosts), "gpus": [[t, most[t]] for t in sorted(most)]}
    return out


def tier_node_limits(site: "Site") -> dict[str, int]:
    """Each tier's node limit, `{tier: max_nodes}` (tiers without one left out). The tier's QoS carries it
    (`MaxTRESPerJob=node=N`, `render.accounting.qos_settings`), and slurmctld gives a job at most that many nodes
    (src/slurmctld/node_scheduler.c `get_node_cnts`, `acct_policy_get_max_nodes`), so it bounds a job without -N
    spread task by task (`JobRequest.nodes`). job_submit.lua gets the same table (`TIER_NODES`), and the policy
    hash covers it."""
    return {t.name: t.max_nodes for t in site.tiers_by_priority() if t.max_nodes is not None}


def with_shape(request: "JobRequest", ctx: PolicyContext) -> "JobRequest":
    """The request with its partition's shape (no partition: the site's default, where Slurm puts it) and its
    tier's node limit (no QoS: the site's default tier, which routing sets)."""
    tier_nodes = ctx.tier_nodes.get(request.qos or ctx.site.default_tier)
    shape = ctx.shapes.get(request.partition or ctx.site.default_partition.name)
    if shape is None:
        return replace(request, node_cap=None, node_gpus=(), tier_nodes=tier_nodes)
    return replace(request, node_cap=shape["nodes"], node_gpus=tuple((t, n) for t, n in shape["gpus"]),
                   tier_nodes=tier_nodes)


class Policy(abc.ABC):
    """One admission rule. `params` is plain data (the same table the generated Lua reads)."""

    name: ClassVar[str] = "abstract"
    #: built-ins are rendered into job_submit.lua; a plugin without a Lua twin is enforced by the CLI only
    lua: ClassVar[bool] = False

    def __init__(self, site: "Site", fabric: "Fabric | None" = None):
        self.site = site
        self.fabric = fabric
        self.params: dict = self.configure(site, fabric)

    def configure(self, site: "Site", fabric: "Fabric | None") -> dict:
        """Read this policy's settings from the site; raise ConfigError naming the key when they are wrong."""
        return {}

    @property
    def active(self) -> bool:
        """False when the site's configuration leaves this policy nothing to check."""
        return True

    @abc.abstractmethod
    def check(self, request: "JobRequest", ctx: PolicyContext) -> Decision: ...


def registry() -> dict[str, type[Policy]]:
    """Built-in policies, then those of installed plugins (entry point group `slurmtools.policies`). A built-in's
    name always means the built-in: a plugin registered under one is refused, so a site that names only built-ins
    never needs the entry points read (`load_policies` skips them; reading them costs a command ~20 ms)."""
    from importlib.metadata import entry_points

    from slurmtools.policy.builtin import BUILTINS

    out: dict[str, type[Policy]] = {p.name: p for p in BUILTINS}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if any(ep.name == p.name for p in BUILTINS):
            raise ConfigError(ep.value, "", f"policy plugin {ep.name!r} takes the name of a built-in policy; "
                                            "register it under another name")
        try:
            cls = ep.load()
        except Exception as exc:  # a broken plugin must be named, not crash every command
            raise ConfigError(ep.value, "", f"policy plugin {ep.name!r} failed to load: {exc}") from None
        if not (isinstance(cls, type) and issubclass(cls, Policy)):
            raise ConfigError(ep.value, "", f"policy plugin {ep.name!r} is not a slurmtools.policy.Policy subclass")
        out[ep.name] = cls
    return out


def load_policies(site: "Site", fabric: "Fabric | None" = None) -> list[Policy]:
    """The site's policies in evaluation order: `policy.enabled` when given, else every built-in."""
    from slurmtools.policy.builtin import BUILTINS

    builtin: dict[str, type[Policy]] = {p.name: p for p in BUILTINS}
    names = list(site.policy.enabled) or list(builtin)
    reg = builtin if all(n in builtin for n in names) else registry()
    out = []
    for n in names:
        if n not in reg:
            raise ConfigError(str(site.source), "policy.enabled", f"unknown policy {n!r} (known: {', '.join(reg)})")
        inst = reg[n](site, fabric)
        inst.name = n  # a plugin is known by its entry point name
        out.append(inst)
    return [p for p in out if p.active]


def evaluate(request: "JobRequest", policies: list[Policy], ctx: PolicyContext) -> Decision:
    """Run the policies in order: the first deny wins; modifications apply to the request the next one sees. A
    request whose name or comment holds a control character, then one holding a number beyond `request.ABSURD`, is
    refused first (policy "request")."""
    from slurmtools.policy.builtin import absurd, control

    # what the site knows is added per partition and tier (_run)
    request = replace(request, node_cap=None, node_gpus=(), tier_nodes=None)
    bad = request.control_field()
    if bad is not None:  # sacct prints it raw: a forged report row
        return Decision.deny(control(*bad), "request")
    what = request.absurd_field()
    if what is not None:  # before any policy: every one of them may compute with these numbers
        return Decision.deny(absurd(what), "request")
    names = (request.partition or "").split(",")
    if len(names) > 1 and all(names):
        # `-p a,b` (job_desc.partition "a,b"): Slurm may start the job in any of them, so each must take it (as
        # EnforcePartLimits=ALL); the first refusal wins, else the first partition's changes (only qos, the same
        # for each: no built-in's change depends on the partition)
        out = None
        for name in names:
            d = _run(request.with_changes({"partition": name}), policies, ctx)
            if d.action == "deny":
                return d
            out = out or d
        return out
    return _run(request, policies, ctx)


def _run(request: "JobRequest", policies: list[Policy], ctx: PolicyContext) -> Decision:
    """The policies in order over one request with (at most) one partition: first its partition's shape and its
    tier's node limit, and the absurd-number check again (an `--exclusive` job's GPUs are known only now); after
    each modification both again (a re-routed job's tier may allow it more nodes). A refusal whose count the job's
    spread tasks or `--exclusive` made says so, and how to ask otherwise (`builtin.hints`)."""
    from slurmtools.policy.builtin import absurd, hints

    request = with_shape(request, ctx)
    what = request.absurd_field()
    if what is not None:
        return Decision.deny(absurd(what), "request")
    changes: dict[str, str] = {}
    by: list[str] = []
    for p in policies:
        d = p.check(request, ctx)
        if d.action == "deny":
            return Decision.deny(d.message + hints(request, lambda r, p=p: p.check(r, ctx), d.message), p.name)
        if d.action == "modify":
            changes.update(d.changes)
            by.append(p.name)
            request = with_shape(request.with_changes(d.changes), ctx)
            what = request.absurd_field()
            if what is not None:
                return Decision.deny(absurd(what), "request")
    if changes:
        return Decision("modify", changes=changes, policy=",".join(by))
    return Decision.allow()
