"""Provider: the text of `nvidia-smi topo -m` and `nvidia-smi nvlink -s`, as pasted by people.

Real pastes are messy (prompt lines, `#` prefixes, hand-aligned spaces, fused cells such as `PXBNODE`,
truncation), so the parser works on whitespace-separated tokens with their columns, splits a fused cell only
when exactly one reading into known link tokens exists, and refuses anything it cannot read faithfully with
`file:line:column: what was expected`. A half-read matrix would give the planner a silently wrong node.

Pure: takes text, returns typed dataclasses. `add_to()` copies the result into the topology graph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator

from slurmtools.errors import MOST_DIGITS, ParseError, whole_number
from slurmtools.topology.cpu_layout import CPU_ID_LIMIT

# Connection classes, nearest first. SOC is the pre-2017 name of SYS.
PCIE_CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS")
CLASS_RANK = {"NV": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}
_LINK_WORDS = ("X", "SOC", "SYS", "NODE", "PHB", "PXB", "PIX")
_P2P_WORDS = {"OK", "CNS", "GNS", "TNS", "NS", "DR", "U"}
_CPULIST = re.compile(r"^[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*$")
_TOKEN = re.compile(r"\S+")
_DIGITS = frozenset("0123456789")
# One `NICn: name` entry of the NIC Legend, and the blanks after it; a line of them may follow the title.
_NIC_PAIR = re.compile(r"NIC([0-9]{1,9})[ \t]*:[ \t]*(\S+)\s*")
_NIC_LEGEND_TITLE = re.compile(r"NIC Legend[ \t]*:")
# A line that starts another table below the legend (a header or row: a GPU or NIC label, not `NIC0:`).
_NEXT_TABLE = re.compile(r"(?:GPU|NIC)[0-9]{1,9}(?![0-9]*[ \t]*:)")
_AFFINITY_COLUMNS = {("CPU", "Affinity"): "cpu", ("NUMA", "Affinity"): "numa", ("GPU", "NUMA", "ID"): "gpu_numa"}
# What a paste puts where it left devices, rows or cells out (`GPU3  SYS  ...`, a `...` line between rows): the
# matrix is incomplete, and saying so beats "expected a link class, found '...'".
_ELIDED = re.compile(r"^(?:\.{2,}|\u2026|\[(?:\.{2,}|\u2026)\])$")
_COLUMN_TITLES = {"cpu": "CPU Affinity", "numa": "NUMA Affinity", "gpu_numa": "GPU NUMA ID"}


@dataclass(frozen=True)
class Link:
    """One cell of the matrix: `kind` is X, NV, PIX, PXB, PHB, NODE or SYS; `token` is what was printed."""

    token: str
    kind: str
    nvlinks: int = 0

    @property
    def rank(self) -> int:
        """Distance class, 0 (NVLink) to 5 (SYS); the self cell ranks -1."""
        return -1 if self.kind == "X" else CLASS_RANK[self.kind]


@dataclass(frozen=True)
class Device:
    """A row/column of the matrix. NICs carry their legend name (mlx5_3, rocep49s0) when the file gives one."""

    label: str                      # as in the header: GPU0, NIC2, mlx5_0
    kind: str                       # "gpu" | "nic"
    index: int                      # GPU index, or position among the NICs
    name: str                       # GPU0 for GPUs; the NIC's device name where known, else its label
    cpu_affinity: frozenset[int] | None = None   # None: column absent or not given for this row
    numa_affinity: frozenset[int] | None = None  # None: column absent or N/A
    gpu_numa_id: int | None = None


@dataclass(frozen=True)
class TopoMatrix:
    """What one `nvidia-smi topo -m` run says about one node."""

    source: str
    devices: tuple[Device, ...]
    links: tuple[tuple[Link, ...], ...]
    columns: tuple[str, ...] = ()    # affinity columns present: cpu, numa, gpu_numa
    pcie_only: bool = False          # `nvidia-smi topo -mp`: PCIe paths only, NVLinks not shown (see _pcie_only)

    @property
    def gpus(self) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.kind == "gpu")

    @property
    def nics(self) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.kind == "nic")

    def _pos(self, name: str | Device) -> int:
        if isinstance(name, Device):
            return self.devices.index(name)
        for i, d in enumerate(self.devices):
            if name in (d.label, d.name):
                return i
        raise KeyError(name)

    def gpu_index(self, label: str) -> int:
        return self.devices[self._pos(label)].index

    def gpu(self, index: int) -> Device:
        for d in self.devices:
            if d.kind == "gpu" and d.index == index:
                return d
        raise KeyError(f"GPU{index}")

    def link(self, a: str | Device, b: str | Device) -> Link:
        """The cell between two devices, by label (GPU0, NIC1) or NIC name (mlx5_1)."""
        return self.links[self._pos(a)][self._pos(b)]

    def nvlinks(self, a: int, b: int) -> int:
        """NVLink count between GPU a and GPU b (0 when they talk over PCIe)."""
        return self.link(f"GPU{a}", f"GPU{b}").nvlinks

    @property
    def unnamed_nics(self) -> tuple[Device, ...]:
        """The NICs the file names no device for: `NICn` columns with no NIC Legend, whose `name` is only the
        matrix's label (`add_to` records their names as unknown)."""
        return tuple(d for d in self.nics if d.name == d.label and re.fullmatch(r"NIC[0-9]{1,9}", d.label))

    def nearest_nics(self, gpu: int) -> tuple[str, tuple[str, ...]]:
        """(class, NIC names) of the NICs with the closest PCIe class to GPU `gpu`; ("", ()) without NICs."""
        g = self._pos(f"GPU{gpu}")
        best: list[tuple[int, str, str]] = []
        for j, d in enumerate(self.devices):
            if d.kind != "nic":
                continue
            ln = self.links[g][j]
            best.append((ln.rank, ln.kind, d.name))
        if not best:
            return "", ()
        low = min(r for r, _, _ in best)
        return next(k for r, k, _ in best if r == low), tuple(n for r, _, n in best if r == low)

    def pcie_groups(self, kind: str) -> list[tuple[str, ...]]:
        """Devices joined by `kind` ("PIX": same PCIe switch, "PXB": same switch tree) or nearer, as components."""
        limit = CLASS_RANK[kind]
        root = _components(len(self.devices), lambda i, j: self.links[i][j].kind != "NV"
                           and 0 < self.links[i][j].rank <= limit)
        groups: dict[int, list[str]] = {}
        for i, r in enumerate(root):
            groups.setdefault(r, []).append(self.devices[i].label)
        return [tuple(g) for g in groups.values() if len(g) > 1]

    def numa_of(self, label: str) -> int | None:
        """A device's NUMA node: its own NUMA Affinity (single node) or GPU NUMA ID, else for a NIC the NUMA
        node of a GPU it reaches without crossing the SMP interconnect or a host bridge boundary."""
        d = self.devices[self._pos(label)]
        if d.numa_affinity is not None and len(d.numa_affinity) == 1:
            return next(iter(d.numa_affinity))
        if d.kind == "nic":
            i = self._pos(label)
            near = sorted((self.links[i][j].rank, j) for j, g in enumerate(self.devices)
                          if g.kind == "gpu" and self.links[i][j].kind in ("PIX", "PXB", "PHB", "NODE")
                          and g.numa_affinity is not None and len(g.numa_affinity) == 1)
            if near:
                return next(iter(self.devices[near[0][1]].numa_affinity))
        return None


# ---------------------------------------------------------------- parsing helpers

