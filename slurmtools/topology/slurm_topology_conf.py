"""Provider: import an existing Slurm topology.conf (topology/tree `SwitchName=` lines, topology/block
`BlockName=`/`BlockSizes=` lines) so a site that already has one starts from what slurmctld uses today.

Also the model and the checks of every Slurm topology file: the topology.yaml reader
(`slurm_topology_yaml.py`) builds the same `ConfSwitch` / `ConfBlock` entries and hands them to `checked_conf`,
so both files are judged by one set of rules and become a graph by one `to_topology`.

Slurm stops at start-up on some mistakes here (an undefined child switch, a loop) without naming the line, and
only logs a warning for others; a scheduler then places jobs on a tree that is not the one the admin meant. So
the importer refuses them, naming the line. Pure: takes text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from slurmtools.errors import ConfigError, ParseError, whole_number
from slurmtools.hostlist import expand

_KEYS = {"switchname": "SwitchName", "switches": "Switches", "nodes": "Nodes", "linkspeed": "LinkSpeed",
         "blockname": "BlockName", "blocksizes": "BlockSizes"}
_ALLOWED = {"SwitchName": {"Switches", "Nodes", "LinkSpeed"}, "BlockName": {"Nodes"}, "BlockSizes": set()}

MAX_BLOCK_LEVEL = 15  # Slurm refuses a BlockSizes entry more than 2^15 base blocks large


@dataclass(frozen=True)
class Spelling:
    """How one file format writes the fields, so the shared checks speak the words of the file at fault."""

    switch: str
    nodes: str
    children: str
    block_sizes: str
    entry: str  # what one switch definition is called: a line, an entry


CONF_WORDS = Spelling(switch="SwitchName=", nodes="Nodes=", children="Switches=", block_sizes="BlockSizes",
                      entry="line")


@dataclass(frozen=True)
class ConfSwitch:
    name: str
    nodes: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()
    link_speed: int | None = None
    line: int = 0
    column: int | None = None  # where the name is written, for "already defined" errors


@dataclass(frozen=True)
class ConfBlock:
    name: str
    nodes: tuple[str, ...] = ()
    line: int = 0
    column: int | None = None


@dataclass(frozen=True)
class TopologyConf:
    """What a Slurm topology file declares (topology.conf, or one topology of a topology.yaml), in file order."""

    source: str
    switches: dict[str, ConfSwitch] = field(default_factory=dict)
    blocks: dict[str, ConfBlock] = field(default_factory=dict)
    block_sizes: tuple[int, ...] = ()
    words: Spelling = CONF_WORDS

    def levels(self) -> dict[str, int]:
        """Switch -> level as Slurm computes it: 0 for a switch with nodes only, else 1 + its highest child.
        Children first with a stack of its own, not by recursion: a chain of switches may be thousands long."""
        out: dict[str, int] = {}
        for root in self.switches:
            stack = [root]
            while stack:
                sw = self.switches[stack[-1]]
                waiting = [c for c in sw.switches if c not in out]
                if waiting and len(stack) <= len(self.switches):   # longer: a loop, which checked_conf refuses
                    stack += waiting
                    continue
                out[sw.name] = 1 + max(out[c] for c in sw.switches) if sw.switches else 0
                stack.pop()
        return out

    def hosts(self) -> list[str]:
        seen: dict[str, None] = {}
        for sw in self.switches.values():
            seen.update(dict.fromkeys(sw.nodes))
        for b in self.blocks.values():
            seen.update(dict.fromkeys(b.nodes))
        return list(seen)

    def leaves_of(self, host: str) -> list[str]:
        return [s.name for s in self.switches.values() if host in s.nodes]

    def warnings(self, known_hosts: list[str] | None = None) -> list[str]:
        """Things Slurm accepts but an admin wants to hear about: hosts under several switches or in several
        blocks (named at the line that lists them again), hosts that slurm.conf does not define (when
        `known_hosts` is given), switches with nothing below them."""
        out = []
        for what, groups in (("under several switches", self.switches.values()),
                             ("in several blocks", self.blocks.values())):
            holders: dict[str, list] = {}
            for g in groups:
                for h in g.nodes:
                    held = holders.setdefault(h, [])
                    if not held or held[-1] is not g:   # `Nodes=a,a` lists a once
                        held.append(g)
            for h, gs in holders.items():
                if len(gs) > 1:
                    out.append(f"{self.source}:{gs[-1].line}: host {h} is {what}: {', '.join(g.name for g in gs)}")
        if known_hosts is not None:
            known = set(known_hosts)
            for sw in self.switches.values():
                bad = [h for h in sw.nodes if h not in known]
                if bad:
                    out.append(f"{self.source}:{sw.line}: switch {sw.name} lists nodes that are not defined: "
                               f"{', '.join(bad)}")
            listed = set(self.hosts())
            missing = [h for h in known_hosts if h not in listed]
            if missing:
                from slurmtools.hostlist import compress

                out.append(f"{self.source}: nodes under no switch: {compress(missing)}")
        for sw in self.switches.values():
            if not sw.nodes and not sw.switches:
                out.append(f"{self.source}:{sw.line}: switch {sw.name} has no {self.words.nodes} and no "
                           f"{self.words.children}")
        return out


def _logical_lines(text: str):
    """(first line number, text, continued) with `#` comments cut and backslash continuations joined."""
    buf, start = "", None
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0]
        if start is None:
            start = n
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        yield start, buf, n != start
        buf, start = "", None
    if buf.strip():
        yield start, buf, True


def parse_topology_conf(text: str, source: str = "topology.conf") -> TopologyConf:
    """Read topology.conf. Raises ParseError on unknown keys and bad hostlists here, and on what `checked_conf`
    refuses."""
    switches: list[ConfSwitch] = []
    blocks: list[ConfBlock] = []
    block_sizes: tuple[int, ...] = ()
    sizes_line: int | None = None
    for lineno, line, continued in _logical_lines(text):
        if not line.strip():
            continue
        pairs: list[tuple[str, str, int | None]] = []
        pos = 0
        for tok in line.split():
            pos = line.index(tok, pos)
            col = None if continued else pos + 1
            key, eq, value = tok.partition("=")
            canon = _KEYS.get(key.lower())
            if not eq or canon is None:
                raise ParseError(source, lineno, f"expected Key=Value with a key of {', '.join(_KEYS.values())}, "
                                                 f"found {tok!r}", col)
            if not value:
                raise ParseError(source, lineno, f"{canon}= has no value", col)
            pairs.append((canon, value, col))
            pos += len(tok)
        head, name, hcol = pairs[0]
        if head not in _ALLOWED:
            raise ParseError(source, lineno, f"a line starts with SwitchName=, BlockName= or BlockSizes=, not "
                                             f"{head}=", hcol)
        values: dict[str, tuple[str, int | None]] = {}
        for key, value, col in pairs[1:]:
            if key not in _ALLOWED[head]:
                raise ParseError(source, lineno, f"{key}= does not belong on a {head}= line", col)
            if key in values:
                raise ParseError(source, lineno, f"{key}= given twice", col)
            values[key] = (value, col)

        def hostlist(key: str) -> tuple[str, ...]:
            if key not in values:
                return ()
            value, col = values[key]
            try:
                return tuple(expand(value))
            except ValueError as exc:
                raise ParseError(source, lineno, f"{key}=: {exc}", col) from None

        if head == "SwitchName":
            speed = None
            if "LinkSpeed" in values:
                value, col = values["LinkSpeed"]
                try:
                    speed = whole_number(value)
                except ValueError:
                    raise ParseError(source, lineno, f"LinkSpeed= expects a number, found {value!r}", col) from None
            switches.append(ConfSwitch(name, hostlist("Nodes"), hostlist("Switches"), speed, lineno, hcol))
        elif head == "BlockName":
            blocks.append(ConfBlock(name, hostlist("Nodes"), lineno, hcol))
        else:
            try:
                block_sizes = tuple(whole_number(x) for x in name.split(","))
            except ValueError:
                raise ParseError(source, lineno, f"BlockSizes= expects numbers like 4,16, found {name!r}",
                                 hcol) from None
            sizes_line = lineno
    return checked_conf(source, switches, blocks, block_sizes, sizes_line)


def check_block_sizes(sizes: Sequence[int], where: str = "--block-sizes") -> tuple[int, ...]:
    """Slurm's rules for BlockSizes: positive, ascending, each a power-of-two multiple of the first (the base
    block size in nodes), at most 2^15 base blocks."""
    if not sizes:
        raise ConfigError(where, "", "needs at least one size (the base block size in nodes)")
    base = sizes[0]
    prev = 0
    for s in sizes:
        if s <= 0:
            raise ConfigError(where, str(s), "block sizes must be positive node counts")
        if s <= prev:
            raise ConfigError(where, str(s), f"block sizes must grow ({prev} then {s})")
        ratio, rem = divmod(s, base)
        if rem or ratio & (ratio - 1):
            raise ConfigError(where, str(s), f"must be the base size {base} times a power of two "
                                             f"(Slurm aggregates 2, 4, 8, ... base blocks)")
        if ratio > 2 ** MAX_BLOCK_LEVEL:
            raise ConfigError(where, str(s), f"more than 2^{MAX_BLOCK_LEVEL} base blocks of {base} nodes")
        prev = s
    return tuple(sizes)


def checked_conf(source: str, switches: Iterable[ConfSwitch], blocks: Iterable[ConfBlock] = (),
                 block_sizes: tuple[int, ...] = (), sizes_line: int | None = None,
                 words: Spelling = CONF_WORDS) -> TopologyConf:
    """The entries of one topology, as a reader found them, checked by the rules every Slurm topology file
    answers to: names defined once, a switch over either nodes or switches (Slurm refuses a topology.conf line
    with both and silently drops the children in topology.yaml), every child switch defined, no loop, and
    BlockSizes by Slurm's rules. Raises ParseError naming the line."""
    by_name: dict[str, ConfSwitch] = {}
    for sw in switches:
        if sw.name in by_name:
            raise ParseError(source, sw.line, f"switch {sw.name} is already defined at line {by_name[sw.name].line}",
                             sw.column)
        if sw.nodes and sw.switches:
            raise ParseError(source, sw.line, f"switch {sw.name} has both {words.nodes} and {words.children}; "
                                              "a switch holds either nodes or child switches")
        by_name[sw.name] = sw
    block_by_name: dict[str, ConfBlock] = {}
    for b in blocks:
        if b.name in block_by_name:
            raise ParseError(source, b.line, f"block {b.name} is already defined at line {block_by_name[b.name].line}",
                             b.column)
        block_by_name[b.name] = b
    for sw in by_name.values():
        for child in sw.switches:
            if child not in by_name:
                raise ParseError(source, sw.line, f"switch {sw.name} lists child switch {child}, which no "
                                                  f"{words.switch} {words.entry} defines")
    _refuse_loops(by_name, source)
    if block_sizes:
        try:
            check_block_sizes(block_sizes)
        except ConfigError as exc:
            raise ParseError(source, sizes_line, f"{words.block_sizes} {exc.key}: {exc.detail}") from None
    return TopologyConf(source, by_name, block_by_name, tuple(block_sizes), words)


