"""ibnetdiscover parsing and the choice of the compute fabric, on NVIDIA topograph's real SuperPOD dump."""

from __future__ import annotations

from collections import Counter

import pytest

from slurmtools.errors import ParseError
from slurmtools.topology import queries
from slurmtools.topology.ibnet import compute_fabric, parse_ibnetdiscover, to_topology

from ._data import read_data, shared_files

EXAMPLE = "topograph_ibnetdiscover_example.out.gz"


@pytest.fixture(scope="module")
def fabric():
    return parse_ibnetdiscover(read_data(EXAMPLE), EXAMPLE)


def test_counts_of_the_real_dump(fabric):
    assert len(fabric.of_kind("switch")) == 40
    assert len(fabric.of_kind("ca")) == 582
    # 2228 port lines carry 4xNDR: every cable is listed from both ends, so 1114 cables.
    assert len(fabric.cables) == 1114 and all(c.spec == "4xNDR" and c.gbytes == 50.0 for c in fabric.cables)
    kinds = Counter(tuple(sorted((fabric.nodes[c.a].kind, fabric.nodes[c.b].kind))) for c in fabric.cables)
    assert kinds == {("ca", "switch"): 582, ("switch", "switch"): 532}
    sw = fabric.nodes["2c5eab0300b87b40"]
    assert sw.ports == 65 and sw.description == "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"
    assert fabric.port_guids["e09d7303007a5a68"] == ("e09d7303007a5a68",)


def test_compute_fabric_hosts_leaves_spines_rails(fabric):
    cf = compute_fabric(fabric)
    assert len(cf.leaves()) == 31 and len(cf.spines()) == 9
    assert all("IBSPINE" in cf.switch_name(g) for g in cf.spines())
    assert all("IBLEAF" in cf.switch_name(g) for g in cf.leaves())
    assert len(cf.hosts) == 122 and len(cf.hcas) == 473
    per_host = Counter(Counter(h.host for h in cf.hcas).values())
    assert per_host == {4: 109, 3: 11, 2: 2}
    # 69 adapters never had their description set, 40 are SHARP aggregation nodes (one per switch)
    assert Counter(n.description for n in cf.unmapped) == {"MT4129 ConnectX7   Mellanox Technologies": 69,
                                                           "Mellanox Technologies Aggregation Node": 40}
    rails = cf.rails()
    # rail-optimised: one adapter name per leaf, except two B09 leaves that see three names
    assert sum(1 for names in rails.values() if len(names) == 1) == 29
    assert sorted(cf.switch_name(g) for g, n in rails.items() if len(n) > 1) == ["B09-P1-IBLEAF-03-08",
                                                                                   "B09-P1-IBLEAF-04-08"]
    h = next(h for h in cf.hcas if h.host == "a08-p1-dgx-04-c07" and h.name == "mlx5_5")
    assert cf.switch_name(h.leaf) == "A09-P1-IBLEAF-04-04" and h.link == "4xNDR"


def test_hostname_pattern_and_exclusions(fabric):
    cf = compute_fabric(fabric, host_pattern=r"^(?P<host>[a-z]\d\d-p1-dgx-\d\d-c\d\d) (?P<hca>mlx5_\d+)$")
    assert Counter(h.name for h in cf.hcas) == {"mlx5_0": 17, "mlx5_1": 17, "mlx5_4": 17, "mlx5_5": 17}
    storage = compute_fabric(fabric, exclude_hca=("HCA-[56]", "mlx5_[45]"))
    assert not {h.name for h in storage.hcas} & {"HCA-5", "HCA-6", "mlx5_4", "mlx5_5"}
    assert len(storage.excluded) == 229
    no_spine = compute_fabric(fabric, exclude_switch=("*IBSPINE-02*",))
    assert len(no_spine.spines()) == 8 and len(no_spine.switches) == 39
    with pytest.raises(ParseError, match="named group"):
        compute_fabric(fabric, host_pattern=r"^(\S+) ")
    with pytest.raises(ParseError, match="--hostname-pattern"):
        compute_fabric(fabric, host_pattern=r"(?P<host>")


def test_into_the_graph(fabric):
    t = to_topology(compute_fabric(fabric))
    assert len(t.hosts()) == 122 and len(t.switches()) == 40
    assert queries.switch_levels(t)["A10-P1-IBSPINE-02"] == 1
    assert "A09-P1-IBLEAF-04-04" in queries.leaves_of(t, "a08-p1-dgx-04-c07")
    e = t.edge("switch:A09-P1-IBLEAF-04-04", "switch:A10-P1-IBSPINE-02")
    assert e.count == 2 and e.gbytes == 100.0
    assert [n.name for n in t.nics("a08-p1-dgx-04-c07")] == sorted(n.name for n in t.nics("a08-p1-dgx-04-c07"))


