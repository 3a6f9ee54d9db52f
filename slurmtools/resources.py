"""Where the bundled data lives (job templates, example site, example fabric).

In a wheel they are copied into `slurmtools/_bundled/`; in a source checkout or editable install they are the
top-level folders of the repository. Both layouts are looked up here and nowhere else.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def bundled(name: str) -> Path:
    """Path of a bundled top-level folder: `job_templates`, `site_configs` or `topology`."""
    inside = _PKG / "_bundled" / name
    if inside.is_dir():
        return inside
    checkout = _PKG.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"bundled folder {name!r} is missing from this installation ({inside})")


def example_site() -> Path:
    return bundled("site_configs") / "example" / "site.toml"
