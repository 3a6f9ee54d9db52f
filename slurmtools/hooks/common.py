"""What prolog and epilog share: reading slurmd's environment defensively, logging, calling scontrol.

Why defensive: a hook that raises on an odd variable drains a healthy node (a failing prolog drains the node and
requeues the job held), so every field is parsed to a value or None, never an exception.
Facts (Slurm 22.05 and 25.11, prep/script `_build_env`; docs/node-health.md lists them): hooks run as root with NO
PATH, stdin /dev/null, stdout and stderr into one pipe slurmd logs only when the hook fails, in slurmd's working
folder, and without SLURM_JOB_QOS / SLURM_JOB_NAME / SLURM_ARRAY_* (those are PrologSlurmctld's).
Start-up time: no re, json, dataclasses, subprocess or shutil here (each costs milliseconds at every job start);
commands run through os.posix_spawn.
"""

from __future__ import annotations

import os
import sys
import time

from slurmtools.hooks import safefs

SCONTROL_DIRS = ("/usr/bin", "/usr/local/bin", "/opt/slurm/bin", "/usr/sbin")
DEFAULT_SPOOL = "/var/spool/slurmtools"
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_NODE_CHARS = _ALNUM | frozenset("._-")
_USER_CHARS = _ALNUM | frozenset("._@-")
_REASON_CHARS = _ALNUM | frozenset(" _.:,;=()/#+-")


def _node_ok(s: str) -> bool:
    return 0 < len(s) <= 64 and s[0] in _ALNUM and all(c in _NODE_CHARS for c in s)


def _user_ok(s: str) -> bool:
    return 0 < len(s) <= 64 and s[0] != "-" and all(c in _USER_CHARS for c in s)


#: the longest user name recorded: Linux's LOGIN_NAME_MAX (256 bytes with the terminating NUL)
MAX_USER = 255
#: the uids a passwd name `nobody` has (Debian's 65534, Slurm's reserved 99)
NOBODY_UIDS = (65534, 99)


class Refused(ValueError):
    """A variable's value refused for a reason worth logging (`JobEnv._read` names the variable and the reason)."""


def _user(s: str | None) -> str | None:
    """The passwd name slurmd put in SLURM_JOB_USER, as it is: `DOMAIN\\user` (winbind), `user@realm` (sssd's
    fully qualified names), `john smith`, `HOST$`, `josé` are all names Slurm runs jobs for, and the hooks only
    ever write them JSON-escaped (never into a path or a command). Refused (Refused, with the reason) only what
    cannot be a name to record: control or other unprintable characters (they would split or hide a log line),
    bytes that are not UTF-8 (the reports' text columns cannot hold them), more than MAX_USER bytes."""
    s = s or ""
    if not s.strip():
        return None
    for i, c in enumerate(s):
        if "\udc80" <= c <= "\udcff":  # os.environ's surrogateescape of a byte that is not UTF-8
            raise Refused(f"character {i} is the byte {ord(c) - 0xDC00:#04x}, not UTF-8")
        if not c.isprintable():
            raise Refused(f"character {i} is {ascii(c)}, a control or unprintable character")
    n = len(s.encode())
    if n > MAX_USER:
        raise Refused(f"{n} bytes, more than the {MAX_USER} a Linux user name can have")
    return s


def _int(s: str | None) -> int | None:
    """A whole number in ASCII digits ('²' and '١' pass str.isdigit(); Slurm never writes them), else None."""
    s = (s or "").strip()
    return int(s) if s.isascii() and s.isdigit() and len(s) < 19 else None


#: what the epilog's record may hold, as its reader (slurmtools.reports.epilog) reads it: Slurm's job ids are
#: 32-bit (a federation's carry the cluster in the top bits), a run's index an int32 (Slurm counts restarts in 16)
MAX_JOB_ID = 0xFFFFFFFF
MAX_RUN = 2**31 - 1
#: the times (epoch s) a record may hold: the reader takes 1970-2200 in local time, so a day inside that on either
#: side, which any time zone reads inside it
RECORD_T_MIN = 86400.0
RECORD_T_MAX = 7258118400.0 - 86400.0  # 2200-01-01 UTC, less a day
#: the whole numbers a slack window of the record may hold (the report reads its steps as int64)
MAX_STEP = 2**63 - 1


