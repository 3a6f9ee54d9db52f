"""ibnetdiscover dumps in the shapes real sites feed us: the tool's options (-f, -g, -s), pastes (indented, no blank
lines, CRLF), GUIDs as the tool prints them, a degraded cable, and the other outputs people mistake for a dump.

The dumps here are composed for these tests in the layout infiniband-diags writes (rdma-core
infiniband-diags/ibnetdiscover.c: out_switch, out_ca, out_switch_port, out_ca_port, dump_ports_report, list_node;
libibnetdisc dump_endnode), with the tokens real dumps show; each case says where its shape was seen."""

from __future__ import annotations

import subprocess
import sys

import pytest
from slurmtools.errors import ParseError
from slurmtools.topology.ibnet import _read_entries, _read_lines, compute_fabric, parse_ibnetdiscover, to_topology

LEAF, SPINE = "fc6a1c0300e1a001", "fc6a1c0300e1b001"
H1, H2 = "0c42a10300aa0001", "0c42a10300aa0002"   # port GUIDs print without the leading 0: (c42a10300aa0001)


def dump(after_rate: str = "", rate: str = "4xHDR", uplinks: tuple[str, ...] = ("4xHDR", "4xHDR")) -> str:
    """A leaf with two hosts and parallel uplinks to a spine, as ibnetdiscover prints it (blank line before each
    entry, tabs, `%016` node GUIDs, `%` port GUIDs); `after_rate` is appended to every port line."""
    e = after_rate
    up_leaf = "".join(f'[{21 + i}]\t"S-{SPINE}"[{1 + i}]\t\t# "MF0;spine01:MQM8700/U1" lid 2 {r}{e}\n'
                      for i, r in enumerate(uplinks))
    up_spine = "".join(f'[{1 + i}]\t"S-{LEAF}"[{21 + i}]\t\t# "MF0;leaf01:MQM8700/U1" lid 3 {r}{e}\n'
                       for i, r in enumerate(uplinks))
    return (
        "#\n# Topology file: generated on Mon Dec 18 12:34:08 2023\n#\n"
        f"# Initiated from node {H1} port {H1}\n"
        f"\nvendid=0x2c9\ndevid=0xd2f0\nsysimgguid=0x{LEAF}\nswitchguid=0x{LEAF}({LEAF})\n"
        f'Switch\t41 "S-{LEAF}"\t\t# "MF0;leaf01:MQM8700/U1" enhanced port 0 lid 3 lmc 0\n'
        f'[1]\t"H-{H1}"[1]({H1[1:]}) \t\t# "gpu01 mlx5_0" lid 11 {rate}{e}\n'
        f'[2]\t"H-{H2}"[1]({H2[1:]}) \t\t# "gpu02 mlx5_0" lid 12 {rate}{e}\n' + up_leaf +
        f"\nvendid=0x2c9\ndevid=0xd2f0\nsysimgguid=0x{SPINE}\nswitchguid=0x{SPINE}({SPINE})\n"
        f'Switch\t41 "S-{SPINE}"\t\t# "MF0;spine01:MQM8700/U1" enhanced port 0 lid 2 lmc 0\n' + up_spine +
        f"\nvendid=0x2c9\ndevid=0x101b\nsysimgguid=0x{H1[1:]}\ncaguid=0x{H1[1:]}\n"
        f'Ca\t1 "H-{H1}"\t\t# "gpu01 mlx5_0"\n'
        f'[1]({H1[1:]}) \t"S-{LEAF}"[1]\t\t# lid 11 lmc 0 "MF0;leaf01:MQM8700/U1" lid 3 {rate}{e}\n'
        f"\nvendid=0x2c9\ndevid=0x101b\nsysimgguid=0x{H2[1:]}\ncaguid=0x{H2[1:]}\n"
        f'Ca\t1 "H-{H2}"\t\t# "gpu02 mlx5_0"\n'
        f'[1]({H2[1:]}) \t"S-{LEAF}"[2]\t\t# lid 12 lmc 0 "MF0;leaf01:MQM8700/U1" lid 3 {rate}{e}\n')


PLAIN = parse_ibnetdiscover(dump(), "x.out")


