"""One host's inside as a person checks it against the capture: GPUs, NVLink islands, per GPU its nearest NICs
(with how the path runs) and local CPUs, and what the source did not state.

`topo import` prints this for every single-host input and `topo show --host` for any host, from the same
function, so what an admin reads is what the planner and the renderers will use. Pure.
"""

from __future__ import annotations

from slurmtools.topology import queries as q
from slurmtools.topology.graph import UNKNOWN_FACTS, Topology


def _ranges(ids) -> str:
    from slurmtools.topology.render_slurm import int_ranges

    return int_ranges(ids)


def describe_host(t: Topology, host: str) -> dict:
    """Plain data (JSON-ready) about one host's inside."""
    near = q.nearest_nic_paths(t, host)
    cpus = q.local_cpus(t, host)
    cores = q.local_cores(t, host)
    numa = q.gpu_numa(t, host)
    unknown = t.unknown(host)
    speeds = _nvlink_speeds(t, host)
    return {
        "host": host,
        "gpus": [{
            "index": g.index, "type": g.gpu_type, "name": g.name,
            "nearest_nics": [p.nic for p in near[g.index]],
            "nic_path": near[g.index][0].path if near[g.index] else None,
            "local_cpus": _ranges(cpus[g.index]) or None, "cores": _ranges(cores[g.index]) or None,
            "numa": numa[g.index] or None,
        } for g in t.gpus(host)],
        "nics": [{"name": n.name, "link_layer": n.link_layer, "gbytes": n.rate_gbytes} for n in t.nics(host)],
        "nvlink_islands": q.nvlink_islands(t, host) if "nvlink" not in unknown else None,
        "nvlink_gbytes_per_link": speeds,
        "unknown": {f: UNKNOWN_FACTS[f] for f in unknown},
    }


def _nvlink_speeds(t: Topology, host: str) -> list[float]:
    out = set()
    for g in t.gpus(host):
        for _, d in t.g.adj[g.vid].items():
            e = d["e"]
            if e.kind == "nvlink" and e.gbytes_per_link is not None:
                out.add(e.gbytes_per_link)
    return sorted(out)


def host_lines(info: dict) -> list[str]:
    """The human form of `describe_host`: one screen for an 8-GPU node."""
    gpus = info["gpus"]
    types = sorted({g["type"] for g in gpus if g["type"]})
    out = [f"host {info['host']}: {len(gpus)} GPUs" + (f" ({', '.join(types)})" if types else "") +
           f", NICs {', '.join(_nic(n) for n in info['nics']) or '-'}"]
    islands = info["nvlink_islands"]
    speed = info["nvlink_gbytes_per_link"]
    out.append("  NVLink islands: " + ("unknown" if islands is None else str(islands)) +
               (f", {', '.join(f'{s:g}' for s in speed)} GB/s per link" if speed else ""))
    for g in gpus:
        nics = ", ".join(g["nearest_nics"]) or "-"
        path = g["nic_path"]
        how = f" ({path}: {q.PATH_MEANING[path]})" if path else ""
        cpus = g["local_cpus"] or "unknown"
        cores = f", cores {g['cores']}" if g["cores"] and g["cores"] != g["local_cpus"] else ""
        numa = f", NUMA {','.join(str(k) for k in g['numa'])}" if g["numa"] else ""
        out.append(f"  GPU{g['index']}: nearest NIC {nics}{how}, CPUs {cpus}{cores}{numa}")
    for fact, what in info["unknown"].items():
        out.append(f"  unknown: {fact}: {what}")
    return out


def _nic(n: dict) -> str:
    layer = {"ib": "IB", "ethernet": "Ethernet"}.get(n["link_layer"] or "", "")
    return n["name"] + (f" ({layer})" if layer else "")
