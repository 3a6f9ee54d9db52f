"""Shared test helpers: where the repository and the shared real-world data are."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: real third-party captures beside the checkout (../shared/data); tests use it only when present
SHARED_DATA = REPO.parent / "shared" / "data"
TEST_DATA = REPO / "tests" / "data"
