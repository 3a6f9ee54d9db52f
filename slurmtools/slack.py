"""The cluster's slack for training code: how much room the job's partition and tier have now, as a mode.

Use (inside a training process; standard library only, so it is cheap to import there)::

    from slurmtools.slack import Slack
    slack = Slack()                 # the job's partition and tier (SLURM_JOB_PARTITION, SLURM_JOB_QOS)
    mode = slack.mode()             # "light" | "moderate" | "heavy"; polls at most once per poll interval

Layers (docs/slack.md says why each rule is what it is):
- measuring (pure): `measure()` turns Slurm's nodes and jobs (slurmtools.slurm.model snapshots, read by duck
  typing) and the site's tiers into a `SlackSignal`; `score()` folds it with the price window into one number.
- deciding (pure): `decide()` turns a signal into a mode with hysteresis, state in the `ModeState` dataclass: a mode
  changes only after `polls` consecutive observations past a threshold by `margin`, so a noisy signal cannot flap.
- reading (I/O): `Slack` polls Slurm through slurmtools' backend (imported only then) or reads the cached JSON file
  that `slurmtools slack --refresh --out PATH` writes (cron or the prolog), when Slurm's commands are absent or
  when told to (`source="cache"`, `SLURMTOOLS_SLACK_SOURCE=cache`).
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import stat
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from slurmtools.errors import SlurmtoolsError
from slurmtools.slack_settings import DAYS, DEFAULT_CACHE, PriceWindow, SlackSettings  # noqa: F401  (re-exported)
from slurmtools.errors import shown as _shown  # one way to show a value of the file in a line

MODES = ("light", "moderate", "heavy")
#: the cached file's format tag; a reader refuses another one rather than guess at its fields
FORMAT = "slurmtools-slack/1"
CACHE_ENV = "SLURMTOOLS_SLACK_CACHE"
SOURCE_ENV = "SLURMTOOLS_SLACK_SOURCE"
#: the pending reasons of jobs that would start as soon as GPUs free up: the demand. A job held, waiting on a
#: dependency, a begin time or a limit (QOSMaxGRESPerUser, AssocGrpGRES, ...) would not take idle GPUs now
DEMAND_REASONS = ("Resources", "Priority", "None", "")


class SlackError(SlurmtoolsError):
    """The slack signal cannot be read (cache file missing, torn or of another format); one line naming it."""


# --------------------------------------------------------------------------------------------------- the signal


@dataclass(frozen=True)
class SlackSignal:
    """What the cluster offers one partition and tier now (GPU counts; docs/slack.md defines each)."""

    partition: str
    tier: str
    #: GPUs free on the partition's schedulable nodes
    idle_gpus: int
    #: GPUs configured on the partition's nodes (down ones included)
    total_gpus: int
    #: GPUs asked for by pending jobs of tiers with this tier's priority or higher (held jobs excluded)
    demand_ahead: int
    #: GPUs asked for by pending jobs of the tiers that may preempt this one
    preemptor_demand: int
    #: GPUs held by running jobs of lower tiers those preemptors may take first, and by this tier's own jobs
    exposed_lower_gpus: int
    exposed_same_gpus: int
    #: the share of this tier's running GPUs the preemptors' pending demand would take (see preempt_chance)
    preempt_chance: float
    #: epoch seconds when Slurm was asked
    taken_at: float
    #: "slurm" (asked now) or "cache" (read from the cached file)
    source: str = "slurm"
    #: seconds between taken_at and when this process read it
    age_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], **over: Any) -> "SlackSignal":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{**{k: v for k, v in d.items() if k in known}, **over})


def preempt_chance(preemptor_demand: int, idle_gpus: int, lower_gpus: int, same_gpus: int) -> float:
    """The share of this tier's running GPUs that the preemptors' pending demand would take now.

    Their demand is met first from idle GPUs, then from lower tiers' jobs (Slurm's preempt/qos queues victims by
    QoS priority, lowest first, then fewest nodes: `preempt_p_get_prio`), and only then from this tier's:
    (demand - idle - lower) / same, clamped to [0, 1]. With no GPUs of this tier running, 1 when the demand would
    reach them and 0 otherwise. Not a probability over time: an estimate from the queue as it is now.
    """
    reach = preemptor_demand - idle_gpus - lower_gpus
    if reach <= 0:
        return 0.0
    if same_gpus <= 0:
        return 1.0
    return min(1.0, reach / same_gpus)


def score(sig: SlackSignal, settings: SlackSettings, now: datetime | None = None) -> tuple[float, str | None]:
    """One number in [0, 1] for the mode: the share of the partition's GPUs idle after the demand ahead,
    times (1 - preemption chance), times the open price window's factor. Returns (score, window name)."""
    free = max(0, sig.idle_gpus - sig.demand_ahead) / sig.total_gpus if sig.total_gpus > 0 else 0.0
    win = settings.window_at(now or datetime.now())
    s = free * (1.0 - sig.preempt_chance) * (win.factor if win else 1.0)
    return max(0.0, min(1.0, s)), (win.name if win else None)


