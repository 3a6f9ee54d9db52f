"""Issue 13 section 3 in the hooks, against the NVML-shaped fake (tests/nvml_fake.py): the prolog switches
accounting mode on (and not when the site says off), notes each GPU's energy counter in its start mark; the
epilog records per-GPU utilisation and energy over the run, unknown with the reason for a counter reset, a GPU
without the counter, a missing or foreign prolog mark, an older mark; the slack windows reach the record.
The prolog and epilog run in this process, as slurmd's environment would call them, with pynvml replaced."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmtools.hooks import energy, epilog, nvml, prolog, telemetry
from tests.nvml_fake import fake_nvml
from tests.unit.test_hooks_nvml import Lines, h100

pytestmark = pytest.mark.usefixtures("require_root")  # the hooks' ownership checks want root, as slurmd runs them
T0 = 1_790_000_000.0


def write_site(tmp_path: Path, telemetry_table: str | None) -> Path:
    """A root-owned file with the hooks' part of a site file (only [telemetry] is read by them)."""
    p = tmp_path / "site.toml"
    p.write_text("[site]\nname = 'x'\n" + (f"[telemetry]\n{telemetry_table}\n" if telemetry_table else ""))
    os.chmod(p, 0o644)
    return p


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node with 4 H100s (NVML fake), the job given GPUs 0 and 1, the spool in tmp_path."""
    os.chmod(tmp_path, 0o755)
    ctl = tmp_path / "nvidiactl"
    ctl.touch()
    monkeypatch.setattr(nvml, "NVIDIACTL", str(ctl))
    for k in ("SLURMTOOLS_LAB_ETC", "SLURM_JOB_RESTART_COUNT", "SLURM_JOB_START_TIME"):
        monkeypatch.delenv(k, raising=False)
    gpus = [h100(i, energy_mj=1_000_000 * (i + 1), persistence=True) for i in range(4)]
    nv = fake_nvml(gpus)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o755)
    env = {"SLURM_JOB_ID": "77", "SLURMD_NODENAME": "gpu03", "SLURM_JOB_USER": "labuser", "SLURM_JOB_UID": "1001",
           "SLURM_NODELIST": "gpu03", "SLURM_JOB_GPUS": "0,1", "SLURMTOOLS_SPOOL_DIR": str(spool),
           "SLURMTOOLS_EPILOG_SCONTROL": "0", "SLURMTOOLS_SCRATCH_PATTERN": str(tmp_path / "scratch-{job_id}"),
           "SLURMTOOLS_SITE": str(write_site(tmp_path, None)),
           "SLURMTOOLS_NODE_EXPECTATIONS": str(tmp_path / "no-expectations.json")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return nv, gpus, spool


def run_epilog(now: float) -> dict:
    return epilog.run(Lines(), now=now)


# ------------------------------------------------------------------------------------------ accounting mode

def test_prolog_switches_accounting_mode_on_for_the_jobs_gpus(node):
    nv, gpus, spool = node
    gpus[1]["persistence"] = False
    assert prolog.main() == 0
    assert nv.set_calls == [(0, nv.NVML_FEATURE_ENABLED), (1, nv.NVML_FEATURE_ENABLED)]
    assert [g.get("accounting") for g in gpus] == [True, True, None, None]  # GPUs 2, 3 are not the job's
    log = (spool / "hooks.log").read_text()
    assert "GPU 1: persistence mode off: accounting mode lasts only while the driver stays loaded" in log
    # one NVML session: the health check's own open and close reuse the telemetry's
    assert nv.calls == ["init", "shutdown"]


def test_prolog_leaves_accounting_mode_alone_when_the_site_says_off(node, tmp_path, monkeypatch):
    nv, gpus, spool = node
    monkeypatch.setenv("SLURMTOOLS_SITE", str(write_site(tmp_path, 'gpu_utilization = "off"')))
    assert prolog.main() == 0
    assert nv.set_calls == [] and not any(g.get("accounting") for g in gpus)
    gpus[0]["energy_mj"] += 5000
    rec = run_epilog(T0)
    assert rec["gpu_accounting"] is None and rec["gpu_utilization_mode"] == "off"
    assert rec["gpu_accounting_why"] == f"off by the site ({tmp_path / 'site.toml'}: telemetry.gpu_utilization)"
    assert rec["gpu_energy"][0]["energy_j"] == 5.0  # energy is read whatever the utilisation setting


def test_prolog_without_permission_logs_and_the_epilog_says_accounting_was_off(node):
    nv, gpus, spool = node
    gpus[0]["accounting_denied"] = True
    assert prolog.main() == 0
    log = (spool / "hooks.log").read_text()
    assert "GPU 0: accounting mode not switched on (Insufficient Permissions); its utilisation will be unknown" in log
    rec = run_epilog(T0)
    acc = {r["gpu"]: r for r in rec["gpu_accounting"]}
    assert acc[0]["gpu_util_pct"] is None and acc[0]["why"] == "accounting mode off at the run's end"
    assert acc[1]["why"] is None and acc[1]["gpu_util_pct"] == 0 and acc[1]["processes"] == 0
    assert rec["gpu_accounting_why"] == "GPU 0: accounting mode off at the run's end"


def test_epilog_reads_the_jobs_processes_only(node, monkeypatch):
    nv, gpus, spool = node
    assert prolog.main() == 0
    mark = next((spool / "running").iterdir()).read_text().split()
    start = float(mark[0])
    gpus[0]["processes"] = [
        {"pid": 10, "start": start - 3600, "gpu_util": 99, "mem_util": 90, "max_memory": 70 << 30},  # earlier job
        {"pid": 11, "start": start + 2, "gpu_util": 63, "mem_util": 20, "max_memory": 30 << 30},
        {"pid": 12, "start": start + 9, "gpu_util": 41, "mem_util": 35, "max_memory": 10 << 30}]
    rec = run_epilog(start + 100)
    acc = {r["gpu"]: r for r in rec["gpu_accounting"]}
    assert acc[0] == {"gpu": 0, "processes": 2, "gpu_util_pct": 63, "mem_util_pct": 35,
                      "max_memory_bytes": 30 << 30, "why": None}
    assert acc[1] == {"gpu": 1, "processes": 0, "gpu_util_pct": 0, "mem_util_pct": 0, "max_memory_bytes": 0,
                      "why": None}  # allocated, accounting on, nothing ran: idle, measured
    assert rec["gpu_utilization_mode"] == "accounting" and rec["gpu_accounting_why"] is None


@pytest.mark.parametrize("table, why", [
    ('gpu_utilization = "dcgm"', "telemetry.gpu_utilization = 'dcgm' is not one of accounting, off"),
    ("gpu_utilization = [", "not readable TOML"),
])
def test_an_unreadable_site_wish_changes_no_gpu_setting(node, tmp_path, monkeypatch, table, why):
    nv, gpus, spool = node
    monkeypatch.setenv("SLURMTOOLS_SITE", str(write_site(tmp_path, table)))
    mode, where = telemetry.site_mode()
    assert mode is None and why in where
    assert prolog.main() == 0
    assert nv.set_calls == []
    assert "accounting mode left as it is: the site's telemetry.gpu_utilization is unknown" in \
        (spool / "hooks.log").read_text()


def test_site_mode_from_a_file_root_does_not_own_is_unknown(tmp_path, monkeypatch):
    os.chmod(tmp_path, 0o755)
    p = write_site(tmp_path, 'gpu_utilization = "accounting"')
    monkeypatch.setenv("SLURMTOOLS_SITE", str(p))
    assert telemetry.site_mode() == ("accounting", str(p))
    os.chown(p, 1001, 1001)
    mode, why = telemetry.site_mode()
    assert mode is None and "owned by uid 1001, not root" in why
    monkeypatch.setenv("SLURMTOOLS_SITE", str(tmp_path / "absent.toml"))
    assert telemetry.site_mode() == ("accounting", f"default ({tmp_path / 'absent.toml'} absent)")


# ------------------------------------------------------------------------------------------------- energy

def test_energy_over_the_run_from_the_prologs_mark(node):
    nv, gpus, spool = node
    assert prolog.main() == 0
    mark = next((spool / "running").iterdir()).read_text().split()
    assert mark[2] == "e=0:1000000,1:2000000"  # the job's GPUs only, counters at the run's start
    gpus[0]["energy_mj"] += 3_600_000_000  # 1 kWh
    gpus[1]["energy_mj"] += 1_234_567
    gpus[2]["energy_mj"] += 9_999_999  # not the job's
    rec = run_epilog(T0)
    assert rec["gpu_energy"] == [
        {"gpu": 0, "start_mj": 1_000_000, "end_mj": 3_601_000_000, "energy_j": 3_600_000.0, "why": None},
        {"gpu": 1, "start_mj": 2_000_000, "end_mj": 3_234_567, "energy_j": 1234.567, "why": None}]
    assert rec["energy_j"] == 3_601_234.567 and rec["energy_why"] is None and rec["energy_source"] == "nvml"
    # the record on disk says the same
    disk = json.loads(next((spool / "jobs").iterdir()).read_text())
    assert disk["gpu_energy"] == rec["gpu_energy"] and disk["energy_j"] == rec["energy_j"]


def test_a_counter_that_went_backwards_is_unknown_not_negative(node):
    nv, gpus, spool = node
    assert prolog.main() == 0
    gpus[0]["energy_mj"] = 500  # driver reloaded between start and end: the counter began again
    gpus[1]["energy_mj"] += 1000
    rec = run_epilog(T0)
    assert rec["gpu_energy"][0]["energy_j"] is None
    assert rec["gpu_energy"][0]["why"] == "the counter went backwards (reset between the run's start and end)"
    assert rec["gpu_energy"][1]["energy_j"] == 1.0
    assert rec["energy_j"] is None and rec["energy_why"] == rec["gpu_energy"][0]["why"]


def test_a_gpu_without_the_counter_is_unknown(node):
    nv, gpus, spool = node
    del gpus[1]["energy_mj"]  # a V100-era GPU: NVML answers Not Supported
    assert prolog.main() == 0
    assert next((spool / "running").iterdir()).read_text().split()[2] == "e=0:1000000,1:-"
    rec = run_epilog(T0)
    assert rec["gpu_energy"][1] == {"gpu": 1, "start_mj": None, "end_mj": None, "energy_j": None,
                                    "why": "the prolog could not read the counter"}
    assert rec["energy_j"] is None
    # at the end alone (the GPU stopped answering the counter): the end's reason
    per, total, why = energy.deltas((1,), {1: 5}, {1: energy.NOT_SUPPORTED}, "")
    assert per[0]["why"] == energy.NOT_SUPPORTED and total is None and why == energy.NOT_SUPPORTED


def test_no_prolog_mark_means_unknown_energy_with_the_reason(node):
    nv, gpus, spool = node
    rec = run_epilog(T0)  # slurmd skipped the prolog of this run
    assert rec["energy_j"] is None and [g["energy_j"] for g in rec["gpu_energy"]] == [None, None]
    assert rec["energy_why"] == "no prolog start mark for this run (the prolog did not run, or its mark was lost)"
    assert [g["end_mj"] for g in rec["gpu_energy"]] == [1_000_000, 2_000_000]  # the end is still recorded


def test_an_older_mark_and_a_mark_of_another_run(node, monkeypatch):
    nv, gpus, spool = node
    running = spool / "running"
    running.mkdir(mode=0o755)
    (running / "77.gpu03").write_text(f"{T0:.3f} 0\n")  # a prolog from before energy was noted
    rec = run_epilog(T0 + 60)
    assert rec["start"] == T0 and rec["energy_j"] is None
    assert rec["energy_why"] == "the prolog's start mark holds no energy counters (an older prolog, or none were read)"
    (running / "77.gpu03").write_text(f"{T0:.3f} 0 e=0:1,1:2\n")
    rec = run_epilog(T0 + 120)  # a mark of this run with counters: the energy is end - start
    assert rec["run"] == 0 and [g["energy_j"] for g in rec["gpu_energy"]] == [999.999, 1999.998]
    # Slurm says this is run 1 and the mark is of run 0: its counters are not this run's
    got = epilog._energy_start(T0, 0, {0: 1}, 1)
    assert got == (None, "the prolog's start mark is of run 0, not of this run 1")
    assert epilog._energy_start(T0, 1, {0: 1}, 1) == ({0: 1}, "")


def test_mark_tokens_round_trip_and_garbage():
    assert energy.parse_mark(["e=0:12,3:-"]) == {0: 12, 3: None}
    assert energy.parse_mark([energy.mark_token({2: 7, 0: energy.NOT_SUPPORTED})]) == {0: None, 2: 7}
    assert energy.parse_mark([]) is None and energy.mark_token({}) == ""
    for bad in ("e=0:x", "e=a:1", "e=0:-5", "e=0", "e=0:1e3"):
        assert energy.parse_mark([bad]) is None, bad


@given(st.dictionaries(st.integers(0, 7), st.integers(0, 2**62), min_size=1),
       st.dictionaries(st.integers(0, 7), st.integers(0, 2**62)))
def test_deltas_are_never_negative_and_sum_when_all_known(start, end):
    gpus = tuple(sorted(start))
    per, total, why = energy.deltas(gpus, start, end, "no mark")
    assert [r["gpu"] for r in per] == list(gpus)
    for r in per:
        assert r["energy_j"] is None or r["energy_j"] >= 0
        assert (r["energy_j"] is None) == (r["why"] is not None)
    if all(g in end and end[g] >= start[g] for g in gpus):
        assert why is None and total == sum(end[g] - start[g] for g in gpus) / 1000.0
    else:
        assert total is None and why


def test_lab_fake_gpus_draw_their_stated_power():
    spec = {"count": 4, "power_w": 250, "faults": {"2": {"power_w": 100}, "3": {"energy": "unsupported"}}}
    a = energy.read_fake(spec, (0, 2, 3), 1000.0)
    b = energy.read_fake(spec, (0, 2, 3), 1010.0)
    per, total, why = energy.deltas((0, 2, 3), {g: v for g, v in a.items() if isinstance(v, int)}, b, "")
    assert [r["energy_j"] for r in per] == [2500.0, 1000.0, None]
    assert per[2]["why"] == "the prolog's mark has no counter for this GPU" and total is None
    assert energy.read_fake({"count": 2}, None, 5.0) == {0: energy.NOT_SUPPORTED, 1: energy.NOT_SUPPORTED}


# -------------------------------------------------------------------------------------------- slack windows

def windows_doc(job="77") -> dict:
    return {"format": "slurmtools-slack-windows/1", "job_id": job, "run": 0, "written_at": T0 + 50, "windows": [
        {"mode": "heavy", "start_step": 0, "end_step": 40, "start_time": T0, "end_time": T0 + 20, "run": 0,
         "why": "first signal: 120 idle GPUs", "ended": "switch"},
        {"mode": "light", "start_step": 40, "end_step": None, "start_time": T0 + 20, "end_time": None, "run": 0,
         "why": "x" * 300, "ended": None, "extra": "dropped"},
        {"mode": "turbo", "start_step": 1}, "not a window"]}


def scratch_with(tmp_path: Path, doc, mode=0o700, uid=1001) -> Path:
    d = tmp_path / "scratch-77"
    d.mkdir()
    (d / "slack-windows.json").write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    os.chown(d / "slack-windows.json", uid, uid)
    os.chown(d, uid, uid)
    os.chmod(d, mode)
    return d


def test_slack_windows_reach_the_record_before_the_scratch_folder_goes(node, tmp_path):
    d = scratch_with(tmp_path, windows_doc())
    rec = run_epilog(T0)
    assert rec["slack_windows"] == [
        {"mode": "heavy", "start_step": 0, "end_step": 40, "start_time": T0, "end_time": T0 + 20, "run": 0,
         "why": "first signal: 120 idle GPUs", "ended": "switch"},
        {"mode": "light", "start_step": 40, "end_step": None, "start_time": T0 + 20, "end_time": None, "run": 0,
         "why": "x" * 200, "ended": None}]
    assert not d.exists()  # cleaned after being read


@pytest.mark.parametrize("doc, mode, uid", [
    (windows_doc(job="78"), 0o700, 1001),   # another job's file
    (windows_doc(), 0o770, 1001),           # a group-writable folder: its writer would not have written there
    (windows_doc(), 0o700, 1002),           # not the job user's folder
    ("{torn", 0o700, 1001),
    ({**windows_doc(), "format": "other/1"}, 0o700, 1001),
])
def test_slack_windows_not_trusted_are_left_out(node, tmp_path, doc, mode, uid):
    scratch_with(tmp_path, doc, mode, uid)
    assert run_epilog(T0)["slack_windows"] is None
