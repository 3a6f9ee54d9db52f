"""A tiny deterministic "trainer" that uses slurmtools.checkpoint; the lab tests run it as a real Slurm job.

    python examples/checkpoint_trainer.py CKPT_DIR LOG_FILE [--steps N] [--step-seconds S] [--every K]

Each step folds the step number into an integer accumulator, so the final value proves that every step was
applied exactly once across restarts. LOG_FILE gets one line per event (plain `key=value` words) so a test can
count steps run per restart and read the stop cause.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from slurmtools.checkpoint import Checkpointer, CheckpointError  # noqa: E402

MOD = (1 << 61) - 1


def step_fn(acc: int, step: int) -> int:
    return (acc * 6364136223846793005 + step * 1442695040888963407 + 1) % MOD


def expected(steps: int) -> int:
    acc = 1
    for s in range(steps):
        acc = step_fn(acc, s)
    return acc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt_dir")
    ap.add_argument("log")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--step-seconds", type=float, default=0.2)
    ap.add_argument("--restart-step-seconds", type=float, default=None,
                    help="step time once restarted (SLURM_RESTART_COUNT>0); the result does not depend on it")
    ap.add_argument("--every", type=int, default=0, help="also save every K steps (0: only on a signal)")
    ap.add_argument("--keep", type=int, default=3)
    ap.add_argument("--format", default="pickle")
    a = ap.parse_args(argv)

    restart = os.environ.get("SLURM_RESTART_COUNT", "0")
    a.log = a.log.replace("{rank}", os.environ.get("SLURM_PROCID", "0"))  # one log per rank under srun
    pause = a.restart_step_seconds if restart != "0" and a.restart_step_seconds is not None else a.step_seconds

    def log(line: str) -> None:
        with open(a.log, "a") as f:
            f.write(f"t={time.time():.3f} restart={restart} {line}\n")

    ckpt = Checkpointer(a.ckpt_dir, keep=a.keep, fmt=a.format, log=lambda m: log("msg " + m.replace(" ", "_")))
    state = ckpt.load() or {"step": 0, "acc": 1}
    log(f"start from={state['step']} job={os.environ.get('SLURM_JOB_ID', '-')} pid={os.getpid()}")
    for step in range(state["step"], a.steps):
        time.sleep(pause)
        state = {"step": step + 1, "acc": step_fn(state["acc"], step)}
        log(f"step {step}")
        if ckpt.should_stop():
            # a plain loop calls ckpt.save_and_exit(state, step=...); this one logs the save before exiting, so it
            # hands a failed save to exit() itself, which then still requeues
            t0 = time.time()
            try:
                written = ckpt.save(state, step=state["step"])
            except CheckpointError as e:
                ckpt.exit(save_error=e)
            cause = ckpt.cause
            log(f"saved step={state['step']} cause={cause.kind} signal={cause.signal} rank={ckpt.rank} "
                f"path={written.name if written else 'none'} "
                f"save_s={time.time() - t0:.3f} since_signal_s={time.time() - cause.received_at:.3f}")
            ckpt.exit()
        if a.every and state["step"] % a.every == 0:
            ckpt.save(state, step=state["step"])
    ckpt.save(state, step=state["step"])
    log(f"done result={state['acc']} expected={expected(a.steps)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