def _partitions_of(job) -> tuple[str, ...]:
    return tuple(p for p in (job.partition or "").split(",") if p)


def array_tasks(spec: str) -> int:
    """Pending tasks in an array's task string as squeue writes it ("0-9", "3,5-7", "0-15:4%2"); 1 when empty."""
    spec = (spec or "").split("%")[0].strip()
    if not spec:
        return 1
    n = 0
    for part in spec.split(","):
        rng, _, step = part.partition(":")
        a, _, b = rng.partition("-")
        try:
            lo, hi, st = int(a), int(b or a), int(step or 1)
        except ValueError:
            return 1
        if hi >= lo and st > 0:
            n += (hi - lo) // st + 1
    return max(n, 1)


def job_gpus(job) -> int:
    """GPUs a job holds (running) or asks for (pending; every pending task of an array counted)."""
    g = int(job.gpus or 0)
    if job.state == "PENDING" and job.array_job_id:
        raw = getattr(job, "raw", {}) or {}
        spec = raw.get("array_task_string") or raw.get("array_task_str") or ""
        if spec:
            return g * array_tasks(str(spec))
    return g


def measure(nodes: Iterable, jobs: Iterable, tiers: Mapping[str, Any], partition: str, tier: str,
            taken_at: float) -> SlackSignal:
    """The signal for `partition` and `tier` from one snapshot of Slurm. Pure.

    `nodes` and `jobs` are slurmtools.slurm.model NodeInfo/JobInfo (or anything with their fields); `tiers` maps
    tier (QoS) name to an object with `priority` and `preempted_by` (the site's Tier). A job's tier is its QoS; a
    QoS the site does not know counts as priority 0, preempted by no one.
    """
    from slurmtools.slurm.model import RUNNING_STATES as running

    me = tiers[tier]
    preemptors = set(me.preempted_by)
    idle = total = 0
    for n in nodes:
        if partition in n.partitions:
            total += n.gpus
            idle += n.gpus_free
    ahead = by_preemptors = lower = same = 0
    for j in jobs:
        if partition not in _partitions_of(j):
            continue
        t = tiers.get(j.qos)
        prio = t.priority if t is not None else 0
        g = job_gpus(j)
        if j.state == "PENDING":
            if j.reason not in DEMAND_REASONS:
                continue
            if prio >= me.priority:
                ahead += g
            if j.qos in preemptors:
                by_preemptors += g
        elif (j.state in running or j.state in ("SUSPENDED", "COMPLETING")) and t is not None:
            if j.qos == tier or (prio == me.priority and set(t.preempted_by) & preemptors):
                same += g
            elif prio < me.priority and set(t.preempted_by) & preemptors:
                lower += g
    chance = preempt_chance(by_preemptors, idle, lower, same) if preemptors else 0.0
    return SlackSignal(partition=partition, tier=tier, idle_gpus=idle, total_gpus=total, demand_ahead=ahead,
                       preemptor_demand=by_preemptors, exposed_lower_gpus=lower, exposed_same_gpus=same,
                       preempt_chance=round(chance, 4), taken_at=taken_at)


def fill_size(sig: SlackSignal, gpus_per_task: int, max_tasks: int | None = None) -> int:
    """Array tasks that fit the idle GPUs left after the pending demand ahead (`slurmtools submit --fill-slack`)."""
    free = max(0, sig.idle_gpus - sig.demand_ahead)
    n = free // max(1, gpus_per_task)
    return n if max_tasks is None else min(n, max_tasks)


# --------------------------------------------------------------------------------------------------- deciding


