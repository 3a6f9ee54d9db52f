"""Checkpoint-on-signal for training code running under Slurm.

Use::

    from slurmtools.checkpoint import Checkpointer
    ckpt = Checkpointer("/scratch/me/run1", keep=3)      # installs the signal handlers
    state = ckpt.load() or {"step": 0, ...}              # newest complete checkpoint; None only when there is none
    for step in range(state["step"], n_steps):
        ...one step...
        state["step"] = step + 1
        if ckpt.should_stop():                           # a warning or preemption signal arrived
            ckpt.save_and_exit(state, step=step + 1)     # saves, requeues (even when the save fails), exits
    ckpt.save(state, step=n_steps)

Why it is built this way (facts measured on Slurm 22.05; see docs/checkpoint.md):
- The batch shell is warned only with `--signal=B:URG@lead` (time limit; the signal is the site's or job's choice,
  slurmtools.warning_signals) and, on preemption, only when slurmctld has `preempt_send_user_signal`: both
  arrive as the SAME signal. The handler therefore only records the signal;
  `should_stop()` then asks Slurm which it was: `scontrol show job` carries `PreemptTime` once the job has been
  picked for preemption, and `TimeLimit`/`RunTime` say how close the limit is.
- Handlers only set a flag (no I/O, no locks): the save happens at the next step boundary, in normal code.
- Checkpoints are written to a temporary file in the same directory, fsynced, renamed, and the directory fsynced,
  so a kill at any moment leaves either the old or the new checkpoint, never a torn one. The temporary file is
  locked while written, so a requeued run starting during the old run's save removes only dead writers' leftovers.
- Only rank 0 (`RANK`, else `SLURM_PROCID`) writes and requeues.
- No heavy imports: torch is used only when the caller hands over an object whose type comes from torch.
"""

from __future__ import annotations

import fcntl
import json
import operator
import os
import pickle
import re
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, NoReturn

from slurmtools.errors import SlurmtoolsError, shown

PREFIX = "ckpt-"
_NAME = re.compile(r"^ckpt-(\d{12})\.(pkl|json|bin|pt)$")
_TMP = re.compile(r"^\.ckpt-.*\.tmp$")
_DEAD_SAVE = re.compile(r"^\.(ckpt-\d{12}\.(?:pkl|json|bin|pt))\..+\.tmp$")  # a save's, not the start probe
#: of two checkpoints of one step with the same modification time, load() takes the one later in this order
FORMAT_ORDER = ("json", "bin", "pkl", "pt")
#: Slurm may send the --signal warning up to 60 s early and checks every 30 s; slack for "close to the limit"
TIME_LIMIT_SLACK = 120

Saver = Callable[[Any, BinaryIO], None]
Loader = Callable[[BinaryIO], Any]


class CheckpointError(SlurmtoolsError):
    """A checkpoint could not be written or read; one line naming the file."""


@dataclass(frozen=True)
class StopCause:
    """Why the job is asked to stop, as Slurm's own state tells it."""

    #: "preempted", "time_limit", "cancelled" (neither, or the job is already ending) or "unknown" (no Slurm
    #: to ask, or a rank other than 0, which leaves asking to rank 0)
    kind: str
    signal: str
    received_at: float
    #: the Slurm facts the decision rests on, e.g. "PreemptTime=2026-11-21T20:30:01"
    evidence: str


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    step: int


def rank() -> int:
    """This process's global rank: torchrun's RANK, else Slurm's SLURM_PROCID, else 0 (neither set, or set empty).

    A value that is set but not ASCII digits ('-1', 'abc', '²', '١') is refused in one line naming the variable:
    read as 0, as it used to be, it made two processes rank 0, both writing and pruning the same checkpoints.
    """
    for var in ("RANK", "SLURM_PROCID"):
        v = os.environ.get(var, "").strip()
        if not v:
            continue
        n = _env_whole(v)
        if n is None:
            raise CheckpointError(f"checkpoint: {var}={v[:20]!r}: expected this process's rank as a whole number "
                                  f"(ASCII digits); a guess could make two ranks write the same checkpoints")
        return n
    return 0


def _env_whole(v: str) -> int | None:
    """A whole number in ASCII digits, as torchrun and Slurm write them, else None ('²' and '١' pass
    str.isdigit(), and int('١') is 1)."""
    return int(v) if v.isascii() and v.isdigit() and len(v) < 19 else None


#: the most seconds `--signal=...@lead` may ask for (Slurm's limit; site validation holds tiers to it)
SIGNAL_LEAD_MAX = 0xFFFF


