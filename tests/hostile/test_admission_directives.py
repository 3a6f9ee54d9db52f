"""Issue 12, class 4: a batch script's directives are read exactly as sbatch reads them, by the CLI's preflight
and by job_submit.lua alike (slurmtools.policy.directives and its Lua mirror).

Before the fix both sides matched `--signal` anywhere on a line starting (after blanks) with `#SBATCH`: an indented
`  #SBATCH --signal=...` or a `--comment=--signal=...` satisfied the checkpoint rule although sbatch sets no signal
for either; `#SLURM` lines were not read; `--mem=0` (all of each node's memory) passed the memory-per-GPU rule as
0 MB; `gres:gpu:h100:1k` counted as 1 GPU where Slurm counts 1024 (measured on 22.05: TRES gres/gpu=1024).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmtools.policy import JobRequest, RequestError
from slurmtools.policy.builtin import MESSAGES, script_signal
from slurmtools.policy.directives import DirectiveError, getopt, script_options, script_signal_value

from .admission_support import needs_lua, python_decision, same_on_both_sides

SIGNAL_MSG = MESSAGES["checkpoint_signal"].split(":")[0].replace("{qos}", "standard")


@pytest.mark.parametrize("script,signal", [
    ("#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsleep 1\n", "B:USR1@300"),
    ("#!/bin/bash\n  #SBATCH --signal=B:USR1@300\nsleep 1\n", None),          # not in column 0: a comment
    ("#!/bin/bash\n#SBATCH --comment=--signal=B:USR1@300\n", None),          # the comment's value
    ("#!/bin/bash\n#SBATCH --comment\n#SBATCH --signal=B:USR1@300\n", None),  # value is the next word, next line
    ("#!/bin/bash\n#SBATCH -J --signal=B:USR1@300\n", None),                 # -J takes it as the job name
    ("#!/bin/bash\n#SLURM --signal=B:USR1@300\n", "B:USR1@300"),             # sbatch reads #SLURM too
    ("#!/bin/bash\n#SBATCH --sig=B:USR1@300\n", "B:USR1@300"),               # an unambiguous prefix
    ("#!/bin/bash\n#SBATCH -vJname --signal='B:USR1@300' # note\n", "B:USR1@300"),
    ("#!/bin/bash\n#SBATCH hetjob\n#SBATCH --signal=B:USR1@300\n", None),    # the second component's
    ("#!/bin/bash\n#SBATCH --spread --signal=B:USR1@300\n", None),           # ambiguous: sbatch refuses
    ("#!/bin/bash\n#SBATCH --signal=B:USR1@300 stray\n", None),              # a non-option: sbatch refuses
    ("#!/bin/bash\n#SBATCH \"--signal=B:USR1@300\n", None),                  # unmatched quote
    ("#!/bin/bash\necho hi\n#SBATCH --signal=B:USR1@300\n", None),           # after the first command
    ("#!/bin/bash\n#SBATCH --signal=B:USR2@60\n#SBATCH --signal=B:USR1@300\n", "B:USR1@300"),  # the last wins
])
def test_signal_is_what_sbatch_reads(script, signal):
    assert script_signal_value(script) == signal


def test_directive_errors_name_the_line_or_option():
    with pytest.raises(DirectiveError, match=r"^#SBATCH line 2: unmatched \""):
        script_options("#!/bin/sh\n#SBATCH --comment=\"x\n")
    with pytest.raises(DirectiveError, match=r"^--spread: ambiguous sbatch option \(--spread-job, --spread-segments\)"):
        getopt(["--spread"])
    with pytest.raises(RequestError, match=r"^#SBATCH 'stray': not an option"):
        JobRequest.from_sbatch([], script="#!/bin/sh\n#SBATCH -N 1 stray\n")


@needs_lua
def test_signal_loopholes_refused_by_python_and_lua(tmp_path):
    """Each loophole script on the preemptible tier: refused on both sides with the checkpoint message; the real
    directives (also through #SLURM and a prefix) admitted on both."""
    bad = ["#!/bin/bash\n  #SBATCH --signal=B:USR1@300\nsleep 1\n",
           "#!/bin/bash\n#SBATCH --comment=--signal=B:USR1@300\nsleep 1\n",
           "#!/bin/bash\n#SBATCH --comment\n#SBATCH --signal=B:USR1@300\nsleep 1\n"]
    good = ["#!/bin/bash\n#SLURM --signal=B:USR1@300\nsleep 1\n", "#!/bin/bash\n#SBATCH --sig=B:USR1@300\nsleep 1\n"]
    reqs = [JobRequest(user_name="u", account="nlp", qos="standard", partition="gpu", tres_per_node="gres:gpu:h100:1",
                       script=s) for s in bad + good]
    decisions = same_on_both_sides(reqs, tmp_path)
    assert [d.policy for d in decisions[:3]] == ["checkpoint_signal"] * 3
    assert all(d.message.startswith(SIGNAL_MSG) for d in decisions[:3])
    assert [d.action for d in decisions[3:]] == ["allow", "allow"]


@needs_lua
def test_mem_zero_is_all_of_the_node_and_gres_suffixes_count(tmp_path):
    reqs = [JobRequest.from_sbatch(["-A", "vision", "-q", "standard", "--gres=gpu:h100:1", "--mem=0"],
                                   script="#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsleep 1\n"),
            JobRequest.from_sbatch(["-A", "vision", "-q", "standard", "--gres=gpu:h100:1k"],
                                   script="#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsleep 1\n"),
            JobRequest.from_sbatch(["-A", "vision", "-q", "standard", "--gpus=h100:1kb"],
                                   script="#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsleep 1\n")]
    assert reqs[1].gpus == 1024 and reqs[2].gpus == 1000
    d = same_on_both_sides(reqs, tmp_path)
    assert d[0].policy == "cpu_mem_per_gpu" and "this job asks for 2000000 MB" in d[0].message
    assert d[1].message == "tier standard allows at most 32 GPUs per job; this job asks for 1024"
    assert d[2].message == "tier standard allows at most 32 GPUs per job; this job asks for 1000"


def test_command_line_options_read_as_sbatch_does():
    r = JobRequest.from_sbatch(["--qo=production", "--gpus-per-no=h100:2", "-A", "vision"])  # prefixes sbatch takes
    assert (r.qos, r.tres_per_node) == ("production", "gres:gpu:h100:2")
    with pytest.raises(RequestError, match="^option --gpu: ambiguous sbatch option"):
        JobRequest.from_sbatch(["--gpu=2"])


def _line():
    word = st.sampled_from(["--signal=B:USR1@300", "--signal", "B:USR1@300", "--sig=USR1", "--comment", "-J",
                            "-vJx", "--spread", "hetjob", "HETJOB", "\"--signal=USR1\"", "'a b'", "\\#", "#x", ":",
                            "--", "-", "--mem=0", "x", "--signal=USR1#c", "\\ ", "\"", "'"])
    return st.builds(lambda pre, ws, sep: pre + sep.join(ws),
                     st.sampled_from(["#SBATCH ", "#SLURM ", "#SBATCH", " #SBATCH ", "# ", "", "#SBATCHx "]),
                     st.lists(word, max_size=4), st.sampled_from([" ", "\t", "  "]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_line(), min_size=1, max_size=6), min_size=20, max_size=20))
@needs_lua
def test_random_directives_same_signal_in_python_and_lua(tmp_path_factory, scripts):
    """Random directive lines on the preemptible tier: the same decision and message on both sides."""
    reqs = [JobRequest(account="nlp", qos="standard", partition="gpu", tres_per_node="gres:gpu:h100:1",
                       script="#!/bin/bash\n" + "\n".join(lines) + "\nsleep 1\n") for lines in scripts]
    decisions = same_on_both_sides(reqs, tmp_path_factory.mktemp("directives"))
    for r, d in zip(reqs, decisions):
        if script_signal(r.script) is None:
            assert d.policy == "checkpoint_signal" and d.message.startswith(SIGNAL_MSG), r.script


def test_python_decision_helper_sees_the_example_site():
    d = python_decision(JobRequest(account="vision", qos="production", partition="gpu",
                                   tres_per_node="gres:gpu:h100:1"))
    assert d.action == "allow"
