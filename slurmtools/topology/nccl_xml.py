"""Provider: NCCL topology XML (what NCCL_TOPO_DUMP_FILE writes and NCCL_TOPO_FILE reads).

Cloud images ship these files for their VM types (AWS, Azure), and a dump from a real node is the PCIe tree NCCL
itself routes over, so it is a good description of a node type where NVML cannot run. Devices may be explicit
(`<gpu>`, `<nic><net>`) or only implied by a PCI class (0x0302 3D controller, 0x0200 Ethernet, 0x0207
InfiniBand); both are read. NCCL *graph* files (`<graphs>`, ring/tree channels) are a different thing and are
refused. Pure: takes text; expat gives line numbers for every error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from xml.parsers import expat

from slurmtools.errors import ParseError, whole_number
from slurmtools.topology.cpu_layout import CPU_ID_LIMIT
from slurmtools.topology.pci import pci_key

# One 32-bit word of a cpumask: int(w, 16) alone also takes blanks, signs, `_` and a 0x prefix, and the bits of a
# longer word past the 32nd would be lost.
_HEX_WORD = re.compile(r"[0-9a-fA-F]{1,8}")


@dataclass
class _El:
    tag: str
    attrs: dict[str, str]
    line: int
    column: int
    children: list["_El"] = field(default_factory=list)


#: How deep elements may nest: system, cpu, a PCIe tree (a few switches deep on real nodes), gpu, nvlink. The
#: readers walk the tree by recursion, so a deeper file is refused before it is walked.
MAX_DEPTH = 64


def _tree(text: str, source: str) -> _El:
    p = expat.ParserCreate()
    root = _El("#doc", {}, 0, 0)
    stack = [root]

    def start(tag, attrs):
        if len(stack) > MAX_DEPTH:
            raise ParseError(source, p.CurrentLineNumber, f"elements nested more than {MAX_DEPTH} deep (no node's "
                                                          "PCIe tree is)", p.CurrentColumnNumber + 1)
        el = _El(tag, dict(attrs), p.CurrentLineNumber, p.CurrentColumnNumber + 1)
        stack[-1].children.append(el)
        stack.append(el)

    p.StartElementHandler = start
    p.EndElementHandler = lambda tag: stack.pop()
    try:
        p.Parse(text, True)
    except expat.ExpatError as exc:
        ends = {expat.errors.codes[m] for m in (expat.errors.XML_ERROR_NO_ELEMENTS,
                                                 expat.errors.XML_ERROR_UNCLOSED_TOKEN,
                                                 expat.errors.XML_ERROR_PARTIAL_CHAR)}
        if len(stack) > 1 and exc.code in ends:
            # the text stops with elements still open: expat says "no element found" or "unclosed token"
            raise ParseError(source, exc.lineno, f"the file ends inside <{stack[-1].tag}> (opened at line "
                                                 f"{stack[-1].line}): a truncated dump?") from None
        raise ParseError(source, exc.lineno, f"not well-formed XML: {expat.ErrorString(exc.code)}",
                         exc.offset + 1) from None
    return root


@dataclass(frozen=True)
class XmlCpu:
    numa: int
    cpus: tuple[int, ...]
    line: int


@dataclass(frozen=True)
class XmlDevice:
    """A GPU or NIC, with the PCI bridges between it and its CPU (outermost first)."""

    kind: str                        # "gpu" | "nic"
    index: int                       # GPU dev / NIC position
    name: str                        # GPU<n>, or the net name (mlx5_0, rdmap...), else the PCI bus id
    bus_id: str
    numa: int | None                 # None: a PCI-less NIC, whose place the file does not state
    bridges: tuple[str, ...]
    speed_gbytes: float | None = None
    nvlinks: tuple[tuple[str, int, str], ...] = ()   # (target bus id, count, target class)
    line: int = 0
    explicit: bool = True            # a <gpu>/<nic> element; False: implied only by a PCI class
    sm: int | None = None            # <gpu sm=>: compute capability x10
    link_layer: str | None = None    # NICs: "ib" (PCI class 0x0207) or "ethernet" (0x0200); None: not stated
    nvlinks_stated: bool = False     # GPUs: the file says which NVLinks it has (see parse_nccl_xml)


@dataclass(frozen=True)
class NcclTopo:
    source: str
    cpus: tuple[XmlCpu, ...]
    devices: tuple[XmlDevice, ...]
    bridges: dict[str, str | None]   # bridge bus id -> parent bridge (None: directly under the CPU)
    bridge_numa: dict[str, int]
    unstated_slots: tuple[str, ...] = ()   # <pci> slots with no class and nothing inside (filled at run time)

    @property
    def gpus(self) -> tuple[XmlDevice, ...]:
        return tuple(d for d in self.devices if d.kind == "gpu")

    @property
    def nics(self) -> tuple[XmlDevice, ...]:
        return tuple(d for d in self.devices if d.kind == "nic")

    def nearest_nics(self, gpu: int) -> tuple[str, ...]:
        """NICs sharing the deepest PCIe bridge with the GPU (none shared: those on the same NUMA node)."""
        g = next(d for d in self.gpus if d.index == gpu)
        best, names = -1, []
        for n in self.nics:
            if n.numa != g.numa:
                continue
            depth = 0
            for a, b in zip(g.bridges, n.bridges):
                if a != b:
                    break
                depth += 1
            if depth > best:
                best, names = depth, [n.name]
            elif depth == best:
                names.append(n.name)
        return tuple(names)


def _mask(value: str, source: str, el: _El) -> tuple[int, ...]:
    """Linux cpumask text: comma-separated 32-bit hex words, most significant first."""
    words = value.split(",")
    if not all(_HEX_WORD.fullmatch(w) for w in words):
        raise ParseError(source, el.line, f"cpu affinity: expected 32-bit hex words like 0000ffff,ffffffff, "
                                          f"found {value[:60]!r}", el.column)
    if len(words) > CPU_ID_LIMIT // 32:
        raise ParseError(source, el.line, f"cpu affinity: {len(words)} words of 32 CPUs, more than the "
                                          f"{CPU_ID_LIMIT} CPU ids a node can have", el.column)
    out = []
    for i, w in enumerate(reversed(words)):
        bits = int(w, 16)
        out.extend(i * 32 + b for b in range(32) if bits >> b & 1)
    return tuple(out)


_PCI_CLASS = re.compile(r"0x[0-9a-f]{6}")
#: The `target=` of NVLinks whose far end the dumping host cannot see (NVSwitches hidden from a VM, every GPU of a
#: GB200/GB300 NVL72 tray), with tclass 0x068000: the all-ones bus id, as NCCL's reader compares it
#: (`fffffff:ffff:ff`, graph/xml.cc) and as its dumps write it (`fffffff:ff:ff.0`: real VM and NVL72 dumps). NCCL
#: reads them as links into an NVSwitch.
HIDDEN_NVLINK_TARGET = re.compile(r"f{4,}:f{2,4}:f{2}(?:\.[0f])?")
#: Elements that hold devices, each read where NCCL reads it (system > cpu > pci... > gpu > nvlink, nic > net);
#: one anywhere else is refused, as NCCL would skip it and all it holds.
_DEVICE_TAGS = ("system", "cpu", "pci", "gpu", "nic", "net", "nvlink")
_READ_INSIDE = {"gpu": "nvlink", "nic": "net"}
#: Elements NCCL writes that state nothing the graph holds, skipped on purpose (by the element they sit in). Any
#: element neither read, skipped here nor refused below is refused as unknown: a link or device dropped without a
#: word would read as "not there" (RCCL's XGMI links once did).
_SKIPPED = {
    # the GPU's chip-to-chip link to its own CPU (Grace): the graph links GPUs to GPUs and NVSwitches only, and the
    # GPU's CPU is already the <cpu> it sits in
    ("gpu", "c2c"),
    # a NIC as NCCL's GPU-initiated (GIN) and RMA plugins see it: the same device as the <net> of its name
    ("nic", "gin"), ("nic", "rma"),
}
#: Elements NCCL or RCCL writes that the graph cannot hold: refused, saying why.
_REFUSED = {
    "pcilink": "a link between two PCIe switches (Broadcom peer-to-peer, NCCL's <pcilink>): slurmtools reads the "
               "PCIe tree without such links, so what sits under the two switches would be read as meeting only "
               "at the CPU",
    "xgmi": "an XGMI link between AMD GPUs (an RCCL topology): slurmtools reads GPU links as NVLink only, so these "
            "GPUs would be read as joined by PCIe alone",
}
#: PCI classes NCCL does not read through (`kvDictPciClass`, graph/topo.cc): GPUs, NICs, NVSwitches and the CPU.
#: Any other class is a PCI node to NCCL, its `<pci>` children read as below a switch: bridges (0x0604), and what
#: else a real path passes, such as ConnectX-8's data-direct function (0x080100).
_LEAF_CLASSES = ("0x03", "0x02", "0x068000", "0x068001")


def _pci_id(el: _El, key: str, source: str, required: bool = True) -> str:
    """A PCI bus id (busid=, target=) or class (class=, tclass=) attribute, lower-cased; "" when absent and not
    `required`. One in another form is refused: a class NCCL cannot read drops the device and all below it, a
    bus id no device has turns an NVLink peer into an NVSwitch."""
    value = el.attrs.get(key, "").lower()
    if not value:
        if required:
            raise ParseError(source, el.line, f"<{el.tag}> needs {key}=", el.column)
        return value
    if key == "target" and HIDDEN_NVLINK_TARGET.fullmatch(value):
        return value
    if key.endswith("class"):
        ok, example = _PCI_CLASS.fullmatch(value), "a PCI class like 0x030200"
    else:
        ok, example = pci_key(value), "a PCI bus id like 0000:07:00.0"
    if not ok:
        raise ParseError(source, el.line, f"<{el.tag}> {key}= expects {example}, found {value[:40]!r}", el.column)
    return value


def _int(el: _El, key: str, source: str, signed: bool = False) -> int:
    """A whole-number attribute; `signed` where NCCL writes -1 for "not known" (numaid)."""
    try:
        return whole_number(el.attrs[key], signed)
    except KeyError:
        raise ParseError(source, el.line, f"<{el.tag}> needs {key}=", el.column) from None
    except ValueError:
        raise ParseError(source, el.line, f"<{el.tag}> {key}= expects a number, found {el.attrs[key]!r}",
                         el.column) from None


def _links(el: _El, source: str) -> int:
    """An <nvlink>'s count: NCCL writes an element only for a peer it has links to, so 0 is damage, not a fact."""
    count = _int(el, "count", source)
    if count < 1:
        raise ParseError(source, el.line, f"<nvlink> count= must be 1 or more (an <nvlink> element stands for "
                                          f"links to its target), found {el.attrs['count']!r}", el.column)
    return count


