"""Crash safety of slurmtools.checkpoint in a hostile environment: kill -9 at every point of a save, writes that
fail, a folder that is removed or cannot be written, two runs of the same job in one folder at once (requeue
overlap: the old run still in its grace time while the new one starts), checkpoints that no longer read back.

Everything here is real: files, subprocesses, SIGKILL, a file-size limit the kernel enforces. Where a point of the
save must be hit exactly, the child process kills itself there (filesystem fault injection); Slurm plays no part.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from slurmtools.checkpoint import Checkpointer, CheckpointError

REPO = Path(__file__).resolve().parents[2]


def run_child(code: str, *args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    prog = f"import sys; sys.path.insert(0, {str(REPO)!r})\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", prog, *args], capture_output=True, text=True, timeout=timeout, **kw)


def temps(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.endswith(".tmp"))


# ---- kill -9 at each point of a save, then resume


KILL_AT = {
    # where the child dies -> the step the resumed run must find
    "mid-data": 1,        # half the checkpoint written
    "before-fsync": 1,    # all written, not yet fsynced
    "before-rename": 1,   # fsynced, not yet renamed into place
    "before-dir-fsync": 2,  # renamed, the folder not yet fsynced
    "during-prune": 2,    # the new checkpoint in place, the oldest being removed
}


@pytest.mark.parametrize("point", list(KILL_AT))
def test_kill_at_every_point_of_a_save_resumes_from_the_last_complete_one(tmp_path, point):
    code = f"""
    import os, signal, sys
    from slurmtools import checkpoint as C
    point = {point!r}
    def die():
        os.kill(os.getpid(), signal.SIGKILL)
    ck = C.Checkpointer(sys.argv[1], keep=1, install=False)
    ck.save({{"step": 1, "blob": b"a" * 300_000}}, step=1)
    if point == "before-fsync":
        os.fsync = lambda fd: die()
    if point == "before-rename":
        os.replace = lambda a, b: die()
    if point == "before-dir-fsync":
        C.fsync_dir = lambda d: die()
    if point == "during-prune":
        os.unlink = lambda p, *a, **k: die()
    state = {{"step": 2, "blob": b"b" * 300_000}}
    if point == "mid-data":
        import pickle
        def saver(o, f):
            f.write(pickle.dumps(o)[:100_000]); f.flush(); die()
        ck._saver, ck._custom = saver, True
    ck.save(state, step=2)
    print("not killed")
    """
    r = run_child(code, str(tmp_path))
    assert r.returncode == -signal.SIGKILL, (r.stdout, r.stderr)
    resumed = Checkpointer(tmp_path, keep=1, install=False)
    assert temps(tmp_path) == []  # a dead writer's temporary file is removed by the next run
    state = resumed.load()
    assert state["step"] == KILL_AT[point] and len(state["blob"]) == 300_000
    assert resumed.loaded.step == KILL_AT[point]


# ---- a write that fails (the kernel's file-size limit: the same path as ENOSPC or a quota)


def test_a_failing_write_keeps_the_previous_checkpoint_and_says_so_in_one_line(tmp_path):
    code = """
    import resource, signal, sys
    from slurmtools.checkpoint import Checkpointer, CheckpointError
    ck = Checkpointer(sys.argv[1], install=False)
    ck.save({"step": 1}, step=1)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # the write then fails with EFBIG instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
    try:
        ck.save({"step": 2, "blob": b"x" * 1_000_000}, step=2)
    except CheckpointError as e:
        print("ERROR", e, "saved_at", ck.last_saved_at is not None)
    """
    r = run_child(code, str(tmp_path))
    out = r.stdout.strip()
    assert r.returncode == 0 and out.startswith("ERROR checkpoint: cannot write "), (r.stdout, r.stderr)
    assert "ckpt-000000000002.pkl" in out and "File too large" in out and len(r.stdout.splitlines()) == 1
    assert sorted(os.listdir(tmp_path)) == ["ckpt-000000000001.pkl"]
    assert Checkpointer(tmp_path, install=False).load() == {"step": 1}


# ---- two runs of the same job in one folder at once (requeue overlap)


def test_a_new_run_starting_does_not_remove_the_old_runs_save_in_progress(tmp_path):
    """The old run, in its grace time, is still writing its checkpoint when the requeued run starts and clears
    leftover temporary files: the old run's save must still land (it used to fail: its temp file was gone)."""
    started, go = tmp_path / "started", tmp_path / "go"
    d = tmp_path / "ck"
    code = """
    import os, sys, time, pathlib
    from slurmtools.checkpoint import Checkpointer, CheckpointError
    d, started, go = sys.argv[1:4]
    def saver(obj, f):
        f.write(b"A" * 100_000); f.flush()
        pathlib.Path(started).touch()
        deadline = time.time() + 30
        while not os.path.exists(go) and time.time() < deadline:
            time.sleep(0.01)
        f.write(b"B" * 100_000)
    ck = Checkpointer(d, saver=saver, loader=lambda f: f.read(), install=False)
    try:
        print(ck.save(None, step=10).name)
    except CheckpointError as e:
        print("FAILED", e)
    """
    prog = f"import sys; sys.path.insert(0, {str(REPO)!r})\n" + textwrap.dedent(code)
    old = subprocess.Popen([sys.executable, "-c", prog, str(d), str(started), str(go)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while not started.exists() and time.time() < deadline:
        time.sleep(0.01)
    assert started.exists(), old.communicate(timeout=5)
    new = Checkpointer(d, loader=lambda f: f.read(), saver=lambda o, f: f.write(o), install=False)
    go.touch()
    out, err = old.communicate(timeout=60)
    assert out.strip() == "ckpt-000000000010.bin", (out, err)
    assert new.load() == b"A" * 100_000 + b"B" * 100_000


def test_two_saves_of_the_same_step_at_once_both_land(tmp_path):
    """An asynchronous save of step 5 still running in a thread when the signal's save of step 5 starts (or two
    runs with the same pid, as containers give, on two nodes): the temporary names must not collide."""
    inside, release = threading.Event(), threading.Event()

    def slow(obj, f):
        f.write(obj)
        if obj == b"async":
            inside.set()
            release.wait(30)

    ck = Checkpointer(tmp_path, saver=slow, loader=lambda f: f.read(), install=False)
    errors: list[BaseException] = []

    def background():
        try:
            ck.save(b"async", step=5)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=background)
    t.start()
    assert inside.wait(30)
    try:
        ck.save(b"signal", step=5)
    finally:
        release.set()
        t.join(30)
    assert errors == [] and ck.load() in (b"async", b"signal")
    assert temps(tmp_path) == []


def test_a_load_racing_another_runs_pruning_never_starts_over(tmp_path):
    """The old run keeps saving (and pruning, keep=1) while the new run loads: a checkpoint listed a moment ago
    and pruned before it was opened must send load() to the newer one, never to "no checkpoint" (a fresh start)."""
    d = tmp_path / "ck"
    Checkpointer(d, keep=1, install=False).save({"step": 0}, step=0)
    stop = tmp_path / "stop"
    code = """
    import os, sys
    from slurmtools.checkpoint import Checkpointer
    ck = Checkpointer(sys.argv[1], keep=1, install=False)
    step = 1
    while not os.path.exists(sys.argv[2]):
        ck.save({"step": step}, step=step)
        step += 1
    """
    prog = f"import sys; sys.path.insert(0, {str(REPO)!r})\n" + textwrap.dedent(code)
    writer = subprocess.Popen([sys.executable, "-c", prog, str(d), str(stop)])
    reader = Checkpointer(d, keep=1, install=False, log=lambda m: None)
    fresh = loads = 0
    try:
        deadline = time.time() + 3
        while time.time() < deadline and fresh == 0:
            got = reader.load()
            loads += 1
            fresh += got is None
    finally:
        stop.touch()
        writer.wait(30)
    assert fresh == 0, f"{fresh} of {loads} loads found no checkpoint while one was always there"


def test_a_checkpoint_pruned_between_listing_and_opening_sends_load_to_the_newer_one(tmp_path, monkeypatch):
    """The race above, made certain: the folder is listed, then the old run saves step 2 and prunes step 1, then
    the new run opens step 1. load() returned None (a fresh start from step 0)."""
    d = tmp_path / "ck"
    old_run = Checkpointer(d, keep=1, install=False)
    old_run.save({"step": 1}, step=1)
    new_run = Checkpointer(d, keep=1, install=False, log=lambda m: None)
    real_scandir, real_listdir = os.scandir, os.listdir
    fired: list[bool] = []

    def after_listing() -> None:
        if not fired:
            fired.append(True)
            old_run.save({"step": 2}, step=2)

    class Listing(list):
        def __enter__(self):
            return iter(self)

        def __exit__(self, *exc) -> bool:
            return False

    def scandir(path):
        with real_scandir(path) as it:
            entries = Listing(it)
        after_listing()
        return entries

    def listdir(path):
        names = real_listdir(path)
        after_listing()
        return names

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "listdir", listdir)
    assert new_run.load() == {"step": 2} and fired
    assert new_run.loaded.step == 2


