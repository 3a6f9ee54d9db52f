"""NCCL topology XML forms seen in the wild beyond the local samples: each read as NCCL reads it, or refused."""

from __future__ import annotations

import pytest

from slurmtools.errors import ParseError
from slurmtools.topology import queries as q
from slurmtools.topology.nccl_xml import parse_nccl_xml, to_topology

from ._data import read_data

CPU = ("<system version='1'>\n <cpu host_hash='0x1' numaid='0' affinity='0000ffff' arch='x86_64'>\n{}\n"
       " </cpu>\n</system>\n")


def test_a_nic_under_the_cpu_keeps_its_speed():
    # Azure NC A100 v4 (azhpc-images topology/ncv4-topo.xml): <nic><net name="eth0" speed="100000"> straight under
    # <cpu>; NCCL reads its speed there too (graph/topo.cc ncclTopoAddCpu -> ncclTopoAddNic -> ncclTopoAddNet)
    x = parse_nccl_xml(read_data("azhpc-images_ncv4-topo.xml"))
    assert x.nics[0].speed_gbytes == 12.5


def test_a_pci_node_of_another_class_is_read_through():
    # kvDictPciClass (graph/topo.cc): any class but GPU 0x03, NIC 0x02, NVSwitch 0x068000 and CPU 0x068001 is a
    # PCI node whose <pci> children NCCL reads, e.g. ConnectX-8's data-direct function 0x080100
    text = CPU.format(
        "  <pci busid='0000:15:00.0' class='0x060400'>\n"
        "   <pci busid='0000:17:00.0' class='0x080100' link_speed='32.0 GT/s PCIe' link_width='16'>\n"
        "    <pci busid='0000:18:00.0' class='0x020700'><nic><net name='mlx5_0' dev='0' speed='400000'/></nic></pci>\n"
        "   </pci>\n"
        "   <pci busid='0000:19:00.0' class='0x030200'><gpu dev='0' sm='90' rank='0' gdr='1'/></pci>\n"
        "  </pci>")
    x = parse_nccl_xml(text)
    assert x.nics[0].bridges == ("0000:15:00.0", "0000:17:00.0") and x.nearest_nics(0) == ("mlx5_0",)
    assert q.nearest_nics(to_topology(x, "cx8"), "cx8")[0] == ["mlx5_0"]


MNNVL = ("<system version='1'>\n"
         " <cpu host_hash='0x8a3e1f6b2c4d5e01' numaid='0' affinity='ffffffff' arch='arm64'>\n"
         "  <pci busid='0008:01:00.0' class='0x030200'><gpu dev='0' sm='100' rank='0' gdr='1'>"
         "<nvlink target='fffffff:ffff:ff' count='18' tclass='0x068000'/><c2c bw='40000' count='10'/></gpu></pci>\n"
         " </cpu>\n"
         " <cpu host_hash='0x77b09c1d3e2f4a02' numaid='0' affinity='ffffffff' arch='arm64'>\n"
         "  <pci busid='{bus}' class='0x030200'><gpu dev='{dev}' sm='100' rank='4' gdr='1'>"
         "<nvlink target='fffffff:ffff:ff' count='18' tclass='0x068000'/></gpu></pci>\n"
         " </cpu>\n</system>\n")


@pytest.mark.parametrize("bus, dev", [("0008:01:00.0", 0), ("0009:01:00.0", 1)])
def test_a_dump_of_several_nodes_is_refused(bus, dev):
    # NCCL with MNNVL fuses the XML of an NVLink domain's nodes (GB200 NVL72, xml.cc ncclTopoFuseXml) and tells them
    # apart by <cpu host_hash=> only (topo.cc ncclGetSystemId); read as one node, their GPUs would be merged
    with pytest.raises(ParseError) as err:
        parse_nccl_xml(MNNVL.format(bus=bus, dev=dev), "f.xml")
    assert (err.value.line, err.value.column) == (5, 2) and "second node" in str(err.value)


def test_one_node_with_c2c_and_hidden_nvswitches_is_read():
    text = MNNVL.split(" <cpu host_hash='0x77")[0] + "</system>\n"
    x = parse_nccl_xml(text)
    assert len(x.gpus) == 1 and x.gpus[0].nvlinks == (("fffffff:ffff:ff", 18, "0x068000"),)


def test_partitions_of_one_gpu_are_refused():
    # <gpu mlopart=> siblings in one <pci> (graph/topo.cc ncclTopoAddGpuSub): before, two GPUs on one bus id with
    # the NVLinks of both given to the second
    gpu = "   <gpu dev='{0}' sm='100' rank='{0}' gdr='1' mlopart='{0}'><nvlink target='fffffff:ffff:ff' count='18' " \
          "tclass='0x068000'/></gpu>"
    text = CPU.format("  <pci busid='0000:19:00.0' class='0x030200'>\n" + gpu.format(0) + "\n" + gpu.format(1)
                      + "\n  </pci>")
    with pytest.raises(ParseError) as err:
        parse_nccl_xml(text, "m.xml")
    assert err.value.line == 5 and "MLOPart" in str(err.value)


