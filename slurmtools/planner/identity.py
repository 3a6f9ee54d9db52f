"""Who the job runs as, decided before anything reaches sbatch: the account it charges, the QoS it may ask for, and
whether it can write the folders it names.

Pure: the CLI hands in what Slurm's accounting says (`UserAssociations`, or None when Slurm was not asked) and
what the file system says (`FolderFacts`, `JobUser`); everything here only decides. Slurm's associations win over
the site file when both are known, because they are what sbatch enforces; the site file is the only word when
planning offline. Every refusal is a `RequestError` naming the option at fault.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from typing import Sequence

from slurmtools.planner.request import BEST_TIER, RequestError
from slurmtools.site.model import Site
from slurmtools.slurm.model import USER_NAME_RULE, Association, UserAssociations, is_user_name

#: at most this many names are listed in a refusal (a real site has thousands of users)
_LIST_MAX = 12


@dataclass(frozen=True)
class Identity:
    """The checked identity a job is planned and submitted with."""

    user: str
    #: the account to charge; None only offline with a site that lists no users (the planner's own default then)
    account: str | None
    #: the QoS Slurm allows this user under `account`; None when Slurm was not asked
    allowed_qos: tuple[str, ...] | None
    #: "slurm" (associations read live) or "site" (the site file only)
    source: str
    notes: tuple[str, ...] = ()


def _names(names: Sequence[str]) -> str:
    names = list(names)
    if not names:
        return "none"
    more = len(names) - _LIST_MAX
    return ", ".join(names[:_LIST_MAX]) + (f" and {more} more" if more > 0 else "")


def _site_accounts_of(site: Site, user: str) -> list[str]:
    return [a.name for a in site.accounts.values() if user in a.users]


def _site_users(site: Site) -> list[str]:
    return sorted({u for a in site.accounts.values() for u in a.users})


def _user_opt(user: str, given: bool) -> str:
    return f"--user {user}" if given else "--user"


def _who(user: str, given: bool) -> str:
    return f"user {user}" if given else f"user {user} (you; no --user given)"


def check_user_name(user: str, given: bool) -> None:
    """Refuse what cannot be a user name before it is looked up anywhere."""
    if not user:
        raise RequestError("--user", "cannot tell who you are (this process's uid has no passwd entry): pass --user")
    if not is_user_name(user):
        raise RequestError(_user_opt(user, given), f"is not a user name ({USER_NAME_RULE})")


def resolve(site: Site, user: str, *, user_given: bool, account: str | None, tier: str | None,
            slurm: UserAssociations | None, known_users: Sequence[str] = (), offline_why: str = "") -> Identity:
    """Check `user` may charge `account` (None: their default) with `tier` (None or "best": the planner picks,
    checked afterwards with `check_qos`) and pick the account to charge.

    `slurm` is what accounting said (None: not asked, `offline_why` says why); `known_users` are accounting's users,
    named when `user` has no association."""
    check_user_name(user, user_given)
    if slurm is None:
        return _from_site(site, user, user_given, account, offline_why)
    return _from_slurm(site, user, user_given, account, tier, slurm, known_users)


def _from_site(site: Site, user: str, given: bool, account: str | None, why: str) -> Identity:
    users = _site_users(site)
    mine = _site_accounts_of(site, user)
    unchecked = f"Slurm's associations were not checked ({why})" if why else "Slurm's associations were not checked"
    if not users:  # the site does not say who may use which account: nothing to check against
        return Identity(user, account, None, "site", (f"identity not checked: the site file lists no users; "
                                                      f"{unchecked}",))
    if not mine:
        raise RequestError(_user_opt(user, given), f"{_who(user, given)} is in no account of the site file "
                                                   f"{site.source} (its users: {_names(users)}); {unchecked}")
    if account is not None and account in site.accounts and account not in mine:
        raise RequestError(f"--account {account}", f"user {user} is not in account {account} (their accounts: "
                                                   f"{_names(mine)}; from the site file {site.source})")
    charged = account if account is not None else mine[0]
    return Identity(user, charged, None, "site", (f"identity checked against the site file only; {unchecked}",))


def _rows_here(site: Site, slurm: UserAssociations) -> list[Association]:
    """The rows of the site's cluster (all rows when none names it: a site file whose cluster_name is stale)."""
    here = [r for r in slurm.rows if r.cluster == site.cluster_name]
    return here or list(slurm.rows)


def _qos_of(rows: Sequence[Association], account: str) -> tuple[str, ...]:
    """QoS allowed under `account`, over all its rows (per-partition rows add theirs), in Slurm's order."""
    out: list[str] = []
    for r in rows:
        if r.account == account:
            out.extend(q for q in r.qos if q not in out)
    return tuple(out)


