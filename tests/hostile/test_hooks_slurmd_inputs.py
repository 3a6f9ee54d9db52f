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
5. The epilog renamed a new record over an existing one of the same job, run and node.
6. User names: SLURM_JOB_USER is the job's passwd name (Slurm 25.11 prep_script_slurmd.c: `pw_name`), and the
   hooks recorded `user: null` for names outside letters, digits and `._@-`: `DOMAIN\\user` (winbind),
   `john smith`, `HOST$`, `josé`, so reports lost who used the GPUs. Only what cannot be a name to record
   (control characters, bytes that are not UTF-8, empty, over 255 bytes) is refused, with the reason logged.
7. A start mark holding `nan`, `inf`, a negative or far-future time was taken as the run's start (a null start
   "from the prolog", or a time the reports refuse, so the record was lost to them).
8. Configless nodes: slurmd sets SLURM_CONF to its conf-cache (Slurm 25.11 slurmd.c `_establish_configuration`),
   which holds Slurm's own files only, so the expectations file in /etc/slurm was never found.
9. The lab fault file with a wrong type (`"nodes": ["gpu03"]`, a fault that is a string) crashed the check, and
   the node was kept without a word about the file.
10. Clusters: job ids are per cluster, and the record did not say which cluster ran the job, so records collected
   from several clusters joined one cluster's GPU use to another's job of the same id. slurmd gives the hooks
   SLURM_CLUSTER_NAME (25.11 prep_script_slurmd.c `_build_env`; 22.05.8's prep_script.so holds the same name);
   the record keeps it, null with the reason logged when it is absent or cannot be a cluster's name.
11. `scontrol show job -o` split on blanks, first word wins: a job named `a b QOS=production` (the 22.05.8 lab
   capture) had its QoS recorded as production, and `x Restarts=3 JobState=REQUEUED` made a completed first run
   "run 2, requeued" with a requeue event. Now read by `slurm.show_job`; a record showing a field twice is not read.
12. On 22.05 the start of a requeued run came from `sacct -j N -o Start`, which also lists the tasks of array N and
   the components of het job N (slurmdbd matches id_job, id_array_job and het_job_id): a sibling's start was taken.
13. SLURM_JOB_USER is slurmd's stand-in when the node cannot resolve the uid (25.11 `uid_to_string`: the digits;
   `nobody` in older releases): recorded as the user's name.
14. An absent SLURM_JOB_RESTART_COUNT was taken for 0, a first run; slurmd sets it for every job.
15. SLURM_SCRIPT_CONTEXT was read and not used: configured as PrologSlurmctld the prolog checked the controller's
   GPUs and exited 1 (slurmctld then requeues the job); as EpilogSlurmctld the epilog wrote records of the controller.
16. SLURM_JOB_EXIT_CODE and SLURM_JOB_DERIVED_EC are wait statuses (`256` is exit 1) and were recorded raw beside
   EXIT_CODE2's `1:0`; under PrologFlags=RunInJob slurmstepd gives `0:0` whatever the job's end, recorded as its own.
17. SLURM_JOB_GPUS holds GRES indices, which slurmd numbers in NVML's PCI order under AutoDetect and in gres.conf's
   File= order otherwise; the hooks match by device minor, so on a node whose minors are not NVML's order they
   checked and measured other GPUs than the job's.
18. A gres/mps or gres/shard job's GPU is shared with other jobs: its whole energy and processes were the job's.
19. A host list longer than 4096 characters was recorded cut.
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
from slurmtools.hooks.labfake import FAKE_NAME
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
    job = JobEnv.from_environ({"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "3,4", "CUDA_VISIBLE_DEVICES": cvd,
                               "SLURM_JOB_RESTART_COUNT": "0"})
    assert job.gpus is None and job.gpus_given
    assert job.problems == ["CUDA_VISIBLE_DEVICES names MIG devices: SLURM_JOB_GPUS's indices count MIG slices, "
                            "not GPUs; the job's GPUs are unknown"]
    # whole GPUs: CUDA_VISIBLE_DEVICES holds the same indices, read as before
    job = JobEnv.from_environ({"SLURM_JOB_GPUS": "3,4", "CUDA_VISIBLE_DEVICES": "3,4", "SLURM_JOB_RESTART_COUNT": "0"})
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


# ------------------------------------------------------------------------------------------ 6. user names

#: passwd names Slurm runs jobs for: winbind's DOMAIN\user, sssd's fully qualified names, AD names with a space,
#: a machine account, upper case, a name that is not ASCII, one that looks like a path, the longest Linux allows
USERS = ["EXAMPLE\\alice", "alice@realm.example", "John Smith", "HOST$", "First.Last", "jos\u00e9", "../../etc/x",
         "-rf", "a" * 255]


