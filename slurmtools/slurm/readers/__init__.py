"""Readers of Slurm's `--json` output, one module per output shape, chosen by the release's pinned data parser.

22.05 writes the openapi/v0.0.38 shape (`v0038.py`: states as strings, plain numbers, nodes from `sinfo --json`);
23.02 and later write data_parser shapes (`data_parser.py`: numbers wrapped as {set, infinite, number}, node states
as lists, per-node records from `scontrol show nodes --json`; the differences inside that family are read there by
the fields' own form, not by version). The backend asks `reader_for(release)` and never looks at version numbers
itself; the command line's `--json` flag is the release table's (`SlurmRelease.json_flag`).
"""

from __future__ import annotations

from slurmtools.slurm.releases import SlurmRelease


def reader_for(release: SlurmRelease):
    """The module that reads what `release` writes with its pinned `--json` parser."""
    if release.json_parser is None:
        from slurmtools.slurm.readers import v0038 as mod
    else:
        from slurmtools.slurm.readers import data_parser as mod
    return mod
