"""Where the provider tests find their inputs: the copies in tests/data/topology (always there) and the
shared third-party captures beside the checkout (swept only when present; see tests/data/SOURCES.md)."""

from __future__ import annotations

import gzip
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TEST_DATA = REPO / "tests" / "data" / "topology"
SHARED = REPO.parent / "shared" / "data"


def data_path(name: str) -> Path:
    return TEST_DATA / name


def read_data(name: str) -> str:
    p = TEST_DATA / name
    if p.suffix == ".gz":
        return gzip.decompress(p.read_bytes()).decode()
    return p.read_text()


def shared_files(sub: str, pattern: str = "*") -> list[Path]:
    """Files of ../shared/data/<sub>, or [] when the shared data is not beside this checkout."""
    d = SHARED / sub
    return sorted(p for p in d.glob(pattern) if p.is_file()) if d.is_dir() else []
