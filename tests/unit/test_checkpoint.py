"""Checkpoint library without Slurm: atomic files, keep-last-K, resume, real signals to real child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from slurmtools import checkpoint as C
from slurmtools.checkpoint import Checkpointer, classify

REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "examples" / "checkpoint_trainer.py"
sys.path.insert(0, str(REPO / "examples"))
import checkpoint_trainer  # noqa: E402


def no_slurm_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env.pop("RANK", None)
    env.update(extra)
    return env


def test_save_load_keep_last_k(tmp_path):
    ck = Checkpointer(tmp_path, keep=3, install=False)
    assert ck.load() is None
    for s in range(1, 8):
        ck.save({"step": s}, step=s)
    assert [c.step for c in ck.checkpoints()] == [5, 6, 7]
    assert ck.load() == {"step": 7}
    assert sorted(os.listdir(tmp_path)) == ["ckpt-000000000005.pkl", "ckpt-000000000006.pkl", "ckpt-000000000007.pkl"]


def test_json_format_and_bad_inputs(tmp_path):
    ck = Checkpointer(tmp_path, fmt="json", install=False)
    ck.save({"a": [1, 2]}, step=0)
    assert (tmp_path / "ckpt-000000000000.json").read_text() == '{"a": [1, 2]}'
    assert ck.load() == {"a": [1, 2]}
    with pytest.raises(C.CheckpointError, match="step must be"):
        ck.save({}, step=-1)
    with pytest.raises(C.CheckpointError, match="unknown format 'yaml'"):
        Checkpointer(tmp_path, fmt="yaml", install=False)
    with pytest.raises(C.CheckpointError, match="keep must be"):
        Checkpointer(tmp_path, keep=0, install=False)
    with pytest.raises(C.CheckpointError, match="warning_signal: 'NOPE' is not a usable checkpoint signal"):
        Checkpointer(tmp_path, warning_signal="NOPE")


def test_resume_skips_damaged_newest(tmp_path):
    msgs = []
    ck = Checkpointer(tmp_path, keep=5, install=False, log=msgs.append)
    ck.save({"step": 1}, step=1)
    ck.save({"step": 2}, step=2)
    # a truncated file under a complete name (e.g. copied by hand) must not stop the resume
    (tmp_path / "ckpt-000000000003.pkl").write_bytes(b"\x80\x05garbage")
    assert ck.load() == {"step": 2}
    assert ck.loaded.step == 2
    assert any("ckpt-000000000003.pkl" in m for m in msgs)


def test_stale_temp_files_are_ignored_and_removed(tmp_path):
    (tmp_path / ".ckpt-000000000009.pkl.123.tmp").write_bytes(b"half")
    ck = Checkpointer(tmp_path, install=False)
    assert ck.checkpoints() == []
    assert not any(n.endswith(".tmp") for n in os.listdir(tmp_path))


def test_custom_saver_path_used_for_torch_like_objects(tmp_path):
    """The generic saver/loader path, which the torch path is built on (torch is not installed here)."""
    calls = []

    def saver(obj, f):
        calls.append("save")
        f.write(b"MAGIC" + repr(obj).encode())

    def loader(f):
        data = f.read()
        assert data.startswith(b"MAGIC")
        return eval(data[5:].decode())

    ck = Checkpointer(tmp_path, saver=saver, loader=loader, install=False)
    p = ck.save({"w": [0.5, 1.5]}, step=4)
    assert p.name == "ckpt-000000000004.bin" and calls == ["save"]
    assert ck.load() == {"w": [0.5, 1.5]}
    assert "torch" not in sys.modules  # nothing imported torch behind our back


def test_failed_saver_leaves_previous_checkpoint(tmp_path):
    def bad(obj, f):
        f.write(b"partial")
        raise RuntimeError("disk on fire")

    good = Checkpointer(tmp_path, install=False)
    good.save({"ok": 1}, step=1)
    ck = Checkpointer(tmp_path, saver=bad, loader=lambda f: f.read(), install=False)
    with pytest.raises(RuntimeError):
        ck.save({"x": 1}, step=2)
    assert sorted(os.listdir(tmp_path)) == ["ckpt-000000000001.pkl"]


def test_only_rank_zero_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.delenv("RANK", raising=False)
    ck = Checkpointer(tmp_path / "r", install=False)
    assert ck.rank == 3
    assert ck.save({"a": 1}, step=1) is None
    assert not (tmp_path / "r").exists()
    monkeypatch.setenv("RANK", "0")  # torchrun's RANK wins over SLURM_PROCID
    assert C.rank() == 0


@pytest.mark.parametrize("var", ["RANK", "SLURM_PROCID"])
@pytest.mark.parametrize("value", ["abc", "-1", "1.0", "+1", "0x1", "\u00b2", "\u0661", "1 2"])
def test_an_unreadable_rank_is_refused_not_taken_for_rank_zero(tmp_path, monkeypatch, var, value):
    """RANK='abc' used to read as rank 0: with the real rank 0 beside it, two processes wrote and pruned the same
    checkpoints. '\u00b2' passed str.isdigit() and int() raised ValueError; '\u0661' read as rank 1."""
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv(var, value)
    with pytest.raises(C.CheckpointError) as e:
        Checkpointer(tmp_path / "r", install=False)
    assert str(e.value) == (f"checkpoint: {var}={value!r}: expected this process's rank as a whole number (ASCII "
                            f"digits); a guess could make two ranks write the same checkpoints")
    assert not (tmp_path / "r").exists()


def test_rank_empty_means_unset_and_ascii_digits_stand(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", " ")
    monkeypatch.setenv("SLURM_PROCID", " 3 ")
    assert C.rank() == 3
    monkeypatch.setenv("SLURM_PROCID", "")
    assert C.rank() == 0  # neither set: a single process
    monkeypatch.setenv("RANK", "012")
    assert C.rank() == 12


@pytest.mark.parametrize("value", ["60s", "-5", "1e2", "\u00b2", "65536"])
def test_an_unreadable_signal_lead_is_refused(tmp_path, monkeypatch, value):
    """SLURMTOOLS_SIGNAL_LEAD='60s' used to read as no lead, which makes every warning signal a time limit
    (classify); '\u00b2' raised ValueError from int()."""
    monkeypatch.setenv("SLURMTOOLS_SIGNAL_LEAD", value)
    with pytest.raises(C.CheckpointError, match=r"^checkpoint: SLURMTOOLS_SIGNAL_LEAD=.*: expected whole seconds "
                                                r"from 0 to 65535 \(ASCII digits\)"):
        Checkpointer(tmp_path, install=False)
    monkeypatch.setenv("SLURMTOOLS_SIGNAL_LEAD", " 90 ")
    assert Checkpointer(tmp_path, install=False).signal_lead == 90
    monkeypatch.setenv("SLURMTOOLS_SIGNAL_LEAD", "")
    assert Checkpointer(tmp_path, install=False).signal_lead is None
    assert Checkpointer(tmp_path, install=False, signal_lead=30).signal_lead == 30


def test_an_array_id_in_other_digits_is_not_passed_to_scontrol():
    """'\u00b2' passes str.isdigit(): scontrol was told to requeue job '\u00b2_1'; the hooks already read ASCII only."""
    assert C.slurm_job_ref({"SLURM_JOB_ID": "301", "SLURM_ARRAY_JOB_ID": "\u00b2", "SLURM_ARRAY_TASK_ID": "1"}) == "301"


def test_kill_during_writes_never_leaves_torn_checkpoint(tmp_path):
    """A writer SIGKILLed at random moments: every listed checkpoint still loads completely."""
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(REPO)!r})
        from slurmtools.checkpoint import Checkpointer
        ck = Checkpointer({str(tmp_path)!r}, keep=2, install=False)
        blob = bytes(range(256)) * 8192   # 2 MiB per checkpoint
        s = 0
        while True:
            s += 1
            ck.save({{"step": s, "blob": blob}}, step=s)
    """)
    for delay in (0.15, 0.3, 0.45):
        p = subprocess.Popen([sys.executable, "-c", code])
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        ck = Checkpointer(tmp_path, keep=2, install=False)
        for c in ck.checkpoints():
            import pickle
            with open(c.path, "rb") as f:
                obj = pickle.load(f)
            assert obj["step"] == c.step and len(obj["blob"]) == 2 * 1024 * 1024


