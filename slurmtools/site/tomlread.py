"""Typed reads from parsed TOML that fail with `file: dotted.key: expected ..., got ...`.

Shared by the site file and the fabric file so that every config error reads the same way.
"""

from __future__ import annotations

import json
import math
import os
import re
import reprlib
import stat
import tomllib
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, TypeVar

from slurmtools.durations import UnitMissing, parse_duration_with_unit
from slurmtools.errors import ConfigError, unknown_key

T = TypeVar("T")
_MISSING = object()
#: config files are a few KiB; a bigger one is a mistake (or /dev/zero behind a link), not a site
MAX_BYTES = 16 << 20
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlist, _SHOWN.maxdict = 2, 60, 60, 4, 4


def shown(value: Any) -> str:
    """A value for a one-line message: repr, cut short (a hostile value may be huge or nested thousands deep)."""
    if isinstance(value, str) and len(value) <= 60:
        return repr(value)
    return _SHOWN.repr(value)


def load_toml(path: Path) -> dict:
    """The parsed file; every way reading it can fail is one ConfigError naming the file."""
    src = str(path)
    text = read_text(path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(src, "", f"invalid TOML: {exc}") from None
    except ValueError:  # not a TOMLDecodeError: int() refusing an integer of over 4300 digits inside tomllib
        raise ConfigError(src, "", "invalid TOML: a number too long to read (more than 4300 digits)") from None
    except RecursionError:
        raise ConfigError(src, "", "nested too deeply (TOML arrays or inline tables)") from None


def read_text(path: Path, limit: int | None = MAX_BYTES) -> str:
    """A file's UTF-8 text: only a regular file (a FIFO would block, /dev/zero fill memory), at most `limit` bytes
    (None: a regular file's own size bounds it); every way reading it can fail is one ConfigError naming the file."""
    src = str(path)
    try:
        with open(path, "rb", opener=_open_regular) as fh:
            raw = fh.read(-1 if limit is None else limit + 1)
    except FileNotFoundError:
        raise ConfigError(src, "", "file not found") from None
    except IsADirectoryError:
        raise ConfigError(src, "", "is a directory, expected a file") from None
    except _NotRegular:
        raise ConfigError(src, "", "not a regular file") from None
    except OSError as exc:  # permission, symlink loop, a file used as a folder, I/O errors
        raise ConfigError(src, "", f"cannot read: {exc.strerror or exc}") from None
    if limit is not None and len(raw) > limit:
        raise ConfigError(src, "", f"larger than {limit >> 20} MiB: not a config file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(src, "", f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None


@dataclass(frozen=True)
class Bound:
    """The most a numeric key may hold, and why (said in the error: "... is more than <why> (<limit>)")."""

    limit: int | float
    why: str


class _NotRegular(OSError):
    pass


def _open_regular(path: str, flags: int) -> int:
    """Open without blocking (a FIFO would wait for a writer) and only a regular file."""
    fd = os.open(path, flags | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _NotRegular(path)
    return fd


def _check_text(t: "Table", name: str, v: str) -> str:
    m = _CONTROL.search(v)
    if m:
        raise t.error(name, f"control character {m.group()!r} in {shown(v)}")
    return v


class Table:
    """A TOML table with its dotted path, so every error names the exact key."""

    def __init__(self, source: str, data: dict, path: str = ""):
        self.source = source
        self.data = data
        self.path = path
        self._used: dict[str, None] = {}  # keys the schema asked for, in the order asked

    def key(self, name: str) -> str:
        """The dotted key as TOML writes it: a name that is not a bare key is quoted and escaped (one line)."""
        part = name if _BARE_KEY.fullmatch(name) else json.dumps(name, ensure_ascii=False)
        return f"{self.path}.{part}" if self.path else part

    def error(self, name: str, message: str) -> ConfigError:
        return ConfigError(self.source, self.key(name), message)

    def _get(self, name: str, default: Any) -> Any:
        self._used[name] = None
        if name in self.data:
            return self.data[name]
        if default is _MISSING:
            raise self.error(name, "missing (required)")
        return default

    def str(self, name: str, default: Any = _MISSING, choices: tuple[str, ...] | None = None) -> str:
        v = self._get(name, default)
        if v is None or (v is default and default is not _MISSING):
            return v
        if not isinstance(v, str):
            raise self.error(name, f"expected a string, got {shown(v)}")
        if choices and v not in choices:
            raise self.error(name, f"expected one of {', '.join(choices)}, got {shown(v)}")
        return _check_text(self, name, v)

    def int(self, name: str, default: Any = _MISSING, minimum: int | None = None,
            maximum: "Bound | None" = None) -> int:
        v = self._get(name, default)
        if v is None or (v is default and default is not _MISSING):
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(name, f"expected an integer, got {shown(v)}")
        if minimum is not None and v < minimum:
            raise self.error(name, f"expected an integer >= {minimum}, got {shown(v)}")
        self._at_most(name, v, maximum)
        return v

    def float(self, name: str, default: Any = _MISSING, minimum: float | None = None,
              maximum: "Bound | None" = None) -> float:
        v = self._get(name, default)
        if v is None or (v is default and default is not _MISSING):
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.error(name, f"expected a number, got {shown(v)}")
        try:
            finite = math.isfinite(v)
        except OverflowError:   # an integer past a float's range (isfinite converts it)
            finite = False
        if not finite:
            raise self.error(name, f"expected a finite number, got {shown(v)}")
        if minimum is not None and v < minimum:
            raise self.error(name, f"expected a number >= {minimum}, got {shown(v)}")
        self._at_most(name, v, maximum)
        return float(v)

    def _at_most(self, name: str, v: "int | float", bound: "Bound | None") -> None:
        """A finite value past what the key can mean (what Slurm's field holds, what a site can be): refused with
        the bound and its reason, never passed on to wrap in Slurm or become inf in a report's sums."""
        if bound is not None and v > bound.limit:
            limit = bound.limit if isinstance(bound.limit, int) else f"{bound.limit:g}"
            raise self.error(name, f"{shown(v)} is more than {bound.why} ({limit})")

    def bool(self, name: str, default: Any = _MISSING) -> bool:
        v = self._get(name, default)
        if not isinstance(v, bool):
            raise self.error(name, f"expected true or false, got {shown(v)}")
        return v

    def duration(self, name: str, default: Any = _MISSING) -> int:
        """Seconds. The file must say the unit: a bare 300 is minutes to sbatch --time but seconds in GraceTime."""
        v = self._get(name, default)
        if v is default and default is not _MISSING:
            return v if v is None or isinstance(v, int) else parse_duration_with_unit(v)
        like = 'a duration like "5m", "2h" or "1d"'
        try:
            return parse_duration_with_unit(v)
        except UnitMissing:
            # a bare number: suggest it with a unit, where that is a duration (not negative, not hundreds of digits)
            n = v.strip() if isinstance(v, str) else (int(v) if isinstance(v, int) or v.is_integer() else v)
            size = Decimal(n) if isinstance(n, str) else n  # an int past a float's range is exact here too
            if not 0 <= size < 10**15:
                raise self.error(name, f"expected {like}, got {shown(v)}") from None
            written = json.dumps(v) if isinstance(v, str) else repr(v)
            minutes = f"{int(n) // 60}m" if str(n).isdigit() and int(n) % 60 == 0 else f"{n}m"
            raise self.error(name, f'{name} = {written}: say the unit, e.g. "{n}s" or "{minutes}"') from None
        except ValueError:
            ascii_ = "" if not isinstance(v, str) or v.isascii() else " in ASCII digits"
            raise self.error(name, f"expected {like}{ascii_}, got {shown(v)}") from None

    def str_list(self, name: str, default: Any = _MISSING, nonempty: str | None = None) -> tuple[str, ...]:
        """A list of names. Each name once: every list we read is a set, so a repeat is a typo for another name
        (`leaves = ["leaf1", "leaf1"]` meant leaf2), never something to collapse. `nonempty`: what an empty list
        would leave out, said when it is empty (an empty list must not read as "none of them" silently)."""
        v = self._get(name, default)
        if v is default and default is not _MISSING:
            return tuple(v)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.error(name, f"expected a list of strings, got {shown(v)}")
        if not v and nonempty:
            raise self.error(name, f"an empty list: {nonempty}")
        out = tuple(_check_text(self, name, x) for x in v)
        seen: set[str] = set()
        for x in out:
            if x in seen:
                raise self.error(name, f"{shown(x)} is listed twice")
            seen.add(x)
        return out

    def table(self, name: str, default: Any = _MISSING) -> "Table":
        v = self._get(name, default)
        if v is default and default is not _MISSING:
            v = {} if v is None else v
        if not isinstance(v, dict):
            raise self.error(name, f"expected a table, got {shown(v)}")
        return Table(self.source, v, self.key(name))

    def tables(self, name: str, default: Any = _MISSING) -> dict[str, "Table"]:
        """A table of tables, e.g. [tiers.production], [tiers.standard]."""
        outer = self.table(name, default)
        out = {}
        for k, v in outer.data.items():
            if not isinstance(v, dict):
                raise outer.error(k, f"expected a table, got {shown(v)}")
            out[k] = Table(self.source, v, outer.key(k))
        return out

    def table_list(self, name: str, default: Any = _MISSING) -> list["Table"]:
        """An array of tables, e.g. [[leaves]]."""
        v = self._get(name, default)
        if v is default and default is not _MISSING:
            v = [] if v is None else v
        if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
            raise self.error(name, f"expected an array of tables, got {shown(v)}")
        return [Table(self.source, x, f"{self.key(name)}[{i}]") for i, x in enumerate(v)]

    def check_unknown(self, hint: str = "") -> None:
        """Reject keys the schema does not know: a typo must not be silently ignored. The error names the keys that
        exist here (those the schema asked for) and the nearest one."""
        for k in self.data:
            if k not in self._used:
                raise self.error(k, unknown_key(k, list(self._used)) + hint)


def each(mapping: dict[str, Table], build: Callable[[str, Table], T]) -> dict[str, T]:
    out = {}
    for name, tbl in mapping.items():
        out[name] = build(name, tbl)
        tbl.check_unknown()
    return out
