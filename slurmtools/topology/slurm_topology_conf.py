"""Provider: import an existing Slurm topology.conf (topology/tree `SwitchName=` lines, topology/block
`BlockName=`/`BlockSizes=` lines) so a site that already has one starts from what slurmctld uses today.

Slurm itself only logs a warning for many mistakes here (an undefined child switch, a loop); a scheduler then
places jobs on a tree that is not the one the admin meant. So the importer refuses them, naming the line.
Pure: takes text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slurmtools.errors import ParseError
from slurmtools.hostlist import expand

_KEYS = {"switchname": "SwitchName", "switches": "Switches", "nodes": "Nodes", "linkspeed": "LinkSpeed",
         "blockname": "BlockName", "blocksizes": "BlockSizes"}
_ALLOWED = {"SwitchName": {"Switches", "Nodes", "LinkSpeed"}, "BlockName": {"Nodes"}, "BlockSizes": set()}


@dataclass(frozen=True)
class ConfSwitch:
    name: str
    nodes: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()
    link_speed: int | None = None
    line: int = 0


@dataclass(frozen=True)
class ConfBlock:
    name: str
    nodes: tuple[str, ...] = ()
    line: int = 0


@dataclass(frozen=True)
class TopologyConf:
    """What a topology.conf declares, in file order."""

    source: str
    switches: dict[str, ConfSwitch] = field(default_factory=dict)
    blocks: dict[str, ConfBlock] = field(default_factory=dict)
    block_sizes: tuple[int, ...] = ()

    def levels(self) -> dict[str, int]:
        """Switch -> level as Slurm computes it: 0 for a switch with nodes only, else 1 + its highest child."""
        out: dict[str, int] = {}

        def level(name: str) -> int:
            if name not in out:
                sw = self.switches[name]
                out[name] = 1 + max(level(c) for c in sw.switches) if sw.switches else 0
            return out[name]

        for name in self.switches:
            level(name)
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
        """Things Slurm accepts but an admin wants to hear about: hosts under several switches, hosts that
        slurm.conf does not define (when `known_hosts` is given), switches with nothing below them."""
        out = []
        for h in self.hosts():
            leaves = self.leaves_of(h)
            if len(leaves) > 1:
                out.append(f"{self.source}: host {h} is under several switches: {', '.join(leaves)}")
        if known_hosts is not None:
            known = set(known_hosts)
            for sw in self.switches.values():
                bad = [h for h in sw.nodes if h not in known]
                if bad:
                    out.append(f"{self.source}:{sw.line}: switch {sw.name} lists nodes that are not defined: "
                               f"{', '.join(bad)}")
            missing = [h for h in known_hosts if h not in set(self.hosts())]
            if missing:
                from slurmtools.hostlist import compress

                out.append(f"{self.source}: nodes under no switch: {compress(missing)}")
        for sw in self.switches.values():
            if not sw.nodes and not sw.switches:
                out.append(f"{self.source}:{sw.line}: switch {sw.name} has no Nodes= and no Switches=")
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
    """Read topology.conf. Raises ParseError on unknown keys, bad hostlists, duplicate or undefined switches
    and switch loops."""
    switches: dict[str, ConfSwitch] = {}
    blocks: dict[str, ConfBlock] = {}
    block_sizes: tuple[int, ...] = ()
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
            if name in switches:
                raise ParseError(source, lineno, f"switch {name} is already defined at line {switches[name].line}",
                                 hcol)
            speed = None
            if "LinkSpeed" in values:
                value, col = values["LinkSpeed"]
                if not value.isdigit():
                    raise ParseError(source, lineno, f"LinkSpeed= expects a number, found {value!r}", col)
                speed = int(value)
            switches[name] = ConfSwitch(name, hostlist("Nodes"), hostlist("Switches"), speed, lineno)
        elif head == "BlockName":
            if name in blocks:
                raise ParseError(source, lineno, f"block {name} is already defined at line {blocks[name].line}", hcol)
            blocks[name] = ConfBlock(name, hostlist("Nodes"), lineno)
        else:
            try:
                block_sizes = tuple(int(x) for x in name.split(","))
            except ValueError:
                raise ParseError(source, lineno, f"BlockSizes= expects numbers like 4,16, found {name!r}",
                                 hcol) from None
    for sw in switches.values():
        for child in sw.switches:
            if child not in switches:
                raise ParseError(source, sw.line, f"switch {sw.name} lists child switch {child}, which no "
                                                  "SwitchName= line defines")
    _refuse_loops(switches, source)
    return TopologyConf(source, switches, blocks, block_sizes)


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
    """Copy the declared tree into a `Topology`: switches with their levels, hosts cabled to their leaves.

    topology.conf names no link speeds (LinkSpeed is a relative weight), so every cable gets `link`."""
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


def to_topology(conf: TopologyConf, name: str = "cluster", link: str = "4xNDR"):
    from slurmtools.topology.graph import Topology

    t = Topology(name)
    add_to(t, conf, link)
    return t
