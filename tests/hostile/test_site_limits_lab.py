"""The site check's Slurm limits (slurmtools/site/validate.py) against the real Slurm, on 22.05 and 25.11.

For every limit: the largest value the site check accepts is accepted by the real tool with the value intact, and
one past it is refused by the site check in one line AND refused or silently mangled by the real tool (which is
why the site check refuses it). Measured first on both releases, with the same results:

- QoS GraceTime and Priority: slurmdbd stores them only while `(int32_t)value >= 0`, so 2^31 is dropped without a
  word (rc 0 beside other settings) and 2^32 + 1 wraps to 1 in sacctmgr's get_uint. The limit used to be
  4,294,967,293 (read from sacctmgr alone), which Slurm silently ignored.
- Time limits (MaxWall, sbatch -t): time_str2mins adds 59 to the seconds in an int, so 35,791,394 minutes
  overflows (sbatch -t 35791394 runs with TimeLimit=2957761-01:03:00). The limit used to be 35,791,394 minutes.
- sbatch --signal: the lead is a uint16; 65,536 is refused.

The lab's QoS and job_submit.lua are restored afterwards (other tests share the lab).
"""

from __future__ import annotations

import shlex
import time

import pytest

from slurmtools.render.accounting import render_qos
from slurmtools.site import load_site
from slurmtools.site.validate import QOS_INT_MAX, SIGNAL_LEAD_MAX, TIME_LIMIT_MAX
from tests.hostile.site_check_support import cli, edited, refusal

from labtools import install_lua, job_folder

MAX_MIN = TIME_LIMIT_MAX // 60  # 35791393
#: the edge values as Slurm prints them back
MAX_TIME_TEXT = "24855-03:13:00"
MAX_GRACE_TEXT = "24855-03:14:07"  # 2147483647 s
#: what sbatch makes of one minute more (the int overflows)
MANGLED_TIME_TEXT = "2957761-01:03:00"

FIELDS = "Name,Priority,GraceTime,MaxWall,MaxTRES,MaxTRESPU,Preempt,PreemptMode,Description"


def edge_site(tmp_path, past: str | None = None):
    """The example site with every limit at the largest value the site check accepts; `past` pushes one of them
    one unit further."""
    vals = {"priority": QOS_INT_MAX, "grace": QOS_INT_MAX, "lead": SIGNAL_LEAD_MAX, "wall": MAX_MIN}
    if past:
        vals[past] += 1
    p = edited(tmp_path, "priority = 1000", f"priority = {vals['priority']}\n"
                                            f"grace_time = \"{vals['grace']}s\"")
    text = (p.read_text().replace('max_walltime = "2d"', f'max_walltime = "{vals["wall"]}m"', 1)
            .replace('max_time = "2d"', f'max_time = "{vals["wall"]}m"', 1)
            .replace('signal_lead = "5m"', f'signal_lead = "{vals["lead"]}s"', 1))
    p.write_text(text)
    return p


def test_site_check_takes_the_edge(tmp_path):
    r = cli("site", "check", str(edge_site(tmp_path)))
    assert r.code == 0, r.err
    assert f"priority {QOS_INT_MAX}" in r.out


@pytest.mark.parametrize("past,key,words", [
    ("priority", "tiers.production.priority", f"{QOS_INT_MAX + 1} is more than Slurm's QoS Priority holds "
                                              f"({QOS_INT_MAX})"),
    ("grace", "tiers.production.grace_time", f"{QOS_INT_MAX + 1} s is more than Slurm's QoS GraceTime holds "
                                             f"({QOS_INT_MAX} s)"),
    ("lead", "tiers.standard.signal_lead", "65536 s is more than Slurm's --signal lead allows (65535 s)"),
    ("wall", "partitions.gpu.max_time", f"{(MAX_MIN + 1) * 60} s is more than Slurm's time limits hold "
                                        f"({TIME_LIMIT_MAX} s)"),
])
def test_site_check_refuses_one_past(tmp_path, past, key, words):
    line = refusal("site", "check", str(edge_site(tmp_path, past)))
    assert line.endswith(f"site.toml: {key}: {words}"), line


# --- the real Slurm ---------------------------------------------------------------------------------------------

def show(lab, qos: str = "production") -> str:
    return lab.sh(f"sacctmgr -n -P show qos {qos} format={FIELDS}").stdout.strip()


def sacctmgr(lab, *args: str):
    return lab.sh(shlex.join(["sacctmgr", "-i", *args]), check=False)


@pytest.fixture
def qos_restored(lab):
    """The lab's QoS as its site renders them, checked unchanged after the test."""
    before = lab.sh(f"sacctmgr -n -P show qos format={FIELDS}").stdout
    yield
    for cmd in render_qos(load_site(None), only="settings"):
        lab.sh(shlex.join(cmd))
    assert lab.sh(f"sacctmgr -n -P show qos format={FIELDS}").stdout == before


def _nothing_changed(lab, p) -> None:
    """sacctmgr's words for a modify that changed nothing, per release."""
    assert p.returncode == 1, (p.stdout, p.stderr)
    words = "Nothing modified" if lab.slurm_version.startswith("22.") else "Data has not changed"
    assert words in p.stdout + p.stderr, (p.stdout, p.stderr)