def _in(lo: int, hi: int):
    """`_int`, refused (Refused, saying the range) outside [lo, hi]: a value the record's reader refuses would cost
    the whole record there, so the hooks know it as unknown instead."""
    def parse(s: str | None) -> int | None:
        v = _int(s)
        if v is not None and not lo <= v <= hi:
            raise Refused(f"{v} is outside {lo} to {hi}")
        return v
    return parse


def _word(s: str | None, ok=_user_ok) -> str | None:
    s = (s or "").strip()
    return s if ok(s) else None


def parse_gpu_indices(s: str | None) -> tuple[int, ...] | None:
    """'0,1,3' -> (0, 1, 3); None for absent or malformed (then every visible GPU is checked). A GPU listed twice
    is malformed: Slurm never does, and counted twice it doubled the job's GPUs and energy in the record (whose
    reader refused it)."""
    s = (s or "").strip()
    if not s:
        return None
    out = []
    for part in s.split(","):
        part = part.strip()
        if not (part.isascii() and part.isdigit()) or len(part) > 4:
            return None
        out.append(int(part))
    return tuple(out) if len(set(out)) == len(out) else None


def _mig_devices(s: str | None) -> bool:
    """Whether slurmd's CUDA_VISIBLE_DEVICES names MIG devices ('MIG-<uuid>', or 'MIG-GPU-<uuid>/gi/ci' of drivers
    before 470): Slurm writes a MIG slice's UUID there, where a whole GPU gets its index."""
    return any(part.strip().startswith("MIG-") for part in (s or "").split(","))


def first_host(hostlist: str | None) -> str | None:
    """First host of a Slurm hostlist ('gpu[03-05,09],cpu1' -> 'gpu03') without a hostlist library."""
    head = (hostlist or "").strip().split(",", 1)[0]  # "gpu[03-05" of "gpu[03-05,09],cpu1"
    if "[" in head:
        prefix, rest = head.split("[", 1)
        num = ""
        for c in rest:
            if not ("0" <= c <= "9"):
                break
            num += c
        if not num:
            return None
        name = prefix + num
    else:
        name = head
    return name if _node_ok(name) else None


def _cluster(s: str | None) -> str | None:
    """slurmd's ClusterName (Slurm lower-cases it and allows 40 characters): letters, digits and `._-`, at most 64,
    as a node name. The reports compare it with the site's cluster_name, so what cannot be a cluster's name is
    unknown (None), never recorded as another cluster."""
    return _word(s, _node_ok)


def _text(limit: int):
    return lambda s: (s or "")[:limit] or None


#: the longest value one environment variable can carry through execve (Linux's MAX_ARG_STRLEN): what slurmd hands
#: the hooks is never longer, so a text field read up to it is read whole (a host list cut at 4096 characters was
#: recorded cut, without a word)
MAX_ENV_VALUE = 131072


def _wait_status(s: str | None) -> str | None:
    """A wait(2) status as slurmd writes SLURM_JOB_EXIT_CODE and SLURM_JOB_DERIVED_EC (`%u`: 256 is exit 1, 9 is
    signal 9) as `<exit>:<signal>`, the form of SLURM_JOB_EXIT_CODE2 and sacct, made as slurmd makes it
    (WEXITSTATUS when exited, WTERMSIG when signalled); the record held the raw status beside the pair."""
    v = _int(s)
    if v is None or v > 0xFFFF:
        return None
    low = v & 0x7F
    return f"{(v >> 8) & 0xFF if low == 0 else 0}:{low if 0 < low < 0x7F else 0}"


def _exit_pair(s: str | None) -> str | None:
    """SLURM_JOB_EXIT_CODE2 as slurmd writes it (`%d:%d`, exit code and signal), else None."""
    code, sep, sig = (s or "").strip().partition(":")
    c, g = _int(code), _int(sig)
    return f"{c}:{g}" if sep and c is not None and g is not None and c <= 255 and g <= 127 else None


