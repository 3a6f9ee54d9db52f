"""NCCL topology XML: cloud VM files and a real dump into GPUs, NICs and the PCIe tree."""

from __future__ import annotations

import pytest

from slurmtools.errors import ParseError
from slurmtools.topology import queries as q
from slurmtools.topology.nccl_xml import parse_nccl_xml, to_topology

from ._data import read_data, shared_files


def test_p4d_implied_devices():
    x = parse_nccl_xml(read_data("aws-ofi-nccl_p4d-24xl-topo.xml"))
    assert len(x.gpus) == 8 and len(x.nics) == 4 and [c.numa for c in x.cpus] == [0, 1]
    assert len(x.cpus[0].cpus) == 48 and x.cpus[0].cpus[:3] == (0, 1, 2) and 24 not in x.cpus[0].cpus
    assert x.nearest_nics(0) == x.nearest_nics(1) == ("0000:10:1b.0",)
    assert x.nearest_nics(7) == ("0000:a0:1b.0",) and x.gpus[4].numa == 1
    t = to_topology(x, "p4d")
    assert q.nearest_nics(t, "p4d")[2] == ["0000:20:1b.0"]
    assert q.gpu_numa(t, "p4d")[5] == [1]


def test_p5_four_efa_per_gpu():
    x = parse_nccl_xml(read_data("aws-ofi-nccl_p5.48xl-topo.xml"))
    assert len(x.gpus) == 8 and len(x.nics) == 32
    assert x.nearest_nics(0) == ("rdmap79s0", "rdmap80s0", "rdmap81s0", "rdmap82s0")
    assert all(len(x.nearest_nics(g)) == 4 for g in range(8))
    assert all(g.nvlinks == () for g in x.gpus)   # the file declares no NVLinks


def test_ndv5_pairs_and_g5_without_devices():
    x = parse_nccl_xml(read_data("azhpc-images_ndv5-topo.xml"))
    assert [x.nearest_nics(g) for g in range(3)] == [("0101:00:00.0",), ("0102:00:00.0",), ("0103:00:00.0",)]
    g5 = parse_nccl_xml(read_data("aws-ofi-nccl_g5.48xl-topo.xml"))
    assert len(g5.cpus) == 2 and g5.devices == ()


def test_real_dump_with_nvswitches():
    x = parse_nccl_xml(read_data("simai_topo_8A100_4CX6.xml"))
    assert len(x.gpus) == 8 and [n.name for n in x.nics] == [f"mlx5_bond_{i}" for i in range(5)]
    assert x.nics[0].speed_gbytes == 25.0
    assert sum(c for _, c, _ in x.gpus[0].nvlinks) == 12 and len(x.gpus[0].nvlinks) == 6
    assert x.nearest_nics(1) == ("mlx5_bond_1",)
    t = to_topology(x, "ali")
    assert len(list(t.of_kind("nvswitch"))) == 6 and q.nvlink_islands(t, "ali") == [list(range(8))]
    assert q.nvlink_count(t, "gpu:ali:0", "gpu:ali:5") == 12


def test_nic_under_cpu_and_self_targets():
    x = parse_nccl_xml(read_data("azhpc-images_ncv4-topo.xml"))
    # eth0 stands under numaid 0 for NCCL's search, not because the file knows where it sits
    assert len(x.gpus) == 4 and [n.name for n in x.nics] == ["eth0"] and x.nics[0].numa is None
    assert x.gpus[0].nvlinks == (("0001:00:00.0", 12, "0x030200"),)
    t = to_topology(x, "nc")
    assert not list(t.of_kind("nvswitch")) and q.nvlink_islands(t, "nc") == [[0], [1], [2], [3]]


@pytest.mark.parametrize("text, line, column, words", [
    (read_data("azhpc-images_ncv4-graph.xml"), 1, 1, "NCCL graph file"),
    ("<system><cpu numaid='0'><pci busid='0:1:0.0'></cpu></system>", 1, 48, "not well-formed"),
    ("<system>\n <cpu numaid='x'/>\n</system>", 2, 2, "numaid= expects a number"),
    ("<system>\n <cpu numaid='0'>\n  <gpu dev='0'/>\n </cpu>\n</system>", 3, 3, "outside a <pci>"),
    ("<system><cpu numaid='0' affinity='zz'/></system>", 1, 9, "cpu affinity"),
    ("<topology/>", 1, 1, "expected <system>"),
])
def test_errors(text, line, column, words):
    with pytest.raises(ParseError) as err:
        parse_nccl_xml(text, "x.xml")
    assert (err.value.line, err.value.column) == (line, column), str(err.value)
    assert words in str(err.value)


