"""Slurm TRES and GRES strings, parsed into GPU counts by type. Pure.

Forms seen in 22.05: AllocTRES `billing=2,cpu=2,gres/gpu:h100=16,gres/gpu=16,mem=2000M,node=2`;
ReqGRES/TresPerNode `gres:gpu:h100:4`, `gpu:4`, `gres/gpu:2`; node Gres `gpu:h100:8(S:0-1)`;
GresUsed `gpu:h100:3(IDX:0-2)`. From 25.11's source (src/interfaces/gres.c): GresUsed
`gpu:(null):2(IDX:0-1)` for GPUs given by File= without Type=, `shard:h100:3(0/64,3/64)`, node Gres
`gpu:no_consume:4` and `shard:1K` (counts that are multiples of 1024 take K, M, G...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_MEM_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024, "P": 1024 ** 3}
#: the TRES name of a share of a GPU, typed or not (`gres/shard`, `gres/mps:a100`): not a GPU, never counted as one
GPU_SHARE_NAME = r"gres/(?:shard|mps)(?::[^=,]*)?"


#: a size as Slurm prints it: ASCII digits, maybe a fraction (`1.50G`), maybe a unit
_MEM = re.compile(r"([0-9]{1,30}(?:\.[0-9]{1,30})?)([KMGTP]?)")


def parse_mem_mb(text: str) -> float:
    """'2000M' -> 2000.0, '250G' -> 256000.0, '4096' (MB) -> 4096.0; '' -> 0.0. ValueError for anything Slurm does
    not print (`٣G`, `-1M`, `inf`, `1e3`: float() reads them all)."""
    s = text.strip().upper()
    if not s:
        return 0.0
    m = _MEM.fullmatch(s)
    if not m:
        raise ValueError(f"not a size like 2000M or 1.50G: {text[:40]!r}")
    return float(m.group(1)) * _MEM_UNITS.get(m.group(2), 1)


@dataclass(frozen=True)
class Tres:
    """A parsed TRES string. `gpus_by_type` never double-counts the untyped total."""

    cpu: int = 0
    mem_mb: float = 0.0
    nodes: int = 0
    billing: int = 0
    gpus: int = 0
    gpus_by_type: dict[str, int] = field(default_factory=dict)
    other: dict[str, str] = field(default_factory=dict)


def parse_tres(text: str | None) -> Tres:
    """Parse `key=value,...` TRES (AllocTRES, ReqTRES, CfgTRES). Unknown keys are kept in `other`, verbatim.

    ValueError, naming the item, for what Slurm does not print: an item without `=`, or a count (cpu, node,
    billing, gres/gpu) that is not ASCII digits (`٣`, `-1`) or a mem that is not a size; never read as another
    number or as none."""
    from slurmtools.errors import whole_number

    if not text or text in ("(null)", "None"):
        return Tres()
    cpu = nodes = billing = 0
    mem = 0.0
    gpus_total: int | None = None
    by_type: dict[str, int] = {}
    other: dict[str, str] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        k, eq, v = part.partition("=")
        if not eq or not k:
            raise ValueError(f"TRES item {part[:40]!r} is not name=value")
        if k == "mem":
            try:
                mem = parse_mem_mb(v)
            except ValueError:
                raise ValueError(f"TRES mem={v[:40]!r} is not a size like 2000M or 1.50G") from None
            continue
        if k not in ("cpu", "node", "billing", "gres/gpu") and not k.startswith("gres/gpu:"):
            other[k] = v
            continue
        try:
            n = whole_number(v)
        except ValueError:
            raise ValueError(f"TRES {k}={v[:40]!r} is not a count") from None
        if k == "cpu":
            cpu = n
        elif k == "node":
            nodes = n
        elif k == "billing":
            billing = n
        elif k == "gres/gpu":
            gpus_total = n
        else:
            by_type[k.split(":", 1)[1]] = n
    typed = sum(by_type.values())
    if gpus_total is None:
        gpus_total = typed
    if gpus_total > typed:
        # some GPUs were requested without a type: keep them visible as "untyped"
        by_type = {**by_type, "untyped": gpus_total - typed} if by_type else {"untyped": gpus_total}
    return Tres(cpu=cpu, mem_mb=mem, nodes=nodes, billing=billing, gpus=gpus_total, gpus_by_type=by_type,
                other=other)


_GRES_NAME = re.compile(r"[A-Za-z_][\w.-]*", re.ASCII)
#: a GRES type: any name gres.conf gives (`Type=1g.10gb` too), or `(null)` before a count (see `parse_gres`)
_GRES_TYPE = re.compile(r"[A-Za-z0-9_][\w.-]*", re.ASCII)
#: a GRES count as Slurm prints it: ASCII digits, with K/M/G/T/P when a multiple of 1024 (`_get_suffix` in Slurm's
#: src/interfaces/gres.c: a node with 1024 shards prints `shard:1K`)
_GRES_COUNT = re.compile(r"([0-9]{1,30})([KMGTP]?)")
_GRES_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4, "P": 1024 ** 5}
#: the detail in parentheses that ends an item (`(S:0-1)`, `(IDX:0-2)`, `(0/64,3/64)`), never the `(null)` type
_GRES_DETAIL = re.compile(r"\((?!null\))([^()]*)\)$")


def _gres_count(text: str) -> int | None:
    m = _GRES_COUNT.fullmatch(text)
    return int(m.group(1)) * _GRES_UNITS[m.group(2)] if m else None


@dataclass(frozen=True)
class Gres:
    name: str
    type: str | None
    count: int
    #: GPU indexes in use (from `(IDX:0-2,5)`), or socket list for node Gres (`(S:0-1)`), verbatim
    detail: str = ""

    @property
    def indexes(self) -> list[int]:
        """Indexes from an `IDX:` detail (`IDX:0-2,5` -> [0, 1, 2, 5])."""
        m = re.search(r"IDX:([^()\s]*)", self.detail)
        if m is None or m.group(1) in ("", "N/A"):
            return []
        if not re.fullmatch(r"[0-9,\-]+", m.group(1)):   # `\d` would read `٣` as 3
            raise ValueError(f"GPU indexes {m.group(1)[:40]!r} are not numbers and ranges (IDX:0-2,5)")
        return _ranges(m.group(1))


def _ranges(spec: str) -> list[int]:
    out: list[int] = []
    for piece in spec.split(","):
        if not piece:
            continue
        if "-" in piece:
            a, b = piece.split("-", 1)
            if not (a and b) or int(a) > int(b):
                raise ValueError(f"GPU indexes {spec[:40]!r}: {piece[:20]!r} is not a range")
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(piece))
    return out


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_gres(text: str | None) -> list[Gres]:
    """`gpu:h100:8(S:0-1)`, `gres:gpu:4`, `gpu:h100:3(IDX:0-2),gpu:a100:1(IDX:4)` -> Gres items.

    `name:N` means N untyped; `name:type` alone means 1 (Slurm's default count). Also as Slurm prints them
    (src/interfaces/gres.c): `gpu:(null):2(IDX:0-1)`, the GresUsed of GPUs given by File= without Type= (untyped);
    `gpu:h100:no_consume:8` (a flag, not a type); `shard:1K` (1024). ValueError for anything else.
    """
    if not text or text in ("(null)", "None", "N/A"):
        return []
    out = []
    for item in _split_top(text):
        detail = _GRES_DETAIL.search(item)
        body = item[:detail.start()] if detail else item
        parts = body.split(":")
        if parts[0] == "gres":   # 22.05's TresPerNode: gres:gpu:h100:2
            parts = parts[1:]
        elif parts[0].startswith("gres/"):   # 23.02 and later: gres/gpu:h100:2
            parts[0] = parts[0][len("gres/"):]
        if "no_consume" in parts[1:]:
            parts.remove("no_consume")
        name, rest = (parts[0], parts[1:]) if parts else ("", [])
        typ, count = None, 1
        if len(rest) == 1:
            n = _gres_count(rest[0])
            typ, count = (None, n) if n is not None else (rest[0], 1)
        elif len(rest) == 2:
            typ, count = rest[0], _gres_count(rest[1])
        if (not _GRES_NAME.fullmatch(name) or len(rest) > 2 or count is None
                or (typ is not None and not _GRES_TYPE.fullmatch(typ) and not (typ == "(null)" and len(rest) == 2))):
            raise ValueError(f"cannot read GRES {item[:60]!r}")
        out.append(Gres(name=name, type=None if typ == "(null)" else typ, count=count,
                        detail=detail.group(1) if detail else ""))
    return out


def gpus_in(text: str | None) -> dict[str, int]:
    """GPU counts by type in a GRES string; untyped GPUs count under "untyped"."""
    out: dict[str, int] = {}
    for g in parse_gres(text):
        if g.name == "gpu":
            key = g.type or "untyped"
            out[key] = out.get(key, 0) + g.count
    return out


def gpus_used_of(configured: dict[str, int], used: dict[str, int]) -> dict[str, int]:
    """A node's GPUs in use by type, without a zero count of a type it does not have (Slurm prints `gpu:0` as the
    GresUsed of a node without GPUs: `{"untyped": 0}` would name GPUs that are not there)."""
    return {t: n for t, n in used.items() if n or t in configured}


def with_gres_requests(records: list) -> tuple[list, list[str]]:
    """(records, notes): of a dump whose ReqTRES never names a GRES while its AllocTRES does (Slurm 16.05 and
    17.02 kept the request's CPUs, memory and nodes but not its GRES), each job record asks for the GRES it held,
    added to its ReqTRES; a note says so. Otherwise every GPU job of such a dump would read as asking for none:
    admitted as a CPU job by a policy replay, replayed `--exclusive` by the sandbox. Other dumps come back as
    they are (a ReqTRES without GRES beside one with them is a job that asked for none)."""
    from dataclasses import replace

    jobs = [r for r in records if r.step is None]
    if any("gres/" in (r.req_tres or "") for r in jobs) or not any("gres/" in (r.alloc_tres or "") for r in jobs):
        return list(records), []
    out, n = [], 0
    for r in records:
        held = [i for i in (r.alloc_tres or "").split(",") if i.startswith("gres/")]
        if r.step is None and held and r.req_tres:
            r = replace(r, req_tres=",".join([r.req_tres, *held]), req_gpus=r.alloc_gpus)
            n += 1
        out.append(r)
    return out, [f"ReqTRES names no GRES in the whole dump while AllocTRES does (Slurm before 17.11 kept none "
                 f"there): {n} job(s) read as asking for the GRES they held"]


def record_tres(r) -> str | None:
    """The TRES of an sacct job record (`AcctRecord`) as a request is read from it: ReqTRES, else AllocTRES; for a
    record that has neither (Slurm before 15.08 kept no TRES; some exports blank them), one built from its GRES
    columns, node list and CPUs where the dump has ReqGRES or AllocGRES: an empty one states no GPU. None when
    nothing in the record says what it asked for (its GPUs are unknown): neither TRES nor a GRES column, or GPUs
    in GRES over several nodes (whether per node or per job, the column does not say). ValueError naming the GRES
    column that is not one."""
    if r.req_tres or r.alloc_tres:
        return r.req_tres or r.alloc_tres
    if "ReqGRES" not in r.extra and "AllocGRES" not in r.extra:
        return None
    field = "AllocGRES" if r.extra.get("AllocGRES") else "ReqGRES"
    try:
        gpus = gpus_in(r.extra.get(field) or "")
    except ValueError as exc:
        raise ValueError(f"{field}: {exc}") from None
    nodes = len(r.nodelist)
    if sum(gpus.values()) and nodes > 1:
        return None
    parts = [f"cpu={r.alloc_cpus}"] if r.alloc_cpus else []
    parts += [f"gres/gpu:{t}={n}" for t, n in gpus.items() if t != "untyped"]
    if sum(gpus.values()):
        parts.append(f"gres/gpu={sum(gpus.values())}")
    if nodes:
        parts.append(f"node={nodes}")
    return ",".join(parts)
