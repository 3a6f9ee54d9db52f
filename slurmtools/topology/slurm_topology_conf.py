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

import re
import unicodedata
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


#: the blanks of Slurm's parsers: C's isspace (`[[:space:]]`), ASCII only. U+00A0, U+2028, \x85 and the like are
#: part of a value to Slurm, as are \v and \f, which Python's splitlines() took for line ends
BLANKS = " \t\n\r\f\v"

#: one `Key=Value` as Slurm's parser finds it (src/common/parse_config.c, `keyvalue_pattern`): a key of ASCII
#: letters, digits, `_` and `.`; blanks allowed around `=` and an operator before it; a value in double quotes (blanks
#: allowed, quotes dropped) or up to the next blank
_PAIR = re.compile(r'[ \t\r\n\v\f]*([A-Za-z0-9_.]+)[ \t\r\n\v\f]*([-*+/]?)=[ \t\r\n\v\f]*(?:"([^"]*)"|(\S+))(?=\s|$)',
                   re.ASCII)
_NO_VALUE = re.compile(r"\s*([A-Za-z0-9_.]+)\s*[-*+/]?=\s*$", re.ASCII)
_INCLUDE = re.compile(r"include\s+(\S*)", re.IGNORECASE | re.ASCII)
MAX_SWITCH_NAME = 64  # HOST_NAME_MAX: Slurm's _parse_switches refuses a longer SwitchName
#: what separates hosts in a hostlist (src/common/hostlist.c `hostlist_create`: "\t, \n")
_HOST_SEPARATORS = re.compile(r"[\t \n]+")
#: a character Python counts as a blank and C's isspace does not (U+00A0, U+2003, U+2028, \x85, \x1c...)
_FOREIGN_BLANK = re.compile(r"[^\S \t\n\r\f\v]")


def foreign_blank(text: str) -> str | None:
    """Why `text` does not read as it looks, when it holds a blank that is none to Slurm (a pasted no-break space
    between two fields or hosts is part of one word to Slurm), else None."""
    m = _FOREIGN_BLANK.search(text)
    if m is None:
        return None
    ch = m.group()
    return (f"U+{ord(ch):04X} ({unicodedata.name(ch, 'a control character')}) is no blank to Slurm, which reads it "
            "as part of the word beside it; write a space")


def slurm_hostlist(value: str) -> list[str]:
    """A hostlist value expanded as Slurm's `hostlist_create` reads it: names apart at commas, spaces, tabs and
    newlines, and nothing else (a U+00A0 is part of a name). Raises ValueError on a malformed one."""
    return expand(",".join(_HOST_SEPARATORS.split(value.strip(" \t\n"))))


def _strip_comment(raw: str) -> str:
    """The line up to its first `#` that no odd run of backslashes escapes (parse_config.c `_strip_comments`)."""
    run = 0
    for i, ch in enumerate(raw):
        if ch == "#" and run % 2 == 0:
            return raw[:i]
        run = run + 1 if ch == "\\" else 0
    return raw


def _logical_lines(text: str, source: str):
    """(first line number, text, exact) as Slurm's `_get_next_line` makes them: lines end at \\n only (fgets), comments
    cut, a line ending in an odd run of backslashes joined to the next with nothing put between (so `Nodes=a[1-4],\\`
    + `b[1-4]` is one value), then escapes dropped (`\\#` is `#`). `exact`: columns in the text are columns of the
    file."""
    buf, start = "", None
    rows = text.split("\n")
    if rows[-1] == "":
        rows.pop()
    for n, raw in enumerate(rows, start=1):
        line = _strip_comment(raw)
        why = foreign_blank(line)
        if why:   # in a comment it is harmless: Slurm never reads it
            raise ParseError(source, n, why, _FOREIGN_BLANK.search(line).start() + 1)
        if start is None:
            start = n
        body = line.rstrip(BLANKS)
        run = len(body) - len(body.rstrip("\\"))
        if run % 2:
            buf += body[:-1]
            continue
        buf += line
        yield start, re.sub(r"\\(.?)", r"\1", buf, flags=re.S), n == start and "\\" not in buf
        buf, start = "", None
    if buf.strip(BLANKS):
        yield start, re.sub(r"\\(.?)", r"\1", buf, flags=re.S), False