# ---- checkpoints that no longer read back


def test_checkpoints_that_all_fail_to_read_are_an_error_not_a_fresh_start(tmp_path, monkeypatch):
    """A checkpoint pickled by an earlier code version (its class since renamed) no longer reads back. load() used
    to return None: the run started over from step 0, and with keep=1 each of its saves was pruned at once as
    older than the unreadable one, so every requeue started over again."""
    mod = tmp_path / "oldcode"
    mod.mkdir()
    (mod / "trainstate_v1.py").write_text("class State:\n    def __init__(self, step):\n        self.step = step\n")
    monkeypatch.syspath_prepend(str(mod))
    import trainstate_v1

    d = tmp_path / "ck"
    Checkpointer(d, keep=1, install=False).save(trainstate_v1.State(500), step=500)
    del sys.modules["trainstate_v1"]
    (mod / "trainstate_v1.py").unlink()  # the new code version renamed it
    msgs: list[str] = []
    ck = Checkpointer(d, keep=1, install=False, log=msgs.append)
    with pytest.raises(CheckpointError) as e:
        ck.load()
    msg = str(e.value)
    assert "\n" not in msg and "ckpt-000000000500.pkl" in msg and "trainstate_v1" in msg
    assert (d / "ckpt-000000000500.pkl").exists()  # nothing is removed