# Terminal escapes: the real ESC byte, or the forms a paste leaves of it. Newer nvidia-smi underlines its header
# (`ESC[4m ... ESC[0m`) even into a pipe; GitHub drops the ESC byte (`[4mGPU0`, sgl-project/sglang#26039), `cat -v`
# and editors show it as `^[` (`^[[4mGPU0`, InternLM/lmdeploy#4953), some viewers as U+241B. Without the ESC only
# colour/underline codes (`[...m`) are taken: no other `[` appears in a topo -m table.
_ANSI = re.compile(r"(?:\x1b|\^\[|\u241b)\[[0-9;]{0,16}[A-Za-z]|\[[0-9;]{0,16}m")
# What a paste puts before each line of the output: a comment sign (`#`, `# `), or the quote markers of a markdown
# or e-mail reply (`> `, `> > `, `>>> `). No line nvidia-smi prints starts with either.
_PREFIX = re.compile(r"[ \t]*(?:#|>(?:[ \t]*>)*)")
# The matrix retyped as a markdown table for a README or docs page (`| GPU0 | X | NODE |`, then `|------|------|`
# under the header; seen in the server guide of github.com/DDVD233/midoc): the bars are cell separators, and the
# rule line under the header is no row.
_TABLE_ROW = re.compile(r"[ \t]*\|")
_RULE = re.compile(r"^[\s:+=-]*-{3}[\s:+=-]*$")


def _lines(text: str) -> list[tuple[int, str]]:
    """(offset, content) per line: a leading `#` (comment-prefixed paste) or run of `>` (quoted reply) is dropped,
    keeping real columns. Terminal escapes (newer nvidia-smi underlines its header even into a pipe) become blanks
    of the same width, so columns stay where they were; the bars of a markdown table become tabs, the cell
    separator nvidia-smi prints, so that an empty cell stays one."""
    out = []
    for raw in text.splitlines():
        raw = _ANSI.sub(lambda m: " " * len(m.group()), raw)
        m = _PREFIX.match(raw)
        off = m.end() if m else 0
        content = raw[off:]
        if _TABLE_ROW.match(content):
            content = content.replace("|", "\t")
        out.append((off, content))
    return out


# What a tool that gathers output from a job or from several hosts puts before each line: a timestamp (CI logs:
# `2024-05-01T10:00:00.123Z `, `[10:00:01] `), a `docker compose logs` service (`svc  | `), an `srun -l`/`--label`
# task number (`0: `, padded to ` 0: ` with ten tasks or more), a pdsh/clush host (`node1: `, clush also `node1:`
# with the line right after it). Tools nest (pdsh running `srun -l`: `node1: 0: `; srun running pdsh: `0: node1: `),
# so a line may carry a stack of them, in any order. At each place they are tried in this order: a timestamp has
# colons, a task number is a host name too.
_CAPTURE_PARTS = (
    ("timestamp", re.compile(r"(?:\[(?:[0-9]{4}-[0-9]{2}-[0-9]{2}[T ])?[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?"
                             r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?\]|[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}"
                             r"(?:[.,][0-9]{1,9})?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)(?:[ \t]|$)")),
    ("service", re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]{0,99})[ ]*\|(?:[ ]|$)")),
    ("task", re.compile(r"[ ]*([0-9]{1,9}):(?:[ ]|$)")),
    ("host", re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]{0,252}):[ \t]?")),
)
_CAPTURE_KIND = dict((kind, rx) for kind, rx in _CAPTURE_PARTS)
_HEADER_START = re.compile(r"GPU0(?:\b|GPU|NIC|$)")
# The lines of another task or host that show it ran nvidia-smi too: a header or row, or the start of a legend.
_TABLE_LINE = re.compile(r"^\s*(?:(?:GPU|NIC)[0-9]{1,9}|Legend:|NIC Legend:)")


# The most prefixes a stack may hold: one of each kind, and a few more for a tool nested in itself.
_PREFIX_STACK = 6


def _capture_prefix(content: str, kinds: tuple[str, ...] | None = None) -> list[tuple[str, str, int]]:
    """The capture prefix parts at the start of `content` as (kind, key, end): exactly the kinds given, in their
    order ([] unless all are there), or the stack of as many as are there. The key tells one task or host from
    another: a timestamp's is '' (each line has its own), a task's is its number without the padding."""
    parts: list[tuple[str, str, int]] = []
    at = 0
    while len(parts) < (len(kinds) if kinds is not None else _PREFIX_STACK):
        want = (kinds[len(parts)],) if kinds is not None else tuple(k for k, _ in _CAPTURE_PARTS)
        found = None
        for kind in want:
            found = _CAPTURE_KIND[kind].match(content, at)
            if found:
                break
        if not found:
            return [] if kinds is not None else parts
        key = "" if kind == "timestamp" else str(int(found.group(1))) if kind == "task" else found.group(1)
        parts.append((kind, key, found.end()))
        at = found.end()
    return parts


def _unprefix(lines: list[tuple[int, str]], source: str, start: re.Pattern = _HEADER_START,
              table: re.Pattern = _TABLE_LINE, what: str = "a topo -m table") -> list[tuple[int, str]] | None:
    """The lines without the prefixes a gathering tool, or a stack of them, put before each (srun -l, pdsh, clush,
    docker compose logs, CI timestamps), columns kept; None when no header line carries one. Every line with the
    header's prefix kinds is compared with it: a table line under another task or host means several nodes'
    outputs in one capture, which is refused; which node was meant is the user's to say, not the parser's. So is a
    table line without the header's whole stack: it came from somewhere else."""
    first = None
    for n, (_, content) in enumerate(lines):
        parts = _capture_prefix(content)
        if parts and start.match(content[parts[-1][2]:].lstrip()):
            first = n, parts
            break
    if first is None:
        return None
    at, parts = first
    kinds = tuple(k for k, _, _ in parts)
    keys = tuple(key for _, key, _ in parts)
    out = []
    for n, (off, content) in enumerate(lines):
        mine = _capture_prefix(content, kinds)
        if not mine:
            theirs = _capture_prefix(content)
            if table.match(content) or theirs and table.match(content[theirs[-1][2]:]):
                stack = lines[at][1][:parts[-1][2]].strip()
                raise ParseError(source, n + 1, f"a line of {what} without the prefixes {stack!r} that the header "
                                                f"on line {at + 1} carries (every line of a gathered table has "
                                                f"them): another source's line mixed in?", off + 1)
            out.append((off, content))
            continue
        end = mine[-1][2]
        if tuple(key for _, key, _ in mine) != keys:
            if table.match(content[end:]):
                raise ParseError(source, n + 1, _several_nodes(lines[at][1], parts, content, mine, what), off + 1)
            out.append((off, content))
            continue
        out.append((off + end, content[end:]))
    return out


def prefixed_header(text: str) -> bool:
    """Whether a line of `text` is a `topo -m` header behind a capture prefix (`0: `, `node1: `, a timestamp), so
    that a file given to any `topo` command is known for nvidia-smi output as the plain one is."""
    for _, content in _lines(text):
        parts = _capture_prefix(content)
        toks = content[parts[-1][2]:].split() if parts else []
        if toks and _HEADER_START.match(toks[0]) and not (len(toks) > 1 and _link_from_word(toks[1])):
            return True
    return False