def _net_speed(el: _El, source: str) -> float | None:
    """A <net>'s speed= (Mb/s) in GB/s. 0, and the -1 some network plugins report (NCCL reads both as "not
    known", graph/topo.cc), is a port whose speed the dumping host could not read: the rate stays unknown, as when
    speed= is left out, never a 0 GB/s NIC the planner would route around. Other negative numbers are damage."""
    if el.attrs.get("speed") == "-1":
        return None
    mbits = _int(el, "speed", source)
    return mbits / 8000.0 if mbits else None


def parse_nccl_xml(text: str, source: str = "<nccl topology>") -> NcclTopo:
    doc = _tree(text, source)
    if not doc.children:
        raise ParseError(source, None, "empty document")
    top = doc.children[0]
    if top.tag == "graphs":
        raise ParseError(source, top.line, "this is an NCCL graph file (ring/tree channels, NCCL_GRAPH_FILE), "
                                           "not a topology (<system>)", top.column)
    if top.tag != "system":
        raise ParseError(source, top.line, f"expected <system> (NCCL topology XML), found <{top.tag}>", top.column)
    cpus: list[XmlCpu] = []
    devices: list[XmlDevice] = []
    bridges: dict[str, str | None] = {}
    bridge_numa: dict[str, int] = {}
    counters = {"gpu": 0, "nic": 0}
    unstated: list[_El] = []
    read = {id(top)}   # the elements with devices read where NCCL reads them (see _DEVICE_TAGS)
    bus_at: dict[str, int] = {}   # bus id -> the line of its <pci>

    def take(el: _El) -> None:
        """Count a <gpu> as read with its <nvlink>s, a <nic> with its <net>s."""
        read.add(id(el))
        read.update(id(x) for x in el.children if x.tag == _READ_INSIDE[el.tag])

    explicit_gpu = {_int(e, "dev", source) for _, e in _walk(top) if e.tag == "gpu" and "dev" in e.attrs}

    def add(kind, el, bus, numa, path, name=None, speed=None, nvlinks=(), index=None, explicit=True, sm=None,
            layer=None, stated=False):
        if index is None:
            index = counters[kind]
            while kind == "gpu" and index in explicit_gpu:
                index += 1
        counters[kind] = max(counters[kind], index) + 1
        devices.append(XmlDevice(kind, index, name or (f"GPU{index}" if kind == "gpu" else bus), bus, numa,
                                 tuple(path), speed, tuple(nvlinks), el.line, explicit, sm, layer, stated))

    def visit(el: _El, numa: int | None, path: list[str]):
        for ch in el.children:
            if ch.tag == "pci":
                read.add(id(ch))
                bus = _pci_id(ch, "busid", source)
                if bus in bus_at:   # one id, two devices: their bridges and NVLinks would be merged
                    raise ParseError(source, ch.line, f"<pci> busid={bus} is given twice (first at line "
                                                      f"{bus_at[bus]})", ch.column)
                bus_at[bus] = ch.line
                cls = _pci_id(ch, "class", source, required=False)
                inner = [c.tag for c in ch.children]
                if inner.count("gpu") > 1:
                    # recent NCCL writes one <gpu mlopart=> per partition of a GPU that CUDA splits (MLOPart,
                    # graph/topo.cc ncclTopoAddGpuSub): CUDA devices on one PCI device, whose NVLinks it shares
                    second = [c for c in ch.children if c.tag == "gpu"][1]
                    raise ParseError(source, second.line, f"a second <gpu> in <pci> busid={bus} (line {ch.line}): "
                                                          "partitions of one GPU (MLOPart, mlopart=) are not read",
                                     second.column)
                if "gpu" in inner or "nic" in inner:
                    for c in ch.children:
                        if c.tag in _READ_INSIDE:
                            take(c)
                        if c.tag == "gpu":
                            nvl = tuple((_pci_id(n, "target", source), _links(n, source),
                                         _pci_id(n, "tclass", source, required=False))
                                        for n in c.children if n.tag == "nvlink")
                            # NCCL reads the NVLinks of a <gpu> without <nvlink> children from NVML at run
                            # time; only a dump of a probed system (vendor/device ids written) states "none"
                            add("gpu", c, bus, numa, path, nvlinks=nvl,
                                index=_int(c, "dev", source) if "dev" in c.attrs else None,
                                sm=_int(c, "sm", source) if "sm" in c.attrs else None,
                                stated=bool(nvl) or "device" in ch.attrs)
                        elif c.tag == "nic":
                            nets = [n for n in c.children if n.tag == "net"] or [None]
                            for net in nets:
                                name = net.attrs.get("name") if net is not None else None
                                speed = (_net_speed(net, source)
                                         if net is not None and "speed" in net.attrs else None)
                                add("nic", net or c, bus, numa, path, name=name, speed=speed,
                                    layer=_link_layer(cls))
                elif (cls.startswith("0x0604") or (not cls and ch.children)
                      or (not cls.startswith(_LEAF_CLASSES) and "pci" in inner)):
                    bridges[bus] = path[-1] if path else None
                    if numa is not None:
                        bridge_numa[bus] = numa
                    visit(ch, numa, path + [bus])
                elif cls.startswith("0x0302") or cls.startswith("0x0300"):
                    add("gpu", ch, bus, numa, path, explicit=False)
                elif cls.startswith("0x0200") or cls.startswith("0x0207"):
                    add("nic", ch, bus, numa, path, explicit=False, layer=_link_layer(cls))
                elif not cls and not ch.children:
                    unstated.append(ch)   # a slot NCCL fills in at run time: what sits there is not stated
                # other devices (NVMe, ...) carry nothing NCCL routes over
            elif ch.tag == "gpu":
                raise ParseError(source, ch.line, "<gpu> outside a <pci> element", ch.column)
            # <nic> straight under <cpu> (no PCI id) is read by the caller; anything else carries no device

    hosts: dict[str, int] = {}   # host_hash -> the line of its first <cpu>
    pciless: dict[str, dict[str, str]] = {}   # name -> attributes of the PCI-less <net>s read
    for c in top.children:
        if c.tag != "cpu":
            continue
        host = c.attrs.get("host_hash", "").lower()
        if hosts and host not in hosts:
            # NCCL with MNNVL fuses the topologies of an NVLink domain's nodes (xml.cc ncclTopoFuseXml) and
            # tells them apart by host_hash only: read as one node, GPUs, NICs and NVLinks would be merged
            first, line = next(iter(hosts.items()))
            raise ParseError(source, c.line, f"<cpu> host_hash={host or '(none)'} is a second node (the first, "
                                             f"{first or '(none)'}, at line {line}): a multi-node (MNNVL) dump; "
                                             "keep one node's <cpu> elements", c.column)
        hosts.setdefault(host, c.line)
        read.add(id(c))
        numa = _int(c, "numaid", source, signed=True)
        cpus.append(XmlCpu(numa, _mask(c.attrs["affinity"], source, c) if "affinity" in c.attrs else (), c.line))
        visit(c, numa, [])
        # NICs NCCL attaches straight to a CPU: it knows no PCI device for them (a socket NIC such as eth0), and
        # puts them under a CPU for its own search, so where they sit is not stated (numa None). NCCL 2.27 writes
        # one under each <cpu>: the same <net> again is the same device, one of its name with other attributes
        # another (refused below).
        for n in c.children:
            if n.tag == "nic":
                take(n)
                for net in (x for x in n.children if x.tag == "net"):
                    name = net.attrs.get("name")
                    if name is not None and pciless.get(name) == net.attrs:
                        continue
                    if name is not None:
                        pciless.setdefault(name, net.attrs)
                    add("nic", net, "", None, [], name=name,
                        speed=_net_speed(net, source) if "speed" in net.attrs else None)
    for parent, el in _walk(top):
        if el.tag in _DEVICE_TAGS:
            if id(el) not in read:
                raise ParseError(source, el.line, f"<{el.tag}> inside <{parent.tag}>: not where NCCL reads it, so "
                                                  "it and what it holds would be left out", el.column)
        elif el.tag in _REFUSED:
            raise ParseError(source, el.line, f"<{el.tag}> inside <{parent.tag}>: {_REFUSED[el.tag]}", el.column)
        elif (parent.tag, el.tag) not in _SKIPPED:
            raise ParseError(source, el.line, f"<{el.tag}> inside <{parent.tag}>: not an element slurmtools knows "
                                              "in an NCCL topology, so what it states would be left out", el.column)
        elif el.tag in ("gin", "rma") and not any(n.tag == "net" and n.attrs.get("name") == el.attrs.get("name")
                                                  for n in parent.children):
            raise ParseError(source, el.line, f"<{el.tag}> name={el.attrs.get('name', '')!r} has no <net> of its "
                                              "name in its <nic>: a network device slurmtools would not count",
                             el.column)
    if not cpus:
        raise ParseError(source, top.line, "<system> has no <cpu> element", top.column)
    seen: dict[tuple[str, int], int] = {}
    for d in devices:
        if (d.kind, d.index) in seen:
            raise ParseError(source, d.line, f"{d.kind} {d.index} appears twice (first at line "
                                             f"{seen[(d.kind, d.index)]})")
        seen[(d.kind, d.index)] = d.line
    named: dict[str, int] = {}   # a NIC is known by its name: two of one name would be read as one
    for d in (x for x in devices if x.kind == "nic"):
        if d.name in named:
            raise ParseError(source, d.line, f"a second NIC named {d.name!r} (first at line {named[d.name]}): "
                                             "give each <net> its own name=")
        named[d.name] = d.line
    return NcclTopo(source, tuple(cpus), tuple(sorted(devices, key=lambda d: (d.kind, d.index))), bridges,
                    bridge_numa, tuple(ch.attrs["busid"].lower() for ch in unstated))