def test_a_save_below_the_newest_step_is_kept_and_named(tmp_path):
    """The new run resumed from step 900 before the old run's step-1000 save landed; its own save of step 950 is
    on disk when save() returns it (with keep=1 it used to be pruned at once), and the log says resume takes 1000."""
    msgs: list[str] = []
    Checkpointer(tmp_path, keep=1, install=False).save({"step": 1000}, step=1000)
    ck = Checkpointer(tmp_path, keep=1, install=False, log=msgs.append)
    p = ck.save({"step": 950}, step=950)
    assert p.exists() and pickle.loads(p.read_bytes()) == {"step": 950}
    assert any("step 950" in m and "1000" in m for m in msgs), msgs
    assert ck.load() == {"step": 1000}
    ck.save({"step": 1001}, step=1001)  # the next save prunes as usual
    assert [c.step for c in ck.checkpoints()] == [1001]


def test_entries_named_like_checkpoints_that_are_no_files_are_left_alone(tmp_path):
    """A folder or a FIFO named ckpt-<step>.pkl: load() hung forever opening the FIFO, and pruning the folder
    turned a save that had landed into an IsADirectoryError."""
    (tmp_path / "ckpt-000000000001.pkl").mkdir()
    (tmp_path / "ckpt-000000000001.pkl" / "x").write_text("user data")
    os.mkfifo(tmp_path / "ckpt-000000000009.pkl")
    code = """
    import sys
    from slurmtools.checkpoint import Checkpointer
    ck = Checkpointer(sys.argv[1], keep=1, install=False, log=lambda m: None)
    print(ck.load())
    for s in (2, 3):
        ck.save({"step": s}, step=s)
    print(ck.load(), [c.step for c in ck.checkpoints()])
    """
    r = run_child(code, str(tmp_path), timeout=20)
    assert r.returncode == 0 and r.stdout.splitlines() == ["None", "{'step': 3} [3]"], (r.stdout, r.stderr)
    assert (tmp_path / "ckpt-000000000001.pkl" / "x").read_text() == "user data"


# ---- the folder


