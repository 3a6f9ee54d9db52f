"""Every NVML read the hooks make, against the NVML-shaped fake (tests/nvml_fake.py): the prolog's GPU health
(ECC volatile uncorrected count, retired pages pending and double-bit, row remapping pending and failed, a lost
GPU) and the drift check's link reads (NVLink state per link, PCIe current and max generation and width,
performance state), opening NVML, and one prolog check end to end through the injected module."""

from __future__ import annotations

import sys
import time

import pytest

from slurmtools.hooks import gpuhealth, links, nodecheck, nvml
from slurmtools.hooks.common import HookLog
from tests.nvml_fake import fake_nvml


def h100(i: int, **kw) -> dict:
    """An H100 SXM on an NVSwitch board: 18 NVLinks, PCIe Gen5 x16, busy (P0), healthy, ECC on."""
    g = {"name": "NVIDIA H100 80GB HBM3", "bus": f"00000000:{0x18 + 0x10 * i:02X}:00.0", "numa": i // 4,
         "cpus": [i], "links": {k: ("00000000:00:00.0", "switch") for k in range(18)}, "pcie": (5, 16, 5, 16),
         "pstate": 0, "ecc_uncorrected": 0, "remap": (0, 0, 0, 0)}
    g.update(kw)
    return g


class Lines(HookLog):
    def __init__(self) -> None:
        super().__init__("test")
        self.lines: list[str] = []

    def __call__(self, msg: str) -> None:
        self.lines.append(msg)


# ------------------------------------------------------------------------------------------------- GPU health

def test_health_reads_a_healthy_board():
    nv = fake_nvml([h100(i) for i in range(8)])
    st = gpuhealth.read_statuses(nv)
    assert len(st) == 8 and gpuhealth.problems(st, None) == []
    assert st[3].uuid == "GPU-00000003-0000-0000-0000-000000000000" and st[3].minor == 3
    assert st[3].ecc_uncorrected == 0 and st[3].retired_pages_dbe is None  # H100: no page retirement, rows remap


def test_health_volatile_uncorrected_ecc_count():
    nv = fake_nvml([h100(0), h100(1, ecc_uncorrected=3)])
    st = gpuhealth.read_statuses(nv)
    assert st[1].ecc_uncorrected == 3
    assert gpuhealth.problems(st, (1,)) == ["GPU 1 (GPU-00000001-0000-0000-0000-000000000000) has 3 uncorrected "
                                            "ECC errors"]


def test_health_ecc_not_supported_is_no_fault():
    nv = fake_nvml([h100(0, ecc_uncorrected=None)])  # ECC off (or a GPU without it): NVML says Not Supported
    st = gpuhealth.read_statuses(nv)
    assert st[0].ecc_uncorrected is None and gpuhealth.problems(st, None) == []


def test_health_retired_pages_pending_and_double_bit_pages():
    """Pre-A100 GPUs retire pages: the pending flag means a reset is needed; the DBE pages are counted."""
    v100 = {"remap": None, "retired_pending": True, "retired_dbe": [0x1000, 0x2000]}
    nv = fake_nvml([h100(0, **v100), h100(1, remap=None, retired_pending=False, retired_dbe=[])])
    st = gpuhealth.read_statuses(nv)
    assert (st[0].retired_pages_pending, st[0].retired_pages_dbe) == (True, 2)
    assert (st[1].retired_pages_pending, st[1].retired_pages_dbe) == (False, 0)
    assert gpuhealth.problems(st, None) == [
        "GPU 0 (GPU-00000000-0000-0000-0000-000000000000) has retired pages pending (reset needed)"]


@pytest.mark.parametrize("remap, reason", [
    ((12, 0, 0, 0), None),                                       # corrected rows only: healthy
    ((0, 1, 1, 0), "has row remapping pending (reset needed)"),
    ((0, 1, 0, 1), "row remapping failed"),
    ((0, 1, 1, 1), "row remapping failed"),                      # a failure outranks the pending reset
])
def test_health_row_remapping(remap, reason):
    st = gpuhealth.read_statuses(fake_nvml([h100(0, remap=remap)]))
    got = gpuhealth.problems(st, None)
    assert got == ([] if reason is None else [f"GPU 0 (GPU-00000000-0000-0000-0000-000000000000) {reason}"])


def test_health_lost_gpu_is_named_by_the_real_error():
    nv = fake_nvml([h100(0), h100(1, lost=True)])
    with pytest.raises(nv.NVMLError_GpuIsLost):
        nv.nvmlDeviceGetHandleByIndex(1)
    st = gpuhealth.read_statuses(nv)
    assert st[1].lost and not st[0].lost
    assert gpuhealth.problems(st, (0, 1)) == ["GPU 1 fell off the bus (NVML: GPU is lost)"]


