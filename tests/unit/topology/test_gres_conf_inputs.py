"""gres.conf values the reader once took wrongly or crashed on, one test per class the seeded fuzz
(tests/hostile/test_gres_conf_fuzz.py) found: each is now read as slurmd reads it, or refused with a ParseError
whose one line starts with the file's name."""

from __future__ import annotations

import subprocess
import sys

import pytest

from slurmtools.errors import ParseError
from slurmtools.hostlist import MAX_NAMES, expand
from slurmtools.topology.checks import GRES_GPU_LIMIT, compare_gres, read_gres_conf
from slurmtools.topology.cpu_layout import CPU_ID_LIMIT
from slurmtools.topology.graph import Topology


def refusal(text: str) -> str:
    with pytest.raises(ParseError) as got:
        read_gres_conf(text, "g")
    msg = str(got.value)
    assert msg.startswith("g:") and "\n" not in msg and len(msg) < 300, msg
    return msg


def one_host(name: str = "n1", gpus: int = 2) -> Topology:
    t = Topology("t")
    cpu = t.add_cpu(name, 0, 0, cpus=range(8), cores=range(8))
    for i in range(gpus):
        t.add_gpu(name, i, parent=cpu)
    return t


@pytest.mark.parametrize("cores, why", [
    ("0-99999999999", f"ids stay below {CPU_ID_LIMIT}"),         # filled the memory
    ("0-99999999999999999999", f"ids stay below {CPU_ID_LIMIT}"),  # OverflowError
    (str(CPU_ID_LIMIT), f"ids stay below {CPU_ID_LIMIT}"),
    ("7-0", "7-0 runs backwards"),                                # was read as no core at all
])
def test_a_core_range_past_any_node_or_backwards_is_refused(cores, why):
    assert refusal(f"Name=gpu File=/dev/nvidia0 Cores={cores}") == (
        f"g:1: Cores: expected integers and ranges such as 0-7,16 ({why}), got {cores!r}")


@pytest.mark.parametrize("text", [
    "Name=gpu File=/dev/nvidia0 Cores=-1",    # was read as core -1
    "Name=gpu File=/dev/nvidia0 CPUs=٣",      # int() reads other scripts' digits: was core 3
    "Name=gpu File=/dev/nvidia0 Cores=1_0",   # was core 10
    "Name=gpu File=/dev/nvidia0 Cores=+7",
    "Name=gpu File=/dev/nvidia0 Links=-1,٣",
    "Name=gpu File=/dev/nvidia0 Links=-1,+7",
    "Name=gpu File=/dev/nvidia0 Count=٣",
])
def test_numbers_are_ascii_digits(text):
    assert "expected" in refusal(text)


def test_a_device_number_in_other_digits_names_no_gpu():
    """`/dev/nvidia٣` is no device slurmd opens: skipped and said so, not read as GPU 3."""
    c = read_gres_conf("Name=gpu File=/dev/nvidia٣\n", "g")
    assert c.gpus == [] and c.skipped == [(1, "File=/dev/nvidia٣ is not an NVIDIA device /dev/nvidiaN, so no GPU "
                                              "index")]


def test_links_are_counts_as_slurmd_reads_them():
    """slurmd reads Links= with strtol between commas: no range (`0-3` was read as 0,1,2,3), nothing below -2."""
    assert read_gres_conf("Name=gpu File=/dev/nvidia0 Links=-1,18,-2,0", "g").gpus[0].links == (-1, 18, -2, 0)
    for links in ("-1,0-3", "-1,-99999999999999999999", "-1,,18", "-1,"):
        assert refusal(f"Name=gpu File=/dev/nvidia0 Links={links}").startswith(
            "g:1: Links: expected integers, one link count per GPU such as -1,18,18 (-2 or more, no ranges), got ")


def test_digit_runs_past_what_int_converts_are_refused_or_named():
    """int() refuses 4,300 digits and more with a ValueError of its own: a device number that long was one, and
    so was a node name holding such a run when the summary compressed the names."""
    assert refusal("Name=gpu File=/dev/nvidia" + "9" * 5000).startswith(
        "g:1: File: the device number of '/dev/nvidia99999999999999999999999999999'... (5011 characters) has more "
        "than 100 digits")
    name = "n" + "9" * 5000
    c = compare_gres(one_host(), f"NodeName={name} Name=gpu File=/dev/nvidia0\n", "g")
    assert c.gpus == 0 and c.absent == [name] and f"node(s) {name} not in the topology" in c.summary("t")


