"""A training-loop helper over slurmtools.slack: change the mode only at boundaries the user chooses, and record
which mode was active for each window of steps.

Use::

    from slurmtools.checkpoint import Checkpointer
    from slurmtools.slack_loop import SlackLoop

    ckpt = Checkpointer("/scratch/me/run1")
    loop = SlackLoop(every=100, checkpointer=ckpt)        # boundaries every 100 steps (or loop.epoch_end(step))
    state = ckpt.load() or {"step": 0}
    loop.load_state_dict(state.get("slack"), step=state["step"])  # resume: the saved mode, its windows
    for step in range(state["step"], n_steps):
        mode = loop.step(step)                             # "light" | "moderate" | "heavy"
        ...one step, heavier in heavy mode...
        state["step"], state["slack"] = step + 1, loop.state_dict()
        ...save with ckpt.save(state, step + 1) when you checkpoint...
    loop.close(n_steps)

Why it is built this way (docs/slack.md):
- A mode changes only at a boundary, so a step never runs half in one mode; between boundaries `step()` is one
  modulo and one attribute read (the signal is polled at boundaries, and not more often than the site allows).
- The mode and the windows travel in the checkpoint (`state_dict()`, plain JSON): a resumed run continues in the
  mode it saved, and its windows file keeps the windows up to the checkpoint.
- The windows file is written beside the checkpoints (durable across requeues) and copied to the job's scratch
  folder, where the node epilog can pick it up for the job's record. Only rank 0 writes.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from slurmtools.slack import MODES, ModeState, Slack, SlackError

WINDOWS_NAME = "slack-windows.json"
WINDOWS_FORMAT = "slurmtools-slack-windows/1"


@dataclass
class Window:
    """Steps [start_step, end_step) run in `mode`; end_step is None while the window is open."""

    mode: str
    start_step: int
    start_time: float
    end_step: int | None = None
    end_time: float | None = None
    #: SLURM_RESTART_COUNT of the run that opened it
    run: int = 0
    #: why the mode was chosen (the hysteresis' reason at the boundary)
    why: str = ""
    #: how it ended: "switch", "checkpoint" (a resume closed it at the checkpoint's step), "end" (close())
    ended: str | None = None

    def to_dict(self) -> dict:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: dict) -> "Window":
        w = cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
        if w.mode not in MODES:
            raise SlackError(f"slack: saved window has an unknown mode {w.mode!r}")
        return w


class SlackLoop:
    """Mode per window of steps for one training run (see the module docstring)."""

    def __init__(self, slack: Slack | None = None, every: int | None = 100, path: str | os.PathLike | None = None,
                 checkpointer: Any = None, job_id: str | None = None, rank: int | None = None,
                 clock: Callable[[], float] = time.time, log: Callable[[str], None] | None = None):
        if every is not None and (not isinstance(every, int) or every < 1):
            raise SlackError(f"slack: every must be a positive number of steps or None (epoch ends only), got "
                             f"{every!r}")
        from slurmtools.checkpoint import rank as _rank

        self.slack = slack if slack is not None else Slack()
        self.every = every
        self.job_id = job_id or os.environ.get("SLURM_JOB_ID")
        self.rank = _rank() if rank is None else rank
        self.run = _restart_count()
        self._clock = clock
        #: default: rank 0 says it on stderr (the job's error file), as the Checkpointer does; the other ranks would
        #: only repeat it, and a lost signal or an unwritten windows file must not pass unseen
        self.log = log or (_stderr if self.rank == 0 else (lambda m: None))
        self.path = Path(path) if path else (Path(checkpointer.dir) / WINDOWS_NAME if checkpointer is not None
                                             else _default_path(self.job_id))
        self.windows: list[Window] = []
        self.current: Window | None = None
        self._last_boundary: int | None = None
        #: whether the last boundary had no signal: losing it and getting it back are said once each, not per poll
        self._lost = False

    @property
    def mode(self) -> str:
        return self.current.mode if self.current else self.slack.state.mode

    # -- boundaries

    def step(self, step: int) -> str:
        """Call before each step: a boundary every `every` steps (and the first call) may change the mode."""
        if self.current is None or (self.every is not None and step % self.every == 0
                                    and step != self._last_boundary):
            self._boundary(step)
        return self.current.mode

    def epoch_end(self, step: int) -> str:
        """Call at the end of an epoch (`step`: the next step to run): a boundary whatever `every` says."""
        if step != self._last_boundary:
            self._boundary(step)
        return self.current.mode

    def _boundary(self, step: int) -> None:
        self._last_boundary = step
        if self.current is not None and self.current.end_step is None and self.current.start_step == step:
            return
        new = self.slack.mode()
        why = self.slack.state.reason
        now = self._clock()
        r = self.slack.last
        lost = r is not None and r.signal is None
        if lost != self._lost and self.current is not None:  # the first window's line says why already
            self.log(f"slack signal lost at step {step}, mode {new} held until it is back: {r.note}" if lost
                     else f"slack signal back at step {step}: {r.note}")
        self._lost = lost
        if self.current is None:
            self.current = Window(new, step, now, run=self.run, why=why)
            self.log(f"slack mode {new} from step {step} ({why})")
            self._write()
            return
        if new == self.current.mode:
            return
        self._end(step, now, "switch")
        self.current = Window(new, step, now, run=self.run, why=why)
        self.log(f"slack mode {new} from step {step} ({why})")
        self._write()

    def _end(self, step: int, at: float, how: str) -> None:
        w = self.current
        w.end_step, w.end_time, w.ended = step, at, how
        if w.end_step > w.start_step:  # a window of no steps says nothing
            self.windows.append(w)
        self.current = None

    def close(self, step: int) -> None:
        """End the open window at `step` (the training's end) and write the windows file."""
        if self.current is not None:
            self._end(step, self._clock(), "end")
        self._write()

    # -- checkpoint pairing

    def state_dict(self) -> dict:
        """What to keep in the checkpoint: the hysteresis state, the closed windows and the open one."""
        return {"format": WINDOWS_FORMAT, "state": self.slack.state.to_dict(),
                "windows": [w.to_dict() for w in self.windows],
                "current": self.current.to_dict() if self.current else None}

    def load_state_dict(self, d: dict | None, step: int) -> None:
        """Resume from a checkpoint taken at `step`: the saved mode continues; the window open at the save is
        closed there ("checkpoint") and a new one opens in the same mode at the first step of this run."""
        if not d:
            return
        if not isinstance(d, dict) or d.get("format") != WINDOWS_FORMAT:
            got = d.get("format") if isinstance(d, dict) else type(d).__name__
            raise SlackError(f"slack: the checkpoint's slack state has format {str(got)[:40]!r}, expected "
                             f"{WINDOWS_FORMAT!r}")
        self.slack.state = ModeState.from_dict(d.get("state"))
        self.windows = [Window.from_dict(w) for w in d.get("windows", [])]
        cur = d.get("current")
        if cur:
            old = Window.from_dict(cur)
            self.current = old
            self._end(step, self._clock(), "checkpoint")
            self.current = Window(old.mode, step, self._clock(), run=self.run,
                                  why=f"restored from the checkpoint at step {step}")
            self._last_boundary = step
        self._write()

    # -- the windows file

    def document(self) -> dict:
        wins = [w.to_dict() for w in self.windows] + ([self.current.to_dict()] if self.current else [])
        return {"format": WINDOWS_FORMAT, "job_id": self.job_id, "run": self.run,
                "written_at": round(self._clock(), 3), "windows": wins}

    def _write(self) -> None:
        if self.rank != 0:
            return
        from slurmtools.checkpoint import _private_folder_why, atomic_write, job_scratch_path

        body = (json.dumps(self.document(), indent=1) + "\n").encode()
        targets = [self.path] if self.path else []
        if self.job_id:
            scratch = job_scratch_path(self.job_id)
            try:
                scratch.mkdir(mode=0o700, exist_ok=True)
                why = _private_folder_why(scratch)
            except OSError as e:
                why = e.strerror or str(e)
            copy = scratch / WINDOWS_NAME
            if why:  # a folder planted at the predictable path is another user's to read or swap
                self.log(f"slack windows not written to {copy}: {why}")
                targets = [t for t in targets if t != copy]
            elif copy not in targets:
                targets.append(copy)
        for p in targets:
            try:
                atomic_write(p, lambda f: f.write(body), mode=0o644)
            except OSError as e:
                self.log(f"slack windows not written to {p}: {e.strerror or e}")


def _stderr(msg: str) -> None:
    print(f"slurmtools.slack: {msg}", file=sys.stderr, flush=True)


def _restart_count() -> int:
    """SLURM_RESTART_COUNT (Slurm sets it from the first requeue on; absent: the first run). Anything but ASCII
    digits is refused here, at construction: a guess would file this run's windows under another run."""
    v = os.environ.get("SLURM_RESTART_COUNT", "").strip()
    if not v:
        return 0
    if not (v.isascii() and v.isdigit() and len(v) < 10):
        raise SlackError(f"slack: SLURM_RESTART_COUNT={v[:20]!r}: expected a whole number of restarts (ASCII digits)")
    return int(v)


def _default_path(job_id: str | None) -> Path | None:
    """No checkpoint folder given: $SLURMTOOLS_SLACK_WINDOWS, else the job's scratch folder (None outside a job)."""
    env = os.environ.get("SLURMTOOLS_SLACK_WINDOWS")
    if env:
        return Path(env)
    if job_id:
        from slurmtools.checkpoint import job_scratch_path

        return job_scratch_path(job_id) / WINDOWS_NAME
    return None


def read_windows(path: str | os.PathLike) -> dict:
    """A windows file's document (what a report or the epilog reads); one SlackError line naming the file."""
    p = Path(path)
    try:
        doc = json.loads(p.read_bytes())
    except FileNotFoundError:
        raise SlackError(f"slack: {p}: no windows file") from None
    except (OSError, ValueError) as e:
        raise SlackError(f"slack: {p}: cannot read the windows file: {getattr(e, 'strerror', None) or e}") from None
    if not isinstance(doc, dict) or doc.get("format") != WINDOWS_FORMAT:
        raise SlackError(f"slack: {p}: not a slack windows file (format {WINDOWS_FORMAT!r})")
    return doc
