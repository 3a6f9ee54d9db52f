"""A tiny deterministic "trainer" that follows the cluster's slack (slurmtools.slack_loop) and checkpoints
(slurmtools.checkpoint); the lab tests run it as a real Slurm job.

    python examples/slack_trainer.py CKPT_DIR LOG_FILE [--steps N] [--step-seconds S] [--every K]

Each step folds the step number into an integer accumulator (the result proves every step ran once across
restarts) and does extra "work" by mode: 1 unit in light mode, 2 in moderate, 4 in heavy (think more augmentation
or longer sequences), each unit `--step-seconds` of sleep. The mode changes only every K steps. `{task}` in the
paths becomes the array task id, so every task of a `slurmtools submit --fill-slack` array keeps its own files.
LOG_FILE gets one line per event (plain `key=value` words).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), HERE]

from checkpoint_trainer import expected, step_fn  # noqa: E402,F401  (the same accumulator as that trainer)
from slurmtools.checkpoint import Checkpointer, CheckpointError  # noqa: E402
from slurmtools.slack import Slack  # noqa: E402
from slurmtools.slack_loop import SlackLoop  # noqa: E402

UNITS = {"light": 1, "moderate": 2, "heavy": 4}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt_dir")
    ap.add_argument("log")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--step-seconds", type=float, default=0.05, help="seconds per unit of work")
    ap.add_argument("--every", type=int, default=10, help="a mode boundary every K steps")
    ap.add_argument("--save-every", type=int, default=0, help="also checkpoint every K steps (0: only on a signal)")
    ap.add_argument("--source", default=None, help="slack source: auto, slurm or cache")
    a = ap.parse_args(argv)

    task = os.environ.get("SLURM_ARRAY_TASK_ID", "0")
    restart = os.environ.get("SLURM_RESTART_COUNT", "0")
    ckpt_dir, log_path = (p.replace("{task}", task) for p in (a.ckpt_dir, a.log))

    def log(line: str) -> None:
        with open(log_path, "a") as f:
            f.write(f"t={time.time():.3f} restart={restart} task={task} {line}\n")

    ckpt = Checkpointer(ckpt_dir, log=lambda m: log("msg " + m.replace(" ", "_")))
    loop = SlackLoop(Slack(source=a.source), every=a.every, checkpointer=ckpt,
                     log=lambda m: log("msg " + m.replace(" ", "_")))
    state = ckpt.load() or {"step": 0, "acc": 1, "work": 0}
    loop.load_state_dict(state.get("slack"), step=state["step"])
    log(f"start from={state['step']} job={os.environ.get('SLURM_JOB_ID', '-')} windows={loop.path}")
    for step in range(state["step"], a.steps):
        mode = loop.step(step)
        time.sleep(a.step_seconds * UNITS[mode])
        state = {"step": step + 1, "acc": step_fn(state["acc"], step), "work": state["work"] + UNITS[mode],
                 "slack": None}
        log(f"step {step} mode={mode}")
        if ckpt.should_stop() or (a.save_every and state["step"] % a.save_every == 0):
            state["slack"] = loop.state_dict()
            stopping = ckpt.should_stop()
            try:
                written = ckpt.save(state, step=state["step"])
            except CheckpointError as e:
                if not stopping:
                    raise
                ckpt.exit(save_error=e)  # a failed save at the stop still ends the job as stopped (requeued)
            if stopping:
                log(f"saved step={state['step']} mode={mode} cause={ckpt.cause.kind} "
                    f"path={written.name if written else 'none'}")
                ckpt.exit()
    loop.close(a.steps)
    state["slack"] = loop.state_dict()
    ckpt.save(state, step=state["step"])
    log(f"done result={state['acc']} expected={expected(a.steps)} work={state['work']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
