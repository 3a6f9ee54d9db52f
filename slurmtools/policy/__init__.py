"""Admission policies: pure decisions over a `JobRequest`, enforced by the CLI (`preflight`) and, rendered as
data for one generic Lua evaluator, by job_submit.lua. See docs/policy.md."""

from slurmtools.policy.base import (ENTRY_POINT_GROUP, MODIFIABLE, Decision, Policy, PolicyContext, evaluate,
                                    load_policies, registry)
from slurmtools.policy.engine import preflight
from slurmtools.policy.request import JobRequest, RequestError

__all__ = ["ENTRY_POINT_GROUP", "MODIFIABLE", "Decision", "JobRequest", "Policy", "PolicyContext", "RequestError",
           "evaluate", "load_policies", "preflight", "registry"]
