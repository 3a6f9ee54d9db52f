"""The node expectations file from the topology graph: per host, the link facts the prolog can check cheaply.

The graph is the declared truth (the site's fabric, or a discovered graph the admin accepted); this renders what
each host's GPUs and HCAs should report (format in `slurmtools.hooks.expectations`), so that the prolog compares
without networkx. Facts the graph does not state are written as null and are not checked, never filled with a
default:
- GPU count: the host's GPU vertices (a host without any is null: an input without GPUs does not say "none");
- NVLinks per GPU: the sum of `links` over the GPU's NVLink edges (to peers or NVSwitches);
- PCIe per GPU: gen and width of the GPU's PCIe edge, where the graph has them;
- per HCA: its `rate_gbytes`, and width and speed of its cable to a switch (an IB link edge); `cabled` is true
  when it has a fabric edge to a switch, else null (its link state is then not checked).
Facts the graph marks unknown for a host (`Host.unknown`: "nvlink", "nics", "nic_names") are null even where edges
exist.
A fact the prolog's reader would refuse (a PCIe gen 8, a link layer "roce", GPUs 0 and 2 of a host without a 1)
is refused here, in one line naming the hosts: written, it left every such host's prolog without expectations.
Pure.
"""

from __future__ import annotations

import json
from typing import Iterable

from slurmtools.errors import ConfigError, SlurmtoolsError
from slurmtools.hooks.expectations import FORMAT, NAME, parse_all
from slurmtools.topology.graph import Topology

__all__ = ["NAME", "document", "dumps", "host_facts", "render", "summary"]


def host_facts(t: Topology, host: str) -> dict:
    """One host's expected facts (a profile of the file)."""
    unknown = set(getattr(t.vertex(f"host:{host}"), "unknown", ()))  # facts the graph's source did not state
    gpus = t.gpus(host)
    return {"gpus": len(gpus) if gpus else None,
            "gpu": [{"index": g.index, "nvlinks": None if "nvlink" in unknown else _nvlinks(t, g.vid),
                     **_pcie(t, g.vid)} for g in gpus],
            # the matrix's NIC0... labels are no device names the prolog could find on the node
            "hcas": None if {"nics", "nic_names"} & unknown else [_hca(t, n) for n in t.nics(host)]}


def _nvlinks(t: Topology, vid: str) -> int | None:
    """The GPU's NVLinks: the sum over its NVLink edges (to peer GPUs, or to NVSwitches on switch boards)."""
    total = 0
    for n in t.neighbours(vid, edge_kind="nvlink"):
        links = getattr(t.edge(vid, n), "links", None)
        if links is None:  # the input did not say how many
            return None
        total += links
    return total


def _pcie(t: Topology, vid: str) -> dict:
    """gen and width of the GPU's PCIe edge (to its switch, bridge or CPU); null where not stated or ambiguous."""
    edges = [t.edge(vid, n) for n in t.neighbours(vid, edge_kind="pcie")]
    gens = {getattr(e, "gen", None) for e in edges}
    widths = {getattr(e, "width", None) for e in edges}
    return {"pcie_gen": gens.pop() if len(gens) == 1 else None,
            "pcie_width": widths.pop() if len(widths) == 1 else None}


def _hca(t: Topology, nic) -> dict:
    cables = [t.edge(nic.vid, n) for n in t.neighbours(nic.vid, kind="switch")
              if t.edge(nic.vid, n).kind in ("ib", "ethernet")]
    ib = {(e.width, e.speed) for e in cables if e.kind == "ib"}
    width, speed = ib.pop() if len(ib) == 1 else (None, None)
    return {"name": nic.name, "rate_gbytes": nic.rate_gbytes, "width": width, "speed": speed,
            "link_layer": nic.link_layer, "cabled": True if cables else None}


def document(t: Topology, hosts: Iterable[str] | None = None) -> dict:
    """The whole file: hosts with equal facts share one profile, named after their node type."""
    names = list(hosts) if hosts is not None else t.host_names()
    for h in names:
        if f"host:{h}" not in t:
            raise KeyError(h)
    profiles: dict[str, dict] = {}
    by_facts: dict[str, str] = {}
    assign: dict[str, str] = {}
    for h in names:
        facts = host_facts(t, h)
        key = json.dumps(facts, sort_keys=True)
        if key not in by_facts:
            base = t.vertex(f"host:{h}").node_type or h
            name, k = base, 2
            while name in profiles:
                name, k = f"{base}-{k}", k + 1
            profiles[name] = facts
            by_facts[key] = name
        assign[h] = by_facts[key]
    doc = {"format": FORMAT, "topology": t.name, "profiles": profiles, "hosts": assign}
    _readable(doc)
    return doc