GPU_PAIR = ("<system>\n <cpu numaid='0' affinity='0000ffff'>\n  <pci busid='0000:07:00.0' class='0x030200'>\n"
            "   <gpu dev='0' sm='80'><nvlink target='0000:08:00.0' count='2' tclass='0x030200'/></gpu>\n  </pci>\n"
            "  <pci busid='0000:08:00.0' class='0x030200'>\n"
            "   <gpu dev='1' sm='80'><nvlink target='0000:07:00.0' count='2' tclass='0x030200'/></gpu>\n  </pci>\n"
            " </cpu>\n</system>\n")


@pytest.mark.parametrize("old, new, line, words", [
    ("dev='1'", "dev='²'", 7, "dev= expects a number"),          # isdigit() passed it to int(): a traceback
    ("dev='1'", "dev='١'", 7, "dev= expects a number"),          # int() read it as GPU 1
    ("count='2'", "count='-2'", 4, "count= expects a number"),   # a negative NVLink count was kept
    ("numaid='0'", "numaid='+0'", 2, "numaid= expects a number"),
    ("'0000ffff'", "'0x00ffff'", 2, "cpu affinity: expected 32-bit hex words"),   # int(w, 16) takes the 0x
    ("'0000ffff'", "' 0000ffff'", 2, "cpu affinity: expected 32-bit hex words"),
])
def test_numbers_are_ascii_digits(old, new, line, words):
    assert len(parse_nccl_xml(GPU_PAIR, "x.xml").gpus) == 2
    with pytest.raises(ParseError) as err:
        parse_nccl_xml(GPU_PAIR.replace(old, new, 1), "x.xml")
    assert err.value.line == line and words in str(err.value), str(err.value)


@pytest.mark.parametrize("mask, words", [
    ("1ffffffff", "expected 32-bit hex words"),                          # the bit past the 32nd was dropped
    (",".join(["ffffffff"] * 2049), "2049 words of 32 CPUs, more than"),   # 65568 CPU ids
])
def test_cpu_masks_are_32_bit_words_of_a_real_node(mask, words):
    with pytest.raises(ParseError, match=words):
        parse_nccl_xml(GPU_PAIR.replace("'0000ffff'", f"'{mask}'"), "x.xml")


def test_unknown_numa_node_is_minus_one():
    assert parse_nccl_xml(GPU_PAIR.replace("numaid='0'", "numaid='-1'"), "x.xml").cpus[0].numa == -1


@pytest.mark.parametrize("path", shared_files("nccl_xml", "*.xml"), ids=lambda p: p.name)
def test_shared_sweep(path):
    try:
        x = parse_nccl_xml(path.read_text(), path.name)
    except ParseError as exc:
        assert "graph" in path.name and exc.line == 1
        return
    assert x.cpus
    to_topology(x, "h")


def test_nesting_deeper_than_a_pcie_tree_is_refused():
    """The readers walk the elements by recursion (RecursionError on 2000 nested <pci>), so depth is bounded first."""
    deep = "<system><cpu numaid='0'>" + "<pci busid='0000:00:00.0' class='0x060400'>" * 2000 + "</pci>" * 2000
    with pytest.raises(ParseError, match="elements nested more than 64 deep") as err:
        parse_nccl_xml(deep + "</cpu></system>", "x.xml")
    assert (err.value.line, err.value.column) == (1, 2691)


@pytest.mark.parametrize("edits, line, words", [
    # a class NCCL cannot read made the GPU an "other device": left out, with all below it
    ([("class='0x030200'", "class='x030200'")], 3, "<pci> class= expects a PCI class like 0x030200, found 'x030200'"),
    # bus ids no device has: the GPU's peer was taken for an NVSwitch
    ([("busid='0000:08:00.0'", "busid='0000:08:00.٠'")], 6, "<pci> busid= expects a PCI bus id"),
    ([("target='0000:08:00.0' ", "")], 4, "<nvlink> needs target="),
    ([("target='0000:08:00.0'", "target='0000:08:00'")], 4, "<nvlink> target= expects a PCI bus id"),
    # device elements where NCCL does not read them were skipped with all they hold
    ([("  <pci busid='0000:08", "  <cpu numaid='1'><pci busid='0000:08"), (" </cpu>", " </cpu></cpu>")], 6,
     "<cpu> inside <cpu>"),
    ([("</gpu>\n  </pci>\n  <pci busid='0000:08", "</gpu>\n  <pci busid='0000:08"), ("</pci>\n </cpu>",
                                                                                     "</pci></pci>\n </cpu>")], 5,
     "<pci> inside <pci>"),
    ([("<gpu dev='1' sm='80'>", "<gpu dev='1' sm='80'><net name='mlx5_0'/>")], 7, "<net> inside <gpu>"),
])
def test_devices_are_read_or_refused_never_left_out(edits, line, words):
    text = GPU_PAIR
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    with pytest.raises(ParseError) as err:
        parse_nccl_xml(text, "x.xml")
    assert err.value.line == line and words in str(err.value), str(err.value)


