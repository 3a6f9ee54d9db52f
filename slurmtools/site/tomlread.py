"""Typed reads from parsed TOML that fail with `file: dotted.key: expected ..., got ...`.

Shared by the site file and the fabric file so that every config error reads the same way.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Callable, TypeVar

from slurmtools.durations import parse_duration
from slurmtools.errors import ConfigError

T = TypeVar("T")
_MISSING = object()


def load_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(str(path), "", "file not found") from None
    except IsADirectoryError:
        raise ConfigError(str(path), "", "is a directory, expected a TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "", f"invalid TOML: {exc}") from None


class Table:
    """A TOML table with its dotted path, so every error names the exact key."""

    def __init__(self, source: str, data: dict, path: str = ""):
        self.source = source
        self.data = data
        self.path = path
        self._used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def error(self, name: str, message: str) -> ConfigError:
        return ConfigError(self.source, self.key(name), message)

    def _get(self, name: str, default: Any) -> Any:
        self._used.add(name)
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
            raise self.error(name, f"expected a string, got {v!r}")
        if choices and v not in choices:
            raise self.error(name, f"expected one of {', '.join(choices)}, got {v!r}")
        return v

    def int(self, name: str, default: Any = _MISSING, minimum: int | None = None) -> int:
        v = self._get(name, default)
        if v is None or (v is default and default is not _MISSING):
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(name, f"expected an integer, got {v!r}")
        if minimum is not None and v < minimum:
            raise self.error(name, f"expected an integer >= {minimum}, got {v!r}")
        return v

    def float(self, name: str, default: Any = _MISSING, minimum: float | None = None) -> float:
        v = self._get(name, default)
        if v is None or (v is default and default is not _MISSING):
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.error(name, f"expected a number, got {v!r}")
        if minimum is not None and v < minimum:
            raise self.error(name, f"expected a number >= {minimum}, got {v!r}")
        return float(v)

    def bool(self, name: str, default: Any = _MISSING) -> bool:
        v = self._get(name, default)
        if not isinstance(v, bool):
            raise self.error(name, f"expected true or false, got {v!r}")
        return v

    def duration(self, name: str, default: Any = _MISSING) -> int:
        v = self._get(name, default)
        if v is None or (v is default and default is not _MISSING and not isinstance(v, (str, int))):
            return v
        try:
            return parse_duration(v)
        except ValueError:
            raise self.error(name, f'expected a duration like "5m", got {v!r}') from None

    def str_list(self, name: str, default: Any = _MISSING) -> tuple[str, ...]:
        v = self._get(name, default)
        if v is default and default is not _MISSING:
            return tuple(v)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.error(name, f"expected a list of strings, got {v!r}")
        return tuple(v)

    def table(self, name: str, default: Any = _MISSING) -> "Table":
        v = self._get(name, default)
        if v is default and default is not _MISSING:
            v = {} if v is None else v
        if not isinstance(v, dict):
            raise self.error(name, f"expected a table, got {v!r}")
        return Table(self.source, v, self.key(name))

    def tables(self, name: str, default: Any = _MISSING) -> dict[str, "Table"]:
        """A table of tables, e.g. [tiers.production], [tiers.standard]."""
        outer = self.table(name, default)
        out = {}
        for k, v in outer.data.items():
            if not isinstance(v, dict):
                raise outer.error(k, f"expected a table, got {v!r}")
            out[k] = Table(self.source, v, outer.key(k))
        return out

    def table_list(self, name: str, default: Any = _MISSING) -> list["Table"]:
        """An array of tables, e.g. [[leaves]]."""
        v = self._get(name, default)
        if v is default and default is not _MISSING:
            v = [] if v is None else v
        if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
            raise self.error(name, f"expected an array of tables, got {v!r}")
        return [Table(self.source, x, f"{self.key(name)}[{i}]") for i, x in enumerate(v)]

    def check_unknown(self) -> None:
        """Reject keys the schema does not know: a typo must not be silently ignored."""
        for k in self.data:
            if k not in self._used:
                raise self.error(k, "unknown key")


def each(mapping: dict[str, Table], build: Callable[[str, Table], T]) -> dict[str, T]:
    out = {}
    for name, tbl in mapping.items():
        out[name] = build(name, tbl)
        tbl.check_unknown()
    return out
