"""Engines that write the whole graph for other tools: JSON (lossless, readable back) and GraphML (for Gephi,
yEd, networkx users; flat attributes, so lists become comma-separated strings). Pure."""

from __future__ import annotations

from dataclasses import asdict

import networkx as nx

from slurmtools.topology.graph import Topology


def render_json(t: Topology) -> str:
    return t.to_json(indent=1) + "\n"


def _flat(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            v = ",".join(str(x) for x in v)
        out[k] = v
    return out


def to_flat_graph(t: Topology) -> nx.Graph:
    """A copy of the graph with only GraphML-friendly attributes (kind + the dataclass fields + gbytes)."""
    g = nx.Graph(name=t.name)
    if t.fabric_unknown:
        g.graph["unknown"] = ",".join(t.fabric_unknown)
    rated = "link_rates" not in t.fabric_unknown     # else an IB cable's width and speed are the graph's stand-in
    for vid, v in t.g.nodes(data="v"):
        g.add_node(vid, kind=v.kind, **_flat(asdict(v)))
    for a, b, e in t.g.edges(data="e"):
        if e.kind == "ib" and not rated:
            g.add_edge(a, b, kind=e.kind, count=e.count)
            continue
        attrs = {"kind": e.kind, **_flat(asdict(e))}
        gb = getattr(e, "gbytes", None)
        if gb is not None:
            attrs["gbytes"] = float(gb)
        g.add_edge(a, b, **attrs)
    return g


def render_graphml(t: Topology) -> str:
    return "\n".join(nx.generate_graphml(to_flat_graph(t))) + "\n"
