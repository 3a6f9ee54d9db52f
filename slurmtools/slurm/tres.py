"""Slurm TRES and GRES strings, parsed into GPU counts by type. Pure.

Forms seen in 22.05: AllocTRES `billing=2,cpu=2,gres/gpu:h100=16,gres/gpu=16,mem=2000M,node=2`;
ReqGRES/TresPerNode `gres:gpu:h100:4`, `gpu:4`, `gres/gpu:2`; node Gres `gpu:h100:8(S:0-1)`;
GresUsed `gpu:h100:3(IDX:0-2)`.
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


_GRES_ITEM = re.compile(r"^(?:gres[:/])?(?P<name>[A-Za-z_][\w.-]*)(?::(?P<type>[A-Za-z_][\w.-]*))?(?::(?P<count>[0-9]+))?"
                        r"(?P<suffix>\(.*\))?$")


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

    `name:N` means N untyped; `name:type` alone means 1 (Slurm's default count).
    """
    if not text or text in ("(null)", "None", "N/A"):
        return []
    out = []
    for item in _split_top(text):
        m = _GRES_ITEM.match(item)
        if not m:
            raise ValueError(f"cannot read GRES {item!r}")
        name, typ, count, suffix = m.group("name"), m.group("type"), m.group("count"), m.group("suffix") or ""
        if typ is not None and typ.isdigit() and count is None:
            typ, count = None, typ
        out.append(Gres(name=name, type=typ, count=int(count) if count is not None else 1, detail=suffix.strip("()")))
    return out


def gpus_in(text: str | None) -> dict[str, int]:
    """GPU counts by type in a GRES string; untyped GPUs count under "untyped"."""
    out: dict[str, int] = {}
    for g in parse_gres(text):
        if g.name == "gpu":
            key = g.type or "untyped"
            out[key] = out.get(key, 0) + g.count
    return out
