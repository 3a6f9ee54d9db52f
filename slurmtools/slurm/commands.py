"""The default backend: Slurm's own commands, read through their machine-readable output.

`squeue --json` and `sinfo --json` (22.05 has both), `scontrol show partition -o` (no JSON there in 22.05),
`sacctmgr --parsable2`, `sacct --parsable2`. Errors carry Slurm's own message. No policy here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from datetime import datetime, timezone
from typing import Callable, Mapping, Sequence

from slurmtools.durations import parse_duration
from slurmtools.errors import ParseError, SlurmError, SlurmtoolsError, SlurmUnavailable, whole_number
from slurmtools.hostlist import NO_HOST, expand
from slurmtools.slurm.backend import Backend
from slurmtools.slurm.model import (USER_NAME_RULE, AcctRecord, Association, JobInfo, NodeInfo, PartitionInfo,
                                    QosInfo, UserAssociations, is_user_name)
from slurmtools.slurm.readers.common import check_errors as _check_errors, check_shape as _check_shape, num as _num
from slurmtools.slurm.readers.common import ts as _ts
from slurmtools.slurm.tres import parse_tres

_UNREACHABLE = ("Unable to contact slurm controller", "Connection refused", "Socket timed out",
                "Zero Bytes were transmitted", "Munge encode failed", "Could not establish a configuration source",
                "Invalid communication protocol", "Unable to establish controller machine")

#: the line Slurm's commands add after getopt refuses an option (squeue/sinfo/scontrol opts: `case '?'`)
_HELP_HINT = re.compile(r'Try "?[\w./-]+ --help"? for (?:more )?information\.?')

#: sacctmgr association fields the identity check reads, in this order (the same names in 22.05 and 25.11)
ASSOC_FIELDS = ("Cluster", "Account", "User", "Partition", "QOS", "DefaultQOS")

#: sacctmgr QoS fields `qos()` reads, in this order; Flags only to tell a Relative QoS (its TRES limits are percents)
QOS_FIELDS = ("Name", "Priority", "Preempt", "PreemptMode", "GraceTime", "MaxTRES", "MaxTRESPU", "MaxWall", "Flags")

#: sacct fields the accounting query reads (22.05 names; `restarts` does not exist there)
#: JobName comes last: it is the one free-text field, and a "|" inside it can then be put back together
ACCT_FIELDS = ("JobID", "JobIDRaw", "User", "Account", "Partition", "QOS", "State", "ExitCode",
               "Submit", "Eligible", "Start", "End", "ElapsedRaw", "TimelimitRaw", "NodeList", "AllocTRES",
               "ReqTRES", "AllocCPUS", "JobName")


def installed_version(env: Mapping[str, str] | None = None) -> str:
    """`scontrol --version` of the Slurm client on PATH (no controller needed): "25.11.7"."""
    from slurmtools.errors import ConfigError

    env = dict(os.environ if env is None else env)
    exe = shutil.which("scontrol", path=env.get("PATH"))
    if exe is None:
        raise ConfigError("--slurm-version", "", "no Slurm client here to ask which release will read this "
                                                 "(scontrol not found): pass --slurm-version, e.g. 25.11")
    p = subprocess.run([exe, "--version"], capture_output=True, text=True, env=env, timeout=30)
    m = re.search(r"(\d+\.\d+\.\d+)", p.stdout)
    if p.returncode != 0 or not m:
        said = (p.stderr.strip() or p.stdout.strip()).splitlines()
        raise ConfigError("--slurm-version", "", f"not given, and `scontrol --version` cannot tell "
                                                 f"({said[-1] if said else 'no output'}): pass --slurm-version, e.g. 25.11")
    return m.group(1)


#: what a user's environment may set that changes what Slurm's commands print, which this backend parses: the
#: commands' own option variables (SQUEUE_FORMAT, SQUEUE_PARTITION, SINFO_SORT, SACCT_FEDERATION, ...: formats,
#: filters and sort orders, documented in each command's ENVIRONMENT VARIABLES), and SLURM_BITSTR_LEN (array task
#: lists cut short); SLURM_TIME_FORMAT (`relative`, `%a %T`, ...) is set to `standard` instead: measured with sacct
#: on 22.05.8, `relative` prints `03:17:17` for a time of today, and every row of a report was bad
_OUTPUT_ENV_PREFIXES = ("SQUEUE_", "SINFO_", "SACCT_", "SACCTMGR_", "SCONTROL_", "SPRIO_", "SSHARE_", "SSTAT_",
                        "SREPORT_")
_OUTPUT_ENV = ("SLURM_BITSTR_LEN",)


def command_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` as Slurm's commands must see it for their output to read as this backend reads it (see above); the
    rest (PATH, SLURM_CONF, SLURM_CLUSTERS, sbatch's own SBATCH_* defaults) is passed on as the user set it."""
    out = {k: v for k, v in env.items() if not k.startswith(_OUTPUT_ENV_PREFIXES) and k not in _OUTPUT_ENV}
    out["SLURM_TIME_FORMAT"] = "standard"
    return out


