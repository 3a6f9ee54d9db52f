"""Prolog/epilog without Slurm: garbage environments, unsafe paths, GPU fault reasons, concurrent epilogs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from slurmtools.hooks import epilog, gpuhealth, safefs
from slurmtools.hooks.common import HookLog, JobEnv, first_host, parse_gpu_indices

REPO = Path(__file__).resolve().parents[2]
PROLOG = REPO / "scripts" / "prolog"
EPILOG = REPO / "scripts" / "epilog"

pytestmark = pytest.mark.usefixtures("require_root")  # hooks run as root; ownership checks need it


def spool(tmp_path) -> Path:
    d = tmp_path / "spool"
    d.mkdir(mode=0o755, exist_ok=True)
    os.chmod(tmp_path, 0o755)
    return d


def base_env(tmp_path, **kw) -> dict:
    env = {"SLURM_JOB_ID": "77", "SLURMD_NODENAME": "gpu03", "SLURM_JOB_USER": "labuser", "SLURM_JOB_UID": "1001",
           "SLURM_JOB_ACCOUNT": "nlp", "SLURM_JOB_PARTITION": "gpu", "SLURM_NODELIST": "gpu[03-04]",
           "SLURM_JOB_GPUS": "0,1", "SLURM_JOB_RESTART_COUNT": "0",  # slurmd sets it, 0 on a first run
           "SLURMTOOLS_SPOOL_DIR": str(spool(tmp_path)), "SLURMTOOLS_EPILOG_SCONTROL": "0",
           "SLURMTOOLS_SCRATCH_PATTERN": str(tmp_path / "scratch-{job_id}"), "SLURMTOOLS_SCONTROL": "/bin/false"}
    env.update(kw)
    return env


def run_hook(hook: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(hook)], env=env, capture_output=True, timeout=60)


GARBAGE = [
    {},
    {"SLURM_JOB_ID": "abc", "SLURMD_NODENAME": "../../etc", "SLURM_JOB_GPUS": "x,,-1,99999999"},
    {"SLURM_JOB_ID": "1" * 40, "SLURM_JOB_UID": "-5", "SLURM_JOB_RESTART_COUNT": "many"},
    {"SLURM_JOB_GPUS": "0,1\n2", "SLURM_NODELIST": "gpu[", "SLURM_JOB_USER": "a b;rm -rf /"},
    {"SLURMTOOLS_SPOOL_DIR": "relative/spool"},
    {"SLURMTOOLS_SPOOL_DIR": "/etc/passwd"},
    {"SLURMTOOLS_SPOOL_DIR": "/nonexistent/deep/spool"},
    {"SLURMTOOLS_LAB_ETC": "/nonexistent", "SLURM_JOB_GPUS": "0"},
    {"SLURMTOOLS_SCRATCH_PATTERN": "/{job_id}/x"},
    {"SLURMTOOLS_SCRATCH_PATTERN": "/etc"},
    {"SLURM_JOB_COMMENT": "x" * 100_000, "SLURMD_NODENAME": "\u00e9\u00e9"},
]


@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("hook", [PROLOG, EPILOG], ids=["prolog", "epilog"])
def test_hooks_never_fail_on_garbage_environment(tmp_path, hook, garbage):
    env = base_env(tmp_path)
    env.update(garbage)
    r = run_hook(hook, env)
    assert r.returncode == 0, r.stderr.decode()
    assert b"Traceback" not in r.stderr
    assert Path("/etc/passwd").is_file()


def test_hooks_survive_non_utf8_environment(tmp_path):
    env = {k.encode(): v.encode() for k, v in base_env(tmp_path).items()}
    env[b"SLURMD_NODENAME"] = b"gpu\xff\xfe"
    env[b"SLURM_JOB_GPUS"] = b"\xc3\x28"
    for hook in (PROLOG, EPILOG):
        r = subprocess.run([str(hook)], env=env, capture_output=True, timeout=60)
        assert r.returncode == 0 and b"Traceback" not in r.stderr


def test_hook_records_have_their_mode_whatever_the_umask(tmp_path):
    """slurmd may leave its hooks a 077 umask (a hardened root's): the records still get the mode written for them,
    and a log that already exists keeps its own."""
    os.chmod(tmp_path, 0o755)
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    old = os.umask(0o077)
    try:
        safefs.write_atomic_at(dfd, "rec.json", b"{}\n")
        safefs.append_at(dfd, "hooks.log", b"one\n")
        os.chmod(tmp_path / "hooks.log", 0o640)     # an admin's choice for an existing log
        safefs.append_at(dfd, "hooks.log", b"two\n")
    finally:
        os.umask(old)
        os.close(dfd)
    assert oct((tmp_path / "rec.json").stat().st_mode & 0o777) == "0o644"
    assert oct((tmp_path / "hooks.log").stat().st_mode & 0o777) == "0o640"
    assert (tmp_path / "hooks.log").read_bytes() == b"one\ntwo\n"


def test_spool_refusals(tmp_path):
    os.chmod(tmp_path, 0o755)
    ww = tmp_path / "ww"
    ww.mkdir()
    os.chmod(ww, 0o777)
    with pytest.raises(safefs.UnsafePath, match="writable by group or others"):
        safefs.open_secure_dir(str(ww))
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(safefs.UnsafePath, match="symlinks are refused"):
        safefs.open_secure_dir(str(tmp_path / "link"))
    user = tmp_path / "user"
    user.mkdir(mode=0o755)
    os.chown(user, 1001, 1001)
    with pytest.raises(safefs.UnsafePath, match="owned by uid 1001"):
        safefs.open_secure_dir(str(user / "x"), create=True)
    assert not (user / "x").exists()


def test_open_secure_dir_create_tolerates_a_concurrent_creator(tmp_path, monkeypatch):
    """Two hooks creating the same folder at once: the loser of the mkdir race must still get the folder."""
    os.chmod(tmp_path, 0o755)
    real_mkdir = os.mkdir

    def racing_mkdir(name, mode=0o777, *, dir_fd=None):
        real_mkdir(name, mode, dir_fd=dir_fd)  # the other hook wins ...
        raise FileExistsError(17, "File exists")  # ... and ours then fails

    monkeypatch.setattr(os, "mkdir", racing_mkdir)
    fd = safefs.open_secure_dir(str(tmp_path / "jobs"), create=True)
    os.close(fd)
    assert (tmp_path / "jobs").is_dir()


def test_epilog_refuses_symlinked_jobs_dir_and_writes_nothing_through_it(tmp_path):
    sp = spool(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o755)
    (sp / "jobs").symlink_to(victim)
    r = run_hook(EPILOG, base_env(tmp_path))
    assert r.returncode == 0
    assert list(victim.iterdir()) == []
    assert b"record not written" in r.stderr


def test_prolog_then_epilog_record(tmp_path):
    env = base_env(tmp_path, SLURM_JOB_EXIT_CODE2="3:0", SLURM_JOB_DERIVED_EC="0")
    scratch = tmp_path / "scratch-77"
    (scratch / "sub").mkdir(parents=True)
    os.chown(scratch, 1001, 1001)
    (scratch / "sub" / "escape").symlink_to("/etc")
    assert run_hook(PROLOG, env).returncode == 0
    assert (spool(tmp_path) / "running" / "77.gpu03").exists()
    assert run_hook(EPILOG, env).returncode == 0
    rec = json.loads((spool(tmp_path) / "jobs" / "77.0.gpu03.json").read_text())
    assert rec["job"] == 77 and rec["user"] == "labuser" and rec["account"] == "nlp" and rec["gpus"] == [0, 1]
    assert rec["exit_code"] == "3:0" and rec["start"] <= rec["end"] and rec["node"] == "gpu03"
    assert not (spool(tmp_path) / "running" / "77.gpu03").exists()
    assert not scratch.exists() and Path("/etc/passwd").exists()


def test_scratch_of_another_user_is_left_alone(tmp_path):
    env = base_env(tmp_path)
    scratch = tmp_path / "scratch-77"
    scratch.mkdir()
    os.chown(scratch, 1002, 1002)
    assert run_hook(EPILOG, env).returncode == 0
    assert scratch.exists()


def write_fake(etc: Path, doc: dict, uid: int = 0) -> None:
    etc.mkdir(mode=0o755, exist_ok=True)
    f = etc / gpuhealth.FAKE_NAME
    f.write_text(json.dumps(doc))
    os.chmod(f, 0o644)
    os.chown(f, uid, uid)


def test_prolog_fails_only_for_a_real_gpu_fault_and_names_it(tmp_path):
    etc = tmp_path / "etc"
    write_fake(etc, {"nodes": {"gpu03": {"count": 8, "faults": {"1": {"ecc_uncorrected": 4}}}}})
    r = run_hook(PROLOG, base_env(tmp_path, SLURMTOOLS_LAB_ETC=str(etc)))
    assert r.returncode == 1
    assert b"GPU 1 (GPU-fake-gpu03-1) has 4 uncorrected ECC errors" in r.stderr
    log = (spool(tmp_path) / "decisions.jsonl").read_text()
    assert json.loads(log)["event"] == "node_drained"
    # the same fault on a GPU the job was not given does not fail this job
    r = run_hook(PROLOG, base_env(tmp_path, SLURMTOOLS_LAB_ETC=str(etc), SLURM_JOB_GPUS="2,3"))
    assert r.returncode == 0


def test_fake_fault_file_from_a_user_is_ignored(tmp_path):
    etc = tmp_path / "etc"
    write_fake(etc, {"default": {"count": 0}}, uid=1001)
    r = run_hook(PROLOG, base_env(tmp_path, SLURMTOOLS_LAB_ETC=str(etc)))
    assert r.returncode == 0
    os.chown(etc / gpuhealth.FAKE_NAME, 0, 0)
    os.chmod(etc, 0o777)  # a folder anyone can write into does not count either
    assert run_hook(PROLOG, base_env(tmp_path, SLURMTOOLS_LAB_ETC=str(etc))).returncode == 0
    os.chmod(etc, 0o755)
    r = run_hook(PROLOG, base_env(tmp_path, SLURMTOOLS_LAB_ETC=str(etc)))
    assert r.returncode == 1 and b"GPU 0,1 not visible (NVML sees 0 GPUs)" in r.stderr


def test_problems_reasons():
    S = gpuhealth.GpuStatus
    gs = [S(0, "GPU-a", 0), S(1, "GPU-b", 1, retired_pages_pending=True), S(2, "", 2, remap_failure=True),
          S(3, "", 3, lost=True)]
    assert gpuhealth.problems(gs, (0,)) == []
    assert gpuhealth.problems(gs, None) == ["GPU 1 (GPU-b) has retired pages pending (reset needed)",
                                            "GPU 2 row remapping failed", "GPU 3 fell off the bus (NVML: GPU is lost)"]
    assert gpuhealth.problems(gs, (0, 7)) == ["GPU 7 not visible (NVML sees 4 GPUs)"]


def test_env_parsing_helpers():
    assert parse_gpu_indices("0, 2,3") == (0, 2, 3)
    assert parse_gpu_indices("0,x") is None and parse_gpu_indices("") is None
    assert first_host("gpu[03-05,09],cpu1") == "gpu03" and first_host("gpu07") == "gpu07"
    assert first_host("[") is None
    j = JobEnv.from_environ({"SLURM_JOB_ID": "12", "SLURMD_NODENAME": "gpu04", "SLURM_NODELIST": "gpu[03-04]"})
    assert j.job_id == 12 and not j.is_first_node


class QuietLog(HookLog):
    def __call__(self, msg: str) -> None:
        pass


def test_64_concurrent_epilogs_100_rounds_one_killed_mid_write(tmp_path):
    """Real processes write at once; one per round is SIGKILLed after writing its data, before the rename.

    Every other record is present and complete, the killed one is absent (never partial), and readers that list
    `*.json` never see a temporary file.
    """
    sp = spool(tmp_path)
    base = base_env(tmp_path, SLURMTOOLS_SCRATCH_PATTERN="none")
    for rnd in range(100):
        victim = (rnd * 7) % 64
        kids = {}
        for k in range(64):
            job = rnd * 64 + k + 1
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    os.environ.clear()
                    os.environ.update(base, SLURM_JOB_ID=str(job), SLURMD_NODENAME=f"gpu{k % 16 + 1:02d}")
                    if k == victim:
                        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # dies with data written
                    epilog.run(QuietLog("epilog"))
                except BaseException:
                    code = 3
                finally:
                    os._exit(code)
            kids[pid] = k
        for pid, k in kids.items():
            _, status = os.waitpid(pid, 0)
            if k == victim:
                assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            else:
                assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    jobs = sp / "jobs"
    records = sorted(p for p in jobs.iterdir() if p.name.endswith(".json"))
    assert len(records) == 64 * 100 - 100
    seen = set()
    for p in records:
        rec = json.loads(p.read_text())
        assert p.name == f"{rec['job']}.0.{rec['node']}.json"
        seen.add(rec["job"])
    victims = {rnd * 64 + (rnd * 7) % 64 + 1 for rnd in range(100)}
    assert seen == set(range(1, 6401)) - victims
    temps = [p for p in jobs.iterdir() if p.name.endswith(".tmp")]
    assert len(temps) == 100 and all(p.name.startswith(".") for p in temps)


def test_epilog_logs_job_reported_preemption_only_from_the_users_own_file(tmp_path):
    """stop.json in the job's scratch: used when owned by the job's user, ignored when planted by another."""
    from slurmtools.hooks import epilog as ep

    env = base_env(tmp_path)
    scratch = tmp_path / "scratch-77"
    scratch.mkdir()
    (scratch / "stop.json").write_text('{"kind": "preempted", "evidence": "PreemptTime=x"}')
    job = JobEnv.from_environ(env)
    os.environ.update(env)
    try:
        os.chown(scratch, 1001, 1001)
        assert ep._stop_report(job, QuietLog("t")) is None  # file still root's, not the job user's
        os.chown(scratch / "stop.json", 1001, 1001)
        assert ep._stop_report(job, QuietLog("t"))["kind"] == "preempted"
        os.chown(scratch, 1002, 1002)
        assert ep._stop_report(job, QuietLog("t")) is None
    finally:
        for k in env:
            os.environ.pop(k, None)


def test_epilog_puts_the_jobs_last_checkpoint_time_into_the_decision_log(tmp_path):
    from slurmtools import audit
    from slurmtools.hooks import epilog as ep

    env = base_env(tmp_path)
    os.environ.update(env)
    try:
        job = JobEnv.from_environ(env)
        fields = {"JobState": "COMPLETING", "Restarts": "1", "QOS": "scavenger", "PreemptTime": "None"}
        report = {"kind": "preempted", "evidence": "PreemptTime=x", "last_checkpoint": 1795294413.4}
        ep._audit(job, fields, 0, report, QuietLog("t"))
        events = list(audit.read(os.path.join(ep.spool_dir(), audit.LOG_NAME)))
        kinds = [e["event"] for e in events]
        assert kinds == ["preempted", "requeued"], events
        assert all(e["details"]["last_checkpoint"] == 1795294413.4 for e in events)
        assert events[0]["details"]["reported_by"] == "job"
    finally:
        for k in env:
            os.environ.pop(k, None)


def test_hooks_use_the_scontrol_of_the_slurmd_that_runs_them(tmp_path):
    """Two Slurms on one host (Debian's in /usr/bin, a site build elsewhere): the hook must talk to the controller
    with the client of the slurmd that started it, found through /proc, not the first scontrol in a fixed list."""
    import shutil
    import sys

    prefix = tmp_path / "slurm-25.11"
    (prefix / "sbin").mkdir(parents=True)
    (prefix / "bin").mkdir()
    daemon = prefix / "sbin" / "slurmd"  # a real executable named slurmd: a copy of this shell
    shutil.copy2("/bin/sh", daemon)
    scontrol = prefix / "bin" / "scontrol"
    scontrol.write_text("#!/bin/sh\nexit 0\n")
    scontrol.chmod(0o755)
    repo = Path(__file__).resolve().parents[2]
    code = "import sys; sys.path.insert(0, sys.argv[1]); from slurmtools.hooks.common import find_scontrol; " \
           "print(find_scontrol())"
    env = {"SLURMTOOLS_SCONTROL": ""}  # no PATH: as slurmd runs hooks
    # slurmd -> python hook (the daemon forks the hook, as slurmd does)
    p = subprocess.run([str(daemon), "-c", f"'{sys.executable}' -c \"{code}\" '{repo}'; true"],
                       capture_output=True, text=True, env=env)
    assert p.stdout.strip() == str(scontrol), p.stderr
    # without such a daemon above it, the usual folders
    p = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True, text=True, env=env)
    assert p.stdout.strip() != str(scontrol)


# ------------------------------------------------------------------------------- topology drift in the prolog

NODE_HEALTH = REPO / "scripts" / "node-health"


def lab_node(etc: Path, spec: dict, expect: dict | None = None) -> None:
    """The lab fault file for gpu03 and, with `expect`, node expectations beside it (both root's)."""
    from tests.unit.test_drift import write_expectations

    write_fake(etc, {"nodes": {"gpu03": spec}})
    if expect is not None:
        write_expectations(etc, host="gpu03", **expect)


def test_prolog_drains_for_a_degraded_nvlink_with_a_one_line_reason(tmp_path):
    etc = tmp_path / "etc"
    lab_node(etc, {"count": 8, "links": {"nvlinks": 18, "pcie_gen": 5, "pcie_width": 16, "pstate": 0},
                   "faults": {"3": {"nvlinks_up": 12}}}, {"gpus": 8, "nvlinks": 18, "hcas": []})
    r = run_hook(PROLOG, base_env(tmp_path, SLURMTOOLS_LAB_ETC=str(etc)))
    assert r.returncode == 1, r.stderr.decode()
    assert b"NODE FAULT: slurmtools prolog: GPU 3 NVLink 12/18 up (down: 12-17)\n" in r.stderr
    assert b"GPU health (lab-fake, 8 GPUs, job GPUs (0, 1)): ok" in r.stderr
    rec = json.loads((spool(tmp_path) / "decisions.jsonl").read_text())
    assert rec["event"] == "node_drained" and rec["details"]["faults"] == ["GPU 3 NVLink 12/18 up (down: 12-17)"]


def test_prolog_of_a_cpu_job_drains_for_an_hca_at_hdr(tmp_path):
    from tests.unit.test_drift import sysfs

    etc = tmp_path / "etc"
    root = sysfs(tmp_path / "fake-sys", {"mlx5_0": "400 Gb/sec (4X NDR)", "mlx5_1": "200 Gb/sec (4X HDR)"})
    lab_node(etc, {"count": 8, "sysfs_root": str(root)}, {"gpus": 8, "nvlinks": 18})
    env = base_env(tmp_path, SLURMTOOLS_LAB_ETC=str(etc))
    del env["SLURM_JOB_GPUS"]
    r = run_hook(PROLOG, env)
    assert r.returncode == 1, r.stderr.decode()
    assert b"NODE FAULT: slurmtools prolog: HCA mlx5_1 port 1 at 200 Gb/sec (4X HDR), declared 4X NDR\n" in r.stderr
    # the lab fake states no GPU links: said, not guessed
    assert b"GPU links: the lab fault file states no links" in r.stderr


def test_prolog_keeps_the_node_for_a_malformed_or_missing_expectations_file(tmp_path):
    etc = tmp_path / "etc"
    lab_node(etc, {"count": 8, "links": {"nvlinks": 18}, "faults": {"0": {"nvlinks_up": 1}}})
    r = run_hook(PROLOG, base_env(tmp_path, SLURMTOOLS_LAB_ETC=str(etc)))
    assert r.returncode == 0
    assert f"topology drift: not checked (no {etc}/slurmtools-node-expectations.json)".encode() in r.stderr
    (etc / "slurmtools-node-expectations.json").write_text('{"format": "slurmtools.node-expectations/1", '
                                                           '"profiles": {"p": {"gpus": "8"}}, "hosts": {"gpu03": "p"}}')
    r = run_hook(PROLOG, base_env(tmp_path, SLURMTOOLS_LAB_ETC=str(etc)))
    assert r.returncode == 0
    assert (f"topology drift: not checked (malformed: {etc}/slurmtools-node-expectations.json: profiles.p.gpus: "
            f"expected a whole number or null, found '8')").encode() in r.stderr


def test_prolog_drift_imports_no_heavy_module(tmp_path):
    """The prolog must start fast: the drift check runs on the standard library (no json, re, typing)."""
    etc = tmp_path / "etc"
    lab_node(etc, {"count": 8, "links": {"nvlinks": 18, "pcie_gen": 5, "pcie_width": 16}},
             {"gpus": 8, "nvlinks": 18, "hcas": []})
    heavy = ("json", "re", "typing", "dataclasses", "networkx", "pynvml")
    code = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from slurmtools.hooks.prolog import main; rc = main(); "
            f"print('HEAVY', sorted(m for m in {heavy!r} if m in sys.modules)); sys.exit(rc)")
    r = subprocess.run(["/usr/bin/python3", "-I", "-c", code, str(REPO)], capture_output=True, timeout=60,
                       env=base_env(tmp_path, SLURMTOOLS_LAB_ETC=str(etc)))
    assert r.returncode == 0, r.stderr.decode()
    assert b"topology drift (" in r.stderr and b"facts compared" in r.stderr
    assert r.stdout.strip() == b"HEAVY []"


def test_node_health_dry_run_names_the_faults_and_drains_nothing(tmp_path):
    etc = tmp_path / "etc"
    lab_node(etc, {"count": 7, "links": {"nvlinks": 18, "pcie_gen": 5, "pcie_width": 16},
                   "faults": {"2": {"pcie_width": 8}}}, {"gpus": 8, "nvlinks": 18, "hcas": []})
    env = base_env(tmp_path, SLURMTOOLS_LAB_ETC=str(etc), SLURMTOOLS_SCONTROL="/nonexistent")
    r = subprocess.run([str(NODE_HEALTH), "--dry-run"], env=env, capture_output=True, timeout=60)
    assert r.returncode == 1, r.stderr.decode()
    assert r.stdout == b"slurmtools node-health: NVML sees 7 GPUs, 8 declared; GPU 2 PCIe x8 of max x16\n"
    env.pop("SLURMTOOLS_LAB_ETC")
    r = subprocess.run([str(NODE_HEALTH), "--dry-run"], env=env, capture_output=True, timeout=60)
    assert r.returncode == 0 and b"topology drift: not checked" in r.stderr


@pytest.mark.parametrize("release", ["22.05.8", "25.11.7"])
def test_node_reason_reads_a_drained_node_as_each_release_prints_it(release):
    """`drain` keeps a reason someone else gave: it reads the node's State flags and its Reason without Slurm's
    `[user@time]` stamp from `scontrol show node` as the labs of both releases printed it."""
    from slurmtools.hooks.common import OUR_REASONS, node_reason
    from tests.conftest import TEST_DATA

    text = (TEST_DATA / "slurm" / f"scontrol-show-node-drained-lab-{release}.txt").read_text()
    assert node_reason(text) == ({"IDLE", "DRAIN"}, "RMA ticket 4711")
    ours = text.replace("Reason=RMA ticket 4711", "Reason=slurmtools node-health: GPU 2 lost")
    assert node_reason(ours)[1] == "slurmtools node-health: GPU 2 lost" and ours.count(OUR_REASONS) == 1
    idle = "\n".join(ln.replace("IDLE+DRAIN", "IDLE") for ln in text.splitlines() if "Reason=" not in ln)
    assert node_reason(idle) == ({"IDLE"}, "")
