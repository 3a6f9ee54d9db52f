"""Synthetic job history for the advise tests: a `sacct --parsable2` dump with the fields advise asks for, and
epilog records in the hook's own format (`slurmtools/hooks/epilog.py`: job, user, gpus, start, end, run,
gpu_accounting per GPU)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from slurmtools.advise.usage import sacct_fields

T0 = datetime(2026, 11, 10, 8, 0, 0)


@dataclass
class Job:
    job_id: int
    name: str = "train-vit"
    user: str = "alice"
    account: str = "vision"
    gpus: int = 8
    cpus: int = 64
    mem: str = "512G"
    limit: str = "04:00:00"
    elapsed: int = 3600
    state: str = "COMPLETED"
    total_cpu: str = "10:40:00"
    max_rss: str = "20G"
    gpu_util: list | None = None  # per GPU, epilog
    mem_util: list | None = None
    gpu_mem_bytes: int | None = None
    slurm_util: float | None = None  # gres/gpuutil in the step's TRESUsageInAve
    start: datetime = field(default=None)
    #: End as sacct prints it (local wall clock), where it is not Start + elapsed on the wall clock (a run across
    #: a clock change); `elapsed` stays the run's real time (ElapsedRaw)
    end: datetime | None = None
    #: the epilog record's (start, end) epoch seconds, where they are not this process's reading of start and end
    epoch: tuple[float, float] | None = None

    def __post_init__(self):
        if self.start is None:
            self.start = T0 + timedelta(hours=2 * (self.job_id % 1000))


def sacct_dump(jobs: list[Job], fields: tuple[str, ...] | None = None) -> str:
    names = list(fields or sacct_fields())
    rows = ["|".join(names)]
    for j in jobs:
        end = j.end or j.start + timedelta(seconds=j.elapsed)
        alloc = (f"billing={j.cpus},cpu={j.cpus}" + (f",gres/gpu:h100={j.gpus},gres/gpu={j.gpus}" if j.gpus else "")
                 + f",mem={j.mem},node=1")
        req = f"billing={j.cpus},cpu={j.cpus}" + (f",gres/gpu={j.gpus}" if j.gpus else "") + f",mem={j.mem},node=1"
        base = {"JobID": str(j.job_id), "JobIDRaw": str(j.job_id), "JobName": j.name, "User": j.user,
                "Account": j.account, "Partition": "gpu", "QOS": "standard", "State": j.state, "ExitCode": "0:0",
                "Submit": f"{j.start:%Y-%m-%dT%H:%M:%S}", "Eligible": f"{j.start:%Y-%m-%dT%H:%M:%S}",
                "Start": f"{j.start:%Y-%m-%dT%H:%M:%S}", "End": f"{end:%Y-%m-%dT%H:%M:%S}",
                "ElapsedRaw": str(j.elapsed), "NodeList": "gpu01",
                "NNodes": "1", "AllocTRES": alloc, "ReqTRES": req, "TRESUsageInAve": "", "Cluster": "lab",
                "AllocCPUS": str(j.cpus), "ReqMem": j.mem, "Timelimit": j.limit, "TotalCPU": j.total_cpu,
                "MaxRSS": ""}
        rows.append("|".join(base.get(n, "") for n in names))
        usage = f"cpu=00:10:00,mem={j.max_rss}" + (f",gres/gpuutil={j.slurm_util:g}" if j.slurm_util is not None
                                                     else "")
        step = dict(base, JobID=f"{j.job_id}.batch", JobIDRaw=f"{j.job_id}.batch", JobName="batch",
                    ReqTRES="", TRESUsageInAve=usage, MaxRSS=j.max_rss, Timelimit="", ReqMem=j.mem)
        rows.append("|".join(step.get(n, "") for n in names))
    return "\n".join(rows) + "\n"


def epilog_records(jobs: list[Job], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for j in jobs:
        if j.gpu_util is None:
            continue
        acc = [{"gpu": i, "processes": 1, "gpu_util_pct": u,
                "mem_util_pct": (j.mem_util[i] if j.mem_util else None),
                "max_memory_bytes": j.gpu_mem_bytes} for i, u in enumerate(j.gpu_util)]
        start, end = j.epoch or (j.start.timestamp(), (j.start + timedelta(seconds=j.elapsed)).timestamp())
        rec = {"job": j.job_id, "user": j.user, "account": j.account, "node": "gpu01", "gpus": list(range(j.gpus)),
               "start": start, "end": end,
               "run": 0, "restart_count": 0, "gpu_accounting": acc}
        (folder / f"{j.job_id}.0.gpu01.json").write_text(json.dumps(rec))
    return folder


def write(tmp: Path, jobs: list[Job]) -> tuple[Path, Path]:
    dump = tmp / "sacct.txt"
    dump.write_text(sacct_dump(jobs))
    return dump, epilog_records(jobs, tmp / "jobs")


WINDOW = (T0 - timedelta(days=1), T0 + timedelta(days=40))


def recent(first_id: int, n: int, **kw) -> list[Job]:
    """`n` runs in the last days (inside advise's default 30-day window), one every two hours."""
    t = datetime.now().replace(microsecond=0) - timedelta(days=5)
    return [Job(first_id + i, start=t + timedelta(hours=2 * i), **kw) for i in range(n)]