@dataclass(frozen=True)
class ModeState:
    """Where the hysteresis stands; JSON-able, so a training run can keep it in its checkpoint."""

    mode: str = "moderate"
    #: False until the first signal: that one sets the mode outright (from the thresholds, no margin)
    known: bool = False
    #: the mode the recent observations argue for, and for how many consecutive ones (same direction)
    candidate: str | None = None
    count: int = 0
    #: observations counted so far, and at which one the mode last changed
    observations: int = 0
    changed_at: int = 0
    #: taken_at of the last observation counted: a cached file read twice is one observation
    last_taken_at: float | None = None
    last_score: float | None = None
    reason: str = "no signal yet"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "ModeState":
        if not d:
            return cls()
        if not isinstance(d, Mapping):
            raise SlackError(f"slack: saved mode state: expected a table, got {_shown(d)}")
        known = {f for f in cls.__dataclass_fields__}
        s = cls(**{k: v for k, v in d.items() if k in known})
        if s.mode not in MODES or (s.candidate is not None and s.candidate not in MODES):
            raise SlackError(f"slack: saved mode state names an unknown mode ({_shown(s.mode)}, "
                             f"{_shown(s.candidate)})")
        # refused at resume, not at the first boundary after it, where decide() would raise inside the loop
        for k in ("count", "observations", "changed_at"):
            if type(getattr(s, k)) is not int or getattr(s, k) < 0:
                raise SlackError(f"slack: saved mode state: {k}: expected a whole number, got {_shown(getattr(s, k))}")
        for k in ("last_taken_at", "last_score"):
            if getattr(s, k) is not None and not _finite_number(getattr(s, k)):
                raise SlackError(f"slack: saved mode state: {k}: expected a number, got {_shown(getattr(s, k))}")
        if type(s.known) is not bool or not isinstance(s.reason, str):
            raise SlackError(f"slack: saved mode state: known or reason of the wrong type ({_shown(s.known)}, "
                             f"{_shown(s.reason)})")
        return s


def plain_mode(s: float, settings: SlackSettings) -> str:
    """The mode of a score without hysteresis: the first observation's mode."""
    if s >= settings.heavy_at:
        return "heavy"
    if s <= settings.light_at:
        return "light"
    return "moderate"


def target(s: float, mode: str, settings: SlackSettings) -> str:
    """The mode a score argues for, seen from `mode`: leaving it needs the score past a threshold by more than the
    margin (strictly: a score exactly on a threshold with no margin must not flip the mode back and forth)."""
    up_heavy, down_heavy = settings.heavy_at + settings.margin, settings.heavy_at - settings.margin
    up_light, down_light = settings.light_at + settings.margin, settings.light_at - settings.margin
    if mode == "heavy":
        return "light" if s < down_light else "moderate" if s < down_heavy else "heavy"
    if mode == "light":
        return "heavy" if s > up_heavy else "moderate" if s > up_light else "light"
    return "heavy" if s > up_heavy else "light" if s < down_light else "moderate"


def decide(state: ModeState, s: float | None, settings: SlackSettings, taken_at: float | None = None,
           why_none: str = "no signal") -> ModeState:
    """The next hysteresis state after one observation of score `s` (None: no signal; the mode holds). Pure.

    An observation with the same `taken_at` as the last one counted is not counted again.
    """
    if s is None:
        return replace(state, reason=f"{why_none}; mode {state.mode} held")
    if taken_at is not None and state.last_taken_at is not None and taken_at == state.last_taken_at:
        return state
    n = state.observations + 1
    if not state.known:
        m = plain_mode(s, settings)
        return ModeState(mode=m, known=True, observations=n, changed_at=n, last_taken_at=taken_at, last_score=s,
                         reason=f"first signal: score {s:.2f} -> {m}")
    want = target(s, state.mode, settings)
    base = replace(state, observations=n, last_taken_at=taken_at, last_score=s)
    if want == state.mode:
        return replace(base, candidate=None, count=0, reason=f"score {s:.2f}: {state.mode} holds")
    up = MODES.index(want) > MODES.index(state.mode)
    same_way = state.candidate is not None and (MODES.index(state.candidate) > MODES.index(state.mode)) == up
    count = state.count + 1 if same_way else 1
    if count >= settings.polls:
        return replace(base, mode=want, candidate=None, count=0, changed_at=n,
                       reason=f"score {s:.2f}: {state.mode} -> {want} after {count} consecutive poll(s) past "
                              f"the threshold by {settings.margin:g}")
    return replace(base, candidate=want, count=count,
                   reason=f"score {s:.2f} argues for {want}: {count} of {settings.polls} poll(s)")


# --------------------------------------------------------------------------------------------------- the cached file


