"""`scontrol show job -o` of one job as its KEY=VALUE fields: the one reader of that line, for the admin's update
check (`policy.update`) and a job's own checkpoint logic (`checkpoint`). Light: no imports, as a job program loads
it at start-up.

scontrol prints a job's name, comment, command, paths and (25.11) sbatch line as they were given, blanks included,
and 22.05 has no `scontrol --json`, so a job named `a QOS=production` prints `JobName=a QOS=production ...
QOS=standard`. Read first-wins, its own words became the job's QoS; read last-wins, an output path could do the
same. Fields scontrol prints for every job (Account, QOS, Partition, JobState, TimeLimit, NumNodes, TRES, the memory
fields...) then show as given twice, and the record is refused (`AmbiguousRecord`) rather than read either way. Not
caught: words naming a field scontrol prints only when set (`TresPerNode=` on a job without GRES, `PreemptTime=`
on a job that has not started).

A value runs to the next word that starts a field: a word without `=` is the rest of a value with blanks
(`StdOut=/tmp/o p` is the path `/tmp/o p`, not `/tmp/o`), and so is a `WORD=` whose WORD is no key scontrol
prints when it follows text the job's owner chose (`Comment=lr=0.1 bs=32`). One job's record is one line; an
array job's id (while tasks of it are pending) and a heterogeneous job's leader print one line per task or
component (slurmctld's `pack_one_job`): `job_id` picks one, else `SeveralRecords`.
"""

from __future__ import annotations

#: the keys `scontrol show job` prints (25.11 `_sprint_job_info` in src/scontrol/info_job.c, and 22.05's `TRES`
#: and `Power`): a word starting with one of them is a field of its own, never the rest of a value
KEYS = frozenset((
    "JobId", "ArrayJobId", "ArrayTaskId", "ArrayTaskThrottle", "HetJobId", "HetJobOffset", "JobName", "SLUID",
    "HetJobIdSet", "UserId", "GroupId", "MCS_label", "Priority", "Nice", "Account", "QOS", "WCKey", "JobState",
    "Reason", "FailedNode", "Dependency", "Requeue", "Restarts", "BatchFlag", "Reboot", "ExitCode",
    "DerivedExitCode", "RunTime", "TimeLimit", "TimeMin", "SubmitTime", "EligibleTime", "AccrueTime", "ResizeTime",
    "StartTime", "EndTime", "Deadline", "CronJob", "CrontabSpec", "PreemptEligibleTime", "PreemptTime",
    "SuspendTime", "SecsPreSuspend", "LastSchedEval", "Scheduler", "Partition", "AllocNode:Sid", "ReqNodeList",
    "ExcNodeList", "NodeList", "SchedNodeList", "BatchFeatures", "BatchHost", "StepMgrEnabled", "FedOrigin",
    "FedViableSiblings", "FedActiveSiblings", "NumNodes", "NumCPUs", "NumTasks", "CPUs/Task", "ReqB:S:C:T", "TRES",
    "ReqTRES", "AllocTRES", "Socks/Node", "NtasksPerN:B:S:C", "CoreSpec", "ThreadSpec", "JOB_GRES", "Nodes",
    "CPU_IDs", "Mem", "GRES", "MinCPUsNode", "MinMemoryNode", "MinMemoryCPU", "MinMemoryTRES", "MinTmpDiskNode",
    "Features", "DelayBoot", "ClusterFeatures", "Prefer", "Reservation", "OverSubscribe", "Contiguous", "Licenses",
    "LicensesAlloc", "Network", "Command", "SubmitLine", "WorkDir", "AdminComment", "SystemComment", "Comment",
    "Extra", "StdErr", "StdIn", "StdOut", "Power", "SegmentSize", "SpreadSegments", "ConsolidateSegments",
    "Switches", "BurstBuffer", "BurstBufferState", "CpuFreqMin", "CpuFreqMax", "CpuFreqGov", "GresAllowTaskSharing",
    "GresEnforceBind", "GresOneTaskPerSharing", "KillOnInvalidDependent", "SpreadJob", "ExpeditedRequeue",
    "OOMKillStep", "CpusPerTres", "MemPerTres", "TresBind", "TresFreq", "TresPerJob", "TresPerNode",
    "TresPerSocket", "TresPerTask", "MailUser", "MailType", "NtasksPerTRES", "Container", "ContainerID",
    "SELinuxContext", "ResvPorts"))