def _several_nodes(header: str, parts: list[tuple[str, str, int]], other: str, mine: list[tuple[str, str, int]],
                   what_table: str = "a topo -m table") -> str:
    """The refusal of a capture that holds the outputs of several tasks or hosts, with the grep that keeps one: it
    names the first prefix of the stack that differs, and greps for the header's prefixes up to it (from after the
    last timestamp before it, which differs on every line)."""
    at = next(i for i, (a, b) in enumerate(zip(parts, mine)) if a[1] != b[1])

    def piece(line: str, ps: list[tuple[str, str, int]], i: int) -> str:
        return line[(ps[i - 1][2] if i else 0):ps[i][2]].strip()

    after = max((i + 1 for i in range(at) if parts[i][0] == "timestamp"), default=0)
    grep = header[(parts[after - 1][2] if after else 0):parts[at][2]].rstrip("\t")
    what = {"task": "srun tasks", "host": "hosts", "service": "services"}[parts[at][0]]
    anchor = "^" if not after else ""
    return (f"the capture holds several nodes' outputs ({what} {piece(header, parts, at)!r} and "
            f"{piece(other, mine, at)!r} both print {what_table}); import one node's (e.g. "
            f"`grep '{anchor}{grep}'` for the first)")


def _tokens(content: str, off: int) -> list[tuple[int, str]]:
    """(1-based column in the original line, token)."""
    return [(m.start() + off + 1, m.group()) for m in _TOKEN.finditer(content)]


def _link_from_word(word: str) -> Link | None:
    if word in _LINK_WORDS:
        return Link(word, "SYS" if word == "SOC" else word)
    if word.startswith("NV"):
        try:
            count = whole_number(word[2:])
        except ValueError:
            return None
        return Link(word, "NV", count) if count > 0 else None
    return None


def _segmentations(tok: str, most: int) -> Iterator[list[str]]:
    """Every way to read `tok` as a run of at most `most` link words (fused cells such as `PXBNODE`, `NV2NV1`).
    Depth first with a stack of its own, not by recursion: a garbled cell may be thousands of words long."""
    trail: list[tuple[str, int]] = []    # (word, the place in trail of the word before it, or -1)
    stack = [(0, 0, -1)]                 # (where in tok, words read, the place in trail of the last one)
    while stack:
        start, count, last = stack.pop()
        if start == len(tok):
            words = []
            while last >= 0:
                word, last = trail[last]
                words.append(word)
            yield words[::-1]
            continue
        if count == most:
            continue
        nexts = [w for w in _LINK_WORDS if tok.startswith(w, start)]
        if tok.startswith("NV", start):
            end = start + 2
            # no link word has more than MOST_DIGITS digits: a longer run ends the search, not the token (each
            # try slices and checks the digits so far: a 200,000-digit cell took hours)
            while end < len(tok) and tok[end] in _DIGITS and end - start - 2 < MOST_DIGITS:
                end += 1
                if _link_from_word(tok[start:end]):   # the one judge of a link word: not NV0, nor 101 digits
                    nexts.append(tok[start:end])
        for w in reversed(nexts):   # the first reading first
            trail.append((w, last))
            stack.append((start + len(w), count + 1, len(trail) - 1))


def _split_cell(tok: str, most: int) -> list[str] | None:
    """The unique reading of a (possibly fused) cell as at most `most` cells, None when it is not made of link
    words. Raises ValueError when it is, but in more than one way."""
    if _link_from_word(tok):
        return [tok]
    readings = []
    for seg in _segmentations(tok, most):
        readings.append(seg)
        if len(readings) > 1:
            raise ValueError(f"fused cell {tok!r} reads as {' '.join(readings[0])} or {' '.join(readings[1])}")
    return readings[0] if readings else None


def parse_cpulist(value: str) -> frozenset[int]:
    """`0-51,104-155` -> the set of ids. Raises ValueError on anything else, and on ids of CPU_ID_LIMIT or more;
    where the list has the form but not the sense (a range that runs backwards, an id too large) the error says
    which part, for the message to name it."""
    if not _CPULIST.match(value):
        raise ValueError(value)
    out: set[int] = set()
    for part in value.split(","):
        a, _, b = part.partition("-")
        lo, hi = whole_number(a), whole_number(b or a)
        if hi < lo:
            raise ValueError(f"{part} runs backwards")
        if hi >= CPU_ID_LIMIT:
            raise ValueError(f"id {hi} is not below {CPU_ID_LIMIT}")
        out.update(range(lo, hi + 1))
    return frozenset(out)


def _header_columns(toks: list[tuple[int, str]], source: str, lineno: int):
    devices: list[tuple[int, str]] = []
    columns: list[str] = []
    i = 0
    while i < len(toks):
        col, tok = toks[i]
        words = tuple(t for _, t in toks[i:i + 3])
        phrase = next((k for k in _AFFINITY_COLUMNS if words[:len(k)] == k), None)
        if phrase:
            columns.append(_AFFINITY_COLUMNS[phrase])
            i += len(phrase)
            continue
        if _ELIDED.match(tok):
            raise ParseError(source, lineno, f"the header elides devices here ({tok}): every column of the matrix is "
                                             "needed", col)
        if columns:
            raise ParseError(source, lineno, f"unexpected header column {tok!r} after the affinity columns", col)
        fused = re.fullmatch(r"(?:(?:GPU|NIC)[0-9]+)+", tok)
        parts = re.findall(r"(?:GPU|NIC)[0-9]+", tok) if fused else [tok]
        for p in parts:
            if p.startswith("GPU") and not re.fullmatch(r"GPU[0-9]{1,9}", p):
                raise ParseError(source, lineno, f"expected a GPU label like GPU0, found {p[:40]!r}", col)
            devices.append((col, p))
        i += 1
    return devices, columns


def _headless_row(lines: list[tuple[int, str]], at: int) -> str:
    """Why the first line starting with GPU0 is refused: it is GPU0's row (X or a link class follows), so the header
    above it is missing or was garbled past reading; taking the row as the header misnamed every column."""
    above = next((c.strip() for _, c in reversed(lines[:at]) if c.strip()), "")
    said = f"; the line above it reads {above[:40]!r}" if above else ""
    return ("this is the row of GPU0, but no header line (GPU0 GPU1 ... CPU Affinity) comes before it: the header "
            f"is missing or garbled{said}")


def _is_p2p(lines: list[tuple[int, str]], header_at: int, first: int) -> bool:
    before = " ".join(c for _, c in lines[:header_at])
    if "-p2p" in before:
        return True
    if first < len(lines):
        toks = [t for _, t in _tokens(lines[first][1], 0)]
        return any(t in _P2P_WORDS for t in toks[1:])
    return False


# ---------------------------------------------------------------- topo -m

def _output_start(lines: list[tuple[int, str]], starts: re.Pattern) -> int | None:
    """The index of the first line whose text (leading blanks dropped) `starts` matches: where nvidia-smi's output
    begins. What a paste puts above it (a shell prompt, the command echoed, a doc's `Output:` line or
    `=====MATRIX=====` banner, a markdown fence) is no part of the output and is not read; None when no line
    matches. Both readers start here: `topo -m` at its header, `nvlink -s` at its first line of output."""
    return next((n for n, (_, content) in enumerate(lines) if starts.match(content.lstrip())), None)


def _find_header(lines: list[tuple[int, str]], source: str) -> int | None:
    """The index of the first line starting with GPU0; GPU0's row there (a header-less paste) is refused."""
    n = _output_start(lines, _HEADER_START)
    if n is not None:
        off, content = lines[n]
        toks = _tokens(content, off)
        if len(toks) > 1 and _link_from_word(toks[1][1]):
            raise ParseError(source, n + 1, _headless_row(lines, n), toks[0][0])
    return n


def _row_line(lines: list[tuple[int, str]], at: int, label: str) -> int | None:
    """The index of the line holding `label`'s row, from `at` on: that line, or the first line after blank ones
    when it starts with the label (a markdown paste or a wrapping viewer puts a blank line after every row). None
    where the table ends there: the file ends, the legend starts, or blank lines are followed by anything else
    (`NIC0: mlx5_0` of a legend too: a paste that kept the GPU rows only is cut short, not spaced out)."""
    n = at
    while n < len(lines) and not lines[n][1].strip():
        n += 1
    if n >= len(lines) or lines[n][1].strip().startswith("Legend"):
        return None
    if n > at and not re.match(re.escape(label) + r"(?![0-9:])", lines[n][1].lstrip()):
        return None
    return n


