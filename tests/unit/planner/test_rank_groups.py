"""The plan's rank groups: the quick path over a fabric's ordered leaves gives what the plain derivation gives."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings, strategies as st

from slurmtools.hostlist import compress
from slurmtools.planner.packing import _natural
from slurmtools.planner.plan import _rank_groups

from helpers import make_view


def plain_rank_groups(view) -> tuple[str, ...]:
    """The derivation written out plainly: group by NVLink domain else leaf, sort hosts and groups by natural name
    order, compress each group."""
    groups: dict[str, list[str]] = {}
    for leaf, members in view.leaves.items():
        for h in members:
            if h in view.hosts:
                groups.setdefault(view.domain_of.get(h) or f"leaf:{leaf}", []).append(h)
    ordered = sorted((sorted(hs, key=_natural) for hs in groups.values()), key=lambda hs: _natural(hs[0]))
    return tuple(compress(hs) for hs in ordered)


def test_a_fat_trees_leaves_in_order_give_one_group_per_leaf():
    view = make_view([[8] * 32] * 4)
    assert _rank_groups(view) == ("h[00001-00032]", "h[00033-00064]", "h[00065-00096]", "h[00097-00128]")
    assert _rank_groups(replace(view)) == _rank_groups(view)  # a fresh copy derives the same groups


@st.composite
def views(draw):
    """Views whose host names, leaf order, member order, missing hosts and NVLink domains vary."""
    rng = random.Random(draw(st.integers(0, 2 ** 32)))
    view = make_view([[8] * draw(st.integers(1, 9)) for _ in range(draw(st.integers(1, 6)))])
    prefix, width = draw(st.sampled_from([("h", 5), ("gpu", 1), ("n-", 2), ("", 3), ("r1g", 2)]))
    start = draw(st.integers(0, 40))
    rename = {h: f"{prefix}{start + i:0{width}d}" for i, h in enumerate(view.hosts)}
    if draw(st.booleans()):  # names not in leaf order
        vals = list(rename.values())
        rng.shuffle(vals)
        rename = dict(zip(rename, vals))
    leaves = {leaf: tuple(rename[h] for h in hs) for leaf, hs in view.leaves.items()}
    if draw(st.booleans()):
        leaves = {leaf: tuple(rng.sample(hs, len(hs))) for leaf, hs in leaves.items()}
    if draw(st.booleans()):
        leaves = dict(rng.sample(list(leaves.items()), len(leaves)))
    hosts = {rename[h]: s._replace(name=rename[h]) for h, s in view.hosts.items()}
    for h in rng.sample(list(hosts), min(len(hosts) - 1, draw(st.integers(0, 2)))):  # listed under a leaf, not in the view's hosts
        del hosts[h]
    domain_of = {}
    if draw(st.booleans()):
        names = list(hosts)
        for h in rng.sample(names, rng.randint(0, len(names))):
            domain_of[h] = f"nvl{rng.randint(1, 3)}"
    return replace(view, hosts=hosts, leaves=leaves, domain_of=domain_of)


@settings(max_examples=400, deadline=None)
@given(views())
def test_rank_groups_equal_the_plain_derivation(view):
    assert _rank_groups(view) == plain_rank_groups(view)
