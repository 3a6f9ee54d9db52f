"""Leaf packing: the fewest leaf switches that can hold a job now, and which hosts under them.

On a tree fabric a job of k hosts needs N leaves where N is the smallest count whose N largest free-host
counts sum to >= k: taking the largest leaves first maximises what any N leaves can hold, so no N-subset
does better (an exchange argument; `min_leaves_dp` checks it independently and the tests check both against
exhaustive search). Among the N-leaf choices we prefer best fit: the most used leaves that still work, so
whole free leaves stay whole for the next large job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from slurmtools.planner.view import ClusterView
from slurmtools.topology.names import natural as _natural


@dataclass(frozen=True)
class HostNeed:
    """What one host must have free to take its share of the job."""

    gpus: int
    cpus: int
    mem_mb: int
    node_type: str | None = None


def eligible_by_leaf(view: ClusterView, need: HostNeed) -> dict[str, list[str]]:
    """Hosts under each leaf that can take `need` now, most-used first (best fit inside a leaf)."""
    out: dict[str, list[str]] = {}
    hosts = view.hosts
    g, c, m, t = need.gpus, need.cpus, need.mem_mb, need.node_type
    # whole-host needs leave nothing to order; partial ones prefer the hosts with the fewest free GPUs
    partial = any(nt.gpus > g for n, nt in view.node_types.items() if t is None or n == t)
    for leaf, members in view.leaves.items():
        ok = [h for h in members
              if (s := hosts[h]).gpus_free >= g and s.cpus_free >= c and s.mem_free_mb >= m
              and (t is None or s.node_type == t)]
        if ok:
            if partial:
                ok.sort(key=lambda h: hosts[h].gpus_free)  # stable: fabric order among equals
            out[leaf] = ok
    return out


def min_leaves(capacities: Sequence[int], k: int) -> int | None:
    """Fewest leaves whose capacities sum to >= k (None when all of them together cannot)."""
    if k <= 0:
        return 0
    total = 0
    for n, c in enumerate(sorted(capacities, reverse=True), start=1):
        total += c
        if total >= k:
            return n
    return None


def min_leaves_dp(capacities: Sequence[int], k: int) -> int | None:
    """The same optimum by 0/1 knapsack dynamic programming: an independent exact method for checking."""
    if k <= 0:
        return 0
    inf = len(capacities) + 1
    best = [0] + [inf] * k  # best[s]: fewest leaves reaching s hosts (s capped at k)
    for c in capacities:
        if c <= 0:
            continue
        for s in range(k, -1, -1):
            if best[s] < inf:
                t = min(k, s + c)
                if best[s] + 1 < best[t]:
                    best[t] = best[s] + 1
    return best[k] if best[k] < inf else None


def choose_leaves(capacities: Mapping[str, int], k: int) -> list[str] | None:
    """An optimal (fewest) set of leaves for k hosts, best fit: each pick is the smallest leaf that still lets
    the remaining picks finish. Returned smallest first, so hosts are taken from the most used leaves first."""
    n = min_leaves(list(capacities.values()), k)
    if n is None:
        return None
    # ascending capacity; ties keep the caller's (fabric) order
    remaining = [(leaf, c) for c, _, leaf in sorted((c, i, leaf) for i, (leaf, c) in enumerate(capacities.items()))]
    need, slots, chosen = k, n, []
    caps_desc = sorted((c for _, c in remaining), reverse=True)
    while need > 0:
        top_s = sum(caps_desc[:slots])
        top_s1 = sum(caps_desc[:slots - 1])
        kth = caps_desc[slots - 1] if slots - 1 < len(caps_desc) else 0
        for i, (leaf, c) in enumerate(remaining):
            # best of the other leaves for the remaining slots-1 picks
            rest = top_s - c if c >= kth else top_s1
            if c + rest >= need:
                chosen.append(leaf)
                need -= c
                slots -= 1
                del remaining[i]
                caps_desc.remove(c)
                break
        else:  # cannot happen when n is right; guard against a silent wrong answer
            raise AssertionError("leaf packing invariant broken")
    return chosen


def pack(view: ClusterView, need: HostNeed, k: int, spread_ok: bool = False) -> list[str] | None:
    """k hosts for the job: fewest leaves, best fit. `spread_ok` (independent tasks): best fit, any leaves."""
    elig = eligible_by_leaf(view, need)
    if spread_ok or k == 1:  # one host is always one leaf: pure best fit over hosts
        flat = sorted((h for hs in elig.values() for h in hs), key=lambda h: view.hosts[h].gpus_free)
        return flat[:k] if len(flat) >= k else None
    leaves = choose_leaves({leaf: len(hs) for leaf, hs in elig.items()}, k)
    if leaves is None:
        return None
    hosts: list[str] = []
    for leaf in leaves:
        take = elig[leaf][:k - len(hosts)]
        hosts.extend(take)
    return hosts


def pack_empty(view: ClusterView, need: HostNeed, k: int) -> list[str] | None:
    """`pack` on the same cluster with nothing running: every host of the node type whose size fits `need`.
    Computed from sizes alone, without building an idle copy of the view."""
    nts = view.node_types
    ok_types = frozenset(n for n, nt in nts.items() if (need.node_type is None or n == need.node_type)
                         and nt.gpus >= need.gpus and nt.cpus >= need.cpus and nt.memory_mb >= need.mem_mb)
    elig = {}
    one = next(iter(ok_types)) if len(ok_types) == 1 else None
    for leaf, per in view.layout().items():
        if one is not None:
            elig[leaf] = per.get(one, [])  # read only below
            continue
        hs = [h for t in ok_types for h in per.get(t, ())]
        if len(ok_types) > 1:
            order = {h: i for i, h in enumerate(view.leaves[leaf])}
            hs.sort(key=order.__getitem__)
        elig[leaf] = hs
    if k == 1:
        flat = [h for hs in elig.values() for h in hs]
        return flat[:1] or None
    leaves = choose_leaves({leaf: len(hs) for leaf, hs in elig.items() if hs}, k)
    if leaves is None:
        return None
    out: list[str] = []
    for leaf in leaves:
        out.extend(elig[leaf][:k - len(out)])
    return out


def first_fit(view: ClusterView, need: HostNeed, k: int) -> list[str] | None:
    """The topology-blind baseline: the first k eligible hosts in the fabric's (name) order."""
    ok: list[str] = []
    g, c, m, t = need.gpus, need.cpus, need.mem_mb, need.node_type
    for h, s in view.hosts.items():
        if s.gpus_free >= g and s.cpus_free >= c and s.mem_free_mb >= m and (t is None or s.node_type == t):
            ok.append(h)
            if len(ok) == k:
                return ok
    return None


def leaves_of(view: ClusterView, hosts: Sequence[str]) -> list[str]:
    seen: dict[str, None] = {}
    for h in hosts:
        seen.setdefault(view.hosts[h].leaf, None)
    return list(seen)