def same_fabric(f) -> bool:
    """The fabric PLAIN reads: nodes, cables and rates (line numbers aside)."""
    key = lambda fab: (fab.nodes.keys(), sorted(c[:6] for c in fab.cables), fab.port_guids)  # noqa: E731
    return key(f) == key(PLAIN)


def test_the_plain_dump():
    cf = compute_fabric(PLAIN)
    assert cf.hosts == ["gpu01", "gpu02"] and cf.levels == {LEAF: 0, SPINE: 1}
    assert {h.link for h in cf.hcas} == {"4xHDR"} and cf.switch_links == {(LEAF, SPINE): (4, "HDR", 2)}


@pytest.mark.parametrize("after", [
    # `ibnetdiscover -f` in rdma-core (https://linuxman7.org/linux/man-pages/man8/ibnetdiscover.8.html)
    " s=4 w=2 v=4",
    " s=4 w=2 v=4 e=4",     # -f in infiniband-diags before rdma-core, with the extended speed
])
def test_full_info_after_the_rate(after):
    """-f appends the raw speed, width and VL cap after the rate: the rate is still the word before them (it was
    refused as "expected the link rate ..., found 'v=4'"), in both readers."""
    text = dump(after)
    assert same_fabric(parse_ibnetdiscover(text, "f.out")) and same_fabric(_read_lines(text, "f.out"))
    assert _read_entries(text, "f.out") is not None     # -f dumps keep the fast reader


@pytest.mark.parametrize("after", [" (scp)", " slot 3"])
def test_xsigo_words_after_the_rate(after):
    """A port cabled to a Xsigo director ends in ` slot N` or ` (scp)` (out_switch_port)."""
    text = dump().replace('"gpu01 mlx5_0" lid 11 4xHDR\n', f'"gpu01 mlx5_0" lid 11 4xHDR{after}\n')
    assert same_fabric(parse_ibnetdiscover(text, "x.out"))


def test_words_after_the_rate_that_are_not_ibnetdiscover_still_fail():
    bad = dump().replace('"gpu01 mlx5_0" lid 11 4xHDR\n', '"gpu01 mlx5_0" lid 11 4xHDR q=1\n')
    with pytest.raises(ParseError, match="found 'q=1'") as err:
        parse_ibnetdiscover(bad, "x.out")
    assert err.value.line == 11 and err.value.column == len('[1]\t"H-0c42a10300aa0001"[1](c42a10300aa0001) '
                                                            '\t\t# "gpu01 mlx5_0" lid 11 4xHDR ') + 1


# `ibnetdiscover -g`: chassis heads, "# Spine Nodes"/"# Line Nodes", `[ext N]` external port numbers, the chassis
# after sysimgguid and switchguid, "Non-Chassis Nodes" (man page example and dump_topology's group branch:
# https://github.com/linux-rdma/rdma-core/blob/master/infiniband-diags/ibnetdiscover.c)
LINE, SPN = "0008f104004100b1", "0008f104004100a1"
GROUPED = (
    "#\n# Topology file: generated on Tue Jun  5 14:15:10 2007\n#\n# Initiated from node 0002c90200001111 port "
    "0002c90200001112\n"
    "\nChassis 1 (guid 0x8f104004100a0)\n"
    "\n# Spine Nodes"
    "\nvendid=0x8f1\ndevid=0x5a31\nsysimgguid=0x8f104004100a0\t\t# Chassis 1\n"
    f"switchguid=0x{SPN[2:]}({SPN[2:]})\t# ISR9288 Spine 1 Chip 1\n"
    f'Switch\t24 "S-{SPN}"\t\t# "ISR9288 Voltaire sFB-12D" base port 0 lid 5 lmc 0\n'
    f'[1]\t"S-{LINE}"[13]\t\t# "ISR9288/ISR9096 Voltaire sLB-24D" lid 6 4xDDR\n'
    "\n# Line Nodes"
    "\nvendid=0x8f1\ndevid=0x5a30\nsysimgguid=0x8f104004100a0\t\t# Chassis 1\n"
    f"switchguid=0x{LINE[2:]}({LINE[2:]})\t# ISR9288 Line 1 Chip 1\n"
    f'Switch\t24 "S-{LINE}"\t\t# "ISR9288/ISR9096 Voltaire sLB-24D" base port 0 lid 6 lmc 0\n'
    f'[13]\t"S-{SPN}"[1]\t\t# "ISR9288 Voltaire sFB-12D" lid 5 4xDDR\n'
    '[1][ext 1]\t"H-0002c90200001111"[1](2c90200001112) \t\t# "n001 HCA-1" lid 20 4xDDR\n'
    "\n# Chassis Switches\n\n# Chassis CAs\n"
    "\nNon-Chassis Nodes\n"
    "\nvendid=0x2c9\ndevid=0x6282\nsysimgguid=0x2c90200001113\ncaguid=0x2c90200001111\n"
    'Ca\t2 "H-0002c90200001111"\t\t# "n001 HCA-1"\n'
    f'[1](2c90200001112) \t"S-{LINE}"[1][ext 1]\t\t# lid 20 lmc 0 "ISR9288/ISR9096 Voltaire sLB-24D" lid 6 4xDDR\n')


