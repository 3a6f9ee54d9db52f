"""The I/O behind `plan` and `submit`'s checks of who the job runs as: Slurm's associations for the user, and the
stat() of the folders the job writes. The decisions are `slurmtools.planner.identity`'s; this module only gathers
what they need and hands back the request with the account to charge filled in.
"""

from __future__ import annotations

import os
from dataclasses import replace

from slurmtools.errors import SlurmError
from slurmtools.planner.identity import (FolderFacts, Identity, JobUser, check_qos, check_user_name, folder_problem,
                                         resolve)
from slurmtools.planner.request import BEST_TIER


def process_user() -> str:
    """The user this process runs as (its uid, not $USER: sbatch submits as the uid)."""
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return ""


def identity(req, site, state, *, idle: bool = False):
    """(Identity, the request with its user and account resolved). Live: Slurm's associations decide; offline or
    --idle, or when accounting does not answer: the site file, with a note saying so."""
    given = req.user is not None
    user = req.user or process_user()
    check_user_name(user, given)
    slurm, known, why = None, (), "--idle" if idle else "no Slurm reachable"
    if state.backend is not None:
        try:
            slurm = state.backend.associations(user)
        except SlurmError as exc:
            why = f"Slurm's accounting did not answer: {exc}"
        else:
            if not slurm.rows:
                try:
                    known = tuple(state.backend.accounting_users())
                except SlurmError:
                    known = ()
    ident = resolve(site, user, user_given=given, account=req.account, tier=req.tier, slurm=slurm,
                    known_users=known, offline_why=why)
    return ident, replace(req, user=ident.user, account=ident.account)


def after_plan(plan, ident: Identity):
    """The plan with the identity notes added, once its tier (the planner's when none or "best" was asked) is one Slurm
    allows the user under the charged account."""
    check_qos(ident, plan.qos, chosen=plan.request.tier in (None, BEST_TIER))
    return replace(plan, notes=tuple(plan.notes) + ident.notes) if ident.notes else plan


def job_user(name: str) -> JobUser | None:
    """The job's user by number from passwd and group (None: no such user on this host)."""
    import pwd

    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return None
    try:
        gids = tuple(os.getgrouplist(name, pw.pw_gid))
    except OSError:
        gids = (pw.pw_gid,)
    return JobUser(name, pw.pw_uid, gids)


def folder_chain(path: str) -> list[FolderFacts]:
    """stat() of every component of `path` from the root down to the first that does not exist or is no folder,
    then the folder itself (as missing) when the walk stopped above it."""
    real = os.path.realpath(path)
    parts = [p for p in real.split(os.sep) if p]
    out = []
    for i in range(len(parts) + 1):
        cur = os.sep + os.sep.join(parts[:i])
        try:
            st = os.stat(cur)
        except (FileNotFoundError, NotADirectoryError):
            out.append(FolderFacts(cur, exists=False))
            break
        facts = FolderFacts(cur, exists=True, is_dir=os.path.isdir(cur), mode=st.st_mode, uid=st.st_uid,
                            gid=st.st_gid)
        if i == len(parts) and facts.is_dir:
            try:
                facts = replace(facts, read_only=bool(os.statvfs(cur).f_flag & os.ST_RDONLY))
            except OSError:
                pass
        out.append(facts)
        if not facts.is_dir:
            break
    if out[-1].path != real:
        out.append(FolderFacts(real, exists=False))
    return out


def folders(req, user: str, cwd: str | None = None) -> tuple[list[str], list[str]]:
    """(problems, notes) for the folders the job needs: --workdir (it runs there) and the output folder
    (--output-dir, relative to the job's folder; else the job's folder, the submit folder without --workdir).
    Each problem is one line naming the option and the path."""
    cwd = cwd or os.getcwd()
    jobdir = os.path.join(cwd, req.workdir) if req.workdir else cwd
    targets: list[tuple[str, str]] = []
    if req.workdir:
        targets.append((_named("--workdir", req.workdir, jobdir), jobdir))
    if req.output_dir:
        out = os.path.join(jobdir, req.output_dir)
        targets.append((_named("--output-dir", req.output_dir, out), out))
    elif not req.workdir:
        targets.append((f"--output-dir (not given: the output goes to the submit folder {cwd})", cwd))
    notes: list[str] = []
    who = job_user(user)
    if who is None:
        notes.append(f"user {user} has no passwd entry on this host: the job's folders were checked to exist, "
                     "not for permissions")
        who = JobUser(user, 0, ())  # root's view: only existence and type count
    problems = []
    for label, path in targets:
        if "%" in path:
            notes.append(f"{label}: holds a % pattern Slurm fills in at run time; not checked")
            continue
        why = folder_problem(folder_chain(path), who)
        if why:
            problems.append(f"{label}: {why}")
    return problems, notes


def _named(option: str, given: str, resolved: str) -> str:
    return f"{option} {given}" if os.path.isabs(given) else f"{option} {given} ({resolved})"
