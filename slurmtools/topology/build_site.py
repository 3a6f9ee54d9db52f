"""Build a `Topology` from the site's declared fabric (`topology/*.toml`, read by `sitefile.load_fabric`).

This is the provider for sites where discovery cannot run, and the declared side that `topo diff` compares a
discovered graph against. Each node type's inside follows the declared layout: GPUs spread over sockets in index
order, GPUs and their NICs on shared PCIe switches, one NVSwitch board per host (or a multi-node NVLink domain).
Pure.
"""

from __future__ import annotations

from slurmtools.topology.graph import Member, Topology, ib_link
from slurmtools.topology.sitefile import Fabric, NodeType

def build_node(t: Topology, host: str, nt: NodeType, rack: str | None = None, domain: str | None = None,
               link_layer: str | None = "ib") -> str:
    """Add one host of type `nt` with its CPUs, PCIe switches, GPUs, NICs and NVLink fabric. `domain` names a
    multi-node NVLink domain the host's GPUs belong to (default: a domain of its own on NVSwitch boards)."""
    hid = t.add_host(host, node_type=nt.name, rack=rack, features=nt.features)
    per_socket = nt.cores_per_socket
    total_cores = nt.sockets * per_socket
    cpu_ids = []
    for s in range(nt.sockets):
        cores = range(s * per_socket, (s + 1) * per_socket)
        # Linux numbers the second hardware thread of core c as c + total_cores
        cpus = sorted(c + k * total_cores for c in cores for k in range(nt.threads_per_core))
        cpu_ids.append(t.add_cpu(host, numa=s, socket=s, cpus=cpus, cores=cores))
    for a in range(len(cpu_ids)):
        for b in range(a + 1, len(cpu_ids)):
            t.link_smp(cpu_ids[a], cpu_ids[b])
    pcisw = {}
    for i in range(nt.pcie_switches):
        first_gpu = next((g for g in range(nt.gpus) if nt.gpu_pcie_switch(g) == i), None)
        sock = nt.gpu_socket(first_gpu) if first_gpu is not None else 0
        pcisw[i] = t.add_pcie_switch(host, i, parent=cpu_ids[sock])
    gpu_ids = []
    for g in range(nt.gpus):
        parent = pcisw[nt.gpu_pcie_switch(g)] if nt.pcie_switches else cpu_ids[nt.gpu_socket(g)]
        gpu_ids.append(t.add_gpu(host, g, gpu_type=nt.gpu_type, parent=parent))
    placed: dict[str, str] = {}
    for g in range(nt.gpus):
        for n in nt.nearest_nics(g):
            if n not in placed:
                placed[n] = pcisw[nt.gpu_pcie_switch(g)] if nt.pcie_switches else cpu_ids[nt.gpu_socket(g)]
    for n in nt.nics:
        t.add_nic(host, n, link_layer=link_layer, parent=placed.get(n, cpu_ids[0]))
    if nt.nvlink == "nvswitch" and nt.gpus:
        nvs = [t.add_nvswitch(host, k) for k in range(nt.nvswitches)]
        for gid in gpu_ids:
            for k, sw in enumerate(nvs):
                # spread the GPU's links over the switches as evenly as they go (H100: 5,4,4,5 over 4)
                share = nt.nvlinks_per_gpu // len(nvs) + (1 if k < nt.nvlinks_per_gpu % len(nvs) else 0)
                if share:
                    t.link_nvlink(gid, sw, share, nt.nvlink_gbytes_per_link)
        if domain is None:
            t.add_nvlink_domain(host, gpu_ids)
    if domain is not None and nt.gpus:
        dvid = f"nvdomain:{domain}"
        if dvid not in t:
            t.add_nvlink_domain(domain)
        for gid in gpu_ids:
            t.link(gid, dvid, Member())
    return hid


def build_site(fabric: Fabric) -> Topology:
    """The declared cluster: hosts under their leaves, leaves under spines, NICs cabled at the fabric's link."""
    t = Topology(fabric.name)
    t.add_cluster(fabric.name)
    link = ib_link(fabric.link)
    for leaf in fabric.leaves.values():
        t.add_switch(leaf.name, level=0, rack=fabric.rack_of_leaf(leaf.name))
    for r in fabric.rail_leaves.values():
        t.add_switch(r.name, level=0, rack=fabric.rack_of_leaf(r.leaf))
    for sp in fabric.spines.values():
        t.add_switch(sp.name, level=1)
    domain_of = fabric.nvlink_domain_of_host()
    for leaf in fabric.leaves.values():
        nt = fabric.node_types[leaf.node_type]
        for h in leaf.hosts:
            hid = build_node(t, h, nt, rack=fabric.rack_of_host(h), domain=domain_of.get(h))
            t.link(hid, f"cluster:{fabric.name}", Member())
            if nt.nics:
                for n in nt.nics:
                    t.link(f"nic:{h}:{n}", f"switch:{fabric.nic_leaf(leaf.name, n)}", ib_link(fabric.link))
            else:
                t.link(hid, f"switch:{leaf.name}", link)
    for sp in fabric.spines.values():
        for ln in sp.leaves:
            t.link(f"switch:{ln}", f"switch:{sp.name}", ib_link(fabric.link, sp.uplinks_per_leaf or 1))
    return t
