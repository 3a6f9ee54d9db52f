"""topology.conf variants that real files use, read as Slurm 25.11's own parser reads them.

Ground truth: src/common/parse_config.c (`keyvalue_pattern`, `_get_next_line`, `_strip_comments`,
`_strip_escapes`, `_parse_include_directive`), src/common/parse_value.c (`s_p_handle_uint32`),
src/plugins/topology/tree/switch_record.c (`_parse_switches`, `_read_topo_file`, `switch_record_validate`) and
src/plugins/topology/block/block_record.c (`_read_topo_file`, `block_record_validate`). Inputs are written here in
the shape of the files, not copied from them.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.errors import ParseError
from slurmtools.topology.slurm_topology_conf import parse_topology_conf

runner = CliRunner()


def _tree(text: str) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    return {n: (s.nodes, s.switches) for n, s in parse_topology_conf(text, "t.conf").switches.items()}


@pytest.mark.parametrize("text, want", [
    # keyvalue_pattern allows blanks around `=`; the tree was refused ("found 'SwitchName'")
    ("SwitchName = leaf1 Nodes = gpu[01-02]\n", {"leaf1": (("gpu01", "gpu02"), ())}),
    # a quoted value: quotes dropped, blanks inside it separate hosts (hostlist_create splits at "\t, \n"); the
    # quotes were kept in the host names ('"gpu01', 'gpu03"') without a word
    ('SwitchName=leaf1 Nodes="gpu[01-02], gpu03"\n', {"leaf1": (("gpu01", "gpu02", "gpu03"), ())}),
    ('SwitchName=leaf1 Nodes=""\n', {"leaf1": ((), ())}),
    # a continuation joins the next line with nothing between (`_strip_continuation`): one hostlist over two
    # lines, as generated files wrap long node lists; the second half was refused as a key
    ("SwitchName=leaf1 Nodes=gpu[01-02],\\\ngpu[03-04]\n", {"leaf1": (("gpu01", "gpu02", "gpu03", "gpu04"), ())}),
    ("SwitchName=spine \\   # comment after the backslash\n  Switches=leaf1\nSwitchName=leaf1 Nodes=n1\n",
     {"spine": ((), ("leaf1",)), "leaf1": (("n1",), ())}),
    # `\#` is a `#`, not a comment (`_strip_comments` / `_strip_escapes`); the name was cut to 'rack'
    ("SwitchName=rack\\#1 Nodes=n1\n", {"rack#1": (("n1",), ())}),
    # several bracket groups and prefix lists, Switches= naming switches defined later
    ("SwitchName=top Switches=r[1-2]\nSwitchName=r1 Nodes=r1n[01-02],gpu[1-2]\nSwitchName=r2 Nodes=r[2-3]n[1-2]\n",
     {"top": ((), ("r1", "r2")), "r1": (("r1n01", "r1n02", "gpu1", "gpu2"), ()),
      "r2": (("r2n1", "r2n2", "r3n1", "r3n2"), ())}),
])
def test_lines_read_as_slurm_reads_them(text, want):
    assert _tree(text) == want


@pytest.mark.parametrize("value, speed", [("0x10", 16), ("010", 8), ("4k", 4096), ("UNLIMITED", 0xFFFFFFFF),
                                          ("infinite", 0xFFFFFFFF), ("0", 0), ("4294967295", 4294967295)])
def test_link_speed_as_s_p_handle_uint32_reads_it(value, speed):
    """strtoul base 0 and a k suffix: `010` was read as 10, `0x10` and UNLIMITED refused."""
    c = parse_topology_conf(f"SwitchName=s1 Nodes=n1 LinkSpeed={value}\n", "t.conf")
    assert c.switches["s1"].link_speed == speed


@pytest.mark.parametrize("text, want", [
    ("BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,16,8\n", (4, 8, 16)),   # a level bitmap: order after the first is free
    ("BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,4,8\n", (4, 8)),
    ('BlockName=b1 Nodes=n[1-4]\nBlockSizes="4, 8"\n', (4, 8)),        # strtok on "," then atoi skips the blank
    ("BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,,8\n", (4, 8)),          # strtok skips the empty item
])
def test_block_sizes_as_slurm_keeps_them(text, want):
    assert parse_topology_conf(text, "t.conf").block_sizes == want


@pytest.mark.parametrize("text, line, column, words", [
    # Slurm's pattern skips the blank after `Nodes=` and takes the next field as the hostlist (the Slinky
    # operator's `Topology= CoreSpecCount=36`, github.com/SlinkyProject/slurm-operator/issues/261)
    ("SwitchName=s1 Nodes= LinkSpeed=10\n", 1, 15, "Nodes= has no value (Slurm would read the next field"),
    ("SwitchName=s1 Nodes+=n1\n", 1, 15, "Nodes+=: Slurm ignores the '+'"),
    ("SwitchName=s1 Nodes=n1\nInclude /etc/slurm/topology-extra.conf\n", 2, 1,
     "Include /etc/slurm/topology-extra.conf: slurmtools reads one file and does not follow Include"),
    ("include extra.conf\n", 1, 1, "does not follow Include"),
    ("SwitchName=" + "s" * 65 + " Nodes=n1\n", 1, 1, "65 characters long; Slurm refuses a switch name longer than 64"),
    ("SwitchName=s1 Nodes=n1 LinkSpeed=4294967296\n", 1, 24, "LinkSpeed= expects a number from 0 to 4294967295"),
    ("SwitchName=s1 Nodes=n1 LinkSpeed=-1\n", 1, 24, "LinkSpeed="),
    ("SwitchName=s1 Nodes=n[1-4]\nBlockName=b1 Nodes=n[1-4]\n", 2, None,
     "BlockName= in a file with SwitchName= lines (line 1)"),
    ("BlockSizes=4\nSwitchName=s1 Nodes=n[1-4]\n", 2, None, "SwitchName= in a file with BlockSizes= lines (line 1)"),
    ("", None, None, "no SwitchName= or BlockName= line: Slurm stops with 'No switches configured'"),
    ("# generated, nothing yet\n\n", None, None, "no SwitchName= or BlockName= line"),
    ("BlockSizes=4,8\n", 1, None, "'No blocks configured'"),
    ("BlockName=b1\nBlockName=b2\n", 1, None, "no block lists a node and no BlockSizes="),
    ("BlockName=b1 Nodes=n[1-8]\nBlockSizes=8,4\n", 2, None, "BlockSizes 4: block sizes must grow (8 then 4)"),
    ('SwitchName="" Nodes=n1\n', 1, 1, "SwitchName= has no value"),
])
def test_refused_in_one_line_naming_line_and_field(text, line, column, words):
    with pytest.raises(ParseError) as err:
        parse_topology_conf(text, "t.conf")
    assert (err.value.line, err.value.column) == (line, column), str(err.value)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_sixty_four_characters_is_a_name_slurm_takes():
    assert list(parse_topology_conf("SwitchName=" + "s" * 64 + " Nodes=n1\n", "t.conf").switches) == ["s" * 64]


def test_cli_imports_a_wrapped_quoted_file_and_refuses_a_mixed_one(tmp_path):
    """The CLI path: a generated file with blanks around `=`, a quoted list and a wrapped line imports whole; a
    file holding tree and block lines is refused by a ParseError naming the file and the line."""
    p = tmp_path / "topology.conf"
    p.write_text("# generated\nSwitchName = ib-leaf01 Nodes=\"gpu[001-004], gpu[005-008]\"\n"
                 "SwitchName=ib-leaf02 Nodes=gpu[009-012],\\\ngpu[013-016]   # wrapped\n"
                 "SwitchName=ib-spine01 Switches=ib-leaf[01-02] LinkSpeed=0x10\n")
    r = runner.invoke(app, ["topo", "import", "--from", "topology.conf", str(p), "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.stdout)
    assert info["hosts"] == 16 and info["switches_by_level"] == {"0": 2, "1": 1}
    p.write_text("SwitchName=s1 Nodes=n[1-4]\nBlockName=b1 Nodes=n[1-4]\n")
    r = runner.invoke(app, ["topo", "import", "--from", "topology.conf", str(p)])
    assert isinstance(r.exception, ParseError)   # the CLI's guard prints it as one line, exit 2
    assert str(r.exception).startswith(f"{p}:2: BlockName= in a file with SwitchName= lines (line 1)")


@pytest.mark.parametrize("text, line, column, words", [
    # fgets ends a line at \n only; \v, \f and a lone \r are blanks inside it, so the second SwitchName= is a key
    # of the first line, which Slurm refuses: splitlines() made two switches of it
    ("SwitchName=s1 Nodes=n1\x0bSwitchName=s2 Nodes=n2\n", 1, 24, "SwitchName= does not belong on a SwitchName="),
    ("SwitchName=s1 Nodes=n1\x0cSwitchName=s2 Nodes=n2\n", 1, 24, "SwitchName= does not belong on a SwitchName="),
    ("SwitchName=s1 Nodes=n1\rSwitchName=s2 Nodes=n2\n", 1, 24, "SwitchName= does not belong on a SwitchName="),
    # and the line numbers are the editor's (this error was said to be on line 3)
    ("SwitchName=s1 Nodes=n1\x0c\nSwitchName=s2 Nodes=n2 Foo=1\n", 2, 24, "found 'Foo=1'"),
    # blanks to Python that C's isspace does not know: part of a word to Slurm (a host `n1<U+00A0>n2`, a line
    # that is not blank); they were taken for separators, and the line for an empty one
    ("SwitchName=s1 Nodes=n1\n\u00a0\n", 2, 1, "U+00A0 (NO-BREAK SPACE) is no blank to Slurm"),
    ('SwitchName=s1 Nodes="n1\u00a0n2"\n', 1, 24, "U+00A0 (NO-BREAK SPACE) is no blank to Slurm"),
    ("SwitchName=s1 Nodes=n1\x85SwitchName=s2 Nodes=n2\n", 1, 23, "U+0085 (a control character) is no blank"),
    ("SwitchName=s1 Nodes=n1\u2028SwitchName=s2 Nodes=n2\n", 1, 23, "U+2028 (LINE SEPARATOR) is no blank"),
    # Slurm keeps the last BlockSizes= and only logs it: the first vanished without a word
    ("BlockName=b1 Nodes=n[1-4]\nBlockSizes=4\nBlockSizes=4,8\n", 3, 1, "BlockSizes= given again (first at line 2)"),
    # _parse_switches refuses Nodes= beside Switches= even when one is empty; the empty one was dropped
    ('SwitchName=s1 Nodes="" Switches=s2\nSwitchName=s2 Nodes=n1\n', 1, 24, "switch s1 has both Nodes= and Switches="),
])
def test_constructs_slurm_reads_otherwise_are_refused(text, line, column, words):
    with pytest.raises(ParseError) as err:
        parse_topology_conf(text, "t.conf")
    assert (err.value.line, err.value.column) == (line, column), str(err.value)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_comments_hold_any_character():
    """Slurm never reads a comment: a no-break space there is harmless, and `\\#` still escapes."""
    c = parse_topology_conf("SwitchName=s1 Nodes=n1 # salle\u00a0B\u2028\nSwitchName=s\\#2 Nodes=n2\n", "t.conf")
    assert list(c.switches) == ["s1", "s#2"]