@pytest.mark.parametrize("user", USERS)
def test_every_passwd_name_is_recorded_as_it_is(tmp_path, user):
    from slurmtools.reports.epilog import read_epilog_dir

    node = Node(tmp_path)
    r = run(PROLOG, node.env(SLURM_JOB_USER=user))  # the lab's sick GPU: drained, in the decision log
    assert r.returncode == 1 and "SLURM_JOB_USER" not in r.stderr.decode(), r.stderr.decode()
    [drained] = [json.loads(ln) for ln in (node.spool / "decisions.jsonl").read_text().splitlines()]
    assert drained["user"] == user
    r = run(EPILOG, node.env(SLURM_JOB_USER=user))
    assert r.returncode == 0 and "Traceback" not in r.stderr.decode()
    [rec] = node.records()
    assert rec["user"] == user
    # nothing is named after the user: the spool holds what it holds for any user
    assert sorted(str(p.relative_to(node.spool)) for p in node.spool.rglob("*")) == [
        "decisions.jsonl", "decisions.jsonl.seq.prolog@gpu03", "hooks.log", "jobs", "jobs/77.0.gpu03.json",
        "running"]
    # the reports group by it
    got = read_epilog_dir(node.spool / "jobs")
    assert list(got.frame["user"]) == [user] and not got.problems


@pytest.mark.parametrize("raw, why", [
    ("ali\nce", "character 3 is '\\n', a control or unprintable character"),
    ("ali\x1b[2Jce", "character 3 is '\\x1b', a control or unprintable character"),
    ("ali\u2028ce", "character 3 is '\\u2028', a control or unprintable character"),
    (b"ali\xe9", "character 3 is the byte 0xe9, not UTF-8"),
    ("a" * 256, "256 bytes, more than the 255 a Linux user name can have"),
])
def test_what_cannot_be_a_user_name_is_refused_with_the_reason(tmp_path, raw, why):
    node = Node(tmp_path)
    r = run(EPILOG, node.env(SLURM_JOB_USER=raw))
    err = r.stderr.decode()
    assert r.returncode == 0 and "Traceback" not in err
    [rec] = node.records()
    assert rec["user"] is None and rec["job"] == 77  # the record is kept, its user unknown
    shown = ascii(raw if isinstance(raw, str) else raw.decode("utf-8", "surrogateescape"))[:80]
    assert f"SLURM_JOB_USER={shown} is not a user name ({why}); unknown" in err, err


def test_an_empty_user_name_is_said():
    job = JobEnv.from_environ({"SLURM_JOB_ID": "7", "SLURM_JOB_USER": " ", "SLURM_JOB_RESTART_COUNT": "0"})
    assert job.user is None and job.problems == ["SLURM_JOB_USER=' ' is empty; unknown"]


# ---------------------------------------------------------------------- 7. a start mark that is no time

@pytest.mark.parametrize("start, why", [
    ("nan", "its start 'nan' is not epoch seconds"),
    ("inf", "its start 'inf' is not epoch seconds"),
    ("-5.000", "its start '-5.000' is not epoch seconds"),
    ("1e12", "its start '1e12' is not epoch seconds"),
    ("0.000", "its start 0.000 is not after 1970"),
    ("99999999999.000", "its start 99999999999.000 is "),
])
def test_a_start_mark_that_is_no_time_leaves_the_start_unknown(tmp_path, start, why):
    from slurmtools.reports.epilog import read_epilog_dir

    node = Node(tmp_path)
    (node.spool / "running").mkdir(mode=0o755)
    (node.spool / "running" / "77.gpu03").write_text(f"{start} 0 e=0:1000,1:2000\n")
    r = run(EPILOG, node.env())
    err = r.stderr.decode()
    assert r.returncode == 0 and "Traceback" not in err
    [rec] = node.records()
    assert rec["start"] is None and rec["start_source"] is None  # Slurm is not asked here: unknown, not a time
    assert rec["energy_j"] is None and rec["energy_why"].startswith(f"the prolog's start mark was refused ({why}")
    assert f"start mark refused ({why}" in err and "its start, run and energy counters are not used" in err
    assert not (node.spool / "running" / "77.gpu03").exists()
    assert len(read_epilog_dir(node.spool / "jobs").frame) == 1  # the reports still read the record