def cache_path(explicit: str | os.PathLike | None = None, settings: SlackSettings | None = None) -> Path:
    """The cached file: the caller's, else $SLURMTOOLS_SLACK_CACHE, else the settings' (site's), else the default."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return Path(settings.cache_file if settings else DEFAULT_CACHE)


def cache_document(signals: Iterable[SlackSignal], settings: SlackSettings, taken_at: float,
                   cluster: str = "", slurm: str = "", default_partition: str = "", default_tier: str = "") -> dict:
    """What `slurmtools slack --refresh` writes: every partition and tier's signal, and the site's settings."""
    return {"format": FORMAT, "taken_at": round(taken_at, 3),
            "taken_at_iso": datetime.fromtimestamp(taken_at).astimezone().isoformat(timespec="seconds"),
            "cluster": cluster, "slurm": slurm, "default_partition": default_partition,
            "default_tier": default_tier, "settings": settings.to_dict(),
            "signals": [s.to_dict() for s in signals]}


def write_cache(path: str | os.PathLike, doc: dict) -> Path:
    """Write the cached file atomically (readers see the old or the new file, never part), readable by jobs."""
    from slurmtools.checkpoint import atomic_write

    body = (json.dumps(doc, indent=1) + "\n").encode()
    p = Path(path)
    try:
        return atomic_write(p, lambda f: f.write(body), mode=0o644)
    except OSError as e:
        raise SlackError(f"slack: cannot write {p}: {e.strerror or e}") from None


def read_cache(path: str | os.PathLike) -> dict:
    """The cached file's document; one SlackError line naming the file when it is missing, torn or foreign.

    Read only as the refresher leaves it (a plain file renamed into place, mode 0644), since a training process
    must neither hang on it nor take its mode from someone else: never through a symlink at the path, never a
    FIFO (open would block the loop for good) or a device, not a file others can write, nor one another user put
    in a folder anyone can write (/tmp), nor more than MAX_CACHE_BYTES. NaN and Infinity, which Python's json
    takes, are refused: they compare false to everything and would freeze a mode or read as fresh forever.
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise SlackError(f"slack: {p}: no cached signal (run `slurmtools slack --refresh --out {p}`)") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise SlackError(f"slack: {p}: a symlink, not followed (the refresher renames a plain file there; "
                             f"someone else put the link)") from None
        raise SlackError(f"slack: {p}: cannot read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        why = _not_the_refreshers(p, st)
        if why:
            raise SlackError(f"slack: {p}: {why}")
        raw, n = [], 0
        while n <= MAX_CACHE_BYTES:
            b = os.read(fd, MAX_CACHE_BYTES + 1 - n)
            if not b:
                break
            raw.append(b)
            n += len(b)
    except OSError as e:
        raise SlackError(f"slack: {p}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if n > MAX_CACHE_BYTES:
        raise SlackError(f"slack: {p}: more than {MAX_CACHE_BYTES} bytes, not a cached signal")
    try:
        doc = json.loads(b"".join(raw), parse_constant=_no_constant)
    except _NotFinite as e:
        raise SlackError(f"slack: {p}: {e} in it, which no refresher writes") from None
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise SlackError(f"slack: {p}: not JSON ({'empty' if not n else 'a torn or foreign file'})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise SlackError(f"slack: {p}: format {_shown(got)}, expected {FORMAT!r}")
    if not _finite_number(doc.get("taken_at")) or not isinstance(doc.get("signals"), list):
        raise SlackError(f"slack: {p}: taken_at or signals missing, or not epoch seconds and a list")
    return doc


#: more than any site's cached file (a signal is ~300 bytes; a site has tens of partitions x tiers)
MAX_CACHE_BYTES = 16 << 20
#: the GPU counts a signal may hold: whole numbers a float keeps exactly (the score divides them)
_MAX_COUNT = 1 << 53
_COUNTS = ("idle_gpus", "total_gpus", "demand_ahead", "preemptor_demand", "exposed_lower_gpus", "exposed_same_gpus")


class _NotFinite(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotFinite(name)


def _finite_number(v: Any) -> bool:
    """A finite number (not a bool, which json writes as true/false but Python counts as an int)."""
    return type(v) in (int, float) and math.isfinite(v)


def _not_the_refreshers(p: Path, st: os.stat_result) -> str | None:
    """Why the opened file at `p` is not one the refresher left (None: it may be)."""
    if not stat.S_ISREG(st.st_mode):
        m = st.st_mode
        return f"{'a folder' if stat.S_ISDIR(m) else 'a FIFO' if stat.S_ISFIFO(m) else 'a device'}, not a plain file"
    if st.st_mode & 0o002:
        return f"writable by anyone (mode {stat.S_IMODE(st.st_mode):o}; the refresher writes 0644)"
    if st.st_uid not in (0, os.geteuid()):
        try:
            open_folder = os.stat(p.parent).st_mode & 0o002
        except OSError as e:
            return f"its folder: {e.strerror or e}"
        if open_folder:
            return f"owned by uid {st.st_uid} in a folder anyone can write (anyone could have put it there)"
    return None


def _signal_why(d: Mapping[str, Any]) -> str | None:
    """Why a signal entry cannot be scored (None: every field is of its type and in range)."""
    for k in _COUNTS:
        v = d.get(k)
        if type(v) is not int or not 0 <= v <= _MAX_COUNT:
            return f"{k}: expected a whole number of GPUs, 0 or more, got {_shown(v)}"
    c = d.get("preempt_chance")
    if not _finite_number(c) or not 0 <= c <= 1:
        return f"preempt_chance: expected a number from 0 to 1, got {_shown(c)}"
    if not _finite_number(d.get("taken_at")):
        return f"taken_at: expected epoch seconds, got {_shown(d.get('taken_at'))}"
    return None


def signal_from_cache(doc: dict, partition: str | None, tier: str | None, now: float,
                      path: str = "") -> SlackSignal:
    """The signal of `partition` and `tier` (None: the file's defaults) in a cached document, with its age (0 for a
    file from a clock ahead of this one: the caller decides how far ahead is too far)."""
    partition = partition or doc.get("default_partition")
    tier = tier or doc.get("default_tier")
    if not (isinstance(partition, str) and partition and isinstance(tier, str) and tier):
        raise SlackError(f"slack: {path}: no partition and tier asked for, and no default_partition and "
                         f"default_tier in the file (got {_shown(partition)}, {_shown(tier)})")
    for d in doc["signals"]:
        if isinstance(d, dict) and d.get("partition") == partition and d.get("tier") == tier:
            why = _signal_why(d)
            if why:
                raise SlackError(f"slack: {path}: the signal of {partition}/{tier}: {why}")
            return SlackSignal.from_dict(d, source="cache", age_s=round(max(0.0, now - doc["taken_at"]), 1))
    have = sorted({f"{d.get('partition')}/{d.get('tier')}" for d in doc["signals"] if isinstance(d, dict)})
    listed = ", ".join(h if h.isprintable() and len(h) <= 60 else _shown(h) for h in have[:10])
    listed += f" and {len(have) - 10} more" if len(have) > 10 else ""
    raise SlackError(f"slack: {path}: no signal for partition {_shown(partition)} and tier {_shown(tier)} "
                     f"(it has: {listed or 'none'})")


# --------------------------------------------------------------------------------------------------- polling


def slurm_commands_present() -> bool:
    return bool(shutil.which("squeue") and shutil.which("scontrol"))


def measure_live(site, backend, partition: str, tier: str) -> SlackSignal:
    """Ask Slurm now (nodes and jobs through the backend) and measure. I/O."""
    taken = time.time()
    return measure(backend.nodes(), backend.jobs(), site.tiers, partition, tier, taken)


def measure_all(site, backend) -> tuple[list[SlackSignal], float]:
    """Every GPU partition x tier of the site from one snapshot of Slurm (what the cached file holds). I/O."""
    taken = time.time()
    nodes, jobs = backend.nodes(), backend.jobs()
    out = []
    for p in site.partitions.values():
        if p.cpu_only:
            continue
        for t in site.tiers.values():
            if p.name in t.partitions:
                out.append(measure(nodes, jobs, site.tiers, p.name, t.name, taken))
    return out, taken


@dataclass
class Reading:
    """The last poll: the signal (None when there was none), its score and price window, and why."""

    signal: SlackSignal | None
    score: float | None
    window: str | None
    note: str
    polled_at: float


class Slack:
    """The slack of one partition and tier, polled at most once per `poll_interval`, turned into a mode.

    source: "auto" (Slurm when its commands are here, else the cached file), "slurm", or "cache"; also
    $SLURMTOOLS_SLACK_SOURCE. Settings: the caller's, else the cached file's (the site's, as the refresher read
    it), else the site file's when Slurm is asked, else the defaults.
    """

    def __init__(self, partition: str | None = None, tier: str | None = None, source: str | None = None,
                 cache: str | os.PathLike | None = None, settings: SlackSettings | None = None,
                 site_path: str | None = None, site: Any = None, state: ModeState | None = None,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic):
        self.partition = partition or os.environ.get("SLURM_JOB_PARTITION") or None
        self.tier = tier or os.environ.get("SLURM_JOB_QOS") or None
        src = source or os.environ.get(SOURCE_ENV) or "auto"
        if src not in ("auto", "slurm", "cache"):
            raise SlackError(f"slack: source: expected auto, slurm or cache, got {src!r}")
        if src == "auto":
            src = "slurm" if slurm_commands_present() else "cache"
        self.source = src
        self._cache = cache
        self._settings = settings
        self._site_path = site_path
        self._site = site  # the loaded site (the CLI has one); else read from site_path when Slurm is asked
        self._backend = None
        self.state = state or ModeState()
        self.last: Reading | None = None
        self._clock, self._mono = clock, monotonic
        self._next_poll: float | None = None

    @property
    def settings(self) -> SlackSettings:
        return self._settings or SlackSettings()

    @property
    def cache_file(self) -> Path:
        return cache_path(self._cache, self._settings)

    def _site_now(self):
        if self._site is None:
            from slurmtools.site.load import load_site

            self._site = load_site(self._site_path)
            if self._settings is None:
                self._settings = self._site.slack
        return self._site

    def _read(self) -> tuple[SlackSignal | None, str]:
        now = self._clock()
        if self.source == "cache":
            path = self.cache_file
            try:
                doc = read_cache(path)
                if self._settings is None:
                    # the site's thresholds: without them no mode can be decided, and the defaults are not the site's
                    try:
                        self._settings = SlackSettings.from_dict(doc.get("settings"))
                    except ValueError as e:
                        return None, f"slack: {path}: settings: {e}"
                sig = signal_from_cache(doc, self.partition, self.tier, now, str(path))
            except SlackError as e:
                return None, str(e)
            ahead = doc["taken_at"] - now
            if ahead > self.settings.max_age:  # of no telling age: it would read as fresh until this clock caught up
                return None, (f"cached signal in {path} is dated {ahead:.0f}s ahead of this node's clock, past "
                              f"max_age {self.settings.max_age}s: the clocks disagree")
            if sig.age_s > self.settings.max_age:
                return None, (f"cached signal in {path} is {sig.age_s:.0f}s old, past max_age "
                              f"{self.settings.max_age}s")
            return sig, f"cached in {path}, {sig.age_s:.0f}s old"
        site = self._site_now()
        part = self.partition or site.default_partition.name
        tier = self.tier or site.default_tier
        if part not in site.partitions:
            return None, f"partition {part!r} is not one of the site's ({', '.join(site.partitions)})"
        if tier not in site.tiers:
            return None, f"tier {tier!r} is not one of the site's ({', '.join(site.tiers)})"
        try:
            if self._backend is None:
                from slurmtools.slurm.backend import get_backend

                self._backend = get_backend()
            return measure_live(site, self._backend, part, tier), "asked Slurm now"
        except SlurmtoolsError as e:
            return None, f"Slurm did not answer: {e}"

    def poll(self, force: bool = False) -> Reading:
        """Read the signal and step the hysteresis, unless the last poll was less than poll_interval ago."""
        mono = self._mono()
        if self.last is not None and not force and self._next_poll is not None and mono < self._next_poll:
            return self.last
        sig, note = self._read()
        s, win = (score(sig, self.settings, datetime.fromtimestamp(self._clock())) if sig else (None, None))
        self.state = decide(self.state, s, self.settings, sig.taken_at if sig else None, why_none=note)
        self.last = Reading(sig, s, win, note, self._clock())
        self._next_poll = mono + self.settings.poll_interval
        return self.last

    def mode(self) -> str:
        """The current mode (polls first when the interval has passed)."""
        self.poll()
        return self.state.mode

    def describe(self) -> dict:
        """The last reading and the hysteresis state as plain data (what `slurmtools slack --json` prints)."""
        r = self.last
        return {"mode": self.state.mode, "score": None if r is None or r.score is None else round(r.score, 4),
                "window": None if r is None else r.window, "source": self.source,
                "note": "" if r is None else r.note, "signal": None if r is None or r.signal is None
                else r.signal.to_dict(), "state": self.state.to_dict(), "settings": self.settings.to_dict()}


__all__ = ["MODES", "PriceWindow", "SlackSettings", "SlackSignal", "ModeState", "Slack", "SlackError", "measure",
           "score", "decide", "target", "plain_mode", "preempt_chance", "fill_size", "read_cache", "write_cache",
           "cache_document", "signal_from_cache", "cache_path", "array_tasks"]
