"""A small sacct dump of known rows for the dirty-data tests, and a way to spoil one row of it.

Window 2026-11-02 (a day). Each job holds `gpus` GPUs for 1 h (01:00-02:00 + k h), so the report's GPU-hours are
the sum of the GPUs of the rows that were read: a skipped row takes exactly its GPUs away, nothing else.
"""

from __future__ import annotations

from datetime import datetime

HEADER = ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Eligible|Start|End|NodeList|"
          "NNodes|AllocTRES|ReqTRES|TRESUsageInAve|Cluster")
FIELDS = HEADER.split("|")
SINCE, UNTIL = datetime(2026, 11, 2), datetime(2026, 11, 3)


def tres(g: int) -> str:
    return f"billing={g},cpu={g},gres/gpu:h100={g},gres/gpu={g},mem=10G,node=1"


def row(job: int, gpus: int, name: str = "train", user: str = "alice", account: str = "vision", hour: int = 1,
        **over: str) -> str:
    t0, t1 = f"2026-11-02T{hour:02d}:00:00", f"2026-11-02T{hour + 1:02d}:00:00"
    values = {"JobID": str(job), "JobIDRaw": str(job), "JobName": name, "User": user, "Account": account,
              "Partition": "gpu", "QOS": "standard", "State": "COMPLETED", "ExitCode": "0:0", "Submit": t0,
              "Eligible": t0, "Start": t0, "End": t1, "NodeList": "gpu01", "NNodes": "1", "AllocTRES": tres(gpus),
              "ReqTRES": tres(gpus), "TRESUsageInAve": "", "Cluster": "lab"}
    values.update(over)
    return "|".join(values[f] for f in FIELDS)


def step(job: int, gpus: int, usage: str, hour: int = 1) -> str:
    return row(job, gpus, name="batch", user="", hour=hour, JobID=f"{job}.batch", JobIDRaw=f"{job}.batch", QOS="",
               TRESUsageInAve=usage)


#: (job, GPUs) of the clean rows; 1+2+...+8 = 36 GPU-hours in the window
JOBS = [(100 + i, i) for i in range(1, 9)]


def clean_lines() -> list[str]:
    return [row(j, g, hour=i) for i, (j, g) in enumerate(JOBS)]


def dump(lines: list[str]) -> bytes:
    return ("\n".join([HEADER, *lines]) + "\n").encode()


def dump_bytes(lines: list[bytes]) -> bytes:
    return b"\n".join([HEADER.encode(), *lines]) + b"\n"
