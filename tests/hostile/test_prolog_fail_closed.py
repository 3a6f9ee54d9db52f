"""Issue 12, class 2: no bookkeeping failure may skip the prolog's GPU health check, nor lose the epilog's record.

The defect: the prolog parsed the whole environment and noted the job's start in one `try`; any exception there
(SLURM_JOB_RESTART_COUNT="²", which passes str.isdigit() and fails int(); a group-writable `running` folder in
the spool) set the job to None and skipped the health check, so a node with a failing GPU took jobs. The same
parse made the epilog write no record. Here the hooks run as slurmd runs them (scripts/prolog, scripts/epilog,
as root, an environment of bytes) with a faulty GPU from the lab's root-owned fault file; `scontrol` is a
recorder script, so these tests check what the hook asks of Slurm (the lab test in
`test_prolog_fail_closed_lab.py` checks what Slurm does with it).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
PROLOG = REPO / "scripts" / "prolog"
EPILOG = REPO / "scripts" / "epilog"
FAKE_NAME = "slurmtools-fake-gpu-health.json"

pytestmark = pytest.mark.usefixtures("require_root")  # the hooks run as root; ownership checks need it

#: every GPU of the fake node has uncorrected ECC errors: whichever GPUs a job is given, the check must find one
SICK = {"default": {"count": 8, "faults": {str(i): {"ecc_uncorrected": 2} for i in range(8)}}}


class Node:
    """A root-owned folder holding what a node's hooks see: spool, lab etc with the fault file, scontrol recorder."""

    def __init__(self, root: Path):
        self.root = root
        os.chmod(root, 0o755)
        self.spool = root / "spool"
        self.spool.mkdir(mode=0o755)
        self.etc = root / "etc"
        self.etc.mkdir(mode=0o755)
        fake = self.etc / FAKE_NAME
        fake.write_text(json.dumps(SICK))
        os.chmod(fake, 0o644)
        self.calls = root / "scontrol-calls"
        rec = root / "scontrol"
        rec.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {self.calls}\n')
        os.chmod(rec, 0o755)
        self.scontrol = rec

    def env(self, **over: bytes | str) -> dict[bytes, bytes]:
        env = {"SLURM_JOB_ID": "77", "SLURMD_NODENAME": "gpu03", "SLURM_JOB_USER": "labuser",
               "SLURM_JOB_UID": "1001", "SLURM_JOB_ACCOUNT": "nlp", "SLURM_JOB_PARTITION": "gpu",
               "SLURM_NODELIST": "gpu[03-04]", "SLURM_JOB_GPUS": "0,1", "SLURM_JOB_RESTART_COUNT": "0",
               "SLURMTOOLS_SPOOL_DIR": str(self.spool), "SLURMTOOLS_LAB_ETC": str(self.etc),
               "SLURMTOOLS_SCONTROL": str(self.scontrol), "SLURMTOOLS_EPILOG_SCONTROL": "0",
               "SLURMTOOLS_SCRATCH_PATTERN": str(self.root / "scratch-{job_id}")}
        env.update(over)
        return {k.encode(): v if isinstance(v, bytes) else v.encode() for k, v in env.items()}

    def drains(self) -> list[str]:
        return [ln for ln in (self.calls.read_text().splitlines() if self.calls.exists() else [])
                if ln.startswith("update ") and "state=drain" in ln]

    def records(self) -> list[dict]:
        jobs = self.spool / "jobs"
        return [json.loads(p.read_text()) for p in sorted(jobs.glob("*.json"))] if jobs.is_dir() else []


def run(hook: Path, env: dict[bytes, bytes]) -> subprocess.CompletedProcess:
    return subprocess.run([str(hook)], env=env, capture_output=True, timeout=60)


def assert_drained(node: Node, r: subprocess.CompletedProcess, name: str | None = "gpu03") -> None:
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 1, f"prolog passed a node with a failing GPU (rc {r.returncode}):\n{err}"
    assert "NODE FAULT: slurmtools prolog: GPU " in err, err
    assert "Traceback" not in err, err
    if name is not None:
        drains = node.drains()
        assert len(drains) == 1 and drains[0].startswith(f"update nodename={name} state=drain reason=slurmtools "
                                                         "prolog: GPU "), (drains, err)


