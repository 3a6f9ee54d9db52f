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


def document(etc: str) -> dict | None:
    """The fault file of the lab etc folder `etc`, or None when absent, not root's, or not a JSON object."""
    try:
        doc = loads(safefs.read_trusted(os.path.join(etc, FAKE_NAME), 1 << 20).decode("utf-8"))
    except (OSError, safefs.UnsafePath, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def node_spec(etc: str, node: str | None) -> dict | None:
    """What the fault file says about `node` ({"count": 8, ...}), or None when there is no usable file. Read it
    once per check and hand the spec to every reader (GPU health, links)."""
    doc = document(etc)
    if doc is None:
        return None
    spec = (doc.get("nodes") or {}).get(node or "", doc.get("default", {"count": 8}))
    return spec if isinstance(spec, dict) else None


def gpu_faults(spec: dict, index: int) -> dict:
    f = (spec.get("faults") or {}).get(str(index), {})
    return f if isinstance(f, dict) else {}