def test_a_start_mark_of_the_prolog_is_still_the_start(tmp_path):
    node = Node(tmp_path)
    (node.spool / "running").mkdir(mode=0o755)
    (node.spool / "running" / "77.gpu03").write_text("1790000000.125 0\n")
    assert run(EPILOG, node.env()).returncode == 0
    [rec] = node.records()
    assert rec["start"] == 1790000000.125 and rec["start_source"] == "prolog" and rec["run"] == 0


# ------------------------------------------------------------------- 8. expectations on a configless node

def configless(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """A configless node's folders: slurmd's conf-cache (SLURM_CONF points there) and the admin's etc folder."""
    from slurmtools.hooks import expectations

    cache = tmp_path / "spool-slurmd" / "conf-cache"
    cache.mkdir(parents=True, mode=0o755)
    (cache / "slurm.conf").write_text("ClusterName=lab\n")
    etc = tmp_path / "etc-slurm"
    etc.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    os.chmod(cache.parent, 0o755)
    for k in ("SLURMTOOLS_NODE_EXPECTATIONS", "SLURMTOOLS_LAB_ETC"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SLURM_CONF", str(cache / "slurm.conf"))
    monkeypatch.setattr(expectations, "DEFAULT_DIR", str(etc))
    return cache, etc


def test_configless_node_reads_the_expectations_installed_in_etc(tmp_path, monkeypatch):
    from slurmtools.hooks import expectations, nodecheck
    from tests.unit.test_drift import write_expectations

    cache, etc = configless(tmp_path, monkeypatch)
    assert expectations.paths() == [str(cache / expectations.NAME), str(etc / expectations.NAME)]
    log = Lines()
    assert nodecheck.check("gpu01", None, False, log) == []
    assert log.lines == [f"topology drift: not checked (no {cache / expectations.NAME} nor {etc / expectations.NAME})"]
    write_expectations(etc, hcas=[])
    log = Lines()
    assert nodecheck.check("gpu01", None, False, log) == []
    [line] = log.lines
    assert line.startswith(f"topology drift ({etc / expectations.NAME}, profile ")  # the file read, named


def test_a_copy_beside_slurm_conf_comes_first_and_the_other_is_named(tmp_path, monkeypatch):
    from slurmtools.hooks import expectations, nodecheck
    from tests.unit.test_drift import write_expectations

    cache, etc = configless(tmp_path, monkeypatch)
    write_expectations(etc, hcas=[])
    write_expectations(cache, hcas=[])
    log = Lines()
    nodecheck.check("gpu01", None, False, log)
    assert log.lines[0] == (f"expectations: {cache / expectations.NAME} read; {etc / expectations.NAME} is there "
                            "too and not read")
    assert log.lines[1].startswith(f"topology drift ({cache / expectations.NAME}, profile ")
    # a copy that is there but refused is reported, never passed over for the other
    os.chmod(cache / expectations.NAME, 0o666)
    exp, why = nodecheck._expectations("gpu01")
    assert exp is None and why.startswith(f"file refused: {cache / expectations.NAME}: writable by group or others")


def test_an_explicit_expectations_file_is_the_only_one_read(tmp_path, monkeypatch):
    from slurmtools.hooks import expectations, nodecheck
    from tests.unit.test_drift import write_expectations

    cache, etc = configless(tmp_path, monkeypatch)
    write_expectations(etc, hcas=[])
    monkeypatch.setenv("SLURMTOOLS_NODE_EXPECTATIONS", str(tmp_path / "absent.json"))
    assert nodecheck._expectations("gpu01") == (None, f"no {tmp_path / 'absent.json'}")


# ------------------------------------------------------------------------- 9. the lab fault file's types

@pytest.mark.parametrize("doc, field", [
    ({"nodes": []}, "nodes: expected an object of node names, found a list"),
    ({"nodes": ["gpu03"]}, "nodes: expected an object of node names, found a list"),
    ({"nodes": {"gpu03": {"count": "eight"}}}, "nodes.gpu03.count: expected a whole number from 0 to 1024, found "
                                               "a string 'eight'"),
    ({"nodes": {"gpu03": {"faults": {"1": {"ecc_uncorrected": "two"}}}}},
     "nodes.gpu03.faults.1.ecc_uncorrected: expected a whole number of 0 or more, found a string 'two'"),
    ({"nodes": {"gpu03": {"faults": {"1": "ecc"}}}}, "nodes.gpu03.faults.1: expected an object of faults, found a "
                                                     "string"),
    ({"nodes": {"gpu03": {"faults": ["1"]}}}, "nodes.gpu03.faults: expected an object of GPU indices, found a list"),
    ({"nodes": {"gpu03": {"faults": {"9": {"lost": True}}}}}, "nodes.gpu03.faults.9: expected a GPU index below "
                                                              "the node's count (8)"),
    ({"nodes": {"gpu03": {"links": {"nvlinks": "18"}}}}, "nodes.gpu03.links.nvlinks: expected a whole number of 0 "
                                                         "or more, or null, found a string '18'"),
    ({"nodes": {"gpu03": {"power_w": "300"}}}, "nodes.gpu03.power_w: expected watts, a number of 0 or more, found a "
                                               "string '300'"),
    ({"default": []}, "default: expected an object, found a list"),
    ({"nodes": {"gpu04": {"faults": {"0": {"ecc": 1}}}}}, "nodes.gpu04.faults.0.ecc: unknown field"),
])
def test_a_lab_fault_file_of_wrong_types_is_refused_naming_the_field(tmp_path, doc, field):
    node = Node(tmp_path)
    fake = node.etc / "slurmtools-fake-gpu-health.json"
    fake.write_text(json.dumps(doc))
    said = f"lab fault file not used: refused: {fake}: {field}"
    r = run(PROLOG, node.env())
    err = r.stderr.decode()
    assert r.returncode == 0 and node.drains() == [], err  # no fault stated: the node is kept
    assert "crashed" not in err and "Traceback" not in err and said in err, err
    r = run(PROLOG.parent / "node-health", node.env(SLURMTOOLS_SCONTROL="/nonexistent"))
    err = r.stderr.decode()
    assert r.returncode == 0 and "crashed" not in err and said in err, err
    r = run(EPILOG, node.env())
    [rec] = node.records()
    assert r.returncode == 0 and rec["energy_why"].startswith(said), rec["energy_why"]


# ------------------------------------------------------------------------------------------- 10. clusters

def test_the_record_names_the_cluster_slurmd_gives_and_the_report_keeps_the_sites(tmp_path):
    from slurmtools.reports.epilog import read_epilog_dir

    node = Node(tmp_path)
    r = run(EPILOG, node.env(SLURM_CLUSTER_NAME="alpha"))
    assert r.returncode == 0 and "SLURM_CLUSTER_NAME" not in r.stderr.decode(), r.stderr.decode()
    [rec] = node.records()
    assert rec["cluster"] == "alpha" and rec["job"] == 77
    # the same job id on another cluster, collected into the same folder
    other = {**rec, "cluster": "beta", "node": "b-gpu03"}
    (node.spool / "jobs" / "77.0.b-gpu03.json").write_text(json.dumps(other))
    got = read_epilog_dir(node.spool / "jobs", cluster="alpha")
    assert got.frame[["job_id_raw", "gpus", "nodes"]].values.tolist() == [[77, 2, 1]]
    [b] = got.bad.rows
    assert b.source.endswith("77.0.b-gpu03.json") and "of cluster beta, not of alpha" in b.reason


@pytest.mark.parametrize("raw, said", [
    (None, "SLURM_CLUSTER_NAME absent or empty (slurmd 22.05 and 25.11 set it); the record's cluster is unknown "
           "(null)"),
    ("  ", "SLURM_CLUSTER_NAME absent or empty (slurmd 22.05 and 25.11 set it); the record's cluster is unknown "
           "(null)"),
    ("al pha", "SLURM_CLUSTER_NAME='al pha' is not a cluster name; unknown"),
    ("alpha\nbeta", "SLURM_CLUSTER_NAME='alpha\\nbeta' is not a cluster name; unknown"),
    (b"alpha\xff", "SLURM_CLUSTER_NAME='alpha\\udcff' is not a cluster name; unknown"),
    ("a" * 65, f"SLURM_CLUSTER_NAME='{'a' * 65}' is not a cluster name; unknown"),
])
def test_a_cluster_slurmd_did_not_give_is_null_with_the_reason(tmp_path, raw, said):
    node = Node(tmp_path)
    env = node.env() if raw is None else node.env(SLURM_CLUSTER_NAME=raw)
    r = run(EPILOG, env)
    err = r.stderr.decode()
    assert r.returncode == 0 and "Traceback" not in err
    [rec] = node.records()
    assert "cluster" in rec and rec["cluster"] is None and rec["job"] == 77  # the record is kept, its cluster unknown
    assert said in err and said in (node.spool / "hooks.log").read_text(), err


def test_the_cluster_is_read_like_every_other_variable():
    job = JobEnv.from_environ({"SLURM_JOB_ID": "7", "SLURM_CLUSTER_NAME": " gpu-east.2 ",
                               "SLURM_JOB_RESTART_COUNT": "0"})
    assert job.cluster == "gpu-east.2" and job.problems == []
    assert JobEnv.from_environ({"SLURM_JOB_ID": "7"}).cluster is None


def test_the_prolog_logs_why_a_variable_is_unknown_in_hooks_log(tmp_path):
    """The prolog reads the job before it opens its spool folder; a variable it cannot read is said in hooks.log
    all the same (slurmd shows a prolog's stderr only when it fails, and this one passes)."""
    node = Node(tmp_path)
    (node.etc / FAKE_NAME).write_text(json.dumps({"default": {"count": 8}}))  # a healthy node
    r = run(PROLOG, node.env(SLURM_JOB_UID="abc", SLURM_CLUSTER_NAME="al pha"))
    assert r.returncode == 0, r.stderr.decode()
    log = (node.spool / "hooks.log").read_text()
    assert "SLURM_JOB_UID='abc' is not a whole number; unknown" in log, log
    assert "SLURM_CLUSTER_NAME='al pha' is not a cluster name; unknown" in log, log


# ------------------------------------------------- 11. Slurm's job record read word by word, first word wins

def fake_slurm(tmp_path: Path, show_job: str, sacct_rows: list[tuple[int, str]] | None = None) -> Path:
    """A root-owned scontrol printing `show_job` for `scontrol show job`, and a sacct beside it printing
    `sacct_rows` (JobIDRaw, Start) as `-o JobIDRaw,Start` prints them, or only their starts for `-o Start`."""
    bin_ = tmp_path / "slurm-bin"
    bin_.mkdir(mode=0o755)
    (bin_ / "job.txt").write_text(show_job)
    (bin_ / "raw.txt").write_text("".join(f"{j}|{s}\n" for j, s in sacct_rows or []))
    (bin_ / "start.txt").write_text("".join(f"{s}\n" for _, s in sacct_rows or []))
    (bin_ / "scontrol").write_text(f'#!/bin/sh\n[ "$1 $2" = "show job" ] && exec cat {bin_ / "job.txt"}\nexit 0\n')
    (bin_ / "sacct").write_text(f'#!/bin/sh\ncase "$*" in *JobIDRaw,Start*) exec cat {bin_ / "raw.txt"};; esac\n'
                                f'exec cat {bin_ / "start.txt"}\n')
    for f in bin_.iterdir():
        os.chmod(f, 0o755)
    return bin_ / "scontrol"


def epilog_env(node: Node, monkeypatch, **over: str) -> None:
    for k, v in node.env(**over).items():
        monkeypatch.setenv(k.decode(), v.decode())


DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def test_a_job_name_holding_slurms_field_names_is_not_read_as_slurms_fields(tmp_path, monkeypatch):
    """Job 1 of the 22.05.8 lab capture is named `a b QOS=production Partition=evil`; its QoS is standard. Split on
    blanks with the first word winning, the record said production."""
    node = Node(tmp_path)
    [job1] = [ln for ln in (DATA / "scontrol-show-job-o-22.05.8.txt").read_text().splitlines()
              if ln.startswith("JobId=1 ")]
    scontrol = fake_slurm(tmp_path, job1 + "\n")
    epilog_env(node, monkeypatch, SLURM_JOB_ID="1", SLURMTOOLS_EPILOG_SCONTROL="1", SLURMTOOLS_SCONTROL=str(scontrol))
    log = Lines()
    rec = epilog.run(log)
    assert rec["qos"] is None and rec["job_state"] is None  # unknown, never the name's words
    assert any(ln.startswith("Slurm's job record not read: QOS= is printed twice") for ln in log.lines), log.lines


def test_a_job_name_cannot_make_a_run_requeued(tmp_path, monkeypatch):
    """`-J "x Restarts=3 JobState=REQUEUED"`: read first word wins, the job's completed first run became run 2,
    requeued, with a `requeued` event in the decision log."""
    node = Node(tmp_path)
    line = (DATA / "scontrol-show-job-o-25.11.7.txt").read_text().splitlines()[0]
    line = (line.replace("JobId=13 JobName=my run", "JobId=77 JobName=x Restarts=3 JobState=REQUEUED")
            .replace("JobState=PENDING Reason=JobHeldUser", "JobState=COMPLETING Reason=None")
            .replace("StartTime=Unknown EndTime=Unknown", "StartTime=2026-11-27T08:53:20 EndTime=2026-11-27T08:54:00"))
    scontrol = fake_slurm(tmp_path, line + "\n")
    epilog_env(node, monkeypatch, SLURMTOOLS_EPILOG_SCONTROL="1", SLURMTOOLS_SCONTROL=str(scontrol))
    rec = epilog.run(Lines(), now=1_800_000_000.0)
    assert rec["run"] == 0 and rec["requeued"] is not True and rec["job_state"] is None
    log = node.spool / "decisions.jsonl"
    assert not log.exists() or "requeued" not in log.read_text()


def test_the_record_of_this_job_is_read_where_scontrol_prints_several():
    """The array's own id (carried by one of its tasks) and a heterogeneous leader print one record per task or
    component; the one whose JobId is the hook's job is read. (slurmctld's `pack_one_job` prints the job's own
    record first, so the old reader was right by that order; which record is read no longer depends on it.)"""
    from slurmtools.hooks import common

    text = ("JobId=2101 ArrayJobId=2100 ArrayTaskId=1 JobName=a UserId=u(1) QOS=low JobState=RUNNING Restarts=0\n"
            "JobId=2100 ArrayJobId=2100 ArrayTaskId=9 JobName=a UserId=u(1) QOS=high JobState=COMPLETING "
            "Restarts=2\n")
    orig = common.scontrol
    try:
        common.scontrol = lambda args, timeout=10.0: (0, text)
        f = common.job_fields(2100)
    finally:
        common.scontrol = orig
    assert (f["JobId"], f["QOS"], f["Restarts"]) == ("2100", "high", "2")


# --------------------------------------------- 12. sacct -j N answers for N's array tasks and het components

def test_the_start_sacct_gives_is_of_this_jobs_own_rows(tmp_path, monkeypatch):
    """22.05 (no SLURM_JOB_START_TIME), a requeued run whose prolog left no mark: its start is asked of sacct. The
    job is the array task carrying the array's id 77: `sacct -j 77` also lists tasks 78 and 79, started earlier."""
    from slurmtools.hooks.run_identity import slurm_time

    node = Node(tmp_path)
    record = ("JobId=77 ArrayJobId=77 ArrayTaskId=4 JobName=a UserId=labuser(1001) QOS=normal JobState=COMPLETING "
              "Reason=None Requeue=1 Restarts=1 StartTime=2026-11-24T06:00:00 EndTime=Unknown PreemptTime=None\n")
    rows = [(78, "2026-11-24T05:00:00"), (79, "2026-11-24T05:01:00"), (77, "2026-11-24T05:30:00"), (77, "Unknown")]
    scontrol = fake_slurm(tmp_path, record, rows)
    epilog_env(node, monkeypatch, SLURM_JOB_RESTART_COUNT="1", SLURMTOOLS_EPILOG_SCONTROL="1",
               SLURMTOOLS_SCONTROL=str(scontrol))
    rec = epilog.run(Lines(), now=slurm_time("2026-11-24T06:00:00") + 1)
    assert (rec["run"], rec["requeued"], rec["start_source"]) == (0, True, "sacct")
    assert rec["start"] == slurm_time("2026-11-24T05:30:00")  # task 78's 05:00 was taken


# ------------------------------------------------------- 13. a user name slurmd could not resolve

@pytest.mark.parametrize("user, uid", [("4242", "4242"), ("nobody", "4242")])
def test_slurmds_stand_in_for_an_unresolved_uid_is_no_user_name(user, uid):
    job = JobEnv.from_environ({"SLURM_JOB_ID": "7", "SLURM_JOB_USER": user, "SLURM_JOB_UID": uid,
                               "SLURM_JOB_RESTART_COUNT": "0"})
    assert job.user is None and job.uid == 4242
    assert job.problems == [f"SLURM_JOB_USER='{user}' is slurmd's stand-in for uid 4242, which it could not resolve "
                            "to a name; unknown"]
    # nobody's own jobs, and names that only look alike, are names
    assert JobEnv.from_environ({"SLURM_JOB_USER": "nobody", "SLURM_JOB_UID": "65534"}).user == "nobody"
    assert JobEnv.from_environ({"SLURM_JOB_USER": "4242x", "SLURM_JOB_UID": "4242"}).user == "4242x"


# ------------------------------------------------------------- 14. no restart count is no "first run"

def test_an_absent_restart_count_is_unknown_not_a_first_run():
    job = JobEnv.from_environ({"SLURM_JOB_ID": "7"})
    assert job.restart_count is None
    assert job.problems == ["SLURM_JOB_RESTART_COUNT absent or empty (slurmd sets it, 0 on a job's first run); the "
                            "run is unknown"]
    assert JobEnv.from_environ({"SLURM_JOB_RESTART_COUNT": "0"}).restart_count == 0


# -------------------------------------------------------------------- 15. SLURM_SCRIPT_CONTEXT

def test_the_prolog_configured_as_prolog_slurmctld_drains_nothing_and_fails_no_job(tmp_path):
    """On the controller (PrologSlurmctld: no SLURMD_NODENAME, SlurmctldUser) the prolog checked the controller's
    GPUs and exited 1, which makes slurmctld requeue the job."""
    node = Node(tmp_path)  # every GPU of the lab's fake node is sick
    env = node.env(SLURM_SCRIPT_CONTEXT="prolog_slurmctld")
    del env[b"SLURMD_NODENAME"]
    r = run(PROLOG, env)
    err = r.stderr.decode()
    assert r.returncode == 0 and node.drains() == [], err
    assert "SLURM_SCRIPT_CONTEXT=prolog_slurmctld: this hook is slurmd's Prolog; nothing done" in err
    assert not (node.spool / "running").exists()
    # slurmd's own prolog context checks as before
    assert run(PROLOG, node.env(SLURM_SCRIPT_CONTEXT="prolog_slurmd")).returncode == 1


def test_the_epilog_configured_as_epilog_slurmctld_writes_no_record(tmp_path):
    node = Node(tmp_path)
    env = node.env(SLURM_SCRIPT_CONTEXT="epilog_slurmctld", SLURM_ARRAY_JOB_ID="70", SLURM_ARRAY_TASK_ID="7")
    del env[b"SLURMD_NODENAME"]
    r = run(EPILOG, env)
    err = r.stderr.decode()
    assert r.returncode == 0 and node.records() == [], err
    assert "SLURM_SCRIPT_CONTEXT=epilog_slurmctld: this hook is slurmd's Epilog; nothing done" in err
    assert sorted(p.name for p in node.spool.iterdir()) == []
    r = run(EPILOG, node.env(SLURM_SCRIPT_CONTEXT="epilog_slurmd"))
    assert r.returncode == 0 and len(node.records()) == 1


# ------------------------------------------------------------------------------------ 16. exit codes

@pytest.mark.parametrize("env, exit_code, derived", [
    ({"SLURM_JOB_EXIT_CODE2": "7:0", "SLURM_JOB_EXIT_CODE": "1792", "SLURM_JOB_DERIVED_EC": "256"}, "7:0", "1:0"),
    ({"SLURM_JOB_EXIT_CODE2": "0:9", "SLURM_JOB_EXIT_CODE": "9", "SLURM_JOB_DERIVED_EC": "0"}, "0:9", "0:0"),
    ({"SLURM_JOB_EXIT_CODE": "256"}, "1:0", None),             # EXIT_CODE is a wait status: exit 1
    ({"SLURM_JOB_EXIT_CODE": "15"}, "0:15", None),             # killed by SIGTERM
    ({"SLURM_JOB_EXIT_CODE2": "x", "SLURM_JOB_EXIT_CODE": "2048"}, "8:0", None),
    ({"SLURM_JOB_DERIVED_EC": "34304"}, None, "134:0"),
])
def test_exit_codes_are_read_as_slurmd_writes_them(env, exit_code, derived):
    job = JobEnv.from_environ({"SLURM_JOB_ID": "7", "SLURM_JOB_RESTART_COUNT": "0", **env})
    assert (job.exit_code, job.derived_exit) == (exit_code, derived)


def test_exit_codes_that_are_none_are_said():
    job = JobEnv.from_environ({"SLURM_JOB_ID": "7", "SLURM_JOB_RESTART_COUNT": "0", "SLURM_JOB_EXIT_CODE2": "1:0:0",
                               "SLURM_JOB_DERIVED_EC": "-1"})
    assert (job.exit_code, job.derived_exit) == (None, None)
    assert job.problems == ["SLURM_JOB_EXIT_CODE2='1:0:0' is not an exit code and signal; unknown",
                            "SLURM_JOB_DERIVED_EC='-1' is not a wait status; unknown"]


def test_the_epilog_slurmstepd_runs_keeps_no_exit_code(tmp_path, monkeypatch):
    """PrologFlags=RunInJob: slurmstepd runs the epilog with SLURM_JOB_EXIT_CODE2=0:0 whatever the job's end."""
    from slurmtools.hooks import common

    node = Node(tmp_path)
    epilog_env(node, monkeypatch, SLURM_JOB_EXIT_CODE2="0:0", SLURM_JOB_EXIT_CODE="0", SLURM_JOB_DERIVED_EC="0")
    monkeypatch.setattr(common, "_slurm_daemon_exe", lambda levels=4: "/usr/sbin/slurmstepd")
    log = Lines()
    rec = epilog.run(log)
    assert rec["exit_code"] is None and rec["derived_exit_code"] is None
    assert any(ln.startswith("exit codes unknown: slurmstepd runs this epilog (PrologFlags=RunInJob)")
               for ln in log.lines), log.lines
    monkeypatch.setattr(common, "_slurm_daemon_exe", lambda levels=4: "/usr/sbin/slurmd")
    assert epilog.run(Lines())["exit_code"] == "0:0"


# ------------------------------------------------- 17. GRES indices on a node whose minors are not NVML's order

def test_gpus_numbered_otherwise_by_slurm_and_by_minor_are_all_checked(nvnode, monkeypatch):
    """NVML's GPU 0 is /dev/nvidia1 and has ECC errors. Under AutoDetect slurmd numbers GPUs in PCI (NVML) order,
    so SLURM_JOB_GPUS=0 is that GPU; matched by minor, the prolog checked the healthy /dev/nvidia0 and the job
    started on the sick one."""
    node, nv, gpus = nvnode
    gpus[0].update(minor=1, ecc_uncorrected=4)
    gpus[1].update(minor=0)
    monkeypatch.setenv("SLURM_JOB_GPUS", "0")
    assert prolog.main() == 1
    [drain] = node.drains()
    assert "GPU 1 (GPU-00000000-0000-0000-0000-000000000000) has 4 uncorrected ECC errors" in drain
    log = (node.spool / "hooks.log").read_text()
    assert "job GPUs (0,) not matched to this node's: NVML's GPU 0 is /dev/nvidia1" in log, log
    assert nv.set_calls == []  # no GPU's accounting mode switched: which is the job's is not known
    rec = epilog.run(Lines())
    assert rec["gpu_energy"] is None and rec["energy_why"].startswith("the job's GPUs are unknown (NVML's GPU 0 is "
                                                                      "/dev/nvidia1: slurmd numbers GPUs")


# --------------------------------------------------------------------- 18. GPUs other jobs share

def test_an_mps_jobs_gpu_energy_is_not_billed_to_it(nvnode, monkeypatch):
    node, nv, gpus = nvnode
    monkeypatch.setenv("SLURM_JOB_GPUS", "1")
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25")  # gres/mps:25 of GPU 1
    assert prolog.main() == 0
    assert nv.set_calls == []
    gpus[1]["energy_mj"] += 3_600_000
    rec = epilog.run(Lines())
    why = ("the job shares its GPUs with other jobs (gres/mps): a GPU's energy and processes are not all its own")
    assert rec["gpus"] == [1] and rec["energy_j"] is None and rec["energy_why"] == why
    assert rec["gpu_accounting_why"] == why


@pytest.mark.parametrize("tres", ["TresPerNode=gres/shard:2", "TresPerNode=gres:shard:2",
                                  "AllocTRES=cpu=1,mem=1G,node=1,gres/shard=2"])
def test_a_shard_jobs_gpu_energy_is_not_billed_to_it(nvnode, monkeypatch, tmp_path, tres):
    node, nv, gpus = nvnode
    record = (f"JobId=77 JobName=s UserId=labuser(1001) QOS=normal JobState=COMPLETING Reason=None Restarts=0 "
              f"StartTime=2026-11-24T05:00:00 EndTime=2026-11-24T05:01:00 PreemptTime=None {tres}\n")
    monkeypatch.setenv("SLURMTOOLS_EPILOG_SCONTROL", "1")
    monkeypatch.setenv("SLURMTOOLS_SCONTROL", str(fake_slurm(tmp_path, record)))
    rec = epilog.run(Lines(), now=1_800_000_000.0)
    assert rec["energy_j"] is None and rec["energy_why"].startswith("the job shares its GPUs with other jobs "
                                                                    "(gres/shard)")
    # a whole GPU's job is measured
    (tmp_path / "slurm-bin" / "job.txt").write_text(record.replace(tres, "TresPerNode=gres/gpu:2"))
    rec = epilog.run(Lines(), now=1_800_000_000.0)
    assert rec["gpu_accounting"] is not None and not rec["energy_why"].startswith("the job shares")


# ---------------------------------------------------------------------- 19. a long host list

def test_a_long_host_list_is_recorded_whole(tmp_path, monkeypatch):
    node = Node(tmp_path)
    hosts = ",".join(f"rack{r:03d}-gpu[{r:03d},{r + 400:03d}]" for r in range(300))  # 6,600 characters
    epilog_env(node, monkeypatch, SLURM_NODELIST=hosts, SLURMD_NODENAME="rack000-gpu000")
    rec = epilog.run(Lines())
    assert len(hosts) > 4096 and rec["nodes"] == hosts
