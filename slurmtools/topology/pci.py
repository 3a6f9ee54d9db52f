"""PCI bus ids: one device written two ways (NVML's 8-digit domain, the legacy and NCCL's 4-digit one) compares
equal, and devices sort in bus order, which is how NVML and Slurm number a node's GPUs."""

from __future__ import annotations

import re

#: a PCI bus id: domain (8 hex digits from NVML, 4 in the legacy form and NCCL's files), bus, device, function
_PCI_BUS_ID = re.compile(r"([0-9a-fA-F]{4}|[0-9a-fA-F]{8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])")


def pci_key(bus_id: str) -> tuple[int, int, int, int] | None:
    """'00000000:07:00.0' and '0000:07:00.0' are the same device; None for text that is no PCI bus id."""
    m = _PCI_BUS_ID.fullmatch(bus_id)
    return tuple(int(x, 16) for x in m.groups()) if m else None
