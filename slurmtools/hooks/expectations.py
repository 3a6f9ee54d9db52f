"""The node expectations file: what the declared topology graph says each host's links should report.

`slurmtools admin render node-expectations` writes it from the graph (slurmtools/render/node_expectations.py);
the admin installs it as `/etc/slurm/slurmtools-node-expectations.json` (configless nodes too; where else it may
be: `paths()`), root's and not writable by others, and the prolog (and `scripts/node-health`) compare each node
with its own entry (`hooks.drift`). The file is the hand-over between the two sides: the renderer needs networkx,
the prolog must start in milliseconds.

    {"format": "slurmtools.node-expectations/1", "topology": "example",
     "profiles": {"dgx-h100": {"gpus": 8,
                               "gpu": [{"index": 0, "nvlinks": 18, "pcie_gen": null, "pcie_width": null}, ...],
                               "hcas": [{"name": "mlx5_0", "rate_gbytes": null, "width": 4, "speed": "NDR",
                                         "link_layer": "ib", "cabled": true}, ...]}},
     "hosts": {"gpu01": "dgx-h100", ...}}

Hosts share profiles so that a 16k-host file stays small to read at every job start. null means "the graph
does not state it": that fact is not checked, and the check says so. The prolog validates only the top level
and its own host's profile; `parse_all` validates everything (the renderer's tests, an admin's check).
Every error is one line naming the file and the field.
"""

from __future__ import annotations

import os

from slurmtools.errors import ConfigError
from slurmtools.hooks import safefs
from slurmtools.hooks.common import loads

NAME = "slurmtools-node-expectations.json"
FORMAT = "slurmtools.node-expectations/1"
ENV = "SLURMTOOLS_NODE_EXPECTATIONS"
DEFAULT_DIR = "/etc/slurm"
MAX_BYTES = 16 << 20

GPU_KEYS = ("index", "nvlinks", "pcie_gen", "pcie_width")
HCA_KEYS = ("name", "rate_gbytes", "width", "speed", "link_layer", "cabled")
PROFILE_KEYS = ("gpus", "gpu", "hcas")
# the IB speeds of slurmtools.topology.graph.IB_LANE_GBYTES, slowest first (not imported: it needs networkx)
IB_SPEEDS = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")
IB_WIDTHS = (1, 2, 4, 8, 12)
PCIE_WIDTHS = (1, 2, 4, 8, 12, 16, 32)
LINK_LAYERS = ("ib", "ethernet")


class GpuExpect:
    """One GPU as the graph declares it (index as nvidia-smi and NVML number GPUs); None: not stated."""

    __slots__ = ("index", "nvlinks", "pcie_gen", "pcie_width")

    def __init__(self, index: int, nvlinks: int | None = None, pcie_gen: int | None = None,
                 pcie_width: int | None = None):
        self.index = index
        self.nvlinks = nvlinks
        self.pcie_gen = pcie_gen
        self.pcie_width = pcie_width


class HcaExpect:
    """One HCA as the graph declares it: its rate (GB/s per direction), its cable's width and speed, whether it
    is cabled to a switch at all; None: not stated."""

    __slots__ = ("name", "rate_gbytes", "width", "speed", "link_layer", "cabled")

    def __init__(self, name: str, rate_gbytes: float | None = None, width: int | None = None,
                 speed: str | None = None, link_layer: str | None = None, cabled: bool | None = None):
        self.name = name
        self.rate_gbytes = rate_gbytes
        self.width = width
        self.speed = speed
        self.link_layer = link_layer  # "ib" | "ethernet"; None: not stated (width and speed are IB-only facts)
        self.cabled = cabled


class HostExpectations:
    __slots__ = ("host", "profile", "source", "gpus", "gpu", "hcas")

    def __init__(self, host: str, profile: str, source: str, gpus: int | None, gpu: list[GpuExpect],
                 hcas: list[HcaExpect] | None):
        self.host = host
        self.profile = profile
        self.source = source
        self.gpus = gpus          # GPU count; None: the graph has no GPUs for this host (unknown, not "none")
        self.gpu = gpu
        self.hcas = hcas          # None: the graph does not say which HCAs the host has; []: it has none


