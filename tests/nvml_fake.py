"""The one NVML-shaped fake `pynvml` of the test suite (no GPU in CI): topology capture, GPU health, link state.

`fake_nvml(gpus, ancestor)` returns a module with the nvidia-ml-py function names the code calls, and the real
module's error behaviour: its `NVMLError` class (with the per-code subclasses, e.g. `NVMLError_NotSupported`,
`NVMLError_GpuIsLost`, and their messages) and its `NVML_*` constants, taken from the installed nvidia-ml-py.
Tests inject it where the code imports pynvml (`monkeypatch.setitem(sys.modules, "pynvml", nv)`) or hand it to a
reader that takes the module. A GPU is a dict; handles are indices:

- topology: name, bus, numa (CPU-side node, or a list), gpu_numa (the GPU memory's own node), cpus, links {link: (remote bus, "gpu"|"switch")}, optional minor;
- link state: down (link numbers the GPU has but reports inactive), no_nvlink (every NVLink call answers
  Not Supported, as on a PCIe-only GPU), pcie (current gen, current width, max gen, max width), pstate;
- health: ecc_uncorrected (volatile count), retired_pending (bool), retired_dbe (page addresses), remap
  ((corrected, uncorrected, pending, failure) rows); absent: the call answers Not Supported, as on GPUs
  without that feature; lost: every call for the GPU answers GPU is lost.
- telemetry: energy_mj (the total energy counter; absent: Not Supported, as before Volta); accounting (the
  accounting mode, default off; None: Not Supported), accounting_denied (setting it answers No Permission, as
  for a user other than root), persistence (default on); processes: [{pid, start (epoch s), gpu_util,
  mem_util, max_memory}] in the accounting buffer. `nv.set_calls` records (gpu, mode) of each accounting mode set.
"""

from __future__ import annotations

import ctypes
import types

import pynvml as _real


class _FabricInfo(ctypes.Structure):
    _fields_ = [("clusterUuid", ctypes.c_ubyte * 16), ("status", ctypes.c_uint), ("cliqueId", ctypes.c_uint),
                ("state", ctypes.c_ubyte)]


