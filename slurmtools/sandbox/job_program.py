"""The program every replayed job runs inside the sandbox (standard library only; slurmd starts it as the job's
user). It stands for a training job that checkpoints:

- it has `work` seconds of work to do and resumes from its saved progress (a file per job) on every run;
- it saves its progress every `every` seconds of work, at no cost (an asynchronous checkpoint);
- on the preemption or time-limit warning (SIGURG, whose default action is to be ignored, so a warning that comes
  before the handler is installed cannot kill the job; or SIGTERM) it saves synchronously, which takes `save`
  seconds during which it does no work, and then goes on working: Slurm ends it when the grace time is over, so a
  save that needs longer than the grace time is lost and the work since the last periodic save is redone.

So the grace time matters as on a real cluster: GPU-hours lost = all the runs' time - the job's work.

On the fast clock (libfaketime, `--clock faketime`) a fifth argument `ORIGIN:RATE` says how Slurm's clock runs
(slurm = origin + rate x (wall - origin)). The run's work then counts from Slurm's start of the run
(SLURM_JOB_START_TIME, whole seconds of Slurm's clock: 1/RATE of a real second), not from the program's own
start: the launch (slurmstepd, this interpreter) takes real time, RATE times longer on Slurm's clock, and
would otherwise make every run hold its GPUs that much longer than its recorded elapsed time. A recorded run's
elapsed time includes its launch too. Slurm 22.05 puts no SLURM_JOB_START_TIME in a batch job's environment: there
the program asks `scontrol show job` for the run's StartTime (Slurm's clock, printed in local time). On the scaled
clock the work counts from the program's start: Slurm's whole seconds are real ones there, coarser than the launch.
Usage: job_program.py WORK EVERY SAVE STATE_FILE [ORIGIN:RATE], or for an array task
job_program.py @TABLE EVERY SAVE STATE_DIR [ORIGIN:RATE] (TABLE: lines "task work").
"""

import signal

_WANTED = []
signal.signal(signal.SIGURG, lambda *_: _WANTED.append(1))   # first, before anything that takes time
signal.signal(signal.SIGTERM, lambda *_: _WANTED.append(1))

import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402


def main(argv):
    work_arg, every, save, state = argv[1], float(argv[2]), float(argv[3]), argv[4]
    if work_arg.startswith("@"):
        task = os.environ.get("SLURM_ARRAY_TASK_ID", "")
        with open(work_arg[1:]) as fh:
            table = dict(line.split() for line in fh if line.strip())
        work = float(table[task])
        state = os.path.join(state, task)
    else:
        work = float(work_arg)
    try:
        with open(state) as fh:
            done = float(fh.read().strip() or 0)
    except (OSError, ValueError):
        done = 0.0
    wanted = _WANTED
    clock = argv[5] if len(argv) > 5 else ""
    start = os.environ.get("SLURM_JOB_START_TIME", "") or (scontrol_start() if clock else "")
    lag = launch_lag(clock, start, time.time())

    def write(value):
        tmp = state + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(f"{value:.3f}")
        os.replace(tmp, state)

    last = time.monotonic() - lag   # the launch counts as this run's time, as Slurm's start says
    since_save = 0.0
    while done < work:
        time.sleep(min(0.2, work - done))
        now = time.monotonic()
        step = now - last
        last = now
        done += step
        since_save += step
        if since_save >= every:
            write(min(done, work))
            since_save = 0.0
        if wanted:
            wanted.clear()
            time.sleep(save)           # the synchronous save; a kill during it leaves the last save in place
            write(min(done, work))
            since_save = 0.0
            last = time.monotonic()
    write(work)
    return 0


def scontrol_start() -> str:
    """This run's StartTime from `scontrol show job` as epoch seconds of Slurm's clock, or "" (Slurm 22.05, whose
    batch environment has no SLURM_JOB_START_TIME; scontrol prints the time in this process's local time). Not
    through `slurmtools.slurm.show_job`: this file runs alone as the batch script (`python3 -I`, no package), and the
    sandbox names its jobs itself and gives them no comment, so no text of the owner's can hold a `StartTime=`."""
    import subprocess

    job = os.environ.get("SLURM_JOB_ID", "")
    if not job.isdigit():
        return ""
    try:
        out = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True,
                             timeout=10).stdout
        word = next(w for w in out.split() if w.startswith("StartTime="))[len("StartTime="):]
        return str(int(time.mktime(time.strptime(word, "%Y-%m-%dT%H:%M:%S"))))
    except (OSError, subprocess.SubprocessError, StopIteration, ValueError, OverflowError):
        return ""


def launch_lag(clock: str, start: str, now: float) -> float:
    """Real seconds from Slurm's start of this run to now, on the fast clock `clock` ("ORIGIN:RATE"); 0 when either
    is absent or unreadable, or the start lies ahead (nothing to count)."""
    try:
        origin, rate = (float(x) for x in clock.split(":"))
        started = origin + (int(start) - origin) / rate
    except (ValueError, ZeroDivisionError):
        return 0.0
    return max(0.0, now - started) if rate > 0 else 0.0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
