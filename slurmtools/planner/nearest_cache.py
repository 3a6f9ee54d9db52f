"""The nearest HCAs of each GPU of a node type, kept on disk between plans (`view.nearest_of_type` computes them).

Why: the planner's view comes straight from the fabric file except for this one answer, which needs the node type's
host graph, and so networkx, whose import alone is a third of a whole `slurmtools plan` on a large site. The
answer depends only on the node type and on the code that derives it (slurmtools' topology modules and networkx),
so it is stored under the type's full description in a table stamped with a checksum of that code: any change to
either computes it again. Only this user's cache folder (`cache_dir.user_cache_dir`) is used, the table is JSON,
and an entry naming a GPU or HCA the node type does not have is ignored; a folder that cannot be written costs
the computation, never the plan. `SLURMTOOLS_NO_CACHE=1` turns it off.

I/O: the pure view takes this as its `nearest_of`.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from pathlib import Path
from typing import Mapping

from slurmtools.topology.sitefile import NodeType

FILE = "nearest-nics.json"
_PACKAGE = Path(__file__).resolve().parents[1]
#: the code the answer comes from: every topology module, the view, and networkx (its __init__ names its version)
_SOURCES = ("topology", "planner/view.py")


def code_key() -> str:
    """A checksum of the code that derives the answer, and of the Python release."""
    crc = zlib.crc32(("%d.%d" % sys.version_info[:2]).encode())
    files = []
    for rel in _SOURCES:
        p = _PACKAGE / rel
        files += sorted(p.glob("*.py")) if p.is_dir() else [p]
    files.append(_networkx_init())
    for f in files:
        try:
            crc = zlib.crc32(str(f).encode() + b"\0" + f.read_bytes(), crc)
        except (OSError, TypeError):
            return ""
    return "%08x" % crc


def _networkx_init() -> Path | None:
    for p in sys.path:
        f = Path(p or ".") / "networkx" / "__init__.py"
        if f.is_file():
            return f
    return None


def nearest_of(nt: NodeType, env: Mapping[str, str] | None = None) -> Mapping[int, tuple[str, ...]]:
    """`view.nearest_of_type(nt)`, from the cache when it holds the answer for this node type and this code."""
    from slurmtools.cache_dir import user_cache_dir

    env = os.environ if env is None else env
    if env.get("SLURMTOOLS_NO_CACHE", "") not in ("", "0") or nt.capture is not None:
        return _compute(nt)   # off; or a type described by a capture file, whose answer could follow the file
    path = user_cache_dir(env) / FILE
    key = code_key()
    table = _read(path)
    same_code = key != "" and table.get("code") == key
    types = table.get("types") if same_code and isinstance(table.get("types"), dict) else {}
    got = _valid(types.get(repr(nt)), nt)
    if got is not None:
        return got
    answer = _compute(nt)
    if key:
        types = dict(types)
        types[repr(nt)] = {str(g): list(nics) for g, nics in answer.items()}
        _write(path, {"code": key, "types": types})
    return answer


def _compute(nt: NodeType) -> dict[int, tuple[str, ...]]:
    from slurmtools.planner.view import nearest_of_type

    return nearest_of_type(nt)


def _valid(entry, nt: NodeType) -> dict[int, tuple[str, ...]] | None:
    """The cached answer, or None when it is not one this node type could have (no trusting a file's word)."""
    if not isinstance(entry, dict):
        return None
    out: dict[int, tuple[str, ...]] = {}
    nics = set(nt.nics)
    for g, names in entry.items():
        if not (isinstance(g, str) and g.isascii() and g.isdigit() and int(g) < nt.gpus
                and isinstance(names, list) and all(isinstance(n, str) and n in nics for n in names)):
            return None
        out[int(g)] = tuple(names)
    return out if set(out) == set(range(nt.gpus)) else None


def _read(path: Path) -> dict:
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return table if isinstance(table, dict) else {}


def _write(path: Path, table: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(table, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass   # a read-only or full home only costs the computation next time