def signal_lead_from_env() -> int | None:
    """SLURMTOOLS_SIGNAL_LEAD (the plan sets it to the tier's --signal lead in seconds); None when unset or empty.
    A value that is set but unreadable is refused: read as None it would make every warning a time limit."""
    v = os.environ.get("SLURMTOOLS_SIGNAL_LEAD", "").strip()
    if not v:
        return None
    n = _env_whole(v)
    if n is None or n > SIGNAL_LEAD_MAX:
        raise CheckpointError(f"checkpoint: SLURMTOOLS_SIGNAL_LEAD={v[:20]!r}: expected whole seconds from 0 to "
                              f"{SIGNAL_LEAD_MAX} (ASCII digits), as --signal=...@lead takes")
    return n


def wiring_path() -> Path:
    """The bash snippet a batch script sources to forward signals to the training step (see docs)."""
    return Path(__file__).with_name("checkpoint_wiring.sh")


# --------------------------------------------------------------------------------------------------- writing


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None], mode: int = 0o600) -> Path:
    """Write `path` through `write(fileobj)` so that readers see the old file or the complete new one, never part.

    The temporary file has a name no other writer shares (two runs of a job with the same pid in two containers,
    or an asynchronous save of the same step, used to collide) and stays locked until it is renamed, so that a run
    starting meanwhile (requeue overlap) can tell it from a dead writer's leftover (`remove_stale_temps`).
    """
    final = Path(path)
    d = final.parent
    while True:
        tmp = d / f".{final.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
        if _lock(fd, wait=True) is not False and os.fstat(fd).st_nlink > 0:
            os.fchmod(fd, mode)   # exactly `mode`: a file others read (the slack cache) must not follow a 077 umask
            break
        os.close(fd)  # a starting run took it for a leftover between its creation and the lock: take another
    try:
        # the file object does not own fd: the lock must hold until the rename, and a saver may close its file
        with os.fdopen(fd, "wb", closefd=False) as f:
            write(f)
            if not f.closed:
                f.flush()
        os.fsync(fd)
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        os.close(fd)
    fsync_dir(d)
    return final


def _lock(fd: int, wait: bool) -> bool | None:
    """flock `fd` exclusively: True when locked, False when another process holds it (only when not `wait`), None
    when this filesystem cannot lock (then nobody can tell a live temporary file from a dead one)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False
    except OSError:
        return None


def remove_stale_temps(d: str | os.PathLike, removed: list[str] | None = None) -> int:
    """Remove the temporary checkpoint files in `d` that no process is writing (their writer died: kill -9, node
    crash); a file still locked by its writer (the previous run in its grace time) is left alone. Returns how many
    were left because this filesystem cannot tell (no locks); the names removed are added to `removed`."""
    unknown = 0
    try:
        names = [n for n in os.listdir(d) if _TMP.match(n)]
    except OSError:
        return 0
    for n in names:
        p = os.path.join(d, n)
        try:
            fd = os.open(p, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            if os.path.islink(p):  # never followed; removing the link itself harms nothing
                try:
                    os.unlink(p)
                except OSError:
                    pass
            continue
        try:
            held = _lock(fd, wait=False)
            if held is None:
                unknown += 1
            elif held and stat.S_ISREG(os.fstat(fd).st_mode):
                try:
                    os.unlink(p)
                except OSError:
                    continue
                if removed is not None:
                    removed.append(n)
        finally:
            os.close(fd)
    return unknown


def fsync_dir(d: str | os.PathLike) -> None:
    """Make a rename durable: fsync the directory that holds it."""
    fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _is_torch(obj: Any) -> bool:
    """True for torch tensors/modules/optimizers and containers holding them; never imports torch itself."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    mod = type(obj).__module__ or ""
    if mod == "torch" or mod.startswith("torch."):
        return True
    if isinstance(obj, dict):
        return any(_is_torch(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_is_torch(v) for v in obj)
    return False


def _json_exact(obj: Any) -> None:
    """Refuse, naming where, what JSON would not give back as saved: a resumed run would get `{"3": ...}` for
    `{3: ...}` and a list for a tuple without a word, and keys of mixed types or an object JSON cannot write made
    `json.dumps` raise a TypeError in the middle of training. Finite and non-finite floats, bools, None, str, int,
    lists and str-keyed dicts come back as saved."""
    stack: list[tuple[Any, str]] = [(obj, "state")]
    while stack:
        o, at = stack.pop()
        if o is None or isinstance(o, (bool, int, float, str)):
            continue
        if isinstance(o, list):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(o))
        elif isinstance(o, dict):
            for k, v in o.items():
                if not isinstance(k, str):
                    raise CheckpointError(f"checkpoint: {at}: key {shown(k)} ({type(k).__name__}) would load back "
                                          f"from JSON as the string {shown(str(k))}: use str keys, or fmt='pickle'")
                stack.append((v, f"{at}[{shown(k)}]"))
        else:
            what = "a tuple would load back from JSON as a list" if isinstance(o, tuple) else \
                f"a {type(o).__name__} is not JSON"
            raise CheckpointError(f"checkpoint: {at}: {what}: use lists, dicts, str, numbers, bools and None, or "
                                  f"fmt='pickle'")


