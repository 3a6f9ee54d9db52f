"""The Slurm lab's fake node: what its GPUs and links report, from one root-owned file in the lab's etc folder.

The lab has no GPUs, no NVML and no HCAs, so the lab wrapper names its etc folder (SLURMTOOLS_LAB_ETC) and the
hooks read `slurmtools-fake-gpu-health.json` there instead of asking the hardware. The file counts only when it
and every folder above it are root's and not writable by group or others (`safefs.read_trusted`), so no job user
can make a node look sick or healthy. Format:

    {"nodes": {"gpu03": {"count": 8,
                         "faults": {"5": {"ecc_uncorrected": 2, "nvlinks_up": 12, "pcie_width": 8}},
                         "links": {"nvlinks": 18, "pcie_gen": 5, "pcie_width": 16, "pstate": 0},
                         "sysfs_root": "/lab/fake-sys"}},
     "default": {"count": 8}}

Nodes not named get "default" (else 8 healthy GPUs). `faults` are per GPU index (health: ecc_uncorrected,
retired_pages_pending, remap_pending, remap_failure, lost; links: nvlinks_up, pcie_gen, pcie_width, pstate);
`links` is what every GPU's links report unless a fault says otherwise (absent: link state unknown, not checked);
`sysfs_root` is a root-owned folder holding a fake `sys/class/infiniband` tree for the HCA reader (absent: HCAs
not checked). Energy (`hooks.energy.read_fake`): `"power_w": 300` on a node makes each of its GPUs draw that fixed
power, so its energy counter reads power x time (mJ); a GPU's faults may set its own `power_w` or
`"energy": "unsupported"` (a GPU without the counter); a node without `power_w` has no counters.
"""

from __future__ import annotations

import os

from slurmtools.hooks import safefs
from slurmtools.hooks.common import loads

FAKE_NAME = "slurmtools-fake-gpu-health.json"


def fake_path() -> tuple[str, str] | None:
    """(etc folder, file name) of the lab's fault file when the lab wrapper named an etc folder."""
    etc = os.environ.get("SLURMTOOLS_LAB_ETC")
    return (etc, FAKE_NAME) if etc else None


def read(etc: str) -> tuple[dict | None, str]:
    """(the fault file of the lab etc folder `etc`, "") or (None, why it is not used: absent, not root's, or one
    line naming the file and the field that is wrong). The whole file is checked, so every node reads the same
    answer from it, and no reader meets a type it does not expect (a list for `nodes`, a string for a fault
    crashed the health check, and the node was kept without a word about the file)."""
    from slurmtools.errors import ConfigError, one_line

    where = os.path.join(etc, FAKE_NAME)
    try:
        raw = safefs.read_trusted(where, 1 << 20)
    except FileNotFoundError:
        return None, f"no {where}"
    except (OSError, safefs.UnsafePath) as e:
        return None, f"refused: {e}"
    try:
        try:
            doc = loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise ConfigError(where, "", str(e)) from None
        _check(doc, where)
    except ConfigError as e:
        return None, f"refused: {one_line(str(e))}"
    return doc, ""


def document(etc: str) -> dict | None:
    """The fault file of the lab etc folder `etc`, or None when it is not used (`read` says why)."""
    return read(etc)[0]


def node_spec_why(etc: str, node: str | None) -> tuple[dict | None, str]:
    """(what the fault file says about `node`, {"count": 8, ...}; "") or (None, why there is no usable file).
    Read it once per check and hand the spec to every reader (GPU health, links)."""
    doc, why = read(etc)
    if doc is None:
        return None, why
    nodes = doc.get("nodes") or {}
    return (nodes[node] if node in nodes else doc.get("default", {"count": 8})), ""


def node_spec(etc: str, node: str | None) -> dict | None:
    """What the fault file says about `node`, or None when there is no usable file."""
    return node_spec_why(etc, node)[0]