# ----------------------------------------------------------------------------- the two inputs of the issue


def test_unicode_superscript_restart_count_does_not_skip_the_health_check(tmp_path):
    node = Node(tmp_path)
    r = run(PROLOG, node.env(SLURM_JOB_RESTART_COUNT="²"))
    assert_drained(node, r)
    assert "GPU 0 (GPU-fake-gpu03-0) has 2 uncorrected ECC errors" in r.stderr.decode()
    assert "SLURM_JOB_RESTART_COUNT='\\xb2' is not a whole number" in r.stderr.decode()


@pytest.mark.parametrize("folder", ["spool", "spool/running"])
def test_group_writable_spool_does_not_skip_the_health_check(tmp_path, folder):
    node = Node(tmp_path)
    (tmp_path / "spool" / "running").mkdir(mode=0o755)
    os.chmod(tmp_path / folder, 0o775)
    r = run(PROLOG, node.env())
    assert_drained(node, r)
    assert f"{tmp_path / folder}: {Path(folder).name} is writable by group or others (mode 775)" in r.stderr.decode()
    assert not (tmp_path / "spool" / "running" / "77.gpu03").exists()  # the start mark is refused, not written


def test_malformed_job_gpus_checks_every_gpu_rather_than_none(tmp_path, monkeypatch):
    """A malformed SLURM_JOB_GPUS means "which GPUs unknown", never "no GPUs": on real hardware (no lab fault
    file) the prolog must still open NVML. Here the NVML-shaped fake answers with a GPU that has ECC errors."""
    import sys

    from slurmtools.hooks import nvml, prolog
    from tests.nvml_fake import fake_nvml

    nv = fake_nvml([{"name": "H100", "bus": "00000000:18:00.0", "ecc_uncorrected": 0},
                    {"name": "H100", "bus": "00000000:28:00.0", "ecc_uncorrected": 5}])
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    ctl = tmp_path / "nvidiactl"
    ctl.touch()
    monkeypatch.setattr(nvml, "NVIDIACTL", str(ctl))
    node = Node(tmp_path)
    for k, v in node.env(SLURM_JOB_GPUS="0,x").items():
        monkeypatch.setenv(k.decode(), v.decode())
    monkeypatch.delenv("SLURMTOOLS_LAB_ETC")
    assert prolog.main() == 1
    assert node.drains() and "GPU 1 (GPU-00000001" in node.drains()[0]
    assert nv.calls == ["init", "shutdown"]


# ----------------------------------------------------------------------------- hostile environments, any value

#: what slurmd's environment might carry in a job's hook (job ids, names, GPU lists, counts)
VARS = ["SLURM_JOB_ID", "SLURM_JOB_UID", "SLURM_JOB_USER", "SLURM_JOB_ACCOUNT", "SLURM_JOB_PARTITION",
        "SLURMD_NODENAME", "SLURM_NODELIST", "SLURM_JOB_NODELIST", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES",
        "SLURM_JOB_RESTART_COUNT", "SLURM_SCRIPT_CONTEXT", "SLURM_JOB_EXIT_CODE2", "SLURM_JOB_DERIVED_EC"]

ODD = [b"", b" ", "²".encode(), "\u0661\u0662".encode(), "\U0001d7d7".encode(), "٣".encode(), b"-1", b"-0",
       b"+3", b"1e3", b"0x10", b"1_000", b" 12 ", b"12\n13", b"9" * 19, b"9" * 5000, b"1" * 100_000,
       b"\xff\xfe", b"\xc3\x28", b"gpu\xff", b"0,\xb2", b"\xed\xa0\x80", b"NaN", b"inf", b"=", b"0,,1", b"[",
       "ｇｐｕ０３".encode()]

values = st.one_of(st.sampled_from(ODD),
                   st.binary(max_size=64).map(lambda b: b.replace(b"\0", b"")),
                   st.text(max_size=32).map(lambda s: s.replace("\0", "").encode("utf-8", "surrogatepass")))