def test_a_folder_removed_while_the_job_runs_is_made_again_at_the_save(tmp_path):
    """Scratch purges remove idle folders: the save at preemption must still land (it failed: No such file)."""
    d = tmp_path / "scratch" / "run1"
    msgs: list[str] = []
    ck = Checkpointer(d, install=False, log=msgs.append)
    ck.save({"step": 1}, step=1)
    shutil.rmtree(tmp_path / "scratch")
    p = ck.save({"step": 2}, step=2)
    assert p == d / "ckpt-000000000002.pkl" and ck.load() == {"step": 2}
    assert any(str(d) in m and "made it again" in m for m in msgs), msgs


def test_a_relative_folder_stays_the_one_given_after_the_program_changes_folder(tmp_path, monkeypatch):
    """Checkpointer("ckpt") then a chdir (hydra moves each run into its own output folder): the save went to (or
    failed in) ckpt/ under the new folder, and the requeued run, started from the first folder, did not find it."""
    (tmp_path / "launch").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "launch")
    ck = Checkpointer("ckpt", install=False)
    monkeypatch.chdir(tmp_path / "elsewhere")
    p = ck.save({"step": 4}, step=4)
    assert p == tmp_path / "launch" / "ckpt" / "ckpt-000000000004.pkl" and p.exists()
    assert os.listdir(tmp_path / "elsewhere") == []
    monkeypatch.chdir(tmp_path / "launch")
    assert Checkpointer("ckpt", install=False).load() == {"step": 4}


def test_a_folder_it_cannot_write_is_refused_at_start_not_at_the_first_save(tmp_path):
    """A folder the job cannot write was found only at the save, hours later, when the signal came."""
    base = Path(tempfile.mkdtemp(prefix="slurmtools-ckpt-"))
    try:
        base.chmod(0o755)
        d = base / "readonly"
        d.mkdir()
        d.chmod(0o555)
        code = """
        import sys
        from slurmtools.checkpoint import Checkpointer, CheckpointError
        try:
            Checkpointer(sys.argv[1], install=False)
            print("accepted")
        except CheckpointError as e:
            print(e)
        """
        # root writes anywhere: the job's user is then nobody
        r = run_child(code, str(d), user=65534 if os.geteuid() == 0 else None, cwd="/")
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == f"checkpoint: cannot write in {d}: Permission denied", r.stdout
    finally:
        shutil.rmtree(base)


# ---- inputs


def test_a_step_from_numpy_is_saved_and_a_bool_is_refused(tmp_path):
    """`step` often comes from numpy (np.int64): refusing it lost the save at preemption. True is no step."""
    ck = Checkpointer(tmp_path, install=False)
    p = ck.save({"step": 7}, step=np.int64(7))
    assert p.name == "ckpt-000000000007.pkl"
    with pytest.raises(CheckpointError, match="step must be an integer"):
        ck.save({}, step=True)
    with pytest.raises(CheckpointError, match="step must be an integer"):
        ck.save({}, step=np.float64(7.0))
    assert [c.step for c in ck.checkpoints()] == [7]


def test_a_saver_that_closes_the_file_still_saves(tmp_path):
    """A saver that closes the file object it was given (`with f: ...`) made save() fail after all was written."""
    def saver(obj, f):
        with f:
            f.write(obj)

    ck = Checkpointer(tmp_path, saver=saver, loader=lambda f: f.read(), install=False)
    ck.save(b"weights", step=3)
    assert ck.load() == b"weights" and temps(tmp_path) == []


# ---- a save that fails at the stop (disk full, quota, a folder gone for good): the job still ends as stopped


STOP_STEP = """import os, resource, shutil, signal, sys, time
sys.path.insert(0, {repo!r})
from slurmtools.checkpoint import Checkpointer
how, sig, d = sys.argv[1], sys.argv[2], sys.argv[3]
ck = Checkpointer(d, log=print)                  # real handlers for the warning (URG) and TERM
ck.save({{"step": 1}}, step=1)
if how == "fsize":                               # the kernel refuses the write: the path ENOSPC and quotas take
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
else:                                            # the folder purged, and a file where it must be made again
    shutil.rmtree(os.path.dirname(d))
    open(os.path.dirname(d), "w").close()
os.kill(os.getpid(), getattr(signal, "SIG" + sig))
for step in range(1, 100):
    time.sleep(0.01)
    if ck.should_stop():
        ck.save_and_exit({{"step": step + 1, "blob": b"x" * 1_000_000}}, step=step + 1)
print("never stopped")
"""