def paths() -> list[str]:
    """Where this node's file may be, in the order read: $SLURMTOOLS_NODE_EXPECTATIONS alone (a root wrapper's
    choice), else the lab's etc folder alone (SLURMTOOLS_LAB_ETC), else beside slurmd's slurm.conf (SLURM_CONF)
    and then /etc/slurm. Why both: on a configless node slurmd points SLURM_CONF at its config cache
    (`<SlurmdSpoolDir>/conf-cache/slurm.conf`, Slurm 25.11 slurmd.c), which it fills with Slurm's own files
    only, so the admin's /etc/slurm copy must still be found; and slurmd runs HealthCheckProgram with
    SLURMD_NODENAME alone, no SLURM_CONF, so node-health sees /etc/slurm only."""
    env = os.environ.get(ENV)
    if env:
        return [env]
    etc = os.environ.get("SLURMTOOLS_LAB_ETC")
    if etc:
        return [os.path.join(etc, NAME)]
    out = []
    conf = os.environ.get("SLURM_CONF")
    if conf and os.path.isabs(conf):
        out.append(os.path.normpath(os.path.join(os.path.dirname(conf), NAME)))
    default = os.path.join(DEFAULT_DIR, NAME)
    if default not in out:
        out.append(default)
    return out


def path() -> str:
    """The first place `paths()` reads."""
    return paths()[0]


def load(host: str, where: str | None = None) -> HostExpectations | None:
    """`host`'s entry of the root-owned file at `where` (default `path()`), None when the file does not list it.
    Raises FileNotFoundError (no file), safefs.UnsafePath (not root's), ConfigError (malformed)."""
    where = where or path()
    data = safefs.read_trusted(where, MAX_BYTES)
    return parse(data, where, host)


def parse(data: bytes | str, source: str, host: str) -> HostExpectations | None:
    """`host`'s expectations from the file's text; None when the file does not list the host."""
    doc = _document(data, source)
    hosts = doc["hosts"]
    if host not in hosts:
        return None
    return _host(doc, source, host, hosts[host])


def parse_all(data: bytes | str, source: str) -> dict[str, HostExpectations]:
    """Every host's expectations, every profile validated (also those no host uses)."""
    doc = _document(data, source)
    parsed = {name: _profile(doc["profiles"], name, source) for name in doc["profiles"]}
    return {h: _host(doc, source, h, p, parsed) for h, p in doc["hosts"].items()}


# ------------------------------------------------------------------------------------------------ validation

def _document(data: bytes | str, source: str) -> dict:
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConfigError(source, "", f"not UTF-8 text (byte {e.start})") from None
    try:
        doc = loads(data)
    except ValueError as e:
        raise ConfigError(source, "", str(e)) from None
    if not isinstance(doc, dict):
        raise ConfigError(source, "", f"expected a JSON object, found {_kind(doc)}")
    if doc.get("format") != FORMAT:
        raise ConfigError(source, "format", f"expected {FORMAT!r}, found {doc.get('format')!r}")
    for key in ("profiles", "hosts"):
        if not isinstance(doc.get(key), dict):
            raise ConfigError(source, key, f"expected an object, found {_kind(doc.get(key))}")
    return doc


def _host(doc: dict, source: str, host: str, profile: object, parsed: dict | None = None) -> HostExpectations:
    if not isinstance(profile, str):
        raise ConfigError(source, f"hosts.{host}", f"expected a profile name, found {_kind(profile)}")
    if profile not in doc["profiles"]:
        raise ConfigError(source, f"hosts.{host}", f"no profile {profile!r} in profiles")
    gpus, gpu, hcas = parsed[profile] if parsed else _profile(doc["profiles"], profile, source)
    return HostExpectations(host, profile, source, gpus, gpu, hcas)


