"""Who a job runs as: the account it charges and the QoS it may use (Slurm's associations, else the site file), and
whether its user can write a folder (mode bits, owner, groups). The associations are the lab's real sacctmgr
output (tests/data/slurm), parsed by the command backend's parser."""

from __future__ import annotations

import stat
from dataclasses import replace
from pathlib import Path

import pytest

from slurmtools.planner.identity import FolderFacts, JobUser, check_qos, folder_problem, may, resolve
from slurmtools.planner.request import RequestError
from slurmtools.site.model import Account
from slurmtools.slurm.commands import parse_associations
from slurmtools.slurm.model import Association, UserAssociations

DATA = Path(__file__).resolve().parents[2] / "data" / "slurm"
KNOWN = ("alice", "bob", "carol", "labuser", "root")


def lab(user: str, release: str = "22.05.8") -> UserAssociations:
    return parse_associations(user, (DATA / f"sacctmgr-assoc-{user}-{release}.txt").read_text(),
                              (DATA / f"sacctmgr-user-{user}-{release}.txt").read_text())


def live(site, user, account=None, tier=None, slurm=None, given=True):
    return resolve(site, user, user_given=given, account=account, tier=tier,
                   slurm=slurm if slurm is not None else lab(user), known_users=KNOWN)


# ------------------------------------------------------------------------------------------- live (Slurm decides)
def test_unknown_user_is_refused_naming_the_option_and_who_accounting_knows(site):
    with pytest.raises(RequestError) as e:
        live(site, "mallory", slurm=UserAssociations("mallory", None, ()))
    assert e.value.key == "--user mallory"
    assert "no Slurm association for user mallory (accounting knows: alice, bob, carol, labuser, root)" in str(e.value)
    assert len(str(e.value).splitlines()) == 1


def test_default_user_refusal_says_it_was_you(site):
    with pytest.raises(RequestError) as e:
        live(site, "nobody", slurm=UserAssociations("nobody", None, ()), given=False)
    assert e.value.key == "--user" and "user nobody (you; no --user given)" in str(e.value)


def test_foreign_account_is_refused_with_the_users_accounts(site):
    with pytest.raises(RequestError) as e:
        live(site, "labuser", account="students")
    assert e.value.key == "--account students"
    assert "user labuser is not in account students (their accounts: nlp, vision)" in str(e.value)


@pytest.mark.parametrize("release", ["22.05.8", "25.11.7"])
def test_no_account_charges_slurms_default_account(site, release):
    ident = live(site, "labuser", slurm=lab("labuser", release))
    assert ident.account == "vision" and ident.source == "slurm"
    assert ident.allowed_qos == ("production", "scavenger", "standard")
    assert ident.notes == ()  # Slurm and the site file agree on labuser


def test_default_account_from_slurm_wins_over_the_site_files_first(site):
    slurm = replace(lab("labuser"), default_account="nlp")
    ident = live(site, "labuser", slurm=slurm)
    assert ident.account == "nlp"
    assert any("default account in Slurm (the site file alone would charge vision)" in n for n in ident.notes)


def test_user_only_slurm_knows_is_planned_with_a_note(site):
    """root is in Slurm's vision and root accounts (the lab adds it), in no account of the site file."""
    ident = live(site, "root")
    assert ident.account == "vision"
    assert any("Slurm has user root in account(s) root, vision, which the site file does not" in n
               for n in ident.notes)


def test_account_the_site_lists_but_slurm_does_not_is_refused_and_noted(site):
    """The site file says carol is in students; a Slurm without that association decides."""
    slurm = UserAssociations("carol", "nlp", (Association("lab", "nlp", "carol", "", ("standard",), "standard"),))
    with pytest.raises(RequestError) as e:
        live(site, "carol", account="students", slurm=slurm)
    assert "the site file lists them there, but Slurm's associations are what sbatch enforces" in str(e.value)
    ident = live(site, "carol", slurm=slurm)
    assert ident.account == "nlp"
    assert any("the site file lists user carol in account(s) students, which Slurm does not" in n
               for n in ident.notes)
    assert any("differ from the QoS Slurm allows carol (standard)" in n for n in ident.notes)


def test_default_account_outside_the_site_falls_back_to_one_inside(site):
    slurm = replace(lab("root"), default_account="root")
    ident = live(site, "root", slurm=slurm)
    assert ident.account == "vision"
    assert any("default account in Slurm (root) is not in the site file" in n for n in ident.notes)


def test_no_slurm_account_in_the_site_is_refused(site):
    slurm = UserAssociations("dave", "physics", (Association("lab", "physics", "dave", "", ("normal",)),))
    with pytest.raises(RequestError) as e:
        live(site, "dave", slurm=slurm)
    assert e.value.key == "--account" and "none of user dave's Slurm accounts (physics)" in str(e.value)