def test_hostlists_that_run_away_are_refused_in_one_line():
    """The hostlist library caps one range and one comma-free part at MAX_NAMES names, not the list: fifty
    ranges of 100,000 filled the memory. And it recurses once per [...] group of a name (RecursionError)."""
    many = ",".join(f"n{i}[0-99999]" for i in range(50))
    assert refusal(f"NodeName={many} Name=gpu File=/dev/nvidia0") == (
        f"g:1: NodeName: bad hostlist {many[:60]!r}... ({len(many)} characters): more than {MAX_NAMES} names")
    assert "more than" in refusal(f"Name=gpu File=/dev/nvidia[0-99999],/dev/nvidia[100000-199999]")
    assert refusal("NodeName=n" + "[1]" * 3000 + " Name=gpu File=/dev/nvidia0").endswith(
        "too many [...] groups in one name")
    # a list of parts as the library reads it: duplicates dropped, order kept
    assert expand("n[1-3],m[01-02],n2") == ["n1", "n2", "n3", "m01", "m02"]


def test_nodes_times_devices_past_the_limit_is_refused_before_it_is_built():
    """Each hostlist under the cap, their product on one line 1.1 million pairs (two such lines: billions)."""
    text = "NodeName=n[00000-99999] Name=gpu File=/dev/nvidia[0-10]\n"
    assert refusal(text) == (f"g:1: more than {GRES_GPU_LIMIT} (node, GPU) pairs in the file: this line adds 100000 "
                             f"node(s) x 11 device(s)")


def test_only_newline_ends_a_line():
    """slurmd splits at \\n and drops a \\r before it; \\v, \\f, \\x85, U+2028 and a lone \\r end no line, so the line
    numbers are the editor's (str.splitlines counted them as line ends: an error on line 2 said line 3)."""
    for brk in ("\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\r"):
        text = f"Name=gpu File=/dev/nvidia0 Type=a{brk}\r\nName=gpu File=/dev/nvidia1 Cores=x\r\n"
        assert refusal(text).startswith("g:2: Cores: "), repr(brk)
    c = read_gres_conf("Name=gpu File=/dev/nvidia0\r\nName=gpu File=/dev/nvidia1\r\n", "g")
    assert [(g.index, g.line) for g in c.gpus] == [(0, 1), (1, 2)]


def test_what_slurmd_would_stop_at_is_refused():
    """A byte-order mark is part of the first key to slurmd, and it reads a line only up to a NUL: refused by
    name, not read as something else (the NUL made `File=/dev/nvidia0` an unknown device)."""
    assert refusal("\ufeffName=gpu File=/dev/nvidia0\n") == (
        "g:1: starts with a byte-order mark (U+FEFF), which slurmd reads as part of the first key: save the file "
        "without it")
    assert refusal("AutoDetect=off\nName=gpu File=/dev/nvidia0\x00\n") == (
        "g:2: a NUL character: slurmd reads the line only up to it")


def test_long_values_are_quoted_short():
    key = "x" * 5000
    assert refusal(f"Name=gpu {key}=1") .startswith(f"g:1: unknown key {key[:40]!r}... (5000 characters): ")
    assert refusal("Name=gpu File=/dev/nvidia0 Count=" + "1," * 100000).startswith(
        "g:1: Count: expected a number (suffix K, M, G, T or P), got '1,1,1,")
    assert len(refusal("NodeName=n[" + "1" * 5000 + "-0] Name=gpu File=/dev/nvidia0")) < 200


def test_the_summary_is_one_line_whatever_the_file_holds():
    """Names and values from the file reach the summary `topo lint --gres` prints: control characters (a terminal
    escape, \\x85) are escaped as in error messages."""
    text = 'Name=gpu File=/dev/nvidia0\nName=gpu File="/dev/x\x1bc\x85y"\nNodeName=a\x85b Name=gpu File=/dev/nvidia1\n'
    s = compare_gres(one_host(), text, "g").summary("t")
    assert "\x1b" not in s and "\x85" not in s and len(s.splitlines()) == 1
    assert "line 2 skipped: File=/dev/x\\x1bc\\x85y is not an NVIDIA device" in s and "a\\x85b" in s