def _profile(profiles: dict, name: str, source: str) -> tuple[int | None, list[GpuExpect], list[HcaExpect] | None]:
    where = f"profiles.{name}"
    p = profiles[name]
    if not isinstance(p, dict):
        raise ConfigError(source, where, f"expected an object, found {_kind(p)}")
    _no_extra(p, PROFILE_KEYS, source, where)
    gpus = _int(p.get("gpus"), source, f"{where}.gpus", minimum=0)
    gpu = []
    seen: set[int] = set()
    for i, g in enumerate(_list(p.get("gpu"), source, f"{where}.gpu")):
        w = f"{where}.gpu[{i}]"
        if not isinstance(g, dict):
            raise ConfigError(source, w, f"expected an object, found {_kind(g)}")
        _no_extra(g, GPU_KEYS, source, w)
        index = _int(g.get("index"), source, f"{w}.index", minimum=0, required=True)
        if index in seen:
            raise ConfigError(source, f"{w}.index", f"GPU {index} listed twice")
        seen.add(index)
        gpu.append(GpuExpect(index, _int(g.get("nvlinks"), source, f"{w}.nvlinks", minimum=0),
                             _int(g.get("pcie_gen"), source, f"{w}.pcie_gen", minimum=1, maximum=7),
                             _int(g.get("pcie_width"), source, f"{w}.pcie_width", choices=PCIE_WIDTHS)))
    if gpus is not None and any(g.index >= gpus for g in gpu):
        raise ConfigError(source, f"{where}.gpu", f"GPU index {max(g.index for g in gpu)} but gpus = {gpus}")
    hcas: list[HcaExpect] | None = None if p.get("hcas") is None else []
    names: set[str] = set()
    for i, h in enumerate(_list(p.get("hcas"), source, f"{where}.hcas")):
        w = f"{where}.hcas[{i}]"
        if not isinstance(h, dict):
            raise ConfigError(source, w, f"expected an object, found {_kind(h)}")
        _no_extra(h, HCA_KEYS, source, w)
        hname = h.get("name")
        if not isinstance(hname, str) or not hname or "/" in hname or hname in (".", "..") or "\0" in hname:
            raise ConfigError(source, f"{w}.name", f"expected an HCA name like 'mlx5_0', found {hname!r}")
        if hname in names:
            raise ConfigError(source, f"{w}.name", f"HCA {hname} listed twice")
        names.add(hname)
        rate = h.get("rate_gbytes")
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0):
            raise ConfigError(source, f"{w}.rate_gbytes", f"expected GB/s above 0 or null, found {rate!r}")
        speed = h.get("speed")
        if speed is not None and speed not in IB_SPEEDS:
            raise ConfigError(source, f"{w}.speed", f"expected one of {', '.join(IB_SPEEDS)} or null, found {speed!r}")
        layer = h.get("link_layer")
        if layer is not None and layer not in LINK_LAYERS:
            raise ConfigError(source, f"{w}.link_layer", f"expected one of {', '.join(LINK_LAYERS)} or null, "
                                                          f"found {layer!r}")
        cabled = h.get("cabled")
        if cabled is not None and not isinstance(cabled, bool):
            raise ConfigError(source, f"{w}.cabled", f"expected true, false or null, found {cabled!r}")
        hcas.append(HcaExpect(hname, float(rate) if rate is not None else None,
                              _int(h.get("width"), source, f"{w}.width", choices=IB_WIDTHS), speed, layer, cabled))
    return gpus, gpu, hcas


def _no_extra(d: dict, allowed: tuple[str, ...], source: str, where: str) -> None:
    extra = [k for k in d if k not in allowed]
    if extra:
        raise ConfigError(source, f"{where}.{extra[0]}", f"unknown field (known: {', '.join(allowed)})")


def _list(v: object, source: str, where: str) -> list:
    if v is None:
        return []
    if not isinstance(v, list):
        raise ConfigError(source, where, f"expected a list, found {_kind(v)}")
    return v


def _int(v: object, source: str, where: str, minimum: int | None = None, maximum: int | None = None,
         choices: tuple[int, ...] | None = None, required: bool = False) -> int | None:
    if v is None:
        if required:
            raise ConfigError(source, where, "missing")
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(source, where, f"expected a whole number{'' if required else ' or null'}, found {v!r}")
    if choices is not None and v not in choices:
        raise ConfigError(source, where, f"expected one of {', '.join(map(str, choices))}, found {v}")
    if minimum is not None and v < minimum:
        raise ConfigError(source, where, f"expected {minimum} or more, found {v}")
    if maximum is not None and v > maximum:
        raise ConfigError(source, where, f"expected {maximum} or less, found {v}")
    return v


def _kind(v: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(v), "a number" if isinstance(v, (int, float)) else type(v).__name__)
