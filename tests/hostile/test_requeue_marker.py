"""Issue 12, class 1: the files between the checkpoint library and the batch wiring (the requeue request, the
promise to handle the warning signal) must not be plantable by another user.

The defect: both lived at shared, predictable paths (`$TMPDIR/slurmtools-requeue-<job>`,
`$TMPDIR/slurmtools-handles-signal-<job>`, TMPDIR mostly unset, so /tmp). Another user could create them first;
the victim's wiring could not remove them (sticky /tmp) and requeued its finished job at the end of every run, or
passed the warning signal on to a program that dies of it. Now the wiring makes a private folder for each run
(`mktemp -d`: mode 0700, a name nobody can guess), hands it to the step, and trusts a marker only when it is a
plain file of the job's user in a folder of that user that group and others cannot write; the library creates
markers only there (O_EXCL, never through a symlink).

The wiring runs here in bash as it does in a batch script; `scontrol` is a recorder script on its PATH, so these
tests check what the wiring asks of Slurm (the lab test, test_requeue_marker_lab.py, runs it in real jobs).
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmtools import checkpoint as C

REPO = Path(__file__).resolve().parents[2]
VICTIM_UID = 1001  # the job's user: the wiring and the step run as this uid (setpriv; no account needed)
OTHER_UID = 1002  # "another user": files are handed to it with chown

pytestmark = pytest.mark.usefixtures("require_root")  # the hooks run as root; ownership checks need it


def as_victim(argv: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={VICTIM_UID}", f"--regid={VICTIM_UID}", "--clear-groups", *argv]


@pytest.fixture
def root():
    """A folder the victim can reach (pytest's own tmp folders are root's 0700)."""
    d = Path(tempfile.mkdtemp(prefix="slurmtools-h1-"))
    os.chmod(d, 0o755)
    yield d
    subprocess.run(["rm", "-rf", "--", str(d)], check=False)


def job_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "RANK"))}
    env.update(SLURM_JOB_ID="4711", TMPDIR=str(tmp), PATH=f"{tmp / 'bin'}:/usr/bin:/bin")
    env.update(extra)
    return env


def shared_tmp(root: Path) -> tuple[Path, Path]:
    """A folder like /tmp (root's, mode 1777) and a bin folder with a recording `scontrol`."""
    tmp = root / "tmp"
    tmp.mkdir()
    os.chmod(tmp, 0o1777)
    calls = root / "scontrol-calls"
    calls.touch()
    os.chmod(calls, 0o666)
    (tmp / "bin").mkdir()
    (tmp / "bin" / "scontrol").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {calls}\n')
    os.chmod(tmp / "bin" / "scontrol", 0o755)
    return tmp, calls


def plant(path: Path, uid: int = OTHER_UID, body: str = "requeue\n") -> None:
    path.write_text(body)
    os.chown(path, uid, uid)
    os.chmod(path, 0o644)


def requeues(calls: Path) -> list[str]:
    return [ln for ln in calls.read_text().splitlines() if ln.startswith("requeue")] if calls.exists() else []


def run_wiring(tmp: Path, step: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    script = tmp / "job.sh"
    script.write_text(f"source {C.wiring_path()}\nslurmtools_run {step}\necho rc=$?\n")
    return subprocess.run(as_victim(["bash", str(script)]), env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=str(tmp))


# ------------------------------------------------------------------------ the attack of the issue, in the wiring


def test_marker_planted_at_the_old_shared_path_does_not_requeue_a_finished_job(root):
    tmp, calls = shared_tmp(root)
    planted = tmp / "slurmtools-requeue-4711"
    plant(planted)
    r = run_wiring(tmp, "true", job_env(tmp))
    assert r.stdout.strip() == "rc=0", r
    assert requeues(calls) == [], r.stderr
    assert "requeueing" not in r.stderr
    assert planted.exists()  # another user's file: left alone, and never read


def test_promise_planted_at_the_old_shared_path_does_not_pass_the_warning_on(root):
    """A plain program (USR1 kills it) under the wiring: another user's promise file must not make the wiring pass
    the warning on; the program runs to its end."""
    tmp, _ = shared_tmp(root)
    plant(tmp / "slurmtools-handles-signal-4711", body="")
    started = tmp / "started"
    prog = tmp / "plain.py"
    prog.write_text(f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(1.5); print('finished')")
    script = tmp / "job.sh"
    script.write_text(f"source {C.wiring_path()}\nslurmtools_run {sys.executable} {prog}\necho rc=$?\n")
    env = job_env(tmp, SLURMTOOLS_CHECKPOINT_SIGNAL="USR1")
    p = subprocess.Popen(as_victim(["bash", str(script)]), env=env, cwd=str(tmp), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.time() + 30
    while not started.exists() and time.time() < end:
        time.sleep(0.01)
    assert started.exists(), "the step never started"
    p.send_signal(signal.SIGUSR1)
    out, err = p.communicate(timeout=60)
    assert out.split() == ["finished", "rc=0"], (out, err)
    assert "not passed on" in err


# ------------------------------------------------------------------------ library and wiring agree on the place


STEP = """import os, sys; sys.path.insert(0, {repo!r})
from slurmtools.checkpoint import Checkpointer
ck = Checkpointer({ck!r}, install=False, log=lambda m: print("LIB", m))
print("MARKER", os.environ.get("SLURMTOOLS_REQUEUE_MARKER"))
{extra}
print("RESULT", ck.requeue())
"""


def run_step(tmp: Path, extra: str = "", **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    (tmp / "step.py").write_text(STEP.format(repo=str(REPO), ck=str(tmp / "ck"), extra=extra))
    # the step has no scontrol (as in a container): the library must leave a marker for the wiring
    r = run_wiring(tmp, f"env PATH=/nonexistent {sys.executable} {tmp / 'step.py'}", job_env(tmp, **env))
    return r, [ln for ln in r.stdout.splitlines()]


def test_library_leaves_the_marker_in_the_wirings_private_folder_and_the_wiring_requeues(root):
    tmp, calls = shared_tmp(root)
    plant(tmp / "slurmtools-requeue-4711")  # the old place, planted: irrelevant now
    r, out = run_step(tmp, extra="import stat; d = os.path.dirname(os.environ['SLURMTOOLS_REQUEUE_MARKER']); "
                                  "st = os.lstat(d); print('FOLDER', oct(stat.S_IMODE(st.st_mode)), st.st_uid)")
    marker = next(ln.split()[1] for ln in out if ln.startswith("MARKER"))
    assert Path(marker).parent.parent == tmp and Path(marker).parent.name.startswith("slurmtools-run.")
    assert len(Path(marker).parent.name) >= len("slurmtools-run.") + 10  # not guessable
    assert f"FOLDER 0o700 {VICTIM_UID}" in out, out
    assert "RESULT marker" in out, r
    assert requeues(calls) == ["requeue 4711"], r.stderr
    assert "requeueing job 4711 as the training step asked" in r.stderr
    assert not Path(marker).parent.exists()  # the private folder goes with the run


def test_library_without_the_wiring_leaves_no_marker_in_a_shared_folder(root, monkeypatch):
    tmp, _ = shared_tmp(root)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("SLURMTOOLS_REQUEUE_MARKER", raising=False)
    msgs: list[str] = []
    ck = C.Checkpointer(tmp / "ck", install=False, job_id="4711", log=msgs.append)
    assert ck.requeue() == "none"
    assert list(tmp.glob("slurmtools-requeue-*")) == []
    assert any("SLURMTOOLS_REQUEUE_MARKER is not set" in m and "not requeued" in m for m in msgs), msgs


# ------------------------------------------------------------------------ what is never trusted


def private(tmp: Path, name: str = "mine", mode: int = 0o700, uid: int | None = None) -> Path:
    d = tmp / name
    d.mkdir()
    os.chmod(d, mode)
    if uid is not None:
        os.chown(d, uid, uid)
    return d


@pytest.mark.parametrize("case, why", [
    ("folder of another user", "owned by uid 1002"),
    ("world-writable folder", "writable by group or others (mode 1777)"),
    ("group-writable folder", "writable by group or others (mode 770)"),
    ("folder is a symlink", "not a folder of its own (a symlink?)"),
    ("marker is a symlink", "is already there and is not this user's plain file"),
    ("marker of another user", "is already there and is not this user's plain file"),
])
def test_library_refuses_to_leave_a_marker_where_it_could_be_planted(root, monkeypatch, case, why):
    tmp, _ = shared_tmp(root)
    target = root / "victim-file"
    target.write_text("precious\n")
    d = tmp / "mine"
    if case == "folder of another user":
        private(tmp, uid=OTHER_UID)
    elif case == "world-writable folder":
        d = tmp
    elif case == "group-writable folder":
        private(tmp, mode=0o770)
    elif case == "folder is a symlink":
        real = private(tmp, "real")
        d.symlink_to(real)
    elif case == "marker is a symlink":
        private(tmp)
        (d / "requeue").symlink_to(target)
    elif case == "marker of another user":
        private(tmp)
        plant(d / "requeue")
    monkeypatch.setenv("SLURMTOOLS_REQUEUE_MARKER", str(d / "requeue"))
    monkeypatch.setenv("PATH", "/nonexistent")
    msgs: list[str] = []
    ck = C.Checkpointer(root / "ck", install=False, job_id="4711", log=msgs.append)
    assert ck.requeue() == "none"
    refusal = [m for m in msgs if "requeue marker not left" in m]
    assert refusal and why in refusal[0] and "job 4711 is not requeued" in refusal[0], msgs
    assert target.read_text() == "precious\n"


@pytest.mark.parametrize("case, why", [
    ("marker is a symlink", "not a plain file"),
    ("folder made world-writable", "writable by group or others (mode 777)"),
    ("marker is a folder", "not a plain file"),
])
def test_wiring_never_trusts_a_marker_it_could_not_have_got_from_the_job(root, case, why):
    """Whatever sits at the marker's place when the step ends, the wiring requeues only for a plain file of the
    job's user in a folder nobody else can write, and says in the job's stderr why it did not."""
    tmp, calls = shared_tmp(root)
    target = root / "victim-file"
    target.write_text("precious\n")
    act = {
        "marker is a symlink": f"os.symlink({str(target)!r}, m)",
        "folder made world-writable": "open(m, 'w').write('requeue'); os.chmod(os.path.dirname(m), 0o777)",
        "marker is a folder": "os.mkdir(m)",
    }[case]
    (tmp / "step.py").write_text(f"import os\nm = os.environ['SLURMTOOLS_REQUEUE_MARKER']\n{act}\n")
    r = run_wiring(tmp, f"{sys.executable} {tmp / 'step.py'}", job_env(tmp))
    assert r.stdout.strip() == "rc=0", r
    assert requeues(calls) == [], r.stderr
    line = [ln for ln in r.stderr.splitlines() if "requeue marker" in ln and "ignored" in ln]
    assert line and why in line[0], r.stderr
    assert target.read_text() == "precious\n"


# ------------------------------------------------------------------------ both sides, any planted state


KINDS = ["absent", "file", "symlink", "folder", "fifo"]
LEAVE = ("import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
         "from slurmtools.checkpoint import leave_marker; print(leave_marker(Path(sys.argv[2]), b'requeue'))")


@settings(max_examples=50, deadline=None)
@given(kind=st.sampled_from(KINDS), owner=st.sampled_from([VICTIM_UID, OTHER_UID]),
       folder_mode=st.sampled_from([0o700, 0o750, 0o755, 0o770, 0o777, 0o1777, 0o1700]),
       folder_owner=st.sampled_from([VICTIM_UID, OTHER_UID]))
def test_a_marker_is_trusted_exactly_when_it_is_the_users_plain_file_in_the_users_private_folder(
        kind, owner, folder_mode, folder_owner):
    """The wiring (trust) and the library (leave) apply one rule, checked for every planted state, both run as
    the job's user: a plain file of the user's in a folder of the user's that group and others cannot write."""
    with tempfile.TemporaryDirectory() as t:
        top = Path(t)
        os.chmod(top, 0o755)
        d = top / "f"
        d.mkdir()
        m = d / "requeue"
        (top / "t").write_text("x")
        if kind == "file":
            m.write_text("requeue\n")
        elif kind == "symlink":
            m.symlink_to(top / "t")
        elif kind == "folder":
            m.mkdir()
        elif kind == "fifo":
            os.mkfifo(m)
        if kind != "absent":
            os.chown(m, owner, owner, follow_symlinks=False)
        os.chown(d, folder_owner, folder_owner)
        os.chmod(d, folder_mode)
        folder_ok = folder_owner == VICTIM_UID and not folder_mode & 0o022
        r = subprocess.run(as_victim(["bash", "-c", f'source {C.wiring_path()}; _slurmtools_marker_why "$1"', "x",
                                      str(m)]), capture_output=True, text=True, timeout=30)
        trusted = r.returncode == 0 and r.stdout.strip() == ""
        assert trusted == (kind == "file" and owner == VICTIM_UID and folder_ok), (r.stdout, r.stderr)
        r = subprocess.run(as_victim([sys.executable, "-c", LEAVE, str(REPO), str(m)]), capture_output=True,
                           text=True, timeout=30)
        left = r.stdout.strip() == "None"
        assert left == (folder_ok and (kind == "absent" or (kind == "file" and owner == VICTIM_UID))), r
        if left:
            st_ = os.lstat(m)
            assert stat.S_ISREG(st_.st_mode) and st_.st_uid == VICTIM_UID
        assert (top / "t").read_text() == "x"


def test_stop_report_is_not_written_into_a_scratch_folder_another_user_made_first(root, monkeypatch):
    """The job's scratch folder (`/tmp/slurmtools-job-<id>` by default) is predictable as well: a folder another
    user made there first gets no stop report (the other user could read it, or swap it before the epilog)."""
    tmp, _ = shared_tmp(root)
    monkeypatch.setenv("SLURMTOOLS_SCRATCH_PATTERN", str(tmp / "slurmtools-job-{job_id}"))
    planted = tmp / "slurmtools-job-4711"
    planted.mkdir()
    os.chown(planted, OTHER_UID, OTHER_UID)
    os.chmod(planted, 0o777)
    msgs: list[str] = []
    ck = C.Checkpointer(root / "ck", install=False, job_id="4711", log=msgs.append)
    ck._report(C.StopCause("preempted", "URG", time.time(), "PreemptTime=x"))
    assert list(planted.iterdir()) == []
    assert any(m.startswith(f"stop report not written to {planted}: its folder {planted} is owned by uid 1002")
               for m in msgs), msgs
    os.chown(planted, 0, 0)  # the job user's own folder (the test runs as root), still open to others
    ck._report(C.StopCause("preempted", "URG", time.time(), "PreemptTime=x"))
    assert list(planted.iterdir()) == [] and "writable by group or others (mode 777)" in msgs[-1]
    os.chmod(planted, 0o700)
    ck._report(C.StopCause("preempted", "URG", time.time(), "PreemptTime=x"))
    assert [p.name for p in planted.iterdir()] == ["stop.json"]
