"""Precomputed fabric indexes: what the planner's and `topo show`'s questions need, derived once per graph build.

Why: on 16k-host fat trees walking the fabric view per question took 100-300 ms (hosts under a core, the path
between two hosts across the core, oversubscription of every level). One pass over the view builds, per switch,
its level neighbours up and down, its directly cabled hosts and its capacity down and up, then, level by level
from the leaves, the hosts under each switch as runs of positions in the hosts' name order. Questions become
lookups and short walks over the few switches involved. Every answer equals the plain walk's (the differential
test in tests/unit/topology/test_fabric_index.py runs both). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from slurmtools.topology.graph import _natural

Runs = tuple[tuple[int, int], ...]   # half-open [lo, hi) runs of positions in FabricIndex.host_order


@dataclass(frozen=True)
class SwitchIndex:
    """One switch as the queries see it: neighbours by level, cabled hosts, capacity down and up."""
    level: int | None
    up: tuple[str, ...]        # switch names one level up, in adjacency order
    down: tuple[str, ...]      # switch names one level down, in adjacency order
    hosts: tuple[str, ...]     # hosts cabled straight to it
    down_gbytes: float
    up_gbytes: float


@dataclass(frozen=True)
class FabricIndex:
    host_order: tuple[str, ...]          # every host of the fabric view, in natural name order
    position: Mapping[str, int]          # host -> its position in host_order
    switches: Mapping[str, SwitchIndex]  # every switch of the view
    under: Mapping[str, Runs]            # switch -> hosts under it (hosts_under's answer), as runs

    def hosts_under(self, switch: str) -> list[str]:
        order = self.host_order
        out: list[str] = []
        for lo, hi in self.under[switch]:
            out.extend(order[lo:hi])
        return out


def build(fv, levels: Mapping[str, int]) -> FabricIndex:
    """The index of a fabric view `fv` (networkx graph of `host:`/`switch:` vertices) with `levels`."""
    adj = fv._adj   # networkx's own dicts: its read-only views cost a call per lookup
    hosts = sorted((n[5:] for n in fv if n.startswith("host:")), key=lambda h: (_natural(h), h))
    position = {h: i for i, h in enumerate(hosts)}
    switches: dict[str, SwitchIndex] = {}
    for n in fv:
        if not n.startswith("switch:"):
            continue
        name = n[7:]
        k = levels.get(name)
        up: list[str] = []
        down: list[str] = []
        direct: list[str] = []
        dg = ug = 0.0
        for w, d in adj[n].items():
            if w.startswith("host:"):
                direct.append(w[5:])
                if k is not None:
                    dg += d["gbytes"]
                continue
            wl = levels.get(w[7:])
            if k is None:
                continue
            if wl is not None and wl == k - 1:
                down.append(w[7:])
            elif wl is not None and wl == k + 1:
                up.append(w[7:])
            # oversubscription's rule: a neighbour without a level counts as the switch's own level
            other = k if wl is None else wl
            if other < k:
                dg += d["gbytes"]
            elif other > k:
                ug += d["gbytes"]
        switches[name] = SwitchIndex(k, tuple(up), tuple(down), tuple(direct), dg, ug)
    under: dict[str, Runs] = {}
    for name in sorted(switches, key=lambda s: (switches[s].level is None, switches[s].level or 0)):
        s = switches[name]
        pos = sorted(position[h] for h in s.hosts)
        runs = _runs(pos)
        if s.level is not None and s.down:
            runs = _union([runs] + [under[c] for c in s.down])
        under[name] = runs
    return FabricIndex(tuple(hosts), position, switches, under)


def _runs(sorted_positions: list[int]) -> Runs:
    out: list[tuple[int, int]] = []
    for p in sorted_positions:
        if out and out[-1][1] >= p:
            if out[-1][1] == p:
                out[-1] = (out[-1][0], p + 1)
            continue
        out.append((p, p + 1))
    return tuple(out)


def _union(parts: list[Runs]) -> Runs:
    allr = sorted(r for part in parts for r in part)
    out: list[tuple[int, int]] = []
    for lo, hi in allr:
        if out and lo <= out[-1][1]:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)