def run_trainer(tmp_path, signal_at_step: int | None, sig=signal.SIGURG, steps=40, env=None):
    ck, log = tmp_path / "ck", tmp_path / "log"
    p = subprocess.Popen([sys.executable, str(TRAINER), str(ck), str(log), "--steps", str(steps),
                          "--step-seconds", "0.02"], env=env or no_slurm_env())
    if signal_at_step is not None:
        deadline = time.time() + 30
        while time.time() < deadline:
            if log.exists() and log.read_text().count(" step ") >= signal_at_step:
                break
            time.sleep(0.005)
        p.send_signal(sig)
    assert p.wait(timeout=60) == 0
    return log.read_text().splitlines()


@pytest.mark.parametrize("sig", [signal.SIGURG, signal.SIGTERM])
def test_real_signal_then_resume_gives_uninterrupted_result(tmp_path, sig):
    first = run_trainer(tmp_path, signal_at_step=10, sig=sig)
    saved = [ln for ln in first if " saved " in ln]
    assert len(saved) == 1, first
    assert "cause=unknown" in saved[0] and f"signal={sig.name[3:]}" in saved[0]
    assert not any(" done " in ln for ln in first)
    stopped_at = int(saved[0].split("saved step=")[1].split()[0])
    assert 10 <= stopped_at <= 12  # saved at the next step boundary
    second = run_trainer(tmp_path, signal_at_step=None)
    assert f"from={stopped_at}" in second[len(first)]
    done = second[-1]
    result = int(done.split("result=")[1].split()[0])
    assert result == checkpoint_trainer.expected(40)
    steps = [int(ln.split(" step ")[1]) for ln in second if " step " in ln]
    assert sorted(steps) == list(range(40))  # every step ran exactly once: none lost, none repeated