class CommandBackend(Backend):
    name = "commands"

    def __init__(self, env: Mapping[str, str] | None = None, timeout: float = 60.0):
        self.env = dict(os.environ if env is None else env)
        self.timeout = timeout
        self._release = None

    def slurm_release(self):
        """The running Slurm's row in the release table (asked once): it pins the `--json` shape read."""
        if self._release is None:
            from slurmtools.slurm.releases import release_for

            self._release = release_for(".".join(str(x) for x in self.version()))
        return self._release

    # -- running commands -------------------------------------------------------------------------------------
    def run(self, argv: Sequence[str], input: str | None = None, timeout: float | None = None,
            cwd: str | None = None, env: Mapping[str, str] | None = None, whole_env: bool = False) -> str:
        """Run a Slurm command; return stdout. Raise SlurmError with Slurm's own stderr on failure. `env` is added
        to this backend's environment (`command_env`: what the command prints reads as parsed), or with `whole_env`
        is the whole environment, as given (sbatch, whose job inherits it)."""
        cmd = list(argv)
        if shutil.which(cmd[0], path=self.env.get("PATH")) is None:
            raise SlurmUnavailable(cmd[0], f"{cmd[0]}: command not found (is Slurm's client installed and on PATH?)")
        conf = self.env.get("SLURM_CONF")
        if conf and not os.path.exists(conf):
            raise SlurmUnavailable(cmd[0], f"SLURM_CONF={conf}: no such file (no Slurm configuration to reach the "
                                           "cluster with)")
        if whole_env and env is not None:  # sbatch: the job gets it as it is, the user's own variables included
            full_env = dict(env)
        else:
            full_env = command_env(self.env)
            if env:
                full_env.update(env)
        try:
            p = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout or self.timeout,
                               cwd=cwd, env=full_env)
        except subprocess.TimeoutExpired:
            raise SlurmUnavailable(cmd[0], f"{cmd[0]} did not answer within {timeout or self.timeout:g}s") from None
        if p.returncode != 0:
            if "establish_config_source" in (p.stderr or "") or "fetch_config" in (p.stderr or ""):
                raise SlurmUnavailable(cmd[0], f"{cmd[0]}: no Slurm configuration found (set SLURM_CONF, or install "
                                               "/etc/slurm/slurm.conf on this host)", p.returncode)
            msg = self._message(cmd[0], p.stderr or p.stdout)
            cls = SlurmUnavailable if any(s in (p.stderr or "") for s in _UNREACHABLE) else SlurmError
            raise cls(cmd[0], msg, p.returncode)
        return p.stdout

    @staticmethod
    def _message(cmd: str, text: str) -> str:
        """Slurm's own error lines, most specific first (`sbatch: error: invalid partition specified: foo`).
        A refused option is told by getopt (`squeue: option '--json' doesn't allow an argument`, `unrecognized
        option`), then Slurm adds `Try "squeue --help" for more information`: that hint is not the reason."""
        lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
        told = [ln for ln in lines if not _HELP_HINT.fullmatch(ln)]
        lines = told or lines
        errs = [ln for ln in lines if "error" in ln.lower()]
        if not errs:
            return lines[-1] if lines else f"{cmd} failed with no message"
        generic = ("Batch job submission failed", "Unable to allocate resources")
        specific = [e for e in errs if not any(g in e for g in generic)]
        return "; ".join(specific + [e for e in errs if e not in specific]) if specific else errs[0]

    # -- interface --------------------------------------------------------------------------------------------
    def version(self) -> tuple[int, int, int]:
        out = self.run(["sinfo", "--version"]).strip()  # "slurm 22.05.8"
        m = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
        if not m:
            raise SlurmError("sinfo", f"cannot read Slurm's version from {out!r}")
        return tuple(int(x) for x in m.groups())  # type: ignore[return-value]

    def submit(self, script: str, options: Sequence[str] = (), env: Mapping[str, str] | None = None,
               cwd: str | None = None) -> int:
        out = self.run(["sbatch", "--parsable", *options], input=script, cwd=cwd,
                       env=dict(self.env if env is None else env), whole_env=True).strip()
        try:
            return int(out.splitlines()[-1].split(";")[0])
        except (ValueError, IndexError):
            raise SlurmError("sbatch", f"sbatch printed no job id: {out!r}") from None

    def cancel(self, job_id: int, signal: str | None = None) -> None:
        self.run(["scancel", *(["--signal", signal] if signal else []), str(job_id)])

    def hold(self, job_id: int) -> None:
        self.run(["scontrol", "hold", str(job_id)])

    def release(self, job_id: int) -> None:
        self.run(["scontrol", "release", str(job_id)])

    def requeue(self, job_id: int) -> None:
        self.run(["scontrol", "requeue", str(job_id)])

    def update_job(self, job_id: int, **fields: str) -> None:
        self.run(["scontrol", "update", f"JobId={job_id}", *(f"{k}={v}" for k, v in fields.items())])

    def jobs(self, job_ids: Sequence[int] | None = None, user: str | None = None,
             states: Sequence[str] | None = None) -> list[JobInfo]:
        from slurmtools.slurm.readers import reader_for

        rel = self.slurm_release()
        reader = reader_for(rel)
        argv = reader.jobs_argv(rel.json_flag())
        if user:
            argv += ["--user", user]
        data = json.loads(self.run(argv))
        _check_errors("squeue", data)
        _check_shape(f"{argv[0]} {rel.json_flag()}", data, "jobs", rel)
        wanted = set(job_ids) if job_ids else None
        out = []
        for j in data.get("jobs", []):
            try:
                info = reader.job(j)
            except ValueError as exc:   # a count, time or TRES Slurm does not write (`readers.common`, `tres`)
                raise ParseError(f"{argv[0]} {rel.json_flag()}", None, f"job {str(j.get('job_id'))[:20]}: {exc}") \
                    from None
            if wanted is not None and info.job_id not in wanted:
                continue
            if states and info.state not in states:
                continue
            out.append(info)
        return out

    def scheduled_starts(self) -> list:
        from slurmtools.hostlist import expand

        out = self.run(["squeue", "-h", "-t", "PD", "-o", "%i|%q|%S|%Y"])
        return parse_scheduled_starts(out, expand)

    def nodes(self) -> list[NodeInfo]:
        from slurmtools.slurm.readers import reader_for

        rel = self.slurm_release()
        reader = reader_for(rel)
        argv = reader.nodes_argv(rel.json_flag())
        data = json.loads(self.run(argv))
        _check_errors(argv[0], data)
        _check_shape(" ".join(argv), data, "nodes", rel)
        seen: dict[str, NodeInfo] = {}
        for n in reader.nodes(data):
            try:
                info = reader.node(n)
            except ValueError as exc:   # a GRES count or GPU index Slurm does not write (`tres.parse_gres`)
                raise ParseError(" ".join(argv), None, f"node {str(n.get('name'))[:40]}: {exc}") from None
            seen.setdefault(info.name, info)
        return list(seen.values())

    def partitions(self) -> list[PartitionInfo]:
        return parse_partitions(self.run(["scontrol", "show", "partition", "-o"]))

    def qos(self) -> list[QosInfo]:
        return parse_qos(self.run(["sacctmgr", "-n", "-P", "show", "qos", "format=" + ",".join(QOS_FIELDS)]))

    def qos_grace_times(self) -> dict[str, int]:
        """Only the names and grace times: sacctmgr asks slurmdbd once more for each Preempt or TRES column, and
        each answer costs about 45 ms on the labs' loopback (the full `qos()` columns: 350 ms; these: 180 ms)."""
        return parse_qos_grace_times(self.run(["sacctmgr", "-n", "-P", "show", "qos", "format=Name,GraceTime"]))

    def associations(self, user: str) -> UserAssociations:
        if not is_user_name(user or ""):  # one name in a `where` clause: no list, no clause of its own
            raise SlurmError("sacctmgr", f"{user!r} is not a user name sacctmgr can look up ({USER_NAME_RULE})")
        assoc = self.run(["sacctmgr", "-n", "-P", "show", "assoc", "where", f"user={user}",
                          "format=" + ",".join(ASSOC_FIELDS)])
        default = self.run(["sacctmgr", "-n", "-P", "show", "user", "where", f"name={user}",
                            "format=User,DefaultAccount"])
        return parse_associations(user, assoc, default)

    def accounting_users(self) -> list[str]:
        out = self.run(["sacctmgr", "-n", "-P", "show", "user", "format=User"])
        return sorted({ln.strip() for ln in out.splitlines() if ln.strip()})

    def accounting_dump(self, start: datetime, end: datetime, fields: Sequence[str] = ACCT_FIELDS,
                        job_ids: Sequence[int] | None = None, all_users: bool = True, steps: bool = True,
                        duplicates: bool = True) -> str:
        """Raw `sacct --parsable2` text with its header line, for readers that parse it in bulk (reports)."""
        argv = ["sacct", "--parsable2", "--format=" + ",".join(fields),
                "-S", _local_time(start, self.env), "-E", _local_time(end, self.env)]
        if all_users:
            argv.append("--allusers")
        if not steps:
            argv.append("--allocations")
        if duplicates:
            argv.append("--duplicates")
        if job_ids:
            argv += ["--jobs", ",".join(str(j) for j in job_ids)]
        return self.run(argv, timeout=max(self.timeout, 300))

    def events_dump(self, start: datetime, end: datetime) -> str:
        """Node down/drain events and cluster events (`sacctmgr show event`; the cluster's `Cluster Registered TRES`
        tells reports when it first existed) as parsable text with a header, for capacity reports."""
        return self.run(["sacctmgr", "-P", "show", "event", "format=NodeName,TimeStart,TimeEnd,State,Reason",
                         f"Start={_local_time(start, self.env)}", f"End={_local_time(end, self.env)}"])

    def accounting(self, start: datetime, end: datetime, job_ids: Sequence[int] | None = None,
                   all_users: bool = True, steps: bool = True, duplicates: bool = False) -> list[AcctRecord]:
        text = self.accounting_dump(start, end, ACCT_FIELDS, job_ids, all_users, steps, duplicates)
        return parse_sacct(text)


