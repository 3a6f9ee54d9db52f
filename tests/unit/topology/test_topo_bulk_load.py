"""`Topology.add_many` (the bulk path large fabrics use) builds exactly what `add` + `link` one by one build."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmtools.topology.graph import Host, IbLink, Switch, Topology

SPEEDS = ("HDR", "NDR")


@st.composite
def fabrics(draw):
    hosts = [Host(f"n{i:03d}") for i in range(draw(st.integers(1, 12)))]
    switches = [Switch(f"leaf{i}", level=0) for i in range(draw(st.integers(1, 4)))]
    verts = hosts + switches
    ids = [v.vid for v in verts]
    links = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids), st.sampled_from(SPEEDS),
                                    st.integers(1, 3)), max_size=40))
    return verts, [(a, b, IbLink(4, sp, c)) for a, b, sp, c in links]


def _one_by_one(verts, links):
    t = Topology("x")
    for v in verts:
        t.add(v)
    for a, b, e in links:
        t.link(a, b, e)
    return t


@settings(max_examples=150, deadline=None)
@given(fabrics())
def test_bulk_equals_one_by_one(f):
    verts, links = f
    try:
        want = _one_by_one(verts, links).to_json()
    except (KeyError, ValueError) as exc:
        bulk = Topology("x")
        with pytest.raises(type(exc)):
            bulk.add_many(verts, links)
        return
    bulk = Topology("x")
    bulk.add_many(verts, links)
    assert bulk.to_json() == want
    assert list(bulk.g.nodes) == list(_one_by_one(verts, links).g.nodes)