def _from_slurm(site: Site, user: str, given: bool, account: str | None, tier: str | None, slurm: UserAssociations,
                known_users: Sequence[str]) -> Identity:
    rows = _rows_here(site, slurm)
    if not rows:
        known = [u for u in known_users if u != user]
        raise RequestError(_user_opt(user, given), f"no Slurm association for {_who(user, given)} (accounting "
                                                   f"knows: {_names(known)})")
    theirs = sorted({r.account for r in rows})
    site_mine = _site_accounts_of(site, user)
    notes: list[str] = []
    if account is not None:
        if account not in theirs:
            extra = (f"; the site file lists them there, but Slurm's associations are what sbatch enforces"
                     if account in site_mine else "")
            raise RequestError(f"--account {account}", f"user {user} is not in account {account} (their accounts: "
                                                       f"{_names(theirs)}){extra}")
        charged = account
    else:
        default = slurm.default_account
        in_site = [a for a in theirs if a in site.accounts]
        if default in theirs and default in site.accounts:
            charged = default
            if site_mine and default != site_mine[0]:
                notes.append(f"account {default}: {user}'s default account in Slurm (the site file alone would "
                             f"charge {site_mine[0]})")
        elif in_site:
            charged = in_site[0]
            notes.append(f"account {charged}: {user}'s default account in Slurm ({default or 'none'}) is not in the "
                         f"site file; {charged} is their first Slurm account that is")
        else:
            raise RequestError("--account", f"none of user {user}'s Slurm accounts ({_names(theirs)}) is in the "
                                            f"site file {site.source} (its accounts: {_names(list(site.accounts))}): "
                                            "the planner cannot tell their tiers")
    only_slurm = [a for a in theirs if a not in site_mine]
    only_site = [a for a in site_mine if a not in theirs]
    if only_slurm:
        notes.append(f"Slurm has user {user} in account(s) {', '.join(only_slurm)}, which the site file does not; "
                     "Slurm decides what sbatch accepts")
    if only_site:
        notes.append(f"the site file lists user {user} in account(s) {', '.join(only_site)}, which Slurm does not: "
                     "sbatch would refuse a job charged there")
    allowed = _qos_of(rows, charged)
    if charged in site.accounts:
        site_tiers = [t for t in site.accounts[charged].tiers if t in site.tiers]
        if sorted(site_tiers) != sorted(allowed):
            notes.append(f"account {charged}: the site file's tiers ({', '.join(site_tiers) or 'none'}) differ from "
                         f"the QoS Slurm allows {user} ({', '.join(allowed) or 'none'}); Slurm decides")
    ident = Identity(user, charged, allowed, "slurm", tuple(notes))
    if tier not in (None, BEST_TIER):  # a tier the planner picks is checked once it has picked (check_qos)
        check_qos(ident, tier, chosen=False)
    return ident


def check_qos(ident: Identity, qos: str, *, chosen: bool = True) -> None:
    """Refuse a QoS that Slurm does not allow the user under the charged account (no-op when Slurm was not asked).
    `chosen`: the planner picked it (tier "best") rather than the user."""
    if ident.allowed_qos is None or qos in ident.allowed_qos:
        return
    how = f"tier {qos} (the planner's choice from the site file)" if chosen else f"QoS {qos}"
    raise RequestError(f"--tier {qos}" if not chosen else "--tier", f"{how} is not allowed for user {ident.user} in "
                                                                   f"account {ident.account} (Slurm allows: "
                                                                   f"{_names(ident.allowed_qos)})")


# ---------------------------------------------------------------------------------------- folder permissions
@dataclass(frozen=True)
class JobUser:
    """The user a job runs as, by number: what the kernel checks a folder's permission bits against."""

    name: str
    uid: int
    gids: tuple[int, ...]


@dataclass(frozen=True)
class FolderFacts:
    """What stat() said of one component of a path (the root first, the folder itself last)."""

    path: str
    exists: bool
    is_dir: bool = False
    mode: int = 0  # st_mode
    uid: int = 0
    gid: int = 0
    read_only: bool = False  # on a file system mounted read-only


def may(mode: int, owner: int, group: int, who: JobUser, want: int) -> bool:
    """Whether `who` has every permission in `want` (a mask of 4 read, 2 write, 1 search) on an entry with these
    mode bits and owner, by the classic Unix rule: the owner's bits if they own it, else the group's if one of
    their groups owns it, else the others' (only the first class that matches counts). Root may do anything on a
    folder. ACLs are not read."""
    if who.uid == 0:
        return True
    if who.uid == owner:
        bits = (mode >> 6) & 7
    elif group in who.gids:
        bits = (mode >> 3) & 7
    else:
        bits = mode & 7
    return bits & want == want


def _perm(f: FolderFacts) -> str:
    return f"mode {stat.S_IMODE(f.mode):04o}, owner uid {f.uid} gid {f.gid}"


def folder_problem(chain: Sequence[FolderFacts], who: JobUser) -> str | None:
    """Why `who` cannot create files in the last folder of `chain` (its path from the root down), or None."""
    if not chain:
        return "empty path"
    target = chain[-1]
    for f in chain:
        if not f.exists:
            return "no such folder" if f is target else f"no such folder ({f.path} does not exist)"
        if not f.is_dir:
            return "is not a folder" if f is target else f"{f.path} is not a folder"
        if f is not target and not may(f.mode, f.uid, f.gid, who, 1):
            return f"user {who.name} cannot enter {f.path} ({_perm(f)})"
    if target.read_only:
        return "is on a read-only file system"
    if not may(target.mode, target.uid, target.gid, who, 3):
        return f"not writable by user {who.name} ({_perm(target)})"
    return None