def test_grouped_dump():
    """-g output was refused at its first `Chassis` line; it is the whole topology plus grouping lines."""
    f = parse_ibnetdiscover(GROUPED, "g.out")
    cf = compute_fabric(f)
    assert cf.levels == {LINE: 0, SPN: 1} and cf.hosts == ["n001"]
    assert [(h.leaf, h.link) for h in cf.hcas] == [(LINE, "4xDDR")]
    assert cf.switch_links == {(LINE, SPN): (4, "DDR", 1)}


def test_progress_lines_of_show():
    """-s prints each node as found, with a lid range, on the dump's own output (libibnetdisc dump_endnode)."""
    progress = (f'DR path slid 0; dlid 0; 0 -> new Channel Adapter {{{H1}}} portnum 1 lid 11-11 "gpu01 mlx5_0"\n'
                f'DR path slid 0; dlid 0; 0,1 -> new Switch {{{LEAF}}} portnum 0 base lid 3-3"MF0;leaf01:MQM8700/U1"\n')
    assert same_fabric(parse_ibnetdiscover(progress + dump(), "s.out"))


def test_indented_paste():
    """The man page shows its example indented, as mails and documents paste dumps (spaces for tabs too):
    refused at the first indented line before; an error still points at the right column."""
    indented = "".join("   " + ln.replace("\t", "    ") + "\n" if ln else "\n" for ln in dump().split("\n"))
    assert same_fabric(parse_ibnetdiscover(indented, "i.out"))
    bad = indented.replace('"H-0c42a10300aa0001"[1](c', '"X-0c42a10300aa0001"[1](c', 1)
    with pytest.raises(ParseError, match="expected a remote node") as err:
        parse_ibnetdiscover(bad, "i.out")
    assert err.value.column == len('   [1]    "')   # the quote that opens the far node, indentation counted


def test_no_blank_lines_crlf_and_port_guids_of_16_digits():
    """Pasted without blank lines and with CRLF (a 2023 EDR dump embedded in a Flask app showed both the run-on
    entries and `(8c0eb0300ddc0f6)` port GUIDs for node `H-08c0eb0300ddc0f6`): the same fabric, port GUIDs
    as the 16 hex digits ibstat shows (they were kept as printed, without the leading 0)."""
    assert PLAIN.port_guids == {H1: (H1,), H2: (H2,)}
    run_on = "\n".join(ln for ln in dump().split("\n") if ln)
    assert same_fabric(parse_ibnetdiscover(run_on, "r.out"))
    assert same_fabric(parse_ibnetdiscover(dump().replace("\n", "\r\n"), "crlf.out"))
    t = to_topology(compute_fabric(PLAIN))
    assert [n.port_guids for n in t.nics("gpu01")] == [(H1,)]