@pytest.mark.lab
def test_qos_takes_the_edge_intact(lab, tmp_path, qos_restored):
    """The site's own rendered sacctmgr command at the edge: Slurm reads every value back unchanged."""
    site = load_site(edge_site(tmp_path))
    cmd = next(c for c in render_qos(site, only="settings") if "name=production" in c)
    assert f"Priority={QOS_INT_MAX}" in cmd and f"GraceTime={QOS_INT_MAX}" in cmd and f"MaxWall={MAX_MIN}" in cmd
    p = lab.sh(shlex.join(cmd))
    assert "production" in p.stdout
    name, prio, grace, wall, *_ = show(lab).split("|")
    assert (name, prio, grace, wall) == ("production", str(QOS_INT_MAX), MAX_GRACE_TEXT, MAX_TIME_TEXT)


@pytest.mark.lab
def test_qos_one_past_is_dropped_or_wrapped(lab, qos_restored):
    before = show(lab).split("|")
    # 2^31 beside another setting: the command succeeds, the other setting lands, GraceTime and Priority are
    # silently left as they were
    p = sacctmgr(lab, "modify", "qos", "where", "name=production", "set", "Description=limits-probe",
                 f"GraceTime={QOS_INT_MAX + 1}", f"Priority={QOS_INT_MAX + 1}")
    assert p.returncode == 0, (p.stdout, p.stderr)
    after = show(lab).split("|")
    assert after[-1] == "limits-probe"
    assert after[1:3] == before[1:3]
    # alone, it is "nothing changed"
    _nothing_changed(lab, sacctmgr(lab, "modify", "qos", "where", "name=production", "set",
                                   f"GraceTime={QOS_INT_MAX + 1}"))
    _nothing_changed(lab, sacctmgr(lab, "modify", "qos", "where", "name=production", "set",
                                   f"Priority={QOS_INT_MAX + 1}"))
    assert show(lab).split("|")[1:3] == before[1:3]
    # past 2^32 it wraps: 4294967297 is stored as 1
    p = sacctmgr(lab, "modify", "qos", "where", "name=production", "set", f"GraceTime={2**32 + 1}",
                 f"Priority={2**32 + 1}")
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert show(lab).split("|")[1:3] == ["1", "00:00:01"]
    # one minute past the time limit: refused
    for wall in (str(MAX_MIN + 1), "24855-03:14:00"):
        _nothing_changed(lab, sacctmgr(lab, "modify", "qos", "where", "name=production", "set", f"MaxWall={wall}"))
        assert show(lab).split("|")[3] == before[3]


PASS_LUA = ("function slurm_job_submit(job_desc, part_list, submit_uid) return slurm.SUCCESS end\n"
            "function slurm_job_modify(job_desc, job_ptr, part_list, modify_uid) return slurm.SUCCESS end\n")


@pytest.fixture
def plain_submit(lab):
    """The lab without the site's job_submit.lua (which refuses these time limits first), restored after."""
    path = lab.dir / "etc" / "job_submit.lua"
    saved = path.read_text()
    install_lua(lab, PASS_LUA)
    time.sleep(1)
    yield
    install_lua(lab, saved)


def sbatch(lab, folder, *args: str):
    return lab.sh(f"cd {shlex.quote(str(folder))} && sbatch --parsable -p gpu {shlex.join(args)}", user="labuser",
                  check=False)


def time_limit(lab, job: str) -> str:
    out = lab.sh(f"scontrol show job {job}").stdout
    return next(w for w in out.split() if w.startswith("TimeLimit=")).split("=", 1)[1]


@pytest.mark.lab
def test_sbatch_time_and_signal_edges(lab, plain_submit):
    folder = job_folder(lab, "limits")
    jobs = []
    try:
        got = {}
        for t in (str(MAX_MIN), MAX_TIME_TEXT, str(MAX_MIN + 1), "24855-03:14:00"):
            p = sbatch(lab, folder, "-H", "-t", t, "--wrap", "true")
            assert p.returncode == 0, p.stderr
            jobs.append(p.stdout.strip())
            got[t] = time_limit(lab, jobs[-1])
        assert got[str(MAX_MIN)] == got[MAX_TIME_TEXT] == MAX_TIME_TEXT
        # one minute more overflows: the job is taken with a time limit nobody asked for
        assert got[str(MAX_MIN + 1)] == got["24855-03:14:00"] == MANGLED_TIME_TEXT

        p = sbatch(lab, folder, "-H", f"--signal=B:URG@{SIGNAL_LEAD_MAX + 1}", "--wrap", "true")
        assert p.returncode != 0 and "Invalid --signal specification" in p.stderr, (p.stdout, p.stderr)

        # the largest lead is kept: under a shorter time limit (1092 min = 65520 s) the warning is due at once
        script = folder / "urg.sh"
        script.write_text("#!/bin/bash\ntrap 'echo URG > got-urg' URG\n"
                          "for i in $(seq 1 240); do sleep 1; [ -e got-urg ] && exit 0; done\nexit 3\n")
        p = sbatch(lab, folder, "-t", "1092", f"--signal=B:URG@{SIGNAL_LEAD_MAX}", "-o", "/dev/null", str(script))
        assert p.returncode == 0, p.stderr
        jobs.append(p.stdout.strip())
        assert lab.wait_state(int(jobs[-1]), {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"}, timeout=240) \
            == "COMPLETED"
        assert (folder / "got-urg").read_text() == "URG\n"
    finally:
        for j in jobs:
            lab.sh(f"scancel {j}", check=False)