def _formats(fmt: str) -> tuple[str, Saver, Loader]:
    if fmt == "pickle":
        return "pkl", (lambda o, f: pickle.dump(o, f, protocol=pickle.HIGHEST_PROTOCOL)), pickle.load
    if fmt == "json":
        def save_json(o, f):
            _json_exact(o)
            f.write(json.dumps(o, sort_keys=True).encode())
        return "json", save_json, (lambda f: json.loads(f.read()))
    if fmt == "torch":
        def save(o, f):
            import torch
            torch.save(o, f)

        def load(f):
            import torch
            return torch.load(f, map_location="cpu", weights_only=False)
        return "pt", save, load
    raise CheckpointError(f"checkpoint: unknown format {fmt!r} (pickle, json, torch, or pass saver=/loader=)")


def _is_file(e: os.DirEntry) -> bool:
    try:
        return e.is_file()
    except OSError:
        return False


def _mtime_ns(p: Path) -> int:
    try:
        return os.stat(p).st_mtime_ns
    except OSError:  # gone since it was listed: load() lists again when it finds it gone
        return -1


def _one_line(text: str, limit: int = 300) -> str:
    first = " ".join(text.split())
    return first if len(first) <= limit else first[:limit] + "..."


# --------------------------------------------------------------------------------------------------- Slurm state


