"""The view's host states (`view._host_states`) against `NodeInfo`'s own properties.

`_host_states` spells the schedulable rule and the free-GPU sum out in one loop for speed (issue 15); these
tests hold it to the model's definitions on every base state, every flag, and GPU inventories of no, one and
several kinds, named like the node type's GPU or not."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from slurmtools.planner.view import HostState, _host_states
from slurmtools.slurm.model import UNSCHEDULABLE_FLAGS, UNSCHEDULABLE_STATES, NodeInfo

from helpers import NT

STATES = sorted(UNSCHEDULABLE_STATES | {"idle", "mixed", "allocated", "completing", "planned"})
FLAGS = [()] + [(f,) for f in sorted(UNSCHEDULABLE_FLAGS)] + [("COMPLETING",), ("CLOUD", "DRAIN"), ("RESERVATION",)]
#: (configured GPUs by kind, used GPUs by kind); NT's kind is h100, 8 GPUs
INVENTORIES = [
    ({}, {}),
    ({"h100": 8}, {}),
    ({"h100": 8}, {"h100": 3}),
    ({"h100": 8}, {"h100": 8}),
    ({"a100": 8}, {"a100": 2}),             # one kind named otherwise: all its free GPUs count
    ({"h100": 16}, {"h100": 4}),            # more than the node type says: capped at 8
    ({"h100": 4, "a100": 4}, {"a100": 4}),  # two kinds: only the free of h100 count
    ({"h100": 4, "a100": 4}, {"h100": 1, "a100": 1}),
    ({"a100": 4, "l40": 4}, {"l40": 1}),    # two kinds, none h100: all free count
    ({"h100": 8}, {"h100": 9}),             # more used than configured (a stale record): none free
    ({"h100": 8}, {"a100": 2}),             # used of a kind it does not have
]


def expected(n: NodeInfo | None) -> tuple[int, int, int]:
    """The rule from NodeInfo's properties, written the slow, plain way."""
    if n is None or not n.schedulable:
        return 0, 0, 0
    free = n.gpus_free
    if NT.gpu_type in n.gpus_by_type:
        free = min(n.gpus_by_type[NT.gpu_type] - n.gpus_used_by_type.get(NT.gpu_type, 0), free)
    return (max(0, min(free, NT.gpus)), max(0, n.cpus - n.cpus_alloc), max(0, n.memory_mb - n.memory_alloc_mb))


def node(name: str, state: str, flags: tuple[str, ...], have: dict, used: dict, cpus_alloc=10,
         mem_alloc=1000) -> NodeInfo:
    return NodeInfo(name=name, state=state, flags=flags, cpus=112, cpus_alloc=cpus_alloc, memory_mb=2_000_000,
                    memory_alloc_mb=mem_alloc, gpus_by_type=have, gpus_used_by_type=used, gpus_used_idx=(),
                    features=(), partitions=("gpu",))


def test_every_state_flag_and_inventory_matches_the_model():
    nodes = [node(f"h{i:04d}", s, f, have, used)
             for i, (s, f, (have, used)) in enumerate(itertools.product(STATES, FLAGS, INVENTORIES))]
    got = _host_states([(n.name, "leaf1", NT) for n in nodes], {n.name: n for n in nodes})
    assert list(got) == [n.name for n in nodes]
    for n in nodes:
        assert got[n.name] == HostState(n.name, "leaf1", NT.name, NT.gpus, *expected(n)), n
    # the cases that matter are all there: some nodes with free GPUs, some without
    assert {s.gpus_free for s in got.values()} == {0, 3, 4, 5, 6, 7, 8}


@pytest.mark.parametrize("cpus_alloc,mem_alloc", [(200, 3_000_000), (112, 2_000_000), (0, 0)])
def test_cpus_and_memory_never_below_zero(cpus_alloc, mem_alloc):
    n = node("h1", "mixed", (), {"h100": 8}, {"h100": 1}, cpus_alloc, mem_alloc)
    assert _host_states([("h1", "l", NT)], {"h1": n})["h1"][4:] == expected(n)


def test_unreported_host_has_nothing_free_and_no_live_state_means_idle():
    other = replace(NT, name="n4", gpus=4, sockets=1, memory_mb=500_000)
    rows = [("h1", "l1", NT), ("h2", "l1", NT), ("h3", "l2", other)]
    live = {"h1": node("h1", "idle", (), {"h100": 8}, {})}
    got = _host_states(rows, live)
    assert got["h2"] == HostState("h2", "l1", "n8", 8, 0, 0, 0)
    assert got["h3"] == HostState("h3", "l2", "n4", 4, 0, 0, 0)
    idle = _host_states(rows, None)
    assert idle["h1"] == HostState("h1", "l1", "n8", 8, 8, NT.cpus, NT.memory_mb)
    assert idle["h3"] == HostState("h3", "l2", "n4", 4, 4, other.cpus, 500_000)


def test_node_types_alternating_row_by_row_keep_their_own_sizes():
    """The loop keeps the last row's node type at hand; a change of type on every row must still be seen."""
    other = replace(NT, name="a8", gpu_type="a100")
    rows = [(f"h{i}", "l", NT if i % 2 else other) for i in range(6)]
    live = {f"h{i}": node(f"h{i}", "idle", (), {"h100": 4, "a100": 4}, {"a100": 1}) for i in range(6)}
    got = _host_states(rows, live)
    assert [s.node_type for s in got.values()] == ["a8", "n8"] * 3
    assert [s.gpus_free for s in got.values()] == [3, 4] * 3
