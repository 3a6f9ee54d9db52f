"""Identity and folders are checked before sbatch, against the real lab (example site; Slurm's accounting has
labuser in vision and nlp, carol in students, root in vision and root; nobody called mallory).

Each refusal must come back as one line on stderr naming the option, with a non-zero exit, and no job may reach
Slurm (squeue and sacct list nothing new). A control submission with the same command line shows the refusals are
the checks' and not a broken setup."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from datetime import datetime

import pytest

pytestmark = pytest.mark.lab
CLI = f"{sys.executable} -m slurmtools"
SUBMIT = "submit --gpus 8 --tier standard --template python --name idlab --time 5m"


@pytest.fixture
def clean(lab):
    lab.sh("scancel --full -u labuser; scancel --full -u root", check=False)
    yield
    lab.sh("scancel --full -u labuser; scancel --full -u root", check=False)


@pytest.fixture
def folder(lab):
    """A submit folder labuser owns and writes, and beside it one of root's that labuser may only read."""
    base = lab.jobs_dir / f"identity-{uuid.uuid4().hex[:8]}"
    base.mkdir(mode=0o755)
    mine = base / "mine"
    mine.mkdir()
    os.chown(mine, *_ids("labuser"))
    closed = base / "closed"
    closed.mkdir(mode=0o755)
    return mine, closed


def _ids(user: str) -> tuple[int, int]:
    import pwd

    pw = pwd.getpwnam(user)
    return pw.pw_uid, pw.pw_gid


def seen_jobs(lab, since: str) -> set[str]:
    """Every job Slurm knows: squeue (any user, any state) and sacct since `since`."""
    q = lab.sh("squeue -h -a -t all -o %i", check=False).stdout.split()
    a = lab.sh(f"sacct -a -X -n -P -o JobIDRaw -S {since}", check=False).stdout.split()
    return set(q) | set(a)


def refused(lab, cmd: str, cwd, user: str | None, option: str) -> str:
    since = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    before = seen_jobs(lab, since)
    p = lab.sh(f"cd {cwd} && {CLI} {cmd}", user=user, check=False)
    assert p.returncode != 0, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("slurmtools: error: ") and option in lines[0], p.stderr
    assert "submitted job" not in p.stdout
    # squeue lists a job as soon as sbatch has its id; sacct also lists ones that already ended. Only a job that
    # appeared counts: an earlier test's job may leave squeue meanwhile (MinJobAge) having ended before `since`
    assert seen_jobs(lab, since) - before == set(), "a refused submission reached Slurm"
    return lines[0]


def test_unknown_user_is_refused_before_sbatch(lab, clean, folder):
    mine, _ = folder
    line = refused(lab, f"{SUBMIT} --user mallory --output-dir {mine} -- true", mine, "labuser", "--user mallory")
    assert "no Slurm association for user mallory (accounting knows: alice, bob, carol, labuser, root)" in line


def test_foreign_account_is_refused_before_sbatch(lab, clean, folder):
    mine, _ = folder
    line = refused(lab, f"{SUBMIT} --account students --output-dir {mine} -- true", mine, "labuser",
                   "--account students")
    assert "user labuser is not in account students (their accounts: nlp, vision)" in line


def test_qos_the_association_does_not_allow_is_refused(lab, clean, folder):
    """carol's students association allows standard and scavenger only (the lab renders it from the site)."""
    mine, _ = folder
    line = refused(lab, f"{SUBMIT.replace('--tier standard', '--tier production')} --user carol --output-dir {mine} "
                        "-- true", mine, None, "--tier production")
    assert "QoS production is not allowed for user carol in account students" in line


def test_missing_output_folder_is_refused_before_sbatch(lab, clean, folder):
    mine, _ = folder
    line = refused(lab, f"{SUBMIT} --output-dir /nonexistent -- true", mine, "labuser", "--output-dir /nonexistent")
    assert line.endswith("--output-dir /nonexistent: no such folder")