def _refuse_loops(switches: dict[str, ConfSwitch], source: str) -> None:
    state: dict[str, int] = {}   # 1 on the path, 2 done
    for root in switches:
        if state.get(root):
            continue
        stack = [(root, iter(switches[root].switches))]
        path = [root]
        state[root] = 1
        while stack:
            name, it = stack[-1]
            child = next(it, None)
            if child is None:
                state[name] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                loop = path[path.index(child):] + [child]
                raise ParseError(source, switches[name].line, f"switch loop: {' -> '.join(loop)}")
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append((child, iter(switches[child].switches)))


def add_to(topology, conf: TopologyConf, link: str = "4xNDR") -> None:
    """Copy the declared tree into a `Topology`: switches with their levels, hosts cabled to their leaves; and
    the hosts of the blocks, without the blocks themselves.

    topology.conf names no link speeds (LinkSpeed is a relative weight), so every cable gets `link`. A block
    does not say what joins its hosts (an NVLink domain, a leaf switch, a rack), so the graph claims neither:
    its hosts are there, `conf.blocks` keeps the blocks."""
    from slurmtools.topology.graph import ib_link

    levels = conf.levels()
    for sw in conf.switches.values():
        topology.add_switch(sw.name, level=levels[sw.name])
    for sw in conf.switches.values():
        for h in sw.nodes:
            if f"host:{h}" not in topology:
                topology.add_host(h)
            topology.link(f"host:{h}", f"switch:{sw.name}", ib_link(link))
        for child in sw.switches:
            topology.link(f"switch:{child}", f"switch:{sw.name}", ib_link(link))
    for b in conf.blocks.values():
        for h in b.nodes:
            if f"host:{h}" not in topology:
                topology.add_host(h)


def to_topology(conf: TopologyConf, name: str = "cluster", link: str = "4xNDR"):
    from slurmtools.topology.graph import Topology

    t = Topology(name)
    add_to(t, conf, link)
    return t