SMALL = """\
vendid=0x2c9
switchguid=0xaa(aa)
Switch\t4 "S-aa"\t\t# "leaf-1" enhanced port 0 lid 1 lmc 0
[1]\t"H-c1"[1](c1) \t\t# "node01 mlx5_0" lid 3 4xHDR
[2]\t"H-c2"[1](c2) \t\t# "node02 mlx5_0" lid 4 4xHDR
[3]\t"S-bb"[1]\t\t# "spine-1" lid 2 4xHDR
[4]\t"S-bb"[2]\t\t# "spine-1" lid 2 4xHDR

Switch\t2 "S-bb"\t\t# "spine-1" enhanced port 0 lid 2 lmc 0
[1]\t"S-aa"[3]\t\t# "leaf-1" lid 1 4xHDR
[2]\t"S-aa"[4]\t\t# "leaf-1" lid 1 4xHDR

Ca\t1 "H-c1"\t\t# "node01 mlx5_0"
[1](c1) \t"S-aa"[1]\t\t# lid 3 lmc 0 "leaf-1" lid 1 4xHDR
Ca\t1 "H-c2"\t\t# "node02 mlx5_0"
[1](c2) \t"S-aa"[2]\t\t# lid 4 lmc 0 "leaf-1" lid 1 4xHDR
"""


def test_small_fabric_cables_once():
    f = parse_ibnetdiscover(SMALL, "small.out")
    cf = compute_fabric(f)
    assert len(f.cables) == 4 and cf.hosts == ["node01", "node02"]
    assert cf.switch_links == {("aa", "bb"): (4, "HDR", 2)}
    assert cf.levels == {"aa": 0, "bb": 1}


BAD = [
    (SMALL.replace("lid 4 4xHDR\n[3]", "lid 4 4xQQR\n[3]"), 5, "link rate"),
    (SMALL.replace('[2]\t"S-aa"[4]', '[2]\t"S-aa"[3]'), 11, "already cabled elsewhere (line 6)"),
    (SMALL.replace("lid 1 4xHDR\nCa\t1", "lid 1 4xEDR\nCa\t1"), 14, "disagrees with line 4"),
    (SMALL.replace('Ca\t1 "H-c2"', 'Cx\t1 "H-c2"'), 15, "unexpected line"),
    (SMALL + '[2](c2) \t"S-zz"[9]\t\t# lid 4 lmc 0 "x" lid 1 4xHDR\n', 17, "never lists"),
    ('[1]\t"S-aa"[3]\t\t# 4xHDR\n', 1, "before any Switch/Ca header"),
    # lanes no IB port runs: a 0 GB/s link, or a width the spec does not have
    (SMALL.replace("lid 4 4xHDR\n[3]", "lid 4 0xHDR\n[3]"), 5, "0 lanes is no InfiniBand link width"),
    (SMALL.replace("lid 4 4xHDR\n[3]", "lid 4 3xHDR\n[3]"), 5, "3 lanes is no InfiniBand link width"),
]

#: numbers as ibnetdiscover never prints them: other scripts' digits, superscripts, `_`, signs, and a port whose
#: brackets are not where they belong (int() read all of these, or failed with a traceback)
NUMBERS = [
    (SMALL.replace('[1]\t"H-c1"', '[١]\t"H-c1"'), 4, "expected a port line"),
    (SMALL.replace('[1]\t"H-c1"', '[-1]\t"H-c1"'), 4, "expected a port line"),
    (SMALL.replace('"H-c1"[1]', '"H-c1"[+1]'), 4, "expected a port line"),
    (SMALL.replace('"H-c1"[1]', '"H-c1"(1]'), 4, "expected a port line"),
    (SMALL.replace("lid 4 4xHDR\n[3]", "lid 4 ²xHDR\n[3]"), 5, "link rate"),
    (SMALL.replace('Ca\t1 "H-c2"', 'Ca\t1_0 "H-c2"'), 15, "expected Ca <ports>"),
]


@pytest.mark.parametrize("bad, line, words", NUMBERS)
def test_numbers_are_ascii_digits(bad, line, words):
    assert bad != SMALL
    with pytest.raises(ParseError) as err:
        parse_ibnetdiscover(bad, "bad.out")
    assert err.value.line == line and words in str(err.value), str(err.value)


@pytest.mark.parametrize("bad, line, words", BAD)
def test_errors_name_the_line(bad, line, words):
    with pytest.raises(ParseError) as err:
        parse_ibnetdiscover(bad, "bad.out")
    assert err.value.line == line and words in str(err.value), str(err.value)


@pytest.mark.parametrize("path", shared_files("ibnet"), ids=lambda p: p.name)
def test_shared_sweep(path):
    f = parse_ibnetdiscover(path.read_text(), path.name)
    cf = compute_fabric(f)
    assert cf.leaves() and len(cf.hcas) <= len(f.of_kind("ca"))