def _local_time(when: datetime, env: Mapping[str, str]) -> str:
    """A time as sacct's and sacctmgr's -S/-E/Start=/End= read it: local wall-clock time, no offset, in the zone
    of the environment they run in. A datetime that carries its zone is turned into that zone's local time first
    (its wall-clock reading in another zone moved the window by the difference)."""
    if when.tzinfo is not None:
        when = when.astimezone(_command_zone(env))
    return when.strftime("%Y-%m-%dT%H:%M:%S")


def _command_zone(env: Mapping[str, str]):
    """The zone Slurm's commands read local times in when run with `env`: its TZ, else /etc/localtime. None when
    that is this process's own zone (`astimezone()` reads it as the C library does, POSIX TZ strings included)."""
    tz = env.get("TZ")
    if tz == os.environ.get("TZ"):
        return None
    if tz is None:
        if not os.path.exists("/etc/localtime"):
            return timezone.utc
        from zoneinfo import ZoneInfo

        with open("/etc/localtime", "rb") as fh:
            return ZoneInfo.from_file(fh, key="/etc/localtime")
    name = tz[1:] if tz.startswith(":") else tz
    if not name.strip():
        return timezone.utc   # TZ="" is UTC to the C library
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise SlurmtoolsError(f"TZ={tz} in the environment Slurm's commands run with is not a zone name this "
                              "process can read (an IANA name such as Europe/Berlin), so a time window cannot be "
                              "given to sacct in it; run them with this process's TZ") from None