def _pairs(line: str, source: str, lineno: int, exact: bool) -> list[tuple[str, str, int | None]]:
    """(key as the file spells it in canonical case, value, column) of every Key=Value of one logical line, read as
    Slurm reads them; what Slurm cannot read, or reads otherwise than it looks, is refused naming the field."""
    pairs: list[tuple[str, str, int | None]] = []
    pos = 0
    while True:
        m = _PAIR.match(line, pos)
        if m is None:
            break
        key, op, quoted, plain = m.groups()
        col = m.start(1) + 1 if exact else None
        canon = _KEYS.get(key.lower())
        if canon is None:
            raise ParseError(source, lineno, f"expected Key=Value with a key of {', '.join(_KEYS.values())}, found "
                                             f"{key + op + '=' + (plain if quoted is None else quoted)!r}", col)
        if op:
            raise ParseError(source, lineno, f"{canon}{op}=: Slurm ignores the {op!r} on a topology.conf line and "
                                             f"sets the value as {canon}= would; write {canon}=", col)
        if plain is not None and m.start(4) > m.end(2) + 1 and "=" in plain \
                and plain.split("=", 1)[0].lower() in _KEYS:
            # `Nodes= LinkSpeed=1`: Slurm's pattern skips the blank and reads `LinkSpeed=1` as the hostlist
            raise ParseError(source, lineno, f"{canon}= has no value (Slurm would read the next field, {plain!r}, "
                                             "as its value)", col)
        pairs.append((canon, plain if quoted is None else quoted, col))
        pos = m.end()
    rest = line[pos:]
    if rest.strip(BLANKS):
        col = pos + len(rest) - len(rest.lstrip(BLANKS)) + 1 if exact else None
        empty = _NO_VALUE.match(rest)
        if empty and empty.group(1).lower() in _KEYS:
            raise ParseError(source, lineno, f"{_KEYS[empty.group(1).lower()]}= has no value", col)
        word = re.split(r"[ \t\r\n\v\f]", rest.strip(BLANKS), maxsplit=1)[0]
        raise ParseError(source, lineno, f"expected Key=Value with a key of {', '.join(_KEYS.values())}, found "
                                         f"{word!r}", col)
    return pairs


def _uint32(value: str) -> int:
    """A number as Slurm's `s_p_handle_uint32` reads it (parse_value.c): strtoul base 0 (`0x10` is 16, `010` is 8),
    a `k` suffix times 1024, UNLIMITED or INFINITE as 0xffffffff; no sign, at most 0xffffffff. Else ValueError."""
    if value.lower() in ("unlimited", "infinite"):
        return 0xFFFFFFFF
    digits, times = (value[:-1], 1024) if value[-1:] in ("k", "K") else (value, 1)
    if re.fullmatch(r"0[xX][0-9a-fA-F]{1,100}", digits):
        num = int(digits, 16)
    elif re.fullmatch(r"0[0-7]{0,100}", digits):
        num = int(digits, 8)
    elif re.fullmatch(r"[1-9][0-9]{0,100}", digits):
        num = int(digits)
    else:
        raise ValueError(value)
    if num * times > 0xFFFFFFFF:
        raise ValueError(value)
    return num * times


