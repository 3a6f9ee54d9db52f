"""Parsable Slurm dumps (`sacct -P`, `sacct -p --delimiter=X`, `sacctmgr -P`): the delimiter, the header and lines
whose values hold the delimiter. Every reader of such a dump (reports, policy replay, capacity events) goes through
here, so the delimiter is found once, the same way, from the header line.

A header line is field names (letters, digits, `_`) separated by one delimiter; `--parsable` (`-p`) also ends
every line with it. The delimiter is whatever separates the first two names, and must separate all of them.

sacct does not quote: a value that holds the delimiter (a `,` in AllocTRES or NodeList under `--delimiter=,`, a
`|` in a job name) makes more pieces than fields. `Splitter` puts such a line back together from what each field
can hold (a TRES list is `name=value` items with every name once, a hostlist keeps its `,` inside brackets, a
time is a time...), and refuses the line when no split, or more than one, fits. Where several fit, the one that
keeps every TRES list in sacct's own order (its items sorted) is taken when it is the only one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurmtools.errors import ParseError

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_SEP = re.compile(r"[^A-Za-z0-9_]+")


class HeaderMismatch(ParseError):
    """The header does not match the dump's lines: a fault of the whole dump, which a reader that skips bad lines
    must not skip line by line."""


@dataclass(frozen=True)
class Header:
    names: list[str]  # as written (case kept), without the empty name a trailing delimiter makes
    delimiter: str
    trailing: bool  # `--parsable`: every line ends with the delimiter

    def lower(self) -> list[str]:
        return [n.lower() for n in self.names]

    def missing(self, wanted, source: str, hint: str, what: str = "") -> None:
        """Raise one line naming the fields of `wanted` (names as Slurm spells them; a tuple is alternatives,
        any one will do) the header lacks, and what was read. `what`: "sacct " names the kind of field."""
        have = set(self.lower())
        lack = []
        for w in wanted:
            alts = (w,) if isinstance(w, str) else tuple(w)
            if not any(a.lower() in have for a in alts):
                lack.append(" or ".join(alts))
        if lack:
            read = f"read {len(self.names)} field(s) separated by {self.delimiter!r}"
            raise ParseError(source, 1, f"the header line lacks {what}field(s) {', '.join(lack)} ({read}); {hint}")


def decode_dump(data: bytes, source: str) -> tuple[str, list[str]]:
    """A dump's text, and a note when some of its lines held bytes that are not UTF-8 (a job name written in
    Latin-1): they read as U+FFFD, as the report reads them, so one such name does not refuse the whole dump; a field
    a reader checks (a user, a time) fails its own check there, naming the line."""
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        first = data.count(b"\n", 0, exc.start) + 1
    bad = 0
    for ln in data.split(b"\n"):
        try:
            ln.decode("utf-8")
        except UnicodeDecodeError:
            bad += 1
    return data.decode("utf-8", errors="replace"), [
        f"{source}: {bad} line(s) held bytes that are not UTF-8 (first: line {first}), read as U+FFFD"]


def read_header(line: str, source: str, fields: str = "JobID|State|...",
                writer: str = "`sacct -P` or `sacct -p --delimiter=X`") -> Header:
    """The delimiter and field names of a parsable dump's first line; one line naming the file when the line is
    not field names separated by one delimiter. `fields` and `writer`, for the messages: what such a header looks
    like and what writes one (sacct's by default; `sacctmgr -P show event ...` for event dumps)."""
    text = line.rstrip("\r\n")
    first = _NAME.match(text)
    if not first:
        # a first line of values: the dump was written without its header (`-n`, `--noheader`)
        nohead = " (written with -n / --noheader? write it with the header)" if "|" in text else ""
        raise ParseError(source, 1, f"expected a header line of field names ({fields}), got {text[:60]!r}{nohead}; "
                                    f"as {writer} writes it")
    if first.end() == len(text):
        return Header([text], "|", False)  # one field: nothing to tell the delimiter by
    delim = _SEP.match(text, first.end()).group(0)
    if delim.strip(" ") == "":
        # field names padded with blanks: sacct's default table (`-o name%width`), which cuts values to their
        # column's width and pads them with blanks no value can be told from
        raise ParseError(source, 1, f"a table of blank-padded columns ({text[:40].rstrip()!r}...: the default "
                                    f"output of sacct and sacctmgr), not a parsable dump: write it with {writer}")
    names = text.split(delim)
    trailing = names[-1] == ""
    if trailing:
        names = names[:-1]
    bad = next((n for n in names if not _NAME.fullmatch(n)), None)
    if bad is not None:
        raise ParseError(source, 1, f"cannot tell the delimiter: {delim!r} follows {names[0]!r} but then "
                                    f"{bad[:40]!r} is not a field name; expected field names separated by one "
                                    f"delimiter, as {writer} writes them")
    seen: dict[str, int] = {}
    for i, n in enumerate(names, 1):
        if n.lower() in seen:   # readers take fields by lower-case name: a second one would hide the first
            raise ParseError(source, 1, f"field {n!r} appears twice in the header line (fields {seen[n.lower()]} "
                                        f"and {i}); ask sacct for each field once")
        seen[n.lower()] = i
    return Header(names, delim, trailing)


# ------------------------------------------------------------------------------- lines holding the delimiter

#: what a field's value may look like, by lower-case field name; any other field is one piece, whatever it holds
_TEXT = {"jobname", "comment", "admincomment", "systemcomment", "submitline", "workdir", "constraints", "reason",
         "extra", "container", "stdout", "stderr", "stdin"}
_KIND = {"nodelist": "hosts", "partition": "list", "reqgres": "list", "allocgres": "list", "flags": "list",
         "jobid": "jobid", "jobidraw": "jobid",
         "submit": "time", "eligible": "time", "start": "time", "end": "time", "timestart": "time",
         "timeend": "time", "nnodes": "int", "elapsedraw": "int", "alloccpus": "int", "ncpus": "int",
         "exitcode": "exit", "derivedexitcode": "exit"}
_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d|Unknown|None|")  # `%F %T`: SLURM_TIME_FORMAT
_INT = re.compile(r"-?\d+")
_EXIT = re.compile(r"(?:\d+:\d+)?")
_BRACKETED = r"(?:[^\[\],\s=]|\[[^\[\]=]*\])+"  # a host or job id: `,` only inside brackets
_HOSTS = re.compile(rf"None assigned|{_BRACKETED}(?:,{_BRACKETED})*|")
_JOBID = re.compile(rf"{_BRACKETED}|")
_LIST = re.compile(r"[^,=\s]+(?:,[^,=\s]+)*|")
_MANY = ("text", "tres", "usage", "hosts", "list", "jobid")  # kinds whose value may span pieces
#: more pieces on one line than the header has fields, beyond which no value holding the delimiter explains them
#: (sacct keeps 255 characters of a job name; `--delimiter=,` splits TRES and hostlists into a few hundred pieces
#: at most): such a line is refused before the pieces are fitted to the fields, which takes time growing faster
#: than the pieces (200,000 of them took minutes)
MAX_EXTRA_PIECES = 10_000
#: this many first lines of a dump in a row, each with a free-text field taking extra pieces, mean the header does
#: not match the lines (a field missing from it) far more often than job names that all hold the delimiter
MISMATCH_LINES = 5


def _kind(name: str) -> str:
    n = name.lower()
    if n in _TEXT:
        return "text"
    if n.startswith("tresusage"):
        return "usage"
    if "tres" in n:
        return "tres"
    return _KIND.get(n, "one")


class Splitter:
    """Rejoins the pieces of a line whose values hold the delimiter (see the module docstring)."""

    def __init__(self, header: Header, source: str):
        self.header, self.source = header, source
        self.kinds = [_kind(n) for n in header.names]
        self._kinds_held = tuple(sorted(set(self.kinds) - {"text"}))
        self._class_of: dict[str, int] = {}     # a piece, and its shape -> its class (a number from 1)
        self._class_ids: dict[tuple, int] = {}  # a class's features -> its number
        self._found: dict[tuple[int, ...], list[tuple[int, ...]]] = {}  # classes of a line's pieces -> its splits
        self._texts_from_the_start = 0   # first data lines in a row whose extra pieces a free-text field took

    def pieces(self, line: str) -> list[str]:
        text = line.rstrip("\r\n")
        d = self.header.delimiter
        if self.header.trailing and text.endswith(d):
            text = text[:-len(d)]
        return text.split(d)

    def split(self, line: str, lineno: int | None) -> list[str]:
        """The line's values, one per header field; one line naming file and line when it cannot be split."""
        parts = self.pieces(line)
        n, d = len(self.kinds), self.header.delimiter
        if len(parts) == n:
            return parts
        if len(parts) - n > MAX_EXTRA_PIECES:
            raise ParseError(self.source, lineno, f"{len(parts) - 1} {d!r} on one line for {n} fields: no value "
                                                  f"holds that many; is this a `sacct --parsable2` dump?")
        found = self._splits_of(parts) if len(parts) > n else []
        if len(found) == 1:
            self._header_matches(found[0], lineno)
            return found[0]
        if not found:
            why = "" if len(parts) < n else (f", and no field that can hold {d!r} (JobName, TRES, NodeList, ...) "
                                             f"takes the extra pieces")
            raise ParseError(self.source, lineno, f"expected {n} fields separated by {d!r}, got {len(parts)}{why}")
        differ = [self.header.names[i] for i in range(n) if found[0][i] != found[1][i]]
        raise ParseError(self.source, lineno, f"{d!r} occurs inside values and the line splits into fields in more "
                                              f"than one way ({', '.join(differ)} differ); dump with a "
                                              f"--delimiter no value holds (`sacct -P` writes '|')")

    def _header_matches(self, values: list[str], lineno: int | None) -> None:
        """Refuse the dump when its first MISMATCH_LINES lines in a row (line 2 on) each needed a free-text field to
        take extra pieces: a header one field short, its lines still holding that field, is read that way with
        every later field shifted by one (the user in the account's place...), which no single line shows."""
        d = self.header.delimiter
        texts = [self.header.names[i] for i, v in enumerate(values) if self.kinds[i] == "text" and d in v]
        if not texts or lineno != 2 + self._texts_from_the_start:
            return
        self._texts_from_the_start += 1
        if self._texts_from_the_start >= MISMATCH_LINES:
            raise HeaderMismatch(self.source, 1, f"lines 2-{lineno} all hold more {d!r}-separated pieces than the "
                                                 f"header's {len(self.kinds)} fields, with {texts[0]} taking them "
                                                 f"every time: the header does not match the lines (a field missing "
                                                 f"from it?); if those {texts[0]} values do hold {d!r}, dump with a "
                                                 f"--delimiter no value holds")

    def _splits_of(self, parts: list[str]) -> list[list[str]]:
        """`_search(parts)`, searched once per sequence of piece classes (`_piece_class`).

        Why: the search tries a few hundred spans per line (0.4 ms), and a dump's lines hold the delimiter in the
        same few ways (TRES lists of the same names, hostlists, job names), so lines of one sequence share the
        answer: it is kept as the number of pieces each field takes, and a line in the same classes is cut the
        same way. tests/unit/test_slurm_parsing.py holds this to `_splits` on generated lines."""
        shapes, cls = self._class_of, self._piece_class
        sig = tuple([shapes.get(p) or cls(p) for p in parts])
        counts = self._found.get(sig)
        if counts is None:
            found = self._search(parts)
            if len(self._found) >= _MAX_REMEMBERED:
                self._found.clear()
            self._found[sig] = [tuple(len(v.split(self.header.delimiter)) for v in f) for f in found]
            return found
        d, out = self.header.delimiter, []
        for ks in counts:
            pi, values = 0, []
            for k in ks:
                values.append(d.join(parts[pi:pi + k]))
                pi += k
            out.append(values)
        return out

    def _search(self, parts: list[str]) -> list[list[str]]:
        """`_splits(parts)`; where it finds more than one, the one split whose TRES lists are in the order sacct
        writes them, if only one is (a step's AllocTRES `cpu=..,node=1` before ReqTRES `billing=..,cpu=..` could
        otherwise hand `billing` to either)."""
        found = self._splits(parts)
        if len(found) > 1:
            ordered = self._splits(parts, ordered=True)
            if len(ordered) == 1:
                return ordered
        return found

    def _piece_class(self, piece: str) -> int:
        """The class of a piece: pieces of one class fit or do not fit every field alike, alone or joined with their
        neighbours (the same `_fits` answer for every span, the same flags in `_splits`), so lines whose pieces
        are in the same classes split the same way. A class is a number; its features are:

        - each field kind's answer for the piece alone (`_fits`), and whether it starts with a digit or holds `,`;
        - under `,` (the only delimiter a non-text value holds, so the only one that joins pieces of one): the
          TRES name it carries (names must differ within a list) and how it moves the hostlist/job id pattern
          between "an item must start", "inside an item" and "inside brackets" (the pattern's whole state).
          Whether it can be a list item, holds `=` or is empty, the answers alone already tell.

        Pieces are looked up by shape, digits 0-8 written as 9 (no field tells one digit from another), a TRES
        name kept as written (names may differ only in digits: gres/gpu:a100, gres/gpu:a800)."""
        d = self.header.delimiter
        name, eq, rest = piece.partition("=")
        if not eq:
            shape = piece.translate(_NINES)
        elif "," in rest:
            shape = piece  # a whole TRES list in one piece (another delimiter): its later names are names too
        else:
            shape = name + eq + rest.translate(_NINES)
        got = self._class_of.get(shape)
        if got is not None:
            self._class_of[piece] = got
            return got
        alone = tuple(_fits(kind, shape, d, ordered) for kind in self._kinds_held for ordered in (False, True))
        features: tuple = (alone, shape[:1].isdigit(), "," in shape)
        if d == ",":
            features += (name if eq and name else None, tuple(_host_walk(shape, s) for s in range(3)))
        got = self._class_ids.setdefault(features, len(self._class_ids) + 1)  # never 0: `or` in `_splits_of`
        if len(self._class_of) >= _MAX_REMEMBERED:
            self._class_of.clear()
        self._class_of[shape] = self._class_of[piece] = got
        return got

    def _splits(self, parts: list[str], ordered: bool = False) -> list[list[str]]:
        """Up to two ways of giving every field its pieces (a depth-first search; dead ends are remembered);
        `ordered`: only ways whose TRES lists are in the order sacct writes them (`_fits`).

        One rule ties two fields: sacct lists several partitions only for a job that has not started (the
        database keeps a started job's own partition: `as_mysql_job_start` in Slurm's accounting plugin)."""
        n, m, d = len(self.kinds), len(parts), self.header.delimiter
        low = self.header.lower()
        part_col = low.index("partition") if "partition" in low else -1
        start_col = low.index("start") if "start" in low else -1
        out: list[list[str]] = []
        dead: set[tuple[int, int, bool, bool]] = set()
        acc: list[str] = []
        # how many pieces the fields after each one take when each takes exactly one (None: one of them may take
        # more): the field before them must take the rest, so only that length is tried
        after: list[int | None] = [None] * n
        fixed = 0
        for ci in range(n - 1, -1, -1):
            after[ci] = fixed
            if fixed is not None:
                fixed = None if self.kinds[ci] in _MANY else fixed + 1

        def go(ci: int, pi: int, several: bool, started: bool) -> None:
            if ci == n:
                if pi == m:
                    out.append(list(acc))
                return
            if (ci, pi, several, started) in dead:
                return
            before = len(out)
            kind = self.kinds[ci]
            most = m - pi - (n - ci - 1) if kind in _MANY else 1
            least = 1 if after[ci] is None else max(1, m - pi - after[ci])
            for k in range(least, most + 1):
                value = d.join(parts[pi:pi + k])
                ok = _fits(kind, value, d, ordered)
                if ok is None:
                    break  # no longer value of this field fits either
                s2 = several or (ci == part_col and "," in value)
                t2 = started or (ci == start_col and value[:1].isdigit())
                if ok and not (s2 and t2):
                    acc.append(value)
                    go(ci + 1, pi + k, s2, t2)
                    acc.pop()
                    if len(out) >= 2:
                        return
            if len(out) == before:
                dead.add((ci, pi, several, started))

        go(0, 0, False, False)
        return out


_NINES = str.maketrans("012345678", "999999999")
#: shapes, classes and lines' answers a Splitter keeps (a dump of endless variety costs memory only up to this)
_MAX_REMEMBERED = 200_000
#: states of `_BRACKETED` items joined by `,` (`_HOSTS`, `_JOBID`): an item must start, inside an item, in brackets
_ITEM_START, _IN_ITEM, _IN_BRACKETS, _NO_MATCH = 0, 1, 2, 3


def _host_walk(piece: str, state: int) -> int:
    """The state after reading `piece` from `state`, for a run of `_BRACKETED` items: what a piece brings to a
    hostlist or job id whatever the pieces around it (a `,` inside the piece cannot occur: it is the delimiter)."""
    for ch in piece:
        if state == _IN_BRACKETS:
            if ch == "]":
                state = _IN_ITEM
            elif ch in "[=":
                return _NO_MATCH
        elif ch == "[":
            state = _IN_BRACKETS
        elif ch in "],=" or ch.isspace():
            return _NO_MATCH
        else:
            state = _IN_ITEM
    return state


def _fits(kind: str, value: str, d: str, ordered: bool = False) -> bool | None:
    """Whether `value` can be a whole value of a field of this kind; None when no longer value can be either.
    `ordered`: a TRES list must also be in sacct's order, its items ascending as strings (sacct sorts them:
    `slurm_char_list_to_xstr` in Slurm's `slurmdb_make_tres_string_from_simple`; with names that differ, the
    order of `name=` decides)."""
    if kind == "text":
        return True
    if d in value and (kind == "one" or d != ","):
        return None  # only free text holds any delimiter; lists, TRES and hostlists hold only `,`
    if kind == "one":
        return True
    if kind in ("tres", "usage"):
        if value == "":
            return True
        items = value.split(",")
        keys = [it.partition("=")[0] for it in items]
        if any("=" not in it or not k for it, k in zip(items, keys)) or len(set(keys)) != len(keys):
            return None  # a TRES list is name=value items, each name once: more pieces cannot mend it
        if kind == "usage" and ("node" in keys or "billing" in keys):
            return None  # usage is measured (cpu, mem, energy, gres/gpuutil...); nodes and billing are allocated
        if ordered and any(a + "=" >= b + "=" for a, b in zip(keys, keys[1:])):
            return None
        return True
    if kind in ("hosts", "list", "jobid") and ("=" in value or (kind == "list" and ",," in value)):
        return None  # no host, list item or job id holds `=`, nor a list an empty item: more pieces keep them
    pattern = {"hosts": _HOSTS, "list": _LIST, "jobid": _JOBID, "time": _TIME, "int": _INT, "exit": _EXIT}[kind]
    return pattern.fullmatch(value) is not None


# ------------------------------------------------------------------------------- dumps of several clusters

def pick_cluster(source: str, clusters, wanted: str | None, who: str = "the site file", what: str = "jobs",
                 command: str = "sacct -M {}") -> str:
    """The one cluster a reader keeps of a dump holding `what` (jobs, events) of several (`sacct -L`, `sacct -M a,b`,
    a federation's `--federation`, `sacctmgr show event` of all clusters): job ids are per cluster, and a site (a
    report's capacity, a policy's QoS, a sandbox's lab) is one of them. `wanted` when the dump holds it; else one
    line naming what the dump holds and how to dump one (`command` with the cluster's name in its `{}`)."""
    names = sorted(set(clusters))
    if wanted is not None and wanted in names:
        return wanted
    held = f"{len(names)} clusters ({', '.join(names)})" if len(names) > 1 else f"cluster {names[0]} only"
    if wanted is None:
        raise ParseError(source, None, f"the dump holds {what} of {held} and job ids are per cluster: dump one with "
                                       f"`{command.format('NAME')}`")
    raise ParseError(source, None, f"the dump holds {what} of {held} and none of {wanted}, the cluster {who} names "
                                   f"(cluster_name): dump it with `{command.format(wanted)}`")
