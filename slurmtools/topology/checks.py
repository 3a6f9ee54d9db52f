"""Checks: a discovered topology against the declared one (`topo diff`), one topology on its own (`topo lint`),
and a gres.conf against a topology (the Cores=/Links= mismatch that drains nodes when slurmd starts).

Each problem is one `Finding` with a stable `code`, the host or switch it is about, and one line of text, so the
CLI can print them, emit JSON, and exit non-zero from cron. Pure: the gres.conf text is passed in.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import hostlist as _hl

from slurmtools.errors import ParseError, one_line, whole_number
from slurmtools.topology import queries as q
from slurmtools.topology.cpu_layout import CPU_ID_LIMIT
from slurmtools.topology.graph import Topology, _natural
from slurmtools.topology.slurm_topology_conf import slurm_hostlist


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
            # fewer from a source that may list some of the node's devices (a job's NCCL dump) is no count
            if not (len(xg) < len(dg) and "devices" in discovered.unknown(h)):
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
        if "nic_names" in discovered.unknown(h) or "nic_names" in declared.unknown(h):
            continue   # NIC0... are a matrix's labels: no name to compare by
        dn, xn = q.nic_numa(declared, h), q.nic_numa(discovered, h)
        for nic, numa in xn.items():
            if nic not in dn:
                continue
            if numa and dn[nic] and set(numa) != set(dn[nic]):
                out.append(Finding("nic-numa", h, f"NIC {nic} is on NUMA node {_r(numa)}, declared {_r(dn[nic])}"))
        if xn and "devices" not in discovered.unknown(h):   # (a source listing some devices: none missing)
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


@dataclass
class GresConf:
    """What a gres.conf says, read as slurmd reads it (`_parse_gres_config` in Slurm's `src/interfaces/gres.c`)."""
    gpus: list[GresGpu]
    #: (line, why) of Name=gpu lines that name no /dev/nvidiaN device, so no GPU index to compare
    skipped: list[tuple[int, str]]
    #: lines for other GRES (mps, shard, nic, ...)
    other: int = 0
    #: AutoDetect= by node (None: the file-wide one), as the flag slurmd takes: nvml, rsmi, oneapi, nrt, nvidia, off
    autodetect: dict[str | None, str] = field(default_factory=dict)


#: the keys of a gres.conf line (Slurm's `_gres_options`; CPUs= is the old name of Cores=, Link= of Links=)
GRES_KEYS = ("AutoDetect", "Count", "CPUs", "Cores", "File", "Files", "Flags", "Link", "Links", "MultipleFiles",
             "Name", "NodeName", "Type")
_KEYS = {k.lower(): k for k in GRES_KEYS}
# Slurm's keyvalue_pattern; its [[:space:]] is C's isspace, the ASCII blanks (re.ASCII: not \x85 or \u2028)
_KV = re.compile(r'\s*([A-Za-z0-9_.]+)\s*=\s*(?:"([^"]*)"|(\S+))(?=\s|$)', re.ASCII)
_BLANKS = " \t\n\r\f\v"
# the GPU's device file: /dev/nvidiaN, or nvidiaN in another folder (a lab's or container's device tree)
_NVIDIA_DEV = re.compile(r"(?:.*/)?nvidia([0-9]+)")
#: Count= as slurmd reads it: digits and one of `suffix_mult`'s suffixes (k and kib 1024, kb 1000, ... up to p)
_COUNT = re.compile(r"([0-9]{1,100})([kmgtp](?:ib|b)?)?", re.IGNORECASE)
#: the GRES whose Count= may differ from the number of its files (`gres_is_shared_name`, compared in this case)
_SHARED = ("mps", "shard")
#: the keys slurmd reads one of when both are on a line (`s_p_get_string(Cores) || ...(CPUs)`): the first wins
_ONE_OF = (("Cores", "CPUs"), ("File", "Files"), ("Link", "Links"))
#: AutoDetect= values as `_handle_autodetect_flags` tries them: the first found in the value, any case; `off` whole
_AUTODETECT = ("nvml", "rsmi", "oneapi", "nrt", "nvidia")
#: the value a skipped line's reason quotes (`File=/dev/x is not ...`), left out to tell lines skipped alike
_SKIPPED_VALUE = re.compile(r"\A(File|Files)=.*?(?= is )")
GRES_MAX_LINK = 1023  # src/interfaces/gres.h: the most links one Links= value may count
#: the most (node, GPU) pairs one file may declare, about 8 times the GPUs of a 16,384-host x 8-GPU cluster:
#: every line's NodeName= hostlist times its File= devices, so two large ranges on one line (each under the
#: hostlist cap) would otherwise multiply into billions. Other unshared GRES' (node, device file) pairs count
#: too: the reader holds them per node to find a device listed twice
GRES_GPU_LIMIT = 1 << 20


def _shown(value: str) -> str:
    """A value as a message quotes it: at most 40 characters (a garbled one can be a whole line)."""
    return repr(value) if len(value) <= 40 else repr(value[:40]) + f"... ({len(value)} characters)"


def _cores(value: str, source: str, lineno: int, key: str) -> tuple[int, ...]:
    """Cores=/CPUs=: core ids and ranges `0-7,16`, ASCII digits, each range ascending, every id below
    CPU_ID_LIMIT (a range up to `99999999999` would fill the memory)."""
    out: list[int] = []
    for part in value.split(","):
        a, dash, b = part.partition("-")
        try:
            lo = whole_number(a)
            hi = whole_number(b) if dash else lo
        except ValueError:
            raise ParseError(source, lineno, f"{key}: expected integers and ranges such as 0-7,16, got "
                                             f"{_shown(value)}") from None
        if hi < lo or hi >= CPU_ID_LIMIT:
            why = f"{part} runs backwards" if hi < lo else f"ids stay below {CPU_ID_LIMIT}"
            raise ParseError(source, lineno, f"{key}: expected integers and ranges such as 0-7,16 ({why}), got "
                                             f"{_shown(value)}")
        out.extend(range(lo, hi + 1))
    return tuple(out)


def _links(value: str, source: str, lineno: int, key: str) -> tuple[int, ...]:
    """Links=: one NVLink count per GPU of the node, comma-separated, -1 for the GPU itself. slurmd reads each
    with strtol and refuses a value below -2 or anything else between the commas, a range included."""
    try:
        out = tuple(whole_number(v, signed=True) for v in value.split(","))
    except ValueError:
        out = ()
    if not out or min(out) < -2:
        raise ParseError(source, lineno, f"{key}: expected integers, one link count per GPU such as -1,18,18 (-2 "
                                         f"or more, no ranges), got {_shown(value)}")
    # gres_links_validate: slurmd ignores (logs and drops) Links= without exactly one -1 or with a count past 1023
    why = ("no -1 for the GPU itself" if -1 not in out else "-1 (the GPU itself) more than once"
           if out.count(-1) > 1 else f"{max(out)} links, more than {GRES_MAX_LINK}" if max(out) > GRES_MAX_LINK
           else None)
    if why:
        raise ParseError(source, lineno, f"{key}={_shown(value)}: {why}; slurmd ignores such a {key}= (it logs "
                                         "'Ignoring invalid Links')")
    return out


def _autodetect(value: str, source: str, lineno: int) -> str:
    """The AutoDetect= flag slurmd takes from `value`; one it does not know is refused (slurmd only logs 'unknown
    autodetect flag' and detects nothing, where the file seems to ask for detection)."""
    low = value.lower()
    for flag in _AUTODETECT:
        if flag in low:
            return flag
    if low == "off":
        return "off"
    raise ParseError(source, lineno, f"AutoDetect={_shown(value)}: slurmd knows {', '.join(_AUTODETECT)} and off, "
                                     "and ignores anything else ('unknown autodetect flag')")


def _count_value(m: re.Match) -> int:
    """A Count= match as `suffix_mult` scales it: k, kib 1024; kb 1000; and so on up to p, pib, pb."""
    suffix = (m.group(2) or "").lower()
    if not suffix:
        return int(m.group(1))
    power = "kmgtp".index(suffix[0]) + 1
    return int(m.group(1)) * (1000 if suffix.endswith("b") and not suffix.endswith("ib") else 1024) ** power


def _files(value: str, source: str, lineno: int, key: str) -> list[str]:
    """File=/Files=/MultipleFiles=: a hostlist of paths, split where Slurm's hostlist splits (blanks too), a path
    given twice kept twice: slurmd's hostlist_create joins only adjacent ranges (`hostlist_push_range`), so
    `/dev/nvidia[0,0]` and `/dev/nvidia0,/dev/nvidia0` are two names to `_validate_file`'s count (Count=2)."""
    try:
        names = slurm_hostlist(value)   # checked and capped as every hostlist; it drops repeats
    except ValueError as exc:
        raise ParseError(source, lineno, f"{key}: {exc}") from None
    if not names:
        return names
    # the same expression with its repeats: the library caps each part with them counted, and slurm_hostlist the
    # parts' sum before dropping any, so this list is no longer than MAX_NAMES either
    return _hl.expand_hostlist(",".join(re.split(r"[\t \n]+", value.strip(" \t\n"))), allow_duplicates=True)


def _logical_lines(text: str):
    """(first line number, text) of each line as Slurm's parser sees it: an unescaped `#` starts a comment, a
    line ending in an odd number of backslashes goes on on the next line, and a backslash escapes the character
    after it."""
    buf, first = "", None
    # slurmd reads lines up to each \n and drops the \r and \n at their end: no other character ends a line
    rows = text.split("\n")
    if rows and rows[-1] == "":
        rows.pop()
    for lineno, raw in enumerate(rows, 1):
        raw = raw.rstrip("\r")
        line, bs = raw, 0
        for i, ch in enumerate(raw):
            if ch == "#" and bs % 2 == 0:
                line = raw[:i]
                break
            bs = bs + 1 if ch == "\\" else 0
        stripped = line.rstrip()
        tail = len(stripped) - len(stripped.rstrip("\\"))
        first = lineno if first is None else first
        if tail % 2:
            buf += stripped[:-1]
            continue
        yield first, re.sub(r"\\(.)", r"\1", buf + line)
        buf, first = "", None
    if first is not None:
        yield first, re.sub(r"\\(.)", r"\1", buf)


def _key_values(line: str, source: str, lineno: int) -> list[tuple[str, str]]:
    pairs, pos = [], 0
    while line[pos:].strip(_BLANKS):
        m = _KV.match(line, pos)
        if not m:
            raise ParseError(source, lineno, f"expected Key=Value, got {line[pos:].strip(_BLANKS)[:40]!r}")
        key = _KEYS.get(m.group(1).lower())
        if key is None:
            raise ParseError(source, lineno, f"unknown key {_shown(m.group(1))}: a gres.conf line holds "
                                             f"{', '.join(GRES_KEYS)}")
        if any(k == key for k, _ in pairs):
            raise ParseError(source, lineno, f"{key}= given twice")
        pairs.append((key, m.group(2) if m.group(2) is not None else m.group(3)))
        pos = m.end()
    return pairs


def read_gres_conf(text: str, source: str = "gres.conf") -> GresConf:
    """A gres.conf as slurmd reads it: comments, backslash continuations, quoted values, keys in any case, NodeName=
    hostlists, File= device lists (`/dev/nvidia[0-3]`, blanks in a quoted list separating), Cores=/CPUs=,
    Links=/Link=, AutoDetect= on its own line or on a NodeName= line, Count= with `suffix_mult`'s suffixes. What it
    cannot read fails with `file:line: what was expected`: numbers are ASCII digits (at most 100), Cores= ids stay
    below CPU_ID_LIMIT, Links= holds counts of -2 or more, a hostlist names at most `hostlist.MAX_NAMES` nodes or
    files and the file at most GRES_GPU_LIMIT (node, GPU) pairs. Refused too, where slurmd would stop or silently
    drop part of the line: both keys of a pair slurmd reads one of (Cores/CPUs, File/Files, Link/Links), an in-line
    AutoDetect= without NodeName=, an AutoDetect= value slurmd does not know or that contradicts an earlier one,
    Links= without exactly one -1 or past 1023, File= with MultipleFiles=, MultipleFiles= of one file, Count=
    other than the number of File= devices (gpu and other unshared GRES; a device listed twice counts twice, as
    slurmd counts it), and a device a node gets twice under one name, on one line (`File=/dev/nvidia[0,0]`) or
    two (a NodeName= line and a line for every node both naming /dev/nvidia0): slurmd stops at it ('duplicate
    device file name'), and two files of one GPU index (/dev/nvidia0, /dev/nvidia00) would be two GPUs to slurmd
    and one here. mps and shard lines, which name the GPUs they share, and MultipleFiles= are not held to it
    (slurmd's check leaves MultipleFiles= out too)."""
    out = GresConf([], [])
    if text.startswith("\ufeff"):
        raise ParseError(source, 1, "starts with a byte-order mark (U+FEFF), which slurmd reads as part of the first "
                                    "key: save the file without it")
    if "\x00" in text:
        at = text.index("\x00")
        raise ParseError(source, text.count("\n", 0, at) + 1, "a NUL character: slurmd reads the line only up to "
                                                              "it")
    autodetect_at: dict[str | None, int] = {}   # node (None: file-wide) -> line of its AutoDetect=
    # the devices each node has been given so far, as slurmd's `_foreach_fill_in_gres_devices` collects them per
    # GRES name across all of the node's lines: (name, device) -> node (None: every node) -> (line, device file).
    # A GPU's device is its index (two files of one index are one GPU to the comparison), any other its path.
    given: dict[tuple[str, int | str], dict[str | None, tuple[int, str]]] = {}
    given_n = 0   # (node, device) pairs in `given`, capped at GRES_GPU_LIMIT

    def earlier(seen: dict, nodes: list) -> tuple[str | None, tuple[int, str]] | None:
        """(node, (line, file)) where an earlier entry of `seen` gives one of `nodes` the device again."""
        if None in seen:   # a line for every node came first
            return nodes[0], seen[None]
        if nodes[0] is None:   # this line is for every node
            n = next(iter(seen))
            return n, seen[n]
        if seen.keys().isdisjoint(nodes):
            return None
        n = next(n for n in nodes if n in seen)
        return n, seen[n]

    def give(name: str, files: list[str], nodes: list, lineno: int, key: str, value: str) -> None:
        """Refuse a device a node already has under `name`: slurmd stops at the same file twice ('duplicate
        device file name'), and a GPU index under two files would be two GPUs to slurmd and one here."""
        nonlocal given_n
        gpu = name.lower() == "gpu"
        if given_n + len(files) * len(nodes) > GRES_GPU_LIMIT:
            raise ParseError(source, lineno, f"more than {GRES_GPU_LIMIT} (node, {'GPU' if gpu else 'device'}) "
                                             f"pairs in the file: this line adds {len(nodes)} node(s) x "
                                             f"{len(files)} device(s)")
        given_n += len(files) * len(nodes)
        for f in files:
            m = _NVIDIA_DEV.fullmatch(f) if gpu else None
            index = int(m.group(1)) if m and len(m.group(1)) <= 100 else None
            seen = given.setdefault(("gpu", index) if index is not None else (name, f), {})
            hit = earlier(seen, nodes) if seen else None
            if hit:
                n, (at, other) = hit
                where = "every node" if n is None else f"node {_shown(n)}"
                if other == f and at == lineno:
                    raise ParseError(source, lineno, f"{key}={_shown(value)} names {_shown(f)} twice: slurmd counts "
                                                     f"two {name} devices, then stops ('duplicate device file "
                                                     "name'); list each device once")
                if other == f:
                    raise ParseError(source, lineno, f"{key}: {_shown(f)} for {where} again (line {at} lists it): "
                                                     "slurmd stops ('duplicate device file name'); list each "
                                                     "device once")
                first = "this line" if at == lineno else f"line {at}"
                raise ParseError(source, lineno, f"{key}: {_shown(f)} is GPU {index} for {where}, which {first} "
                                                 f"names {_shown(other)}: slurmd counts two GPUs, one per file; "
                                                 "name each GPU by one file")
            seen.update(dict.fromkeys(nodes, (lineno, f)))

    def set_autodetect(nodes, value: str, lineno: int) -> None:
        flag = _autodetect(value, source, lineno)
        for n in nodes:
            if out.autodetect.get(n, flag) != flag:
                before = f"after AutoDetect={out.autodetect[n]} at line {autodetect_at[n]}"
                if n is None:   # slurmd keeps the last file-wide one and only logs 'specified more than once'
                    raise ParseError(source, lineno, f"AutoDetect={flag} {before}: slurmd keeps only the last "
                                                     "file-wide one; write one")
                raise ParseError(source, lineno, f"AutoDetect={flag} for node {_shown(n)} {before}: slurmd stops "
                                                 "('duplicate node-local AutoDetect specification does not match "
                                                 "the first')")
            out.autodetect[n] = flag
            autodetect_at.setdefault(n, lineno)

    for lineno, line in _logical_lines(text):
        if not line.strip(_BLANKS):
            continue
        if re.match(r"\s*include\s", line, re.IGNORECASE | re.ASCII):
            raise ParseError(source, lineno, "Include: the included file is not read here; check it on its own")
        pairs = _key_values(line, source, lineno)
        first = pairs[0][0]
        kv = dict(pairs)
        if first not in ("NodeName", "Name", "AutoDetect"):
            raise ParseError(source, lineno, f"a line starts with NodeName=, Name= or AutoDetect=, got {first}=")
        if first == "AutoDetect":
            if len(pairs) > 1:
                raise ParseError(source, lineno, "a line that starts with AutoDetect= holds nothing else (Slurm "
                                                 "reads the rest only after NodeName= or Name=)")
            set_autodetect([None], kv["AutoDetect"], lineno)
            continue
        if "NodeName" in kv and first != "NodeName":
            raise ParseError(source, lineno, "NodeName= must come first on its line")
        for first_key, dropped in _ONE_OF:
            if first_key in kv and dropped in kv:
                raise ParseError(source, lineno, f"{first_key}= and {dropped}= on one line: slurmd reads {first_key}= "
                                                 f"and drops {dropped}= without a word; keep one")
        try:   # split where Slurm's hostlist splits: `NodeName="n1 n2"` is two nodes
            nodes: list[str | None] = slurm_hostlist(kv["NodeName"]) if "NodeName" in kv else [None]
        except ValueError as exc:
            raise ParseError(source, lineno, f"NodeName: {exc}") from None
        if "NodeName" in kv and not nodes:
            raise ParseError(source, lineno, "NodeName: expected a node name or hostlist, got nothing")
        if "AutoDetect" in kv:
            if "NodeName" not in kv:
                raise ParseError(source, lineno, "AutoDetect= on a line without NodeName=: slurmd ignores it there "
                                                 "('In-line AutoDetect requires NodeName'); give it a line of its "
                                                 "own, or a NodeName=")
            set_autodetect(nodes, kv["AutoDetect"], lineno)
        if "Name" not in kv:
            if "AutoDetect" not in kv:
                raise ParseError(source, lineno, "expected Name= (the GRES this line declares, e.g. Name=gpu)")
            rest = [k for k in kv if k not in ("NodeName", "AutoDetect")]
            if rest:   # _parse_gres_config drops the record without Name=, keeping only the AutoDetect=
                raise ParseError(source, lineno, f"{'= '.join(rest)}= without Name=: slurmd takes only AutoDetect= "
                                                 "from this line and drops the rest without a word; add Name=")
            continue
        count = _COUNT.fullmatch(kv["Count"]) if "Count" in kv else None
        if "Count" in kv and not count:
            raise ParseError(source, lineno, f"Count: expected a number (suffix K, M, G, T or P), got "
                                             f"{_shown(kv['Count'])}")
        file_key = "File" if "File" in kv else "Files"
        if "MultipleFiles" in kv:
            if file_key in kv:
                raise ParseError(source, lineno, f"{file_key}= and MultipleFiles= on one line: slurmd stops ('File "
                                                 "and MultipleFiles options are mutually exclusive')")
            if len(_files(kv["MultipleFiles"], source, lineno, "MultipleFiles")) < 2:
                raise ParseError(source, lineno, "MultipleFiles= names one file: slurmd stops ('MultipleFiles does "
                                                 "not contain multiple files. Use File instead')")
        files = _files(kv[file_key], source, lineno, file_key) if file_key in kv else None
        if count and kv["Name"] not in _SHARED and (file_key in kv or "MultipleFiles" in kv):
            # slurmd stops when Count= differs from the devices File= names (MultipleFiles= is one device)
            devices = len(files) if files is not None else 1
            if _count_value(count) != devices:
                raise ParseError(source, lineno, f"Count={_shown(kv['Count'])}, but "
                                                 f"{file_key if file_key in kv else 'MultipleFiles'}= names "
                                                 f"{devices} device(s): slurmd stops ('count does not match File "
                                                 "value')")
        cores_key = "Cores" if "Cores" in kv else "CPUs"
        cores = _cores(kv[cores_key], source, lineno, cores_key) if cores_key in kv else None
        links_key = "Links" if "Links" in kv else "Link"
        links = _links(kv[links_key], source, lineno, links_key) if links_key in kv else None
        if files and kv["Name"] not in _SHARED:   # mps and shard name the GPUs they share; MultipleFiles= is
            give(kv["Name"], files, nodes, lineno, file_key, kv[file_key])   # left out of slurmd's check too
        if kv["Name"].lower() != "gpu":
            out.other += 1
            continue
        if "MultipleFiles" in kv:
            out.skipped.append((lineno, "MultipleFiles= (one GPU over several device files) is not compared"))
            continue
        if file_key not in kv:
            out.skipped.append((lineno, "Name=gpu without File= names no GPU index"))
            continue
        if not files:
            raise ParseError(source, lineno, f"{file_key}: expected a device path such as /dev/nvidia0")
        devices = [_NVIDIA_DEV.fullmatch(f) for f in files]
        if not all(devices):
            bad = files[devices.index(None)]
            bad = bad if len(bad) <= 60 else f"{bad[:60]}... ({len(bad)} characters)"
            why = ("is a MIG instance (/dev/nvidia-caps), not a whole GPU: not compared"
                   if all("nvidia-caps/" in f for f in files)
                   else "is not an NVIDIA device /dev/nvidiaN, so no GPU index")
            out.skipped.append((lineno, f"{file_key}={bad} {why}"))
            continue
        try:
            indices = [whole_number(m.group(1)) for m in devices]
        except ValueError:
            bad = next(m.group(0) for m in devices if len(m.group(1)) > 100)
            raise ParseError(source, lineno, f"{file_key}: the device number of {_shown(bad)} has more than 100 "
                                             f"digits") from None
        for i in indices:   # within GRES_GPU_LIMIT and each (node, GPU) once: `give` saw to both
            for n in nodes:
                out.gpus.append(GresGpu(n, i, lineno, kv.get("Type"), cores, links))
    return out


def parse_gres_conf(text: str, source: str = "gres.conf") -> list[GresGpu]:
    """The GPUs a gres.conf declares by device (see `read_gres_conf`)."""
    return read_gres_conf(text, source).gpus


@dataclass
class GresCheck:
    """A gres.conf against a topology: the findings, and what was compared (so nothing passes by comparing
    nothing)."""
    findings: list[Finding]
    hosts: list[str]  # topology hosts whose GPUs were compared
    gpus: int  # GPUs compared
    cores: int  # of them, with Cores= compared to the capture
    links: int  # of them, with Links= compared
    absent: list[str]  # nodes the file names that the topology does not have
    absent_lines: int  # Name=gpu lines skipped because none of their nodes is in the topology
    no_gpus: list[str]  # hosts the file names that have no GPU in the topology (a fabric-only source)
    conf: GresConf
    left_to_driver: int = 0  # GPUs without a line on hosts under AutoDetect (slurmd finds them), not findings
    #: hosts whose GPUs were matched to File= by index: the source states no device minor (said, not assumed)
    by_index: list[str] = field(default_factory=list)

    def summary(self, topology: str) -> str:
        """One line: what was compared, and what was not and why."""
        from slurmtools.hostlist import compress

        parts = [f"compared {self.gpus} GPU(s) on {len(self.hosts)} host(s)"
                 + (f" ({compress(self.hosts)})" if self.hosts else "") + f" of topology {topology}"
                 + (f" (Cores= on {self.cores}, Links= on {self.links})" if self.gpus else "")]
        if not self.conf.gpus and not self.conf.skipped:
            auto = ", ".join(f"AutoDetect={v}" + (f" on {n}" if n else "") for n, v in self.conf.autodetect.items())
            parts.append("the file declares no GPU by device (File=/dev/nvidiaN)" + (f"; {auto}" if auto else ""))
        if self.gpus and min(self.cores, self.links) < self.gpus and self.conf.autodetect:
            auto = ",".join(sorted(set(self.conf.autodetect.values())))
            parts.append(f"AutoDetect={auto}: slurmd takes what the file leaves out from the driver")
        if self.absent:
            parts.append(f"node(s) {compress(self.absent)} not in the topology ({self.absent_lines} line(s) "
                         f"skipped whole)")
        if self.no_gpus:
            parts.append(f"host(s) {compress(self.no_gpus)} have no GPU in the topology")
        # lines skipped for one reason are told once: the first with its reason, the others by number (a MIG
        # file has a line per instance)
        alike: dict[str, list[tuple[int, str]]] = {}
        for lineno, why in self.conf.skipped:
            alike.setdefault(_SKIPPED_VALUE.sub(r"\1=", why, count=1), []).append((lineno, why))
        for group in alike.values():
            (lineno, why), rest = group[0], [n for n, _ in group[1:]]
            more = f" and {len(rest) - 3} more" if len(rest) > 3 else ""
            parts.append(f"line {lineno} skipped: {why}" + (f" (and alike: line{'s' if len(rest) > 1 else ''} "
                                                           f"{', '.join(map(str, rest[:3]))}{more})" if rest else ""))
        if self.left_to_driver:
            auto = ",".join(sorted(set(self.conf.autodetect.values()) - {"off"}))
            parts.append(f"{self.left_to_driver} GPU(s) without a line left to AutoDetect={auto}")
        if self.by_index:
            parts.append(f"host(s) {compress(self.by_index)}: /dev/nvidiaN read as GPU index N, as the topology "
                         "states no device minor (an NVML capture, `slurmtools topo capture`, does)")
        return one_line("; ".join(parts))   # names and values from the file may hold \x85, \u2028, a CR

    @property
    def nothing_to_compare(self) -> bool:
        """The file leaves every GPU to the driver (AutoDetect= alone, or with other GRES): nothing of it can
        disagree with the topology, which is not the file failing to match it."""
        return (not self.conf.gpus and not self.conf.skipped and not self.absent
                and any(v != "off" for v in self.conf.autodetect.values()))


def _device_number(g) -> int:
    """The N of the /dev/nvidiaN a gres.conf line names for GPU `g`: its minor, else (unstated) its index."""
    return g.index if g.minor is None else g.minor


def _gpu_named(g) -> str:
    """The GPU as findings name it: by index, and its device where that is another number."""
    return f"GPU {g.index}" + (f" (/dev/nvidia{g.minor})" if _device_number(g) != g.index else "")


def compare_gres(t: Topology, text: str, source: str = "gres.conf") -> GresCheck:
    """A gres.conf against a topology (a capture): per host, every GPU listed, Cores= equal to the cores local to
    the GPU, Links= equal to its NVLink row; and what was compared (hosts, GPUs, skipped lines). A File=
    /dev/nvidiaN is the GPU whose device minor is N; where the topology states no minor, GPU index N, and the
    summary says so (`by_index`)."""
    conf = read_gres_conf(text, source)
    out: list[Finding] = []
    known = set(t.host_names())
    by_host: dict[str, dict[int, GresGpu]] = {}
    absent: set[str] = set()
    absent_lines: set[int] = set()
    for g in conf.gpus:
        if g.node is not None and g.node not in known:
            absent.add(g.node)
            absent_lines.add(g.line)
            continue
        targets = [g.node] if g.node is not None else [h for h in known if t.gpus(h)]
        for h in targets:
            by_host.setdefault(h, {})[g.index] = g
    absent_lines -= {g.line for g in conf.gpus if g.node in known}  # a line with some nodes in is compared
    hosts, no_gpus, by_index, gpus_n, cores_n, links_n, left = [], [], [], 0, 0, 0, 0
    for h in sorted(by_host, key=_natural):
        gpus = t.gpus(h)
        listed = by_host[h]
        if not gpus:
            no_gpus.append(h)  # a fabric-only source: nothing to compare the lines with
            continue
        hosts.append(h)
        if any(g.minor is None for g in gpus):
            by_index.append(h)
        device, gpu = _device_number, _gpu_named
        cores = q.local_cores(t, h)
        matrix = None if "nvlink" in t.unknown(h) else q.slurm_links_rows(t, h)  # unstated: nothing to compare
        detected = conf.autodetect.get(h, conf.autodetect.get(None, "off")) != "off"
        for g in gpus:
            line = listed.get(device(g))
            if line is None:
                if detected:     # slurmd adds the GPUs the driver shows that the file does not list
                    left += 1
                else:
                    out.append(Finding("gres-missing", h, f"{source}: no line for {gpu(g)}"))
                continue
            gpus_n += 1
            where = f"{source}:{line.line}"
            if line.cores is not None and cores[g.index]:
                cores_n += 1
                if tuple(sorted(line.cores)) != cores[g.index]:
                    out.append(Finding("gres-cores", h, f"{where}: {gpu(g)} Cores={_r(line.cores)}, the "
                                                        f"capture has {_r(cores[g.index])}"))
            if line.links is not None and matrix is not None:
                links_n += 1
                if list(line.links) != matrix[g.index]:
                    out.append(Finding("gres-links", h, f"{where}: {gpu(g)} Links="
                                                        f"{','.join(map(str, line.links))}, the capture has "
                                                        f"{','.join(map(str, matrix[g.index]))}"))
        for idx in sorted(set(listed) - {device(g) for g in gpus}):
            what = f"GPU {idx}" if h in by_index else f"/dev/nvidia{idx} (no GPU's device minor)"
            out.append(Finding("gres-extra", h, f"{source}:{listed[idx].line}: {what} is not in the capture"))
    return GresCheck(out, hosts, gpus_n, cores_n, links_n, sorted(absent, key=_natural), len(absent_lines),
                     no_gpus, conf, left, by_index)


def check_gres(t: Topology, text: str, source: str = "gres.conf") -> list[Finding]:
    """`compare_gres`'s findings; a file that matched no GPU of the topology is a finding too (`gres-unmatched`),
    never a silent pass."""
    c = compare_gres(t, text, source)
    if c.gpus == 0 and not c.nothing_to_compare:
        return c.findings + [Finding("gres-unmatched", source, c.summary(t.name))]
    return c.findings
