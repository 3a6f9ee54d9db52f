"""The leaf-packing optimiser: fewest leaves (checked against exhaustive search and an independent DP) and
best fit."""

from __future__ import annotations

import itertools

from hypothesis import given, settings, strategies as st

from slurmtools.planner.packing import HostNeed, choose_leaves, first_fit, leaves_of, min_leaves, min_leaves_dp, pack

from helpers import make_view

WHOLE = HostNeed(gpus=8, cpus=112, mem_mb=2_000_000, node_type="n8")


def brute_force(caps: list[int], k: int) -> int | None:
    """Exhaustive search: the smallest subset of leaves whose capacities reach k."""
    for n in range(0, len(caps) + 1):
        for combo in itertools.combinations(caps, n):
            if sum(combo) >= k:
                return n
    return None


def test_min_leaves_equals_exhaustive_search_on_every_small_case():
    checked = 0
    for n_leaves in range(1, 6):
        for caps in itertools.product(range(0, 5), repeat=n_leaves):
            for k in range(1, sum(caps) + 3):
                want = brute_force(list(caps), k)
                assert min_leaves(caps, k) == want, (caps, k)
                assert min_leaves_dp(caps, k) == want, (caps, k)
                chosen = choose_leaves({f"l{i}": c for i, c in enumerate(caps)}, k)
                if want is None:
                    assert chosen is None
                else:
                    assert len(chosen) == want
                    assert sum(caps[int(x[1:])] for x in chosen) >= k
                checked += 1
    assert checked > 10000


def test_best_fit_fills_partly_used_leaves_first():
    # leaf3 has one free host, leaves 1 and 2 four each: 5 hosts fit in 2 leaves either as {1,2} or {3, one of
    # the full ones}; best fit takes the partly used leaf3 and keeps a whole leaf free
    chosen = choose_leaves({"leaf1": 4, "leaf2": 4, "leaf3": 1}, 5)
    assert sorted(chosen) == ["leaf1", "leaf3"]
    # one host: the leaf with the least room that still holds it
    assert choose_leaves({"leaf1": 4, "leaf2": 2, "leaf3": 3}, 2) == ["leaf2"]


def test_pack_picks_hosts_under_the_fewest_leaves_and_first_fit_does_not():
    # leaf1: 2 free hosts, leaf2: 4 free; a 4-host job fits under leaf2 alone
    v = make_view([[8, 8, 0, 0], [8, 8, 8, 8], [8, 0, 0, 0]])
    hosts = pack(v, WHOLE, 4)
    assert leaves_of(v, hosts) == ["leaf2"]
    ff = first_fit(v, WHOLE, 4)
    assert len(leaves_of(v, ff)) == 2


def test_pack_single_gpu_prefers_most_used_host():
    v = make_view([[8, 8, 8, 8], [8, 3, 8, 8]])
    need = HostNeed(gpus=2, cpus=28, mem_mb=500_000, node_type="n8")
    assert pack(v, need, 1) == ["h00006"]  # the host with 3 free GPUs


def test_does_not_fit_returns_none():
    v = make_view([[8, 0], [0, 0]])
    assert pack(v, WHOLE, 2) is None


leaf_lists = st.lists(st.lists(st.sampled_from([0, 0, 2, 4, 8, 8, 8]), min_size=1, max_size=6), min_size=1,
                      max_size=7)


@settings(max_examples=300, deadline=None)
@given(leaf_lists, st.integers(min_value=1, max_value=20), st.sampled_from([1, 2, 4, 8]))
def test_property_pack_is_exact_and_valid(free_by_leaf, k, gpn):
    v = make_view(free_by_leaf)
    need = HostNeed(gpus=gpn, cpus=14 * gpn, mem_mb=250_000 * gpn, node_type="n8")
    caps = [sum(1 for f in frees if f >= gpn) for frees in free_by_leaf]
    want = brute_force(caps, k)
    hosts = pack(v, need, k)
    if want is None:
        assert hosts is None
        return
    assert hosts is not None and len(hosts) == k == len(set(hosts))
    assert all(v.hosts[h].gpus_free >= gpn for h in hosts)
    assert len(leaves_of(v, hosts)) == want
    ff = first_fit(v, need, k)
    assert ff is not None and len(leaves_of(v, ff)) >= want
