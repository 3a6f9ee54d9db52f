"""Checks: a discovered topology against the declared one (`topo diff`), one topology on its own (`topo lint`),
and a gres.conf against a topology (the Cores=/Links= mismatch that drains nodes when slurmd starts).

Each problem is one `Finding` with a stable `code`, the host or switch it is about, and one line of text, so the
CLI can print them, emit JSON, and exit non-zero from cron. Pure: the gres.conf text is passed in.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from slurmtools.errors import ParseError
from slurmtools.hostlist import expand
from slurmtools.topology import queries as q
from slurmtools.topology.graph import Topology, _natural


@dataclass(frozen=True)
class Finding:
    code: str  # missing-host, extra-host, wrong-leaf, gpu-count, degraded-nvlink, nic-numa, gres-cores, ...
    subject: str
    message: str

    def line(self) -> str:
        return f"{self.subject}: {self.message}"


# --------------------------------------------------------------------------------------------------- diff

def _leaf_map(declared: Topology, discovered: Topology, hosts: list[str]) -> dict[str, str]:
    """Discovered leaf -> the declared leaf most of its hosts sit under (discovered switches often carry GUIDs
    or descriptions instead of the site's names)."""
    votes: dict[str, Counter] = {}
    for h in hosts:
        dl, xl = q.primary_leaf(declared, h), q.primary_leaf(discovered, h)
        if dl and xl:
            votes.setdefault(xl, Counter())[dl] += 1
    return {xl: sorted(c.items(), key=lambda kv: (-kv[1], _natural(kv[0])))[0][0] for xl, c in votes.items()}


def diff(declared: Topology, discovered: Topology) -> list[Finding]:
    """What the discovered graph does differently from the declared one. Only what the discovery saw is
    compared: a capture without NICs does not report every NIC missing, an NVLink-less dump no degraded links."""
    out: list[Finding] = []
    dh, xh = set(declared.host_names()), set(discovered.host_names())
    for h in sorted(dh - xh, key=_natural):
        out.append(Finding("missing-host", h, "declared but not discovered"))
    for h in sorted(xh - dh, key=_natural):
        out.append(Finding("extra-host", h, "discovered but not declared"))
    both = sorted(dh & xh, key=_natural)

    leaf_map = _leaf_map(declared, discovered, both)
    for h in both:
        dl, xl = q.primary_leaf(declared, h), q.primary_leaf(discovered, h)
        if dl and xl and leaf_map.get(xl) != dl:
            out.append(Finding("wrong-leaf", h, f"under leaf {xl} (where {leaf_map.get(xl)}'s hosts are), "
                                                f"declared under {dl}"))
        elif dl and discovered.switches() and not q.leaves_of(discovered, h) and \
                any(q.leaves_of(discovered, o) for o in both):
            out.append(Finding("uncabled-host", h, f"not cabled to any switch, declared under {dl}"))

    for h in both:
        dg, xg = declared.gpus(h), discovered.gpus(h)
        if not xg:
            continue
        if len(dg) != len(xg):
            out.append(Finding("gpu-count", h, f"{len(xg)} GPUs discovered, {len(dg)} declared"))
            continue
        dm, xm = q.nvlink_matrix(declared, h), q.nvlink_matrix(discovered, h)
        for i in range(len(dg)):
            for j in range(i + 1, len(dg)):
                if xm[i][j] < dm[i][j]:
                    out.append(Finding("degraded-nvlink", h, f"GPU {dg[i].index} <-> GPU {dg[j].index}: "
                                                             f"{xm[i][j]} NVLinks, its type has {dm[i][j]}"))
        dc, xc = q.local_cores(declared, h), q.local_cores(discovered, h)
        for g in dg:
            if xc.get(g.index) and dc.get(g.index) and xc[g.index] != dc[g.index]:
                out.append(Finding("gpu-cores", h, f"GPU {g.index} is local to cores {_r(xc[g.index])}, "
                                                   f"declared {_r(dc[g.index])}"))

    for h in both:
        dn, xn = q.nic_numa(declared, h), q.nic_numa(discovered, h)
        for nic, numa in xn.items():
            if nic not in dn:
                continue
            if numa and dn[nic] and set(numa) != set(dn[nic]):
                out.append(Finding("nic-numa", h, f"NIC {nic} is on NUMA node {_r(numa)}, declared {_r(dn[nic])}"))
        if xn:
            for nic in sorted(set(dn) - set(xn), key=_natural):
                out.append(Finding("missing-nic", h, f"NIC {nic} declared but not discovered"))
    return out


def _r(ids) -> str:
    from slurmtools.topology.render_slurm import int_ranges

    return int_ranges(ids)


# --------------------------------------------------------------------------------------------------- lint

def lint(t: Topology) -> list[Finding]:
    """Problems visible in one topology: hosts no switch reaches (while others are cabled), switches no host
    reaches, GPUs with no local CPU recorded or only NICs across the socket link, facts the source did not
    state, NVLink rows that are not symmetric, and hosts with fewer GPUs or NVLinks than most hosts of their
    node type. (GPU i here is the i-th GPU in index order.)"""
    out: list[Finding] = []
    hosts = t.host_names()
    cabled = {h for h in hosts if q.leaves_of(t, h)}
    if cabled:
        for h in hosts:
            if h not in cabled:
                out.append(Finding("uncabled-host", h, "not cabled to any switch"))
    levels = q.switch_levels(t)
    for s in t.switches():
        if s.name not in levels:
            out.append(Finding("orphan-switch", s.name, "no host is reachable from this switch"))
    shapes: dict[str, dict[str, tuple]] = {}
    for h in hosts:
        gpus = t.gpus(h)
        if not gpus:
            continue
        cores = q.local_cores(t, h)
        cpus = q.local_cpus(t, h)
        near = q.nearest_nic_paths(t, h)
        for g in gpus:
            if not cores[g.index] and not cpus[g.index]:
                out.append(Finding("gpu-no-cpu", h, f"GPU {g.index} has no local CPU recorded"))
            if near[g.index] and near[g.index][0].far:
                out.append(Finding("far-nic", h, f"GPU {g.index}: every NIC is across the socket link (nearest "
                                                 f"{', '.join(p.nic for p in near[g.index])}, SYS)"))
        if t.unknown(h):
            out.append(Finding("unknown", h, "not stated by the source, so not checked: " + ", ".join(t.unknown(h))))
        m = q.nvlink_matrix(t, h)
        for i in range(len(m)):
            for j in range(i + 1, len(m)):
                if m[i][j] != m[j][i]:
                    out.append(Finding("nvlink-asymmetric", h, f"GPU {gpus[i].index} -> {gpus[j].index} has "
                                                               f"{m[i][j]} NVLinks, the other way {m[j][i]}"))
        nt = t.vertex(f"host:{h}").node_type
        if nt:
            shapes.setdefault(nt, {})[h] = (len(gpus), tuple(map(tuple, m)))
    for nt, per_host in shapes.items():
        # the shape most hosts of the type share is the reference; the others are the odd ones out
        common, n = Counter(per_host.values()).most_common(1)[0]
        if n * 2 <= len(per_host):
            continue  # no majority: nothing to call the norm
        for h, shape in per_host.items():
            if shape == common:
                continue
            if shape[0] != common[0]:
                out.append(Finding("gpu-count", h, f"{shape[0]} GPUs, most hosts of type {nt} have {common[0]}"))
                continue
            for i in range(shape[0]):
                for j in range(i + 1, shape[0]):
                    if shape[1][i][j] < common[1][i][j]:
                        out.append(Finding("degraded-nvlink", h, f"GPU {i} <-> GPU {j}: {shape[1][i][j]} NVLinks, "
                                                                 f"most hosts of type {nt} have {common[1][i][j]}"))
    return out


# ------------------------------------------------------------------------------------------------ gres.conf

@dataclass(frozen=True)
class GresGpu:
    """One GPU as a gres.conf line declares it for one node."""
    node: str | None  # None: a line without NodeName= (applies to every node reading the file)
    index: int
    line: int
    gpu_type: str | None
    cores: tuple[int, ...] | None
    links: tuple[int, ...] | None


_DEV = re.compile(r"(\d+)$")


def _ints(value: str, source: str, lineno: int, key: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in value.split(","):
        a, _, b = part.partition("-")
        try:
            if b and a:
                out.extend(range(int(a), int(b) + 1))
            else:
                out.append(int(part))
        except ValueError:
            raise ParseError(source, lineno, f"{key}: expected integers and ranges, got {value!r}") from None
    return tuple(out)


def parse_gres_conf(text: str, source: str = "gres.conf") -> list[GresGpu]:
    """The GPU lines of a gres.conf (`Name=gpu ... File=/dev/nvidiaN`). Lines for other GRES, AutoDetect and
    comments are skipped; a GPU line whose File= does not end in a device number fails with its line."""
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        kv: dict[str, str] = {}
        for tok in line.split():
            k, sep, v = tok.partition("=")
            if not sep:
                raise ParseError(source, lineno, f"expected key=value, got {tok!r}")
            kv[k.lower()] = v
        if kv.get("name", "").lower() != "gpu":
            continue
        try:
            nodes = expand(kv["nodename"]) if "nodename" in kv else [None]
            files = expand(kv["file"]) if "file" in kv else []
        except ValueError as exc:
            raise ParseError(source, lineno, str(exc)) from None
        if not files:
            raise ParseError(source, lineno, "Name=gpu line without File= (cannot tell which GPU it is)")
        cores = _ints(kv["cores"], source, lineno, "Cores") if "cores" in kv else None
        links = _ints(kv["links"], source, lineno, "Links") if "links" in kv else None
        for f in files:
            m = _DEV.search(f)
            if not m:
                raise ParseError(source, lineno, f"File={f}: expected a device ending in its number (/dev/nvidia3)")
            for n in nodes:
                out.append(GresGpu(n, int(m.group(1)), lineno, kv.get("type"), cores, links))
    return out


def check_gres(t: Topology, text: str, source: str = "gres.conf") -> list[Finding]:
    """A gres.conf against a topology (a capture): per host, every GPU listed, Cores= equal to the cores local to
    the GPU, Links= equal to its NVLink row. Hosts of the topology with GPUs but no line are reported too."""
    gres = parse_gres_conf(text, source)
    out: list[Finding] = []
    known = set(t.host_names())
    by_host: dict[str, dict[int, GresGpu]] = {}
    for g in gres:
        targets = [g.node] if g.node is not None else [h for h in known if t.gpus(h)]
        for h in targets:
            by_host.setdefault(h, {})[g.index] = g
    for h in sorted(by_host, key=_natural):
        if h not in known:
            continue
        gpus = t.gpus(h)
        if not gpus:
            continue
        cores = q.local_cores(t, h)
        matrix = q.nvlink_matrix(t, h)
        listed = by_host[h]
        for i, g in enumerate(gpus):
            line = listed.get(g.index)
            if line is None:
                out.append(Finding("gres-missing", h, f"{source}: no line for GPU {g.index}"))
                continue
            where = f"{source}:{line.line}"
            if line.cores is not None and cores[g.index] and tuple(sorted(line.cores)) != cores[g.index]:
                out.append(Finding("gres-cores", h, f"{where}: GPU {g.index} Cores={_r(line.cores)}, the capture "
                                                    f"has {_r(cores[g.index])}"))
            if line.links is not None and list(line.links) != matrix[i]:
                out.append(Finding("gres-links", h, f"{where}: GPU {g.index} Links={','.join(map(str, line.links))}"
                                                    f", the capture has {','.join(map(str, matrix[i]))}"))
        for idx in sorted(set(listed) - {g.index for g in gpus}):
            out.append(Finding("gres-extra", h, f"{source}:{listed[idx].line}: GPU {idx} is not in the capture"))
    return out
