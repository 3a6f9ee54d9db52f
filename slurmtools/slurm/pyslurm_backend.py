"""The backend over pyslurm's API (PyPI's pyslurm 25.11, built against the running Slurm 25.11).

Jobs, nodes and partitions come from pyslurm's controller API, accounting from `pyslurm.db`, and submit, cancel,
hold, release and requeue go through `pyslurm.Job` / `pyslurm.JobSubmitDescription`. What pyslurm does not offer
(sacctmgr QoS listings, the raw sacct dumps the reports read in bulk, `scontrol update`) is the command backend's,
inherited. Chosen only through `backends.get_backend`, which has checked in a child process that importing pyslurm
here is safe (libslurm ends the process when no Slurm configuration is reachable).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Mapping, Sequence

from slurmtools.errors import SlurmError
from slurmtools.hostlist import expand
from slurmtools.slurm.commands import CommandBackend
from slurmtools.slurm.model import AcctRecord, Association, JobInfo, NodeInfo, PartitionInfo, UserAssociations
from slurmtools.slurm.tres import gpus_in, gpus_used_of, parse_tres


def _ts(epoch) -> datetime | None:
    return datetime.fromtimestamp(epoch, tz=timezone.utc) if epoch else None


def tres_text(tres) -> str:
    """A pyslurm TrackableResources as Slurm's own TRES string (`cpu=2,mem=2048M,node=2,gres/gpu=16,...`)."""
    if tres is None:
        return ""
    d = tres.to_dict()
    parts = []
    for key in ("cpu", "mem", "node", "billing", "energy"):
        r = d.get(key)
        if r is not None and r.count is not None:
            parts.append(f"{key}={r.count}M" if key == "mem" else f"{key}={r.count}")
    for group in ("gres", "license", "fs", "interconnect", "other"):
        for r in (d.get(group) or {}).values():
            if r is not None and r.count is not None:
                parts.append(f"{r.type_and_name}={r.count}")
    return ",".join(parts)


def _rpc(what: str, fn, *args):
    """Run a pyslurm call; its errors become SlurmError with Slurm's own words."""
    import pyslurm

    try:
        return fn(*args)
    except (pyslurm.RPCError, pyslurm.PyslurmError) as exc:
        raise SlurmError(what, f"{what}: error: {exc}") from None