class UnreadableFact(SlurmtoolsError):
    """The graph states a fact the node expectations file cannot carry (its reader would refuse the file)."""


def _readable(doc: dict) -> None:
    """Check the document with the prolog's own reader: the file must read back as written, or not be written."""
    try:
        parse_all(json.dumps(doc), "node expectations")
    except ConfigError as e:
        from slurmtools.errors import one_line
        from slurmtools.hostlist import compress

        prefix = "profiles."
        name = next((n for n in sorted(doc["profiles"], key=len, reverse=True)
                     if e.key == prefix + n or e.key.startswith(prefix + n + ".")), None)
        hosts = [h for h, pn in doc["hosts"].items() if pn == name] if name is not None else []
        field = e.key[len(prefix) + len(name) + 1:] if name is not None else e.key
        where = f"host(s) {compress(hosts)}" if hosts else f"profile {name}" if name is not None else "the file"
        raise UnreadableFact(one_line(f"node expectations: {where}: {field}: {e.detail}: the prolog's reader "
                                      f"refuses this, so it is not written; correct the topology graph")) from None


def render(t: Topology, hosts: Iterable[str] | None = None) -> str:
    """The file's text (see `document`)."""
    return dumps(document(t, hosts))


def dumps(doc: dict) -> str:
    """JSON with one GPU, HCA or host per line: short enough to read, and a changed fact is a one-line diff."""
    d = json.dumps
    out = ["{" + f'"format": {d(doc["format"])}, "topology": {d(doc["topology"])},', ' "profiles": {']
    for k, (name, p) in enumerate(doc["profiles"].items()):
        out.append(f'  {d(name)}: {{"gpus": {d(p["gpus"])},')
        for key in ("gpu", "hcas"):
            items = [f"    {d(x)}" for x in p[key] or ()]
            body = "[\n" + ",\n".join(items) + "]" if items else d(p[key])
            out.append(f'   {d(key)}: {body}' + ("," if key == "gpu" else "}" + ("," if k < len(doc["profiles"]) - 1
                                                                                 else "")))
    out.append(" },")
    hosts = [f"  {d(h)}: {d(pn)}" for h, pn in doc["hosts"].items()]
    out.append(' "hosts": {' + ("\n" + ",\n".join(hosts) + "\n " if hosts else "") + "}")
    out.append("}")
    return "\n".join(out) + "\n"


def summary(doc: dict) -> list[str]:
    """Lines for the admin: per profile, its hosts, what will be checked and what will not (null facts)."""
    from slurmtools.hostlist import compress

    out = []
    for name, p in doc["profiles"].items():
        hosts = [h for h, pn in doc["hosts"].items() if pn == name]
        checked, unknown = [], []
        if p["gpus"] is not None:
            checked.append(f"GPU count {p['gpus']}")
        else:
            unknown.append("GPU count")
        for label, key in (("NVLinks", "nvlinks"), ("PCIe gen", "pcie_gen"), ("PCIe width", "pcie_width")):
            vals = sorted({g[key] for g in p["gpu"] if g[key] is not None})
            if p["gpu"]:
                if vals:
                    checked.append(f"{label} {'/'.join(map(str, vals))}")
                if len(vals) == 0 or any(g[key] is None for g in p["gpu"]):
                    unknown.append(label)
        if p["hcas"]:
            checked.append(f"{len(p['hcas'])} HCAs present")
        for label, keys in (("HCA state", ("cabled",)), ("HCA rate/width/speed", ("rate_gbytes", "width", "speed"))):
            if p["hcas"]:
                if any(all(h[k] is None for k in keys) for h in p["hcas"]):
                    unknown.append(label)
                if any(any(h[k] is not None for k in keys) for h in p["hcas"]):
                    checked.append(label)
        if p["hcas"] is None:
            unknown.append("HCAs")
        elif not p["hcas"]:
            unknown.append("HCAs (none in the graph)")
        out.append(f"{name} ({compress(hosts)}): checks {', '.join(checked) or 'nothing'}; "
                   f"not stated, not checked: {', '.join(unknown) or 'nothing'}")
    return out
