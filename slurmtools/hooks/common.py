"""What prolog and epilog share: reading slurmd's environment defensively, logging, calling scontrol.

Why defensive: a hook that raises on an odd variable drains a healthy node (a failing prolog drains the node and
requeues the job held), so every field is parsed to a value or None, never an exception.
Facts (Slurm 22.05): hooks run as root with NO PATH, and without SLURM_JOB_QOS / SLURM_JOB_NAME.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass

from slurmtools.hooks import safefs

SCONTROL_DIRS = ("/usr/bin", "/usr/local/bin", "/opt/slurm/bin", "/usr/sbin")
DEFAULT_SPOOL = "/var/spool/slurmtools"
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_USER = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,63}$")


def _int(s: str | None) -> int | None:
    s = (s or "").strip()
    return int(s) if s.isdigit() and len(s) < 19 else None


def _word(s: str | None, pattern: re.Pattern = _USER) -> str | None:
    s = (s or "").strip()
    return s if pattern.match(s) else None


def parse_gpu_indices(s: str | None) -> tuple[int, ...] | None:
    """'0,1,3' -> (0, 1, 3); None for absent or malformed (then every visible GPU is checked)."""
    s = (s or "").strip()
    if not s:
        return None
    out = []
    for part in s.split(","):
        part = part.strip()
        if not part.isdigit() or len(part) > 4:
            return None
        out.append(int(part))
    return tuple(out)


def first_host(hostlist: str | None) -> str | None:
    """First host of a Slurm hostlist ('gpu[03-05,09],cpu1' -> 'gpu03') without a hostlist library."""
    s = (hostlist or "").strip()
    m = re.match(r"^([A-Za-z0-9._-]*)(?:\[(\d+)[^\]]*\])?", s)
    if not m or not m.group(0):
        return None
    prefix, num = m.group(1), m.group(2)
    name = prefix + (num or "")
    return name if _NODE.match(name) else None


@dataclass(frozen=True)
class JobEnv:
    """The job as slurmd's hook environment describes it; unparseable fields are None."""

    job_id: int | None
    user: str | None
    uid: int | None
    account: str | None
    partition: str | None
    node: str | None
    nodelist: str | None
    gpus: tuple[int, ...] | None
    restart_count: int
    exit_code: str | None
    derived_exit: str | None
    context: str | None

    @classmethod
    def from_environ(cls, env: os._Environ | dict | None = None) -> "JobEnv":
        e = os.environ if env is None else env
        g = lambda k: e.get(k)  # noqa: E731
        return cls(
            job_id=_int(g("SLURM_JOB_ID") or g("SLURM_JOBID")),
            user=_word(g("SLURM_JOB_USER")),
            uid=_int(g("SLURM_JOB_UID")),
            account=_word(g("SLURM_JOB_ACCOUNT")),
            partition=_word(g("SLURM_JOB_PARTITION")),
            node=_word(g("SLURMD_NODENAME"), _NODE),
            nodelist=(g("SLURM_NODELIST") or g("SLURM_JOB_NODELIST") or "")[:4096] or None,
            gpus=parse_gpu_indices(g("SLURM_JOB_GPUS") if g("SLURM_JOB_GPUS") is not None
                                   else g("CUDA_VISIBLE_DEVICES")),
            restart_count=_int(g("SLURM_JOB_RESTART_COUNT")) or 0,
            exit_code=(g("SLURM_JOB_EXIT_CODE2") or g("SLURM_JOB_EXIT_CODE") or "")[:32] or None,
            derived_exit=(g("SLURM_JOB_DERIVED_EC") or "")[:32] or None,
            context=_word(g("SLURM_SCRIPT_CONTEXT")),
        )

    @property
    def is_first_node(self) -> bool:
        """The batch host (first node) speaks for the whole job in the decision log."""
        first = first_host(self.nodelist)
        return first is None or self.node is None or first == self.node


def spool_dir() -> str:
    return os.environ.get("SLURMTOOLS_SPOOL_DIR") or DEFAULT_SPOOL


class HookLog:
    """Lines to stderr and, when the spool folder is safe, to `hooks.log` in it (one O_APPEND write each)."""

    def __init__(self, hook: str, job: JobEnv | None = None):
        self.hook = hook
        self.job = job
        self.dfd: int | None = None

    def attach(self, dfd: int | None) -> None:
        self.dfd = dfd

    def __call__(self, msg: str) -> None:
        job = self.job.job_id if self.job else None
        node = self.job.node if self.job else None
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {self.hook} job={job} node={node} {msg}\n"
        try:
            sys.stderr.write(line)
        except Exception:
            pass
        if self.dfd is not None:
            try:
                safefs.append_at(self.dfd, "hooks.log", line.encode("utf-8", "replace"))
            except OSError:
                pass


def find_scontrol() -> str | None:
    """scontrol by absolute path: hooks get no PATH. SLURMTOOLS_SCONTROL (set by the root wrapper) wins."""
    env = os.environ.get("SLURMTOOLS_SCONTROL")
    cands = ([env] if env else []) + [os.path.join(d, "scontrol") for d in SCONTROL_DIRS]
    for c in cands:
        if c and os.path.isabs(c) and os.access(c, os.X_OK):
            return c
    return None


def scontrol(args: list[str], timeout: float = 10.0) -> subprocess.CompletedProcess | None:
    exe = find_scontrol()
    if exe is None:
        return None
    env = {"PATH": "/usr/bin:/bin"}
    if os.environ.get("SLURM_CONF"):
        env["SLURM_CONF"] = os.environ["SLURM_CONF"]
    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None


def job_fields(job_id: int) -> dict[str, str] | None:
    """`scontrol show job -o` as a dict (QOS, JobState, Restarts, StartTime, PreemptTime, ...), or None."""
    r = scontrol(["show", "job", "-o", str(job_id)])
    if r is None or r.returncode != 0:
        return None
    fields: dict[str, str] = {}
    for tok in r.stdout.split():
        k, sep, v = tok.partition("=")
        if sep and k not in fields:
            fields[k] = v
    return fields


def drain(node: str, reason: str) -> tuple[bool, str]:
    """`scontrol update nodename=NODE state=drain reason=...`; returns (done, Slurm's words)."""
    reason = re.sub(r"[^A-Za-z0-9 _.:,;=()/#+-]", "_", reason)[:200]
    r = scontrol(["update", f"nodename={node}", "state=drain", f"reason={reason}"])
    if r is None:
        return False, "no scontrol found"
    return r.returncode == 0, (r.stderr or r.stdout).strip()
