"""The topology Slurm reads, for the release that reads it: topology.conf (tree or block) or topology.yaml (one
topology per partition: tree, block or flat), and the TopologyPlugin line that goes with it. Pure.

Blocks are the fabric's multi-node NVLink domains when it has any, else its leaf switches (hosts under one leaf
switch talk at full bandwidth). Slurm's block plugin aggregates blocks by their position in the file (block i
joins the level-k block i // 2^k), so blocks are written grouped by the switch above them, and a group that is
short of a full aggregate is padded with empty placeholder blocks where the release allows empty blocks: without
them the next switch's blocks would be aggregated with this one's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from slurmtools.errors import ConfigError
from slurmtools.hostlist import compress
from slurmtools.slurm.releases import SlurmRelease
from slurmtools.topology import queries as q
from slurmtools.topology.graph import Topology, _natural
from slurmtools.topology.slurm_topology_conf import check_block_sizes

KINDS = ("tree", "block", "flat")


@dataclass(frozen=True)
class Block:
    name: str
    hosts: tuple[str, ...]  # empty for a placeholder
    parent: str | None  # the switch above it (the group it is aggregated with)


@dataclass(frozen=True)
class BlockLayout:
    unit: str  # "nvlink" | "leaf"
    blocks: tuple[Block, ...]
    sizes: tuple[int, ...]  # BlockSizes, in nodes

    @property
    def real_blocks(self) -> list[Block]:
        return [b for b in self.blocks if b.hosts]


def block_layout(t: Topology, release: SlurmRelease, sizes: Sequence[int] | None = None,
                 unit: str | None = None) -> BlockLayout:
    """Blocks and BlockSizes for topology/block, checked against what `release` accepts."""
    release.require("block_topology", "topology/block (BlockName=, BlockSizes=)")
    domains = [d for d in q.nvlink_domains(t) if d.multi_node]
    if unit is None:
        unit = "nvlink" if domains else "leaf"
    primary = q.primary_leaves(t)
    groups: dict[str | None, list[tuple[str, tuple[str, ...]]]] = {}
    if unit == "nvlink":
        if not domains:
            raise ConfigError(f"topology {t.name}", "nvlink_domains",
                              "no multi-node NVLink domain to make blocks of (use leaf switches as blocks instead)")
        for d in domains:
            # a domain's group: the leaf switch most of its hosts hang off (racks of NVL trays share leaves)
            leaves = [primary.get(h) for h in d.hosts]
            parent = max(set(leaves), key=lambda x: (leaves.count(x), str(x))) if leaves else None
            groups.setdefault(parent, []).append((d.name, tuple(d.hosts)))
    elif unit == "leaf":
        levels = q.switch_levels(t)
        hosts_of: dict[str, list[str]] = {}
        for h, leaf in primary.items():
            hosts_of.setdefault(leaf, []).append(h)
        if not hosts_of:
            raise ConfigError(f"topology {t.name}", "leaves", "no leaf switch with hosts to make blocks of")
        parent_of = _parents(t, levels)
        for leaf in sorted(hosts_of, key=_natural):
            groups.setdefault(parent_of.get(leaf), []).append((leaf, tuple(sorted(hosts_of[leaf], key=_natural))))
    else:
        raise ConfigError("--block-unit", unit, "expected nvlink or leaf")
    counts = [len(h) for g in groups.values() for _, h in g]
    if sizes:
        sizes = check_block_sizes(list(sizes))
    else:
        base = max(counts)
        per_group = max(len(g) for g in groups.values())
        sizes = [base]
        k = 2
        while k <= per_group and len(groups) > 0:
            sizes.append(base * k)
            k *= 2
        total = len(counts)
        if len(groups) > 1 and base * total not in sizes:
            # the whole machine as the top level when it is a power-of-two number of groups' blocks
            if total & (total - 1) == 0:
                sizes.append(base * total)
        sizes = check_block_sizes(sizes)
    base = sizes[0]
    short = [(n, len(h)) for g in groups.values() for n, h in g if len(h) < base]
    if short and not release.empty_blocks:
        name, n = short[0]
        raise ConfigError("--block-sizes", str(base),
                          f"block {name} has {n} nodes, fewer than the base block size {base}; Slurm "
                          f"{release.name} needs every block at least that large (25.05 and later accept it)")
    # the aggregation unit every switch group is aligned to: the largest level no group is smaller than...
    per = 1
    while per * 2 <= max(len(g) for g in groups.values()) and per * 2 * base in sizes:
        per *= 2
    blocks: list[Block] = []
    for parent in sorted(groups, key=lambda p: _natural(p or "")):
        members = groups[parent]
        blocks.extend(Block(name=n, hosts=h, parent=parent) for n, h in members)
        pad = (-len(members)) % per
        if pad and len(groups) > 1:
            # ...padded with empty blocks, so the next switch's blocks start a new aggregate
            if not release.empty_blocks:
                raise ConfigError(f"topology {t.name}", f"switch {parent}",
                                  f"has {len(members)} blocks, not a multiple of {per}: the next switch's blocks "
                                  f"would be aggregated with these; Slurm {release.name} has no empty placeholder "
                                  f"blocks (25.05 and later) - give --block-sizes {base}")
            blocks.extend(Block(name=f"{parent or 'top'}-placeholder{i + 1}", hosts=(), parent=parent)
                          for i in range(pad))
    return BlockLayout(unit=unit, blocks=tuple(blocks), sizes=tuple(sizes))


def _parents(t: Topology, levels: Mapping[str, int]) -> dict[str, str]:
    """Leaf switch -> the level-1 switch it is cabled to with the most bandwidth (its aggregation group)."""
    fv = q.fabric_view(t)
    out = {}
    for leaf, k in levels.items():
        if k != 0:
            continue
        best = None
        for w, d in fv.adj.get(f"switch:{leaf}", {}).items():
            if w.startswith("switch:") and levels.get(w[7:]) == 1:
                key = (-d["gbytes"], _natural(w[7:]))
                if best is None or key < best[0]:
                    best = (key, w[7:])
        if best:
            out[leaf] = best[1]
    return out


def render_block_conf(layout: BlockLayout, name: str, header: bool = True) -> str:
    """topology.conf for TopologyPlugin=topology/block."""
    lines = [f"# topology.conf for topology/block, generated by slurmtools from topology {name}",
             f"# blocks: {'multi-node NVLink domains' if layout.unit == 'nvlink' else 'leaf switches'}"] if header else []
    for b in layout.blocks:
        lines.append(f"BlockName={b.name}" + (f" Nodes={compress(b.hosts)}" if b.hosts else ""))
    lines.append("BlockSizes=" + ",".join(str(s) for s in layout.sizes))
    return "\n".join(lines) + "\n"


def _yaml_str(s: str) -> str:
    """A YAML scalar: plain when safe, else double-quoted (names come from fabric files)."""
    if s and all(c.isalnum() or c in "-_.[],:" for c in s) and not s[0] in "-[:," and ": " not in s:
        return s if "," not in s and "[" not in s else '"' + s + '"'
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_topology_yaml(t: Topology, release: SlurmRelease, kinds: Mapping[str, str], default: str,
                         block_sizes: Sequence[int] | None = None, block_unit: str | None = None) -> str:
    """topology.yaml: one topology per kind in use (named after the kind), `default` the cluster default.
    `kinds` maps partition -> kind (for the header only: partitions name their topology in slurm.conf)."""
    release.require("topology_yaml", "topology.yaml (one topology per partition)")
    used = sorted(set(kinds.values()) | {default}, key=KINDS.index)
    for k in used:
        if k not in KINDS:
            raise ConfigError("topology", k, f"expected one of {', '.join(KINDS)}")
    from slurmtools.topology.render_slurm import tree_switches

    out = [f"# topology.yaml generated by slurmtools from topology {t.name} for Slurm {release.name}",
           "# partitions: " + ", ".join(f"{p}={k}" for p, k in sorted(kinds.items())), "---"]
    for k in used:
        out.append(f"- topology: {k}")
        out.append(f"  cluster_default: {'true' if k == default else 'false'}")
        if k == "flat":
            out.append("  flat: true")
        elif k == "tree":
            out.append("  tree:")
            out.append("    switches:")
            for name, _lvl, hosts, children in tree_switches(t):
                out.append(f"      - switch: {_yaml_str(name)}")
                if hosts:
                    out.append(f"        nodes: {_yaml_str(compress(hosts))}")
                else:
                    out.append(f"        children: {_yaml_str(compress(children))}")
        else:
            layout = block_layout(t, release, block_sizes, block_unit)
            out.append("  block:")
            out.append("    block_sizes:")
            out.extend(f"      - {s}" for s in layout.sizes)
            out.append("    blocks:")
            for b in layout.blocks:
                out.append(f"      - block: {_yaml_str(b.name)}")
                if b.hosts:
                    out.append(f"        nodes: {_yaml_str(compress(b.hosts))}")
    return "\n".join(out) + "\n"


def topology_plugin_line(kind: str) -> str:
    """The slurm.conf TopologyPlugin for a single-topology site (topology.yaml needs none: each entry names it)."""
    return {"tree": "TopologyPlugin=topology/tree", "block": "TopologyPlugin=topology/block",
            "flat": "TopologyPlugin=topology/flat"}[kind]