def parse_associations(user: str, assoc_text: str, user_text: str) -> UserAssociations:
    """`sacctmgr -nP show assoc where user=U format=<ASSOC_FIELDS>` and `sacctmgr -nP show user where name=U
    format=User,DefaultAccount` -> the user's associations. sacctmgr lowers the name in a `where` clause unless
    slurmdbd keeps case (`user_case_norm`, PreserveCaseUser; Slurm stores names so too), so `Alice`'s rows print as
    `alice`: those are hers when none prints as `Alice` (where case is kept, `Alice` and `alice` are two users).
    Rows of other users (none expected) are dropped."""
    rows = []
    for ln in assoc_text.splitlines():
        if not ln.strip():
            continue
        parts = ln.split("|")
        if len(parts) != len(ASSOC_FIELDS):
            raise SlurmError("sacctmgr", f"sacctmgr show assoc: expected {len(ASSOC_FIELDS)} fields "
                                         f"({','.join(ASSOC_FIELDS)}), got {ln!r}")
        cluster, account, who, partition, qos, default_qos = parts
        rows.append(Association(cluster=cluster, account=account, user=who, partition=partition,
                                qos=tuple(q for q in qos.split(",") if q), default_qos=default_qos))
    name = _stored_name(user, {r.user for r in rows} | {ln.strip().partition("|")[0] for ln in user_text.splitlines()})
    default = None
    for ln in user_text.splitlines():
        who, _, acct = ln.strip().partition("|")
        if who == name and acct:
            default = acct
    return UserAssociations(user=user, default_account=default, rows=tuple(r for r in rows if r.user == name))