def _variants():
    """Dumps in the shape ibnetdiscover writes (read entry by entry) and variants that only the line-by-line
    reader reads (entries without blank lines between them, upper-case GUIDs, a comment or spaces inside an
    entry, a port number with a leading zero, a cable listed from one side only)."""
    real = read_data(EXAMPLE)
    spaced = SMALL.replace("\nCa\t1", "\n\nCa\t1")
    yield "real", real, True
    yield "small, blank lines between entries", spaced, True
    yield "small, entries run together", SMALL, False
    yield "upper-case GUIDs", spaced.replace('"S-aa"', '"S-AA"'), False
    yield "comment inside an entry", spaced.replace("lid 1 lmc 0\n", "lid 1 lmc 0\n# note\n", 1), False
    yield "trailing tab", spaced.replace("4xHDR\n", "4xHDR\t\n", 1), False
    yield "leading zero", spaced.replace('"S-aa"[1]', '"S-aa"[01]'), False
    yield "one-sided cable", spaced.replace('[2]\t"S-aa"[4]\t\t# "leaf-1" lid 1 4xHDR\n', ""), True
    big = spaced.replace('[4]\t"S-bb"[2]', '[123456789]\t"S-bb"[2]').replace('"S-aa"[4]', '"S-aa"[123456789]')
    yield "nine-digit port number", big, True
    yield "ten-digit port number", big.replace("123456789", "1234567890"), False
    ndr = spaced.replace('"S-bb"[2]\t\t# "spine-1" lid 2 4xHDR', '"S-bb"[2]\t\t# "spine-1" lid 2 4xNDR')
    yield "cables at two rates", ndr.replace('"S-aa"[4]\t\t# "leaf-1" lid 1 4xHDR', '"S-aa"[4]\t\t# "leaf-1" lid 1 4xNDR'), True
    quoted = spaced.replace('"leaf-1"', '"leaf "1" #a"').replace('"node01 mlx5_0"', '"node01 "mlx5_0"\\"')
    yield "descriptions with quotes, # and a backslash", quoted, True
    lonely = 'vendid=0x2c9\nswitchguid=0xcc(cc)\nSwitch\t8 "S-cc"\t\t# "lonely" enhanced port 0 lid 9 lmc 0\n'
    yield "a switch without cables", spaced + "\n" + lonely, True
    yield "no cables at all", lonely, True
    leaf_side = '[17]\t"H-e09d7303007a5a68"[1](e09d7303007a5a68) \t\t# "a08-p1-dgx-04-c17 mlx5_5" lid 657 4xNDR\n'
    assert leaf_side in real
    yield "real, a cable listed by the adapter only", real.replace(leaf_side, ""), True


@pytest.mark.parametrize("name, text, by_entry", list(_variants()), ids=lambda x: x if isinstance(x, str) and
                         len(x) < 60 else "")
def test_both_readers_agree(name, text, by_entry):
    """The entry reader and the line reader give the same fabric, line numbers included; the entry reader
    leaves what it does not recognise to the line reader."""
    from slurmtools.topology.ibnet import _read_entries, _read_lines

    fast = _read_entries(text, "x.out")
    assert (fast is not None) == by_entry
    assert parse_ibnetdiscover(text, "x.out") == _read_lines(text, "x.out")
    if fast is not None:
        assert fast == _read_lines(text, "x.out")


@pytest.mark.parametrize("bad", [case[0] for case in BAD])
def test_errors_in_entry_shaped_dumps(bad):
    """A dump in the entry reader's shape whose cables disagree fails as the line reader says, at its line."""
    from slurmtools.topology.ibnet import _read_lines

    spaced = bad.replace("\nCa\t1", "\n\nCa\t1")
    with pytest.raises(ParseError) as want:
        _read_lines(spaced, "bad.out")
    with pytest.raises(ParseError) as got:
        parse_ibnetdiscover(spaced, "bad.out")
    assert str(got.value) == str(want.value) and got.value.line == want.value.line


@pytest.mark.parametrize("spec", ["0xNDR", "3xHDR", "16xNDR", "٤xNDR", "xNDR", "4xQQR"])
def test_fabric_file_link_widths_are_the_specs(spec):
    """The fabric file's `link` takes the widths an IB port runs (1, 2, 4, 8, 12), as the dump reader does."""
    from slurmtools.topology.links import ib_link

    with pytest.raises(ValueError, match="widths 1, 2, 4, 8, 12"):
        ib_link(spec)
    assert ib_link("2xNDR").gbytes == 25.0 and ib_link("12xhdr").gbytes == 75.0


@pytest.mark.parametrize("rate, what", [("4x???", "speed"), ("??xHDR", "width"), ("??x???", "width"),
                                        # as dump_linkwidth_compat prints it: `??` with no `x` after it (these
                                        # were refused as "expected the link rate (like 4xNDR)", not saying why)
                                        ("??HDR", "width"), ("??FDR10", "width"), ("?????", "width and speed")])
def test_a_rate_older_diags_cannot_name_says_so(rate, what):
    """infiniband-diags prints `???` for a speed (and `??` for a width) newer than itself, as an old ibnetdiscover
    does on an HDR or NDR fabric: the cable's rate is not in the dump, and the one line says why."""
    bad = SMALL.replace("lid 4 4xHDR\n[3]", f"lid 4 {rate}\n[3]")
    with pytest.raises(ParseError) as err:
        parse_ibnetdiscover(bad, "old-diags.out")
    assert err.value.line == 5 and f"does not know the link's {what}" in str(err.value), str(err.value)
    assert "\n" not in str(err.value)