@pytest.mark.parametrize("edits, line", [
    ([("busid='0000:08:00.0'", "busid='0000:07:00.0'")], 6),   # two GPUs, one id: their NVLinks merged
    # a bridge doubled around itself: its own parent, a KeyError building the graph
    ([("  <pci busid='0000:07:00.0'", "  <pci busid='0000:01:00.0' class='0x060400'><pci busid='0000:01:00.0' "
                                      "class='0x060400'><pci busid='0000:07:00.0'"),
      (" </cpu>", "</pci></pci>\n </cpu>")], 3),
])
def test_a_pci_bus_id_names_one_device(edits, line):
    text = GPU_PAIR
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    with pytest.raises(ParseError, match="busid=0000:0[17]:00.0 is given twice") as err:
        to_topology(parse_nccl_xml(text, "x.xml"), "n")
    assert err.value.line == line


def test_an_nvlink_element_with_no_links_is_refused():
    """NCCL writes an <nvlink> only for a peer it has links to: count='0' was read as a 0-link NVLink edge."""
    with pytest.raises(ParseError) as err:
        parse_nccl_xml(GPU_PAIR.replace("count='2'", "count='0'", 1), "x.xml")
    assert err.value.line == 4 and "<nvlink> count= must be 1 or more" in str(err.value) and "'0'" in str(err.value)


def test_a_net_speed_of_0_leaves_the_rate_unknown():
    """speed='0' is a port whose speed the dumping host could not read; it was a 0 GB/s NIC."""
    text = read_data("simai_topo_8A100_4CX6.xml")
    assert 'speed="200000"' in text
    x = parse_nccl_xml(text.replace('speed="200000"', 'speed="0"', 1))
    assert x.nics[0].speed_gbytes is None and x.nics[1].speed_gbytes == 25.0
    t = to_topology(x, "ali")
    rates = {n.name: n.rate_gbytes for n in t.nics("ali")}
    assert rates[x.nics[0].name] is None and rates[x.nics[1].name] == 25.0


# ---------------------------------------------------------------- NVLink targets, read by their class as NCCL does

def test_nvlinks_to_gpus_outside_the_dump_make_no_nvswitch():
    """NCCL dumps the GPUs of its ranks only, with every NVLink of each: a 2-GPU job on a DGX-1 names four other
    cube-mesh peers by bus id. Each became an NVSwitch, and GPU 0 and 1 "shared" two of them: Links=4 for a pair
    with one NVLink, and an NVLink domain that is not there."""
    x = parse_nccl_xml(read_data("handwritten_dgx1-v100_2-of-8-gpus_nccl-topo.xml"), "dgx1.xml")
    t = to_topology(x, "dgx1")
    assert not list(t.of_kind("nvswitch")) and not list(t.of_kind("nvlink_domain"))
    assert q.nvlink_matrix(t, "dgx1") == [[-1, 1], [1, -1]] and q.nvlink_islands(t, "dgx1") == [[0, 1]]
    assert "devices" in t.unknown("dgx1")   # the node has GPUs the file does not list
    assert q.nearest_nics(t, "dgx1")[0] == ["mlx5_0"]


def test_nvlinks_to_the_cpu_make_no_nvswitch():
    """tclass 0x068001 is NCCL's class for the GPU's own CPU (POWER9's NVLinks to the CPU): each such target was
    read as an NVSwitch, and the four GPUs of two sockets as one NVLink domain."""
    x = parse_nccl_xml(read_data("handwritten_power9-ac922-v100x4_gpu-cpu-nvlink_nccl-topo.xml"), "ac922.xml")
    t = to_topology(x, "ac922")
    assert not list(t.of_kind("nvswitch")) and not list(t.of_kind("nvlink_domain"))
    assert q.nvlink_islands(t, "ac922") == [[0, 1], [2, 3]] and q.nvlink_count(t, "gpu:ac922:2", "gpu:ac922:3") == 3
    assert q.gpu_numa(t, "ac922") == {0: [0], 1: [0], 2: [8], 3: [8]} and "devices" not in t.unknown("ac922")


