"""What a GPU's model tells about it: its NVLink generation and per-link speed, and the gres Type Slurm gives it.

Providers call this when a capture names the model (NVML, `nvidia-smi nvlink -s`) or states the compute capability
(NCCL XML `sm=`), or when the admin passes `--gpu-type`. A model not listed here stays unknown: no speed is
assumed. Speeds are the nominal data rate per link and direction of each NVLink generation (NVIDIA's product
briefs: 4 links x 20 = 80 GB/s for P100, 6 x 25 for V100, 12 x 25 for A100, 18 x 25 for H100/H200, 18 x 50 for
B200/GB200); `nvidia-smi nvlink -s` prints the signalling rate, slightly higher (25.781 for V100, 26.562 for H100).
Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class NvlinkGeneration:
    generation: int
    gbytes_per_link: float   # per direction


NVLINK = {1: NvlinkGeneration(1, 20.0), 2: NvlinkGeneration(2, 25.0), 3: NvlinkGeneration(3, 25.0),
          4: NvlinkGeneration(4, 25.0), 5: NvlinkGeneration(5, 50.0)}

# Data-centre GPU families by the model word in their marketing name, and the NVLink generation of their SXM /
# NVLink-bridge parts. Checked in order; the first match wins (GH200 before H200, H200 before H20).
_FAMILIES: tuple[tuple[str, int | None], ...] = (
    (r"\bGB300\b|\bB300\b", 5), (r"\bGB200\b|\bB200\b|\bB100\b", 5),
    (r"\bGH200\b", 4), (r"\bH200\b", 4), (r"\bH100\b", 4), (r"\bH800\b", 4), (r"\bH20\b", 4),
    (r"\bA100\b", 3), (r"\bA800\b", 3), (r"\bA30\b", 3),
    (r"\bV100[A-Z]?\b", 2), (r"\bP100\b", 1),
    # no NVLink at all: PCIe-only parts
    (r"\bP40\b|\bP4\b|\bT4\b|\bL4\b|\bL40S?\b|\bA10G?\b|\bA2\b|\bA16\b|\bRTX [45]0[89]0\b|\bRTX 4000\b", None),
)
# compute capability (NCCL XML sm=) -> NVLink generation, where one number means one generation. sm 86 (GA10x
# with NVLink bridges at a lower per-link speed) and 89 (Ada, no NVLink) are left out on purpose.
_SM_GENERATION = {60: 1, 70: 2, 80: 3, 90: 4, 100: 5, 103: 5}


def slurm_type(name: str) -> str:
    """The gres Type Slurm's own NVML AutoDetect gives a GPU of this NVML name: lower case, spaces to '_'
    (`gpu_common_underscorify_tolower`), so a rendered gres.conf matches what AutoDetect would find."""
    return name.strip().replace(" ", "_").lower()


def nvlink_generation(name: str | None = None, sm: int | None = None) -> NvlinkGeneration | None:
    """The NVLink generation of a GPU known by its model name or compute capability; None when unknown or when
    the model has no NVLink."""
    if name:
        up = name.upper()
        for pattern, gen in _FAMILIES:
            if re.search(pattern, up):
                return NVLINK[gen] if gen else None
    if sm is not None and sm in _SM_GENERATION:
        return NVLINK[_SM_GENERATION[sm]]
    return None
