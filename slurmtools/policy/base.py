"""The policy interface, its decision type and the registry sites extend through entry points.

A policy is a pure decision: `check(request, ctx) -> Decision`. It never shells out; whatever it needs from
outside (this month's GPU-hours per account, the fabric) arrives in `PolicyContext`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
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
    """The policies in order over one request with (at most) one partition."""
    changes: dict[str, str] = {}
    by: list[str] = []
    for p in policies:
        d = p.check(request, ctx)
        if d.action == "deny":
            return Decision.deny(d.message, p.name)
        if d.action == "modify":
            changes.update(d.changes)
            by.append(p.name)
            request = request.with_changes(d.changes)
    if changes:
        return Decision("modify", changes=changes, policy=",".join(by))
    return Decision.allow()
