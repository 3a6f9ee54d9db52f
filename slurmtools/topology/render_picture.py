"""Pictures a person can read: one host's inside (NUMA nodes, PCIe switches, GPUs, NICs, NVSwitches) and the
fabric (switch levels, hosts per leaf, cable counts), as SVG or PNG through matplotlib.

matplotlib is imported inside the functions: the CLI and the rest of the package never pay for it. Returns
bytes; writing the file is the caller's business.
"""

from __future__ import annotations

import io
from collections import deque

from slurmtools.topology import queries as q
from slurmtools.topology.graph import Topology, _natural

COLOURS = {"cpu": "#d9e6f5", "pcie_switch": "#eeeeee", "pcie_bridge": "#eeeeee", "gpu": "#b6e3b6",
           "nic": "#f8d9a8", "nvswitch": "#c9b6e3", "switch": "#eeeeee", "leaf": "#f8d9a8"}
MAX_PER_LEVEL = 48  # a fabric level wider than this is drawn as one summary box


def _figure(width: float, height: float):
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # real <text> in SVGs: searchable, and far smaller
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(width, 4), max(height, 3)))
    ax.set_axis_off()
    return plt, fig, ax


def _box(ax, x: float, y: float, text: str, kind: str, w: float = 0.9, h: float = 0.5) -> None:
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02",
                                fc=COLOURS.get(kind, "#ffffff"), ec="#333333", lw=0.8))
    ax.text(x, y, text, ha="center", va="center", fontsize=7)


def _save(plt, fig, fmt: str) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, bbox_inches="tight", dpi=120)
    plt.close(fig)
    return buf.getvalue()


def _label(t: Topology, vid: str) -> str:
    v = t.vertex(vid)
    if v.kind == "cpu":
        ids = ",".join(str(k) for k in v.numa_ids) or "unknown"
        return f"NUMA {ids}" + (f"\nsocket {v.socket}" if v.socket is not None else "")
    if v.kind == "gpu":
        return f"GPU{v.index}" + (f"\n{v.gpu_type or v.name}" if (v.gpu_type or v.name) else "")
    if v.kind == "nic":
        return v.name + ("" if v.compute else "\n(storage)")
    if v.kind == "pcie_switch":
        return f"PCIe sw {v.index}"
    if v.kind == "pcie_bridge":
        return f"PCIe HB {v.index}"
    if v.kind == "nvswitch":
        return f"NVSwitch {v.index}"
    return vid


def render_node_picture(t: Topology, host: str, fmt: str = "svg") -> bytes:
    """One host: each NUMA node with its PCIe tree below it, NVSwitches (or direct NVLinks) under the GPUs."""
    if f"host:{host}" not in t:
        raise ValueError(f"no host {host!r} in topology {t.name!r}")
    cpus = [c.vid for c in t.devices(host, "cpu")]
    # PCIe tree: parent pointers by BFS from each NUMA node over PCIe edges
    children: dict[str, list[str]] = {c: [] for c in cpus}
    seen = set(cpus)
    queue = deque(cpus)
    while queue:
        u = queue.popleft()
        for w in sorted(t.neighbours(u, edge_kind="pcie"), key=_natural):
            if w not in seen and t.kind(w) in ("pcie_switch", "pcie_bridge", "gpu", "nic"):
                seen.add(w)
                children.setdefault(u, []).append(w)
                children.setdefault(w, [])
                queue.append(w)
    loose = [d.vid for k in ("gpu", "nic") for d in t.devices(host, k) if d.vid not in seen]
    pos: dict[str, tuple[float, float]] = {}
    nxt = [0.0]

    def place(u: str, depth: int) -> float:
        kids = children.get(u, [])
        if not kids:
            x = nxt[0]
            nxt[0] += 1.0
        else:
            xs = [place(k, depth + 1) for k in kids]
            x = sum(xs) / len(xs)
        pos[u] = (x, -depth)
        return x

    for c in cpus:
        place(c, 0)
        nxt[0] += 0.3
    for d in loose:
        pos[d] = (nxt[0], -3)
        nxt[0] += 1.0
    depth = max((-y for _, y in pos.values()), default=0)
    nvs = [s.vid for s in t.devices(host, "nvswitch")]
    width = max(nxt[0], 1.0)
    for i, s in enumerate(nvs):
        pos[s] = ((i + 0.5) * width / max(len(nvs), 1) - 0.5, -depth - 1.5)
    plt, fig, ax = _figure(width * 1.1 + 1, (depth + 3) * 0.9)
    for u, ks in children.items():
        for k in ks:
            ax.plot([pos[u][0], pos[k][0]], [pos[u][1], pos[k][1]], color="#555555", lw=0.8, zorder=0)
    for a, b in zip(cpus, cpus[1:]):
        ax.plot([pos[a][0], pos[b][0]], [pos[a][1], pos[b][1]], color="#1f5fa8", lw=1.5, ls="--", zorder=0)
    drawn = set()
    for g in t.gpus(host):
        for w in t.neighbours(g.vid, edge_kind="nvlink"):
            key = tuple(sorted((g.vid, w)))
            if key in drawn or w not in pos:
                continue
            drawn.add(key)
            e = t.edge(g.vid, w)
            (x1, y1), (x2, y2) = pos[g.vid], pos[w]
            if t.kind(w) == "gpu":
                ax.annotate("", xy=(x2, y2 - 0.25), xytext=(x1, y1 - 0.25),
                            arrowprops=dict(arrowstyle="-", color="#6a3d9a", connectionstyle="arc3,rad=0.3"))
                ax.text((x1 + x2) / 2, min(y1, y2) - 0.55, f"NV{e.links}", fontsize=6, color="#6a3d9a",
                        ha="center")
            else:
                ax.plot([x1, x2], [y1, y2], color="#6a3d9a", lw=0.5, alpha=0.6, zorder=0)
    for vid, (x, y) in pos.items():
        _box(ax, x, y, _label(t, vid), t.kind(vid))
    h = t.vertex(f"host:{host}")
    ax.set_title(f"{host}" + (f" ({h.node_type})" if h.node_type else "") +
                 f": {len(t.gpus(host))} GPUs, {len(t.nics(host))} NICs, {len(cpus)} NUMA nodes", fontsize=9)
    ax.set_xlim(-1, width + 0.5)
    ax.set_ylim(-depth - 2.2, 0.8)
    return _save(plt, fig, fmt)