def parse_topo_matrix(text: str, source: str = "<nvidia-smi topo -m>") -> TopoMatrix:
    """Read `nvidia-smi topo -m` output. Raises ParseError naming line and column on anything unreadable."""
    lines = _lines(text)
    header_at = _find_header(lines, source)
    if header_at is None:
        unprefixed = _unprefix(lines, source)
        if unprefixed is not None:
            lines = unprefixed
            header_at = _find_header(lines, source)
    if header_at is None:
        if re.search(r"^\s*GPU \d+: .*\n\s*Link \d+:", text, re.M):
            raise ParseError(source, None, "this is `nvidia-smi nvlink -s` output, not `nvidia-smi topo -m`: "
                                           "it gives the link speeds beside a topo -m file (`--nvlink`)")
        raise ParseError(source, None, "no `nvidia-smi topo -m` header found (a line starting with GPU0)")
    row0 = header_at + 1   # GPU0's row: the next line, or the one after a markdown rule under the header
    if row0 < len(lines) and _RULE.match(lines[row0][1]):
        row0 += 1
    if _is_p2p(lines, header_at, _row_line(lines, row0, "GPU0") or row0):
        raise ParseError(source, header_at + 1, "this is `nvidia-smi topo -p2p` output (peer-to-peer "
                                                "capability: OK/CNS/GNS), not the link matrix of `nvidia-smi "
                                                "topo -m`")
    off, content = lines[header_at]
    hline = header_at + 1
    header, columns = _header_columns(_tokens(content, off), source, hline)
    labels = [t for _, t in header]
    if len(set(labels)) != len(labels):
        raise ParseError(source, hline, "a device appears twice in the header", header[0][0])
    n = len(labels)

    rows: list[list[Link]] = []
    values: list[dict[str, tuple[int, str] | None]] = []
    row_at: list[int] = []   # the line index of each row
    next_at = row0
    for r, label in enumerate(labels):
        ln = _row_line(lines, next_at, label)
        if ln is None:
            at = min(next_at, len(lines)) + 1
            raise ParseError(source, at, f"table ends after {r} of {n} rows; expected the row of {label} "
                                         "(truncated paste?)")
        row_at.append(ln)
        next_at = ln + 1
        off, content = lines[ln]
        toks = _tokens(content, off)
        col0, first = toks[0]
        if first != label:
            # a row label fused with its first cell (`GPU1NV12`) is split when the rest is link words
            rest = first[len(label):] if first.startswith(label) else ""
            try:
                fused = bool(rest) and _split_cell(rest, n) is not None
            except ValueError:
                fused = False
            if not fused:
                if _ELIDED.match(first):
                    raise ParseError(source, ln + 1, f"rows were elided here ({first}): expected the row of {label}; "
                                                     "every row of the matrix is needed", col0)
                raise ParseError(source, ln + 1, f"expected the row of {label}, found {first!r}", col0)
            toks = [(col0, label), (col0 + len(label), rest)] + toks[1:]
        cells: list[Link] = []
        k = 1
        while len(cells) < n:
            if k >= len(toks):
                end = len(lines[ln][1]) + lines[ln][0] + 1
                raise ParseError(source, ln + 1, f"row {label} has {len(cells)} of {n} link cells; expected "
                                                 f"the cell for {labels[len(cells)]} (truncated paste?)", end)
            col, tok = toks[k]
            try:
                words = _split_cell(tok, n)
            except ValueError as exc:
                raise ParseError(source, ln + 1, f"{exc}; cannot tell the cells apart", col) from None
            if words is None and _ELIDED.match(tok):
                raise ParseError(source, ln + 1, f"row {label} elides cells here ({tok}); expected the cell for "
                                                 f"{labels[len(cells)]}", col)
            if words is None:
                if tok in _P2P_WORDS:
                    raise ParseError(source, ln + 1, f"{tok!r} is a `topo -p2p` status, not a link class", col)
                raise ParseError(source, ln + 1, f"expected a link class (X, NV#, PIX, PXB, PHB, NODE, SYS) for "
                                                 f"column {labels[len(cells)]}, found {tok!r}", col)
            if len(cells) + len(words) > n:
                raise ParseError(source, ln + 1, f"cell {tok!r} splits into {len(words)} cells but only "
                                                 f"{n - len(cells)} columns are left", col)
            for w in words:
                link = _link_from_word(w)
                assert link is not None
                j = len(cells)
                if (j == r) != (link.kind == "X"):
                    what = "X (the device itself)" if j == r else "a link class, not X"
                    raise ParseError(source, ln + 1, f"row {label}, column {labels[j]}: expected {what}, "
                                                     f"found {w!r}", col)
                cells.append(link)
            k += 1
        rest = toks[k:]
        last_col, last = toks[k - 1]
        tail_at = last_col - off - 1 + len(last)   # where the last link cell ends in `content`
        values.append(_affinity_values(rest, columns, label, source, ln + 1,
                                       (content[tail_at:], off + tail_at + 1)))
        rows.append(cells)

    for i in range(n):
        for j in range(i + 1, n):
            if rows[i][j] != rows[j][i]:
                raise ParseError(source, row_at[j] + 1,
                                 f"matrix not symmetric: {labels[i]}->{labels[j]} is {rows[i][j].token} but "
                                 f"{labels[j]}->{labels[i]} is {rows[j][i].token} (misaligned paste?)")

    legend, after_legend = _nic_legend(lines, next_at, source)
    unnamed = [label for label in labels if re.fullmatch(r"NIC[0-9]{1,9}", label) and int(label[3:]) not in legend]
    if legend and unnamed:
        raise ParseError(source, after_legend, f"the NIC Legend names no {', '.join(unnamed)} (cut short, or a "
                                               "garbled line?)")
    devices = []
    nic_no = 0
    for label, vals in zip(labels, values):
        if label.startswith("GPU"):   # GPU<digits>: checked with the header
            kind, index, name = "gpu", int(label[3:]), label
        else:
            kind, index = "nic", nic_no
            nic_no += 1
            m = re.fullmatch(r"NIC([0-9]{1,9})", label)
            name = legend.pop(int(m.group(1)), label) if m else label
        devices.append(Device(label, kind, index, name, **vals))
    if legend:
        extra = ", ".join(f"NIC{k}" for k in sorted(legend))
        raise ParseError(source, None, f"NIC Legend names {extra}, which the matrix does not have")
    pcie_only = not any(c.kind == "NV" for r in rows for c in r) and _pcie_only(lines, header_at, next_at)
    return TopoMatrix(source, tuple(devices), tuple(tuple(r) for r in rows), tuple(columns), pcie_only)


_MP_COMMAND = re.compile(r"\btopo\s+(?:-mp|--matrix_pci)\b")
_LEGEND_ENTRY = re.compile(r"^\s*(X|SOC|SYS|NODE|PHB|PXB|PIX|NV#)\s*=")


# The legend of a driver from before NVLink (Kepler/Maxwell era, e.g. 2x K80): every entry of its time, the SMP
# link still called SOC, and no NV#. NVLink-era drivers that still said SOC list NV# (`NV# = Connection traversing
# a bonded set of # NVLinks`), and `topo -mp` of a later one says SYS and NODE.
_PRE_NVLINK_LEGEND = frozenset({"X", "SOC", "PHB", "PXB", "PIX"})