def parse_topology_conf(text: str, source: str = "topology.conf") -> TopologyConf:
    """Read topology.conf as Slurm's parser does (parse_config.c; tree/switch_record.c, block/block_record.c).
    Raises ParseError on what Slurm refuses (unknown keys, bad hostlists, SwitchName= and BlockName= lines in one
    file, Nodes= beside Switches=, no entry at all), on `Include` (one file is read), on what Slurm would read
    otherwise than it looks (a second BlockSizes= line, of which Slurm keeps the last; a blank that is none to C's
    isspace, such as U+00A0) and on what `checked_conf` refuses."""
    switches: list[ConfSwitch] = []
    blocks: list[ConfBlock] = []
    block_sizes: tuple[int, ...] = ()
    sizes_line: int | None = None
    first: dict[str, int] = {}   # SwitchName / BlockName / BlockSizes -> the line it first appears on
    for lineno, line, exact in _logical_lines(text, source):
        if not line.strip(BLANKS):
            continue
        inc = _INCLUDE.match(line)
        if inc:
            # Slurm reads the named file here, relative to slurm.conf's folder (parse_config.c
            # `_parse_include_directive`); a reader of one text cannot, and must not pretend the lines are none
            raise ParseError(source, lineno, f"Include {inc.group(1)}: slurmtools reads one file and does not follow "
                                             "Include; import a file with the included lines written in", 1)
        pairs = _pairs(line, source, lineno, exact)
        head, name, hcol = pairs[0]
        if head not in _ALLOWED:
            raise ParseError(source, lineno, f"a line starts with SwitchName=, BlockName= or BlockSizes=, not "
                                             f"{head}=", hcol)
        first.setdefault(head, lineno)
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
            try:   # a quoted value may hold blanks, which Slurm's hostlist reads as commas (hostlist.c)
                return tuple(slurm_hostlist(value))
            except ValueError as exc:
                raise ParseError(source, lineno, f"{key}=: {exc}", col) from None

        if not name.strip(BLANKS) and head != "BlockSizes":
            raise ParseError(source, lineno, f"{head}= has no value", hcol)
        if head == "SwitchName":
            if len(name) > MAX_SWITCH_NAME:
                raise ParseError(source, lineno, f"SwitchName= {name[:24]}... is {len(name)} characters long; Slurm "
                                                 f"refuses a switch name longer than {MAX_SWITCH_NAME}", hcol)
            if "Nodes" in values and "Switches" in values:
                # _parse_switches refuses the line when both are given, an empty one (`Nodes=""`) included
                raise ParseError(source, lineno, f"switch {name} has both Nodes= and Switches=; a switch holds either "
                                                 "nodes or child switches (Slurm refuses the line even when one is "
                                                 "empty)", values["Switches"][1])
            speed = None
            if "LinkSpeed" in values:
                value, col = values["LinkSpeed"]
                try:
                    speed = _uint32(value)
                except ValueError:
                    raise ParseError(source, lineno, f"LinkSpeed= expects a number from 0 to 4294967295, found "
                                                     f"{value[:40]!r}", col) from None
            switches.append(ConfSwitch(name, hostlist("Nodes"), hostlist("Switches"), speed, lineno, hcol))
        elif head == "BlockName":
            blocks.append(ConfBlock(name, hostlist("Nodes"), lineno, hcol))
        else:
            if sizes_line is not None:
                # s_p_parse_file keeps the last and only logs 'specified more than once': the first would vanish
                raise ParseError(source, lineno, f"BlockSizes= given again (first at line {sizes_line}): Slurm keeps "
                                                 "only the last one; write one BlockSizes= line", hcol)
            # Slurm splits on commas and skips empty items (strtok_r), so `4,,8` and a quoted "4, 8" are read
            items = [x.strip(BLANKS) for x in name.split(",") if x.strip(BLANKS)]
            try:
                if not items:
                    raise ValueError(name)
                block_sizes = tuple(whole_number(x) for x in items)
            except ValueError:
                raise ParseError(source, lineno, f"BlockSizes= expects numbers like 4,16, found {name[:40]!r}",
                                 hcol) from None
            sizes_line = lineno
    _one_plugin(source, first, blocks, block_sizes)
    return checked_conf(source, switches, blocks, block_sizes, sizes_line)