class PyslurmBackend(CommandBackend):
    name = "pyslurm"

    def __init__(self, env: Mapping[str, str] | None = None, timeout: float = 60.0):
        super().__init__(env=env, timeout=timeout)
        #: which path the last submit took: "pyslurm", or "sbatch (why)"
        self.last_submit = ""
        # libslurm reads SLURM_CONF from this process's environment
        if env is not None and env.get("SLURM_CONF"):
            os.environ["SLURM_CONF"] = env["SLURM_CONF"]

    # -- reading ------------------------------------------------------------------------------------------------
    def jobs(self, job_ids: Sequence[int] | None = None, user: str | None = None,
             states: Sequence[str] | None = None) -> list[JobInfo]:
        import pyslurm

        wanted = set(job_ids) if job_ids else None
        out = []
        for jid, j in _rpc("squeue", pyslurm.Jobs.load).items():
            if wanted is not None and jid not in wanted:
                continue
            info = job_info(j)
            if user and info.user != user:
                continue
            if states and info.state not in states:
                continue
            out.append(info)
        return sorted(out, key=lambda i: i.job_id)

    def nodes(self) -> list[NodeInfo]:
        import pyslurm

        return [node_info(n) for n in _rpc("scontrol show nodes", pyslurm.Nodes.load).values()]

    def partitions(self) -> list[PartitionInfo]:
        import pyslurm

        out = []
        for p in _rpc("scontrol show partition", pyslurm.Partitions.load).values():
            mt = p.max_time
            out.append(PartitionInfo(name=p.name, nodes=tuple(expand(p.nodes or "")), default=bool(p.is_default),
                                     state=str(p.state), max_time_s=int(mt) * 60 if isinstance(mt, int) else None,
                                     qos=getattr(p, "qos", None) or None))
        return out

    def accounting(self, start: datetime, end: datetime, job_ids: Sequence[int] | None = None,
                   all_users: bool = True, steps: bool = True, duplicates: bool = False) -> list[AcctRecord]:
        if duplicates:
            # pyslurm.db's filter has no "every run of a requeued job" flag (sacct --duplicates): sacct's then
            return super().accounting(start, end, job_ids, all_users, steps, duplicates)
        import pyslurm.db as db

        flt = db.JobFilter(start_time=start, end_time=end, ids=list(job_ids) if job_ids else None)
        if not all_users:
            import pwd

            flt.users = [pwd.getpwuid(os.getuid()).pw_name]
        out: list[AcctRecord] = []
        for j in _rpc("sacct", db.Jobs.load, flt).values():
            out.append(acct_record(j, None))
            if steps:
                for s in (j.steps or {}).values():
                    out.append(acct_record(j, s))
        return out

    def associations(self, user: str) -> UserAssociations:
        """Through `pyslurm.db.Associations` (filtered by user); the default account is the row Slurm marks as
        default. pyslurm 25.11.2 has no default QoS (def_qos_id) on an association, so `default_qos` stays "";
        the names of every user (`accounting_users`) are sacctmgr's, inherited."""
        import pyslurm.db as db

        found = _rpc("sacctmgr show assoc", db.Associations.load, db.AssociationFilter(users=[user]))
        rows, default = [], None
        for a in sorted(found.values(), key=lambda a: (a.cluster or "", a.account or "", a.partition or "")):
            if a.user != user:
                continue
            rows.append(Association(cluster=a.cluster or "", account=a.account or "", user=a.user,
                                     partition=a.partition or "", qos=tuple(a.qos or ())))
            if a.is_default:
                default = a.account
        return UserAssociations(user=user, default_account=default, rows=tuple(rows))

    # -- acting -------------------------------------------------------------------------------------------------
    def submit(self, script: str, options: Sequence[str] = (), env: Mapping[str, str] | None = None,
               cwd: str | None = None) -> int:
        """sbatch's semantics through pyslurm: the script's `#SBATCH` lines, then `options` (the command line wins).
        A job with an option pyslurm would not pass on as sbatch does (`pyslurm_submit.CARRIED`) goes to sbatch
        instead, and `last_submit` says which path took it and why: nothing a user asked for is dropped."""
        from slurmtools.slurm.pyslurm_submit import NotCarried, submit_kwargs

        try:
            kwargs = submit_kwargs(script, options)
        except NotCarried as why:
            self.last_submit = f"sbatch (pyslurm does not carry {why})"
            return super().submit(script, options, env=env, cwd=cwd)
        import pyslurm

        merged = dict(self.env if env is None else env)
        kwargs.setdefault("working_directory", cwd or os.getcwd())
        try:
            desc = pyslurm.JobSubmitDescription(script=script, environment=merged, **kwargs)
        except (ValueError, TypeError, AttributeError) as exc:
            raise SlurmError("sbatch", f"sbatch: error: {exc}") from None
        self.last_submit = "pyslurm"
        try:
            return int(desc.submit())
        except (ValueError, TypeError) as exc:  # pyslurm's own checks of the values, before any RPC
            raise SlurmError("sbatch", f"sbatch: error: {exc}") from None
        except (pyslurm.RPCError, pyslurm.PyslurmError) as exc:
            if "Unspecified error" not in str(exc):
                raise SlurmError("sbatch", f"sbatch: error: {exc}") from None
        # A refusal by the site's job_submit plugin reaches pyslurm as "Unspecified error": the plugin's message to
        # the user is in the reply, which pyslurm drops. A refusal is repeatable, so sbatch asks again and shows it.
        self.last_submit = "sbatch (pyslurm got a refusal without its message)"
        return super().submit(script, options, env=env, cwd=cwd)

    def cancel(self, job_id: int, signal: str | None = None) -> None:
        import pyslurm

        job = pyslurm.Job(job_id)
        if signal:
            _rpc("scancel", job.send_signal, signal)
        else:
            _rpc("scancel", job.cancel)

    def hold(self, job_id: int) -> None:
        import pyslurm

        _rpc("scontrol hold", pyslurm.Job(job_id).hold)

    def release(self, job_id: int) -> None:
        import pyslurm

        _rpc("scontrol release", pyslurm.Job(job_id).release)

    def requeue(self, job_id: int) -> None:
        import pyslurm

        _rpc("scontrol requeue", pyslurm.Job(job_id).requeue)