def _pcie_only(lines: list[tuple[int, str]], header_at: int, after: int) -> bool:
    """Whether the matrix is `nvidia-smi topo -mp` (`--matrix_pci`): the link classes of the PCIe tree only, with
    no NV# cell even between NVLinked GPUs. It says so on the command line pasted above it, or by its legend,
    which has no `NV#` entry (`topo -m` has listed one since there were NVLinks). A whole legend of a driver from
    before NVLink (see _PRE_NVLINK_LEGEND) has no `NV#` entry either: that driver shows no NVLink because the GPUs
    it drives have none, so its matrix is read as `topo -m` (no NV# cell: no NVLink). A partial one (a paste that
    kept a few entries) does not tell the driver's age, and stays `topo -mp`."""
    if any(_MP_COMMAND.search(content) for _, content in lines[:header_at]):
        return True
    entries: set[str] = set()
    in_legend = False
    for _, content in lines[after:]:
        if content.strip() == "Legend:":
            in_legend = True
        elif content.strip().startswith("NIC Legend"):
            break
        elif in_legend:
            m = _LEGEND_ENTRY.match(content)
            if m:
                entries.add(m.group(1))
    if entries == _PRE_NVLINK_LEGEND:
        return False
    return "PIX" in entries and "NV#" not in entries


_FORMS = {"cpu": f"a list like 0-15,32-47 (ids below {CPU_ID_LIMIT})",
          "numa": f"a list like 0-15,32-47 (ids below {CPU_ID_LIMIT}) or N/A", "gpu_numa": "a NUMA id or N/A"}
_SHORT_FORMS = {"cpu": "a CPU list", "numa": "NUMA nodes or N/A", "gpu_numa": "a NUMA id or N/A"}
_FIELDS = {"cpu": "cpu_affinity", "numa": "numa_affinity", "gpu_numa": "gpu_numa_id"}


def _affinity_value(name: str, tok: str):
    """One affinity cell read as its column's form; ValueError when it does not have that form."""
    if name == "cpu":
        return parse_cpulist(tok)
    if tok == "N/A":
        return None
    return parse_cpulist(tok) if name == "numa" else whole_number(tok)


def _why(exc: ValueError, tok: str) -> str:
    """What `parse_cpulist` found wrong in a value that has a CPU list's form (`: 266-192 runs backwards`), or ""."""
    said = str(exc)
    return f": {said}" if said and said != tok else ""


def _fits(name: str, tok: str) -> bool:
    try:
        _affinity_value(name, tok)
    except ValueError:
        return False
    return True


def _tab_placements(tail: str, tail_col: int, names: list[str]) -> list[dict[str, tuple[int, str]]] | None:
    """Where a tab-separated row puts its affinity values, as {column: (text column, value)}: each tab cell after
    the last link cell is one column, an empty cell an empty value. Only rows laid out as nvidia-smi lays them out
    count: one cell per column, or with the empty cell nvidia-smi writes before GPU NUMA ID (`0-47\t0\t\tN/A`),
    and any empty cells after. None when the row is not so laid out (no tabs, values joined by spaces, too few
    cells): a paste that merged or dropped tabs does not show which column a value stands in."""
    if "\t" not in tail:
        return None
    pieces = tail.split("\t")
    if pieces[0].strip():
        return None
    cells: list[tuple[int, str]] = []
    at = len(pieces[0]) + 1
    for piece in pieces[1:]:
        if len(piece.split()) > 1:
            return None
        cells.append((tail_col + at + len(piece) - len(piece.lstrip()), piece.strip()))
        at += len(piece) + 1
    layouts: list[list[str | None]] = [list(names)]
    if "gpu_numa" in names[1:]:
        i = names.index("gpu_numa")
        layouts.append(names[:i] + [None] + names[i:])
    placements = []
    for layout in layouts:
        row = list(cells)
        while len(row) > len(layout) and not row[-1][1]:
            row.pop()
        if len(row) != len(layout) or any(name is None and text for name, (_, text) in zip(layout, row)):
            continue
        placements.append({name: cell for name, cell in zip(layout, row) if name and cell[1]})
    return placements or None


def _affinity_values(rest, columns, label, source, lineno, tail: tuple[str, int] | None = None):
    """The affinity columns of one row. A row with a value for every column reads them in the header's order; a
    row with fewer values (nvidia-smi leaves CPU Affinity empty for a GPU outside the caller's cpuset; a row may
    lack a trailing value) is read only where one placement of its values fits: by its tab cells where it is laid
    out as nvidia-smi prints it, else by what each value is (a CPU list, NUMA nodes or N/A, a NUMA id or N/A).
    Anything else is refused at the value, never read with a column shifted."""
    vals: dict = {}
    names = list(columns)
    if not rest:
        return vals
    if len(rest) > len(names):
        col, tok = rest[len(names)]
        raise ParseError(source, lineno, f"row {label}: unexpected value {tok!r} after the "
                                         f"{len(names)} affinity columns", col)
    if len(rest) == len(names):
        placement = dict(zip(names, rest))
    else:
        placement = _short_row_placement(rest, names, label, source, lineno, tail)
        if "cpu" in names and "cpu" not in placement:
            vals["cpu_affinity"] = frozenset()   # printed empty: no CPU of the caller's cpuset is near the GPU
    for name in names:
        if name not in placement:
            continue
        col, tok = placement[name]
        try:
            vals[_FIELDS[name]] = _affinity_value(name, tok)
        except ValueError as exc:
            raise ParseError(source, lineno, f"row {label}, {_COLUMN_TITLES[name]}: expected {_FORMS[name]}, "
                                             f"found {tok!r}{_why(exc, tok)}", col) from None
    return vals


def _short_row_placement(rest, names, label, source, lineno, tail) -> dict[str, tuple[int, str]]:
    """The one placement of a row's values when it has fewer than the header has columns; ParseError when none or
    several fit."""
    from itertools import combinations

    by_tabs = _tab_placements(*tail, names) if tail else None
    if by_tabs:
        fitting = [pl for pl in by_tabs if all(_fits(name, tok) for name, (_, tok) in pl.items())]
        if not fitting:   # laid out as nvidia-smi prints it: name the cell that is not of its column's form
            name, (col, tok) = next((name, cell) for name, cell in by_tabs[-1].items() if not _fits(name, cell[1]))
            try:
                _affinity_value(name, tok)
                why = ""
            except ValueError as exc:
                why = _why(exc, tok)
            raise ParseError(source, lineno, f"row {label}, {_COLUMN_TITLES[name]}: expected {_FORMS[name]}, "
                                             f"found {tok!r}{why}", col)
    else:
        fitting = [dict(zip(chosen, rest)) for chosen in combinations(names, len(rest))
                   if all(_fits(name, tok) for name, (_, tok) in zip(chosen, rest))]
    distinct = list({tuple(sorted(pl.items())): pl for pl in fitting}.values())
    if len(distinct) == 1:
        return distinct[0]
    titles = ", ".join(f"{_COLUMN_TITLES[c]} ({_SHORT_FORMS[c]})" for c in names)
    said = f"row {label}: {len(rest)} values for the {len(names)} columns {titles}"
    if not distinct:
        raise ParseError(source, lineno, f"{said}; no placement gives each value its column's form", rest[0][0])
    for col, tok in rest:   # the first value the placements put in different columns (each places every value)
        where = [name for name in names if any(pl.get(name) == (col, tok) for pl in distinct)]
        if len(where) > 1:
            break
    shown = " or as ".join(_COLUMN_TITLES[name] for name in where)
    raise ParseError(source, lineno, f"{said}; {tok!r} reads as {shown}, and which column is left out cannot be "
                                     "told (the row lost a value, or its tabs)", col)


