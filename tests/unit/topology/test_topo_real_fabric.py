"""Model, queries and renderers on a real InfiniBand fabric: NVIDIA topograph's ibnetdiscover example (a DGX H100
SuperPOD-style, rail-optimised NDR fabric; tests/data/topology, see tests/data/SOURCES.md), read through the
ibnetdiscover provider."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmtools.cli.topo import load_topology
from slurmtools.hostlist import expand
from slurmtools.topology import queries as q
from slurmtools.topology.checks import lint
from slurmtools.topology.render_slurm import node_features, render_topology_conf

DUMP = Path(__file__).resolve().parents[2] / "data" / "topology" / "topograph_ibnetdiscover_example.out.gz"


@pytest.fixture(scope="module")
def fabric():
    return load_topology(str(DUMP))


def test_levels_and_oversubscription(fabric):
    assert len(fabric.switches()) == 40
    levels = q.oversubscription(fabric)
    assert [(lv.level, lv.switches) for lv in levels] == [(0, 31), (1, 9)]
    # 473 host cables down and 532 uplinks at 50 GB/s (4xNDR): the leaves are not oversubscribed overall
    assert (levels[0].down_gbytes, levels[0].up_gbytes) == (473 * 50.0, 532 * 50.0)
    assert levels[0].worst == 1.2
    assert lint(fabric) == []


def test_rail_optimised_host(fabric):
    h = "a07-p1-dgx-03-c01"
    assert q.leaves_of(fabric, h) == [f"A09-P1-IBLEAF-0{r}-03" for r in range(1, 5)]
    assert len(q.uplinks(fabric, h)[1]) == 9
    same_unit = q.path_between(fabric, h, "a07-p1-dgx-03-c02")
    other_unit = q.path_between(fabric, h, "b05-p1-dgx-05-c01")
    assert (same_unit.hops, same_unit.gbytes) == (2, 50.0)
    assert (other_unit.hops, other_unit.gbytes, len(other_unit.via)) == (4, 50.0, 3)
    assert len(q.hosts_under(fabric, "A10-P1-IBSPINE-01")) == len(fabric.host_names()) == 122


def test_topology_conf_puts_every_host_under_exactly_one_leaf(fabric):
    text = render_topology_conf(fabric)
    placed: list[str] = []
    spines = 0
    for line in text.splitlines():
        if line.startswith("SwitchName="):
            kv = dict(p.split("=", 1) for p in line.split())
            placed += expand(kv.get("Nodes", ""))
            spines += "Switches" in kv
    assert sorted(placed) == sorted(fabric.host_names())
    assert spines == 9
    assert "SwitchName=A09-P1-IBLEAF-01-03 Nodes=a07-p1-dgx-03-c[01-18]" in text.splitlines()
    assert node_features(fabric)["a07-p1-dgx-03-c05"] == ("A09-P1-IBLEAF-01-03",)


def test_the_graph_export_is_the_same_whatever_the_string_hash_seed(tmp_path):
    """`topo import --out` of a real dump, byte for byte, in processes with different hash seeds: the order of the
    switches (and so of every vertex) came from a set's iteration before."""
    import os
    import subprocess
    import sys

    outs = []
    for seed in ("1", "2", "3"):
        out = tmp_path / f"g{seed}.json"
        p = subprocess.run([sys.executable, "-m", "slurmtools", "topo", "import", "--from", "ibnetdiscover",
                            str(DUMP), "--out", str(out)], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONHASHSEED=seed))
        assert p.returncode == 0, p.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