def fake_nvml(gpus: list[dict], ancestor: list[list[int]] | None = None, *, remote_types: bool = True,
              numa: bool = True, fabric: dict | None = None) -> types.ModuleType:
    """A module with the pynvml calls slurmtools makes, answering for `gpus`. `nv.calls` records init/shutdown."""
    nv = types.ModuleType("pynvml")
    for name in dir(_real):
        if name.startswith(("NVML_", "NVMLError")):
            setattr(nv, name, getattr(_real, name))
    NVMLError = _real.NVMLError

    def err(code: int):
        return NVMLError(code)  # the real constructor picks the subclass (NVMLError_NotSupported, ...)

    def gpu(h: int) -> dict:
        g = gpus[h]
        if g.get("lost"):
            raise err(_real.NVML_ERROR_GPU_IS_LOST)
        return g

    def have(h: int, key: str):
        g = gpu(h)
        if g.get(key) is None:
            raise err(_real.NVML_ERROR_NOT_SUPPORTED)
        return g[key]

    nv.calls = []
    nv.nvmlInit = lambda: nv.calls.append("init")
    nv.nvmlShutdown = lambda: nv.calls.append("shutdown")
    nv.nvmlSystemGetDriverVersion = lambda: b"550.54.15"
    nv.nvmlDeviceGetCount = lambda: len(gpus)

    def handle(i: int) -> int:
        if not 0 <= i < len(gpus):
            raise err(_real.NVML_ERROR_INVALID_ARGUMENT)
        gpu(i)
        return i

    nv.nvmlDeviceGetHandleByIndex = handle
    nv.nvmlDeviceGetName = lambda h: gpu(h)["name"]
    nv.nvmlDeviceGetUUID = lambda h: (gpu(h), f"GPU-{h:08x}-0000-0000-0000-000000000000")[1]
    nv.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=gpu(h)["bus"].encode())
    nv.nvmlDeviceGetMemoryInfo = lambda h: (gpu(h), types.SimpleNamespace(total=80 * 1024 ** 3))[1]
    nv.nvmlDeviceGetMinorNumber = lambda h: gpu(h).get("minor", h)

    def state(h, k):
        g = gpu(h)
        if g.get("no_nvlink"):
            raise err(_real.NVML_ERROR_NOT_SUPPORTED)
        if k not in g.get("links", {}):
            raise err(_real.NVML_ERROR_INVALID_ARGUMENT)
        return _real.NVML_FEATURE_DISABLED if k in g.get("down", ()) else _real.NVML_FEATURE_ENABLED

    nv.nvmlDeviceGetNvLinkState = state
    nv.nvmlDeviceGetNvLinkRemotePciInfo = lambda h, k: types.SimpleNamespace(busId=gpu(h)["links"][k][0])

    def rtype(h, k):
        if not remote_types:
            raise err(_real.NVML_ERROR_NOT_SUPPORTED)
        return {"gpu": 0, "switch": 2}[gpu(h)["links"][k][1]]

    nv.nvmlDeviceGetNvLinkRemoteDeviceType = rtype
    nv.nvmlDeviceGetNvLinkVersion = lambda h, k: (gpu(h), 4)[1]

    def affinity(h, words):
        arr = (ctypes.c_ulonglong * words)()
        for c in gpu(h)["cpus"]:
            arr[c // 64] |= 1 << (c % 64)
        return arr

    nv.nvmlDeviceGetCpuAffinity = affinity

    def numa_id(h):
        """The GPU memory's own NUMA node: only on platforms where GPUs are NUMA nodes (`gpu_numa`), else, as on
        x86 boards, Not Supported."""
        if not numa or gpu(h).get("gpu_numa") is None:
            raise err(_real.NVML_ERROR_NOT_SUPPORTED)
        return gpu(h)["gpu_numa"]

    def memory_affinity(h, words, scope):
        """The CPU-side NUMA node(s) near the GPU as a bit mask of `words` 64-bit words (nvidia-smi's NUMA
        Affinity); `numa` is one node or a list of them."""
        if not numa:
            raise err(_real.NVML_ERROR_NOT_SUPPORTED)
        want = gpu(h)["numa"]
        mask = [0] * words
        for n in (want if isinstance(want, list) else [want]):
            mask[n // 64] |= 1 << (n % 64)
        return mask

    nv.nvmlDeviceGetNumaNodeId = numa_id
    nv.nvmlDeviceGetMemoryAffinity = memory_affinity

    def common_ancestor(a, b):
        if ancestor is None:
            raise err(_real.NVML_ERROR_NOT_SUPPORTED)
        return ancestor[a][b]

    nv.nvmlDeviceGetTopologyCommonAncestor = common_ancestor
    if fabric is not None:
        nv.c_nvmlGpuFabricInfo_t = _FabricInfo

        def fabric_info(h, ref):
            if h not in fabric:
                raise err(_real.NVML_ERROR_NOT_SUPPORTED)
            uuid, clique = fabric[h]
            ref._obj.clusterUuid[:] = list(bytes.fromhex(uuid.replace("-", "")))
            ref._obj.cliqueId = clique

        nv.nvmlDeviceGetGpuFabricInfo = fabric_info

    # PCIe link: (current gen, current width, max gen, max width)
    nv.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: have(h, "pcie")[0]
    nv.nvmlDeviceGetCurrPcieLinkWidth = lambda h: have(h, "pcie")[1]
    nv.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: have(h, "pcie")[2]
    nv.nvmlDeviceGetMaxPcieLinkWidth = lambda h: have(h, "pcie")[3]
    nv.nvmlDeviceGetPerformanceState = lambda h: have(h, "pstate")

    # health
    def ecc(h, error_type, counter_type):
        if (error_type, counter_type) != (_real.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, _real.NVML_VOLATILE_ECC):
            raise err(_real.NVML_ERROR_INVALID_ARGUMENT)  # the fake knows only what the prolog asks
        return have(h, "ecc_uncorrected")

    def retired(h, cause):
        if cause != _real.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR:
            raise err(_real.NVML_ERROR_INVALID_ARGUMENT)
        return list(have(h, "retired_dbe"))

    def pending(h):
        return _real.NVML_FEATURE_ENABLED if have(h, "retired_pending") else _real.NVML_FEATURE_DISABLED

    nv.nvmlDeviceGetTotalEccErrors = ecc
    nv.nvmlDeviceGetRetiredPages = retired
    nv.nvmlDeviceGetRetiredPagesPendingStatus = pending
    nv.nvmlDeviceGetRemappedRows = lambda h: tuple(have(h, "remap"))

    # telemetry: energy counter, accounting mode and its per-process buffer, persistence mode
    nv.nvmlDeviceGetTotalEnergyConsumption = lambda h: have(h, "energy_mj")
    nv.set_calls = []

    def acc_mode(h):
        g = gpu(h)
        if "accounting" in g and g["accounting"] is None:
            raise err(_real.NVML_ERROR_NOT_SUPPORTED)
        return _real.NVML_FEATURE_ENABLED if g.get("accounting") else _real.NVML_FEATURE_DISABLED

    def set_acc(h, mode):
        g = gpu(h)
        if "accounting" in g and g["accounting"] is None:
            raise err(_real.NVML_ERROR_NOT_SUPPORTED)
        if g.get("accounting_denied"):
            raise err(_real.NVML_ERROR_NO_PERMISSION)
        nv.set_calls.append((h, mode))
        g["accounting"] = mode == _real.NVML_FEATURE_ENABLED

    def pids(h):
        if acc_mode(h) != _real.NVML_FEATURE_ENABLED:
            raise err(_real.NVML_ERROR_NOT_SUPPORTED)
        return [p["pid"] for p in gpu(h).get("processes", [])]

    def stats(h, pid):
        for p in gpu(h).get("processes", []):
            if p["pid"] == pid:
                return types.SimpleNamespace(gpuUtilization=p["gpu_util"], memoryUtilization=p["mem_util"],
                                             maxMemoryUsage=p["max_memory"], time=0, startTime=int(p["start"] * 1e6),
                                             isRunning=0)
        raise err(_real.NVML_ERROR_NOT_FOUND)

    nv.nvmlDeviceGetAccountingMode = acc_mode
    nv.nvmlDeviceSetAccountingMode = set_acc
    nv.nvmlDeviceGetAccountingPids = pids
    nv.nvmlDeviceGetAccountingStats = stats
    nv.nvmlDeviceGetPersistenceMode = lambda h: (_real.NVML_FEATURE_ENABLED if gpu(h).get("persistence", True)
                                                 else _real.NVML_FEATURE_DISABLED)
    return nv
