"""The fabric queries as they were before the fabric index (issue 15), kept verbatim as the reference the
differential test compares the indexed ones with: plain walks over the fabric view, no precomputed index."""

from __future__ import annotations

from collections import deque

from slurmtools.topology.graph import Topology, _natural
from slurmtools.topology.queries import HostPath, LevelLoad, _need, fabric_view, leaves_of, switch_levels


def uplinks(t: Topology, host: str) -> list[list[str]]:
    """The host's switch path by level: [[leaves], [spines above them], [cores above those], ...]."""
    lv = switch_levels(t)
    fv = fabric_view(t)
    level = leaves_of(t, host)
    out: list[list[str]] = []
    k = 0
    while level:
        out.append(level)
        up = {w[7:] for s in level for w in fv.adj[f"switch:{s}"]
              if w.startswith("switch:") and lv.get(w[7:]) == k + 1}
        level = sorted(up, key=_natural)
        k += 1
    return out


def hosts_under(t: Topology, switch: str) -> list[str]:
    """Hosts reachable downward from a switch (through lower-level switches), in name order."""
    _need(t, f"switch:{switch}", "switch")
    memo = t._cache.setdefault("reference_under", {})
    if switch in memo:
        return memo[switch]
    lv = switch_levels(t)
    fv = fabric_view(t)
    mine = lv.get(switch)
    hosts: set[str] = set()
    for w in fv.adj[f"switch:{switch}"]:
        if w.startswith("host:"):
            hosts.add(w[5:])
        elif mine is not None and lv.get(w[7:]) == mine - 1:
            hosts.update(hosts_under(t, w[7:]))
    out = sorted(hosts, key=_natural)
    memo[switch] = out
    return out


def path_between(t: Topology, a: str, b: str) -> HostPath | None:
    """Hops and bottleneck bandwidth between hosts `a` and `b`; None when no cable path joins them. Other hosts
    are never transit points. This is a per-path bottleneck, not a max-flow over all rails."""
    src, dst = f"host:{a}", f"host:{b}"
    _need(t, src, "host")
    _need(t, dst, "host")
    if a == b:
        return HostPath(0, None, ())
    fv = fabric_view(t)
    dist = {src: 0}
    width = {src: float("inf")}
    parent: dict[str, str] = {}
    queue = deque([src])
    while queue:
        u = queue.popleft()
        if dst in dist and dist[u] >= dist[dst]:
            break
        if u != src and u.startswith("host:"):
            continue
        for w, d in fv.adj[u].items():
            if w.startswith("host:") and w != dst:
                continue
            cap = min(width[u], d["gbytes"])
            if w not in dist:
                dist[w] = dist[u] + 1
                width[w] = cap
                parent[w] = u
                queue.append(w)
            elif dist[w] == dist[u] + 1 and cap > width[w]:
                width[w] = cap
                parent[w] = u
    if dst not in dist:
        return None
    via = []
    x = parent[dst]
    while x != src:
        via.append(x[7:])
        x = parent[x]
    return HostPath(dist[dst], width[dst], tuple(reversed(via)))


def oversubscription(t: Topology) -> list[LevelLoad]:
    lv = switch_levels(t)
    fv = fabric_view(t)
    per: dict[int, list[tuple[float, float]]] = {}
    for name, k in lv.items():
        down = up = 0.0
        for w, d in fv.adj[f"switch:{name}"].items():
            if w.startswith("host:") or lv.get(w[7:], k) < k:
                down += d["gbytes"]
            elif lv.get(w[7:], k) > k:
                up += d["gbytes"]
        per.setdefault(k, []).append((down, up))
    out = []
    for k in sorted(per):
        rows = per[k]
        down = sum(r[0] for r in rows)
        up = sum(r[1] for r in rows)
        ratios = [r[0] / r[1] for r in rows if r[1] > 0]
        out.append(LevelLoad(k, len(rows), down, up, down / up if up > 0 else None,
                             max(ratios) if ratios else None))
    return out