#: fields whose value is text the job's owner chose: a `WORD=` inside them that is no key in KEYS is theirs
FREE_TEXT = frozenset(("JobName", "CrontabSpec", "Command", "SubmitLine", "WorkDir", "AdminComment",
                       "SystemComment", "Comment", "Extra", "StdErr", "StdIn", "StdOut", "BurstBuffer", "MailUser",
                       "Container", "ContainerID", "SELinuxContext"))


class AmbiguousRecord(ValueError):
    """A field given twice: text the job's owner chose holds ` KEY=`."""

    def __init__(self, key: str):
        self.key = key
        super().__init__(f"{key}= is printed twice: the job's name, comment, a path or its sbatch line holds "
                         f"' {key}=', so its own fields cannot be told apart")


class SeveralRecords(AmbiguousRecord):
    """scontrol printed several jobs (an array's tasks, a heterogeneous job's components) and none was picked."""

    def __init__(self, ids: list[str], job_id: str | None):
        self.key = "JobId"
        shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        which = f"none of them or more than one is job {job_id}" if job_id else "no job id was given to pick one"
        ValueError.__init__(self, f"scontrol show job printed {len(ids)} records (JobId={shown}: the tasks of an "
                                  f"array job or the components of a heterogeneous job) and {which}")


def _records(text: str) -> list[str]:
    """The records of `scontrol show job -o` text: each starts a line with `JobId=` (a line that does not is the
    rest of a value holding a line break)."""
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("JobId=") or not out:
            out.append(line)
        else:
            out[-1] += "\n" + line
    return [r for r in out if r.strip()]


def parse_show_job(text: str, job_id: str | int | None = None) -> dict[str, str]:
    """The fields of one `scontrol show job -o` record; AmbiguousRecord when one is given twice. Where scontrol
    printed several records, the one of `job_id` (123, an array task 100_7, a heterogeneous component 100+1);
    SeveralRecords when it is not given or does not name exactly one."""
    records = _records(text)
    if len(records) <= 1:
        return _parse(records[0] if records else "")
    parsed = [_parse(r) for r in records]
    want = None if job_id is None else str(job_id)
    hits = [f for f in parsed if want is not None and want in _names(f)]
    if len(hits) != 1:
        raise SeveralRecords([f.get("JobId", "?") for f in parsed], want)
    return hits[0]


def _names(f: dict[str, str]) -> set[str]:
    """The ids a record answers to: its JobId, `ArrayJobId_ArrayTaskId`, `HetJobId+HetJobOffset`."""
    names = {f.get("JobId", "")}
    if "ArrayJobId" in f:
        names.add(f"{f['ArrayJobId']}_{f.get('ArrayTaskId', '')}")
    if "HetJobId" in f:
        names.add(f"{f['HetJobId']}+{f.get('HetJobOffset', '')}")
    return names


def _parse(record: str) -> dict[str, str]:
    """One record's fields: a value runs from after its `KEY=` to the blank before the next field's word."""
    out: dict[str, str] = {}
    starts: list[tuple[str, int, int]] = []   # key, where its value starts, where its word starts
    key = None
    pos = 0
    n = len(record)
    while pos < n:
        while pos < n and record[pos].isspace():
            pos += 1
        if pos >= n:
            break
        end = pos
        while end < n and not record[end].isspace():
            end += 1
        word = record[pos:end]
        k, eq, _ = word.partition("=")
        if eq and k and (k in KEYS or key is None or key not in FREE_TEXT):
            if k in out:
                raise AmbiguousRecord(k)
            out[k] = ""
            starts.append((k, pos + len(k) + 1, pos))
            key = k
        pos = end
    for i, (k, vstart, _) in enumerate(starts):
        vend = starts[i + 1][2] if i + 1 < len(starts) else n
        out[k] = record[vstart:vend].rstrip()
    return out


def request_tres(fields: dict[str, str]) -> str:
    """The TRES a job asks for: 25.11 prints `ReqTRES=` and `AllocTRES=`; 22.05 one `TRES=`, the request while the
    job is pending and its allocation once it has one (so a request only for a pending job)."""
    return fields.get("ReqTRES", fields.get("TRES", ""))
