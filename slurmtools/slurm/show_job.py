"""`scontrol show job -o` of one job as its KEY=VALUE fields: the one reader of that line, for the admin's update
check (`policy.update`) and a job's own checkpoint logic (`checkpoint`). Light: no imports, as a job program loads
it at start-up.

scontrol prints a job's name, comment, command, paths and (25.11) sbatch line as they were given, blanks included,
and 22.05 has no `scontrol --json`, so a job named `a QOS=production` prints `JobName=a QOS=production ...
QOS=standard`. Read first-wins, its own words became the job's QoS; read last-wins, an output path could do the
same. Fields scontrol prints for every job (Account, QOS, Partition, JobState, TimeLimit, NumNodes, TRES, the memory
fields...) then show as given twice, and the record is refused (`AmbiguousRecord`) rather than read either way. Not
caught: words naming a field scontrol prints only when set (`TresPerNode=` on a job without GRES, `PreemptTime=`
on a job that has not started). Words without `=` (the rest of a value with blanks) are passed over.
"""

from __future__ import annotations


class AmbiguousRecord(ValueError):
    """A field given twice: text the job's owner chose holds ` KEY=`."""

    def __init__(self, key: str):
        self.key = key
        super().__init__(f"{key}= is printed twice: the job's name, comment, a path or its sbatch line holds "
                         f"' {key}=', so its own fields cannot be told apart")


def parse_show_job(text: str) -> dict[str, str]:
    """The fields of one `scontrol show job -o` record; AmbiguousRecord when one is given twice."""
    out: dict[str, str] = {}
    for word in text.split():
        k, eq, v = word.partition("=")
        if not eq or not k:
            continue
        if k in out:
            raise AmbiguousRecord(k)
        out[k] = v
    return out
