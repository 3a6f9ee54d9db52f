"""The checkpoint warning signals slurmtools lets a site or a job choose, and the safe default.

Why a short list (facts in docs/checkpoint.md, "Which signal"): the signal must be one bash can trap, Slurm's
`--signal` accepts by name, and NCCL, torchrun, accelerate, deepspeed and mpirun leave alone. SIGURG is the default:
its default action is to be ignored, so a launcher or program that does not handle it lives on (USR1 killed torchrun
in the lab, ending the job FAILED), and NCCL's proxy dump (NCCL_PROXY_DUMP_SIGNAL: off by default, set to 10 = USR1
by some training recipes) never claims it. srun passes on only USR1 and USR2 to its tasks; any other warning signal
reaches a job's steps through `scancel --signal` (checkpoint_wiring.sh). Standard library only: checkpoint.py and
the hooks import it.
"""

from __future__ import annotations

#: the default warning signal (site default of every tier, and of slurmtools.checkpoint)
DEFAULT = "URG"
#: every signal a site (`checkpoint_signal`) or a job (`--checkpoint-signal`) may choose, default first
USABLE = ("URG", "USR1", "USR2")
#: the warning signals srun forwards to its tasks itself (srun's signal manager); others need `scancel --signal`
SRUN_FORWARDS = ("USR1", "USR2")
#: signals whose default action ends a process: a launcher that does not handle them must be told to ignore them
KILLS_BY_DEFAULT = ("USR1", "USR2")


def normalize(name: str) -> str | None:
    """`usr1`, `SIGUSR1` -> `USR1`; None when it is not one of USABLE."""
    s = str(name).strip().upper()
    if s.startswith("SIG"):
        s = s[3:]
    return s if s in USABLE else None


def why_not(name: str) -> str:
    """The one-line reason a signal is refused, naming the usable ones."""
    return (f"{name!r} is not a usable checkpoint signal (usable: {', '.join(USABLE)}; {DEFAULT} is the default: "
            "ignored by anything that does not handle it, and not claimed by NCCL, srun or the launchers)")