def _nic_legend(lines, start, source) -> tuple[dict[int, str], int]:
    """NIC number -> device name from the legend under the matrix, and the line after its last entry.

    nvidia-smi prints one `NICn: name` per line under `NIC Legend:`; pastes also put several on one line
    (`NIC0: rocep177s0f0    NIC1: rocep177s0f1`) or drop the `NIC Legend:` title. So every line from `start` on
    that starts with `NICn:` is read as a run of `NICn: name` pairs (after a `NIC Legend:` title on the same line,
    if any), up to the next table (a line starting with a GPU or NIC label, as a row or header does). A line that
    starts so but holds something else besides pairs is refused at it: which name belongs to which NIC is then
    not certain."""
    legend: dict[int, str] = {}
    after = start + 1
    for n in range(start, len(lines)):
        off, content = lines[n]
        text = content.lstrip()
        if _NEXT_TABLE.match(text):
            break
        title = _NIC_LEGEND_TITLE.match(text)
        if title:
            text = text[title.end():].lstrip()
        if not _NIC_PAIR.match(text):
            continue
        col = off + len(content) - len(text) + 1
        at = 0
        while at < len(text):
            m = _NIC_PAIR.match(text, at)
            if not m:
                raise ParseError(source, n + 1, f"expected `NIC<n>: <device name>` pairs on a NIC Legend line, "
                                                f"found {text[at:at + 40]!r}", col + at)
            k = int(m.group(1))
            if k in legend:
                raise ParseError(source, n + 1, f"NIC{k} appears twice in the NIC Legend", col + at)
            legend[k] = m.group(2)
            at = m.end()
        after = n + 2
    return legend, after


# ---------------------------------------------------------------- nvlink -s

@dataclass(frozen=True)
class GpuNvlinks:
    """One GPU's NVLinks from `nvidia-smi nvlink -s`: per link its GB/s, None when inactive. `state` is "listed"
    (the links, if any, are the lines under the GPU), "inactive" (NVML said all links are inactive and not how
    many there are) or "unsupported" (NVML said the GPU has no NVLink). `uuid` is None where the output has none:
    older drivers print `GPU 0: Quadro RTX 8000` alone, and pastes trim it for privacy."""

    index: int
    name: str
    uuid: str | None
    links: tuple[tuple[int, float | None], ...] = field(default=())
    state: str = "listed"
    line: int = field(default=0, compare=False)   # the `GPU <n>:` line, for messages naming it

    @property
    def active(self) -> int:
        return sum(1 for _, s in self.links if s is not None)

    @property
    def gbytes(self) -> float:
        return sum(s for _, s in self.links if s is not None)


# `GPU 0: <name> (UUID: GPU-...)`, or without the UUID (older drivers, trimmed pastes); matched against the
# stripped line (no `\s*$` after the lazy name: on a line of 200,000 blanks each try scanned them all). A name
# that holds a `(UUID` the pattern did not take (`(UUID: GPU-1` cut short) is no name (see _gpu_line).
_GPU_LINE = re.compile(r"^GPU ([0-9]{1,9}): (\S.*?)(?: \(UUID: ([^)]*)\))?$")


def _gpu_line(s: str) -> re.Match | None:
    """`s` (a stripped line) as `GPU <n>: <name>` with or without its UUID; None for anything else."""
    m = _GPU_LINE.match(s)
    return m if m and "(UUID" not in m.group(2) else None


# Older drivers print an inactive link as `<inactive>`, some newer ones and health-check rewrites of the output as
# `Inactive` (Azure/azhpc-diagnostics#73, Azure/azurehpc-health-checks#132).
_LINK_LINE = re.compile(r"^Link ([0-9]{1,9}): (?:([0-9]{1,9}(?:\.[0-9]{1,9})?) GB/s|(<inactive>|[Ii]nactive))\s*$")
# What NVML prints under a GPU instead of its links (leptonai/gpud#1085, NVIDIA/open-gpu-kernel-modules#1150: all
# links down, no count given; PCIe cards: not supported). The case of `NVLink`/`Nvlink` differs between drivers.
_NVML_NO_LINKS = re.compile(r"^NVML: ?Unable to retrieve NVLink information(?: as all links are inactive|"
                            r"(: Not Supported))\.?\s*$", re.I)
# A line that starts one GPU's output, or continues it, behind a capture prefix (srun -l, pdsh, timestamps).
_STATUS_START = re.compile(r"GPU [0-9]{1,9}: \S")
# A line of the output itself; the output starts at the first (see _output_start).
_STATUS_LINE = re.compile(r"^\s*(?:GPU [0-9]{1,9}: |Link [0-9]{1,9}: |NVML:)")


def parse_nvlink_status(text: str, source: str = "<nvidia-smi nvlink -s>") -> tuple[GpuNvlinks, ...]:
    """Read `nvidia-smi nvlink -s`. Elided lines (`[...]`) are refused: the link count would be wrong. So are a
    GPU listed twice and links not numbered from 0 (`-l` output, or two runs in one file): each would make a
    link count no node has. What a paste puts above the output (the command, a doc's `Output:` banner) is not
    read, as above a topo -m header (`_output_start`)."""
    lines = _lines(text)
    if not any(_gpu_line(c.strip()) for _, c in lines):
        lines = _unprefix(lines, source, _STATUS_START, _STATUS_LINE, "`nvlink -s` output") or lines
    gpus: list[GpuNvlinks] = []
    cur: dict | None = None
    seen: dict[int, int] = {}
    start = _output_start(lines, _STATUS_LINE)
    for n, (off, content) in enumerate(lines[start:] if start is not None else [], start=(start or 0) + 1):
        s = content.strip()
        if not s or s.startswith("$") or "nvidia-smi" in s:
            continue
        col = off + len(content) - len(content.lstrip()) + 1
        m = _gpu_line(s)
        if m:
            if cur:
                gpus.append(GpuNvlinks(**cur))
            index = int(m.group(1))
            if index in seen:
                raise ParseError(source, n, f"GPU {index} is listed twice (lines {seen[index]} and {n}): two runs "
                                            f"or two nodes in one file; keep one node's one run", col)
            seen[index] = n
            cur = {"index": index, "name": m.group(2), "uuid": m.group(3), "links": (), "line": n}
            continue
        if s in ("[...]", "...", "[..]", "\u2026", "[\u2026]"):
            raise ParseError(source, n, "lines were elided here ([...]); the link count cannot be known", col)
        m = _NVML_NO_LINKS.match(s)
        if m:
            if cur is None or cur["links"] or cur.get("state"):
                where = "before any `GPU <n>:` line" if cur is None else f"under GPU {cur['index']}'s links"
                raise ParseError(source, n, f"NVML's message stands {where}: which GPU it is about is not stated "
                                            f"(capture `nvidia-smi nvlink -s` without -i)", col)
            cur["state"] = "unsupported" if m.group(1) else "inactive"
            continue
        m = _LINK_LINE.match(s)
        if not m or cur is None:
            raise ParseError(source, n, "expected `GPU <n>: <name>` (with or without ` (UUID: ...)`) or "
                                        "`Link <n>: <GB/s> GB/s`", col)
        if cur.get("state"):
            raise ParseError(source, n, f"a link line after NVML said GPU {cur['index']} has no NVLink "
                                        f"information", col)
        link = (int(m.group(1)), float(m.group(2)) if m.group(2) else None)
        want = cur["links"][-1][0] + 1 if cur["links"] else 0
        if link[0] != want:
            raise ParseError(source, n, f"expected Link {want}, found Link {link[0]}", col)
        cur["links"] = cur["links"] + (link,)
    if cur:
        gpus.append(GpuNvlinks(**cur))
    if not gpus:
        raise ParseError(source, None, "no `GPU <n>: ...` lines: not `nvidia-smi nvlink -s` output")
    return tuple(gpus)