def _one_plugin(source: str, first: dict[str, int], blocks: list[ConfBlock], block_sizes: tuple[int, ...]) -> None:
    """One topology.conf feeds one plugin: topology/tree reads only SwitchName= lines and topology/block only
    BlockName= and BlockSizes=, each refusing the other's lines as unknown keys; each stops when it finds no entry
    ('No switches configured', 'No blocks configured'), and block when no block has a node and no BlockSizes says
    the base size. Refused here, naming the line, rather than imported as a topology Slurm never builds."""
    if "SwitchName" in first and ("BlockName" in first or "BlockSizes" in first):
        key = min(("BlockName", "BlockSizes"), key=lambda k: first.get(k, 1 << 62))
        a, b = sorted([("SwitchName", first["SwitchName"]), (key, first[key])], key=lambda kv: kv[1])
        raise ParseError(source, b[1], f"{b[0]}= in a file with {a[0]}= lines (line {a[1]}): Slurm's topology/tree "
                                       "plugin reads only SwitchName= lines and topology/block only BlockName= and "
                                       "BlockSizes=, so either refuses this file")
    if "SwitchName" not in first and "BlockName" not in first:
        raise ParseError(source, first.get("BlockSizes"),
                         "no SwitchName= or BlockName= line: Slurm stops with 'No switches configured' "
                         "(topology/tree) or 'No blocks configured' (topology/block)")
    if blocks and not block_sizes and not any(b.nodes for b in blocks):
        raise ParseError(source, first["BlockName"], "no block lists a node and no BlockSizes= gives the base block "
                                                     "size: Slurm stops ('Blocks do not contain any nodes and the "
                                                     "BlockSizes are not set')")


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
        block_sizes = _as_slurm_levels(block_sizes, source, sizes_line, words)
    return TopologyConf(source, by_name, block_by_name, tuple(block_sizes), words)


def _as_slurm_levels(sizes: Sequence[int], source: str, line: int | None, words: Spelling) -> tuple[int, ...]:
    """BlockSizes as Slurm keeps them: the first is the base size and each a level bit (block_record.c
    `_read_topo_file`, `_list_to_bitmap`), so the order after the first and a repeat change nothing; the sizes
    ascending, once each. A size smaller than the base is refused (Slurm stops on it in topology.conf, drops it in
    topology.yaml)."""
    base = sizes[0]
    try:
        for prev, s in zip(sizes, sizes[1:]):
            if 0 < s < base:
                raise ConfigError("", str(s), f"block sizes must grow ({prev} then {s}): the first, {base}, is the "
                                              "base block size, and Slurm reads no size smaller than it")
        return check_block_sizes(sorted(set(sizes)))
    except ConfigError as exc:
        raise ParseError(source, line, f"{words.block_sizes} {exc.key}: {exc.detail}") from None


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


def add_to(topology, conf: TopologyConf) -> None:
    """Copy the declared tree into a `Topology`: switches with their levels and LinkSpeed=, hosts cabled to their
    leaves; and the blocks (`Block`, their hosts its members, in the file's order) with BlockSizes=.

    topology.conf names no link rates nor how many cables join two switches (LinkSpeed= is a relative weight, kept
    on the switch), so each link is one stand-in cable at 4xNDR and the topology is marked as not knowing its
    `link_rates`: readers show that as unknown, never the stand-in. A block does not say what joins its
    hosts (an NVLink domain, a leaf switch, a rack), so the graph claims none of them: a block is a group of hosts.
    """
    from slurmtools.topology.graph import Block, Member, ib_link

    cable = ib_link("4xNDR")
    if conf.switches:
        topology.mark_fabric_unknown("link_rates")
    levels = conf.levels()
    for sw in conf.switches.values():
        topology.add_switch(sw.name, level=levels[sw.name], link_speed=sw.link_speed)
    for sw in conf.switches.values():
        for h in sw.nodes:
            if f"host:{h}" not in topology:
                topology.add_host(h)
            topology.link(f"host:{h}", f"switch:{sw.name}", cable)
        for child in sw.switches:
            topology.link(f"switch:{child}", f"switch:{sw.name}", cable)
    for position, b in enumerate(conf.blocks.values()):
        vid = topology.add(Block(b.name, position))
        for h in b.nodes:
            if f"host:{h}" not in topology:
                topology.add_host(h)
            topology.link(f"host:{h}", vid, Member())
    if conf.blocks:
        topology.block_sizes = tuple(conf.block_sizes)


def to_topology(conf: TopologyConf, name: str = "cluster"):
    from slurmtools.topology.graph import Topology

    t = Topology(name)
    add_to(t, conf)
    return t
