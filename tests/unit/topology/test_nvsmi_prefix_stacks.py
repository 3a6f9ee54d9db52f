"""`nvidia-smi topo -m` (and `nvlink -s`) gathered through two tools at once, so that every line carries a stack of
prefixes: pdsh running `srun -l` (`node01: 0: `), srun running pdsh (`0: node01: `), either in a CI log
(`2024-05-01T10:00:00Z node01: 0: `). Each prefix alone was read; the stack was not ("no header found"). The
stack is stripped when every line of the table carries it; a line of the table without it, and several tasks' or
hosts' tables in one capture, are still refused at their line."""

from __future__ import annotations

import re

import pytest

from slurmtools.cli.topo_providers import detect_kind
from slurmtools.errors import ParseError
from slurmtools.topology.nvsmi import parse_nvlink_status, parse_topo_matrix

from .test_nvlink_status_variants import ALL_INACTIVE, V100, gpu
from .test_nvsmi_prefixes import PLAIN, prefixed, same

STACKS = ["node01: 0: ", "node01:  0: ", "gpu-a01.cluster: 12: ", "node01:0: ", "0: node01: ",
          "2024-05-01T10:00:00.123Z node01: 0: ", "[10:00:01] 0: node01: ", "node01: 2024-05-01T10:00:00Z 0: ",
          "trainer-1 | node01: 0: ", "node01: node01: "]


@pytest.mark.parametrize("stack", STACKS)
def test_a_capture_behind_a_stack_of_prefixes_reads_as_the_plain_table(stack):
    m = parse_topo_matrix(prefixed(stack), "cap.txt")
    assert same(m, parse_topo_matrix(PLAIN, "plain.txt"))
    assert [d.name for d in m.nics] == ["mlx5_0", "mlx5_1"]
    assert detect_kind(prefixed(stack)) == "nvidia-smi"


def test_srun_labels_blank_lines_under_pdsh():
    """srun labels blank lines too (`0: `, or `0:` once trimmed), and pdsh puts its host before the label."""
    body = "".join(("node01: 0:\n" if not line.strip() else "node01: 0: " + line) for line in PLAIN.splitlines(True))
    text = "$ pdsh -w node01 srun -l nvidia-smi topo -m\n" + body
    assert same(parse_topo_matrix(text), parse_topo_matrix(PLAIN))


@pytest.mark.parametrize("stack", ["node01: 0: ", "0: node01: "])
def test_errors_name_the_column_of_the_capture(stack):
    bad = PLAIN.replace("GPU2\tNV12\tNV12\t X \tNV12\tSYS", "GPU2\tNV12\tNV12\t X \tNVXX\tSYS")
    with pytest.raises(ParseError) as plain:
        parse_topo_matrix(bad, "f")
    with pytest.raises(ParseError) as cap:
        parse_topo_matrix(prefixed(stack, bad), "f")
    assert (cap.value.line, cap.value.column) == (plain.value.line, plain.value.column + len(stack))


def interleaved(a: str, b: str) -> str:
    la, lb = prefixed(a).splitlines(True), prefixed(b).splitlines(True)
    return "".join(x + y for x, y in zip(la, lb))


@pytest.mark.parametrize("text, line, what", [
    (interleaved("node01: 0: ", "node02: 0: "), 2, "hosts 'node01:' and 'node02:'"),
    (interleaved("node01: 0: ", "node01: 1: "), 2, "srun tasks '0:' and '1:'"),
    (interleaved("0: node01: ", "0: node02: "), 2, "hosts 'node01:' and 'node02:'"),
    (interleaved("0: node01: ", "1: node01: "), 2, "srun tasks '0:' and '1:'"),
    (prefixed("node01: 0: ") + prefixed("node02: 0: "), 20, "hosts 'node01:' and 'node02:'"),
    (interleaved("2024-05-01T10:00:00Z node01: 0: ", "2024-05-01T10:00:01Z node02: 0: "), 2,
     "hosts 'node01:' and 'node02:'"),
])
def test_several_nodes_behind_stacks_are_refused(text, line, what):
    """The message names the prefix that differs (it named the first of the stack: "srun tasks '0:' and '0:'")."""
    with pytest.raises(ParseError) as e:
        parse_topo_matrix(text, "both.txt")
    msg = str(e.value)
    assert e.value.line == line and len(msg.splitlines()) == 1, msg
    assert msg.startswith(f"both.txt:{line}:") and "several nodes' outputs" in msg and what in msg, msg


@pytest.mark.parametrize("a, b", [("node01: 0: ", "node02: 0: "), ("node01: 0: ", "node01: 1: "),
                                  ("0: node01: ", "0: node02: "),
                                  ("2024-05-01T10:00:00Z node01: 0: ", "2024-05-01T10:00:00Z node02: 0: ")])
def test_the_suggested_grep_keeps_one_readable_node(a, b):
    text = interleaved(a, b)
    with pytest.raises(ParseError) as e:
        parse_topo_matrix(text, "both.txt")
    pattern = re.search(r"grep '([^']*)'", str(e.value)).group(1)
    kept = "".join(line for line in text.splitlines(True) if re.search(pattern, line))
    assert same(parse_topo_matrix(kept), parse_topo_matrix(PLAIN))


@pytest.mark.parametrize("row", ["node01: GPU1", "0: GPU1", "GPU1", "0: node01: GPU1"])
def test_a_table_line_without_the_whole_stack_is_refused_at_its_line(row):
    """The header carries `node01: 0: `; GPU1's row carries part of it, none, or the parts in another order."""
    lines = prefixed("node01: 0: ").splitlines(True)
    lines[2] = lines[2].replace("node01: 0: GPU1", row, 1)
    with pytest.raises(ParseError) as e:
        parse_topo_matrix("".join(lines), "cap.txt")
    assert (e.value.line, e.value.column) == (3, 1), str(e.value)
    assert "without the prefixes 'node01: 0:' that the header on line 1 carries" in str(e.value)


@pytest.mark.parametrize("stack", ["node1: 0: ", "0: node1: ", "2024-05-01T10:00:00.123Z node1: 0: "])
def test_nvlink_status_behind_a_stack(stack):
    plain = V100 + gpu(2) + ALL_INACTIVE
    text = "".join(stack + ln for ln in plain.splitlines(keepends=True))
    assert parse_nvlink_status(text, "cap.txt") == parse_nvlink_status(plain, "plain.txt")


def test_nvlink_status_of_two_hosts_behind_stacks_is_refused():
    text = "".join("node1: 0: " + ln for ln in V100.splitlines(True)) + "".join("node2: 0: " + ln
                                                                               for ln in V100.splitlines(True))
    with pytest.raises(ParseError) as err:
        parse_nvlink_status(text, "pdsh.txt")
    assert err.value.line == 15 and "hosts 'node1:' and 'node2:'" in str(err.value)


def test_a_row_without_the_single_prefix_of_the_header_is_refused():
    """One prefix, as before the stacks: a row without it was read as if it belonged to the table."""
    lines = prefixed("0: ").splitlines(True)
    lines[3] = lines[3][len("0: "):]
    with pytest.raises(ParseError) as e:
        parse_topo_matrix("".join(lines), "cap.txt")
    assert (e.value.line, e.value.column) == (4, 1) and "without the prefixes '0:'" in str(e.value)