#: JobEnv field <- the variables that may carry it (the first one that reads wins), its parser, what it should be.
#: What slurmd sets, per release: docs/node-health.md ("What the hooks read from slurmd").
_FIELDS = (
    ("job_id", ("SLURM_JOB_ID", "SLURM_JOBID"), _in(1, MAX_JOB_ID), "a job id"),
    ("user", ("SLURM_JOB_USER",), _user, "a user name"),
    ("uid", ("SLURM_JOB_UID",), _int, "a whole number"),
    ("account", ("SLURM_JOB_ACCOUNT",), _word, "an account name"),
    ("partition", ("SLURM_JOB_PARTITION",), _word, "a partition name"),
    ("node", ("SLURMD_NODENAME",), lambda s: _word(s, _node_ok), "a node name"),
    # 22.05 sets SLURM_NODELIST only, 25.11 both (the same host list)
    ("nodelist", ("SLURM_NODELIST", "SLURM_JOB_NODELIST"), _text(MAX_ENV_VALUE), "a host list"),
    ("restart_count", ("SLURM_JOB_RESTART_COUNT",), _in(0, MAX_RUN), "a whole number"),
    ("start_time", ("SLURM_JOB_START_TIME",), _int, "epoch seconds"),  # 25.11 and later: the run's start
    ("array_job", ("SLURM_ARRAY_JOB_ID",), _in(1, MAX_JOB_ID), "a job id"),
    ("array_task", ("SLURM_ARRAY_TASK_ID",), _int, "a whole number"),
    # the epilog's only; EXIT_CODE2 is `exit:signal`, EXIT_CODE and DERIVED_EC are wait statuses (read as the pair)
    ("exit_code", ("SLURM_JOB_EXIT_CODE2",), _exit_pair, "an exit code and signal"),
    ("exit_code", ("SLURM_JOB_EXIT_CODE",), _wait_status, "a wait status"),
    ("derived_exit", ("SLURM_JOB_DERIVED_EC",), _wait_status, "a wait status"),
    ("context", ("SLURM_SCRIPT_CONTEXT",), _word, "a word"),
    # job ids are per cluster: the reports join a record only to its own cluster's jobs (22.05 and 25.11 set it)
    ("cluster", ("SLURM_CLUSTER_NAME",), _cluster, "a cluster name"),
)


