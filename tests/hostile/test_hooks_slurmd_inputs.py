"""What slurmd and real nodes hand the hooks that the hooks misread (one test class per defect class).

1. MIG: slurmd numbers each MIG slice as a GPU of its own in SLURM_JOB_GPUS (the GRES index, Slurm 25.11
   `gres_common_prep_set_env`) and names it by UUID in CUDA_VISIBLE_DEVICES; the prolog took the index for an
   NVML GPU, found "GPU 5 not visible" and drained a healthy node.
2. A job's GPUs given but unknown (an unreadable list, MIG slices): the health check rightly checks every GPU,
   but the telemetry also counted every GPU's energy and processes as the job's.
3. The prolog wrote its decision log (and the log's sequence file) as root into a spool folder it had just
   refused as group/world-writable, where anyone could have planted a FIFO (hang) or a hard link.
4. JSON nested past Python's recursion limit raised RecursionError, which no reader's ValueError handler catches:
   a deeply nested expectations file crashed the prolog's check before its GPU health part, so a node with a
   failing GPU took jobs.
The hooks run as slurmd runs them (scripts/prolog, scripts/epilog) or in this process with the suite's NVML-shaped
fake (tests/nvml_fake.py); `scontrol` is the recorder script of test_prolog_fail_closed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from slurmtools.hooks import epilog, nvml, prolog, telemetry
from slurmtools.hooks.common import JobEnv, loads
from tests.hostile.test_prolog_fail_closed import EPILOG, PROLOG, Node, run
from tests.nvml_fake import fake_nvml
from tests.unit.test_hooks_nvml import Lines, h100

pytestmark = pytest.mark.usefixtures("require_root")  # the hooks' ownership checks want root, as slurmd runs them

MIG = "MIG-4a2b1c3d-5e6f-5a7b-8c9d-0e1f2a3b4c5d"
UNKNOWN_GPUS = ("the job's GPUs are unknown (its GPU list unreadable, or MIG slices): the node's GPUs are not all "
                "its own")


@pytest.fixture
def nvnode(tmp_path, monkeypatch):
    """A node with 2 H100s behind the NVML fake (no lab fault file), the hooks' environment in os.environ."""
    node = Node(tmp_path)
    ctl = tmp_path / "nvidiactl"
    ctl.touch()
    monkeypatch.setattr(nvml, "NVIDIACTL", str(ctl))
    gpus = [h100(i, energy_mj=1_000_000 * (i + 1), persistence=True) for i in range(2)]
    nv = fake_nvml(gpus)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    for k in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_START_TIME"):
        monkeypatch.delenv(k, raising=False)
    for k, v in node.env(SLURMTOOLS_SITE=str(tmp_path / "absent.toml"),
                         SLURMTOOLS_NODE_EXPECTATIONS=str(tmp_path / "absent.json")).items():
        monkeypatch.setenv(k.decode(), v.decode())
    monkeypatch.delenv("SLURMTOOLS_LAB_ETC")
    return node, nv, gpus


# ------------------------------------------------------------------------------------------- 1. MIG slices

def test_mig_slice_index_is_not_taken_for_a_missing_gpu(nvnode, monkeypatch):
    node, nv, gpus = nvnode
    monkeypatch.setenv("SLURM_JOB_GPUS", "5")  # the sixth MIG slice of the node: GPU 0 holds slices 0-6
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", MIG)
    assert prolog.main() == 0
    assert node.drains() == []
    # a real fault still drains: every GPU is checked, as for any job whose GPUs are unknown
    gpus[1]["ecc_uncorrected"] = 2
    assert prolog.main() == 1
    [drain] = node.drains()
    assert "GPU 1 (GPU-00000001-0000-0000-0000-000000000000) has 2 uncorrected ECC errors" in drain