def job_info(j) -> JobInfo:
    tres = parse_tres(tres_text(j.allocated_tres)) if j.allocated_tres is not None else None
    if tres is None or not tres.gpus:
        per_node = j.gres_per_node or {}
        n = j.num_nodes or 1
        req = ",".join(f"{k}={v * n}" for k, v in per_node.items())
        tres = parse_tres(req) if req else tres or parse_tres("")
    arr = j.array_id
    return JobInfo(
        job_id=int(j.id), name=j.name or "", user=j.user_name or "", account=j.account or "",
        partition=j.partition or "", qos=j.qos or "", state=str(j.state), reason=str(j.state_reason or "None"),
        nodes=tuple(expand(j.allocated_nodes or "")), num_nodes=int(j.num_nodes or 0), gpus=tres.gpus,
        gpus_by_type=tres.gpus_by_type, time_limit_s=int(j.time_limit) * 60 if isinstance(j.time_limit, int) else None,
        restarts=int(j.requeue_count or 0), submit_time=_ts(j.submit_time), start_time=_ts(j.start_time),
        end_time=_ts(j.end_time), array_job_id=int(arr) if arr else None,
        array_task_id=int(j.array_task_id) if arr and j.array_task_id is not None else None,
        req_switch=int(j.required_switches) if j.required_switches else None, comment=j.comment or "",
        std_out=j.standard_output or "", raw={})


def node_info(n) -> NodeInfo:
    states = [s for s in str(n.state or "UNKNOWN").replace("+", " ").split() if s]
    base = states[0]
    flags = tuple(states[1:])
    used = n.allocated_gres or {}
    return NodeInfo(
        name=n.name, state=base.lower(), flags=flags, cpus=int(n.total_cpus or 0),
        cpus_alloc=int(n.allocated_cpus or 0), memory_mb=int(n.real_memory or 0),
        memory_alloc_mb=int(n.allocated_memory or 0),
        gpus_by_type=(gpus := gpus_in(",".join(f"{k}:{v}" for k, v in (n.configured_gres or {}).items()))),
        gpus_used_by_type=gpus_used_of(gpus, gpus_in(",".join(f"{k}:{v}" for k, v in used.items() if ":" in k)
                                                     or ",".join(f"{k}:{v}" for k, v in used.items()))),
        gpus_used_idx=(), features=tuple(n.active_features or ()), partitions=tuple(n.partitions or ()),
        reason=n.reason or "")


def acct_record(j, step) -> AcctRecord:
    src = step if step is not None else j
    alloc = tres_text(getattr(src, "allocated_tres", None) if step is None else getattr(step, "tres", None))
    req = tres_text(getattr(j, "requested_tres", None))
    at = parse_tres(alloc)
    rq = parse_tres(req)
    state = str(src.state or "").split()[0] if src.state else ""
    jid = f"{j.array_id}_{j.array_task_id}" if j.array_id and j.array_task_id is not None else str(j.id)
    step_name = None
    if step is not None:
        sid = str(getattr(step, "id", "") or "")
        step_name = sid.split(".", 1)[1] if "." in sid else sid
    tl = j.time_limit
    return AcctRecord(
        job_id=jid, job_id_raw=int(j.id), step=step_name, name=(getattr(src, "name", None) or j.name or ""),
        user=j.user_name or "", account=j.account or "", partition=j.partition or "", qos=j.qos or "", state=state,
        exit_code=str(getattr(src, "exit_code", "") or ""), submit=_ts(j.submit_time),
        eligible=_ts(getattr(j, "eligible_time", None)), start=_ts(src.start_time), end=_ts(src.end_time),
        elapsed_s=int(getattr(src, "elapsed_time", 0) or 0), timelimit_s=int(tl) * 60 if isinstance(tl, int) else None,
        nodelist=tuple(expand(getattr(src, "nodelist", None) or "")) if getattr(src, "nodelist", None) not in
        (None, "", "None assigned") else (), alloc_gpus=at.gpus, alloc_gpus_by_type=at.gpus_by_type, req_gpus=rq.gpus,
        alloc_cpus=at.cpu, alloc_tres=alloc, req_tres=req)