class JobEnv:
    """The job as slurmd's hook environment describes it; a field whose variable is absent or unreadable is None.

    Each variable is read on its own: one odd value makes that field alone unknown (and is named in `problems`),
    never the whole job, so no bookkeeping trouble can keep the prolog from its health check.
    A plain class, not a dataclass: importing dataclasses costs more than this whole module.
    `shared`: the GRES that shares the job's GPUs with other jobs ("gres/mps"), else None.
    """

    __slots__ = ("job_id", "user", "uid", "account", "partition", "node", "nodelist", "gpus", "gpus_given",
                 "restart_count", "start_time", "array_job", "array_task", "exit_code", "derived_exit", "context",
                 "cluster", "shared", "problems")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))
        self.gpus_given = bool(self.gpus_given or self.gpus)
        self.problems = list(self.problems or ())

    @classmethod
    def from_environ(cls, env: os._Environ | dict | None = None) -> "JobEnv":
        e = os.environ if env is None else env
        job = cls()
        for name, variables, parse, what in _FIELDS:
            if getattr(job, name) is None:  # a field two rows may fill (the exit code): the first that reads wins
                setattr(job, name, job._read(e, variables, parse, what))
        try:
            raw = e.get("SLURM_JOB_USER")
            if raw is not None and not raw.strip():  # present and empty: said, like any refused name
                job.problems.append(f"SLURM_JOB_USER={ascii(raw)[:80]} is empty; unknown")
        except Exception:  # noqa: BLE001 -- an odd mapping: _read has said what it could
            pass
        if job.restart_count is None and not (e.get("SLURM_JOB_RESTART_COUNT") or "").strip():
            # slurmd writes it for every job it holds a credential of, 0 on the first run (22.05 and 25.11
            # `_build_env`): absent is not "a first run" but unknown
            job.problems.append("SLURM_JOB_RESTART_COUNT absent or empty (slurmd sets it, 0 on a job's first run); "
                                "the run is unknown")
        job._user_stand_in()
        # the job's GPUs: SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES; given but unreadable means "check them all",
        # never "the job has no GPUs"
        var = "SLURM_JOB_GPUS" if e.get("SLURM_JOB_GPUS") is not None else "CUDA_VISIBLE_DEVICES"
        job.gpus = job._read(e, (var,), parse_gpu_indices, "a list of GPU indices")
        try:
            job.gpus_given = bool((e.get(var) or "").strip())
        except Exception:  # noqa: BLE001 -- an odd mapping: the GPUs count as given
            job.gpus_given = True
        try:
            mig = _mig_devices(e.get("CUDA_VISIBLE_DEVICES"))
        except Exception:  # noqa: BLE001 -- read like any other variable: unreadable is not MIG
            mig = False
        if mig:
            # slurmd numbers each MIG slice as a GPU of its own in SLURM_JOB_GPUS (the GRES index), and names the
            # slices by UUID in CUDA_VISIBLE_DEVICES: the indices are not NVML's GPUs, so which GPUs is unknown
            job.gpus, job.gpus_given = None, True
            job.problems.append(f"CUDA_VISIBLE_DEVICES names MIG devices: {var}'s indices count MIG slices, not "
                                "GPUs; the job's GPUs are unknown")
        try:
            # only gres/mps's prolog and epilog environment holds it (25.11 gres_mps.c `gres_p_prep_set_env`): the
            # job's GPU is shared with other jobs
            if (e.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") or "").strip():
                job.shared = "gres/mps"
        except Exception:  # noqa: BLE001 -- unreadable: not known to be shared
            pass
        return job

    def _user_stand_in(self) -> None:
        """A SLURM_JOB_USER that is slurmd's stand-in for a uid it could not resolve on this node, not a name: the
        uid in digits (25.11 `uid_to_string`), or `nobody` for a uid that is not nobody's (older releases):
        recorded as the job's user, it named no one (or another user)."""
        if self.user is None or self.uid is None:
            return
        u = self.user.strip()
        if u == str(self.uid) or (u == "nobody" and self.uid not in NOBODY_UIDS):
            self.problems.append(f"SLURM_JOB_USER={ascii(self.user)[:80]} is slurmd's stand-in for uid {self.uid}, "
                                 "which it could not resolve to a name; unknown")
            self.user = None

    def _read(self, env, variables: tuple[str, ...], parse, what: str):
        """The first of `variables` that parses; a present one that does not is noted in `problems`."""
        for var in variables:
            try:
                raw = env.get(var)
                if raw is None or not raw.strip():
                    continue
                value = parse(raw)
            except Refused as e:
                self.problems.append(f"{var}={ascii(raw)[:80]} is not {what} ({e}); unknown")
                continue
            except Exception as e:  # noqa: BLE001 -- one odd variable must not cost the others
                self.problems.append(f"{var} could not be read ({type(e).__name__}); unknown")
                continue
            if value is not None:
                return value
            self.problems.append(f"{var}={ascii(raw)[:80]} is not {what}; unknown")
        return None

    @property
    def slurm_ref(self) -> str | None:
        """The job as scontrol and sacct should name it: ARRAYJOB_TASK for an array task (the array's own id, which
        one task carries as its SLURM_JOB_ID, names every task of the array), else the job id."""
        if self.array_job is not None and self.array_task is not None:
            return f"{self.array_job}_{self.array_task}"
        return None if self.job_id is None else str(self.job_id)

    @property
    def is_first_node(self) -> bool:
        """The batch host (first node) speaks for the whole job in the decision log."""
        first = first_host(self.nodelist)
        return first is None or self.node is None or first == self.node


def read_job(log: "HookLog") -> JobEnv:
    """The job from the environment, field by field, for a hook: each unreadable variable is logged and leaves its
    field alone unknown; even an unreadable environment gives a JobEnv (every field unknown), never an exception."""
    try:
        job = JobEnv.from_environ()
    except Exception as e:  # noqa: BLE001
        job = JobEnv(problems=[f"environment unreadable ({type(e).__name__}); every job field unknown"])
    log.job = job
    for p in job.problems:
        log(p)
    return job


#: why the hooks measure no GPU telemetry for a job whose GPUs are given but unknown: the health check then checks
#: every GPU, but counting every GPU's energy and processes as the job's would bill it for its neighbours
UNKNOWN_GPUS = ("the job's GPUs are unknown (its GPU list unreadable, or MIG slices): the node's GPUs are not all "
                "its own")


def unknown_gpus(why: str) -> str:
    """UNKNOWN_GPUS's words for another reason the job's GPUs cannot be told from the node's."""
    return f"the job's GPUs are unknown ({why}): the node's GPUs are not all its own"


def shared_gpus(gres: str) -> str:
    """Why the telemetry of a job whose GPUs other jobs share (gres/mps, gres/shard) is unknown."""
    return (f"the job shares its GPUs with other jobs ({gres}): a GPU's energy and processes are not all its "
            "own")


#: SLURM_SCRIPT_CONTEXT's values (22.05 and 25.11, doc/html/prolog_epilog.shtml)
CONTEXTS = frozenset(("prolog_slurmctld", "epilog_slurmctld", "prolog_slurmd", "epilog_slurmd", "prolog_task",
                      "epilog_task", "prolog_srun", "epilog_srun"))


def other_context(ours: str, log: "HookLog") -> bool:
    """Whether Slurm runs this hook as another program than slurmd's Prolog or Epilog (`ours`, as
    SLURM_SCRIPT_CONTEXT names them): configured as PrologSlurmctld it would check the controller's GPUs and drain
    no node, as EpilogSlurmctld write records of the controller; it then does nothing (logged, before any file is
    touched). Absent, or a value Slurm never sets (a hand run): run as `ours`, and said."""
    try:
        raw = os.environ.get("SLURM_SCRIPT_CONTEXT")
    except Exception:  # noqa: BLE001 -- unreadable: run as ours
        raw = None
    ctx = (raw or "").strip()
    if ctx == ours:
        return False
    if ctx in CONTEXTS:
        log(f"SLURM_SCRIPT_CONTEXT={ctx}: this hook is slurmd's {ours.split('_')[0].title()}; nothing done")
        return True
    if raw is None:
        log(f"SLURM_SCRIPT_CONTEXT absent (slurmd 22.05 and 25.11 set it to {ours}): not run by slurmd; run as "
            "it would be")
    else:
        log(f"SLURM_SCRIPT_CONTEXT={ascii(raw)[:80]} is no context Slurm sets; run as {ours}")
    return False


def in_extern_step() -> bool:
    """Whether slurmstepd, not slurmd, runs this hook (PrologFlags=RunInJob, Slurm 24.05 and later): its epilog's
    SLURM_JOB_EXIT_CODE, EXIT_CODE2 and DERIVED_EC are 0 whatever the job's end (25.11 slurmstepd/mgr.c
    `_run_prolog_epilog` leaves them unset in its job_env), so they are not the job's."""
    exe = _slurm_daemon_exe()
    return exe is not None and os.path.basename(exe) == "slurmstepd"


def hook_writer(hook: str, job: JobEnv) -> str:
    """The decision log's writer id of a hook, `prolog@gpu03`: the scripts run `python -c`, so the log's default
    (the program's name) would be `-c` for prolog and epilog alike."""
    return f"{hook}@{job.node or os.uname().nodename.split('.')[0]}"


def spool_dir() -> str:
    return os.environ.get("SLURMTOOLS_SPOOL_DIR") or DEFAULT_SPOOL


class HookLog:
    """Lines to stderr and, when the spool folder is safe, to `hooks.log` in it (one O_APPEND write each). Lines
    said before the folder is attached (why a variable of the job is unknown: the job is read first) are kept and
    written when it is: slurmd shows a hook's stderr only when the hook fails."""

    #: lines kept for hooks.log until the folder is attached, at most
    PENDING_MAX = 200

    def __init__(self, hook: str, job: JobEnv | None = None):
        self.hook = hook
        self.job = job
        self.dfd: int | None = None
        self._pending: list[bytes] = []

    def attach(self, dfd: int | None) -> None:
        self.dfd = dfd
        pending, self._pending = self._pending, []
        if dfd is not None:
            for line in pending:
                self._append(line)

    def _append(self, line: bytes) -> None:
        try:
            safefs.append_at(self.dfd, "hooks.log", line)
        except OSError:
            pass

    def __call__(self, msg: str) -> None:
        job = self.job.job_id if self.job else None
        node = self.job.node if self.job else None
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {self.hook} job={job} node={node} {msg}\n"
        try:
            sys.stderr.write(line)
        except Exception:
            pass
        if self.dfd is not None:
            self._append(line.encode("utf-8", "replace"))
        elif len(self._pending) < self.PENDING_MAX:
            self._pending.append(line.encode("utf-8", "replace"))


def find_scontrol() -> str | None:
    """scontrol by absolute path (hooks get no PATH), of the Slurm that runs this hook: a host can carry two (a
    distribution's 22.05 in /usr/bin beside a site build of 25.11), and an older client cannot talk to a newer
    controller. Order: SLURMTOOLS_SCONTROL (set by a root wrapper), the `bin/` beside the slurmd or slurmstepd
    that started this hook, PATH when a wrapper set one, then the usual folders."""
    env = os.environ.get("SLURMTOOLS_SCONTROL")
    cands = [env] if env else []
    daemon = _slurm_daemon_exe()
    if daemon:
        prefix = os.path.dirname(os.path.dirname(daemon))
        cands.append(os.path.join(prefix, "bin", "scontrol"))
    cands += [os.path.join(d, "scontrol") for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    cands += [os.path.join(d, "scontrol") for d in SCONTROL_DIRS]
    for c in cands:
        if c and os.path.isabs(c) and os.access(c, os.X_OK):
            return c
    return None


def _slurm_daemon_exe(levels: int = 4) -> str | None:
    """Path of the nearest slurmd/slurmstepd among this process's ancestors (Linux /proc), or None."""
    pid = os.getppid()
    for _ in range(levels):
        if pid <= 1:
            return None
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            return None
        if os.path.basename(exe) in ("slurmd", "slurmstepd"):
            return exe
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            pid = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            return None
    return None


def run_capture(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str] | None:
    """Run a command, stdin from /dev/null, stdout+stderr captured, killed after `timeout` s; None if it cannot run."""
    import select

    try:
        r, w = os.pipe()
    except OSError:
        return None
    actions = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
               (os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_DUP2, w, 2)]
    try:
        pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
    except OSError:
        os.close(r)
        os.close(w)
        return None
    os.close(w)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, 9)
                break
            ready, _, _ = select.select([r], [], [], left)
            if ready:
                chunk = os.read(r, 65536)
                if not chunk:
                    break
                out += chunk
    finally:
        os.close(r)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")