def test_two_nets_of_one_name_are_refused():
    # a hand-written NCCL_TOPO_FILE <nic> with two <net> and no name= (NCCL's own dumps name each, xml.cc
    # ncclTopoFillNet): both were named by the bus id and read as one NIC
    text = CPU.format("  <pci busid='0000:0c:00.0' class='0x020700'>\n"
                      "   <nic><net dev='0' speed='200000'/><net dev='1' speed='200000'/></nic>\n  </pci>")
    with pytest.raises(ParseError) as err:
        parse_nccl_xml(text, "n.xml")
    assert err.value.line == 4 and "second NIC" in str(err.value)


# a NIC without a PCI device (a socket NIC NCCL sees only as a name) ------------------------------------------

GB_SOCKET = ("<system version='1'>\n"
             " <cpu host_hash='0x78ad2c674a35a902' numaid='0' affinity='0000ffff' arch='x86_64'>\n"
             "  <pci busid='0000:51:00.0' class='0x030200' vendor='0x10de' device='0x2901'>"
             "<gpu dev='0' sm='100' rank='0' gdr='1'><nvlink target='fffffff:ff:ff.0' count='18' tclass='0x068000'/>"
             "</gpu></pci>\n"
             "{nic0}"
             " </cpu>\n"
             " <cpu host_hash='0x78ad2c674a35a902' numaid='1' affinity='ffff0000' arch='x86_64'>\n"
             "  <pci busid='0000:75:00.0' class='0x030200' vendor='0x10de' device='0x2901'>"
             "<gpu dev='1' sm='100' rank='1' gdr='1'><nvlink target='fffffff:ff:ff.0' count='18' tclass='0x068000'/>"
             "</gpu></pci>\n"
             "{nic1}"
             " </cpu>\n</system>\n")
ETH0 = ("  <nic><net name='eth0' dev='0' latency='0' speed='10000' port='0' guid='0x0' maxconn='65536' gdr='0'/>"
        "</nic>\n")


def test_a_pciless_nic_under_each_cpu_is_one_nic():
    """NCCL 2.27.3 writes its socket NIC under each <cpu> (a Vast.ai 8x B200 dump: openfabric-systems/simllm
    tests/fixtures/nccl_topology/vastai_hgx_b200_8x/nccl_topo.xml @ fea03f00, trimmed here to 2 GPUs): it was
    refused as a second NIC named 'eth0'. One of that name with other attributes is another device, still refused."""
    x = parse_nccl_xml(GB_SOCKET.format(nic0=ETH0, nic1=ETH0), "b200.xml")
    assert [(n.name, n.speed_gbytes) for n in x.nics] == [("eth0", 1.25)]
    assert [n.name for n in to_topology(x, "b200").nics("b200")] == ["eth0"]
    with pytest.raises(ParseError, match="b200.xml:8: a second NIC named 'eth0' \\(first at line 4\\)"):
        parse_nccl_xml(GB_SOCKET.format(nic0=ETH0, nic1=ETH0.replace("speed='10000'", "speed='25000'")), "b200.xml")


def test_a_pciless_nic_is_near_no_gpu():
    """A PCI-less NIC stood under its <cpu>'s NUMA node: local (PHB) to that CPU's GPUs, SYS to the others, where
    NCCL put it only for its own search. It is the host's, its place unknown, and --strict names that."""
    t = to_topology(parse_nccl_xml(GB_SOCKET.format(nic0=ETH0, nic1=""), "b200.xml"), "b200")
    assert q.nearest_nics(t, "b200") == {0: [], 1: []} and q.nic_numa(t, "b200") == {"eth0": []}
    assert "nic_locality" in t.unknown("b200")


@pytest.mark.parametrize("cut", ['<pci busid="0000:01:00.0"', ""])
def test_a_truncated_dump_is_told_as_one(cut):
    """A dump cut short (a paste, a full disk) read "not well-formed XML: no element found", which says nothing of
    where; a mismatched tag keeps expat's own words."""
    with pytest.raises(ParseError, match=r"^t\.xml:3: the file ends inside <cpu> \(opened at line 2\): a truncated"):
        parse_nccl_xml('<system version="1">\n<cpu numaid="0">\n' + cut, "t.xml")
    with pytest.raises(ParseError, match="mismatched tag"):
        parse_nccl_xml("<system><cpu></system>", "t.xml")
