"""hostlist.compress and compress_run against the python-hostlist library they stand in front of."""

from __future__ import annotations

import hostlist as lib
from hypothesis import given, settings, strategies as st

from slurmtools.hostlist import compress, compress_run, expand

PREFIXES = st.sampled_from(["gpu", "h", "", "node-", "a1b", "rack2-gpu", "x%d", "n_", "é"])


@st.composite
def runs(draw):
    """Names of one run (prefix, width, first number, length), cut into groups, sometimes spoiled."""
    prefix, width = draw(PREFIXES), draw(st.integers(1, 6))
    first = draw(st.integers(0, 10 ** width - 1))
    n = draw(st.integers(1, min(70, 10 ** width - first)))
    names = [f"{prefix}{i:0{width}d}" for i in range(first, first + n)]
    spoil = draw(st.sampled_from(["none", "swap", "drop", "dup", "other prefix", "wider", "blank", "letter"]))
    if spoil == "swap" and n > 1:
        i = draw(st.integers(0, n - 2))
        names[i], names[i + 1] = names[i + 1], names[i]
    elif spoil == "drop" and n > 2:
        del names[draw(st.integers(1, n - 2))]
    elif spoil == "dup":
        i = draw(st.integers(0, n - 1))
        names.insert(i, names[i])
    elif spoil == "other prefix":
        i = draw(st.integers(0, n - 1))
        names[i] = "z" + names[i]
    elif spoil == "wider":
        names.append(f"{prefix}{first + n:0{width + 1}d}")
    elif spoil == "blank":
        names[0] = " " + names[0]
    elif spoil == "letter" and width > 1:
        i = draw(st.integers(0, n - 1))
        names[i] = names[i][:-1] + "a"
    cuts = sorted(set(draw(st.lists(st.integers(1, max(len(names) - 1, 1)), max_size=6))))
    bounds = [0] + [c for c in cuts if c < len(names)] + [len(names)]
    return [names[a:b] for a, b in zip(bounds, bounds[1:])]


@settings(max_examples=600, deadline=None)
@given(runs())
def test_compress_run_is_the_library_or_none(groups):
    names = [h for g in groups for h in g]
    got = compress_run(groups)
    if got is not None:  # the promise: each group as the library writes it, and one ascending run of distinct names
        assert got == [lib.collect_hostlist(g) for g in groups]
        assert names == sorted(set(names)) and [h for e in got for h in expand(e)] == names
    for g in groups:
        assert compress(g) == lib.collect_hostlist(g)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.from_regex(r"[a-c]{0,2}[0-9]{0,3}", fullmatch=True), max_size=12))
def test_compress_equals_the_library_on_any_names(names):
    assert compress(names) == lib.collect_hostlist(names)


def test_a_fabrics_leaves_take_the_run_and_others_do_not():
    leaves = [[f"gpu{i * 32 + j:05d}" for j in range(1, 33)] for i in range(4)]
    assert compress_run(leaves) == ["gpu[00001-00032]", "gpu[00033-00064]", "gpu[00065-00096]",
                                    "gpu[00097-00128]"]
    assert compress_run([["gpu01"], ["gpu02", "gpu03"]]) == ["gpu01", "gpu[02-03]"]
    assert compress_run([["gpu02", "gpu01"]]) is None  # not ascending: the library sorts it
    assert compress_run([["gpu01", "gpu03"]]) is None  # a gap
    assert compress_run([["gpu9", "gpu10"]]) is None  # widths differ
    assert compress_run([["ab01a", "b02"]]) is None  # the same letters, cut elsewhere
    assert compress_run([["gpu01"], []]) is None and compress_run([]) is None
    assert compress(["gpu9", "gpu10", "gpu8"]) == lib.collect_hostlist(["gpu9", "gpu10", "gpu8"]) == "gpu[8-10]"