def test_the_cli_reads_the_file_as_slurmd_does(tmp_path):
    """`topo lint --gres`: bytes as UTF-8 whatever the locale, no newline translation (a lone CR made line 2 line
    3), and a file it cannot read named first in the one line."""
    topo = tmp_path / "t.json"
    topo.write_text(one_host().to_json())
    g = tmp_path / "gres.conf"
    g.write_bytes(b"Name=gpu\rFile=/dev/nvidia0\nName=gpu File=/dev/nvidia1 Cores=x\n")
    run = [sys.executable, "-m", "slurmtools", "topo", "lint", str(topo), "--gres", str(g)]
    r = subprocess.run(run, capture_output=True, text=True)
    assert (r.returncode, r.stderr) == (2, f"slurmtools: error: {g}:2: Cores: expected integers and ranges such as "
                                           f"0-7,16, got 'x'\n")
    g.write_bytes(b"# caf\xe9\nName=gpu File=/dev/nvidia0\n")
    r = subprocess.run(run, capture_output=True, text=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and r.stderr.startswith(f"slurmtools: error: {g}: cannot read: 'utf-8' codec can't "
                                                     f"decode byte 0xe9") and len(r.stderr.splitlines()) == 1


# ------------------------------------- constructs slurmd reads otherwise than the reader did (src/interfaces/gres.c)

def test_blanks_in_a_quoted_hostlist_separate_names():
    """hostlist_create splits at blanks as at commas: `File="/dev/nvidia0 /dev/nvidia1"` is two GPUs; it was one
    device named '/dev/nvidia0 /dev/nvidia1', read as GPU 1, and `NodeName="n1 n2"` one node 'n1 n2'."""
    c = read_gres_conf('NodeName="n1 n2" Name=gpu File="/dev/nvidia0 /dev/nvidia1"\n', "g")
    assert sorted((g.node, g.index) for g in c.gpus) == [("n1", 0), ("n1", 1), ("n2", 0), ("n2", 1)]


@pytest.mark.parametrize("text, words", [
    # `s_p_get_string(Link) || s_p_get_string(Links)`: slurmd takes Link=; the reader took Links= (the other row)
    ("Name=gpu File=/dev/nvidia0 Link=-1,4 Links=-1,18", "g:1: Link= and Links= on one line: slurmd reads Link= and "
                                                         "drops Links= without a word; keep one"),
    ("Name=gpu File=/dev/nvidia0 Cores=0-3 CPUs=4-7", "g:1: Cores= and CPUs= on one line: slurmd reads Cores= and "
                                                      "drops CPUs= without a word"),
    ("Name=gpu File=/dev/nvidia0 Files=/dev/nvidia1", "g:1: File= and Files= on one line: slurmd reads File= and "
                                                      "drops Files= without a word"),
])
def test_both_keys_of_a_pair_slurmd_reads_one_of_are_refused(text, words):
    assert refusal(text).startswith(words)


@pytest.mark.parametrize("text, words", [
    # an in-line AutoDetect= needs NodeName=, slurmd ignores it otherwise: it was taken as the file-wide one
    ("Name=gpu File=/dev/nvidia0 AutoDetect=nvml\n", "g:1: AutoDetect= on a line without NodeName=: slurmd ignores "
                                                     "it there ('In-line AutoDetect requires NodeName')"),
    # a value slurmd does not know detects nothing; it was kept as if it did
    ("AutoDetect=nmvl\n", "g:1: AutoDetect='nmvl': slurmd knows nvml, rsmi, oneapi, nrt, nvidia and off, and ignores "
                          "anything else ('unknown autodetect flag')"),
    # two that disagree: the file-wide first is lost, a node-local pair stops slurmd; the last was kept
    ("AutoDetect=nvml\nAutoDetect=off\n", "g:2: AutoDetect=off after AutoDetect=nvml at line 1: slurmd keeps only the "
                                          "last file-wide one; write one"),
    ("NodeName=n[1-2] AutoDetect=nvml\nNodeName=n2 AutoDetect=off\n",
     "g:2: AutoDetect=off for node 'n2' after AutoDetect=nvml at line 1: slurmd stops ('duplicate node-local"),
    # without Name= slurmd keeps only the AutoDetect= of a NodeName= line: the rest was skipped without a word
    ("NodeName=n1 AutoDetect=nvml File=/dev/nvidia0 Cores=0-3", "g:1: File= Cores= without Name=: slurmd takes only "
                                                                "AutoDetect= from this line and drops the rest"),
    # slurmd stops when a gpu's Count= is not the number of its devices, on File= beside MultipleFiles= and on a
    # MultipleFiles= of one file; each was read
    ("Name=gpu File=/dev/nvidia[0-3] Count=2", "g:1: Count='2', but File= names 4 device(s): slurmd stops ('count "
                                               "does not match File value')"),
    ("Name=gpu File=/dev/nvidia0 MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap1",
     "g:1: File= and MultipleFiles= on one line: slurmd stops ('File and MultipleFiles options are mutually"),
    ("Name=gpu MultipleFiles=/dev/nvidia0", "g:1: MultipleFiles= names one file: slurmd stops"),
])
def test_what_slurmd_ignores_or_stops_at_is_refused(text, words):
    assert refusal(text).startswith(words)


def test_autodetect_values_as_slurmd_takes_them():
    """Any case, the same value again is no conflict, and a node-local value wins over the file-wide one."""
    c = read_gres_conf("AutoDetect=NVML\nAutoDetect=nvml\nNodeName=n2 AutoDetect=off\nNodeName=n2 AutoDetect=Off\n",
                       "g")
    assert c.autodetect == {None: "nvml", "n2": "off"}


@pytest.mark.parametrize("links, why", [("0,18", "no -1 for the GPU itself"),
                                        ("-1,-1", "-1 (the GPU itself) more than once"),
                                        ("-1,1024", "1024 links, more than 1023")])
def test_links_slurmd_ignores_are_refused(links, why):
    """gres_links_validate: slurmd logs 'Ignoring invalid Links' and drops them; they were compared as given."""
    assert refusal(f"Name=gpu File=/dev/nvidia0 Links={links}") == (
        f"g:1: Links={links!r}: {why}; slurmd ignores such a Links= (it logs 'Ignoring invalid Links')")


def test_count_takes_slurmds_suffixes():
    """suffix_mult: k and KiB 1024, kb 1000, and so on (`1KiB` and `2kb` were refused); a gpu Count= equal to its
    devices is read."""
    c = read_gres_conf("Name=mps Count=1KiB File=/dev/nvidia0\nName=shard Count=2kb File=/dev/nvidia0\n"
                       "Name=gpu Count=4 File=/dev/nvidia[0-3]\n", "g")
    assert (c.other, len(c.gpus)) == (2, 4)


# ----------------------------------- a device listed twice for one node (gres.c _validate_file, _foreach_fill_in_...)

@pytest.mark.parametrize("value, files, repeated", [
    ("/dev/nvidia[0,0]", "/dev/nvidia[0,0]", "/dev/nvidia0"),
    ("/dev/nvidia0,/dev/nvidia0", "/dev/nvidia0,/dev/nvidia0", "/dev/nvidia0"),
    ('"/dev/nvidia0 /dev/nvidia0"', "/dev/nvidia0 /dev/nvidia0", "/dev/nvidia0"),
    ("/dev/nvidia[0-1,1]", "/dev/nvidia[0-1,1]", "/dev/nvidia1"),
    ("/dev/nvidia[0-1],/dev/nvidia1", "/dev/nvidia[0-1],/dev/nvidia1", "/dev/nvidia1"),
])
def test_a_file_list_naming_a_device_twice_is_refused(value, files, repeated):
    """slurmd's hostlist keeps a name given twice (hostlist_push_range joins only adjacent ranges): `_validate_file`
    counts it twice, then `_foreach_fill_in_gres_devices` logs 'gpu duplicate device file name' and the GPU plugin
    stops slurmd. The reader's hostlist dropped the repeat: one GPU, no word."""
    assert refusal(f"Name=gpu File={value}\n") == (
        f"g:1: File={files!r} names {repeated!r} twice: slurmd counts two gpu devices, then stops ('duplicate device "
        "file name'); list each device once")


def test_count_counts_a_repeated_device_as_slurmd_does():
    """`_validate_file` counts `/dev/nvidia[0,0]` as 2: Count=1 stops slurmd ('count does not match'), where the
    reader read one GPU; Count=2 passes that check (it was refused as '1 device(s)') and stops at the repeat."""
    assert refusal("Name=gpu Count=1 File=/dev/nvidia[0,0]\n").startswith(
        "g:1: Count='1', but File= names 2 device(s): slurmd stops ('count does not match File value')")
    assert refusal("Name=gpu Count=2 File=/dev/nvidia[0,0]\n").startswith(
        "g:1: File='/dev/nvidia[0,0]' names '/dev/nvidia0' twice")
    assert refusal("Name=nic Count=2 File=/dev/mlx5_[0,0]\n").startswith(
        "g:1: File='/dev/mlx5_[0,0]' names '/dev/mlx5_0' twice: slurmd counts two nic devices")


@pytest.mark.parametrize("text, words", [
    # the same node and name on two lines: slurmd collects every line's devices for the node, then stops
    ("NodeName=n1 Name=gpu File=/dev/nvidia0\nNodeName=n1 Name=gpu File=/dev/nvidia0\n",
     "g:2: File: '/dev/nvidia0' for node 'n1' again (line 1 lists it): slurmd stops ('duplicate device file name')"),
    # hostlists that overlap in one node; another Type= does not make it another device
    ("NodeName=n[1-3] Name=gpu Type=a File=/dev/nvidia[0-1]\nNodeName=n[3-4] Name=gpu Type=b File=/dev/nvidia1\n",
     "g:2: File: '/dev/nvidia1' for node 'n3' again (line 1 lists it)"),
    # a line without NodeName= is every node's, either way round
    ("Name=gpu File=/dev/nvidia0\nNodeName=n2 Name=gpu File=/dev/nvidia0\n",
     "g:2: File: '/dev/nvidia0' for node 'n2' again (line 1 lists it)"),
    ("NodeName=n2 Name=gpu File=/dev/nvidia[0-1]\nName=gpu File=/dev/nvidia1\n",
     "g:2: File: '/dev/nvidia1' for node 'n2' again (line 1 lists it)"),
    ("Name=gpu File=/dev/nvidia0\n# again\nName=gpu Files=/dev/nvidia0\n",
     "g:3: Files: '/dev/nvidia0' for every node again (line 1 lists it)"),
    # a GPU file the comparison has no index for, and another GRES: slurmd stops all the same
    ("Name=gpu File=/dev/dri/renderD128\nName=gpu File=/dev/dri/renderD128\n",
     "g:2: File: '/dev/dri/renderD128' for every node again (line 1 lists it)"),
    ("NodeName=n1 Name=nic File=/dev/mlx5_0\nNodeName=n1 Name=nic File=/dev/mlx5_0\n",
     "g:2: File: '/dev/mlx5_0' for node 'n1' again (line 1 lists it)"),
])
def test_a_device_listed_again_for_the_same_node_and_name_is_refused(text, words):
    """The reader kept both lines and `topo lint --gres` compared one GPU (the later line's Cores=/Links=)."""
    assert refusal(text).startswith(words)


@pytest.mark.parametrize("text, words", [
    ("Name=gpu File=/dev/nvidia0,/dev/nvidia00\n", "g:1: File: '/dev/nvidia00' is GPU 0 for every node, which this "
                                                   "line names '/dev/nvidia0': slurmd counts two GPUs, one per file"),
    ("NodeName=n1 Name=gpu File=/dev/nvidia0\nNodeName=n1 Name=gpu File=/lab/dev/nvidia0\n",
     "g:2: File: '/lab/dev/nvidia0' is GPU 0 for node 'n1', which line 1 names '/dev/nvidia0'"),
])
def test_one_gpu_index_under_two_files_is_refused(text, words):
    """slurmd compares file names only: two files are two GPUs to it, and were one GPU (the last line's) here."""
    assert refusal(text).startswith(words)


def test_one_device_on_other_nodes_or_under_other_names_is_read():
    """The same file on other nodes, under gpu and the mps/shard that share it, or in a MultipleFiles= (slurmd's
    check leaves those out) is no repeat."""
    c = read_gres_conf("NodeName=n1 Name=gpu File=/dev/nvidia[0-1]\nNodeName=n2 Name=gpu File=/dev/nvidia[0-1]\n"
                       "NodeName=n[1-2] Name=mps Count=200 File=/dev/nvidia[0-1]\n"
                       "NodeName=n[1-2] Name=shard Count=8 File=/dev/nvidia0\n"
                       "NodeName=n[1-2] Name=shard Count=8 File=/dev/nvidia0\n"
                       "NodeName=n3 Name=gpu MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21\n"
                       "NodeName=n3 Name=gpu MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap22\n", "g")
    assert sorted((g.node, g.index) for g in c.gpus) == [("n1", 0), ("n1", 1), ("n2", 0), ("n2", 1)]
    assert (c.other, len(c.skipped)) == (3, 2)


def test_a_repeat_is_refused_by_the_lint_not_compared_once():
    """`topo lint --gres` against a node with GPUs 0 and 1: a file listing GPU 0 twice matched, no finding."""
    with pytest.raises(ParseError, match=r"^g:1: File='/dev/nvidia\[0,0-1\]' names '/dev/nvidia0' twice"):
        compare_gres(one_host(), "NodeName=n1 Name=gpu File=/dev/nvidia[0,0-1]\n", "g")


def test_nodes_times_other_devices_past_the_limit_is_refused():
    """Other GRES' devices are held per node too, so their pairs count against the same limit."""
    assert refusal("NodeName=n[00000-99999] Name=nic File=/dev/mlx5_[0-10]\n") == (
        f"g:1: more than {GRES_GPU_LIMIT} (node, device) pairs in the file: this line adds 100000 node(s) x 11 "
        f"device(s)")