def _stored_name(user: str, printed: set[str]) -> str:
    """The name sacctmgr printed `user`'s records under: as given, else lower-cased (`parse_associations`)."""
    return user if user in printed or user.lower() not in printed else user.lower()


def parse_partitions(text: str) -> list[PartitionInfo]:
    """`scontrol show partition -o` -> partitions. scontrol prints PartitionName, Nodes, Default, State and MaxTime
    for every partition (`slurm_sprint_partition_info`, src/api/partition_info.c); a line without one of them, a
    MaxTime that is not UNLIMITED or [D-]HH:MM:SS, or Nodes that are not a hostlist is refused in one line naming
    the field, never read as unlimited, no nodes or UNKNOWN."""
    src = "scontrol show partition -o"
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        kv = parse_kv_line(line)
        if "PartitionName" not in kv:
            continue
        name = kv["PartitionName"]
        lack = [k for k in ("Nodes", "Default", "State", "MaxTime") if k not in kv]
        if lack:
            raise ParseError(src, lineno, f"partition {name[:40]}: no {', '.join(lack)} field (scontrol prints "
                                          f"them for every partition)")
        mt = kv["MaxTime"]
        try:
            max_time = None if mt == "UNLIMITED" else _slurm_time(mt)
        except ValueError:
            raise ParseError(src, lineno, f"partition {name[:40]}: MaxTime={mt[:40]!r} is not UNLIMITED or "
                                          f"[D-]HH:MM:SS") from None
        try:
            nodes = tuple(expand(kv["Nodes"]))
        except ValueError as exc:
            raise ParseError(src, lineno, f"partition {name[:40]}: Nodes: {exc}") from None
        out.append(PartitionInfo(name=name, nodes=nodes, default=kv["Default"] == "YES", state=kv["State"],
                                 max_time_s=max_time, qos=None if kv.get("QoS") in (None, "N/A") else kv["QoS"]))
    return out


#: a time as Slurm's `secs2time_str`/`mins2time_str` print it (src/common/parse_time.c): [D-]HH:MM:SS
_SLURM_TIME = re.compile(r"(?:([0-9]{1,9})-)?([0-9]{2}):([0-9]{2}):([0-9]{2})")