def test_open_nvml(monkeypatch, tmp_path):
    with pytest.raises(nvml.NvmlUnavailable, match="no NVIDIA driver"):
        nvml.open_nvml(str(tmp_path / "nvidiactl"))
    ctl = tmp_path / "nvidiactl"
    ctl.touch()
    nv = fake_nvml([h100(0)])
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    assert nvml.open_nvml(str(ctl)) is nv and nv.calls == ["init"]
    nvml.close_nvml(nv)
    assert nv.calls == ["init", "shutdown"]

    def no_driver():
        raise nv.NVMLError(nv.NVML_ERROR_DRIVER_NOT_LOADED)

    nv.nvmlInit = no_driver
    with pytest.raises(nvml.NvmlUnavailable, match="NVML init failed: Driver Not Loaded"):
        nvml.open_nvml(str(ctl))


# ------------------------------------------------------------------------------------------------ link reads

def test_links_nvlink_state_per_link():
    nv = fake_nvml([h100(0), h100(1, down={4, 9})])
    got, skipped = links.read_gpu_links(nv, 2, {0, 1})
    assert skipped == []
    assert (got[0].nvlinks_up, got[0].nvlinks_down) == (18, ())
    assert (got[1].nvlinks_up, got[1].nvlinks_down) == (16, (4, 9))  # links 18..35 answer Invalid Argument


def test_links_gpu_without_nvlink_and_not_asked():
    nv = fake_nvml([h100(0, no_nvlink=True, links={}), h100(1)])
    got, _ = links.read_gpu_links(nv, 2, {0})
    assert got[0].nvlinks_up == 0 and got[0].nvlink_note == "NVML: Not Supported"
    assert got[1].nvlinks_up is None  # the graph declares no NVLinks for it: not read


def test_links_pcie_generation_width_and_performance_state():
    nv = fake_nvml([h100(0, pcie=(5, 8, 5, 16)), h100(1, pcie=(1, 16, 5, 16), pstate=8), h100(2, pcie=None,
                                                                                              pstate=None)])
    got, _ = links.read_gpu_links(nv, 3, ())
    assert (got[0].pcie_gen, got[0].pcie_width, got[0].pcie_max_gen, got[0].pcie_max_width) == (5, 8, 5, 16)
    assert (got[1].pcie_gen, got[1].pstate) == (1, 8)
    assert (got[2].pcie_width, got[2].pcie_max_width, got[2].pstate) == (None, None, None)  # Not Supported


def test_links_lost_gpu():
    got, _ = links.read_gpu_links(fake_nvml([h100(0, lost=True)]), 1, {0})
    assert got[0].error == "GPU is lost" and got[0].nvlinks_up is None


def test_links_stop_at_the_deadline():
    nv = fake_nvml([h100(i) for i in range(8)])
    got, skipped = links.read_gpu_links(nv, 8, set(range(8)), until=time.monotonic() - 1)
    assert got == {} and skipped == list(range(8))


# -------------------------------------------------------------------------------- the check, NVML injected

def test_check_reads_health_and_links_in_one_nvml_session(monkeypatch, tmp_path):
    from tests.unit.test_drift import write_expectations

    ctl = tmp_path / "nvidiactl"
    ctl.touch()
    monkeypatch.setattr(nvml, "NVIDIACTL", str(ctl))
    monkeypatch.delenv("SLURMTOOLS_LAB_ETC", raising=False)
    nv = fake_nvml([h100(i) for i in range(7)] + [h100(7, down={0, 1, 2}, pcie=(5, 8, 5, 16))])
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    path = write_expectations(tmp_path, gpus=8, nvlinks=18, hcas=[])
    monkeypatch.setenv("SLURMTOOLS_NODE_EXPECTATIONS", str(path))
    log = Lines()
    faults = nodecheck.check("gpu01", (0, 1), True, log, sysfs_root=str(tmp_path))
    assert nv.calls == ["init", "shutdown"]
    assert faults == ["GPU 7 NVLink 15/18 up (down: 0-2)", "GPU 7 PCIe x8 of max x16"]
    assert any(line.startswith("GPU health (nvml, 8 GPUs, job GPUs (0, 1)): ok") for line in log.lines)
    drift_line = next(line for line in log.lines if line.startswith("topology drift"))
    assert "not checked: " in drift_line and "PCIe generation and width: not declared" in drift_line


def test_check_without_nvml_reports_links_not_checked(monkeypatch, tmp_path):
    from tests.unit.test_drift import write_expectations

    monkeypatch.setattr(nvml, "NVIDIACTL", str(tmp_path / "absent"))
    monkeypatch.delenv("SLURMTOOLS_LAB_ETC", raising=False)
    monkeypatch.setenv("SLURMTOOLS_NODE_EXPECTATIONS", str(write_expectations(tmp_path, gpus=8, nvlinks=18,
                                                                              hcas=[])))
    log = Lines()
    assert nodecheck.check("gpu01", (0,), True, log) == []
    assert "GPU health skipped: no NVIDIA driver" in log.lines[0]
    assert "GPU count: no NVML (no NVIDIA driver" in log.lines[1]