def gpu_link_rates(status: tuple[GpuNvlinks, ...]) -> dict[int, float | None]:
    """GB/s per link of each GPU whose `nvlink -s` lists an active link; None where its links run at different
    rates (a degraded link at 1 GB/s beside 26.562): no one rate is true of them, and the max would hide it."""
    out: dict[int, float | None] = {}
    for g in status:
        rates = {s for _, s in g.links if s}
        if rates:
            out[g.index] = rates.pop() if len(rates) == 1 else None
    return out


def check_nvlink_pairing(m: TopoMatrix, status: tuple[GpuNvlinks, ...], status_source: str) -> None:
    """Refuse an `nvlink -s` file that cannot be the same node as the topo -m file: other GPU indices (another
    node, or `-i` picked some GPUs), a GPU that topo -m shows on NVLink while the status gives it no active
    link, or one whose active links are not what the matrix shows (links down are what an admin must hear).
    Taking its speeds or names for this node would state facts about another."""
    mine = sorted(g.index for g in m.gpus)
    theirs = sorted(g.index for g in status)
    if mine != theirs:
        def show(ix: list[int]) -> str:
            return ", ".join(map(str, ix)) if ix else "none"
        raise ParseError(status_source, None, f"lists GPUs {show(theirs)} but {m.source} has GPUs {show(mine)}: "
                                              f"not the same node, or `-i` picked GPUs; give `nvidia-smi nvlink -s` "
                                              f"of all GPUs of the topo -m node")
    if m.pcie_only:
        return
    board = is_nvswitch_board(m)
    # a GPU with no active link first: a file of another node says so more plainly than a count does
    for g in sorted(status, key=lambda g: g.active > 0):
        a = f"GPU{g.index}"
        peers = [(b.label, m.link(a, b.label).nvlinks) for b in m.gpus if b.label != a]
        peer, most = max(peers, key=lambda p: p[1], default=("", 0))
        if most and not g.active:
            said = {"inactive": "NVML says all its links are inactive", "unsupported": "NVML says no NVLink",
                    "listed": "no active link is listed"}[g.state]
            raise ParseError(status_source, g.line or None, f"GPU {g.index}: {said}, but {m.source} shows NV{most} "
                                                            f"between {a} and {peer}: the files are of different "
                                                            f"nodes or times")
        # what the matrix says the GPU has: on an NVSwitch board NV# to each peer is all its links, on a mesh the
        # peers' NV# add up to them. More active links than a mesh shows may go where the matrix cannot (the CPU
        # on POWER9, GPUs outside a job's cgroup); fewer are links down, or another node or time.
        shown = most if board else sum(n for _, n in peers)
        if most and (g.active < shown or (board and g.active > shown)):
            how = f"NV{most} to each peer" if board else "NV# to its peers: " + " + ".join(
                str(n) for _, n in peers if n)
            raise ParseError(status_source, g.line or None, f"GPU {g.index}: {g.active} active NVLinks, but "
                                                            f"{m.source} shows {shown} ({how}): links down, or the "
                                                            f"files are of different nodes or times")


# ---------------------------------------------------------------- into the graph

MAX_NVLINKS_PER_GPU = 18   # NVLink 4 and 5 GPUs; more NVLinks to peers than this means they share NVSwitches


def is_nvswitch_board(m: TopoMatrix) -> bool:
    """A GPU whose NV# counts to its peers add up to more links than a GPU has reaches them through NVSwitches
    (8x A100 shows NV12 to each of 7 peers: 84 > 12 physical links), not through a direct mesh."""
    gpus = [d.label for d in m.gpus]
    if len(gpus) < 3:
        return False
    sums = [sum(m.link(a, b).nvlinks for b in gpus if b != a) for a in gpus]
    return all(s > MAX_NVLINKS_PER_GPU for s in sums)


_NO_SMP = ("PIX", "PXB", "PHB", "NODE")   # cells that say two devices are on one socket (no SMP link between)
_SAME_BRIDGE = ("PIX", "PXB", "PHB")      # ... and under one PCIe host bridge


