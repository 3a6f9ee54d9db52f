"""The policy hash every decision-log record carries: which rendered policy decided.

One definition, used by `admin render job-submit` (baked into job_submit.lua) and by every CLI writer
(preflight, sync-qos): sha256 of the canonical JSON of the site's name, the slurmtools version and each loaded
policy's name, where it runs (Lua or CLI only) and parameters, the partitions' shapes (`base.partition_shapes`,
the default partition) and the tiers' node limits (`base.tier_node_limits`, the default tier); the first 16 hex
digits. The same site and version
give the same hash in slurmctld and in the CLI; any change to a limit, tier, budget or plugin changes it. Pure.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slurmtools.site.model import Site
    from slurmtools.topology.sitefile import Fabric


def _canonical(obj: Any) -> Any:
    """JSON-ready data with a fixed order: sets sorted, tuples as lists, mapping keys as strings."""
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((_canonical(v) for v in obj), key=lambda v: json.dumps(v, sort_keys=True))
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


def policy_hash(site: "Site", fabric: "Fabric | None" = None) -> str:
    from slurmtools import __version__
    from slurmtools.policy.base import load_policies, partition_shapes, tier_node_limits

    doc = {"site": site.name, "slurmtools": __version__,
           "policies": [{"name": p.name, "lua": bool(p.lua), "params": _canonical(p.params)}
                        for p in load_policies(site, fabric)],
           # the partitions' node counts and GPUs a node: they decide too (spread and --exclusive jobs)
           "partitions": _canonical(partition_shapes(site, fabric)), "default_partition": site.default_partition.name,
           # the tiers' node limits bound a job without -N (its QoS's node=), whatever policies run
           "tier_nodes": _canonical(tier_node_limits(site)), "default_tier": site.default_tier}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
