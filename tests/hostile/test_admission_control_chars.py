"""Issue 12: a job name or comment holding a control character is refused at admission, at submission and on
`scontrol update`, by the CLI's preflight and by job_submit.lua alike, with one message naming the option.

Why: sacct (22.05, measured) prints a job name's LF and CR raw, so a name like `x\n123|alice|...` padded with `|`
reads as two whole rows of a report's sacct input (docs/reports.md). Before the fix (measured in the lab on 22.05)
`sbatch -J $'a\nb'` was admitted, and `scontrol update JobId=N Name=$'c\nd'` renamed a pending job the same way.
Refused: C0 (U+0000..U+001F), DEL, C1 (U+0080..U+009F) and U+2028/U+2029, found in the bytes Slurm stores.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmtools.policy import JobRequest
from slurmtools.policy.builtin import control
from slurmtools.policy.request import control_char
from slurmtools.policy.update import modified_request, parse_show_job, parse_update, record_request, text_refusal

from .admission_support import enforcing, example, lab_submit, lua_results, needs_lua, python_decision  # noqa: F401
from .admission_support import same_on_both_sides

SIG = "#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsleep 1\n"
ARGS = "-A vision -q production --gres=gpu:h100:1"
CONTROLS = [chr(c) for c in range(0x20)] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)] + ["\u2028", "\u2029"]


def base(**kw) -> JobRequest:
    kw = {"account": "vision", "qos": "production", "partition": "gpu", "tres_per_node": "gres:gpu:h100:1",
          "script": SIG, **kw}
    return JobRequest(**kw)


def test_every_control_character_is_named_and_nothing_else():
    for c in CONTROLS:
        assert control_char("ok" + c + "\n") == "U+%04X" % ord(c), repr(c)
    for text in ("train-résumé ÅÆ", "日本語 job", "a\u2027b", "a\u202ab", "a\xa0b", "\U0001f600", "", None):
        assert control_char(text) is None, repr(text)
    assert control_char("a\udc85b") is None  # a stray byte 0x85 (not UTF-8) is no C1 character: U+0085 is c2 85
    d = python_decision(base(name="x\n123|alice|vision"))
    assert (d.action, d.policy, d.message) == ("deny", "request", control("--job-name", "U+000A"))
    assert d.message == ("this job's --job-name holds the control character U+000A (sacct prints it raw, so it could "
                         "forge rows of accounting reports): use printable characters only")
    assert python_decision(base(comment="a\u2028b")).message == control("--comment", "U+2028")
    # the name before the comment, and before any other rule (an absurd number, a missing checkpoint signal)
    d = python_decision(base(name="a\rb", comment="\x00", tres_per_job="gres:gpu:" + "9" * 400, script="#!/bin/sh\n"))
    assert d.message == control("--job-name", "U+000D")


def test_preflight_reads_job_name_and_comment_from_options_and_directives():
    for args, script, what, char in (
            (["-J", "a\nb"], SIG, "--job-name", "U+000A"), (["--job-name=a\tb"], SIG, "--job-name", "U+0009"),
            (["--comment", "x\x85y"], SIG, "--comment", "U+0085"),
            ([], SIG.replace("sleep", "#SBATCH -J 'a\x1bb'\nsleep"), "--job-name", "U+001B")):
        r = JobRequest.from_sbatch(["-A", "vision", "--gres=gpu:h100:1", *args], script=script)
        d = python_decision(r)
        assert (d.policy, d.message) == ("request", control(what, char)), (args, d)


@needs_lua
def test_check_names_the_job_after_its_script_file_as_sbatch_does(tmp_path):
    """Without -J, sbatch names the job after the script file, and that is the name job_submit.lua refuses: the
    preflight (`admin policy check --script`) refuses it too, and a -J name overrides it."""
    script = tmp_path / "train\nx.sh"
    script.write_text("#!/bin/bash\n#SBATCH --signal=B:URG@120\nsleep 1\n")
    base = [sys.executable, "-m", "slurmtools", "admin", "policy", "check", "--no-usage", "--script", str(script),
            "--", "-q", "standard", "-A", "vision", "--gpus=h100:1"]
    p = subprocess.run(base, capture_output=True, text=True)
    assert p.returncode == 1 and p.stdout.strip() == "refused by request: " + control("--job-name", "U+000A"), p.stdout
    p = subprocess.run(base + ["-J", "train"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("allowed"), p.stdout + p.stderr


def test_submission_and_update_same_on_both_sides(tmp_path):
    reqs = [base(name=f"a{c}b") for c in CONTROLS] + [base(comment=f"a{c}b") for c in CONTROLS]
    reqs += [base(name="résumé", comment="日本語"), base(name="x\u2027")]
    d = same_on_both_sides(reqs, tmp_path)
    assert [x.message for x in d[:len(CONTROLS)]] == [control("--job-name", "U+%04X" % ord(c)) for c in CONTROLS]
    assert d[-1].action == d[-2].action == "allow"
    # scontrol update: the new name or comment is checked; a name the job got before the rule blocks nothing
    rec = {"account": "vision", "qos": "production", "partition": "gpu", "time_limit": 60, "min_nodes": 1,
           "tres_per_node": "gres:gpu:h100:8", "script": SIG, "name": "old\nname", "comment": "old\x85",
           "tres_fmt_req_str": "cpu=1,mem=1G,node=1,billing=1,gres/gpu=8,gres/gpu:h100=8"}
    unset = {"min_nodes": 4294967294, "num_tasks": 4294967294, "time_limit": 4294967294, "ntasks_per_node": 65534,
             "cpus_per_task": 65534, "sockets_per_node": 65534, "user_name": "labuser"}
    changes = [{"name": "a\nb"}, {"comment": "c\u2029"}, {"name": "fine"}, {"time_limit": 30},
               {"name": "a\nb", "min_nodes": 9}, {"min_nodes": 9}]
    want = [control("--job-name", "U+000A"), control("--comment", "U+2029"), "", "",
            control("--job-name", "U+000A"), "tier production allows at most 64 GPUs per job; this job asks for 72"]
    cases = [{"modify": True, "rec": rec, "desc": {**unset, **c}} for c in changes]
    for name, got in lua_results(cases, tmp_path).items():
        assert [x["user"] for x in got] == want, name
        assert [x["rc"] for x in got] == [-1 if w else 0 for w in want], name
    show = {"Account": "vision", "QOS": "production", "Partition": "gpu", "TimeLimit": "01:00:00", "NumNodes": "1",
            "TresPerNode": "gres:gpu:h100:8", "TRES": rec["tres_fmt_req_str"], "JobName": "old"}
    current, tres = record_request(show, script=SIG)
    for c, w in zip(changes, want):
        change = JobRequest(**c)
        d = text_refusal(change)
        if d is None:
            req, touched = modified_request(current, change, tres)
            d = python_decision(req) if touched else None
        assert (d.message if d is not None and d.action == "deny" else "") == w, c


def test_update_keys_name_and_comment_are_read():
    u = parse_update(["JobId=7", "Name=a\nb", "Comment=x"])
    assert (u.change.name, u.change.comment, u.ignored) == ("a\nb", "x", ())
    assert text_refusal(u.change).message == control("--job-name", "U+000A")
    assert text_refusal(parse_update(["JobId=7", "JobName=ok"]).change) is None


texts = st.builds(lambda a, c, b: a + c + b, st.text(max_size=20), st.sampled_from(CONTROLS), st.text(max_size=20))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), texts, st.text(max_size=30)),
                          st.one_of(st.none(), texts, st.text(max_size=30))), min_size=20, max_size=20))
@needs_lua
def test_random_names_and_comments_same_on_both_sides(tmp_path_factory, pairs):
    """Names and comments with a random control character anywhere among any other characters: the same decision
    and byte-identical message from Python and from Lua 5.1 and 5.3, and a refusal is always one line."""
    reqs = [base(name=n, comment=c) for n, c in pairs]
    for r, d in zip(reqs, same_on_both_sides(reqs, tmp_path_factory.mktemp("control"))):
        bad = r.control_field()
        assert (d.action == "deny" and d.policy == "request") == (bad is not None), (r.name, r.comment, d)
        assert "\n" not in d.message and "\r" not in d.message


# ---- in the lab (22.05 and 25.11) ----------------------------------------------------------------------------


@pytest.mark.lab
def test_sbatch_refuses_a_control_character_in_name_or_comment(lab, enforcing):
    for opt, value, what, char in (("-J", "a\nb", "--job-name", "U+000A"), ("--comment", "x\u0085y", "--comment",
                                                                            "U+0085")):
        p = lab_submit(lab, f"{ARGS} {opt} {shlex.quote(value)}", SIG)
        assert p.returncode != 0 and not p.stdout.strip(), (opt, p.stdout)
        assert f"sbatch: error: {control(what, char)}" in p.stderr, (opt, p.stderr)
        r = JobRequest.from_sbatch(shlex.split(ARGS) + [opt, value], script=SIG)
        assert python_decision(r).message == control(what, char)  # the CLI's preflight says the same
    job = lab_submit(lab, f"{ARGS} -J plain-name", SIG, check=True).stdout.strip().split(";")[0]
    lab.sh(f"scancel {job}")


@pytest.mark.lab
def test_scontrol_update_name_with_a_control_character_is_refused(lab, enforcing):
    job = lab_submit(lab, f"{ARGS} -J before", SIG, check=True).stdout.strip().split(";")[0]
    try:
        message = control("--job-name", "U+000A")
        pre = subprocess.run([sys.executable, "-m", "slurmtools", "admin", "policy", "check-update", "--no-usage",
                              f"JobId={job}", "Name=a\nb"], capture_output=True, text=True, env=lab.env, timeout=120)
        assert (pre.returncode, pre.stdout.strip()) == (1, f"refused by request: {message}"), pre.stdout + pre.stderr
        mark = (lab.dir / "log" / "slurmctld.log").stat().st_size
        p = lab.sh(f"scontrol update JobId={job} Name=$'a\\nb'", user="labuser", check=False)
        assert p.returncode != 0, p.stdout + p.stderr
        with open(lab.dir / "log" / "slurmctld.log", errors="replace") as fh:
            fh.seek(mark)
            assert f"slurmtools policy: refused update (request): {message}" in fh.read()
        assert parse_show_job(lab.sh(f"scontrol show job -o {job}").stdout)["JobName"] == "before"
        lab.sh(f"scontrol update JobId={job} Name=after", user="labuser")  # a clean name still passes
        assert parse_show_job(lab.sh(f"scontrol show job -o {job}").stdout)["JobName"] == "after"
    finally:
        lab.sh(f"scancel {job}")
