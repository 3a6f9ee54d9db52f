"""The site's declared fabric (`topology/*.toml`): node types, leaf and spine switches, hosts.

Used where discovery cannot run, and as the source of the lab's slurm.conf node lines, gres.conf and
topology.conf. Pure: reading the TOML is the only I/O.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from slurmtools.errors import ConfigError
from slurmtools.hostlist import expand
from slurmtools.site.tomlread import Bound, Table, each, load_toml, shown


def link_gbytes(link: str) -> float:
    """'4xNDR' -> 50.0 GB/s. The graph's own reading (`links.ib_link`), so the file accepts no link (0xNDR, 3xNDR,
    a width in other digits) that building the topology from it then refuses with a traceback."""
    from slurmtools.topology.links import ib_link

    return ib_link(link).gbytes


@dataclass(frozen=True)
class NodeType:
    name: str
    gpu_type: str  # "" for a CPU-only node type (gpus = 0)
    gpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_mb: int
    nvlink: str  # "nvswitch" | "none"
    nvlinks_per_gpu: int
    nics: tuple[str, ...]
    pcie_switches: int
    features: tuple[str, ...]
    capture: Path | None = None
    nvswitches: int = 1  # NVSwitch chips on the board (H100 HGX: 4); GPU links are spread over them
    #: cores per GPU kept for GPU jobs (Slurm's RestrictedCoresPerGPU, 24.05+); 0 = none kept
    restricted_cores_per_gpu: int = 0
    #: NVLink GB/s per link and direction: stated in the file, or from the GPU model (`gpu_models`)
    nvlink_gbytes_per_link: float | None = None

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core

    def gpu_socket(self, gpu: int) -> int:
        """GPUs are spread evenly over the sockets in index order (GPU 0-3 on socket 0 for 8 GPUs, 2 sockets)."""
        return gpu * self.sockets // self.gpus

    def gpu_cores(self, gpu: int) -> range:
        """Core ids local to a GPU: the cores of its socket."""
        s = self.gpu_socket(gpu)
        per = self.cores_per_socket * self.threads_per_core
        return range(s * per, (s + 1) * per)

    def gpu_pcie_switch(self, gpu: int) -> int:
        return gpu * self.pcie_switches // self.gpus if self.pcie_switches else 0

    def nearest_nics(self, gpu: int) -> tuple[str, ...]:
        """HCAs on the GPU's PCIe switch (rail-optimised boards have one per GPU)."""
        if not self.nics or not self.gpus:
            return ()
        if len(self.nics) >= self.gpus:
            per = len(self.nics) // self.gpus
            return self.nics[gpu * per:(gpu + 1) * per]
        sw = self.gpu_pcie_switch(gpu)
        return tuple(n for i, n in enumerate(self.nics)
                     if i * self.pcie_switches // len(self.nics) == sw) or (self.nics[0],)


@dataclass(frozen=True)
class Leaf:
    name: str
    hosts: tuple[str, ...]
    node_type: str
    rack: str | None = None


@dataclass(frozen=True)
class RailLeaf:
    """Rail-optimised cabling: NICs `nics` of every host under `leaf` go to this switch instead of to `leaf`.
    The hosts stay under `leaf` for scheduling; a spine may list a rail leaf like any leaf."""
    name: str
    leaf: str
    nics: tuple[str, ...]


@dataclass(frozen=True)
class Spine:
    name: str
    leaves: tuple[str, ...]
    uplinks_per_leaf: int | None


@dataclass(frozen=True)
class Fabric:
    name: str
    source: Path
    link: str
    node_types: dict[str, NodeType]
    leaves: dict[str, Leaf]
    spines: dict[str, Spine]
    racks: dict[str, tuple[str, ...]] = field(default_factory=dict)  # rack -> hosts ([[racks]])
    nvlink_domains: dict[str, tuple[str, ...]] = field(default_factory=dict)  # multi-node NVLink domain -> hosts
    rail_leaves: dict[str, RailLeaf] = field(default_factory=dict)  # [[rail_leaves]]

    def nic_leaf(self, leaf: str, nic: str) -> str:
        """The switch NIC `nic` of a host under `leaf` is cabled to (the leaf itself unless a rail leaf took it)."""
        for r in self.rail_leaves.values():
            if r.leaf == leaf and nic in r.nics:
                return r.name
        return leaf

    def rack_of_host(self, host: str) -> str | None:
        """The first [[racks]] entry listing the host, else the rack of the first leaf holding it."""
        by_rack = self._index["rack"]
        if host in by_rack:
            return by_rack[host]
        leaf = self._index["leaf"].get(host)
        return leaf.rack if leaf is not None else None

    def rack_of_leaf(self, leaf: str) -> str | None:
        return self.leaves[leaf].rack

    def nvlink_domain_of_host(self) -> dict[str, str]:
        return {h: d for d, hosts in self.nvlink_domains.items() for h in hosts}

    @property
    def hosts(self) -> list[str]:
        return [h for leaf in self.leaves.values() for h in leaf.hosts]

    def node_type_of(self, host: str) -> NodeType:
        return self.node_types[self.leaf_of(host).node_type]

    def leaf_of(self, host: str) -> Leaf:
        """The first leaf whose hosts list the host (KeyError when none does)."""
        return self._index["leaf"][host]

    @cached_property
    def _index(self) -> dict[str, dict]:
        """host -> first leaf holding it, and host -> first [[racks]] entry listing it, built once: sites ask
        these per host, and a linear scan per host is quadratic on a 16k-host fabric."""
        leaf: dict[str, Leaf] = {}
        for lf in self.leaves.values():
            for h in lf.hosts:
                leaf.setdefault(h, lf)
        rack: dict[str, str] = {}
        for r, hosts in self.racks.items():
            for h in hosts:
                rack.setdefault(h, r)
        return {"leaf": leaf, "rack": rack}


#: Upper limits of the node type's integers, from what Slurm takes for the NodeName values they render into (Slurm
#: 25.11.7 source; 22.05's is not in the project, not re-read). Past them Slurm wraps or resets the value, with a log
#: line at most.
#: Sockets=, CoresPerSocket=, ThreadsPerCore= and the CPUs= Slurm derives from them are uint16 (S_P_UINT16 in
#: _parse_nodename, src/common/read_config.c; s_p_handle_uint16, src/common/parse_value.c refuses > 65535), and
#: 0xfffe/0xffff are NO_VAL16/INFINITE16 (slurm/slurm.h). The CPU count is computed as
#: `n->cpus = n->tot_sockets * n->cores * n->threads` into that uint16, which wraps silently, so the product is bound.
CPUS_MAX = 0xFFFD
#: RealMemory= is a uint64 of MB (S_P_UINT64), but Slurm's memory values carry MEM_PER_CPU (0x8000000000000000,
#: slurm/slurm.h) in their top bit, so a node's memory must stay below it for --mem to ask for all of it.
MEMORY_MB_MAX = 2**63 - 1
#: Gres=gpu:TYPE:N with File= devices (as gres.conf renders them) is a bitmap of at most MAX_GRES_BITMAP = 1024
#: (src/interfaces/gres.c): a larger count is reset to 1024 with only an error in slurmd's log.
GPUS_MAX = 1024
#: not Slurm values: PCIe switches, NVSwitch chips and NVLinks per GPU of one board are built into the topology
#: graph one vertex or link at a time per host, so a typo of 10**9 would hang the planner; no board comes near
#: 1024 (an HGX H100 has 4 PCIe switches, 4 NVSwitches, 18 NVLinks per GPU).
BOARD_PARTS_MAX = 1024
#: not Slurm values either. NVLink GB/s per link and direction: ten times the fastest generation slurmtools knows
#: (NVLink 5, 50 GB/s; gpu_models.NVLINK), room for generations to come; a larger figure is per GPU or in another
#: unit, and near 1e308 the planner's bandwidths became inf ("Infinity" in `plan --json`, not JSON)
NVLINK_GBYTES_MAX = 500.0
#: uplinks from one leaf to one spine are ports of one switch; no switch has more than 1024 (a director chassis
#: such as NVIDIA's CS8500 has 800), and past it `topo show` printed 2e+36 GB/s uplinks
SWITCH_PORTS_MAX = 1024


#: a name the fabric gives Slurm (switch, feature, GPU type, NIC) or that becomes one (a leaf is a node feature):
#: what topology.conf, Feature= and Gres= take as one word; a blank, comma or colon would split it there
SLURM_WORD = re.compile(r"[A-Za-z0-9_.-]{1,255}")
SLURM_WORD_RULE = "expected a name of letters, digits, '_', '.' or '-' (what Slurm's config takes as one word)"


def _word(t: Table, key: str, value: str) -> str:
    """`value` of `key` when it is a SLURM_WORD; else the error naming the key."""
    if not SLURM_WORD.fullmatch(value):
        raise t.error(key, f"{SLURM_WORD_RULE}, got {shown(value)}")
    return value


def _at_most(t: Table, key: str, value: int, limit: int, why: str) -> None:
    if value > limit:
        raise t.error(key, f"{value} is more than {why} ({limit})")


_LOADED: dict[tuple[str, bytes], Fabric] = {}


def load_fabric(path: str | Path) -> Fabric:
    """The fabric file at `path`, parsed once per process for the same bytes (the file names its node types'
    captures by path and does not read them): loading the site checks its fabric and the planner then reads it
    again, which on a 16k-host fabric is a tenth of a second each."""
    try:   # realpath, not Path.resolve(): that raises RuntimeError on a symlink loop (Python 3.11)
        key = (os.path.realpath(path), Path(path).read_bytes())
    except OSError:
        return _load_fabric(path)   # says what is wrong with the path
    got = _LOADED.get(key)
    if got is None:
        if len(_LOADED) >= 8:
            _LOADED.clear()
        got = _LOADED[key] = _load_fabric(path)
    return got


def _load_fabric(path: str | Path) -> Fabric:
    p = Path(path)
    src = str(p)
    root = Table(src, load_toml(p))
    f = root.table("fabric")
    name = f.str("name")
    link = f.str("link")   # stated, never assumed: the health check drains nodes whose HCAs run below it
    try:
        link_gbytes(link)
    except ValueError as exc:
        raise f.error("link", str(exc)) from None
    f.check_unknown()

    def node_type(n: str, t: Table) -> NodeType:
        if not SLURM_WORD.fullmatch(n):
            raise ConfigError(src, t.path, SLURM_WORD_RULE)
        cap = t.str("capture", None)
        gpus = t.int("gpus", minimum=0)
        # a CPU-only host (gpus = 0) names no GPU type; one with GPUs must
        gpu_type = _word(t, "gpu_type", t.str("gpu_type")) if gpus else t.str("gpu_type", "")
        if not gpus and gpu_type:
            raise t.error("gpu_type", f"node type {n} has no GPUs (gpus = 0): leave gpu_type out")
        for key in ("nics", "features"):
            for w in t.str_list(key, ()):
                _word(t, key, w)
        nt = NodeType(
            name=n, gpu_type=gpu_type, gpus=gpus, sockets=t.int("sockets", 1, minimum=1),
            cores_per_socket=t.int("cores_per_socket", minimum=1), threads_per_core=t.int("threads_per_core", 1, minimum=1),
            memory_mb=t.int("memory_mb", minimum=1), nvlink=t.str("nvlink", "none", choices=("nvswitch", "none")),
            nvlinks_per_gpu=t.int("nvlinks_per_gpu", 0, minimum=0), nics=t.str_list("nics", ()),
            pcie_switches=t.int("pcie_switches", 0, minimum=0), features=t.str_list("features", ()),
            capture=Path(os.path.realpath(p.parent / cap)) if cap else None,
            nvswitches=t.int("nvswitches", 1, minimum=1),
            restricted_cores_per_gpu=t.int("restricted_cores_per_gpu", 0, minimum=0))
        _at_most(t, "gpus", nt.gpus, GPUS_MAX, "Slurm's GPUs per node hold (MAX_GRES_BITMAP)")
        for key in ("sockets", "cores_per_socket", "threads_per_core"):
            _at_most(t, key, getattr(nt, key), CPUS_MAX, "Slurm's CPUs per node hold (uint16)")
        if nt.cpus > CPUS_MAX:
            raise t.error("cores_per_socket", f"{nt.sockets} sockets x {nt.cores_per_socket} cores x "
                                              f"{nt.threads_per_core} threads = {nt.cpus} CPUs is more than Slurm's "
                                              f"CPUs per node hold (uint16: {CPUS_MAX})")
        _at_most(t, "memory_mb", nt.memory_mb, MEMORY_MB_MAX, "Slurm's RealMemory holds (below MEM_PER_CPU)")
        for key in ("pcie_switches", "nvswitches", "nvlinks_per_gpu"):
            _at_most(t, key, getattr(nt, key), BOARD_PARTS_MAX, "one board holds")
        if nt.gpus and nt.restricted_cores_per_gpu * nt.gpus > nt.sockets * nt.cores_per_socket:
            raise t.error("restricted_cores_per_gpu", f"{nt.restricted_cores_per_gpu} x {nt.gpus} GPUs is more than "
                                                      f"the node's {nt.sockets * nt.cores_per_socket} cores")
        if not nt.gpus:
            for key, bad in (("nvlink", nt.nvlink != "none"), ("nvlinks_per_gpu", nt.nvlinks_per_gpu),
                             ("restricted_cores_per_gpu", nt.restricted_cores_per_gpu)):
                if bad:
                    raise t.error(key, f"node type {n} has no GPUs (gpus = 0): leave {key} out")
        if nt.nvlink == "nvswitch" and nt.nvlinks_per_gpu == 0:
            raise t.error("nvlinks_per_gpu", "an NVSwitch node type needs nvlinks_per_gpu > 0")
        stated = t.float("nvlink_gbytes_per_link", None,
                         maximum=Bound(NVLINK_GBYTES_MAX, "ten times NVLink 5's 50 GB/s per link and direction"))
        if stated is not None and stated <= 0:   # said as what it is, not as an unknown GPU type's speed
            raise t.error("nvlink_gbytes_per_link", f"expected GB/s per link and direction above 0, got {stated:g}")
        if nt.nvlink == "nvswitch":
            from slurmtools.topology.gpu_models import nvlink_generation

            gen = nvlink_generation(nt.gpu_type)
            speed = stated if stated is not None else (gen.gbytes_per_link if gen else None)
            if speed is None:
                raise t.error("nvlink_gbytes_per_link", f"NVLink speed of GPU type {nt.gpu_type!r} is not known to "
                                                        "slurmtools: state GB/s per link and direction (e.g. 25 "
                                                        "for NVLink 3/4, 50 for NVLink 5)")
            nt = replace(nt, nvlink_gbytes_per_link=speed)
        elif stated is not None:
            raise t.error("nvlink_gbytes_per_link", f"node type {n} has no NVLink (nvlink = \"none\"): leave it out")
        return nt

    node_types = each(root.tables("node_types"), node_type)
    leaves: dict[str, Leaf] = {}
    seen: dict[str, str] = {}
    for t in root.table_list("leaves"):
        lname = _word(t, "name", t.str("name"))
        hosts = _hosts(t)
        nt = t.str("node_type")
        if nt not in node_types:
            raise t.error("node_type", f"unknown node type {nt!r} (known: {', '.join(node_types)})")
        for h in hosts:
            if h in seen:
                raise t.error("hosts", f"host {h} is already under leaf {seen[h]}")
            seen[h] = lname
        if lname in leaves:
            raise t.error("name", f"duplicate leaf name {lname!r}")
        rack = t.str("rack", None)
        leaves[lname] = Leaf(lname, hosts, nt, None if rack is None else _word(t, "rack", rack))
        t.check_unknown()
    rails: dict[str, RailLeaf] = {}
    taken: dict[tuple[str, str], str] = {}  # (leaf, nic) -> rail leaf that took it
    for t in root.table_list("rail_leaves", []):
        rname = _word(t, "name", t.str("name"))
        of = t.str("leaf")
        if of not in leaves:
            raise t.error("leaf", f"unknown leaf {of!r}")
        if rname in leaves or rname in rails:
            raise t.error("name", f"duplicate leaf name {rname!r}")
        nics = t.str_list("nics", nonempty="name the NICs cabled to this rail leaf")
        known_nics = node_types[leaves[of].node_type].nics
        for n in nics:
            if n not in known_nics:
                raise t.error("nics", f"{n!r} is not a NIC of node type {leaves[of].node_type} "
                                      f"(NICs: {', '.join(known_nics) or 'none'})")
            if (of, n) in taken:
                raise t.error("nics", f"{n} of {of}'s hosts is already cabled to {taken[(of, n)]}")
            taken[(of, n)] = rname
        rails[rname] = RailLeaf(rname, of, nics)
        t.check_unknown()
    spines: dict[str, Spine] = {}
    for t in root.table_list("spines", []):
        sname = _word(t, "name", t.str("name"))
        if sname in leaves or sname in rails:   # one switch namespace: topology.conf has one SwitchName= each
            raise t.error("name", f"{sname!r} is already the name of a leaf")
        if sname in spines:
            raise t.error("name", f"duplicate spine name {sname!r}")
        ls = t.str_list("leaves", nonempty="name the leaves under this spine")
        for x in ls:
            if x not in leaves and x not in rails:
                raise t.error("leaves", f"unknown leaf {x!r}")
        spines[sname] = Spine(sname, ls, t.int("uplinks_per_leaf", None, minimum=1,
                                               maximum=Bound(SWITCH_PORTS_MAX, "the ports of one switch")))
        t.check_unknown()
    racks = _host_groups(root, "racks", seen)
    domains = _host_groups(root, "nvlink_domains", seen)
    root.check_unknown()
    return Fabric(name=name, source=p, link=link, node_types=node_types, leaves=leaves, spines=spines,
                  racks=racks, nvlink_domains=domains, rail_leaves=rails)


def _host_groups(root: Table, key: str, known: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """`[[racks]]` / `[[nvlink_domains]]`: named groups of declared hosts, each host in at most one group."""
    out: dict[str, tuple[str, ...]] = {}
    owner: dict[str, str] = {}
    for t in root.table_list(key, []):
        gname = _word(t, "name", t.str("name"))
        hosts = _hosts(t)
        for h in hosts:
            if h not in known:
                raise t.error("hosts", f"host {h} is not under any leaf")
            if h in owner:
                raise t.error("hosts", f"host {h} is already in {owner[h]}")
            owner[h] = gname
        if gname in out:
            raise t.error("name", f"duplicate name {gname!r}")
        out[gname] = hosts
        t.check_unknown()
    return out


def _hosts(t: Table) -> tuple[str, ...]:
    """`hosts`: a hostlist of at least one host, each a name Slurm's NodeName= takes as one word (the hostlist
    library passes "gpu 01"); an empty one would declare a switch or group of nothing."""
    expr = t.str("hosts")
    try:
        hosts = tuple(expand(expr))
    except ValueError:
        hosts = ()
    if not hosts:
        raise t.error("hosts", f'expected a Slurm hostlist like "gpu[01-04]", got {shown(expr)}')
    for h in hosts:
        if not SLURM_WORD.fullmatch(h):
            raise t.error("hosts", f"host {shown(h)}: {SLURM_WORD_RULE}")
    return hosts