def _wrap(name: str, width: int = 12) -> str:
    """Long switch names (A09-P1-IBLEAF-04-08) on two lines, broken at a separator near the middle."""
    if len(name) <= width:
        return name
    cuts = [i for i, ch in enumerate(name) if ch in "-_.;:"]
    if not cuts:
        return name
    mid = min(cuts, key=lambda i: abs(i - len(name) / 2))
    return name[:mid + 1] + "\n" + name[mid + 1:]


def render_fabric_picture(t: Topology, fmt: str = "svg") -> bytes:
    """Switches by level (top level at the top), each leaf with its host count, cables labelled with their
    count; a level wider than MAX_PER_LEVEL becomes one summary box with its oversubscription."""
    levels = q.switch_levels(t)
    fv = q.fabric_view(t)
    by_level: dict[int, list[str]] = {}
    for s, k in levels.items():
        by_level.setdefault(k, []).append(s)
    if not by_level:
        raise ValueError(f"topology {t.name!r} has no switch that reaches a host; nothing to draw")
    top = max(by_level)
    loads = {lv.level: lv for lv in q.oversubscription(t)}
    widest = max(min(len(v), MAX_PER_LEVEL) for v in by_level.values())
    longest = max((len(line) for names in by_level.values() if len(names) <= MAX_PER_LEVEL for s in names
                   for line in _wrap(s).splitlines()), default=6)
    unit = max(1.0, longest * 0.09)  # horizontal room per switch, so labels never overlap
    pos: dict[str, tuple[float, float]] = {}
    plt, fig, ax = _figure(widest * unit * 1.1 + 2, (top + 1) * 1.3 + 1)
    for k, names in sorted(by_level.items()):
        names.sort(key=_natural)
        y = k * 1.5
        ratio = loads[k].ratio if k in loads else None
        note = f"  {ratio:.2g}:1 oversubscribed" if ratio else ""
        if len(names) > MAX_PER_LEVEL:
            hosts = sum(1 for n in fv if n.startswith("host:")) if k == 0 else None
            text = f"level {k}: {len(names)} switches" + (f", {hosts} hosts" if hosts else "") + note
            _box(ax, (widest - 1) * unit / 2, y, text, "switch", w=max(widest * unit * 0.8, 4), h=0.6)
            continue
        ax.text(-1.2 * unit, y, f"level {k}{note}", fontsize=7, ha="right", va="center")
        off = (widest - len(names)) / 2
        for i, s in enumerate(names):
            pos[s] = ((off + i) * unit, y)
    for a, b, d in fv.edges(data=True):
        if a.startswith("switch:") and b.startswith("switch:") and a[7:] in pos and b[7:] in pos:
            (x1, y1), (x2, y2) = pos[a[7:]], pos[b[7:]]
            ax.plot([x1, x2], [y1, y2], color="#777777", lw=0.6, zorder=0)
    for s, (x, y) in pos.items():
        if levels[s] == 0:
            n = sum(1 for w in fv.adj[f"switch:{s}"] if w.startswith("host:"))
            _box(ax, x, y, f"{_wrap(s)}\n{n} hosts", "leaf", w=0.9 * unit, h=0.7)
        else:
            _box(ax, x, y, _wrap(s), "switch", w=0.9 * unit, h=0.6)
    ax.set_title(f"fabric of {t.name}: {sum(1 for n in fv if n.startswith('host:'))} hosts, "
                 f"{len(levels)} switches in {top + 1} level(s)", fontsize=9)
    ax.set_xlim(-3 * unit, widest * unit + 0.5)
    ax.set_ylim(-0.8, top * 1.5 + 0.8)
    return _save(plt, fig, fmt)