def _run_wiring_job(tmp_path, command: str, env: dict[str, str], ready, signum=signal.SIGUSR1):
    script = tmp_path / "job.sh"
    script.write_text(f"""#!/bin/bash
source {C.wiring_path()}
slurmtools_run {command}
echo "rc=$?"
""")
    p = subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline and not ready():
        time.sleep(0.01)
    assert ready(), "the step never got going"
    p.send_signal(signum)
    return p.communicate(timeout=60)


def test_wiring_passes_the_warning_on_when_the_script_says_so(tmp_path):
    """SLURMTOOLS_FORWARD_SIGNAL=1 (the plan's --handles-signal): USR1 to the shell reaches the training process,
    which saves and exits (here the trainer's handlers are installed but it is not in a job, so it leaves no
    promise of its own)."""
    ck, log = tmp_path / "ck", tmp_path / "log"
    out, _ = _run_wiring_job(tmp_path, f"{sys.executable} {TRAINER} {ck} {log} --steps 400 --step-seconds 0.02",
                             no_slurm_env(SLURMTOOLS_FORWARD_SIGNAL="1", SLURMTOOLS_CHECKPOINT_SIGNAL="USR1"),
                             lambda: log.exists() and log.read_text().count(" step ") >= 5)
    lines = log.read_text().splitlines()
    assert any(" saved " in ln and "signal=USR1" in ln for ln in lines), lines
    assert not any(" done " in ln for ln in lines)
    assert out.strip() == "rc=0"