def _components(n: int, joined) -> list[int]:
    """Union-find over 0..n-1 with the pairs `joined(i, j)` says are connected; returns each one's root."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i in range(n):
        for j in range(i + 1, n):
            if joined(i, j):
                parent[find(i)] = find(j)
    return [find(i) for i in range(n)]


def _affinity_key(d: Device) -> tuple | None:
    """What a row states about the CPU group it is local to: one NUMA node, several (Grace Hopper), or, with no
    NUMA column, its CPU set; None when the row states nothing."""
    if d.numa_affinity:
        return ("numa", next(iter(d.numa_affinity))) if len(d.numa_affinity) == 1 else ("nodes", d.numa_affinity)
    if d.cpu_affinity:
        return ("cpus", d.cpu_affinity)
    return None


def numa_groups(m: TopoMatrix) -> tuple[list[tuple], list[int]]:
    """For each device, the key of the CPU group it is local to, and its PCIe root domain.

    The link cells and the affinity columns are separate facts, and real captures need both: devices whose
    cells do not cross the SMP link (PIX..NODE) share a domain, and a domain may hold several NUMA nodes
    (sub-NUMA clustering shows NODE between them) while one NUMA node may span two domains that are SYS apart
    (AMD boards report SYS between root complexes of one NUMA node). NVLink cells hide the PCIe class, so
    domains whose rows state the same affinity merge unless a SYS cell separates them. A device that states no
    affinity (NICs) takes the group of the nearest devices of its domain that do, when they agree; otherwise
    its group is ("unknown", n): the capture does not say which NUMA node it is on."""
    devs = m.devices
    n = len(devs)
    keys: list[tuple | None] = [_affinity_key(d) for d in devs]
    dom = _components(n, lambda i, j: m.links[i][j].kind in _NO_SMP)
    merged = True
    while merged:
        merged = False
        for i in range(n):
            for j in range(n):
                if dom[i] != dom[j] and keys[i] is not None and keys[i] == keys[j]:
                    a = [x for x in range(n) if dom[x] == dom[i]]
                    b = [y for y in range(n) if dom[y] == dom[j]]
                    if not any(m.links[x][y].kind == "SYS" for x in a for y in b):
                        old = dom[j]
                        dom = [dom[i] if d == old else d for d in dom]
                        merged = True
    out: list[tuple] = []
    unknown: dict[int, tuple] = {}
    for i, k in enumerate(keys):
        if k is None:
            near = sorted((m.links[i][j].rank, keys[j]) for j in range(n)
                          if keys[j] is not None and dom[j] == dom[i] and m.links[i][j].kind in _NO_SMP)
            best = {kk for r, kk in near if r == near[0][0]} if near else set()
            k = best.pop() if len(best) == 1 else unknown.setdefault(dom[i], ("unknown", len(unknown)))
        out.append(k)
    return out, dom


def _key_text(k: tuple) -> str:
    from slurmtools.topology.cpu_layout import _ranges

    what, v = k
    if what == "numa":
        return f"NUMA {v}"
    ids = ",".join(f"{a}-{b}" if a != b else str(a) for a, b in _ranges(sorted(v)))
    return f"NUMA {ids}" if what == "nodes" else f"CPUs {ids}"


def nic_link_layer(name: str) -> str | None:
    """InfiniBand or Ethernet from an RDMA device name where the name says so (rdma-core's persistent names:
    `ibp…` InfiniBand, `roce…` RoCE); None for names that do not (`mlx5_0`, `NIC0`)."""
    if re.match(r"ib[ps]\d", name):
        return "ib"
    if re.match(r"roce[pPs]\d", name) or name.startswith("mlx5_bond"):
        return "ethernet"
    return None


def add_to(topology, m: TopoMatrix, host: str, nvlink_status: tuple[GpuNvlinks, ...] = (),
           gpu_type: str | None = None, threads_per_core: int | None = None) -> None:
    """Add one host's inside as `nvidia-smi topo -m` shows it, and record on the host what the capture does
    not state.

    NUMA nodes come from `numa_groups`; within a NUMA node whose devices are NODE apart, PHB groups become PCIe
    host bridges; PCIe switches come from PIX groups nested in PXB groups; NVLink becomes direct GPU-GPU edges,
    or edges into one NVSwitch vertex on NVSwitch boards (see `is_nvswitch_board`). The per-link GB/s comes
    from each GPU's links in `nvlink -s` output when given, else from the GPU model (the names in `nvlink -s`, or
    `gpu_type`); an edge whose GPUs' links run at different rates states none (nvlink_speed unknown)."""
    from slurmtools.topology import gpu_models
    from slurmtools.topology.cpu_layout import fill_cores

    if f"host:{host}" not in topology:
        topology.add_host(host)
    names = {g.index: g.name for g in nvlink_status}
    model = next(iter(names.values()), None) or gpu_type
    gen = gpu_models.nvlink_generation(model) if model else None
    status_rates = gpu_link_rates(nvlink_status)
    # a GPU `nvlink -s` gives no rate for: the one rate it gives the others, else the model's
    told = set(status_rates.values())
    unstated = (told.pop() if len(told) == 1 else None) if told else (gen.gbytes_per_link if gen else None)

    def rate(*labels: str) -> float | None:
        """GB/s per link of an edge from these GPUs: each GPU's own rate, None unless they agree."""
        got = {status_rates.get(m.gpu_index(lb), unstated) for lb in labels}
        return got.pop() if len(got) == 1 else None
    # CPU groups: one per (PCIe root domain, affinity); see numa_groups
    devs = m.devices
    keys, dom = numa_groups(m)
    cpu_group = [(d, k) for d, k in zip(dom, keys)]
    order: list[tuple] = []
    for gk in cpu_group:
        if gk not in order:
            order.append(gk)
    cpu_vid: dict[tuple, str] = {}
    n_unknown = 0
    for gk in order:
        d, k = gk
        cpus = sorted({c for i, g in enumerate(cpu_group) if g == gk for c in (devs[i].cpu_affinity or ())})
        twins = [x for x in order if x[1] == k]
        if k[0] == "numa":
            tag = f"{k[1]}.{twins.index(gk)}" if len(twins) > 1 else ""
            cpu_vid[gk] = topology.add_cpu(host, k[1], cpus=cpus, tag=tag)
        elif k[0] == "nodes":
            tag = _key_text(k)[5:] + (f".{twins.index(gk)}" if len(twins) > 1 else "")
            cpu_vid[gk] = topology.add_cpu(host, None, cpus=cpus, nodes=sorted(k[1]), tag=tag)
        else:
            cpu_vid[gk] = topology.add_cpu(host, None, cpus=cpus, tag=f"?{n_unknown}")
            n_unknown += 1
    if any(k[0] != "numa" for _, k in order):
        topology.mark_unknown(host, "numa_ids")
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            topology.link_smp(cpu_vid[a], cpu_vid[b], within_socket=a[0] == b[0])
    keys = cpu_group
    # host bridges: only where a NUMA node's devices are NODE apart (else the CPU vertex is the one bridge)
    parent: dict[str, str] = {d.label: cpu_vid[k] for d, k in zip(devs, keys)}
    bridge = _components(len(devs), lambda i, j: m.links[i][j].kind in _SAME_BRIDGE)
    n_br = 0
    for k in order:
        members = [i for i, kk in enumerate(keys) if kk == k]
        stated = [i for i in members if any(m.links[i][j].kind in _NO_SMP for j in members if j != i)]
        roots = sorted({bridge[i] for i in stated})
        if len(roots) < 2:
            continue
        for r in roots:
            br = topology.add_pcie_bridge(host, n_br, parent=cpu_vid[k])
            n_br += 1
            for i in stated:
                if bridge[i] == r:
                    parent[devs[i].label] = br
    # PCIe switches: a PXB group is a switch tree; below its top, each PIX group is one switch, and every other
    # member sits behind a switch of its own (PXB: more than one bridge between any two of them)
    n_sw = 0
    pxb = m.pcie_groups("PXB")
    pix = m.pcie_groups("PIX")
    for group in pxb:
        if group in pix:
            continue
        top = topology.add_pcie_switch(host, n_sw, parent=parent[group[0]])
        n_sw += 1
        for lb in group:
            parent[lb] = top
        for sub in [p for p in pix if set(p) <= set(group)] + [(lb,) for lb in group
                                                                 if not any(lb in p for p in pix)]:
            sw = topology.add_pcie_switch(host, n_sw, parent=top)
            n_sw += 1
            for lb in sub:
                parent[lb] = sw
    for sub in pix:
        if sub in pxb:   # a PIX group that is its whole switch tree: one switch
            sw = topology.add_pcie_switch(host, n_sw, parent=parent[sub[0]])
            n_sw += 1
            for lb in sub:
                parent[lb] = sw
    gpu_vid = {}
    for d in devs:
        if d.kind == "gpu":
            name = names.get(d.index)
            gtype = gpu_type or (gpu_models.slurm_type(name) if name else None)
            gpu_vid[d.label] = topology.add_gpu(host, d.index, name=name, gpu_type=gtype, parent=parent[d.label])
        else:
            layer = nic_link_layer(d.name)
            if layer is None:
                topology.mark_unknown(host, "nic_link_layer")
            topology.add_nic(host, d.name, link_layer=layer, parent=parent[d.label])
    if m.unnamed_nics:   # NIC0... are the matrix's labels, not device names: nothing may bind by them as if real
        topology.mark_unknown(host, "nic_names")
    if not gpu_type and not names:
        topology.mark_unknown(host, "gpu_model")
    gpus = [d.label for d in m.gpus]
    if m.pcie_only:
        topology.mark_unknown(host, "nvlink")   # `topo -mp` shows no NVLink cell, whatever the GPUs have
    edges: list[tuple[str, str, int, float | None]] = []
    if is_nvswitch_board(m):
        nvs = topology.add_nvswitch(host, 0)
        for a in gpus:
            edges.append((gpu_vid[a], nvs, max(m.link(a, b).nvlinks for b in gpus if b != a), rate(a)))
        topology.add_nvlink_domain(host, list(gpu_vid.values()))
    else:
        for i, a in enumerate(gpus):
            for b in gpus[i + 1:]:
                if m.link(a, b).nvlinks:
                    edges.append((gpu_vid[a], gpu_vid[b], m.link(a, b).nvlinks, rate(a, b)))
    for a, b, links, gbytes in edges:
        topology.link_nvlink(a, b, links, gbytes)
    if any(gbytes is None for *_, gbytes in edges):
        topology.mark_unknown(host, "nvlink_speed")
    fill_cores(topology, host, threads_per_core)


def to_topology(m: TopoMatrix, host: str, nvlink_status: tuple[GpuNvlinks, ...] = (),
                gpu_type: str | None = None, threads_per_core: int | None = None):
    from slurmtools.topology.graph import Topology

    t = Topology(host)
    add_to(t, m, host, nvlink_status, gpu_type, threads_per_core)
    return t
