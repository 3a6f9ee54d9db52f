"""What the backend returns: typed snapshots of Slurm's jobs, nodes, partitions, QoS and accounting records."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


#: a node in one of these base states, or with one of these flags, takes no new job
UNSCHEDULABLE_STATES = frozenset(("down", "drained", "draining", "fail", "future", "unknown"))
UNSCHEDULABLE_FLAGS = frozenset(("DRAIN", "DRAINED", "DRAINING", "NOT_RESPONDING", "MAINTENANCE", "RESERVED",
                                 "POWERED_DOWN", "FAIL"))
#: what a user name may not hold to be one name in a `sacctmgr ... where user=NAME` clause: a comma (sacctmgr reads
#: a list), `=` (another clause), quotes (sacctmgr strips them); the rest of a passwd name (`DOMAIN\\alice` from
#: winbind, `john smith`, `alice@realm`, `HOST$`) reads back as written: measured with sacctmgr on 22.05
USER_NAME_FORBIDDEN = frozenset(",='\"")
#: what `is_user_name` says a name must be, for a one-line refusal
USER_NAME_RULE = "printable, at most 255 bytes, not starting with '-' or a blank, without , = or quotes"


def is_user_name(name: str) -> bool:
    """Whether `name` can be a passwd user name that Slurm's commands look up as one name."""
    return (bool(name) and name.isprintable() and not name[0] in "- " and not name[-1] == " "
            and len(name.encode("utf-8", "surrogatepass")) <= 255 and USER_NAME_FORBIDDEN.isdisjoint(name))


#: Slurm's words for a job that runs on its nodes: RUNNING, or the flag `job_state_string()` names instead while it
#: runs (CONFIGURING while its allocated nodes boot or PrologSlurmctld runs, SIGNALING while a signal is sent)
RUNNING_STATES = frozenset(("RUNNING", "CONFIGURING", "SIGNALING"))


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    state: str  # base state, lower case: idle, mixed, allocated, down, drained, draining, ...
    flags: tuple[str, ...]  # DRAIN, NOT_RESPONDING, ... upper case as Slurm writes them
    cpus: int
    cpus_alloc: int
    memory_mb: int
    memory_alloc_mb: int
    gpus_by_type: dict[str, int]  # configured GPUs
    gpus_used_by_type: dict[str, int]
    gpus_used_idx: tuple[int, ...]
    features: tuple[str, ...]
    partitions: tuple[str, ...]
    reason: str = ""

    @property
    def gpus(self) -> int:
        return sum(self.gpus_by_type.values())

    @property
    def gpus_used(self) -> int:
        return sum(self.gpus_used_by_type.values())

    @property
    def gpus_free(self) -> int:
        """GPUs a job could start on now: none on a node that takes no job, or whose CPUs or memory are all
        allocated (a GPU job needs a CPU and some memory: a MIG node's idle slices behind 48 of 48 CPUs are not
        free)."""
        if not self.schedulable or self.cpus_alloc >= self.cpus > 0 or self.memory_alloc_mb >= self.memory_mb > 0:
            return 0
        return self.gpus - self.gpus_used

    @property
    def schedulable(self) -> bool:
        return self.state not in UNSCHEDULABLE_STATES and UNSCHEDULABLE_FLAGS.isdisjoint(self.flags)


@dataclass(frozen=True)
class PartitionInfo:
    name: str
    nodes: tuple[str, ...]
    default: bool
    state: str
    max_time_s: int | None
    qos: str | None = None


@dataclass(frozen=True)
class QosInfo:
    name: str
    priority: int
    preempt: tuple[str, ...]
    preempt_mode: str
    grace_time_s: int
    max_tres_per_job: str = ""
    max_tres_per_user: str = ""
    max_wall_s: int | None = None


@dataclass(frozen=True)
class JobInfo:
    job_id: int
    name: str
    user: str
    account: str
    partition: str
    qos: str
    state: str  # PENDING, RUNNING, COMPLETED, ...
    reason: str
    nodes: tuple[str, ...]
    num_nodes: int
    gpus: int
    gpus_by_type: dict[str, int]
    time_limit_s: int | None
    restarts: int
    submit_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    array_job_id: int | None = None
    array_task_id: int | None = None
    req_switch: int | None = None
    comment: str = ""
    std_out: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class AcctRecord:
    """One line of sacct: a job allocation (`step` is None) or one of its steps."""

    job_id: str  # "123", "123_4" for array tasks
    job_id_raw: int
    step: str | None  # None for the allocation; "batch", "extern", "0", ...
    name: str
    user: str
    account: str
    partition: str
    qos: str
    state: str  # first word: COMPLETED, FAILED, PREEMPTED, REQUEUED, CANCELLED, TIMEOUT, ...
    exit_code: str
    submit: datetime | None
    eligible: datetime | None
    start: datetime | None
    end: datetime | None
    elapsed_s: int
    timelimit_s: int | None
    nodelist: tuple[str, ...]
    alloc_gpus: int
    alloc_gpus_by_type: dict[str, int]
    req_gpus: int
    alloc_cpus: int
    alloc_tres: str
    req_tres: str
    extra: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def gpu_seconds(self) -> float:
        return self.alloc_gpus * self.elapsed_s


@dataclass(frozen=True)
class Association:
    """One of a user's rows in Slurm's association table: what sbatch checks a job's account and QoS against."""

    cluster: str
    account: str
    user: str
    partition: str  # "" when the row holds for every partition
    qos: tuple[str, ...]  # the QoS the user may ask for under this account (inherited ones included)
    default_qos: str = ""  # "" when none is set (or the backend cannot read it)


@dataclass(frozen=True)
class UserAssociations:
    """Everything Slurm's accounting knows of one user's right to submit: empty `rows` means sbatch refuses them."""

    user: str
    default_account: str | None
    rows: tuple[Association, ...] = ()


@dataclass(frozen=True)
class ScheduledStart:
    """A pending job Slurm has already planned (`squeue --start`): when it expects to start it and the nodes it
    holds for it. The planner counts such jobs as queued ahead of a new one."""

    job_id: int
    qos: str
    start: datetime | None  # None: Slurm has no estimate
    nodes: tuple[str, ...]  # empty: no nodes chosen yet
