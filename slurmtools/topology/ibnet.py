"""Provider: `ibnetdiscover` dumps -> switches, channel adapters (HCAs) and the cables between them.

Two steps, kept apart so each can be tested on its own:
- `parse_ibnetdiscover(text)` reads the dump faithfully (every node, every cable once, with width and speed);
- `compute_fabric(fabric, ...)` decides what the scheduler sees: which HCAs belong to which Slurm host
  (a regex over the node description, e.g. `a08-p1-dgx-04-c07 mlx5_0`), which HCAs are storage or
  management (excluded by name), which switches are left out, and which switches are leaves or spines.

The parser is linear in the input and uses string splitting, not backtracking regexes, because fabrics of
16k hosts x 8 HCAs (about 1.5 million lines) must read in seconds. Pure: takes text.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from slurmtools.errors import ParseError, whole_number
from slurmtools.gc_pause import gc_paused
from slurmtools.topology.links import IB_LANE_GBYTES, IB_WIDTH_TEXTS, IB_WIDTHS, IbLink, ib_bundle, main_rate

DEFAULT_HOST_PATTERN = r"^(?P<host>\S+)\s+(?P<hca>\S+)$"
AGGREGATION_NODE = "Aggregation Node"  # SHARP engine inside a switch, listed as a CA
_KIND = {"Switch": "switch", "Ca": "ca", "Rt": "router"}
_LETTER = {"Switch": "S", "Ca": "H", "Rt": "R"}   # the letter of the node id each header word goes with
_REMOTE_KINDS = ("S", "H", "R")
_SKIP = ("vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "rtguid=")
# The id lines above a node's header (out_ids, out_switch, out_ca in infiniband-diags/ibnetdiscover.c), read over
# as the graph needs none of them, but only in their own form, so that a line fused onto one (a lost line break)
# is not read over with it: `name=0x<hex>`; `switchguid=` with the port GUID in parentheses (or without, as the
# first ibnetdiscover printed it); `-g` appends a comment (`\t\t# Chassis 1 (name)`, `\t# ISR9288 Spine 1 Chip 1`),
# and OFED 1.x's `-g` printed the chassis slot straight after the GUIDs (`(8f104004100a1)ISR9288 Spine 1 Chip 1`).
_ID_LINE = re.compile(r"(?:(?:vendid|devid|sysimgguid|caguid|rtguid)=0x[0-9a-fA-F]+"
                      r"|switchguid=0x[0-9a-fA-F]+(?:\([0-9a-fA-F]+\)(?:[A-Za-z0-9 ]*Chip [0-9]+)?)?)"
                      r"[ \t]*(?:#.*)?\Z")
# A node's header: `Switch\t65 "S-<guid>"\t\t# "<description>" enhanced port 0 lid 73 lmc 0`, `Ca\t1 "H-<guid>"\t\t#
# "<description>"` (`Rt` and "R-" alike); `-g` appends ` (scp)` to a Xsigo adapter's. ibnetdiscover prints the
# description as it is (clean_nodedesc only blanks unprintable bytes; a --node-name-map name as written), quotes
# and `#` included, so it runs to the last quote that the header's own ending follows. Groups: word, ports, id
# letter, GUID, description, a switch's `port 0` ending.
_HEADER_LINE = re.compile(r'(Switch|Ca|Rt)[ \t]+([0-9]+)[ \t]+"([SHR?])-([0-9a-fA-F]+)"[ \t]*#[ \t]*"(.*)"'
                          r'(?:[ \t]+((?:enhanced|base) port 0 lid [0-9]+ lmc [0-9]+)|[ \t]+\(scp\))?[ \t]*\Z')
_HEAD_FORM = {"Switch": 'Switch <ports> "S-<guid>" # "<description>" enhanced|base port 0 lid <lid> lmc <lmc>',
              "Ca": 'Ca <ports> "H-<guid>" # "<description>"', "Rt": 'Rt <ports> "R-<guid>" # "<description>"'}


class IbNode(NamedTuple):
    """A switch, CA or router as ibnetdiscover names it: node GUID, port count, node description.
    (A NamedTuple, like IbCable: a 16k-host dump holds a million of them and tuples build fastest.)"""

    kind: str          # "switch" | "ca" | "router"
    guid: str          # node GUID, lower-case hex without 0x
    ports: int
    description: str
    line: int          # where its header is, for messages


class IbCable(NamedTuple):
    """One cable, listed once whatever the number of sides the dump shows it from."""

    a: str             # node GUID
    a_port: int
    b: str
    b_port: int
    width: int         # lanes: 4 in "4xNDR"
    speed: str         # "NDR"
    line: int

    @property
    def spec(self) -> str:
        return f"{self.width}x{self.speed}"

    @property
    def gbytes(self) -> float:
        return self.width * IB_LANE_GBYTES.get(self.speed, 0.0)


@dataclass(frozen=True)
class IbFabric:
    """Everything an ibnetdiscover dump says: nodes by GUID and cables, each once."""

    source: str
    nodes: dict[str, IbNode]
    cables: tuple[IbCable, ...]
    port_guids: dict[str, tuple[str, ...]] = field(default_factory=dict)   # CA node GUID -> its port GUIDs

    def of_kind(self, kind: str) -> list[IbNode]:
        return [n for n in self.nodes.values() if n.kind == kind]

    def peers(self) -> dict[str, list[tuple[str, IbCable]]]:
        out: dict[str, list[tuple[str, IbCable]]] = {g: [] for g in self.nodes}
        for c in self.cables:
            out[c.a].append((c.b, c)), out[c.b].append((c.a, c))
        return out


# --------------------------------------------------------------------------------------------- parsing

# A rate an old infiniband-diags could not name (dump_linkwidth_compat, dump_linkspeed(ext)_compat): `??` for the
# width, printed with no `x` after it (`??NDR`, `?????`), and `???` for the speed (`4x???`); `??xHDR` read alike.
_UNNAMED_RATE = re.compile(r"(\?\?x?|[0-9]+x)(\?\?\?|[A-Z][A-Z0-9]*)\Z")


def _rate(tail: str, source: str, n: int, col: int) -> tuple[int, str]:
    """'4xNDR' -> (4, 'NDR'): the link rate of a port line, found at column `col`."""
    w, x, sp = tail.partition("x")
    try:
        width = whole_number(w)
    except ValueError:
        width = None
    unnamed = _UNNAMED_RATE.match(tail) if "?" in tail else None
    if unnamed is not None:
        # infiniband-diags prints ?? for a width and ??? for a speed it has no name for: a tool older than the fabric
        what = " and ".join(part for part, g in (("width", 1), ("speed", 2)) if "?" in unnamed[g])
        raise ParseError(source, n, f"link rate {tail!r}: this ibnetdiscover does not know the link's {what} "
                                    "(infiniband-diags older than the fabric prints ?? and ???); rerun it with a "
                                    "newer rdma-core", col)
    if not x or width is None or sp not in IB_LANE_GBYTES:
        raise ParseError(source, n, f"expected the link rate (like 4xNDR) at the end of the line, "
                                    f"found {tail or 'nothing'!r}", col)
    if width not in IB_WIDTHS:
        raise ParseError(source, n, f"link rate {tail!r}: {width} lanes is no InfiniBand link width (they are "
                                    f"{', '.join(map(str, IB_WIDTHS))})", col)
    return width, sp


# What ibnetdiscover may print after a port line's link rate: `-f` adds the raw speed, width and VL capability
# (` s=4 w=2 v=4`; infiniband-diags before rdma-core also ` e=4`, the extended speed), and a port cabled to a Xsigo
# director gets ` slot 3` or ` (scp)` (out_switch_port in infiniband-diags/ibnetdiscover.c). None of it changes the
# cable, so the rate is the word before it.
_AFTER_RATE = re.compile(r"(?:[ \t]+(?:[swve]=[0-9]+|slot [0-9]+|\(scp\)))+[ \t]*\Z")


def _rate_word(line: str, start: int) -> tuple[str, int]:
    """The link rate word of a port line (searched from `start`, after the far port) and its 0-based column:
    the last word, or the last before what `-f` and Xsigo ports append (`_AFTER_RATE`); empty with no comment."""
    body = line.rstrip()
    if line.find("#", start) < 0:
        return "", len(body)
    at = body.rfind(" ", start) + 1
    last = body[at:]
    if "=" in last or last == "(scp)" or last.isdigit():
        m = _AFTER_RATE.search(body, start)
        if m is not None:
            end = m.start()
            at = max(body.rfind(" ", start, end), body.rfind("\t", start, end)) + 1
            return body[at:end], at
    return last, at


# Lines of a full dump that say nothing about nodes or cables, read over: `-g` (grouping) heads its chassis with
# `Chassis 1 (guid 0x...)`, a Xsigo chassis with `Hostname: ...`, and the rest with `Non-Chassis Nodes`; `-s`
# prints each node as it is found (`DR path slid 0; dlid 0; 0,1 -> new Switch {<guid>} portnum 0 lid 3-3 "..."`,
# a lid range) on the same standard output as the dump, each line ending in the node's quoted description (so
# that what is fused onto one, such as a warning from standard error, is not read over with it).
_NOT_NODES = re.compile(r'Chassis [0-9]+(?: \(guid 0x[0-9a-fA-F]+\))?[ \t]*\Z|Non-Chassis Nodes[ \t]*\Z|Hostname: '
                        r'|.* -> [^{]*\{[0-9a-fA-F]+\} portnum [0-9]+ (?:base )?lid [0-9]+-[0-9]+ ?".*"[ \t]*\Z')

_RERUN = "import what plain `ibnetdiscover` prints"
_WARNED = ("the scan it comes from may have missed nodes that did not answer; rerun ibnetdiscover and keep only its "
           "standard output (2>/dev/null) once it prints no warnings")
# Other tools' outputs, and ibnetdiscover's other forms, that are fed to the dump reader: how to know each by a
# line, and what to say. None of them holds the node entries with their cables that a topology is built from.
_OTHER_OUTPUTS = (
    (re.compile(r"(?:CA|SW|RT)[ \t]+[0-9]+[ \t]+[0-9]+[ \t]+0x[0-9a-fA-F]+[ \t]+\S+[ \t]+\S+"),
     f"this is an `ibnetdiscover -p` ports report, not a topology dump: it lists ports one per line, not the node "
     f"entries with their cables that a topology is read from; {_RERUN}"),
    (re.compile(r"(?:Switch|Ca|Router)[ \t]*:[ \t]*0x[0-9a-fA-F]+[ \t]+ports[ \t]+[0-9]+"),
     f"this is a node list (`ibnetdiscover -l`, -S, -H or -R, ibswitches, ibhosts, ibrouters), not a topology dump: "
     f"it names nodes but none of the cables between them; {_RERUN}"),
    (re.compile(r"(?:CA|Switch):[ \t]|.*==\(.*\)==>"),
     f"this is `iblinkinfo` output, not an ibnetdiscover topology dump; {_RERUN}"),
    (re.compile(r"[<>] "),
     f"this is `ibnetdiscover --diff` output (what changed between two scans), not a topology dump; {_RERUN}"),
    (re.compile(r"\{ ?(?:CA|SW|Rt) +Ports:"),
     f"this is a subnet .lst file (OpenSM or ibdiagnet), not an ibnetdiscover topology dump; {_RERUN}"),
    (re.compile(r"CA '"),
     f"this is `ibstat` output (one host's adapters), not a fabric topology dump; {_RERUN}"),
    (re.compile(r"ibwarn: |ibpanic: |ibnetdiscover: |(?:\S*/)?[a-z_]+\.c:[0-9]+; "),     # libibnetdisc: __FILE__
     "this is a warning ibnetdiscover printed on standard error, saved into the dump: " + _WARNED),
)


# a file name is looked for only where a run of its letters begins: searched from every letter of a long run, the
# pattern read the rest of the run again each time (a 200,000-letter line took 45 s)
_STDERR_INSIDE = re.compile(r"ibwarn: \[|ibpanic: \[|(?<![a-z_])[a-z_]+\.c:[0-9]+; ")


def _other_output(line: str) -> str | None:
    """What `line` shows the file to be when it is not an ibnetdiscover topology dump (a list form, another tool's
    output, stderr mixed in), as the one-line message to give; None when the line is not one of those."""
    for rx, what in _OTHER_OUTPUTS:
        if rx.match(line):
            return what
    if _STDERR_INSIDE.search(line):
        # with 2>&1 a warning lands where standard output's buffer was flushed: inside a line of the dump
        return "a warning ibnetdiscover printed on standard error is fused into this line: " + _WARNED
    return None


@gc_paused()
def parse_ibnetdiscover(text: str, source: str = "<ibnetdiscover>") -> IbFabric:
    """Read an ibnetdiscover dump. Every malformed line raises ParseError with its line number.

    Dumps as ibnetdiscover writes them are read a node entry at a time by `_read_entries`; anything it does not
    recognise (or finds inconsistent) is read again line by line by `_read_lines`, which accepts the same
    dumps and more, gives the same answer, and names the line at fault."""
    fabric = _read_entries(text, source)
    return fabric if fabric is not None else _read_lines(text, source)


# A node entry as ibnetdiscover writes it: its id lines in their order and plain form (any other, such as `-g`'s, is
# left to the line reader, which checks them against `_ID_LINE`), then its header (as `_HEADER_LINE`: an id letter
# and an ending that fit its word, else the line reader reads it), and its first port line when that ends the entry
# (a host adapter's one port). GUIDs in lower-case hex and port numbers without leading zeros (nine digits at most),
# as ibnetdiscover prints them, so that an end of a cable is one node and one port number whatever line names it.
# Matched in place in the whole dump: an entry ends at a blank line or at the end of the dump. A port line may end
# in what `-f` adds after the rate (` s=4 w=2 v=4`, see `_AFTER_RATE`).
_PORT = (r'\[(0|[1-9][0-9]{0,8})\](?:\(([0-9a-f]+)\))?[ \t]+"[SHR]-([0-9a-f]+)"\[(0|[1-9][0-9]{0,8})\]'
         r'[^\n#]*#[^\n]* ([0-9]+x[A-Z0-9]+)(?: [swve]=[0-9]+)*')
_ENTRY = re.compile(r'(?:vendid=0x[0-9a-f]+\n)?(?:devid=0x[0-9a-f]+\n)?(?:sysimgguid=0x[0-9a-f]+\n)?'
                    r'(?:(?:switchguid=0x[0-9a-f]+\([0-9a-f]+\)|caguid=0x[0-9a-f]+|rtguid=0x[0-9a-f]+)\n)?'
                    r'(Switch|Ca|Rt)[ \t]+([0-9]{1,9})[ \t]+"([SHR])-([0-9a-f]+)"[ \t]*#[ \t]*"([^\n]*)"'
                    r'(?:[ \t]+((?:enhanced|base) port 0 lid [0-9]+ lmc [0-9]+)|[ \t]+\(scp\))?[ \t]*(?=\n|\Z)'
                    rf'(?:\n{_PORT}(?=\n\n|\Z))?')
# Each further port line, from the line break before it to its end. Groups: port, port GUID, far node, far port,
# rate.
_PORT_LINE = re.compile(rf'\n{_PORT}(?=\n|\Z)')
# Line breaks other than \n that str.splitlines (and so `_read_lines`) also splits at.
_OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def _read_entries(text: str, source: str) -> IbFabric | None:
    """The fast reader: one regex match per node entry, in place in the dump (entries apart by blank lines, as
    ibnetdiscover writes them), one `findall` over the rest of its port lines, then all cable ends paired at once
    (`_pair_ends`). Returns None, to have `_read_lines` read the dump, at the first thing out of that shape: a
    line of another form, a comment or blank line inside an entry, a node listed twice, ends that do not pair up."""
    for ch in _OTHER_BREAKS:
        if ch in text:
            return None
    body = text.rstrip("\n")
    tables = _scan(body, 0, len(body), 1)
    return _pair_ends(source, *tables) if tables is not None and tables[0] else None


def _scan(body: str, pos: int, stop: int, n: int):
    """The node entries of body[pos:stop] (`stop` the dump's end or a blank line's break, `n` the line `pos` is
    on): (nodes, CA port GUIDs, port lines as (port, port GUID, far node, far port, rate), the node of each as its
    place in `nodes`, each one's line number minus its place), or None at the first thing the entry reader leaves
    to the line reader. (Measured
    on a 16k-host dump: scanning it in two forked processes was slower, the child's tables taking longer to pickle
    than the half scan they saved.)"""
    nodes: dict[str, IbNode] = {}
    port_guids: dict[str, tuple[str, ...]] = {}
    new = tuple.__new__
    entry_match = _ENTRY.match
    port_lines = _PORT_LINE.findall
    lines_in = body.count
    next_blank = body.find
    rows: list[tuple[str, str, str, str, str]] = []   # per port line, in dump order: port, port GUID, far node,
    #                                                   far port, rate
    owner: list[int] = []                        # ... the node it belongs to, as its place in `nodes`
    base: list[int] = []                         # ... its line number minus its place in `rows`
    while pos < stop:
        first = body[pos]
        if first == "\n":                        # a blank line's break, or a third blank line in a row
            pos += 1
            n += 1
            continue
        if first == "#":
            end = next_blank("\n\n", pos, stop)
            end = stop if end < 0 else end
            if any(ln[:1] != "#" for ln in body[pos:end].split("\n")):
                return None
            n += lines_in("\n", pos, end) + 2
            pos = end + 2
            continue
        m = entry_match(body, pos, stop)
        if m is None:
            return None
        kind, ports, letter, guid, desc, sw_tail, port, pguid, far, far_port, rate = m.groups()
        if guid in nodes or letter != _LETTER[kind] or (sw_tail is None) == (kind == "Switch"):
            return None
        at = n + lines_in("\n", pos, m.start(1))
        place = len(nodes)
        nodes[guid] = new(IbNode, (_KIND[kind], guid, int(ports), desc, at))
        end = m.end()
        if port is not None:                     # the first port line, which ends the entry
            n = at + 3
            if kind == "Ca":
                port_guids[guid] = (_guid64(pguid),) if pguid else ()
            base.append(at + 1 - len(rows))
            owner.append(place)
            rows.append((port, pguid, far, far_port, rate))
            pos = end + 2
            continue
        if end == stop or body.startswith("\n\n", end):
            found = []
        else:
            brk = next_blank("\n\n", end, stop)
            brk = stop if brk < 0 else brk
            rest = body[end:brk]
            found = port_lines(rest)
            if len(found) != rest.count("\n"):
                return None
            end = brk
        n = at + lines_in("\n", m.start(1), end) + 2
        pos = end + 2
        if kind == "Ca":
            port_guids[guid] = tuple([_guid64(r[1]) for r in found if r[1]])
        k = len(found)
        if k:
            base += [at + 1 - len(rows)] * k
            owner += [place] * k
            rows += found
    return nodes, port_guids, rows, owner, base


def _pair_ends(source: str, nodes: dict[str, IbNode], port_guids: dict[str, tuple[str, ...]],
               rows: list[tuple[str, str, str, str, str]], owner: list[int], base: list[int]) -> IbFabric | None:
    """Cables from port lines, checked as `_read_lines` checks them line by line, but in bulk (None where it
    would fail): each end listed once; a line whose far end is listed too must be listed back by it at the same
    rate, and the cable is kept once, at the first of the two lines; a far end not listed must be a node of the
    dump.

    Each end is one integer, (place of its node in `nodes`) x (highest port + 1) + port, and the ends are paired
    by sorting them (numpy): on the 655,000 ends of a 16k-host dump that is a third of the time dictionaries of
    the ends' texts took."""
    from itertools import repeat
    from operator import add, itemgetter

    import numpy as np

    total = len(rows)
    if not total:
        return IbFabric(source, nodes, (), port_guids)
    guids = list(nodes)
    place = dict(zip(guids, range(len(guids))))
    column = np.fromiter
    port = column(map(int, map(itemgetter(0), rows)), np.int64, total)
    far_port = column(map(int, map(itemgetter(3), rows)), np.int64, total)
    far_node = column(map(place.get, map(itemgetter(2), rows), repeat(-1)), np.int64, total)
    span = int(max(port.max(), far_port.max())) + 1     # ports have at most nine digits: no overflow below
    near = np.array(owner, dtype=np.int64) * span + port
    far = far_node * span + far_port                    # negative: the far node is not in the dump
    order = np.argsort(near, kind="stable")
    ends = near[order]
    if (ends[1:] == ends[:-1]).any():                   # an end listed twice
        return None
    at = np.minimum(np.searchsorted(ends, far), total - 1)
    listed = (ends[at] == far) & (far >= 0)
    if (far_node[~listed] < 0).any():                   # a far end neither listed nor a node of the dump
        return None
    other = np.where(listed, order[at], total)          # the line listing the far end (total: none)
    back = other[listed]
    if (far[back] != near[listed]).any():               # ... which names another end as its far one
        return None
    rate = list(map(itemgetter(4), rows))
    rates: dict[str, tuple[int, str]] = {}
    for spec in dict.fromkeys(rate):
        width, _, speed = spec.partition("x")
        if speed not in IB_LANE_GBYTES or width not in IB_WIDTH_TEXTS:
            return None                                 # the careful reader names the line
        rates[spec] = (int(width), speed)
    if len(rates) > 1:                                  # both lines of a cable at the same rate
        code = dict(zip(rates, range(len(rates))))
        codes = column(map(code.__getitem__, rate), np.int64, total)
        if (codes[back] != codes[listed]).any():
            return None
    # Each cable at the first of its lines, built column by column (C-level maps: a third of a Python loop's time
    # on the 327k cables of a 16k-host dump): (node, port, far node, far port, width, speed, line).
    keep = np.flatnonzero(other >= np.arange(total)).tolist()
    spec = list(map(rates.__getitem__, map(rate.__getitem__, keep)))
    cables = tuple(map(tuple.__new__, repeat(IbCable), zip(
        map(guids.__getitem__, map(owner.__getitem__, keep)), map(port.tolist().__getitem__, keep),
        map(itemgetter(2), map(rows.__getitem__, keep)), map(far_port.tolist().__getitem__, keep),
        map(itemgetter(0), spec), map(itemgetter(1), spec), map(add, map(base.__getitem__, keep), keep))))
    return IbFabric(source, nodes, cables, port_guids)


def _read_lines(text: str, source: str) -> IbFabric:
    """The line-by-line reader: any dump `_read_entries` reads, and the ones it leaves, with an error naming the
    line for anything that is not ibnetdiscover output (and, where a line shows it, what the file is instead).

    Beyond the entry reader's shape it reads what ibnetdiscover's options add (`-g` grouping lines, external
    port numbers and a chassis's router module printed as `Switch ... "R-<guid>"`, `-f` words after the rate, `-s`
    progress lines), CRLF line ends, and a dump whose lines are all indented, as the man page's example and pastes
    in mails and documents show it."""
    nodes: dict[str, IbNode] = {}
    port_guids: dict[str, list[str]] = {}
    seen: dict[tuple[str, int], tuple[str, int, int, str, int]] = {}  # (guid, port) -> (peer, port, width, speed, line)
    done: dict[tuple[str, int], int] = {}  # ends of cables seen from both sides -> first line
    cables: list[IbCable] = []
    rates: dict[str, tuple[int, str]] = {}
    remotes: dict[str, str] = {}           # '"S-<GUID>"' as written -> its GUID, checked and lower-cased once
    new = tuple.__new__                    # IbCable / IbNode without their Python-level __new__
    cur: str | None = None
    cur_guids: list[str] | None = None    # port GUIDs of the current CA
    for n, line in enumerate(text.splitlines(), start=1):
        if not line:
            continue
        c0 = line[0]
        ind = 0                            # columns of indentation, read over (and added back in messages)
        if c0 in " \t":
            body = line.lstrip(" \t")
            if not body or body[0] == "#":
                continue
            ind = len(line) - len(body)
            line, c0 = body, body[0]
        if c0 == "[":
            if cur is None:
                raise ParseError(source, n, "a port line before any Switch/Ca header", 1 + ind)
            try:
                close = line.index("]")
                port = whole_number(line[1:close])
                q1 = line.index('"', close)
                q2 = line.index('"', q1 + 1)
                if cur_guids is not None and line[close + 1] == "(":
                    cur_guids.append(_guid64(line[close + 2:line.index(")", close)].lower()))
                rclose = line.index("]", q2)
                if line[q2 + 1] != "[":
                    raise ValueError("no [ after the remote node")
                rport = whole_number(line[q2 + 2:rclose])
            except (ValueError, IndexError):
                raise ParseError(source, n, 'expected a port line like [1] "S-<guid>"[17] # ... 4xNDR',
                                 1 + ind) from None
            remote = line[q1 + 1:q2]
            rguid = remotes.get(remote)
            if rguid is None:
                kind, _, rguid = remote.partition("-")
                if kind not in _REMOTE_KINDS or not rguid:
                    raise ParseError(source, n, f'expected a remote node "S-<guid>", "H-<guid>" or "R-<guid>", '
                                                f'found {remote!r}', q1 + 1 + ind)
                rguid = remotes[remote] = rguid.lower()
            tail, at = _rate_word(line, rclose)
            rate = rates.get(tail)
            if rate is None:
                rate = _rate(tail, source, n, at + 1 + ind)
                if tail:
                    rates[tail] = rate
            width, speed = rate
            me, them = (cur, port), (rguid, rport)
            pending = seen.pop(them, None)
            if pending is not None:
                pg, pp, pw, psp, pl = pending
                done[them] = done[me] = pl
                if (pg, pp) != me:
                    raise ParseError(source, n, f"port {port} of {cur} is cabled to {rguid}[{rport}], but line "
                                                f"{pl} says that port is cabled to {pg}[{pp}]")
                if pw != width or psp != speed:
                    raise ParseError(source, n, f"link {width}x{speed} disagrees with line {pl}, which reads "
                                                f"the same cable as {pw}x{psp}")
                continue
            if me in seen or me in done or them in done:
                end, what = (me, f"port {port} of {cur}") if me in seen or me in done else \
                    (them, f"port {rport} of {rguid}")
                first = seen[end][4] if end in seen else done[end]
                raise ParseError(source, n, f"{what} is already cabled elsewhere (line {first})")
            seen[me] = (rguid, rport, width, speed, n)
            cables.append(new(IbCable, (cur, port, rguid, rport, width, speed, n)))
            continue
        if c0 == "#":
            continue
        if line.startswith(_SKIP):
            if _ID_LINE.match(line) is None:
                raise ParseError(source, n, f"expected {line.partition('=')[0]}=0x<hex>, as ibnetdiscover writes "
                                            f"the id lines above a node's header, found {line[:80]!r}", 1 + ind)
            continue
        head = line.split(None, 1)[0]
        if head in _KIND:
            m = _HEADER_LINE.match(line)
            ports = None
            if m is not None and (m[6] is None) != (head == "Switch"):    # a switch's ending, and only a switch's
                try:
                    ports = whole_number(m[2])
                except ValueError:
                    pass
            if ports is None:
                raise ParseError(source, n, _other_output(line) or f"expected {_HEAD_FORM[head]}, as ibnetdiscover "
                                            f"writes a node's header, found {line[:80]!r}", 1 + ind)
            letter, guid, desc = m[3], m[4].lower(), m[5]
            kind = _KIND[head]
            if letter != _LETTER[head]:
                if head == "Switch" and letter == "R":
                    kind = "router"     # `-g` prints a Voltaire chassis's router module among its switches
                else:
                    raise ParseError(source, n, f'a {head} header with the node id "{letter}-{m[4]}": ibnetdiscover '
                                                f'writes "{_LETTER[head]}-<guid>" in a {head} header (S- a switch, H- '
                                                'a channel adapter, R- a router, ?- a node of no type it knows)',
                                     m.start(3) + 1 + ind)
            if guid in nodes:
                raise ParseError(source, n, f"node {guid} is listed twice (first at line {nodes[guid].line})")
            nodes[guid] = new(IbNode, (kind, guid, ports, desc, n))
            cur_guids = None
            if head == "Ca":
                cur_guids = port_guids[guid] = []
            cur = guid
            continue
        if _NOT_NODES.match(line):
            continue
        raise ParseError(source, n, _other_output(line) or
                         f"unexpected line starting {head[:20]!r}: not ibnetdiscover output", 1 + ind)
    if not nodes:
        raise ParseError(source, None, "no Switch or Ca entries: not ibnetdiscover output")
    for c in cables:
        if c.b not in nodes:
            raise ParseError(source, c.line, f"cable to {c.b}[{c.b_port}], a node the dump never lists")
    return IbFabric(source, nodes, tuple(cables), {g: tuple(p) for g, p in port_guids.items()})


def _guid64(text: str) -> str:
    """A GUID as 16 hex digits: ibnetdiscover prints port GUIDs with `%" PRIx64` (no leading zeros:
    `(8c0eb0300ddbf02)` for the port of node `H-08c0eb0300ddbf02`) but node GUIDs with `%016" PRIx64`, and
    ibstat and every other tool print all 16."""
    return text if len(text) >= 16 else text.rjust(16, "0")


# -------------------------------------------------------------------------------------------- decisions

class Hca(NamedTuple):
    """A host's adapter in the compute fabric, with the leaf it is cabled to."""

    host: str
    name: str          # mlx5_3, HCA-6, or the GUID when the description names no adapter
    guid: str
    port_guids: tuple[str, ...]
    leaf: str          # switch GUID
    link: str          # "4xNDR"
    gbytes: float


class MixedBundle(NamedTuple):
    """Parallel cables between two switches that do not all run at one rate (a degraded cable, most often): the
    graph's edge holds each cable at its own rate (`link`), so its capacity is the sum of theirs, and the import
    tells the bundle (a cable that trained down is worth a look)."""

    lo: str                                   # switch GUIDs, as the key of `switch_links`
    hi: str
    rates: tuple[tuple[str, int], ...]        # ("4xEDR", 3), ("4xDDR", 1): most cables first, then the faster
    taken: str                                # how the edge takes them: "their own rates, 39.5 GB/s in all"
    link: IbLink                              # the edge: IbLink(4, "EDR", 4, cables=(3 x "4xEDR", "4xDDR"))


@dataclass(frozen=True)
class ComputeFabric:
    """The slice of an IB fabric the scheduler places jobs on."""

    source: str
    switches: dict[str, IbNode]          # GUID -> switch, excluded ones removed
    levels: dict[str, int]               # GUID -> 0 leaf, 1 spine, 2 core ...
    hcas: tuple[Hca, ...]
    # (lower guid, upper guid) -> (width, speed, cables): all the bundle's cables and the rate most of them run at
    # (the slower on a tie); a bundle at several rates is in `mixed_bundles` too, whose `link` the graph gets
    switch_links: dict[tuple[str, str], tuple[int, str, int]]
    unmapped: tuple[IbNode, ...]         # CAs whose description does not name a host
    excluded: tuple[IbNode, ...]         # CAs left out by --exclude-hca
    # What the graph cannot hold or leaves out, kept so that the caller can say so (nothing is lost in silence):
    mixed_bundles: tuple[MixedBundle, ...] = ()      # switch-to-switch bundles whose cables run at several rates
    slow_ports: tuple[tuple[Hca, str], ...] = ()     # (port, its host's fastest rate): slower than its siblings
    back_to_back: tuple[tuple[IbNode, IbNode, IbCable], ...] = ()   # adapter to adapter, no switch between
    cut_off: tuple[tuple[IbNode, str, str], ...] = ()  # (adapter, host, why) with no cable to a kept switch:
    #                                                    why "excluded switch" (--exclude-switch) or "no switch"
    routers: tuple[IbNode, ...] = ()                 # routers, with their cables
    unreachable: tuple[IbNode, ...] = ()             # switches no path from a leaf reaches
    with_excluded: tuple[IbNode, ...] = ()           # switches cabled only to adapters left out by --exclude-hca
    loops: tuple[tuple[IbNode, IbCable], ...] = ()   # cables from a node back to itself

    @property
    def hosts(self) -> list[str]:
        return sorted({h.host for h in self.hcas})

    def leaves(self) -> list[str]:
        return [g for g, lv in self.levels.items() if lv == 0]

    def spines(self) -> list[str]:
        return [g for g, lv in self.levels.items() if lv >= 1]

    def rails(self) -> dict[str, set[str]]:
        """Leaf GUID -> adapter names cabled to it. One name per leaf is a rail-optimised fabric."""
        out: dict[str, set[str]] = {}
        for h in self.hcas:
            out.setdefault(h.leaf, set()).add(h.name)
        return out

    def switch_names(self) -> dict[str, str]:
        """GUID -> a readable, unique switch name: the hostname part of the description
        (`MF0;A09-P1-IBLEAF-04-04:MQM9701/U1` -> A09-P1-IBLEAF-04-04), else the GUID."""
        short = {g: sw.description.split(";", 1)[-1].split(":", 1)[0].strip() for g, sw in self.switches.items()}
        counts: dict[str, int] = {}
        for name in short.values():
            counts[name] = counts.get(name, 0) + 1
        return {g: name if name and " " not in name and counts[name] == 1 else g for g, name in short.items()}

    def switch_name(self, guid: str) -> str:
        return self.switch_names()[guid]


@gc_paused()
def compute_fabric(fabric: IbFabric, host_pattern: str = DEFAULT_HOST_PATTERN,
                   exclude_hca: tuple[str, ...] = (), exclude_switch: tuple[str, ...] = ()) -> ComputeFabric:
    """Pick the compute fabric out of a dump.

    `host_pattern` is a regex over CA descriptions with a named group `host` (and optionally `hca`);
    `exclude_hca` are shell globs over adapter names (`mlx5_8`, `mlx5_[89]`) for storage or management HCAs, and
    over the description or GUID of an adapter whose description names no host (`MT4123 ConnectX6*`);
    `exclude_switch` are globs over switch GUIDs or descriptions. A switch cabled to a host adapter is a leaf
    (level 0); one cabled only to excluded adapters is dropped; the others get their distance from the nearest
    leaf (1 spine, 2 core). Switches not reachable from a leaf are dropped. Whatever is left out or cannot be
    shown (a bundle at mixed rates, adapters cabled back to back, routers ...) is recorded in the result, for the
    caller to tell: nothing is dropped in silence."""
    try:
        rx = re.compile(host_pattern)
    except re.error as exc:
        raise ParseError("--hostname-pattern", None, f"not a regular expression: {exc}") from None
    if "host" not in rx.groupindex:
        raise ParseError("--hostname-pattern", None, "the pattern needs a named group (?P<host>...)")
    if not any(n.kind == "switch" for n in fabric.nodes.values()):
        # adapters cabled back to back (two hosts and a cable, no switch): every host would be left out in silence
        if not fabric.cables:
            raise ParseError(fabric.source, None, f"no switch and no cable in the dump: it lists "
                                                  f"{len(fabric.nodes)} node(s) alone, so there is no switch fabric "
                                                  "to import")
        raise ParseError(fabric.source, None, f"no switch in the dump: its {len(fabric.nodes)} node(s) are cabled "
                                              "straight to one another (back to back), so no host hangs under a "
                                              "switch and there is no switch fabric to import")
    switches = {g: n for g, n in fabric.nodes.items() if n.kind == "switch"
                and not (exclude_switch and any(fnmatch.fnmatchcase(g, p) or fnmatch.fnmatchcase(n.description, p)
                                                for p in exclude_switch))}
    hcas: list[Hca] = []
    unmapped: list[IbNode] = []
    excluded: list[IbNode] = []
    # One pass over the cables: for every other node, its cables to a switch (with that switch); for every switch,
    # the switches it is cabled to; the cables between two switches. Each in cable order.
    to_switch: dict[str, list[tuple[IbCable, str]]] = {}
    up: dict[str, list[str]] = {g: [] for g in switches}
    between: list[IbCable] = []
    loose: list[IbCable] = []        # cables with no kept switch at either end: adapter to adapter, routers ...
    of = to_switch.get
    for c in fabric.cables:
        a, b = c[0], c[2]
        if a in switches:
            if b in switches:
                between.append(c)
                up[a].append(b)
                up[b].append(a)
                continue
            end, sw = b, a
        elif b in switches:
            end, sw = a, b
        else:
            loose.append(c)
            continue
        got = of(end)
        if got is None:
            to_switch[end] = [(c, sw)]
        else:
            got.append((c, sw))
    has_hca = "hca" in rx.groupindex
    match = rx.match
    port_guids = fabric.port_guids
    rates: dict[tuple[int, str], tuple[str, float]] = {}   # (4, "NDR") -> ("4xNDR", 50.0)
    new = tuple.__new__
    routers: list[IbNode] = []
    no_switch: list[tuple[IbNode, str]] = []   # host adapters without a cable to a kept switch, with the host
    for g, node in fabric.nodes.items():
        if node.kind != "ca":
            if node.kind == "router":
                routers.append(node)
            continue
        m = match(node.description)
        if not m:
            # an adapter no host is read from (a storage appliance's, never given a description) is left out by a
            # glob over its description or GUID, as a switch is: else its host stays unknown
            if exclude_hca and any(fnmatch.fnmatchcase(node.description, p) or fnmatch.fnmatchcase(g, p)
                                   for p in exclude_hca):
                excluded.append(node)
            else:
                unmapped.append(node)
            continue
        name = ((m.group("hca") if has_hca else None) or g)
        if exclude_hca and any(fnmatch.fnmatchcase(name, p) for p in exclude_hca):
            excluded.append(node)
            continue
        host = m.group("host")
        cabled = of(g)
        if cabled is None:
            no_switch.append((node, host))
            continue
        for c, sw in cabled:
            width, speed = c[4], c[5]
            rate = rates.get((width, speed))
            if rate is None:
                rate = rates[width, speed] = (f"{width}x{speed}", width * IB_LANE_GBYTES[speed])
            hcas.append(new(Hca, (host, name, g, port_guids.get(g, ()), sw, rate[0], rate[1])))
    _check_one_adapter_each(fabric, hcas)
    # Leaves: switches cabled to a host adapter, mapped or not (a CA whose description was never set is still
    # a host); SHARP aggregation nodes sit inside every switch and say nothing about its level.
    # Switches whose only adapters are excluded ones (storage leaves) leave the compute fabric with them.
    def cabled_to(nodes: list[IbNode]) -> set[str]:
        return {sw for nd in nodes if AGGREGATION_NODE not in nd.description for _, sw in of(nd.guid, ())}

    leaves = {h.leaf for h in hcas} | cabled_to(unmapped)
    with_excluded = [switches.pop(sw) for sw in sorted(cabled_to(excluded) - leaves)]
    # in name order, not the set's: every table below, and so the graph and its exports, follows this order,
    # which must not change with the process's string hash seed
    levels = {sw: 0 for sw in sorted(leaves)}
    switch_links: dict[tuple[str, str], list] = {}
    frontier = list(levels)
    while frontier:
        nxt = []
        for sw in frontier:
            below = levels[sw] + 1
            for other in up[sw]:
                if other not in levels and other in switches:
                    levels[other] = below
                    nxt.append(other)
        frontier = nxt
    level_of = levels.get
    loops: list[tuple[IbNode, IbCable]] = []
    for c in between:
        a, _, b, _, width, speed, _ = c
        la = level_of(a)
        if la is None:
            continue
        lb = level_of(b)
        if lb is None:
            continue
        if a == b:
            loops.append((switches[a], c))
            continue
        key = (a, b) if (la, a) <= (lb, b) else (b, a)
        entry = switch_links.get(key)
        if entry is None:
            switch_links[key] = [width, speed, 1]
        elif entry[0] == width and entry[1] == speed:
            entry[2] += 1
        else:
            entry.append((width, speed))     # a cable of the bundle at another rate: see _mixed_bundle
    kept = {g: switches[g] for g in levels}
    links: dict[tuple[str, str], tuple[int, str, int]] = {}
    mixed: list[MixedBundle] = []
    for k, v in switch_links.items():
        links[k] = _bundle_rate(v)
        if len(v) > 3:
            mixed.append(_mixed_bundle(k, v))
    # The rest of what the graph leaves out, found in the few cables and nodes set aside above (none on a fabric
    # that has none of it, so a 16k-host import pays nothing for it).
    nodes = fabric.nodes
    back_to_back: list[tuple[IbNode, IbNode, IbCable]] = []
    behind: set[str] = set()         # adapters cabled to a switch left out by --exclude-switch
    for c in loose:
        na, nb = nodes[c.a], nodes[c.b]
        if c.a == c.b:
            if na.kind != "switch":          # a switch's own loop goes with it when --exclude-switch drops it
                loops.append((na, c))
        elif na.kind == nb.kind == "ca":
            back_to_back.append((na, nb, c))
        elif na.kind == "switch" or nb.kind == "switch":
            behind.add(c.b if na.kind == "switch" else c.a)
    paired = {n.guid for a, b, _ in back_to_back for n in (a, b)}
    cut_off = tuple((n, host, "excluded switch" if n.guid in behind else "no switch") for n, host in no_switch
                    if n.guid not in paired and AGGREGATION_NODE not in n.description)
    return ComputeFabric(fabric.source, kept, levels, tuple(hcas), links, tuple(unmapped), tuple(excluded),
                         tuple(mixed), _slow_ports(hcas) if len(rates) > 1 else (), tuple(back_to_back), cut_off,
                         tuple(routers), tuple(n for g, n in switches.items() if g not in levels),
                         tuple(with_excluded), tuple(loops))


def _check_one_adapter_each(fabric: IbFabric, hcas: list[Hca]) -> None:
    """Refuse two adapters (node GUIDs) that the descriptions make one: `localhost HCA-1` on every node whose
    description was never set, or a --hostname-pattern that drops what tells them apart. Merged, the graph would
    hold one adapter with one of their cables and lose the other host in silence."""
    first: dict[tuple[str, str], str] = {}
    for h in hcas:
        g = first.setdefault((h.host, h.name), h.guid)
        if g != h.guid:
            a, b = fabric.nodes[g], fabric.nodes[h.guid]
            raise ParseError(fabric.source, b.line, f"adapters {g} (line {a.line}, \"{a.description}\") and "
                                                    f"{h.guid} (\"{b.description}\") both read as adapter {h.name} "
                                                    f"of host {h.host}: two adapters cannot be one (set each node's "
                                                    "description to its host's name, or leave them out with a "
                                                    "--hostname-pattern they do not match, e.g. "
                                                    f"'^(?!{re.escape(h.host)}\\s)(?P<host>\\S+)\\s+(?P<hca>\\S+)$')")


def _mixed_bundle(key: tuple[str, str], entry: list) -> MixedBundle:
    """A bundle whose cables run at several rates: the edge with each cable at its own rate, and the rates with
    their cable counts, most cables first, for the warning."""
    width, speed, count, *others = entry
    tally: dict[tuple[int, str], int] = {(width, speed): count}
    for rate in others:
        tally[rate] = tally.get(rate, 0) + 1
    order = sorted(tally, key=lambda r: (-tally[r], -r[0] * IB_LANE_GBYTES[r[1]]))
    link = ib_bundle((w, sp, n) for (w, sp), n in tally.items())
    return MixedBundle(key[0], key[1], tuple((f"{w}x{sp}", tally[w, sp]) for w, sp in order),
                       f"their own rates, {_gbytes_text(link.gbytes)} GB/s in all", link)


def _gbytes_text(gbytes: float) -> str:
    """GB/s as people write them: 39.5, 150, 20.4 (never 20.400000000000002 or 1.5e+03)."""
    return f"{gbytes:.3f}".rstrip("0").rstrip(".")


def _slow_ports(hcas: list[Hca]) -> tuple[tuple[Hca, str], ...]:
    """Host adapter ports slower than the fastest port of the same host (a degraded cable, or a slower card that
    --exclude-hca might leave out), each with that fastest rate. Only called when the ports run at several
    rates."""
    best: dict[str, tuple[float, str]] = {}
    for h in hcas:
        b = best.get(h.host)
        if b is None or h.gbytes > b[0]:
            best[h.host] = (h.gbytes, h.link)
    return tuple((h, best[h.host][1]) for h in hcas if h.gbytes < best[h.host][0])


def _bundle_rate(entry: list) -> tuple[int, str, int]:
    """(width, speed, cables) of the cables between two switches: all of them, and where a cable runs at another
    rate (a degraded one: 4xDDR among 4xEDR, as real dumps show) the rate most of them run at, the slower on a tie
    (as `IbLink` names a bundle at mixed rates), never the rate of whichever cable the dump lists first. The
    graph's edge for such a bundle holds each cable at its own rate (`_mixed_bundle`)."""
    width, speed, count, *others = entry
    if not others:
        return width, speed, count
    tally: dict[tuple[int, str], int] = {(width, speed): count}
    for rate in others:
        tally[rate] = tally.get(rate, 0) + 1
    best = main_rate(tally)
    return best[0], best[1], count + len(others)


@gc_paused()
def add_to(topology, cf: ComputeFabric) -> None:
    """Copy the compute fabric into a `Topology`: switches with levels, hosts, their HCAs and every cable."""
    from slurmtools.topology.graph import Host, IbLink, Member, Nic, Switch

    names = cf.switch_names()
    if len(topology.g) or len(set(names.values())) != len(names):
        return _add_one_by_one(topology, cf, names)
    # An empty topology and one vertex per switch: the same calls as below, in the same order, as one bulk load
    # (a 16k-host fabric is a quarter of a million vertices and edges).
    vertices: dict[str, object] = {}
    links: list[tuple[str, str, object]] = []
    sw_vid: dict[str, str] = {}
    for g, sw in cf.switches.items():
        v = Switch(names[g], cf.levels[g], g, sw.description)
        sw_vid[g] = vid = v.vid
        vertices[vid] = v
    member = Member()
    ib: dict[str, IbLink] = {}           # frozen, so equal links can share one object
    host_vid: dict[str, str] = {}
    for h in cf.hcas:
        hid = host_vid.get(h.host)
        if hid is None:
            hid = host_vid[h.host] = f"host:{h.host}"
            if hid not in vertices:
                vertices[hid] = Host(h.host)
        nic = Nic(h.host, h.name, h.port_guids, h.gbytes)
        nid = nic.vid
        vertices[nid] = nic
        link = ib.get(h.link)
        if link is None:
            width, _, speed = h.link.partition("x")
            link = ib[h.link] = IbLink(int(width), speed, 1)
        links.append((nid, hid, member))
        links.append((nid, sw_vid[h.leaf], link))
    bundles: dict[tuple, IbLink] = {}    # one object per (width, speed, cables), as for the adapters' links
    rated = {(b.lo, b.hi): b.link for b in cf.mixed_bundles}    # bundles at several rates: each cable at its own
    for key, rate in cf.switch_links.items():
        link = rated.get(key) if rated else None
        if link is None:
            link = bundles.get(rate)
            if link is None:
                link = bundles[rate] = IbLink(*rate)
        links.append((sw_vid[key[0]], sw_vid[key[1]], link))
    topology.add_many(vertices.values(), links)


def _add_one_by_one(topology, cf: ComputeFabric, names: dict[str, str]) -> None:
    from slurmtools.topology.graph import IbLink

    for g, sw in cf.switches.items():
        topology.add_switch(names[g], level=cf.levels[g], guid=g, description=sw.description)
    for h in cf.hcas:
        if f"host:{h.host}" not in topology:
            topology.add_host(h.host)
        nid = topology.add_nic(h.host, h.name, port_guids=h.port_guids, rate_gbytes=h.gbytes)
        width, _, speed = h.link.partition("x")
        topology.link(nid, f"switch:{names[h.leaf]}", IbLink(int(width), speed, 1))
    rated = {(b.lo, b.hi): b.link for b in cf.mixed_bundles}
    for (lo, hi), (width, speed, count) in cf.switch_links.items():
        topology.link(f"switch:{names[lo]}", f"switch:{names[hi]}", rated.get((lo, hi), IbLink(width, speed, count)))


def to_topology(cf: ComputeFabric, name: str = "cluster"):
    from slurmtools.topology.graph import Topology

    t = Topology(name)
    add_to(t, cf)
    return t