@pytest.mark.parametrize("uplinks", [("4xDDR", "4xEDR", "4xEDR"), ("4xEDR", "4xEDR", "4xDDR")])
def test_a_degraded_cable_does_not_set_the_bundle_rate(uplinks):
    """Parallel uplinks where one cable trained down (4xDDR among 4xEDR, as a real SwitchIB dump shows): the
    bundle took the rate of whichever cable came first, so 3 EDR-class cables read as 3 x DDR."""
    cf = compute_fabric(parse_ibnetdiscover(dump(rate="4xEDR", uplinks=uplinks), "d.out"))
    assert cf.switch_links == {(LEAF, SPINE): (4, "EDR", 3)}
    tie = compute_fabric(parse_ibnetdiscover(dump(rate="4xEDR", uplinks=("4xEDR", "4xDDR")), "d.out"))
    assert tie.switch_links == {(LEAF, SPINE): (4, "DDR", 2)}     # on a tie, the slower


def test_back_to_back_adapters_say_so():
    """Two hosts cabled straight together (no switch) imported as 0 hosts, without a word."""
    b2b = ('\nvendid=0x2c9\ndevid=0x1017\nsysimgguid=0xc42a10300bb0001\ncaguid=0xc42a10300bb0001\n'
           'Ca\t1 "H-0c42a10300bb0001"\t\t# "nodeA mlx5_0"\n'
           '[1](c42a10300bb0001) \t"H-0c42a10300bb0002"[1] (c42a10300bb0002) '
           '\t\t# lid 1 lmc 0 "nodeB mlx5_0" lid 2 4xEDR\n'
           '\nvendid=0x2c9\ndevid=0x1017\nsysimgguid=0xc42a10300bb0002\ncaguid=0xc42a10300bb0002\n'
           'Ca\t1 "H-0c42a10300bb0002"\t\t# "nodeB mlx5_0"\n'
           '[1](c42a10300bb0002) \t"H-0c42a10300bb0001"[1] (c42a10300bb0001) '
           '\t\t# lid 2 lmc 0 "nodeA mlx5_0" lid 1 4xEDR\n')
    f = parse_ibnetdiscover(b2b, "b2b.out")
    assert len(f.cables) == 1
    with pytest.raises(ParseError, match="no switch in the dump.*back to back"):
        compute_fabric(f)


# Other outputs fed to the dump reader: each refused at its first line, saying what it is (before: "unexpected
# line starting 'CA'", or "expected Ca <ports> ..." for the node lists).
OTHERS = [
    # ibnetdiscover -p (dump_ports_report)
    ("CA    11  1 0x0c42a10300aa0001 4x HDR - SW     3  1 0xfc6a1c0300e1a001 ( 'gpu01 mlx5_0' - 'MF0;leaf01' )\n",
     1, "`ibnetdiscover -p` ports report"),
    # ibnetdiscover -l / -H / -S / -R (list_node)
    ('Ca\t : 0x0c42a10300aa0001 ports 1 devid 0x101b vendid 0x2c9 "gpu01 mlx5_0"\n', 1, "node list"),
    ('Switch\t : 0xfc6a1c0300e1a001 ports 41 devid 0xd2f0 vendid 0x2c9 "MF0;leaf01:MQM8700/U1"\n', 1, "node list"),
    ('Router\t : 0x0002c90300ff0001 ports 2 devid 0x1003 vendid 0x2c9 "ib-router01"\n', 1, "node list"),
    # ibswitches / ibhosts (as pasted in READMEs and issues: `Switch  : 0x08c0eb0300add04e ports 41 "..."`)
    ('Switch\t: 0xfc6a1c0300e1a001 ports 41 "MF0;leaf01:MQM8700/U1" enhanced port 0 lid 3 lmc 0\n', 1, "node list"),
    ('Ca      : 0x0c42a10300aa0001 ports 1 "gpu01 mlx5_0"\n', 1, "node list"),
    # iblinkinfo
    ('CA: gpu01 mlx5_0:\n      0x0c42a10300aa0001     11    1[  ] ==( 4X      53.125 Gbps Active/  LinkUp)==>'
     '       3    1[  ] "MF0;leaf01:MQM8700/U1" ( )\n', 1, "`iblinkinfo` output"),
    ('Switch: 0xfc6a1c0300e1a001 MF0;leaf01:MQM8700/U1:\n', 1, "`iblinkinfo` output"),
    # ibnetdiscover --diff
    (f'\n< vendid=0x2c9\n< Switch\t41 "S-{LEAF}"\t\t# "MF0;leaf01:MQM8700/U1" enhanced port 0 lid 3 lmc 0\n',
     2, "`ibnetdiscover --diff` output"),
    # OpenSM / ibdiagnet subnet .lst
    ("{ CA Ports:1 SystemGUID:0c42a10300aa0001 NodeGUID:0c42a10300aa0001 PortGUID:0c42a10300aa0001 VenID:000002C9 "
     "DevID:101B Rev:00000000 {gpu01 mlx5_0} LID:000B PN:01 } { SW Ports:29 ... } PHY=4x LOG=ACT SPD=HDR\n",
     1, "subnet .lst file"),
    ("CA 'mlx5_0'\n\tCA type: MT4123\n", 1, "`ibstat` output"),
    # stderr saved with the dump (2>&1): github.com/nminoru/pib/issues/5, guilbaults/infiniband-exporter/issues/12
    ("src/query_smp.c:228; umad (DR path slid 0; dlid 0; 0,1,21 Attr 0x11:0) bad status 110; Connection timed out\n"
     + dump(), 1, "warning ibnetdiscover printed on standard error"),
    (dump().replace("\nvendid", "\nibwarn: [12345] mad_rpc_open_port: client_register for mgmt 1 failed\nvendid", 1),
     6, "warning ibnetdiscover printed on standard error"),
    # libibnetdisc's IBND_ERROR prints __FILE__, the whole build path in an rdma-core package (was "unexpected line
    # starting '/builddir/build/BUI'")
    ("/builddir/build/BUILD/rdma-core-44.0/libibnetdisc/query_smp.c:237; umad (DR path slid 0; dlid 0; 0,1,21 Attr "
     "0x11:0) bad status 110; Connection timed out\n" + dump(), 1, "warning ibnetdiscover printed on standard error"),
]