def nvlink_peer(tclass: str) -> str | None:
    """What NCCL takes an NVLink's far end for, by its tclass= (`kvDictPciClass` in graph/topo.cc): "gpu" for a
    display or 3D controller (0x03...), which NCCL links only when that GPU is in the file; "cpu" for 0x068001, the
    GPU's own CPU (POWER9's NVLink to the CPU); "nvswitch" for any other class (0x068000, and what NCCL cannot
    place). None without tclass=: NCCL reads the class on the live node, so only a target among the file's GPUs
    is known to be one."""
    if not tclass:
        return None
    if tclass.startswith("0x03"):
        return "gpu"
    return "cpu" if tclass.startswith("0x068001") else "nvswitch"


def _link_layer(pci_class: str) -> str | None:
    """PCI class 0x0207xx is an InfiniBand controller, 0x0200xx an Ethernet one (RoCE, EFA)."""
    if pci_class.startswith("0x0207"):
        return "ib"
    if pci_class.startswith("0x0200"):
        return "ethernet"
    return None


def _walk(el: _El):
    """(parent, element) for every element below `el`, in document order."""
    for c in el.children:
        yield el, c
        yield from _walk(c)


def add_to(topology, topo: NcclTopo, host: str, gpu_type: str | None = None,
           threads_per_core: int | None = None) -> None:
    """Add the node: NUMA nodes, PCIe bridges as PCIe switches, GPUs and NICs under them, NVLinks (to peer GPUs,
    or to NVSwitches: targets that are not GPUs), and what the file does not state. A GPU implied only by its
    PCI class comes without its `<gpu>` element, so its NVLinks are unknown (NCCL fills them in at run time):
    the host is marked, never given "no NVLink"."""
    from slurmtools.topology import gpu_models
    from slurmtools.topology.cpu_layout import fill_cores

    if f"host:{host}" not in topology:
        topology.add_host(host)
    cpu_vid = {}
    for k, c in enumerate(topo.cpus):   # numaid -1: NCCL could not tell the NUMA node
        known = c.numa >= 0
        cpu_vid[c.numa] = topology.add_cpu(host, c.numa if known else None, cpus=c.cpus,
                                           tag="" if known else f"?{k}")
        if not known:
            topology.mark_unknown(host, "numa_ids")
    if topo.unstated_slots:
        topology.mark_unknown(host, "devices")
    ks = list(cpu_vid.values())
    for i, a in enumerate(ks):
        for b in ks[i + 1:]:
            topology.link_smp(a, b)
    sw_vid: dict[str, str] = {}
    for k, (bus, parent) in enumerate(topo.bridges.items()):
        up = sw_vid[parent] if parent else cpu_vid.get(topo.bridge_numa.get(bus))
        sw_vid[bus] = topology.add_pcie_switch(host, k, bus_id=bus, parent=up)
    sms = {d.sm for d in topo.gpus if d.sm is not None}
    gen = gpu_models.nvlink_generation(gpu_type, sms.pop() if len(sms) == 1 else None)
    nvlink_gbytes = gen.gbytes_per_link if gen else None
    gpu_vid: dict[str, str] = {}
    for d in topo.devices:
        parent = sw_vid[d.bridges[-1]] if d.bridges else cpu_vid.get(d.numa)
        if d.kind == "nic" and not d.bus_id:
            parent = None   # a PCI-less NIC: in the host, near no GPU or CPU the file could state
            topology.mark_unknown(host, "nic_locality")
        if d.kind == "gpu":
            gpu_vid[d.bus_id] = topology.add_gpu(host, d.index, pci_bus_id=d.bus_id or None, gpu_type=gpu_type,
                                                 parent=parent)
        else:
            if d.link_layer is None:
                topology.mark_unknown(host, "nic_link_layer")
            topology.add_nic(host, d.name, rate_gbytes=d.speed_gbytes, link_layer=d.link_layer, parent=parent)
    if topo.gpus and not gpu_type:
        topology.mark_unknown(host, "gpu_model")
    if any(not d.nvlinks_stated for d in topo.gpus):
        topology.mark_unknown(host, "nvlink")
    nvs: dict[str, str] = {}
    # NVLink targets name GPUs by bus id; the same device may be written 0000:07:00.0 or 00000000:07:00.0
    gpu_at = {pci_key(bus) or bus: vid for bus, vid in gpu_vid.items()}
    for d in topo.gpus:
        me = gpu_vid[d.bus_id]
        for target, count, cls in d.nvlinks:
            if nvlink_gbytes is None:
                topology.mark_unknown(host, "nvlink_speed")
            peer_vid = gpu_at.get(pci_key(target) or target)
            if peer_vid == me:
                continue   # a GPU listed as its own NVLink peer (Azure NC A100 v4 VM files): no link to draw
            peer = nvlink_peer(cls)
            if peer == "gpu" or (peer is None and peer_vid):
                if peer_vid is None:
                    # a GPU the file does not list: NCCL dumps the GPUs of its ranks only, with every NVLink of
                    # each, so a job on some of a node's GPUs names the others only here. No NVSwitch stands there.
                    topology.mark_unknown(host, "devices")
                elif me < peer_vid:   # each GPU pair is listed from both ends
                    topology.link_nvlink(me, peer_vid, count, nvlink_gbytes)
            elif peer == "cpu":
                continue   # the GPU's NVLinks to its CPU (POWER9): the graph holds NVLinks between GPUs only
            else:
                if target not in nvs:
                    nvs[target] = topology.add_nvswitch(host, len(nvs))
                topology.link_nvlink(me, nvs[target], count, nvlink_gbytes)
    if nvs:
        topology.add_nvlink_domain(host, list(gpu_vid.values()))
    fill_cores(topology, host, threads_per_core)


def to_topology(topo: NcclTopo, host: str, gpu_type: str | None = None, threads_per_core: int | None = None):
    from slurmtools.topology.graph import Topology

    t = Topology(host)
    add_to(t, topo, host, gpu_type, threads_per_core)
    return t
