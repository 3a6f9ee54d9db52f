"""The program replayed jobs run (slurmtools/sandbox/job_program.py), run for real here as a process: it does its
work, resumes from its saved progress, saves on the warning signal at the cost of the save time, and a kill during
that save leaves the last save in place (the work after it is redone: what the sandbox counts as lost)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

PROG = Path(__file__).resolve().parents[3] / "slurmtools" / "sandbox" / "job_program.py"


def _start(*args):
    return subprocess.Popen([sys.executable, "-I", str(PROG), *map(str, args)])


def test_runs_its_work_and_resumes_from_saved_progress(tmp_path):
    state = tmp_path / "s"
    t0 = time.monotonic()
    assert _start(0.6, 100, 0, state).wait(10) == 0
    assert 0.55 < time.monotonic() - t0 < 3 and float(state.read_text()) == 0.6
    # a previous run saved 0.5 s of its 1.0 s of work: the next counts on from there. Told by its first periodic
    # save (every 0.05 s of work), which is past 0.5 only when it resumed: no wall-clock bound, which a loaded
    # machine broke (1.5 s for the 0.5 s left, beside three lab phases)
    state.write_text("0.5")
    p = _start(1.0, 0.05, 0, state)
    deadline = time.monotonic() + 10
    while state.read_text() == "0.5" and time.monotonic() < deadline:
        time.sleep(0.005)
    first = float(state.read_text())
    assert p.wait(10) == 0
    assert 0.5 < first <= 1.0 and float(state.read_text()) == 1.0, first


def test_the_warning_costs_the_save_time_and_a_kill_during_the_save_keeps_the_last_save(tmp_path):
    state = tmp_path / "s"
    p = _start(1.0, 100, 0.5, state)
    time.sleep(0.4)
    t0 = time.monotonic()
    p.send_signal(signal.SIGURG)
    assert p.wait(10) == 0
    assert time.monotonic() - t0 > 1.0   # the rest of the work plus the 0.5 s save
    # killed while saving (the save takes 2 s): the progress saved before (0.1 s) is all that survives
    state.write_text("0.1")
    p = _start(5.0, 100, 2.0, state)
    time.sleep(0.7)
    p.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    p.kill()
    p.wait(10)
    assert float(state.read_text()) == 0.1
    # the same with a save that fits: the progress at the signal is kept
    p = _start(5.0, 100, 0.2, state)
    time.sleep(0.7)
    p.send_signal(signal.SIGTERM)
    time.sleep(0.6)
    p.kill()
    p.wait(10)
    assert 0.5 < float(state.read_text()) < 1.5


def test_on_the_fast_clock_the_run_counts_from_slurms_start(tmp_path):
    """On the fast clock (rate 10) a run whose Slurm start was 0.5 real s before the program began (the launch:
    prolog, slurmstepd, this interpreter) does 0.5 s less work itself, so it holds its GPUs for its recorded
    elapsed time on Slurm's clock; without SLURM_JOB_START_TIME (22.05) or the clock argument it counts from its
    own start."""
    import os

    origin, rate = time.time() - 100.0, 10.0
    started = origin + rate * (time.time() - 0.5 - origin)   # Slurm's clock, 0.5 real s ago
    env = dict(os.environ, SLURM_JOB_START_TIME=str(int(started)))
    state = tmp_path / "s"
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-I", str(PROG), "1.0", "100", "0", str(state), f"{origin}:{rate:g}"], env=env)
    assert p.wait(10) == 0
    assert time.monotonic() - t0 < 0.85 and float(state.read_text()) == 1.0
    t0 = time.monotonic()
    (tmp_path / "s").unlink()
    p = subprocess.Popen([sys.executable, "-I", str(PROG), "1.0", "100", "0", str(state)], env=env)
    assert p.wait(10) == 0 and time.monotonic() - t0 > 0.95 and float(state.read_text()) == 1.0


def test_launch_lag_reads_only_a_clock_and_a_start_it_understands():
    sys.path.insert(0, str(PROG.parent))
    try:
        from job_program import launch_lag
    finally:
        sys.path.remove(str(PROG.parent))
    # slurm = origin + 10 (wall - origin): Slurm's 1,000,100 is wall 1,000,010; at wall 1,000,012 the lag is 2 s
    assert launch_lag("1000000:10", "1000100", 1000012.0) == 2.0
    assert launch_lag("1000000:10", "1000200", 1000012.0) == 0.0     # a start ahead: nothing to count
    for clock, start in (("", "1000100"), ("1000000:10", ""), ("1000000:0", "1000100"), ("x:10", "1000100"),
                         ("1000000:10", "12.5"), ("1:2:3", "1000100"), ("1000000:-10", "1000100")):
        assert launch_lag(clock, start, 1000012.0) == 0.0, (clock, start)