def slurm_job_fields(job_id: str, timeout: float = 10.0) -> dict[str, str] | None:
    """`scontrol show job -o ID` as a dict, or None when there is no scontrol / no answer."""
    try:
        out = subprocess.run(["scontrol", "show", "job", "-o", str(job_id)], capture_output=True, text=True,
                             timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return parse_scontrol_line(out.stdout, job_id)


def parse_scontrol_line(text: str, job_id: str | int | None = None) -> dict[str, str] | None:
    """The fields of one `scontrol show job -o` record (`slurm.show_job`; `job_id` picks it where scontrol printed
    an array's tasks or a heterogeneous job's components, as it does for the array task whose id is the array's),
    or None when the job's own name, comment or paths hold its field names: then why the job was signalled is not
    known, rather than read from the name."""
    from slurmtools.slurm.show_job import AmbiguousRecord, parse_show_job

    try:
        return parse_show_job(text, job_id)
    except AmbiguousRecord:
        return None


def parse_slurm_duration(s: str) -> int | None:
    """Slurm's [D-]HH:MM:SS / MM:SS as seconds; None for UNLIMITED or anything else."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", (s or "").strip())
    if not m:
        return None
    d, h, mi, sec = (int(x) if x else 0 for x in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + sec


def classify(sig: str, fields: dict[str, str] | None, warning_signal: str, lead: int | None,
             received_at: float) -> StopCause:
    """Decide preempted / time_limit / cancelled from the signal and Slurm's job record. Pure; tested alone."""
    if fields is None:
        return StopCause("unknown", sig, received_at, "no Slurm job record it can read (scontrol unavailable, "
                                                      "not in a job, or the job's name or paths hold its field names)")
    preempt = fields.get("PreemptTime", "None")
    state = fields.get("JobState", "")
    if (preempt and preempt not in ("None", "Unknown", "0")) or state == "PREEMPTED":
        return StopCause("preempted", sig, received_at, f"PreemptTime={preempt} JobState={state}")
    if state and state not in ("RUNNING", "SUSPENDED"):  # already ending: requeued or cancelled meanwhile
        return StopCause("cancelled", sig, received_at, f"JobState={state} (job already ending) PreemptTime={preempt}")
    limit = parse_slurm_duration(fields.get("TimeLimit", ""))
    run = parse_slurm_duration(fields.get("RunTime", ""))
    left = None if limit is None or run is None else limit - run
    ev = f"PreemptTime={preempt} JobState={state} TimeLimit={fields.get('TimeLimit')} RunTime={fields.get('RunTime')}"
    if left is not None:
        near = (lead if lead is not None else 0) + TIME_LIMIT_SLACK
        if sig == warning_signal and (lead is None or left <= near):
            return StopCause("time_limit", sig, received_at, ev + f" left={left}s")
        if left <= TIME_LIMIT_SLACK:
            return StopCause("time_limit", sig, received_at, ev + f" left={left}s")
    return StopCause("cancelled", sig, received_at, ev)


# --------------------------------------------------------------------------------------------------- the library


class Checkpointer:
    """Signal-aware checkpoint directory for one training run (see the module docstring for the loop)."""

    def __init__(self, directory: str | os.PathLike, keep: int = 3, fmt: str = "pickle",
                 saver: Saver | None = None, loader: Loader | None = None,
                 warning_signal: str | None = None, signals: tuple[str, ...] = ("TERM",),
                 requeue: bool = True, signal_lead: int | None = None, job_id: str | None = None,
                 install: bool = True, log: Callable[[str], None] | None = None):
        if keep < 1:
            raise CheckpointError(f"checkpoint: keep must be at least 1, got {keep}")
        # absolute now: training code that changes its working folder later (hydra does) must still save here,
        # where the requeued run looks, not into a folder of the same name made elsewhere
        self.dir = Path(directory).absolute()
        self.keep = keep
        ext, dsave, dload = _formats(fmt)
        self.fmt = fmt
        self.ext = "bin" if saver is not None and fmt == "pickle" else ext
        self._saver = saver or dsave
        self._loader = loader or dload
        self._custom = saver is not None
        from slurmtools.warning_signals import DEFAULT, normalize, why_not

        given = warning_signal or os.environ.get("SLURMTOOLS_CHECKPOINT_SIGNAL") or DEFAULT
        if normalize(given) is None:  # a typo would leave the warning unhandled: say so now, not at preemption
            where = "warning_signal" if warning_signal else "SLURMTOOLS_CHECKPOINT_SIGNAL"
            raise CheckpointError(f"checkpoint: {where}: {why_not(given)}")
        self.warning_signal = normalize(given)
        self.signal_lead = signal_lead if signal_lead is not None else signal_lead_from_env()
        self.job_id = job_id or os.environ.get("SLURM_JOB_ID")
        # what scontrol is told: an array task by ARRAYJOB_TASK, since its SLURM_JOB_ID may be the array's own id,
        # which `scontrol requeue` takes for every task of the array (measured in CI: one preempted task's requeue
        # cancelled its sibling mid-run)
        self.slurm_ref = job_id or slurm_job_ref()
        self.rank = rank()
        self.requeue_enabled = requeue
        self.log = log or (lambda msg: print(f"slurmtools.checkpoint: {msg}", file=sys.stderr, flush=True))
        self._got: tuple[str, float] | None = None
        self._cause: StopCause | None = None
        #: wall time of the last successful save by this process (the reports count GPU-hours lost after it)
        self.last_saved_at: float | None = None
        if self.rank == 0:
            try:
                self.dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise CheckpointError(f"checkpoint: cannot create {self.dir}: {e.strerror}") from None
            self._check_writable()
            dead: list[str] = []
            if remove_stale_temps(self.dir, dead):
                self.log(f"temporary files left in {self.dir}: this filesystem has no locks to tell a dead "
                         f"writer's from one still writing")
            dead = sorted({m.group(1) for n in dead if (m := _DEAD_SAVE.match(n))})
            if dead:  # a save killed every run shows only here: its own process had no time to say anything
                self.log(f"removed the unfinished save of {', '.join(dead)}: its writer died while saving (killed "
                         f"at the end of the time Slurm gives? then the save is too slow to ever land)")
        self._names = tuple(dict.fromkeys((self.warning_signal,) + tuple(s.upper().removeprefix("SIG")
                                                                          for s in signals)))
        if install:
            self.install()

    # -- signals

    def install(self) -> None:
        """Install the flag-setting handlers (main thread only, as Python requires), then tell the batch wiring
        that this program handles the warning signal: until then the wiring keeps it from the program, which a
        signal it does not handle would kill."""
        for name in self._names:
            try:
                signum = getattr(signal, "SIG" + name)
            except AttributeError:
                raise CheckpointError(f"checkpoint: unknown signal {name!r}") from None
            signal.signal(signum, self._on_signal)
        promise = signal_promise_path()
        # ranks on the other hosts of a job find no such folder: only the batch host's wiring reads the promise
        if self.job_id and promise is not None and os.path.lexists(promise.parent):
            why = leave_marker(promise, b"")
            if why:
                self.log(f"no promise left (the batch wiring then keeps the warning signal from this program unless "
                         f"SLURMTOOLS_FORWARD_SIGNAL=1): {why}")

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._got is None:  # the first signal decides; a later SIGTERM does not erase the warning
            self._got = (signal.Signals(signum).name.removeprefix("SIG"), time.time())

    @property
    def signalled(self) -> bool:
        return self._got is not None

    def should_stop(self) -> bool:
        """True once a stop signal arrived. Cheap until then (one attribute read)."""
        return self._got is not None

    @property
    def cause(self) -> StopCause | None:
        """Why we were signalled, asked of Slurm on first use after the signal (None before any signal)."""
        if self._got is None:
            return None
        if self._cause is None:
            sig, at = self._got
            if self.rank != 0:  # a thousand ranks must not all query slurmctld; rank 0 decides and requeues
                self._cause = StopCause("unknown", sig, at, f"rank {self.rank} leaves asking Slurm to rank 0")
                return self._cause
            fields = slurm_job_fields(self.slurm_ref) if self.slurm_ref else None
            self._cause = classify(sig, fields, self.warning_signal, self.signal_lead, at)
            self.log(f"got SIG{sig}: {self._cause.kind} ({self._cause.evidence})")
        return self._cause

    # -- files

    def checkpoints(self) -> list[Checkpoint]:
        """Complete checkpoints, oldest first (temporary files are never listed, nor anything but plain files: a
        FIFO named like a checkpoint would hang load(), a folder would fail the pruning)."""
        try:
            with os.scandir(self.dir) as it:
                entries = [(e.name, m) for e in it if (m := _NAME.match(e.name)) and _is_file(e)]
        except FileNotFoundError:
            return []
        except OSError as e:
            raise CheckpointError(f"checkpoint: cannot list {self.dir}: {e.strerror or e}") from None
        cs = [Checkpoint(self.dir / n, int(m.group(1))) for n, m in entries]
        seen: set[int] = set()
        dup: set[int] = set()
        for c in cs:
            (dup if c.step in seen else seen).add(c.step)
        # two files of one step (a run that changed format): the newer one counts, then a fixed format order, so
        # that load() never depends on the order the folder lists them in
        return sorted(cs, key=lambda c: (c.step, _mtime_ns(c.path) if c.step in dup else 0,
                                         FORMAT_ORDER.index(c.path.suffix[1:])))

    def save(self, obj: Any, step: int) -> Path | None:
        """Write checkpoint `step` atomically and keep the newest `keep` (and always the one just written: a path
        returned is on disk). Other ranks write nothing (None)."""
        if self.rank != 0:
            return None
        try:  # numpy and torch integers say they are integers through __index__; True is no step
            n = None if isinstance(step, bool) else operator.index(step)
        except TypeError:
            n = None
        if n is None or n < 0 or n >= 10**12:
            raise CheckpointError(f"checkpoint: step must be an integer in [0, 10^12), got {step!r}")
        step = n
        saver, ext = self._saver, self.ext
        if not self._custom and self.fmt == "pickle" and _is_torch(obj):
            ext, saver, _ = _formats("torch")
        path = self.dir / f"{PREFIX}{step:012d}.{ext}"
        t0 = time.monotonic()
        try:
            try:
                atomic_write(path, lambda f: saver(obj, f))
            except FileNotFoundError:
                if self.dir.is_dir():
                    raise
                # removed while the job ran (scratch purges remove idle folders): the save at preemption must land
                self.dir.mkdir(parents=True, exist_ok=True)
                self.log(f"checkpoint folder {self.dir} was gone (removed while the job ran?): made it again")
                atomic_write(path, lambda f: saver(obj, f))
        except OSError as e:
            raise CheckpointError(f"checkpoint: cannot write {path}: {e.strerror or e}") from None
        self.last_saved_at = time.time()
        if self._got is not None:
            self._time_stop_save(path, time.monotonic() - t0)
        self._prune(path)
        return path

    def _time_stop_save(self, path: Path, took: float) -> None:
        """Say how long the save at a stop took and, when the lead is known, whether it fits in it: a save that
        outlasts the time Slurm gives is killed on every run, and the job never gets past its last checkpoint."""
        sig, at = self._got
        since = self.last_saved_at - at
        self.log(f"saved {path.name} at the stop in {took:.1f} s ({since:.1f} s after SIG{sig})")
        lead = self.signal_lead
        if lead and since > lead:  # lead 0 is "no time-limit warning": nothing to compare with
            self.log(f"the stop took {since:.1f} s from SIG{sig} to the saved checkpoint (the save {took:.1f} s), "
                     f"more than the signal lead of {lead} s (SLURMTOOLS_SIGNAL_LEAD): at the time limit Slurm "
                     f"ends the job before a save this slow lands, on every run, and the job makes no progress; "
                     f"give the tier a longer lead or make the save (and the step it waits for) faster")

    def load(self) -> Any | None:
        """The newest checkpoint that reads back; an unreadable one is reported and the next older one tried.

        None only when there is no checkpoint at all: when there are some and none reads back (another code
        version, damage), starting over would lose them all, so it is an error naming the newest.
        """
        for _ in range(100):
            cs = self.checkpoints()
            failed: list[tuple[Checkpoint, str]] = []
            vanished = False
            for c in reversed(cs):
                loader = _formats("torch")[2] if c.path.suffix == ".pt" and not self._custom else self._loader
                try:
                    f = open(c.path, "rb")
                except FileNotFoundError:  # replaced or pruned by another run of the job since it was listed
                    vanished = True
                    break
                except OSError as e:
                    failed.append((c, f"{type(e).__name__}: {e.strerror or e}"))
                    self.log(f"skipping unreadable checkpoint {c.path}: {failed[-1][1]}")
                    continue
                try:
                    with f:
                        obj = loader(f)
                except Exception as e:  # a foreign or damaged file must not stop the resume; say which one
                    failed.append((c, _one_line(f"{type(e).__name__}: {e}")))
                    self.log(f"skipping unreadable checkpoint {c.path}: {failed[-1][1]}")
                    continue
                self.loaded = c
                tried = {f.path for f, _ in failed}
                others = [o.path.name for o in cs if o.step == c.step and o.path != c.path and o.path not in tried]
                if others:
                    self.log(f"{len(others) + 1} checkpoints of step {c.step}: loaded {c.path.name}, ignored "
                             f"{', '.join(others)} (the newest by modification time counts; on equal times the "
                             f"format order {', '.join(reversed(FORMAT_ORDER))})")
                return obj
            if vanished:
                continue
            self.loaded = None
            if failed:
                c, why = failed[0]
                raise CheckpointError(f"checkpoint: none of the {len(failed)} checkpoint(s) in {self.dir} reads back "
                                      f"(newest {c.path.name}: {why}); not starting over from nothing: move them "
                                      f"aside to do so")
            return None
        raise CheckpointError(f"checkpoint: the checkpoints in {self.dir} kept vanishing while being read (another "
                              f"run of this job pruning them?)")

    def save_and_exit(self, obj: Any, step: int, code: int | None = None) -> NoReturn:
        """Save at a stop, then end as `exit()` does, whether the save landed or not (the loop's one call).

        A save that failed here used to raise out of the loop: the job ended FAILED and was not requeued, the
        work since the last checkpoint lost, and the job too. Now it ends as the signal wants (requeued on the
        time-limit and preemption paths) and resumes from the last good checkpoint; see `exit(save_error=...)`.
        """
        error = None
        try:
            self.save(obj, step)
        except Exception as e:  # a saver's own error too: the requeue must still happen
            error = e
        self.exit(code, save_error=error)

    def _resume_point(self) -> str:
        """Where the next run resumes: the newest checkpoint in the folder (load() falls back to older ones)."""
        try:
            cs = self.checkpoints()
        except CheckpointError as e:
            why = str(e).removeprefix("checkpoint: ")
            return f"the next run resumes from the newest checkpoint it can read ({why})"
        if not cs:
            return f"no checkpoint in {self.dir}: the next run starts from the beginning"
        return f"the next run resumes from step {cs[-1].step} ({cs[-1].path})"

    def latest_step(self) -> int | None:
        cs = self.checkpoints()
        return cs[-1].step if cs else None

    def _check_writable(self) -> None:
        """Find a folder the job cannot write now, not at the save hours later when the signal came."""
        probe = self.dir / f".ckpt-probe.{os.getpid()}.{os.urandom(6).hex()}.tmp"
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        except OSError as e:
            raise CheckpointError(f"checkpoint: cannot write in {self.dir}: {e.strerror or e}") from None
        try:
            os.unlink(probe)
        except OSError:  # another run starting here took it for a leftover; one left behind is removed as one
            pass

    def _prune(self, written: Path) -> None:
        """Remove all but the newest `keep`, never `written`; a failure here is said, not raised: the save landed."""
        try:
            cs = self.checkpoints()
        except CheckpointError as e:
            self.log(f"old checkpoints not removed: {e}")
            return
        step = int(_NAME.match(written.name).group(1))
        if cs and cs[-1].step > step:
            self.log(f"saved step {step}, but {self.dir} holds step {cs[-1].step}: load() resumes from step "
                     f"{cs[-1].step} (another run of this job writing at once?)")
        for c in cs[:-self.keep]:
            if c.path == written:
                continue
            try:
                c.path.unlink()
            except FileNotFoundError:
                pass
            except OSError as e:
                self.log(f"old checkpoint {c.path} not removed: {e.strerror or e}")

    # -- requeue and exit

    def requeue(self) -> str:
        """Ask Slurm to run this job again: `scontrol requeue`, else leave a marker the batch wiring acts on.

        Returns "scontrol", "marker" or "none". Only rank 0 acts.
        """
        if self.rank != 0 or not self.job_id:
            return "none"
        try:
            r = subprocess.run(["scontrol", "requeue", str(self.slurm_ref)], capture_output=True, text=True,
                               timeout=30)
            if r.returncode == 0:
                self.log(f"requeued job {self.slurm_ref} with scontrol")
                return "scontrol"
            why = (r.stderr or r.stdout).strip().splitlines()[-1:] or [f"rc {r.returncode}"]
            self.log(f"scontrol requeue failed: {why[0]}; leaving a requeue marker")
        except (OSError, subprocess.SubprocessError) as e:
            self.log(f"no scontrol here ({type(e).__name__}); leaving a requeue marker")
        marker = requeue_marker_path()
        why = ("SLURMTOOLS_REQUEUE_MARKER is not set (run the step through the batch wiring's slurmtools_run)"
               if marker is None else leave_marker(marker, b"requeue\n"))
        if why:
            self.log(f"requeue marker not left: {why}; job {self.job_id} is not requeued")
            return "none"
        return "marker"

    def exit(self, code: int | None = None, save_error: BaseException | None = None) -> NoReturn:
        """End the process after a save: requeue on the time-limit and preemption paths, then exit.

        `save_error`, the save at the stop having failed, is said in one line with the checkpoint the next run
        resumes from; the job still ends as it would have, and exits 1 (unless `code` is given) only when
        nothing requeues it, so that the lost save shows in its state.

        Preemption also requeues itself: a job that ends during GraceTime would otherwise finish as COMPLETED
        and never run again. When Slurm cannot be asked (no scontrol, e.g. in a container), the warning signal
        still requeues: both of its causes want it; a bare SIGTERM (possibly scancel) does not. Exit code 0
        unless given.
        """
        if save_error is not None and self.rank == 0:
            why = str(save_error) if isinstance(save_error, CheckpointError) else _one_line(
                f"checkpoint: save failed: {type(save_error).__name__}: {save_error}")
            self.log(f"save at the stop failed, the job ends without it: {why}; {self._resume_point()}")
        cause = self.cause
        if cause is not None and self.rank == 0:
            self._report(cause)
        wanted = cause is not None and (cause.kind in ("time_limit", "preempted") or (
            cause.kind == "unknown" and cause.signal == self.warning_signal and bool(self.job_id)))
        by_slurm = False
        if wanted and cause.kind == "preempted" and slurm_requeues_preempted_exit() and self.rank == 0:
            # this Slurm requeues the preempted job itself once it ends; a requeue of ours would make Slurm
            # requeue the next run as well
            self.log("Slurm requeues this preempted job itself when it ends")
            wanted, by_slurm = False, True
        how = self.requeue() if self.requeue_enabled and wanted else "none"
        if save_error is not None and code is None and how == "none" and not by_slurm and self.rank == 0:
            self.log(f"nothing requeues job {self.job_id or '(none: not in a job)'}: exit code 1, for the lost save")
            code = 1
        sys.stdout.flush()
        sys.exit(0 if code is None else code)

    def _report(self, cause: StopCause) -> None:
        """Leave the cause in the job's scratch folder: the epilog (root) puts it in the decision log.

        Why: after `scontrol requeue` Slurm no longer shows PreemptTime, so only the job knows it was preempted;
        the epilog logs it as reported by the job, next to the requeue that Slurm itself confirms.
        """
        if not self.job_id:
            return
        d = job_scratch_path(self.job_id)
        try:
            d.mkdir(mode=0o700, exist_ok=True)
            why = _private_folder_why(d)
            if why:  # a folder planted at the predictable path: the report would be another user's to read or swap
                self.log(f"stop report not written to {d}: {why}")
                return
            body = json.dumps({"kind": cause.kind, "signal": cause.signal, "received_at": round(cause.received_at, 3),
                               "last_checkpoint": round(self.last_saved_at, 3) if self.last_saved_at else None,
                               "evidence": cause.evidence[:500]}).encode()
            atomic_write(d / "stop.json", lambda f: f.write(body), mode=0o600)
        except OSError as e:
            self.log(f"stop report not written to {d}: {e.strerror or e}")


def slurm_requeues_preempted_exit(timeout: float = 10.0) -> bool | None:
    """Whether the running Slurm requeues a preempted job that ends during its grace time (release table; None
    when the release is unknown or not measured: the caller then requeues itself, at worst one extra short run)."""
    try:
        out = subprocess.run(["scontrol", "--version"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    from slurmtools.errors import SlurmtoolsError
    from slurmtools.slurm.releases import release_for

    try:
        return release_for(out.stdout.strip()).preempted_exit_requeued if out.returncode == 0 else None
    except SlurmtoolsError:
        return None


def slurm_job_ref(env: dict | None = None) -> str | None:
    """This job as scontrol should name it: `ARRAYJOB_TASK` for an array task (its SLURM_JOB_ID can be the array's
    own id, which scontrol takes for the whole array), else SLURM_JOB_ID; None outside a job."""
    e = os.environ if env is None else env
    arr, task = e.get("SLURM_ARRAY_JOB_ID", "").strip(), e.get("SLURM_ARRAY_TASK_ID", "").strip()
    if _env_whole(arr) is not None and _env_whole(task) is not None:
        return f"{arr}_{task}"
    return e.get("SLURM_JOB_ID") or None


def job_scratch_path(job_id: str | int) -> Path:
    """The per-job scratch folder the epilog cleans up (site pattern in SLURMTOOLS_SCRATCH_PATTERN)."""
    pattern = os.environ.get("SLURMTOOLS_SCRATCH_PATTERN") or "/tmp/slurmtools-job-{job_id}"
    return Path(pattern.replace("{job_id}", str(job_id)))


def signal_promise_path() -> Path | None:
    """Where the library says "this program handles the warning signal" (the batch wiring passes the signal on only
    then): SLURMTOOLS_SIGNAL_PROMISE, set by the wiring to a file in its private folder for the run. Every process on
    the batch host leaves it, so whichever rank runs there is enough. None outside the wiring."""
    env = os.environ.get("SLURMTOOLS_SIGNAL_PROMISE")
    return Path(env) if env else None


def requeue_marker_path() -> Path | None:
    """Where the library leaves a requeue request when it cannot run scontrol: SLURMTOOLS_REQUEUE_MARKER, set by the
    batch wiring to a file in its private folder for the run (it carries the request out). None outside the
    wiring: a shared place such as /tmp would let another user plant the request (issue 12)."""
    env = os.environ.get("SLURMTOOLS_REQUEUE_MARKER")
    return Path(env) if env else None


# --------------------------------------------------------------------------------------------------- markers
# The one rule the batch wiring (checkpoint_wiring.sh, `_slurmtools_marker_why`) applies too: a marker counts only
# as a plain file of the job's user in a folder of that user that group and others cannot write.


def _private_folder_why(d: Path) -> str | None:
    """Why folder `d` is no place for a marker or report of this user (None: it is one)."""
    try:
        st = os.lstat(d)
    except OSError as e:
        return f"its folder {d}: {e.strerror or e}"
    if not stat.S_ISDIR(st.st_mode):
        return f"its folder {d} is not a folder of its own (a symlink?)"
    if st.st_uid != os.geteuid():
        return f"its folder {d} is owned by uid {st.st_uid}, not this job's user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"its folder {d} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def leave_marker(path: Path, body: bytes) -> str | None:
    """Create the marker `path` (mode 0600, O_EXCL, never through a symlink) in a folder only this user can write;
    a plain file of this user already there counts as left. Returns None when the marker is there, else why not."""
    d = Path(path).parent
    try:
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        return _private_folder_why(d) or f"its folder {d}: {e.strerror or e}"
    try:
        st = os.fstat(dfd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:  # the same words as for a path
            return _private_folder_why(d) or f"its folder {d} changed while it was checked"
        try:
            fd = os.open(Path(path).name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | getattr(os, "O_CLOEXEC", 0), 0o600, dir_fd=dfd)
        except FileExistsError:
            there = os.stat(Path(path).name, dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISREG(there.st_mode) and there.st_uid == os.geteuid():
                return None
            return f"{path} is already there and is not this user's plain file (uid {there.st_uid})"
        except OSError as e:
            return f"{path}: {e.strerror or e}"
        try:
            os.write(fd, body)
        finally:
            os.close(fd)
        return None
    finally:
        os.close(dfd)


if __name__ == "__main__":  # `python -m slurmtools.checkpoint wiring|wiring-path`: the batch snippet or its path
    if sys.argv[1:] == ["wiring"]:
        sys.stdout.write(wiring_path().read_text())
    elif sys.argv[1:] == ["wiring-path"]:
        print(wiring_path())
    else:
        print("usage: python -m slurmtools.checkpoint wiring|wiring-path", file=sys.stderr)
        sys.exit(2)