def test_wiring_passes_the_warning_on_once_the_library_promised_to_handle_it(tmp_path):
    """In a job, the Checkpointer leaves its promise when it installs its handlers; then the warning reaches it."""
    ck, log = tmp_path / "ck", tmp_path / "log"
    promise = tmp_path / "promise"
    env = no_slurm_env(SLURM_JOB_ID="4243", SLURMTOOLS_SIGNAL_PROMISE=str(promise), SLURMTOOLS_CHECKPOINT_SIGNAL="USR1",
                       SLURMTOOLS_REQUEUE_MARKER=str(tmp_path / "requeue"), PATH="/usr/bin:/bin")
    out, err = _run_wiring_job(tmp_path, f"{sys.executable} {TRAINER} {ck} {log} --steps 400 --step-seconds 0.02",
                               env, lambda: log.exists() and log.read_text().count(" step ") >= 5)
    lines = log.read_text().splitlines()
    assert any(" saved " in ln and "signal=USR1" in ln for ln in lines), (lines, err)
    assert not promise.exists()  # the wiring clears it when the step ends: the next run must promise again


def test_wiring_keeps_the_warning_from_a_program_that_did_not_promise(tmp_path):
    """A plain program (here one that USR1 would kill) keeps running through the warning and ends normally:
    under Slurm, a preempted run is then stopped and requeued by Slurm at the end of the grace time, intact."""
    started = tmp_path / "started"
    code = f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(1.5); print('finished')"
    prog = tmp_path / "plain.py"
    prog.write_text(code)
    # a stale promise from an earlier run of the same job id must not count
    promise = tmp_path / "promise"
    promise.touch()
    out, err = _run_wiring_job(tmp_path, f"{sys.executable} {prog}",
                               no_slurm_env(SLURM_JOB_ID="4244", SLURMTOOLS_SIGNAL_PROMISE=str(promise),
                                            SLURMTOOLS_CHECKPOINT_SIGNAL="USR1"),
                               started.exists)
    assert out.split() == ["finished", "rc=0"], (out, err)
    assert "SIGUSR1 (preemption or time-limit warning) not passed on" in err