hostile = st.dictionaries(st.sampled_from(VARS), values, min_size=1, max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(over=hostile)
def test_prolog_drains_a_faulty_gpu_node_whatever_slurm_variables_hold(over):
    with tempfile.TemporaryDirectory() as d:
        node = Node(Path(d))
        r = run(PROLOG, node.env(**over))
        # the node's name is needed to drain it ourselves; without one, exit 1 still makes slurmd drain it
        ours = "SLURMD_NODENAME" not in over or over["SLURMD_NODENAME"] == b"gpu03"
        assert_drained(node, r, "gpu03" if ours else None)
        if not ours:
            assert len(node.drains()) <= 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(over=hostile.filter(lambda o: "SLURM_JOB_ID" not in o))
def test_epilog_writes_its_record_whatever_slurm_variables_hold(over):
    with tempfile.TemporaryDirectory() as d:
        node = Node(Path(d))
        r = run(EPILOG, node.env(**over))
        err = r.stderr.decode("utf-8", "replace")
        assert r.returncode == 0 and "Traceback" not in err, err
        recs = node.records()
        assert len(recs) == 1, err
        rec = recs[0]
        assert rec["job"] == 77
        # every field whose variable was left alone is recorded as given
        intact = {"SLURM_JOB_USER": ("user", "labuser"), "SLURM_JOB_UID": ("uid", 1001),
                  "SLURM_JOB_ACCOUNT": ("account", "nlp"), "SLURM_JOB_PARTITION": ("partition", "gpu"),
                  "SLURMD_NODENAME": ("node", "gpu03")}
        for var, (key, want) in intact.items():
            if var not in over:
                assert rec[key] == want, (var, rec, err)
        if "SLURM_JOB_GPUS" not in over:
            assert rec["gpus"] == [0, 1]


def test_epilog_writes_its_record_with_a_superscript_restart_count_and_an_unsafe_running_folder(tmp_path):
    node = Node(tmp_path)
    (tmp_path / "spool" / "running").mkdir(mode=0o777)
    r = run(EPILOG, node.env(SLURM_JOB_RESTART_COUNT="²", SLURM_JOB_UID="\u0661\u0660\u0660\u0661"))
    err = r.stderr.decode()
    assert r.returncode == 0, err
    [rec] = node.records()
    assert rec["job"] == 77 and rec["user"] == "labuser" and rec["uid"] is None and rec["start"] is None
    assert rec["restart_count"] is None and rec["run"] is None
    assert "SLURM_JOB_UID='\\u0661\\u0660\\u0660\\u0661' is not a whole number" in err
    assert (tmp_path / "spool" / "jobs" / "77.unknown-run.gpu03.json").exists()


def test_epilog_bookkeeping_crash_does_not_lose_the_record(tmp_path, monkeypatch):
    """Any step around the record (start mark, Slurm's fields, GPU telemetry, stop report, slack windows, scratch)
    may fail with an error nobody foresaw; the record is still written, with that part unknown, and the failure logged."""
    from slurmtools.hooks import epilog
    from slurmtools.hooks.common import HookLog

    node = Node(tmp_path)
    for k, v in node.env(SLURMTOOLS_EPILOG_SCONTROL="1").items():
        monkeypatch.setenv(k.decode(), v.decode())

    # our own bookkeeping steps (including the one that asks scontrol) raise: this tests the epilog's resilience to
    # its own bugs, not Slurm; the real Slurm path is the lab test in test_prolog_fail_closed_lab.py
    def boom(*a, **k):
        raise RuntimeError("unforeseen")

    for name in ("_take_start", "job_fields", "_gpu_telemetry", "_stop_report", "_slack_windows", "_clean_scratch"):
        monkeypatch.setattr(epilog, name, boom)
    lines: list[str] = []

    class Log(HookLog):
        def __call__(self, msg):
            lines.append(msg)

    rec = epilog.run(Log("epilog"))
    assert rec is not None and node.records() == [json.loads(json.dumps(rec))]
    assert rec["start"] is None and rec["qos"] is None and rec["gpu_accounting"] is None
    assert rec["energy_j"] is None and rec["energy_why"] == "GPU telemetry failed" and rec["slack_windows"] is None
    for what in ("start mark", "Slurm's job record", "GPU telemetry", "slack windows", "scratch clean-up"):
        assert any(ln.startswith(f"{what} failed (ignored): RuntimeError: unforeseen") for ln in lines), lines
