"""The one interface every part of slurmtools uses to reach Slurm.

Two implementations, registered in `backends.py`: `commands.CommandBackend` (drives sbatch, scontrol, squeue,
sinfo, sacct, sacctmgr) and `pyslurm_backend.PyslurmBackend` (through pyslurm's API, when pyslurm is installed and
was built for the running Slurm).
"""

from __future__ import annotations

import abc
from datetime import datetime
from typing import Mapping, Sequence

from slurmtools.slurm.model import (AcctRecord, JobInfo, NodeInfo, PartitionInfo, QosInfo, ScheduledStart,
                                    UserAssociations)


class Backend(abc.ABC):
    name: str = "abstract"

    @abc.abstractmethod
    def version(self) -> tuple[int, int, int]:
        """Slurm's version, e.g. (22, 5, 8)."""

    @abc.abstractmethod
    def submit(self, script: str, options: Sequence[str] = (), env: Mapping[str, str] | None = None,
               cwd: str | None = None) -> int:
        """Submit a batch script (its text) with extra sbatch options; return the job id. `env`: the environment
        sbatch runs in and the job gets, whole (default: this backend's), so that a caller can leave a variable out."""

    @abc.abstractmethod
    def cancel(self, job_id: int, signal: str | None = None) -> None: ...

    @abc.abstractmethod
    def hold(self, job_id: int) -> None: ...

    @abc.abstractmethod
    def release(self, job_id: int) -> None: ...

    @abc.abstractmethod
    def requeue(self, job_id: int) -> None: ...

    @abc.abstractmethod
    def jobs(self, job_ids: Sequence[int] | None = None, user: str | None = None,
             states: Sequence[str] | None = None) -> list[JobInfo]:
        """Jobs the controller knows now (pending, running, recently ended)."""

    def job(self, job_id: int) -> JobInfo:
        found = self.jobs([job_id])
        if not found:
            from slurmtools.errors import SlurmError
            raise SlurmError("squeue", f"job {job_id} is not known to Slurm")
        return found[0]

    @abc.abstractmethod
    def nodes(self) -> list[NodeInfo]: ...

    @abc.abstractmethod
    def partitions(self) -> list[PartitionInfo]: ...

    @abc.abstractmethod
    def qos(self) -> list[QosInfo]: ...

    def qos_grace_times(self) -> dict[str, int]:
        """QoS name -> GraceTime in seconds, all `cluster show` needs of the QoS table; a backend may answer it
        with a narrower query than `qos()`."""
        return {q.name: q.grace_time_s for q in self.qos()}

    @abc.abstractmethod
    def accounting(self, start: datetime, end: datetime, job_ids: Sequence[int] | None = None,
                   all_users: bool = True, steps: bool = True, duplicates: bool = False) -> list[AcctRecord]:
        """Accounting records of jobs active in [start, end). `duplicates` keeps every run of a requeued job."""

    def associations(self, user: str) -> UserAssociations:
        """The user's associations (account, allowed QoS) and default account, as sbatch will check them.
        No rows: accounting has no association for the user. Raises SlurmUnavailable when accounting cannot be
        asked."""
        from slurmtools.errors import SlurmUnavailable

        raise SlurmUnavailable(self.name, f"the {self.name} backend cannot read Slurm's associations")

    def accounting_users(self) -> list[str]:
        """Every user name Slurm's accounting knows (to name them when a user is unknown)."""
        return []

    def scheduled_starts(self) -> list[ScheduledStart]:
        """Pending jobs with Slurm's expected start and the nodes it holds for them (`squeue --start`); empty
        when the backend cannot tell."""
        return []

    @abc.abstractmethod
    def update_job(self, job_id: int, **fields: str) -> None:
        """`scontrol update JobId=N Key=Value ...` (e.g. StartTime=now)."""


def get_backend(prefer: str | None = None) -> Backend:
    """Kept for callers of the first release; the registry is `slurmtools.slurm.backends`."""
    from slurmtools.slurm.backends import get_backend as choose

    return choose(prefer)
