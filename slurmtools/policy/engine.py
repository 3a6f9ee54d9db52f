"""`preflight`: the CLI's admission check before sbatch (the same policies job_submit.lua enforces).

This is the I/O edge of the policy package: it fetches this month's usage from the backend, then calls the
pure `evaluate`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from slurmtools.policy.base import Decision, PolicyContext, evaluate, load_policies
from slurmtools.policy.request import JobRequest

if TYPE_CHECKING:
    from slurmtools.site.model import Site
    from slurmtools.slurm.backend import Backend


def load_fabric_for(site: "Site"):
    if site.fabric_path is None:
        return None
    from slurmtools.topology.sitefile import load_fabric

    return load_fabric(site.fabric_path)


def current_usage(site: "Site", backend: "Backend", now: datetime | None = None) -> tuple[dict[str, float], str]:
    """GPU-hours per account this month from the backend's accounting (tiers with `charged = false` are free)."""
    from slurmtools.policy.usage import gpu_hours_by_account, month_window, uncharged_tiers

    now = now or datetime.now().astimezone()  # aware local time: sacct times are aware; budgets are per local month
    start, end, month = month_window(now)
    recs = backend.accounting(start, end, all_users=True, steps=False)
    return gpu_hours_by_account(recs, start, end, free_tiers=uncharged_tiers(site)), month


def preflight(request: JobRequest, site: "Site", backend: "Backend | None" = None,
              now: datetime | None = None) -> Decision:
    """Run the site's policies on a request before it is submitted. With a backend, budgets are checked against
    this month's accounting; without one they are skipped. Refusals and re-routes are written to the decision
    log with the policy hash."""
    if backend is not None and not request.account and not request.default_account and request.user_name:
        acct = default_account(backend, request.user_name)
        if acct:
            request = request.with_changes({"default_account": acct})
    usage, month = (None, "")
    if backend is not None and any(a.monthly_gpu_hours is not None for a in site.accounts.values()):
        usage, month = current_usage(site, backend, now)
    ctx = PolicyContext(site=site, fabric=load_fabric_for(site), usage=usage, month=month)
    decision = evaluate(request, load_policies(site, ctx.fabric), ctx)
    if decision.action in ("deny", "modify"):
        from slurmtools.policy.fingerprint import policy_hash

        event = "admission_refused" if decision.action == "deny" else "admission_modified"
        extra = {"changes": dict(decision.changes)} if decision.action == "modify" else {}
        _audit(event, request, decision, policy_hash(site, ctx.fabric), source="cli", **extra)
    return decision


def default_account(backend: "Backend", user: str) -> str | None:
    """The user's default account from sacctmgr (what job_submit.lua sees as job_desc.default_account)."""
    run = getattr(backend, "run", None)
    if run is None:
        return None
    try:
        out = run(["sacctmgr", "-n", "-P", "show", "user", user, "format=DefaultAccount"])
    except Exception:  # no accounting reachable: account checks then use only what the job names
        return None
    lines = [x.strip() for x in out.splitlines() if x.strip()]
    return lines[0] if lines else None


def _audit(event: str, request: JobRequest, decision: Decision, policy: str | None = None, **details) -> None:
    try:
        from slurmtools.audit import record
    except ImportError:  # the audit log module is optional for the policy layer
        return
    try:
        record(event, user=request.user_name,
               details={"account": request.effective_account, "qos": request.qos, "policy": decision.policy,
                        "message": decision.message, **details}, policy=policy)
    except Exception:  # an audit failure must never change an admission decision
        pass