@pytest.mark.parametrize("cvd", [MIG, f"{MIG},MIG-0b1c2d3e-4f50-5617-8293-a4b5c6d7e8f9",
                                 "MIG-GPU-9a8b7c6d-5e4f-3a2b-1c0d-9e8f7a6b5c4d/1/0"])
def test_mig_devices_make_the_jobs_gpus_unknown_and_say_why(cvd):
    job = JobEnv.from_environ({"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "3,4", "CUDA_VISIBLE_DEVICES": cvd})
    assert job.gpus is None and job.gpus_given
    assert job.problems == ["CUDA_VISIBLE_DEVICES names MIG devices: SLURM_JOB_GPUS's indices count MIG slices, "
                            "not GPUs; the job's GPUs are unknown"]
    # whole GPUs: CUDA_VISIBLE_DEVICES holds the same indices, read as before
    job = JobEnv.from_environ({"SLURM_JOB_GPUS": "3,4", "CUDA_VISIBLE_DEVICES": "3,4"})
    assert job.gpus == (3, 4) and job.problems == []


# ------------------------------------------------------------------- 2. telemetry of a job with unknown GPUs

@pytest.mark.parametrize("over", [{"SLURM_JOB_GPUS": "0,x"}, {"SLURM_JOB_GPUS": "1", "CUDA_VISIBLE_DEVICES": MIG}])
def test_unknown_job_gpus_are_not_billed_every_gpu_of_the_node(nvnode, monkeypatch, over):
    node, nv, gpus = nvnode
    for k, v in over.items():
        monkeypatch.setenv(k, v)
    assert prolog.main() == 0
    assert nv.set_calls == []  # no GPU's accounting mode changed: none is known to be the job's
    for g in gpus:
        g["energy_mj"] += 3_600_000  # the node's GPUs drew energy, whose jobs' is not known
    rec = epilog.run(Lines(), now=1_790_000_000.0)
    assert rec["gpus"] is None
    assert rec["energy_j"] is None and rec["gpu_energy"] is None and rec["energy_why"] == UNKNOWN_GPUS
    assert rec["gpu_accounting"] is None and rec["gpu_accounting_why"] == UNKNOWN_GPUS
    [disk] = node.records()
    assert disk["energy_j"] is None and disk["energy_why"] == UNKNOWN_GPUS


# -------------------------------------------------------------------- 3. the decision log in a refused spool

@pytest.mark.parametrize("mode", [0o775, 0o777, 0o1777])
def test_prolog_writes_no_decision_log_into_a_spool_it_refused(tmp_path, mode):
    node = Node(tmp_path)  # every GPU of the lab's fake node has ECC errors
    os.chmod(node.spool, mode)
    r = run(PROLOG, node.env())
    err = r.stderr.decode()
    assert r.returncode == 1 and len(node.drains()) == 1, err  # the fault still drains the node
    assert sorted(p.name for p in node.spool.iterdir()) == [], err  # root wrote nothing into the refused folder
    assert "decision log not written: spool folder refused: " in err and "is writable by group or others" in err


def test_prolog_and_epilog_name_themselves_in_the_decision_log(tmp_path):
    node = Node(tmp_path)
    assert run(PROLOG, node.env()).returncode == 1
    [rec] = [json.loads(ln) for ln in (node.spool / "decisions.jsonl").read_text().splitlines()]
    assert rec["event"] == "node_drained" and rec["writer"] == "prolog@gpu03" and rec["seq"] == 1
    assert (node.spool / "decisions.jsonl.seq.prolog@gpu03").exists()


# ------------------------------------------------------------------------ 4. JSON nested past the recursion limit

DEEP = "[" * 100_000 + "]" * 100_000


def test_loads_refuses_deep_nesting_as_invalid_json():
    with pytest.raises(ValueError, match=r"^invalid JSON: arrays or objects nested too deeply to read$"):
        loads(DEEP)
    with pytest.raises(ValueError, match=r"^invalid JSON: arrays or objects nested too deeply to read$"):
        loads('{"a": ' * 50_000 + "1" + "}" * 50_000)


def test_deeply_nested_expectations_file_does_not_skip_the_gpu_health_check(tmp_path):
    node = Node(tmp_path)
    f = node.etc / "slurmtools-node-expectations.json"
    f.write_text(DEEP)
    os.chmod(f, 0o644)
    r = run(PROLOG, node.env())
    err = r.stderr.decode()
    assert r.returncode == 1 and len(node.drains()) == 1, err
    assert "Traceback" not in err and "crashed" not in err
    assert (f"topology drift: not checked (malformed: {f}: invalid JSON: arrays or objects nested too deeply "
            "to read)") in err


def test_deeply_nested_site_file_leaves_the_sites_telemetry_wish_unknown(tmp_path, monkeypatch):
    os.chmod(tmp_path, 0o755)
    site = tmp_path / "site.toml"
    site.write_text("[telemetry]\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    os.chmod(site, 0o644)
    monkeypatch.setenv("SLURMTOOLS_SITE", str(site))
    assert telemetry.site_mode() == (None, f"{site}: not readable TOML (arrays or tables nested too deeply)")


def test_deeply_nested_stop_report_of_a_job_is_unreadable_not_a_crash(tmp_path, monkeypatch):
    node = Node(tmp_path)
    scratch = tmp_path / "scratch-77"
    scratch.mkdir()
    (scratch / "stop.json").write_text("[" * 4000 + "]" * 4000)  # within the 4 KiB the epilog reads
    os.chown(scratch, 1001, 1001)
    os.chown(scratch / "stop.json", 1001, 1001)
    for k, v in node.env().items():
        monkeypatch.setenv(k.decode(), v.decode())
    log = Lines()
    assert epilog._stop_report(JobEnv.from_environ(), log) is None
    assert log.lines == ["stop report unreadable; ignored"]


def test_epilog_as_slurmd_runs_it_for_a_mig_job(tmp_path):
    """scripts/epilog with a MIG job's variables: its record, GPUs and telemetry unknown with the reason."""
    node = Node(tmp_path)
    r = run(EPILOG, node.env(CUDA_VISIBLE_DEVICES=MIG, SLURM_JOB_GPUS="5"))
    err = r.stderr.decode()
    assert r.returncode == 0 and "Traceback" not in err, err
    [rec] = node.records()
    assert rec["job"] == 77 and rec["gpus"] is None and rec["energy_why"] == UNKNOWN_GPUS
    assert Path(node.spool / "jobs" / "77.0.gpu03.json").exists()


# ---------------------------------------------------------------- 5. a record never written over another one

def test_epilog_never_writes_a_record_over_an_existing_one(tmp_path, monkeypatch):
    """Records of one job, run and node are kept side by side (job ids wrap, an unknown run repeats); when the
    names run out the new record is refused and logged, never renamed over the last old one."""
    node = Node(tmp_path)
    for k, v in node.env().items():
        monkeypatch.setenv(k.decode(), v.decode())
    jobs = node.spool / "jobs"
    jobs.mkdir(mode=0o755)
    old = ["77.0.gpu03.json"] + [f"77.0.gpu03.{k}.json" for k in range(2, epilog.MAX_SAME_NAME + 1)]
    for name in old[:3]:
        (jobs / name).write_text('{"old": true}\n')
    epilog.run(Lines())
    assert json.loads((jobs / "77.0.gpu03.4.json").read_text())["job"] == 77
    (jobs / "77.0.gpu03.4.json").unlink()
    for name in old[3:]:
        (jobs / name).write_text('{"old": true}\n')
    log = Lines()
    epilog.run(log)
    assert sorted(p.name for p in jobs.iterdir()) == sorted(old)
    assert all(json.loads((jobs / n).read_text()) == {"old": True} for n in old)
    assert (f"record not written: {epilog.MAX_SAME_NAME} records named 77.0.gpu03[.N].json exist; this one is "
            "not written") in log.lines