def test_tier_slurm_does_not_allow_is_refused_before_planning(site):
    slurm = UserAssociations("carol", "students",
                             (Association("lab", "students", "carol", "", ("scavenger", "standard"), "standard"),))
    with pytest.raises(RequestError) as e:
        live(site, "carol", tier="production", slurm=slurm)
    assert e.value.key == "--tier production"
    assert "QoS production is not allowed for user carol in account students (Slurm allows: scavenger, standard)" \
        in str(e.value)
    assert live(site, "carol", tier="standard", slurm=slurm).account == "students"


def test_tier_the_planner_picks_is_checked_afterwards(site):
    slurm = UserAssociations("labuser", "vision", (Association("lab", "vision", "labuser", "", ("standard",)),))
    ident = live(site, "labuser", tier="best", slurm=slurm)  # not refused yet: the planner has not picked
    check_qos(ident, "standard")
    with pytest.raises(RequestError) as e:
        check_qos(ident, "production")
    assert e.value.key == "--tier" and "the planner's choice" in str(e.value)


def test_rows_of_other_clusters_do_not_count(site):
    rows = (Association("other", "students", "labuser", "", ("standard",)),
            Association("lab", "vision", "labuser", "", ("standard",)))
    with pytest.raises(RequestError, match="their accounts: vision"):
        live(site, "labuser", account="students", slurm=UserAssociations("labuser", "vision", rows))


def test_partition_rows_add_their_qos(site):
    rows = (Association("lab", "vision", "labuser", "", ("standard",)),
            Association("lab", "vision", "labuser", "gpu", ("production",)))
    ident = live(site, "labuser", slurm=UserAssociations("labuser", "vision", rows))
    assert ident.allowed_qos == ("standard", "production")


def test_what_cannot_be_a_user_name_is_refused(site):
    for bad in ("a,b", "u=1", "-rf", "x'y", 'x"y', " lead", "tab\tin", "x" * 256):
        with pytest.raises(RequestError, match="is not a user name"):
            live(site, bad, slurm=UserAssociations(bad, None, ()))
    with pytest.raises(RequestError, match="cannot tell who you are"):
        live(site, "", slurm=UserAssociations("", None, ()), given=False)


def test_passwd_names_from_directories_are_user_names(site):
    """winbind's DOMAIN\\user, a name with a blank, sssd's user@realm, a machine account: sacctmgr looks each up as
    one name (tests/integration/test_identity_lab.py), so each gets the association check, not a refusal."""
    for name in ("DOM\\alice", "john smith", "alice@example.org", "HOST$", "jos\u00e9"):
        rows = (Association("lab", "vision", name, "", ("standard",)),)
        assert live(site, name, slurm=UserAssociations(name, "vision", rows)).account == "vision"


# ------------------------------------------------------------------------------------------- offline (site file)
def offline(site, user, account=None):
    return resolve(site, user, user_given=True, account=account, tier=None, slurm=None, offline_why="--idle")


def test_offline_unknown_user_is_refused_by_the_site_file(site):
    with pytest.raises(RequestError) as e:
        offline(site, "mallory")
    assert e.value.key == "--user mallory"
    assert "is in no account of the site file" in str(e.value) and "alice, bob, carol, labuser" in str(e.value)
    assert "not checked (--idle)" in str(e.value)


def test_offline_foreign_account_is_refused_by_the_site_file(site):
    with pytest.raises(RequestError, match=r"user labuser is not in account students \(their accounts: vision, nlp"):
        offline(site, "labuser", account="students")


def test_offline_charges_the_site_files_first_account_and_says_how_it_checked(site):
    ident = offline(site, "labuser")
    assert ident.account == "vision" and ident.allowed_qos is None and ident.source == "site"
    assert "site file only" in ident.notes[0]
    check_qos(ident, "anything")  # nothing from Slurm to check against


def test_offline_site_without_users_checks_nothing(site):
    bare = replace(site, accounts={n: replace(a, users=()) for n, a in site.accounts.items()})
    assert isinstance(next(iter(bare.accounts.values())), Account)
    ident = offline(bare, "mallory")
    assert ident.account is None and "lists no users" in ident.notes[0]


# ------------------------------------------------------------------------------------------- folder permissions
ALICE = JobUser("alice", 1001, (1001, 2000))
ROOT = JobUser("root", 0, (0,))