@pytest.mark.parametrize("how", ["fsize", "folder-gone"])
@pytest.mark.parametrize("sig", ["URG", "TERM"])
def test_a_save_that_fails_at_the_stop_still_ends_the_job_as_stopped(tmp_path, how, sig):
    """save_and_exit: the failed save at the warning raised out of the loop, and the job ended FAILED and was not
    requeued. Now one line says so and which checkpoint the next run resumes from, and the job is requeued as the
    warning wants (here through the batch wiring's marker: the step has no scontrol, as in a container; the
    wiring's `scontrol` is a recorder, as in tests/unit/test_checkpoint.py). A bare TERM (scancel) requeues
    nothing: exit code 1 then, so the lost save shows in the job's state."""
    bindir, rec = tmp_path / "bin", tmp_path / "scontrol-args"
    bindir.mkdir()
    (bindir / "scontrol").write_text(f"#!/bin/sh\necho \"$@\" > {rec}\n")
    (bindir / "scontrol").chmod(0o755)
    (tmp_path / "step.py").write_text(STOP_STEP.format(repo=str(REPO)))
    d = tmp_path / "scratch" / "run1"
    (tmp_path / "job.sh").write_text(f"""source {REPO / "slurmtools" / "checkpoint_wiring.sh"}
slurmtools_run env PATH=/nonexistent {sys.executable} {tmp_path / "step.py"} {how} {sig} {d}
echo "rc=$?"
""")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM") and k != "RANK"}
    env.update(SLURM_JOB_ID="4250", SLURMTOOLS_CHECKPOINT_SIGNAL="URG", PATH=f"{bindir}:/usr/bin:/bin",
               SLURMTOOLS_SCRATCH_PATTERN=str(tmp_path / "job-{job_id}"))
    r = subprocess.run(["bash", str(tmp_path / "job.sh")], env=env, capture_output=True, text=True, timeout=60)
    out = r.stdout.splitlines()
    failed = [ln for ln in out if "save at the stop failed" in ln]
    assert len(failed) == 1, (r.stdout, r.stderr)
    if how == "fsize":
        assert f"cannot write {d}/ckpt-000000000002.pkl: File too large" in failed[0]
        assert f"the next run resumes from step 1 ({d}/ckpt-000000000001.pkl)" in failed[0]
        assert sorted(os.listdir(d)) == ["ckpt-000000000001.pkl"]
    else:
        assert f"cannot write {d}/ckpt-000000000002.pkl" in failed[0] and f"cannot list {d}" in failed[0]
    if sig == "URG":
        assert out[-1] == "rc=0" and rec.read_text().split() == ["requeue", "4250"], (r.stdout, r.stderr)
    else:
        assert out[-1] == "rc=1" and not rec.exists(), (r.stdout, r.stderr)
        assert any("nothing requeues job 4250: exit code 1" in ln for ln in out), out
    assert "never stopped" not in r.stdout and "Traceback" not in r.stderr


def test_the_next_run_names_the_save_its_writer_died_in(tmp_path):
    """A save longer than the time Slurm gives is killed on every run and says nothing itself: the next run finds
    its unfinished file and names it, so the researcher sees why the job makes no progress."""
    code = """
    import os, pickle, signal, sys
    from slurmtools.checkpoint import Checkpointer
    ck = Checkpointer(sys.argv[1], install=False)
    ck.save({"step": 1}, step=1)
    def saver(o, f):
        f.write(pickle.dumps(o)[:50_000]); f.flush(); os.kill(os.getpid(), signal.SIGKILL)
    ck._saver, ck._custom = saver, True
    ck.save({"step": 2, "blob": b"b" * 300_000}, step=2)
    """
    r = run_child(code, str(tmp_path))
    assert r.returncode == -signal.SIGKILL, (r.stdout, r.stderr)
    msgs: list[str] = []
    assert Checkpointer(tmp_path, install=False, log=msgs.append).load() == {"step": 1}
    dead = [m for m in msgs if "unfinished save" in m]
    assert len(dead) == 1 and "ckpt-000000000002.pkl" in dead[0] and "its writer died" in dead[0], msgs
    assert temps(tmp_path) == []
