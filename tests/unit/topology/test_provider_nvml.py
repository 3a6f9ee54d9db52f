"""NVML capture against an NVML-shaped fake `pynvml` (no GPU in CI): an 8-GPU NVSwitch board whose driver reports
one dummy remote PCI id for every link, a 4-switch board with device types, a 4-GPU direct mesh, and a
multi-node clique; then capture -> JSON -> capture and capture -> graph -> JSON -> graph round trips."""

from __future__ import annotations

import json
from pathlib import Path
import sys

import pytest

from slurmtools.errors import ParseError
from slurmtools.topology import queries as q
from slurmtools.topology.graph import Topology
from slurmtools.topology.nvml_capture import NvmlCapture, capture, nvlink_layout, to_topology
from tests.nvml_fake import fake_nvml


def _bus(i: int) -> str:
    return f"00000000:{0x18 + 0x10 * i:02X}:00.0"


def _anc(n: int, per_switch: int, per_numa: int) -> list[list[int]]:
    """PIX inside a pair sharing a PCIe switch, NODE within a NUMA node, SYS across."""
    return [[0 if a == b else 10 if a // per_switch == b // per_switch else 40 if a // per_numa == b // per_numa
             else 50 for b in range(n)] for a in range(n)]


def h100_dummy_ids() -> list[dict]:
    """8x H100: 18 links each, all reported with one dummy far-end id and no device type (older driver)."""
    return [{"name": "NVIDIA H100 80GB HBM3", "bus": _bus(i), "numa": i // 4,
             "cpus": list(range(52 * (i // 4), 52 * (i // 4 + 1))) + list(range(104 + 52 * (i // 4), 156 + 52 * (i // 4))),
             "links": {k: ("00000000:00:00.0", "switch") for k in range(18)}} for i in range(8)]


def h100_four_switches() -> list[dict]:
    """18 links spread 5,4,4,5 over four NVSwitches with their own PCI ids, typed by the driver."""
    sw = [f"00000000:{0xA0 + s:02X}:00.0" for s in range(4)]
    spread = [0] * 5 + [1] * 4 + [2] * 4 + [3] * 5
    return [{"name": "NVIDIA H100 80GB HBM3", "bus": _bus(i), "numa": i // 4, "cpus": [i],
             "links": {k: (sw[spread[k]], "switch") for k in range(18)}} for i in range(8)]


def a100_mesh4() -> list[dict]:
    """4 GPUs, 4 direct NVLinks to each peer (12 links per GPU)."""
    out = []
    for i in range(4):
        peers = [p for p in range(4) if p != i]
        out.append({"name": "NVIDIA A100-SXM4-80GB", "bus": _bus(i), "numa": 0, "cpus": list(range(32)),
                    "links": {k: (_bus(peers[k // 4]).replace("00000000:", "0000:"), "gpu") for k in range(12)}})
    return out


@pytest.fixture
def inject(monkeypatch):
    def use(nv):
        monkeypatch.setitem(sys.modules, "pynvml", nv)
        return nv
    return use


def test_nvswitch_board_with_dummy_remote_ids(inject):
    nv = inject(fake_nvml(h100_dummy_ids(), _anc(8, 2, 4), remote_types=False))
    cap = capture("dgx01")
    assert nv.calls == ["init", "shutdown"]
    assert cap.hostname == "dgx01" and cap.driver == "550.54.15" and len(cap.gpus) == 8
    g4 = cap.gpus[4]
    assert g4.numa == 1 and g4.cpu_affinity[:2] == (52, 53) and len(g4.cpu_affinity) == 104
    assert g4.memory_mb == 80 * 1024 and g4.minor == 4 and len(g4.nvlinks) == 18
    assert all(ln.remote_type == "unknown" for ln in g4.nvlinks)
    assert any("remote device types" in n for n in cap.notes)
    assert cap.ancestor[0][1] == "PIX" and cap.ancestor[0][2] == "NODE" and cap.ancestor[0][7] == "SYS"
    lay = nvlink_layout(cap)
    # not a mesh: the shared dummy id is one switch fabric, and no GPU pair is linked directly
    assert lay.nvswitch_board and lay.peers == {} and lay.switches == ("00000000:00:00.0",)
    assert all(lay.switch_links[(g, 0)] == 18 for g in range(8))
    t = to_topology(cap)
    assert q.nvlink_islands(t, "dgx01") == [list(range(8))]
    assert q.nvlink_count(t, "gpu:dgx01:0", "gpu:dgx01:7") == 18
    assert q.gpu_numa(t, "dgx01") == {g: [g // 4] for g in range(8)}
    assert sorted(q.pcie_groups(t, "dgx01").values()) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [d.name for d in t.of_kind("nvlink_domain")] == ["dgx01"]


def test_four_typed_nvswitches(inject):
    inject(fake_nvml(h100_four_switches(), _anc(8, 8, 8)))
    lay = nvlink_layout(capture("hgx"))
    assert len(lay.switches) == 4 and lay.peers == {}
    assert [lay.switch_links[(0, k)] for k in range(4)] == [5, 4, 4, 5]


def test_four_gpu_mesh(inject):
    inject(fake_nvml(a100_mesh4(), _anc(4, 1, 4), numa=False))
    cap = capture("mesh")
    assert any("NUMA" in n for n in cap.notes) and cap.gpus[0].numa is None
    lay = nvlink_layout(cap)
    assert not lay.nvswitch_board and lay.unknown == ()
    assert lay.peers == {(a, b): 4 for a in range(4) for b in range(a + 1, 4)}
    t = to_topology(cap)
    assert not list(t.of_kind("nvswitch")) and not list(t.of_kind("nvlink_domain"))
    assert t.edge("gpu:mesh:1", "gpu:mesh:3").links == 4
    # without NUMA ids the GPUs share one CPU group (their CPU set) whose NUMA id is unknown, never "0"
    assert q.gpu_numa(t, "mesh") == {g: [] for g in range(4)}
    assert len({q.local_cpus(t, "mesh")[g] for g in range(4)}) == 1
    assert "numa_ids" in t.unknown("mesh")


def test_gpu_memory_numa_node_is_not_the_cpu_side_node(inject):
    """Grace Hopper and the like: nvmlDeviceGetNumaNodeId answers the GPU memory's own NUMA node (nvidia-smi's
    GPU NUMA ID, 4 12 20 28 on a GH200x4), which no CPU is on; the CPUs near the GPU are its memory affinity's
    node (NUMA Affinity 0..3). Capture format /1 stored the first as the second."""
    gh = [{"name": "NVIDIA GH200 120GB", "bus": _bus(i), "numa": i, "gpu_numa": 4 + 8 * i,
           "cpus": list(range(72 * i, 72 * (i + 1))), "links": {}} for i in range(4)]
    inject(fake_nvml(gh, _anc(4, 1, 1)))
    cap = capture("gh")
    assert [(g.numa, g.gpu_numa_id) for g in cap.gpus] == [(0, 4), (1, 12), (2, 20), (3, 28)]
    assert q.gpu_numa(to_topology(cap), "gh") == {g: [g] for g in range(4)}
    # the same file as format /1 wrote it: `numa` held the GPU memory's node; read back as that, CPU side unknown
    old = cap.to_dict()
    old["format"] = "slurmtools.nvml-capture/1"
    for g in old["gpus"]:
        g["numa"] = g.pop("gpu_numa_id")
    back = NvmlCapture.from_dict(old, "old.json")
    assert [(g.numa, g.gpu_numa_id) for g in back.gpus] == [(None, 4), (None, 12), (None, 20), (None, 28)]
    assert "numa_ids" in to_topology(back).unknown("gh")


def test_memory_affinity_over_several_nodes_leaves_the_node_unknown(inject):
    two = [dict(g, numa=[0, 1]) for g in a100_mesh4()]
    inject(fake_nvml(two, _anc(4, 1, 4)))
    cap = capture("wide")
    assert all(g.numa is None for g in cap.gpus)
    assert any("spans NUMA nodes [0, 1]" in n for n in cap.notes)


def test_multi_node_clique(inject):
    uuid = "2f5c1a8e-0b7d-4c4e-9a35-1f2e3d4c5b6a"
    inject(fake_nvml(h100_four_switches()[:4], _anc(4, 4, 4), fabric={i: (uuid, 7) for i in range(4)}))
    a = capture("gb-a")
    assert {(g.fabric_cluster_uuid, g.fabric_clique_id) for g in a.gpus} == {(uuid, 7)}
    t = Topology("nvl")
    from slurmtools.topology.nvml_capture import add_to
    add_to(t, a, "tray1")
    add_to(t, a, "tray2")
    doms = q.nvlink_domains(t)
    assert len(doms) == 1 and doms[0].name == f"{uuid}:7" and doms[0].multi_node


def test_fabric_absent_on_old_driver(inject):
    inject(fake_nvml(a100_mesh4(), _anc(4, 4, 4), fabric={}))
    assert all(g.fabric_cluster_uuid is None for g in capture("x").gpus)


def test_capture_json_graph_round_trips(inject):
    inject(fake_nvml(h100_dummy_ids(), _anc(8, 2, 4), remote_types=False))
    cap = capture("dgx01")
    text = json.dumps(cap.to_dict())
    again = NvmlCapture.from_dict(json.loads(text), "dgx01.json")
    assert again == cap
    t = to_topology(again)
    t2 = Topology.from_json(t.to_json())
    assert t2.same_as(t) and q.nvlink_islands(t2, "dgx01") == [list(range(8))]


@pytest.mark.parametrize("mutate, words", [
    (lambda d: d.pop("gpus"), "gpus: missing"),
    (lambda d: d.update(format="other/1"), "format: expected"),
    (lambda d: d["gpus"][1].update(index="1"), "gpus[1].index: expected int"),
    (lambda d: d["gpus"][0]["nvlinks"][0].pop("remote_pci"), "gpus[0].nvlinks[0].remote_pci: missing"),
    (lambda d: d["ancestor"].pop(), "ancestor: expected a 8x8 matrix"),
])
def test_bad_capture_files_name_the_key(inject, mutate, words):
    inject(fake_nvml(h100_dummy_ids(), _anc(8, 2, 4)))
    d = capture("n").to_dict()
    mutate(d)
    with pytest.raises(ParseError) as err:
        NvmlCapture.from_dict(d, "n.json")
    assert str(err.value).startswith(f"n.json: {words}")


@pytest.mark.parametrize("mutate, words", [
    # values of the wrong type or range were read as they came: into the graph as another fact, or a traceback
    (lambda d: d["gpus"][0].update(cpu_affinity=[[0, 1], [2]]), "gpus[0].cpu_affinity[0]: expected int, found a list"),
    (lambda d: d["gpus"][0].update(cpu_affinity="0-15"), "gpus[0].cpu_affinity: expected list, found text"),
    (lambda d: d["gpus"][0].update(cpu_affinity=True), "gpus[0].cpu_affinity: expected list, found true or false"),
    (lambda d: d["gpus"][0]["cpu_affinity"].append(70000), "gpus[0].cpu_affinity[104]: expected int, 0 or more and "
                                                          "below 65536, found 70000"),
    (lambda d: d["gpus"][1].update(index=True), "gpus[1].index: expected int, found true or false"),
    (lambda d: d["gpus"][1].update(index=0), "gpus[1].index: the same as gpus[0]'s"),
    (lambda d: d["gpus"][1].update(pci_bus_id=d["gpus"][0]["pci_bus_id"].replace("00000000:", "0000:")),
     "gpus[1].pci_bus_id: the same as gpus[0]'s"),
    (lambda d: d["gpus"][1].update(memory_mb=-1), "gpus[1].memory_mb: expected int, 0 or more, found -1"),
    (lambda d: d["gpus"][1].update(numa="0"), "gpus[1].numa: expected int, found text"),
    (lambda d: d["gpus"][1].update(fabric_cluster_uuid=["a"]), "gpus[1].fabric_cluster_uuid: expected str"),
    (lambda d: d["gpus"][1].update(pci_bus_id="0000:1X:00.0"), "gpus[1].pci_bus_id: expected a PCI bus id"),
    (lambda d: d["gpus"][1]["nvlinks"][0].update(version=[4]), "gpus[1].nvlinks[0].version: expected int"),
    (lambda d: d["gpus"][1]["nvlinks"][0].update(remote_type="nvswitch"), "gpus[1].nvlinks[0].remote_type: expected "
                                                                         "one of gpu, npu, switch, unknown"),
    (lambda d: d["gpus"][1]["nvlinks"][0].update(remote_pci=""), "gpus[1].nvlinks[0].remote_pci: expected a PCI bus"),
    (lambda d: d["ancestor"][0].__setitem__(1, "PCI"), 'ancestor[0][1]: expected one of internal, PIX, PXB, PHB, '
                                                       'NODE, SYS, unknown, found "PCI"'),
    (lambda d: d["ancestor"][0].__setitem__(1, "SYS"), "ancestor[0][1]: SYS, but ancestor[1][0] is \"PIX\""),
    (lambda d: d["ancestor"][2].__setitem__(2, "PIX"), "ancestor[2][2]: expected X (the GPU itself)"),
    # a misspelt key left the real one unread (numa: unknown); an empty host name made the vertex host:
    (lambda d: d["gpus"][0].update(nuam=d["gpus"][0].pop("numa")), "gpus[0].nuam: unknown key (did you mean numa?"),
    (lambda d: d.update(hostname=""), 'hostname: expected a host name, found ""'),
    (lambda d: d.update(hostname="dgx01\nx"), 'hostname: expected a host name, found "dgx01\\nx"'),
    (lambda d: d.update(notes="driver said so"), "notes: expected list, found text"),
])
def test_capture_values_are_what_capture_writes(inject, mutate, words):
    inject(fake_nvml(h100_dummy_ids(), _anc(8, 2, 4)))
    d = capture("n").to_dict()
    NvmlCapture.from_dict(d, "n.json")
    mutate(d)
    with pytest.raises(ParseError) as err:
        NvmlCapture.from_dict(d, "n.json")
    assert str(err.value).startswith(f"n.json: {words}"), str(err.value)


@pytest.mark.parametrize("text, words", [
    ('{"format": "x", "format": "y"}', 'n.json: key "format" given twice in one object'),
    ('{"numa": NaN}', "n.json: NaN is not JSON"),
    ("[" * 100000 + "]" * 100000, "n.json: not read: nested too deeply"),
    ('{"format": ', "n.json:1:12: not JSON: Expecting value"),
    # int() refuses past 4300 digits with a ValueError json passed on as it was: a traceback
    ('{"numa": ' + "1" * 5000 + "}", "n.json: a number of 5000 digits: no value of a capture has so many"),
])
def test_capture_text_json_python_would_stretch(text, words):
    """Python's json keeps the last of a key given twice and reads NaN; neither is in a capture."""
    from slurmtools.topology.nvml_capture import parse_capture

    with pytest.raises(ParseError) as err:
        parse_capture(text, "n.json")
    assert str(err.value).startswith(words), str(err.value)


REAL = Path(__file__).resolve().parents[2] / "data" / "topology"


def test_real_h100_capture_and_topo_m_agree():
    """Both captured on one lent H100 (tests/data/SOURCES.md): NVML's capture and nvidia-smi's matrix must give
    the same GPU, CPUs and NUMA node; the /1 capture of the same machine (NUMA from nvmlDeviceGetNumaNodeId,
    unsupported on x86) leaves the node unknown rather than 0."""
    from slurmtools.topology.nvsmi import parse_topo_matrix

    cap = NvmlCapture.from_dict(json.loads((REAL / "slurmtools-lent-h100-vm_nvml-capture.json").read_text()),
                                "capture")
    g = cap.gpus[0]
    assert (len(cap.gpus), g.name, g.numa, g.gpu_numa_id, g.cpu_affinity) == (
        1, "NVIDIA H100 80GB HBM3", 0, None, tuple(range(16)))
    t = to_topology(cap)
    assert q.gpu_numa(t, "vm") == {0: [0]} and "numa_ids" not in t.unknown("vm")
    smi = parse_topo_matrix((REAL / "slurmtools-lent-h100-vm_topo-m_ansi.txt").read_text(), "topo-m")
    assert [d.label for d in smi.devices] == ["GPU0"] and smi.numa_of("GPU0") == 0
    old = NvmlCapture.from_dict(json.loads((REAL / "slurmtools-lent-h100-vm_nvml-capture-v1.json").read_text()),
                                "v1")
    assert old.gpus[0].numa is None and "numa_ids" in to_topology(old).unknown("vm")