def test_nvswitches_hidden_from_a_vm_are_one_nvswitch():
    """`fffffff:ffff:ff` is the target NCCL writes for NVLinks whose far end a VM cannot see (it reads them as
    NVSwitch links); the dump was refused as naming no PCI bus id."""
    x = parse_nccl_xml(read_data("handwritten_h100-vm_hidden-nvswitch_nccl-topo.xml"), "vm.xml")
    assert x.gpus[0].nvlinks == (("fffffff:ffff:ff", 18, "0x068000"),)
    t = to_topology(x, "vm")
    assert len(list(t.of_kind("nvswitch"))) == 1 and q.nvlink_matrix(t, "vm") == [[-1, 18], [18, -1]]
    assert [d.name for d in t.of_kind("nvlink_domain")] == ["vm"] and q.nearest_nics(t, "vm")[1] == ["mlx5_ib1"]
    with pytest.raises(ParseError, match="<pci> busid= expects a PCI bus id"):   # a target's marker, not a slot's
        parse_nccl_xml(GPU_PAIR.replace("busid='0000:08:00.0'", "busid='fffffff:ffff:ff'"), "x.xml")
    # NCCL's dumps write the same all-ones bus id as `fffffff:ff:ff.0` (an H200 VM's dump, NVIDIA/nccl-tests#256,
    # and GB300 NVL72 trays, where every GPU's NVSwitch is hidden): refused as no bus id, it is the same marker
    real = read_data("handwritten_h100-vm_hidden-nvswitch_nccl-topo.xml").replace("fffffff:ffff:ff", "fffffff:ff:ff.0")
    y = to_topology(parse_nccl_xml(real, "vm.xml"), "vm")
    assert len(list(y.of_kind("nvswitch"))) == 1 and q.nvlink_matrix(y, "vm") == [[-1, 18], [18, -1]]
    with pytest.raises(ParseError, match="<nvlink> target= expects a PCI bus id"):   # not all ones: damage
        parse_nccl_xml(real.replace("fffffff:ff:ff.0", "fffffff:ff:fe.0", 1), "vm.xml")


def test_nvlink_targets_match_gpus_whatever_the_domain_width():
    """NVML writes bus ids with an 8-digit domain, sysfs with 4: a peer named either way is the same GPU."""
    t = to_topology(parse_nccl_xml(GPU_PAIR.replace("target='0000:08:00.0'", "target='00000000:08:00.0'"), "x.xml"),
                    "n")
    assert q.nvlink_matrix(t, "n") == [[-1, 2], [2, -1]] and not list(t.of_kind("nvswitch"))


def test_a_net_speed_of_minus_1_leaves_the_rate_unknown():
    """Some network plugins report speed -1, which NCCL reads as "not known" (graph/topo.cc); the dump was
    refused. Other negative speeds are still damage."""
    text = read_data("simai_topo_8A100_4CX6.xml")
    x = parse_nccl_xml(text.replace('speed="200000"', 'speed="-1"', 1))
    assert x.nics[0].speed_gbytes is None and x.nics[1].speed_gbytes == 25.0
    with pytest.raises(ParseError, match="speed= expects a number, found '-2'"):
        parse_nccl_xml(text.replace('speed="200000"', 'speed="-2"', 1))


def test_show_does_not_group_gpus_that_share_no_pcie_switch():
    """`topo show --host` listed every GPU attached straight to a CPU as one "PCIe switch group": the four GPUs
    of an AC922, under two sockets, looked like one switch's."""
    import json

    from typer.testing import CliRunner

    from slurmtools.cli.main import app

    from ._data import data_path

    path = data_path("handwritten_power9-ac922-v100x4_gpu-cpu-nvlink_nccl-topo.xml")
    r = CliRunner().invoke(app, ["topo", "show", str(path), "--host", path.stem, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["pcie_groups"] == [[0], [1], [2], [3]]
    plx = data_path("panlichen-nccl-tests_rtx3090x8-plx_1nic_nccl-topo.xml")   # four GPUs per PLX switch
    r = CliRunner().invoke(app, ["topo", "show", str(plx), "--host", plx.stem, "--json"])
    assert json.loads(r.stdout)["pcie_groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