@pytest.mark.parametrize("mode,owner,group,want,who,ok", [
    (0o755, 1001, 1001, 3, ALICE, True),     # owner with wx
    (0o555, 1001, 1001, 3, ALICE, False),    # owner without w
    (0o075, 1001, 2000, 3, ALICE, False),    # the owner's bits decide for the owner, even when group's allow
    (0o775, 0, 2000, 3, ALICE, True),        # one of alice's groups may write
    (0o755, 0, 2000, 3, ALICE, False),       # her group may only read
    (0o757, 0, 0, 3, ALICE, True),           # others may write
    (0o1777, 0, 0, 3, ALICE, True),          # /tmp: sticky bit does not stop creating files
    (0o766, 0, 0, 3, ALICE, False),          # others may write but not search: no file can be created
    (0o711, 0, 0, 1, ALICE, True),           # search only, enough to pass through
    (0o700, 0, 0, 1, ALICE, False),
    (0o000, 1001, 1001, 3, ROOT, True),      # root passes every permission check on a folder
])
def test_may(mode, owner, group, want, who, ok):
    assert may(mode, owner, group, who, want) is ok


def d(path, mode, uid=0, gid=0, **kw):
    return FolderFacts(path, True, True, stat.S_IFDIR | mode, uid, gid, **kw)


def test_folder_problem_names_the_reason():
    base = [d("/", 0o755), d("/work", 0o755)]
    assert folder_problem(base + [d("/work/out", 0o777)], ALICE) is None
    assert folder_problem(base + [FolderFacts("/work/out", False)], ALICE) == "no such folder"
    assert folder_problem([d("/", 0o755), FolderFacts("/nope", False)], ALICE) == "no such folder"
    f = FolderFacts("/work/out", True, False, stat.S_IFREG | 0o644)
    assert folder_problem(base + [f], ALICE) == "is not a folder"
    assert folder_problem(base + [d("/work/out", 0o755)], ALICE) == \
        "not writable by user alice (mode 0755, owner uid 0 gid 0)"
    assert folder_problem(base + [d("/work/out", 0o755)], ROOT) is None
    assert folder_problem([d("/", 0o755), d("/work", 0o700), d("/work/out", 0o777)], ALICE) == \
        "user alice cannot enter /work (mode 0700, owner uid 0 gid 0)"
    assert folder_problem(base + [d("/work/out", 0o777, read_only=True)], ROOT) == "is on a read-only file system"


def test_missing_or_plain_file_parent_is_named():
    """The CLI's stat walk stops at the first missing component and ends with the folder itself."""
    chain = [d("/", 0o755), FolderFacts("/work", False), FolderFacts("/work/out", False)]
    assert folder_problem(chain, ALICE) == "no such folder (/work does not exist)"
    f = FolderFacts("/work", True, False, stat.S_IFREG | 0o644)
    assert folder_problem([d("/", 0o755), f, FolderFacts("/work/out", False)], ALICE) == "/work is not a folder"


# ------------------------------------------------------------------------------------------- the CLI's stat walk
@pytest.fixture
def open_tmp():
    """A folder every user can reach (pytest's tmp_path sits under a 0700 folder of root's)."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="slurmtools-identity-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d)


def test_cli_folder_check_reads_real_permissions_for_the_jobs_user(open_tmp):
    """As root planning for another user, the folder's bits are checked for that user, not root."""
    import os
    import pwd

    from slurmtools.cli.job_checks import folders
    from slurmtools.planner.request import JobRequest

    if os.geteuid() != 0:
        pytest.fail("needs root: the check is about root submitting for another user (chown)")
    nobody = pwd.getpwnam("nobody")
    tmp_path = open_tmp
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o755)  # root's, not writable by nobody
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    os.chown(mine, nobody.pw_uid, nobody.pw_gid)
    req = JobRequest(gpus=8, output_dir=str(closed))
    problems, notes = folders(req, "nobody", cwd=str(tmp_path))
    assert problems == [f"--output-dir {closed}: not writable by user nobody (mode 0755, owner uid 0 gid 0)"]
    assert folders(req, "root", cwd=str(tmp_path)) == ([], [])
    assert folders(JobRequest(gpus=8, output_dir="mine"), "nobody", cwd=str(tmp_path)) == ([], [])
    problems, _ = folders(JobRequest(gpus=8, output_dir="missing/out"), "nobody", cwd=str(tmp_path))
    assert problems == [f"--output-dir missing/out ({tmp_path}/missing/out): no such folder ({tmp_path}/missing does "
                        "not exist)"]
    problems, _ = folders(JobRequest(gpus=8, workdir=str(closed)), "nobody", cwd="/")
    assert problems == [f"--workdir {closed}: not writable by user nobody (mode 0755, owner uid 0 gid 0)"]
    problems, _ = folders(JobRequest(gpus=8), "nobody", cwd=str(closed))
    assert problems == [f"--output-dir (not given: the output goes to the submit folder {closed}): not writable by "
                        "user nobody (mode 0755, owner uid 0 gid 0)"]
    problems, notes = folders(JobRequest(gpus=8, output_dir="/nonexistent"), "no-such-user-here", cwd=str(mine))
    assert problems == ["--output-dir /nonexistent: no such folder"] and "no passwd entry" in notes[0]
