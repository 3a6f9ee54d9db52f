"""Every element of an NCCL topology XML is read, skipped on purpose, or refused in one line: none is dropped without a
word. The RCCL (AMD) form writes its GPU links as <xgmi target= count= tclass=> inside <gpu> (ROCm rccl
tools/topo_expl models); these were once dropped, and a node with an XGMI mesh read as PCIe-only GPUs. NCCL's
<pcilink target=> sits inside a Broadcom switch's <pci> (graph/xml.cc, graph/topo.cc ncclTopoAddPciLinks); <c2c bw=
count=> inside <gpu> is a Grace GPU's link to its CPU (ncclTopoAddC2c); <gin>/<rma> inside <nic> are the same NIC as
NCCL's GPU-initiated and RMA plugins list it (ncclTopoAddNic)."""

from __future__ import annotations

import pytest

from slurmtools.errors import ParseError
from slurmtools.topology import queries as q
from slurmtools.topology.nccl_xml import parse_nccl_xml, to_topology

HEAD = "<system version='2'>\n <cpu numaid='0' affinity='0000ffff' arch='x86_64'>\n"
TAIL = " </cpu>\n</system>\n"


def two_gpus(link: str = "<nvlink target='{peer}' count='12' tclass='0x030200'/>", cls: str = "0x030200",
             nic: str = "<net name='mlx5_0' dev='0' speed='400000'/>") -> str:
    """Two GPUs under one switch, each with `link` to the other, and one NIC beside them."""
    def gpu(bus, peer, dev):
        inner = link.format(peer=peer)
        return (f"   <pci busid='{bus}' class='{cls}' link_speed='32.0 GT/s PCIe' link_width='16'>\n"
                f"    <gpu dev='{dev}' sm='90' rank='{dev}' gdr='1'>{inner}</gpu>\n   </pci>\n")
    return (HEAD + "  <pci busid='0000:10:00.0' class='0x060400' link_speed='32.0 GT/s PCIe' link_width='16'>\n"
            + gpu("0000:11:00.0", "0000:21:00.0", 0) + gpu("0000:21:00.0", "0000:11:00.0", 1)
            + f"   <pci busid='0000:31:00.0' class='0x020700'><nic>{nic}</nic></pci>\n  </pci>\n" + TAIL)


def line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def test_the_nvlink_form_reads_as_before():
    x = parse_nccl_xml(two_gpus())
    t = to_topology(x, "n1")
    assert len(x.gpus) == 2 and q.nvlink_islands(t, "n1") == [[0, 1]]


def test_rccl_xgmi_links_are_refused_at_the_link():
    text = two_gpus("<xgmi target='{peer}' count='1' tclass='0x120000'/>", cls="0x120000")
    with pytest.raises(ParseError) as err:
        parse_nccl_xml(text, "mi300x.xml")
    msg = str(err.value)
    assert err.value.line == line_of(text, "<xgmi") and "mi300x.xml" in msg
    assert "<xgmi> inside <gpu>" in msg and "AMD" in msg and "\n" not in msg


def test_a_broadcom_switch_link_is_refused():
    text = (HEAD + "  <pci busid='0000:10:00.0' class='0x060400' vendor='0x1000'>\n"
            "   <pcilink target='0000:40:00.0'/>\n"
            "   <pci busid='0000:11:00.0' class='0x030200'><gpu dev='0' sm='80' rank='0' gdr='1'/></pci>\n  </pci>\n"
            "  <pci busid='0000:40:00.0' class='0x060400' vendor='0x1000'>\n"
            "   <pci busid='0000:41:00.0' class='0x030200'><gpu dev='1' sm='80' rank='1' gdr='1'/></pci>\n  </pci>\n"
            + TAIL)
    with pytest.raises(ParseError) as err:
        parse_nccl_xml(text, "bcm.xml")
    assert err.value.line == line_of(text, "<pcilink") and "<pcilink> inside <pci>" in str(err.value) and "PCIe switches" in str(err.value)


def test_a_grace_c2c_link_is_skipped_and_changes_nothing():
    plain = parse_nccl_xml(two_gpus())
    with_c2c = parse_nccl_xml(two_gpus("<nvlink target='{peer}' count='12' tclass='0x030200'/>"
                                       "<c2c bw='40000' count='10'/>"))
    assert [(d.kind, d.index, d.bus_id, d.bridges, d.nvlinks) for d in with_c2c.devices] == \
        [(d.kind, d.index, d.bus_id, d.bridges, d.nvlinks) for d in plain.devices]


@pytest.mark.parametrize("tag", ["gin", "rma"])
def test_a_plugins_view_of_a_listed_nic_is_skipped(tag):
    x = parse_nccl_xml(two_gpus(nic=f"<net name='mlx5_0' dev='0' speed='400000'/>"
                                    f"<{tag} name='mlx5_0' dev='0' speed='400000'/>"))
    assert [d.name for d in x.nics] == ["mlx5_0"]


@pytest.mark.parametrize("tag", ["gin", "rma"])
def test_a_plugin_device_with_no_net_of_its_name_is_refused(tag):
    text = two_gpus(nic=f"<net name='mlx5_0' dev='0' speed='400000'/><{tag} name='mlx5_9' dev='1' speed='400000'/>")
    with pytest.raises(ParseError) as err:
        parse_nccl_xml(text, "f.xml")
    assert f"<{tag}> name='mlx5_9' has no <net>" in str(err.value)


@pytest.mark.parametrize("where", ["system", "cpu", "pci", "gpu", "nic", "net", "nvlink", "c2c"])
def test_an_unknown_element_anywhere_is_refused_naming_it(where):
    odd = "<fabriclink target='0000:21:00.0'/>"
    text = {
        "system": two_gpus().replace("</system>", f" {odd}\n</system>"),
        "cpu": two_gpus().replace(" </cpu>", f"  {odd}\n </cpu>"),
        "pci": two_gpus().replace("  </pci>\n </cpu>", f"   {odd}\n  </pci>\n </cpu>"),
        "gpu": two_gpus("<nvlink target='{peer}' count='12' tclass='0x030200'/>" + odd),
        "nic": two_gpus(nic="<net name='mlx5_0' dev='0' speed='400000'/>" + odd),
        "net": two_gpus(nic=f"<net name='mlx5_0' dev='0' speed='400000'>{odd}</net>"),
        "nvlink": two_gpus("<nvlink target='{peer}' count='12' tclass='0x030200'>" + odd + "</nvlink>"),
        "c2c": two_gpus("<c2c bw='40000' count='10'>" + odd + "</c2c>"),
    }[where]
    with pytest.raises(ParseError) as err:
        parse_nccl_xml(text, "f.xml")
    assert err.value.line == line_of(text, "<fabriclink")
    assert f"<fabriclink> inside <{where}>: not an element slurmtools knows" in str(err.value)