def test_output_folder_the_user_cannot_write_is_refused(lab, clean, folder):
    mine, closed = folder
    line = refused(lab, f"{SUBMIT} --output-dir {closed} -- true", mine, "labuser", f"--output-dir {closed}")
    assert "not writable by user labuser (mode 0755, owner uid 0 gid 0)" in line
    # root planning for labuser: the folder's bits are checked for labuser, though root could write there
    line = refused(lab, f"{SUBMIT} --user labuser --output-dir {closed} -- true", mine, None, f"--output-dir {closed}")
    assert "not writable by user labuser" in line
    # the submit folder when no --output-dir is given
    line = refused(lab, f"{SUBMIT} -- true", closed, "labuser", "--output-dir (not given")
    assert f"the submit folder {closed}" in line


def test_missing_workdir_is_refused_before_sbatch(lab, clean, folder):
    mine, _ = folder
    refused(lab, f"{SUBMIT} --workdir {mine}/gone --output-dir {mine} -- true", mine, "labuser",
            f"--workdir {mine}/gone")


def test_control_submission_charges_slurms_default_account(lab, clean, folder):
    """The same command line with a good folder goes through; with no --account, the job is charged labuser's
    DefaultAccount in Slurm (vision)."""
    mine, _ = folder
    p = lab.sh(f"cd {mine} && {CLI} {SUBMIT} --output-dir {mine} -- true", user="labuser", check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    job = int(p.stdout.split("submitted job ")[1].split(":")[0])
    rec = lab.sh(f"scontrol show job {job}").stdout
    assert " Account=vision " in rec and " QOS=standard" in rec, rec


def test_plan_warns_about_folders_and_notes_where_slurm_and_the_site_differ(lab, clean, folder):
    mine, _ = folder
    p = lab.sh(f"cd {mine} && {CLI} plan --gpus 8 --output-dir /nonexistent -- true", user="labuser", check=False)
    assert p.returncode == 0, p.stderr
    assert "slurmtools: warning: --output-dir /nonexistent: no such folder" in p.stderr
    # root is in Slurm's vision and root accounts, in none of the site file's
    p = lab.sh(f"cd {mine} && {CLI} plan --json --gpus 8 --user root -- true", check=False)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["live"] is True and "#SBATCH --account=vision" in d["script"]
    assert any("Slurm has user root in account(s) root, vision, which the site file does not" in n
               for n in d["notes"]), d["notes"]
    # the same plan offline goes by the site file, where root is in no account
    p = lab.sh(f"cd {mine} && {CLI} plan --idle --gpus 8 --user root -- true", check=False)
    assert p.returncode == 2 and "--user root: user root is in no account of the site file" in p.stderr


def test_command_backend_reads_associations(lab):
    from slurmtools.slurm.commands import CommandBackend

    cmd = CommandBackend(env=lab.env)
    ua = cmd.associations("labuser")
    assert ua.default_account == "vision"
    assert sorted((r.account, r.qos, r.default_qos) for r in ua.rows) == [
        ("nlp", ("production", "scavenger", "standard"), "standard"),
        ("vision", ("production", "scavenger", "standard"), "standard")]
    assert cmd.associations("mallory").rows == ()
    assert "labuser" in cmd.accounting_users()
    # passwd names from a directory (winbind's DOMAIN\\user, a blank) are looked up as one name each
    for name in ("dom\\alice", "john smith"):
        lab.sh(f"sacctmgr -i add user {shlex.quote(name)} account=nlp")
        try:
            got = cmd.associations(name)
            assert got.default_account == "nlp" and [(r.user, r.account) for r in got.rows] == [(name, "nlp")], got
        finally:
            lab.sh(f"sacctmgr -i delete user {shlex.quote(name)}", check=False)


@pytest.mark.slurm_release("25.11")
def test_pyslurm_reads_the_same_associations_as_sacctmgr(lab):
    """pyslurm.db's associations agree with sacctmgr's (pyslurm 25.11.2 has no default QoS to compare)."""
    from slurmtools.slurm.commands import CommandBackend

    cmd = CommandBackend(env=lab.env)
    code = ("import json, sys; from slurmtools.slurm.pyslurm_backend import PyslurmBackend; "
            "ua = PyslurmBackend().associations(sys.argv[1]); "
            "print(json.dumps([ua.default_account, sorted([r.account, sorted(r.qos)] for r in ua.rows)]))")
    for user in ("labuser", "root", "mallory"):
        p = subprocess.run([sys.executable, "-c", code, user], capture_output=True, text=True, env=lab.env,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        want = cmd.associations(user)
        assert json.loads(p.stdout) == [want.default_account, sorted([r.account, sorted(r.qos)] for r in want.rows)]
