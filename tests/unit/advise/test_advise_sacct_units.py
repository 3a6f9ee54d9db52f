"""advise's own sacct fields under `sacct --units=G` and `sacct --noconvert` (the hand-written dumps
tests/data/reports/sacct-handwritten-25.11-units-*.txt, tests/data/SOURCES.md): MaxRSS is measured in bytes, so a
MaxRSS without a unit is bytes, while a TRES `mem=` without one is MB."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from slurmtools.advise import usage

DATA = Path(__file__).resolve().parents[2] / "data" / "reports"


@pytest.mark.parametrize("units", ["G", "noconvert"])
def test_memory_figures_read_alike_whatever_the_units(units, tmp_path):
    runs, _ = usage.load_runs(datetime(2026, 11, 2), datetime(2026, 11, 3), epilog_dir=tmp_path / "none",
                              sacct_file=DATA / f"sacct-handwritten-25.11-units-{units}-P.txt")
    got = {r.job_id: r for r in runs}
    # ReqTRES mem=62.50G / mem=64000 (MB); MaxRSS 7.81G / 8386510848 bytes (was read as 8386510848 MB)
    assert got[4001].mem_mb == 64000
    assert got[4001].max_rss_mb == pytest.approx(7998, abs=1)
    assert got[4002].mem_mb == pytest.approx(500, abs=2)
    assert got[4002].max_rss_mb == pytest.approx(409.6, abs=0.1)
    assert (got[4001].time_limit_s, got[4001].total_cpu_s, got[4001].cpus) == (7200, 3540.0, 8)