def scontrol(args: list[str], timeout: float = 10.0) -> tuple[int, str] | None:
    exe = find_scontrol()
    if exe is None:
        return None
    env = {"PATH": "/usr/bin:/bin"}
    if os.environ.get("SLURM_CONF"):
        env["SLURM_CONF"] = os.environ["SLURM_CONF"]
    return run_capture([exe, *args], env, timeout)


def sacct(args: list[str], timeout: float = 10.0) -> tuple[int, str] | None:
    """sacct (beside the scontrol of the Slurm running this hook) with `args`; None when there is none."""
    exe = find_scontrol()
    if exe is None:
        return None
    exe = os.path.join(os.path.dirname(exe), "sacct")
    if not os.access(exe, os.X_OK):
        return None
    env = {"PATH": "/usr/bin:/bin"}
    if os.environ.get("SLURM_CONF"):
        env["SLURM_CONF"] = os.environ["SLURM_CONF"]
    return run_capture([exe, *args], env, timeout)


def job_fields(job_id: int | str, log: "HookLog | None" = None) -> dict[str, str] | None:
    """`scontrol show job -o` of the job as a dict (QOS, JobState, Restarts, StartTime, PreemptTime, ...), or None.

    Read by `slurm.show_job` (no imports): scontrol prints the job's name, comment and paths as given, so a job
    named `x JobState=REQUEUED Restarts=5` split on blanks, first word wins, gave its own words as Slurm's (a
    requeue and a run the job never had); a record holding a field twice is refused (None, logged). The array's
    own id, which one task carries as its SLURM_JOB_ID, and a heterogeneous job's leader print one record per
    task or component: the one whose JobId is `job_id` is read."""
    r = scontrol(["show", "job", "-o", str(job_id)])
    if r is None or r[0] != 0:
        return None
    from slurmtools.slurm.show_job import AmbiguousRecord, parse_show_job

    try:
        return parse_show_job(r[1], job_id)
    except AmbiguousRecord as e:
        if log is not None:
            log(f"Slurm's job record not read: {e}")
        return None