def _slurm_time(text: str) -> int:
    """Seconds in `[D-]HH:MM:SS` as Slurm prints a time limit; ValueError for anything else (`parse_duration` would
    read `30` as minutes and `5m` as a duration Slurm never prints)."""
    m = _SLURM_TIME.fullmatch(text)
    if not m:
        raise ValueError(f"not [D-]HH:MM:SS: {text[:40]!r}")
    d, h, mi, se = (int(x) if x else 0 for x in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + se


def _qos_rows(text: str, fields: Sequence[str]):
    """(line number, {field: value}) of `sacctmgr -n -P show qos format=<fields>`; a line of another number of
    fields is refused (`-P` separates every field with `|`, which no QoS name or value holds)."""
    src = f"sacctmgr show qos format={','.join(fields)}"
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != len(fields):
            raise ParseError(src, lineno, f"expected {len(fields)} fields separated by '|', got {len(parts)}: "
                                          f"{line[:60]!r}")
        yield lineno, dict(zip(fields, parts))


def _qos_value(row: dict, field: str, read, lineno: int, fields: Sequence[str]):
    """`read(row[field])`, or one line naming the command, the QoS and the field."""
    try:
        return read(row[field])
    except ValueError as exc:
        raise ParseError(f"sacctmgr show qos format={','.join(fields)}", lineno,
                         f"QoS {row['Name'][:40]}: {field}: {exc}") from None


def parse_qos(text: str) -> list[QosInfo]:
    """`sacctmgr -n -P show qos format=<QOS_FIELDS>` -> QoS. sacctmgr prints an unset Priority, GraceTime or MaxWall
    as empty (`print_fields_uint`/`_time_from_secs`/`_time`, src/common/print_fields.c): priority 0, no grace, no
    MaxWall, as Slurm applies them. A QoS with Flags=Relative (23.02 and later) has TRES limits in percent of the
    cluster (or of its partition): refused when it sets MaxTRES or MaxTRESPU, never read as counts."""
    out = []
    for lineno, row in _qos_rows(text, QOS_FIELDS):
        flags = set(row["Flags"].split(","))
        if "Relative" in flags and (row["MaxTRES"] or row["MaxTRESPU"]):
            raise ParseError(f"sacctmgr show qos format={','.join(QOS_FIELDS)}", lineno,
                             f"QoS {row['Name'][:40]}: Flags=Relative: its MaxTRES/MaxTRESPU are percentages of "
                             f"the cluster's resources, which this reader does not convert into counts")

        def val(field, read):
            return _qos_value(row, field, read, lineno, QOS_FIELDS)

        out.append(QosInfo(
            name=row["Name"], priority=val("Priority", lambda v: whole_number(v) if v else 0),
            preempt=tuple(p for p in row["Preempt"].split(",") if p), preempt_mode=row["PreemptMode"],
            grace_time_s=val("GraceTime", lambda v: _slurm_time(v) if v else 0),
            max_tres_per_job=row["MaxTRES"], max_tres_per_user=row["MaxTRESPU"],
            max_wall_s=val("MaxWall", lambda v: _slurm_time(v) if v else None)))
    return out


def parse_qos_grace_times(text: str) -> dict[str, int]:
    """`sacctmgr -n -P show qos format=Name,GraceTime` -> {QoS: grace seconds} (empty: unset, no grace)."""
    fields = ("Name", "GraceTime")
    return {row["Name"]: _qos_value(row, "GraceTime", lambda v: _slurm_time(v) if v else 0, lineno, fields)
            for lineno, row in _qos_rows(text, fields)}


def parse_kv_line(line: str) -> dict[str, str]:
    """`Key=Value Key2=Value two ...` (scontrol -o). A value runs until the next ` Key=`."""
    out: dict[str, str] = {}
    for m in re.finditer(r"(?:^|\s)([A-Za-z][\w/:.]*)=(.*?)(?=\s[A-Za-z][\w/:.]*=|$)", line.strip()):
        out[m.group(1)] = m.group(2)
    return out


def _whole(text: str | None) -> int | None:
    """`text` as a whole number (plain ASCII digits, `whole_number`), else None: `str.isdigit()` passes `²`, which
    int() then refuses with a ValueError, and int() reads `٣` as 3."""
    try:
        return whole_number(text) if text else None
    except ValueError:
        return None


def _field(row: dict, name: str, read, source: str, lineno: int):
    """`read(row[name])`, or one line naming the file, the line and the field: a value sacct does not write is not
    read as another, nor as unset."""
    try:
        return read(row.get(name))
    except ValueError as exc:
        raise ParseError(source, lineno, f"{name}: {exc}") from None


def _elapsed_of(row: dict, source: str, lineno: int) -> int:
    if row.get("ElapsedRaw"):
        return _field(row, "ElapsedRaw", whole_number, source, lineno)
    if row.get("Elapsed"):
        return _field(row, "Elapsed", parse_duration, source, lineno)
    return 0


def _limit_of(row: dict, source: str, lineno: int) -> int | None:
    """TimelimitRaw (minutes) or Timelimit (D-HH:MM:SS), in seconds; None when UNLIMITED, Partition_Limit or absent."""
    name = "TimelimitRaw" if row.get("TimelimitRaw") else "Timelimit"
    tl = row.get(name) or ""
    if not tl or tl in ("UNLIMITED", "Partition_Limit"):
        return None
    if name == "TimelimitRaw":
        return _field(row, name, whole_number, source, lineno) * 60
    return _field(row, name, parse_duration, source, lineno)


def _time(row: dict, name: str, source: str, lineno: int) -> datetime | None:
    """A time field of a sacct line (`readers.common.ts`), one line naming it when it is not a date-time or a
    datetime cannot hold it."""
    try:
        return _ts(row.get(name))
    except ValueError as exc:   # 2026-02-30: not a time, and not an unset one either
        raise ParseError(source, lineno, f"{name}: {exc}") from None
    except (OverflowError, OSError):   # a year 1 or 9999 moved across this machine's UTC offset
        raise ParseError(source, lineno, f"{name}: {row[name][:40]!r} is out of range in this time zone (sacct "
                                         f"writes local times)") from None


def parse_sacct(text: str, source: str = "sacct", required: Sequence = (("JobID", "JobIDRaw"),),
                check: Callable[[dict[str, str], int], None] | None = None, hint: str | None = None
                ) -> list[AcctRecord]:
    """`sacct --parsable2` text with a header line -> records (any column order; unknown columns kept in extra).
    The delimiter is read from the header (`-p`, `-P`, `--delimiter=X`); a header without the `required` fields
    (a tuple: any one of them) fails in one line naming them and `source`, and `hint` (how to dump them; by default
    the sacct command for every field read here). Without a JobID field, JobIDRaw is the
    job's id. `check(row, line number)`, when given, sees each line's values (by field name as Slurm spells it)
    before they are read, and may refuse the line (a reader that needs them exact: the sandbox's trace). A NodeList
    that is not a hostlist, a time that is not one (2026-02-30) or that a datetime cannot hold in this time zone, a
    count, id, TRES list or time limit that is not what sacct writes (`٣`, `-1`, `gres/gpu=x`) is refused in one
    line naming the file, the line and the field: never read as another value or as unset."""
    from slurmtools.slurm.parsable import Splitter, read_header  # here: its patterns cost the live queries 2 ms

    lines = text.splitlines()
    if not lines:
        return []
    h = read_header(lines[0], source)
    h.missing(required, source, hint or f"dump with `sacct --parsable2 -o {','.join(ACCT_FIELDS)}`", "sacct ")
    known = {f.lower(): f for f in (*ACCT_FIELDS, "Elapsed", "Timelimit", "Cluster")}
    header = [known.get(n.lower(), n) for n in h.names]  # the spelling the fields are read by below
    splitter = Splitter(h, source)
    out = []
    for lineno, ln in enumerate(lines[1:], start=2):
        if not ln.strip():
            continue
        row = dict(zip(header, splitter.split(ln, lineno)))
        if check is not None:
            check(row, lineno)
        jobid = row["JobID"] if "JobID" in row else row.get("JobIDRaw", "")
        base, _, step = jobid.partition(".")
        raw = row.get("JobIDRaw", base).split(".")[0]
        if "JobIDRaw" in row and _whole(raw) is None:
            raise ParseError(source, lineno, f"JobIDRaw: {row['JobIDRaw'][:40]!r} is not a job id (123, 123.batch)")
        alloc = _field(row, "AllocTRES", lambda v: parse_tres(v or ""), source, lineno)
        req = _field(row, "ReqTRES", lambda v: parse_tres(v or ""), source, lineno)
        tl_s = _limit_of(row, source, lineno)
        try:
            nodes = tuple(expand(row["NodeList"])) if row.get("NodeList", "").strip() not in NO_HOST else ()
        except ValueError as exc:
            raise ParseError(source, lineno, f"NodeList: {exc}") from None
        start = _time(row, "Start", source, lineno)
        if "NodeList" in row and not nodes:
            start = None   # ran nowhere: Slurm 16.05 wrote a job cancelled while pending with Start = End
        out.append(AcctRecord(
            job_id=base, job_id_raw=_whole(raw) or 0, step=step or None, name=row.get("JobName", ""),
            user=row.get("User", ""), account=row.get("Account", ""), partition=row.get("Partition", ""),
            qos=row.get("QOS", ""), state=(row.get("State", "").split() or [""])[0], exit_code=row.get("ExitCode", ""),
            submit=_time(row, "Submit", source, lineno), eligible=_time(row, "Eligible", source, lineno),
            start=start, end=_time(row, "End", source, lineno),
            elapsed_s=_elapsed_of(row, source, lineno), timelimit_s=tl_s,
            nodelist=nodes,
            alloc_gpus=alloc.gpus, alloc_gpus_by_type=alloc.gpus_by_type, req_gpus=req.gpus,
            alloc_cpus=_field(row, "AllocCPUS", _num, source, lineno) or 0, alloc_tres=row.get("AllocTRES", ""),
            req_tres=row.get("ReqTRES", ""), extra={k: v for k, v in row.items() if k not in ACCT_FIELDS}))
    return out


def one_cluster(records: list, cluster: str | None, source: str, who: str = "the site file"
                ) -> tuple[list, list[str]]:
    """(the records of one cluster, notes): a dump of several clusters (sacct's Cluster field: `sacct -L`,
    `-M a,b`, a federation) keeps `cluster`'s records, job ids being per cluster, and says how many it left out;
    one line when it holds none of `cluster`'s, or `cluster` is None (`parsable.pick_cluster`). A dump of one
    cluster, or without the field, is kept whole."""
    from slurmtools.slurm.parsable import pick_cluster

    names = {r.extra.get("Cluster", "") for r in records} - {""}
    if len(names) <= 1:
        return list(records), []
    keep = pick_cluster(source, names, cluster, who)
    mine = [r for r in records if r.extra.get("Cluster", "") == keep]
    others = ", ".join(sorted(names - {keep}))
    return mine, [f"{len(records) - len(mine)} job record(s) of other clusters ({others}) left out: {who} names "
                  f"cluster {keep} (the dump holds {len(names)} clusters)"]


def parse_scheduled_starts(text: str, expand) -> list:
    """`squeue -h -t PD -o %i|%q|%S|%Y` lines: job id, QoS, expected start (N/A when unknown), scheduled nodes
    ((null) when none yet). Array jobs pending as one record (`12_[0-9]`) keep their array job id. A line that is
    not those four fields, a job id, start or node list squeue does not print is refused in one line naming the
    field, never skipped or read as "no estimate"."""
    from slurmtools.slurm.model import ScheduledStart

    src = "squeue -h -t PD -o %i|%q|%S|%Y"
    found = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.strip().split("|")
        if len(parts) != 4:
            raise ParseError(src, lineno, f"expected 4 fields separated by '|', got {len(parts)}: {line[:60]!r}")
        jid, qos, start, nodes = parts
        m = re.match(r"([0-9]+)(?:$|[_+])", jid)
        if not m:
            raise ParseError(src, lineno, f"%i: {jid[:40]!r} is not a job id (123, 123_4, 123_[0-9], 123+0)")
        when = None
        if start not in ("N/A", "Unknown", "None", ""):
            try:
                when = datetime.strptime(start, "%Y-%m-%dT%H:%M:%S")
            except ValueError:
                raise ParseError(src, lineno, f"%S: {start[:40]!r} is not a time like 2026-11-23T22:15:30 (squeue "
                                              f"runs with SLURM_TIME_FORMAT=standard)") from None
        try:
            hosts = tuple(expand(nodes)) if nodes not in ("(null)", "", "N/A") else ()
        except ValueError as exc:
            raise ParseError(src, lineno, f"%Y: {exc}") from None
        found.append(ScheduledStart(int(m.group(1)), qos, when, hosts))
    return found