#: what a node's entry may hold: name -> (what it must be, its check)
MAX_GPUS = 1024
_COUNT = ("a whole number from 0 to 1024", lambda v: _whole(v) and v <= MAX_GPUS)
_WHOLE = ("a whole number of 0 or more", lambda v: _whole(v))
_WHOLE_OR_NULL = ("a whole number of 0 or more, or null", lambda v: v is None or _whole(v))
_FLAG = ("true or false", lambda v: isinstance(v, bool))
_WATTS = ("watts, a number of 0 or more", lambda v: _number(v) and v >= 0)
_FAULT_KEYS = {"ecc_uncorrected": _WHOLE, "retired_pages_pending": _FLAG, "remap_pending": _FLAG,
               "remap_failure": _FLAG, "lost": _FLAG, "nvlinks_up": _WHOLE, "pcie_gen": _WHOLE, "pcie_width": _WHOLE,
               "pstate": _WHOLE, "power_w": _WATTS, "energy": ('"unsupported"', lambda v: v == "unsupported")}
_LINK_KEYS = {"nvlinks": _WHOLE_OR_NULL, "pcie_gen": _WHOLE_OR_NULL, "pcie_width": _WHOLE_OR_NULL,
              "pstate": _WHOLE_OR_NULL}


def _whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def _check(doc: object, where: str) -> None:
    """ConfigError naming the first field of the fault file that is not of the format in this module's doc."""
    from slurmtools.errors import ConfigError

    if not isinstance(doc, dict):
        raise ConfigError(where, "", f"expected a JSON object, found {_kind(doc)}")
    _known(doc, ("nodes", "default"), where, "")
    nodes = doc.get("nodes", {})
    if not isinstance(nodes, dict):
        raise ConfigError(where, "nodes", f"expected an object of node names, found {_kind(nodes)}")
    for name, spec in nodes.items():
        _spec(spec, where, f"nodes.{name}")
    if "default" in doc:
        _spec(doc["default"], where, "default")


def _spec(spec: object, where: str, field: str) -> None:
    from slurmtools.errors import ConfigError

    if not isinstance(spec, dict):
        raise ConfigError(where, field, f"expected an object, found {_kind(spec)}")
    _known(spec, ("count", "faults", "links", "sysfs_root", "power_w"), where, field)
    _value(spec, "count", _COUNT, where, field)
    _value(spec, "power_w", _WATTS, where, field)
    root = spec.get("sysfs_root")
    if "sysfs_root" in spec and not (isinstance(root, str) and os.path.isabs(root)):
        raise ConfigError(where, f"{field}.sysfs_root", f"expected an absolute folder, found {_kind(root)} {root!r}")
    links = spec.get("links")
    if "links" in spec:
        if not isinstance(links, dict):
            raise ConfigError(where, f"{field}.links", f"expected an object, found {_kind(links)}")
        _known(links, tuple(_LINK_KEYS), where, f"{field}.links")
        for k, rule in _LINK_KEYS.items():
            _value(links, k, rule, where, f"{field}.links")
    faults = spec.get("faults", {})
    if not isinstance(faults, dict):
        raise ConfigError(where, f"{field}.faults", f"expected an object of GPU indices, found {_kind(faults)}")
    count = spec.get("count", 8)
    for index, f in faults.items():
        w = f"{field}.faults.{index}"
        if not (index.isascii() and index.isdigit() and len(index) < 5 and int(index) < count):
            raise ConfigError(where, w, f"expected a GPU index below the node's count ({count})")
        if not isinstance(f, dict):
            raise ConfigError(where, w, f"expected an object of faults, found {_kind(f)}")
        _known(f, tuple(_FAULT_KEYS), where, w)
        for k, rule in _FAULT_KEYS.items():
            _value(f, k, rule, where, w)


def _value(d: dict, key: str, rule: tuple, where: str, field: str) -> None:
    from slurmtools.errors import ConfigError

    what, ok = rule
    if key in d and not ok(d[key]):
        raise ConfigError(where, f"{field}.{key}", f"expected {what}, found {_kind(d[key])} {d[key]!r}"[:200])


def _known(d: dict, keys: tuple[str, ...], where: str, field: str) -> None:
    from slurmtools.errors import ConfigError

    for k in d:
        if k not in keys:
            raise ConfigError(where, f"{field}.{k}" if field else k, f"unknown field (known: {', '.join(keys)})")


def _kind(v: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(v), "a number" if isinstance(v, (int, float)) else type(v).__name__)


def gpu_faults(spec: dict, index: int) -> dict:
    f = (spec.get("faults") or {}).get(str(index), {})
    return f if isinstance(f, dict) else {}