@pytest.mark.parametrize("text, line, words", OTHERS, ids=lambda x: x if isinstance(x, str) and len(x) < 50 else "")
def test_other_outputs_say_what_they_are(text, line, words):
    with pytest.raises(ParseError) as err:
        parse_ibnetdiscover(text, "fabric.txt")
    msg = str(err.value)
    assert err.value.line == line and words in msg and msg.startswith(f"fabric.txt:{line}:"), msg
    assert "\n" not in msg


def test_other_output_through_the_cli(tmp_path):
    """The CLI prints the one line naming file, line and what the file is, and exits 2: no traceback."""
    p = tmp_path / "ports.txt"
    p.write_text(OTHERS[0][0])
    r = subprocess.run([sys.executable, "-m", "slurmtools", "topo", "import", "--from", "ibnetdiscover", str(p)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith(f"slurmtools: error: {p}:1:1: this is an `ibnetdiscover -p`")
    assert len(r.stderr.splitlines()) == 1 and not r.stdout


# ---------------------------------------------------------------------------------------- what a line holds
# Audit against infiniband-diags (rdma-core infiniband-diags/ibnetdiscover.c out_switch, out_ca, out_ids; OFED 1.x
# ibnetdiscover.c for the older forms; libibnetdisc dump_endnode and IBND_ERROR): every line is read as the tool
# means it or refused at that line, never read over with something else in it.

def test_descriptions_are_read_whole():
    """ibnetdiscover prints a node description as it is (clean_nodedesc blanks only unprintable bytes, and a
    --node-name-map name is printed as written): a quote, `#` or backslash is the description's own. A header's
    description was cut at its first inner quote (`gpu01 "mlx5_0"` read as `gpu01 `, so the host was left out as an
    adapter that names none; `MF0;leaf "01"` as `MF0;leaf `), by both readers."""
    leaf, gpu01 = 'MF0;leaf "01" #a:MQM8700/U1', 'gpu01 "mlx5_0"'
    text = dump().replace('"MF0;leaf01:MQM8700/U1"', f'"{leaf}"').replace('"gpu01 mlx5_0"', f'"{gpu01}"')
    assert _read_entries(text, "q.out") is not None          # the shape ibnetdiscover writes: the fast reader
    for f in (parse_ibnetdiscover(text, "q.out"), _read_lines(text, "q.out")):
        assert f.nodes[LEAF].description == leaf and f.nodes[H1].description == gpu01
        assert same_fabric(f)
    cf = compute_fabric(parse_ibnetdiscover(text, "q.out"))
    assert cf.hosts == ["gpu01", "gpu02"] and not cf.unmapped


# `ibnetdiscover -g` on a Voltaire ISR9288 with an IB-FC router module: dump_topology prints a chassis's line
# nodes with out_switch, and the router sits in linenode[] (chassis.c get_router_slot, insert_line_router), so
# its entry is a `Switch` header with the router's own id, "R-<guid>" (node_name), and router_iter_func skips it.
RTR = "0008f104004100c1"
GROUPED_ROUTER = GROUPED.replace(
    f'[1]\t"S-{LINE}"[13]\t\t# "ISR9288/ISR9096 Voltaire sLB-24D" lid 6 4xDDR\n',
    f'[1]\t"S-{LINE}"[13]\t\t# "ISR9288/ISR9096 Voltaire sLB-24D" lid 6 4xDDR\n'
    f'[2]\t"R-{RTR}"[1]({RTR[2:]}) \t\t# "ISR9288 Voltaire IB-FC router" lid 0 4xDDR\n').replace(
    "\n# Chassis Switches",
    "\nvendid=0x8f1\ndevid=0x5a40\nsysimgguid=0x8f104004100a0\t\t# Chassis 1\n"
    f"switchguid=0x{RTR[2:]}({RTR[2:]})\t# ISR9288 SRBD 1 Chip 1\n"
    f'Switch\t2 "R-{RTR}"\t\t# "ISR9288 Voltaire IB-FC router" base port 0 lid 0 lmc 0\n'
    f'[1]\t"S-{SPN}"[2]\t\t# "ISR9288 Voltaire sFB-12D" lid 5 4xDDR\n'
    "\n# Chassis Switches")


def test_grouped_router_module_is_a_router():
    """The router module was read as a switch by the word before its id, and so placed above the spine as a
    level-2 core switch of the compute fabric; it is a router, told as routers are."""
    assert GROUPED_ROUTER.count(f'"R-{RTR}"') == 2       # its header and the spine's port line
    f = parse_ibnetdiscover(GROUPED_ROUTER, "g.out")
    assert f.nodes[RTR].kind == "router" and f.nodes[RTR].description == "ISR9288 Voltaire IB-FC router"
    cf = compute_fabric(f)
    assert cf.levels == {LINE: 0, SPN: 1} and [n.guid for n in cf.routers] == [RTR]
    assert cf.switch_links == {(LINE, SPN): (4, "DDR", 1)}


PLAIN_TEXT = dump()
SPINE_HEAD = f'Switch\t41 "S-{SPINE}"\t\t# "MF0;spine01:MQM8700/U1" enhanced port 0 lid 2 lmc 0\n'
GPU02_HEAD = f'Ca\t1 "H-{H2}"\t\t# "gpu02 mlx5_0"\n'

# Headers ibnetdiscover never writes, each accepted before (a default or a guess in place of what is missing,
# or a whole line read over), each refused now at its line.
HEADERS = [
    # no description: read as an empty one
    (PLAIN_TEXT.replace(SPINE_HEAD, f'Switch\t41 "S-{SPINE}"\n'), 20, "expected Switch <ports>"),
    # a switch without the `port 0` ending out_switch_detail always prints
    (PLAIN_TEXT.replace(SPINE_HEAD, SPINE_HEAD.replace(" enhanced port 0 lid 2 lmc 0", "")), 20, "expected Switch"),
    # an adapter with a switch's ending
    (PLAIN_TEXT.replace(GPU02_HEAD, GPU02_HEAD.replace("\n", " enhanced port 0 lid 12 lmc 0\n")), 35, "expected Ca"),
    # an id whose letter is not the word's (node_name and the header word both follow the node's type)
    (PLAIN_TEXT.replace(GPU02_HEAD, GPU02_HEAD.replace('"H-', '"S-')), 35, 'a Ca header with the node id "S-'),
    (PLAIN_TEXT.replace(SPINE_HEAD, SPINE_HEAD.replace('"S-', '"H-')), 20, 'a Switch header with the node id "H-'),
    (PLAIN_TEXT.replace(GPU02_HEAD, GPU02_HEAD.replace('Ca\t1 "H-', 'Rt\t1 "H-')), 35, "a Rt header with the node"),
    # a lost line break: the first port line fused onto the header was read over with the header's comment
    (PLAIN_TEXT.replace(GPU02_HEAD, GPU02_HEAD[:-1]), 35, "expected Ca"),
    (PLAIN_TEXT.replace(SPINE_HEAD, SPINE_HEAD[:-1]), 20, "expected Switch"),
]


@pytest.mark.parametrize("text, line, words", HEADERS)
def test_headers_ibnetdiscover_never_writes_are_refused(text, line, words):
    assert text != PLAIN_TEXT
    for read in (parse_ibnetdiscover, _read_lines):
        with pytest.raises(ParseError) as err:
            read(text, "h.out")
        msg = str(err.value)
        assert err.value.line == line and words in msg and msg.startswith(f"h.out:{line}:"), msg
        assert "\n" not in msg


@pytest.mark.parametrize("printed, form", [
    (f"switchguid=0x{SPINE}({SPINE})", f"switchguid=0x{SPINE}"),                        # the port GUID left out
    (f"switchguid=0x{SPINE}({SPINE})", f"switchguid=0x{SPINE}({SPINE})\t# "),           # rdma-core -g, no slot known
    (f"switchguid=0x{SPINE}({SPINE})", f"switchguid=0x{SPINE}({SPINE})ISR9288 Spine 1 Chip 1"),  # OFED 1.x -g
    (f"sysimgguid=0x{SPINE}", f"sysimgguid=0x{SPINE}\t\t# Chassis 1 (xsigo-dir1) slot 3"),      # -g, Xsigo
])
def test_id_lines_in_every_form_ibnetdiscover_prints(printed, form):
    """The id lines are read over (the graph needs none of them) in each form they are printed in."""
    text = PLAIN_TEXT.replace(printed, form)
    assert text != PLAIN_TEXT and same_fabric(parse_ibnetdiscover(text, "i.out"))
    assert same_fabric(_read_lines(text, "i.out"))


def test_a_header_fused_onto_an_id_line_is_refused():
    """A lost line break fuses a header onto the id line above it. Id lines were read over by their name alone, and
    the header with them: a switch without cables (or any node no cable names) vanished without a word."""
    lonely = "fc6a1c0300e1c001"
    text = PLAIN_TEXT + (f"\nvendid=0x2c9\ndevid=0xd2f0\nsysimgguid=0x{lonely}\nswitchguid=0x{lonely}({lonely})\n"
                         f'Switch\t41 "S-{lonely}"\t\t# "MF0;leaf02:MQM8700/U1" enhanced port 0 lid 9 lmc 0\n')
    assert lonely in parse_ibnetdiscover(text, "i.out").nodes
    fused = text.replace(f"({lonely})\nSwitch", f"({lonely})Switch")
    for read in (parse_ibnetdiscover, _read_lines):
        with pytest.raises(ParseError, match="expected switchguid=0x<hex>") as err:
            read(fused, "i.out")
        assert err.value.line == 41


def test_a_warning_fused_into_a_progress_line_is_refused():
    """With `-s` and 2>&1, a warning from standard error lands wherever standard output's buffer was flushed, here
    at the end of a progress line: the line was read over as progress, the warning (the scan missed a node) with
    it."""
    progress = f'DR path slid 0; dlid 0; 0 -> new Channel Adapter {{{H1}}} portnum 1 lid 11-11 "gpu01 mlx5_0"'
    assert same_fabric(parse_ibnetdiscover(progress + "\n" + PLAIN_TEXT, "s.out"))
    warning = ("src/query_smp.c:228; umad (DR path slid 0; dlid 0; 0,1,21 Attr 0x11:0) bad status 110; Connection "
               "timed out")
    with pytest.raises(ParseError, match="standard error is fused into this line") as err:
        parse_ibnetdiscover(progress + warning + "\n" + PLAIN_TEXT, "s.out")
    assert err.value.line == 1 and "\n" not in str(err.value)
