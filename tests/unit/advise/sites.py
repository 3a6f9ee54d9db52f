"""Variants of the example site for the advise tests, written to a temporary folder (without the fabric file,
so partitions may name GPU types the example fabric lacks)."""

from __future__ import annotations

import re
from pathlib import Path

from slurmtools.resources import example_site


def site_file(tmp: Path, extra: str = "", gpu_extra: str = "", name: str = "site.toml") -> Path:
    """The example site without its [advise] table and h100 bandwidth, `gpu_extra` added to [gpu_types.h100]
    and `extra` appended."""
    text = example_site().read_text()
    text = re.sub(r'(?m)^(fabric|memory_bandwidth_gbs) = .*\n', "", text)
    text = text.split("\n[advise]")[0]  # the example's own [advise] table: the tests state theirs
    text = text.replace("price_per_gpu_hour = 2.40\n", f"price_per_gpu_hour = 2.40\n{gpu_extra}\n", 1)
    p = tmp / name
    p.write_text(text + "\n" + extra)
    return p


H200 = '''
[gpu_types.h200]
description = "NVIDIA H200 141GB HBM3e"
memory_gb = 141
price_per_gpu_hour = 3.50
memory_bandwidth_gbs = 4800

[partitions.big]
nodes = "gpu[17-18]"
gpu_types = ["h200"]
'''
