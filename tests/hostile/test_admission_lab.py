"""Issue 12, classes 4 and 5 in a real Slurm: the real sbatch and the generated job_submit.lua agree with the CLI's
preflight on what the parity tests (test_admission_directives.py, test_admission_numbers.py) only show between
Python and a bare Lua: how a script's directives are read for the checkpoint signal, GPU count suffixes, `--mem=0`,
and a count no cluster has. Each case is one held job (`sbatch -H`), cancelled when admitted. Both releases.
"""

from __future__ import annotations

import shlex

import pytest

from slurmtools.policy import JobRequest
from slurmtools.policy.builtin import absurd

from .admission_support import enforcing, lab_submit, python_decision  # noqa: F401

H = "#!/bin/bash\n"
STD = "-A vision -q standard --gres=gpu:h100:1"
SIGNAL = ("tier standard is preemptible: add '#SBATCH --signal=B:URG@300' to the batch script so the job can "
          "checkpoint (a --signal on the command line is not visible here)")
HUGE = "9" * 400

#: (sbatch options, script, the refusal both sides print, or "" for admitted)
CASES = [
    (STD, H + "  #SBATCH --signal=B:URG@60\nsleep 1\n", SIGNAL),                 # indented: a shell comment
    (STD, H + "#SBATCH --comment=--signal=B:URG@60\nsleep 1\n", SIGNAL),         # the comment's value
    (STD, H + "#SLURM --signal=B:URG@60\nsleep 1\n", ""),                         # sbatch reads #SLURM too
    ("-A vision -q standard --gres=gpu:h100:1k", H + "#SBATCH --signal=B:URG@60\nsleep 1\n",
     "tier standard allows at most 32 GPUs per job; this job asks for 1024"),    # 1k GPUs, not 1
    ("-A vision -q production --gres=gpu:h100:1 --mem=0", H + "sleep 1\n",
     "on partition gpu each GPU comes with at most 250000 MB of memory: 1 GPUs allow 250000 MB, this job asks for "
     "2000000 MB"),                                                               # all of the node's memory
    ("-A vision -q production --gpus=h100:2000000000000", H + "sleep 1\n", absurd("--gpus")),  # past 2^40: by us
]
#: a 400-digit GPU count never reaches job_submit.lua: sbatch itself refuses it (measured), per release
SBATCH_HUGE = {"22.05": "sbatch: error: Invalid generic resource (gres) specification",
               "25.11": "sbatch: error: Invalid Trackable RESource (TRES) specification"}


@pytest.mark.lab
def test_real_sbatch_and_lua_agree_with_the_preflight(lab, enforcing):
    for args, script, want in CASES:
        d = python_decision(JobRequest.from_sbatch(shlex.split(args), script=script))
        assert (d.message if d.action == "deny" else "") == want, (args, script, d)
        p = lab_submit(lab, args, script)
        if want:
            assert p.returncode != 0 and f"sbatch: error: {want}\n" in p.stderr, (args, script, p.stderr)
        else:
            assert p.returncode == 0, (args, script, p.stderr)
            job = p.stdout.strip().split(";")[0]
            show = lab.sh(f"scontrol show job -o {job}").stdout
            lab.sh(f"scancel {job}")
            assert " QOS=standard " in show and " Partition=gpu " in show, show


@pytest.mark.lab
def test_a_400_digit_gpu_count_is_refused_by_sbatch_itself(lab, enforcing):
    for opt in (f"--gpus=h100:{HUGE}", f"--gres=gpu:h100:{HUGE}"):
        p = lab_submit(lab, f"-A vision -q production {opt}", H + "sleep 1\n")
        assert p.returncode != 0 and p.stderr.splitlines()[0] == SBATCH_HUGE[lab.release.name], (opt, p.stderr)
        assert "Batch job submission failed" not in p.stderr  # refused before the controller: no job, no Lua
        # the CLI's preflight refuses it too, before it would call sbatch
        d = python_decision(JobRequest.from_sbatch(["-A", "vision", "-q", "production", opt], script=H))
        assert (d.policy, d.message) == ("request", absurd(opt.split("=")[0]))