def drain(node: str, reason: str) -> tuple[bool, str]:
    """`scontrol update nodename=NODE state=drain reason=...`; returns (done, Slurm's words).

    Not over a reason someone else gave: a node already out of service (drained, down, failed) with another
    reason than one of ours (an admin's "RMA ticket 4711", Slurm's "Not responding") keeps it, and the fault is
    only logged; an update would replace the reason, its user and its time. Nor again for the same reason: the
    health check runs every interval, and each update would restamp the drain. When the node's state cannot be
    read, it is drained as before."""
    reason = "".join(c if c in _REASON_CHARS else "_" for c in reason)[:200]
    shown = scontrol(["show", "node", node])
    if shown is not None and shown[0] == 0:
        flags, held = node_reason(shown[1])
        out = bool(flags & {"DRAIN", "DOWN", "FAIL"})
        if out and held and not held.startswith(OUR_REASONS):
            return True, f"already out of service ({'+'.join(sorted(flags))}) for another reason, kept: {held}"
        if "DRAIN" in flags and held == reason:
            return True, "already drained for this reason"
    r = scontrol(["update", f"nodename={node}", "state=drain", f"reason={reason}"])
    if r is None:
        return False, "no scontrol found"
    return r[0] == 0, r[1].strip()


#: how the hooks' drain reasons begin (prolog, node-health): any other reason is someone else's
OUR_REASONS = "slurmtools "