def test_wiring_stops_a_preempted_plain_program_where_slurm_requeues_it(tmp_path):
    """SLURMTOOLS_PREEMPTED_EXIT_REQUEUED=1 (a release that requeues a preempted job ending in its grace time): the
    wiring asks Slurm whether the warning was a preemption and, if so, stops the program at once. The `scontrol`
    here is a stand-in answering like `scontrol show job` of a preempted job: this tests our bash (the 25.11 lab
    test proves Slurm's side)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "scontrol").write_text("#!/bin/sh\necho 'JobId=4245 JobState=RUNNING PreemptTime=2026-11-23T22:00:00'\n")
    (bindir / "scontrol").chmod(0o755)
    started = tmp_path / "started"
    prog = tmp_path / "plain.py"
    prog.write_text(f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(30)")
    env = no_slurm_env(SLURM_JOB_ID="4245", SLURMTOOLS_SIGNAL_PROMISE=str(tmp_path / "promise"),
                       SLURMTOOLS_PREEMPTED_EXIT_REQUEUED="1", PATH=f"{bindir}:/usr/bin:/bin",
                       SLURMTOOLS_CHECKPOINT_SIGNAL="USR1")
    out, err = _run_wiring_job(tmp_path, f"{sys.executable} {prog}", env, started.exists)
    assert out.strip() == f"rc={128 + signal.SIGTERM}", (out, err)
    assert "the job is preempted" in err


def test_wiring_always_passes_term_on(tmp_path):
    """Slurm's own stop (SIGTERM at the end of the grace time, scancel) reaches every program."""
    started = tmp_path / "started"
    prog = tmp_path / "plain.py"
    prog.write_text(f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(30)")
    out, _ = _run_wiring_job(tmp_path, f"{sys.executable} {prog}", no_slurm_env(), started.exists, signal.SIGTERM)
    assert out.strip() == f"rc={128 + signal.SIGTERM}"


def test_requeue_marker_when_no_scontrol_and_wiring_acts_on_it(tmp_path):
    """Without scontrol (as in a container) the library leaves a marker; the wiring, outside, runs the requeue.

    The `scontrol` the wiring finds here is a recorder script: this tests our bash, not Slurm (the lab tests do).
    """
    bindir = tmp_path / "bin"
    bindir.mkdir()
    rec = tmp_path / "scontrol-args"
    marker = tmp_path / "marker"
    code = f"""import sys; sys.path.insert(0, {str(REPO)!r})
from slurmtools.checkpoint import Checkpointer
ck = Checkpointer({str(tmp_path / 'ck')!r}, install=False, log=print)
print(ck.requeue())
"""
    (tmp_path / "step.py").write_text(code)
    (bindir / "scontrol").write_text(f"#!/bin/sh\necho \"$@\" > {rec}\n")
    (bindir / "scontrol").chmod(0o755)
    script = tmp_path / "job.sh"
    # the step runs with a PATH that has no scontrol; the batch shell has the recorder on its PATH
    script.write_text(f"""source {C.wiring_path()}
slurmtools_run env PATH=/nonexistent {sys.executable} {tmp_path / "step.py"}
""")
    env = no_slurm_env(SLURM_JOB_ID="4242", SLURMTOOLS_REQUEUE_MARKER=str(marker),
                       PATH=f"{bindir}:/usr/bin:/bin")
    out = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert "marker" in out.stdout.splitlines()[-1], out
    assert rec.read_text().split() == ["requeue", "4242"]
    assert not marker.exists()


# ---- classify: Slurm's job record -> cause (records shaped like `scontrol show job -o` in 22.05)

def fields(**kw):
    base = {"JobId": "7", "JobState": "RUNNING", "PreemptTime": "None", "TimeLimit": "00:10:00",
            "RunTime": "00:02:00", "Restarts": "0"}
    base.update(kw)
    return base


def test_classify_preempted_by_preempt_time():
    c = classify("USR1", fields(PreemptTime="2026-11-21T20:30:01"), "USR1", 300, 0.0)
    assert c.kind == "preempted" and "PreemptTime=2026-11-21T20:30:01" in c.evidence


def test_classify_time_limit_warning():
    assert classify("USR1", fields(RunTime="00:05:30"), "USR1", 300, 0.0).kind == "time_limit"
    assert classify("USR1", fields(RunTime="00:05:30"), "USR1", None, 0.0).kind == "time_limit"
    # the warning signal far from the limit, with a known lead, is not the time-limit warning
    assert classify("USR1", fields(RunTime="00:00:30", TimeLimit="01:00:00"), "USR1", 300, 0.0).kind == "cancelled"


def test_classify_term_and_unknown():
    assert classify("TERM", fields(), "USR1", 300, 0.0).kind == "cancelled"
    assert classify("TERM", fields(RunTime="00:09:58"), "USR1", 300, 0.0).kind == "time_limit"
    assert classify("TERM", None, "USR1", 300, 0.0).kind == "unknown"
    assert classify("USR1", fields(TimeLimit="UNLIMITED"), "USR1", 300, 0.0).kind == "cancelled"


def test_classify_job_already_ending():
    # another rank (or the user) requeued the job first: Slurm shows COMPLETING, PreemptTime gone, RunTime reset
    c = classify("USR1", fields(JobState="COMPLETING", RunTime="00:00:00"), "USR1", None, 0.0)
    assert c.kind == "cancelled" and "already ending" in c.evidence


def test_parse_helpers():
    assert C.parse_slurm_duration("1-02:03:04") == 93784
    assert C.parse_slurm_duration("05:00") == 300
    assert C.parse_slurm_duration("UNLIMITED") is None
    f = C.parse_scontrol_line("JobId=5 JobName=x y UserId=u(1) PreemptTime=None\n")
    assert f["JobId"] == "5" and f["PreemptTime"] == "None"


def test_a_job_named_like_its_own_fields_is_not_classified_from_its_name():
    """`JobName=x PreemptTime=2026-11-25T06:00:00` printed before the real `PreemptTime=None` and read first-wins,
    a time-limit warning was taken for a preemption."""
    line = ("JobId=5 JobName=x PreemptTime=2026-11-25T06:00:00 UserId=u(1) JobState=RUNNING "
            "PreemptTime=None TimeLimit=01:00:00 RunTime=00:55:00\n")
    assert C.parse_scontrol_line(line) is None
    c = classify("USR1", C.parse_scontrol_line(line), "USR1", 300, 0.0)
    assert c.kind == "unknown" and "field names" in c.evidence


def test_atomic_write_replaces_and_refuses_planted_temp_symlink(tmp_path):
    (tmp_path / "f").write_bytes(b"old")
    p = C.atomic_write(tmp_path / "f", lambda f: f.write(b"abc"))
    assert p.read_bytes() == b"abc"
    # the temporary name is no longer predictable (pid and a random part): a symlink planted at the old name is
    # neither followed nor in the way, and two writes never share a name
    os.symlink(tmp_path / "victim", tmp_path / f".f.{os.getpid()}.tmp")
    C.atomic_write(tmp_path / "f", lambda f: f.write(b"x"))
    assert not (tmp_path / "victim").exists() and p.read_bytes() == b"x"
    seen: list[list[str]] = []
    for _ in range(2):
        C.atomic_write(tmp_path / "g", lambda f: seen.append([n for n in os.listdir(tmp_path) if n.startswith(".g.")]))
    assert len(seen[0]) == len(seen[1]) == 1 and seen[0] != seen[1]


def test_torch_objects_dispatch_to_torch_save_without_importing_torch(tmp_path, monkeypatch):
    """The torch path: an object whose type comes from the `torch` module goes through torch.save/torch.load.

    torch is not installed here, so a stand-in module named `torch` (with save/load over pickle) checks the
    dispatch; the library must use whatever `torch` the caller already imported and never import it itself.
    """
    import pickle
    import types

    fake = types.ModuleType("torch")
    calls = []
    fake.save = lambda obj, f: (calls.append("save"), pickle.dump(obj, f))
    fake.load = lambda f, map_location=None, weights_only=None: (calls.append(("load", map_location)),
                                                                  pickle.load(f))[1]
    Tensor = type("Tensor", (), {"__module__": "torch", "__eq__": lambda a, b: True, "__hash__": None})
    fake.Tensor = Tensor
    monkeypatch.setitem(sys.modules, "torch", fake)  # pickle finds torch.Tensor through it
    ck = Checkpointer(tmp_path, install=False)
    p = ck.save({"weights": Tensor(), "step": 3}, step=3)
    assert p.name == "ckpt-000000000003.pt" and calls == ["save"]
    p2 = ck.save({"plain": 1}, step=4)  # plain state in the same run still goes to pickle
    assert p2.name == "ckpt-000000000004.pkl"
    assert ck.load() == {"plain": 1}
    p2.unlink()
    got = ck.load()
    assert isinstance(got["weights"], Tensor) and got["step"] == 3 and calls[-1] == ("load", "cpu")


def test_stop_report_carries_the_last_save_time(tmp_path, monkeypatch):
    """The epilog copies `last_checkpoint` into the decision log; the reports count lost GPU-hours from it."""
    import json as _json

    from slurmtools import checkpoint as ck

    monkeypatch.setenv("SLURMTOOLS_SCRATCH_PATTERN", str(tmp_path / "scratch-{job_id}"))
    c = ck.Checkpointer(tmp_path / "ckpt", job_id="4242", install=False, requeue=False)
    before = time.time()
    c.save({"step": 3}, step=3)
    c._report(ck.StopCause(kind="preempted", signal="USR1", received_at=time.time(), evidence="PreemptTime=x"))
    body = _json.loads((tmp_path / "scratch-4242" / "stop.json").read_text())
    assert body["kind"] == "preempted"
    # the log keeps the save time to the millisecond: compare at that precision (before could be 0.5 ms later)
    assert round(before, 3) <= body["last_checkpoint"] <= round(time.time(), 3)


@pytest.mark.parametrize("said, expected", [("slurm 25.11.7", True), ("slurm-wlm 22.05.8", False),
                                            ("slurm 24.11.5", None), ("nonsense", None)])
def test_whether_slurm_requeues_a_preempted_job_itself_comes_from_the_release_table(tmp_path, monkeypatch, said,
                                                                                   expected):
    """The running scontrol's version picks the row (measured in the labs: 22.05 no, 25.11 yes); a release no lab
    measured, or no answer, is None, and the library then requeues itself."""
    (tmp_path / "scontrol").write_text(f"#!/bin/sh\necho '{said}'\n")
    (tmp_path / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert C.slurm_requeues_preempted_exit() is expected
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert C.slurm_requeues_preempted_exit() is None


def test_two_formats_of_one_step_load_the_newer_then_a_fixed_order(tmp_path):
    """ckpt-100.pkl and ckpt-100.pt (a run that changed format): load() took whichever the folder listed first.
    Now the newer file counts, on equal times the format order (pt before pkl), with a line naming the other."""
    import pickle

    for ext in ("pkl", "pt"):
        (tmp_path / f"ckpt-000000000100.{ext}").write_bytes(pickle.dumps({"from": ext}))
    pkl, pt = tmp_path / "ckpt-000000000100.pkl", tmp_path / "ckpt-000000000100.pt"
    for newer, older, want in ((pkl, pt, "pkl"), (pt, pkl, "pt")):
        os.utime(older, ns=(1_700_000_000_000_000_000,) * 2)
        os.utime(newer, ns=(1_700_000_001_000_000_000,) * 2)
        msgs: list[str] = []
        ck = Checkpointer(tmp_path, saver=pickle.dump, loader=pickle.load, install=False, log=msgs.append)
        assert ck.load() == {"from": want} and ck.loaded.path == newer
        assert [m for m in msgs if "checkpoints of step 100" in m] == [
            f"2 checkpoints of step 100: loaded {newer.name}, ignored {older.name} (the newest by modification time "
            f"counts; on equal times the format order pt, pkl, bin, json)"]
    os.utime(pkl, ns=(1_700_000_000_000_000_000,) * 2)
    os.utime(pt, ns=(1_700_000_000_000_000_000,) * 2)
    ck = Checkpointer(tmp_path, saver=pickle.dump, loader=pickle.load, install=False, log=lambda m: None)
    assert ck.load() == {"from": "pt"}
    pt.write_bytes(b"damaged")   # the one that counts does not read back: the other of the same step is used
    os.utime(pt, ns=(1_700_000_000_000_000_000,) * 2)
    assert ck.load() == {"from": "pkl"}


STOP_SAVE = """import os, signal, sys, time
sys.path.insert(0, {repo!r})
from slurmtools.checkpoint import Checkpointer
def saver(o, f):
    time.sleep(float(sys.argv[2]))
    f.write(repr(o).encode())
ck = Checkpointer(sys.argv[1], saver=saver, loader=lambda f: f.read(), log=print)
ck.save(1, step=1)      # before any signal: no timing line
os.kill(os.getpid(), signal.SIGURG)
while not ck.should_stop():
    time.sleep(0.01)
ck.save(2, step=2)
"""


@pytest.mark.parametrize("lead, save_s, too_slow", [("1", "1.3", True), ("1", "0", False), ("", "1.3", False),
                                                    ("0", "1.3", False)])
def test_a_save_at_the_stop_says_how_long_it_took_and_when_it_outlasts_the_lead(tmp_path, lead, save_s, too_slow):
    """A save longer than the time Slurm gives is killed on every requeue, and the job never progresses: the save at
    a stop says how long it took, and when that is more than the signal lead (SLURMTOOLS_SIGNAL_LEAD, when known;
    0 is no time-limit warning), says so in one line."""
    (tmp_path / "step.py").write_text(STOP_SAVE.format(repo=str(REPO)))
    r = subprocess.run([sys.executable, str(tmp_path / "step.py"), str(tmp_path / "ck"), save_s], capture_output=True,
                       text=True, timeout=60, env=no_slurm_env(SLURMTOOLS_SIGNAL_LEAD=lead))
    assert r.returncode == 0, r.stderr
    timed = [ln for ln in r.stdout.splitlines() if " at the stop in " in ln]
    assert len(timed) == 1 and timed[0].startswith("saved ckpt-000000000002.bin at the stop in "), r.stdout
    took = float(timed[0].split(" at the stop in ")[1].split()[0])
    assert took >= float(save_s) - 0.05
    slow = [ln for ln in r.stdout.splitlines() if "more than the signal lead" in ln]
    assert len(slow) == (1 if too_slow else 0), r.stdout
    if too_slow:
        assert "more than the signal lead of 1 s (SLURMTOOLS_SIGNAL_LEAD)" in slow[0]


@pytest.mark.parametrize("state,words", [
    ({"opt": {3: 0.1}}, "checkpoint: state['opt']: key 3 (int) would load back from JSON as the string '3': use str "
                        "keys, or fmt='pickle'"),
    ({"rng": (1, 2)}, "checkpoint: state['rng']: a tuple would load back from JSON as a list: use lists, dicts, "
                      "str, numbers, bools and None, or fmt='pickle'"),
    ({"k": {1: 0, "a": 1}}, "checkpoint: state['k']: key 1 (int) would load back from JSON as the string '1'"),
    ({"seen": [{1, 2}]}, "checkpoint: state['seen'][0]: a set is not JSON"),
])
def test_json_refuses_what_it_would_not_give_back_as_saved(tmp_path, state, words):
    """fmt="json" loaded `{3: ...}` back as `{"3": ...}` and tuples as lists without a word, and keys of mixed types
    raised a TypeError from json.dumps mid-training: each is refused at save, naming where, and nothing is written."""
    ck = C.Checkpointer(tmp_path, fmt="json", install=False)
    with pytest.raises(C.CheckpointError) as e:
        ck.save(state, 1)
    assert str(e.value).startswith(words), str(e.value)
    assert not any(p.name.startswith("ckpt-") for p in tmp_path.iterdir())


def test_json_gives_back_what_it_takes(tmp_path):
    state = {"step": 7, "lr": 1e-3, "nan": float("nan"), "ok": True, "none": None, "hist": [1, [2.5, "x"]],
             "nested": {"a": {"b": []}}}
    ck = C.Checkpointer(tmp_path, fmt="json", install=False)
    ck.save(state, 7)
    got = C.Checkpointer(tmp_path, fmt="json", install=False).load()
    assert got["hist"] == state["hist"] and got["nested"] == state["nested"] and got["step"] == 7
    assert got["nan"] != got["nan"] and got["ok"] is True and got["none"] is None


def test_the_array_task_whose_id_is_the_arrays_reads_its_own_record():
    """`scontrol show job -o 100` inside the array task whose JobId is the array's own prints every task of the
    array still pending or running, one line each: the job's record is picked by its id (it was refused as
    ambiguous, and why the job was signalled read as unknown)."""
    text = ("JobId=101 ArrayJobId=100 ArrayTaskId=0 JobName=t JobState=RUNNING PreemptTime=2026-11-27T08:00:00\n"
            "JobId=100 ArrayJobId=100 ArrayTaskId=1 JobName=t JobState=RUNNING PreemptTime=None\n")
    f = C.parse_scontrol_line(text, "100")
    assert f is not None and f["ArrayTaskId"] == "1" and f["PreemptTime"] == "None"
    assert C.parse_scontrol_line(text) is None