def node_reason(text: str) -> tuple[set[str], str]:
    """(the words of the node's State, e.g. {"IDLE", "DRAIN"}; its Reason's first line without Slurm's
    ` [user@time]` stamp, "" when it has none) from `scontrol show node NODE` (several lines: the Reason on a line of
    its own, as 22.05 and 25.11 print it)."""
    flags: set[str] = set()
    held = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Reason="):
            held = line[len("Reason="):]
            stamp = held.rfind(" [")
            if stamp >= 0 and held.endswith("]") and "@" in held[stamp:]:
                held = held[:stamp]
        elif not flags:
            for tok in line.split():
                if tok.startswith("State="):
                    flags = {w.rstrip("*~#!%$@^-") for w in tok[len("State="):].split("+") if w}
    return flags, held


def dumps(obj) -> str:
    """JSON for the hooks' records (dict/list/str/int/float/bool/None) without importing json (and re)."""
    from _json import encode_basestring_ascii as q

    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, (int, float)):
        if obj != obj or obj in (float("inf"), float("-inf")):
            return "null"
        return repr(obj)
    if isinstance(obj, str):
        return q(obj)
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{q(str(k))}: {dumps(v)}" for k, v in sorted(obj.items())) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ", ".join(dumps(v) for v in obj) + "]"
    return q(str(obj))


class _JsonContext:
    """What `_json.make_scanner` reads from a decoder: the C scanner alone, without json.decoder (and re)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict = {}

    @staticmethod
    def parse_constant(name: str):
        raise ValueError(f"{name} is not a number JSON allows")


def loads(text: str) -> object:
    """JSON for the hooks' own files without importing json (and re), the counterpart of `dumps`.

    Raises ValueError("line L column C: invalid JSON: ...") for anything that is not one JSON document."""
    from _json import make_scanner

    start = len(text) - len(text.lstrip(" \t\r\n"))
    try:
        obj, end = make_scanner(_JsonContext)(text, start)
    except RecursionError:  # arrays or objects nested past Python's recursion limit: json would raise it again
        raise ValueError(_TOO_DEEP) from None
    except Exception:  # the C scanner reports most errors only through json.decoder: let json say what is wrong
        return _loads_slowly(text)
    if text[end:].strip(" \t\r\n"):
        return _loads_slowly(text)
    return obj


#: why a document nested too deeply is refused (RecursionError is no ValueError: every reader's handler missed it)
_TOO_DEEP = "invalid JSON: arrays or objects nested too deeply to read"


def _loads_slowly(text: str) -> object:
    import json

    try:
        return json.loads(text, parse_constant=_JsonContext.parse_constant)
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None
    except json.JSONDecodeError as e:
        raise ValueError(f"line {e.lineno} column {e.colno}: invalid JSON: {e.msg}") from None
    except ValueError as e:
        raise ValueError(f"invalid JSON: {e}") from None
