"""What the pyslurm backend hands pyslurm, and what it leaves to sbatch (pure: no pyslurm needed).

Whether pyslurm then gives the controller the same job as sbatch is the lab's question
(tests/integration/test_backends_lab.py); here: sbatch's reading rules, and that nothing is dropped silently."""

from __future__ import annotations

import pytest

from slurmtools.slurm.pyslurm_submit import NotCarried, directive_words, parse_words, submit_kwargs

SCRIPT = """#!/bin/bash
#SBATCH -J first --qos=scavenger   # a comment with -p ignored
#SBATCH --gpus-per-node=h100:8
# an ordinary comment
#SBATCH --signal=B:USR1@120
#SBATCH --requeue

srun true
#SBATCH --partition=never-read
"""


def test_directives_stop_at_the_first_command_and_comments_end_a_line():
    assert directive_words(SCRIPT) == ["-J", "first", "--qos=scavenger", "--gpus-per-node=h100:8",
                                       "--signal=B:USR1@120", "--requeue"]


def test_command_line_wins_and_values_map_to_pyslurm_attributes():
    kw = submit_kwargs(SCRIPT, ["-J", "second", "-p", "gpu", "-N2", "--exclusive", "-H", "--comment=a#b c"])
    assert kw == {"name": "second", "qos": "scavenger", "gres_per_node": "gpu:h100:8", "signal": {"signal": 10, "time": 120, "batch_only": True},
                  "is_requeueable": True, "partitions": "gpu", "nodes": "2", "resource_sharing": "no",
                  "priority": 0, "comment": "a#b c", "ntasks": 2}  # sbatch's one task per node


def test_a_quoted_directive_value_keeps_its_spaces():
    assert submit_kwargs('#!/bin/sh\n#SBATCH --comment="two words"\ntrue\n', []) == {"comment": "two words",
                                                                                      "name": "sbatch"}


@pytest.mark.parametrize("options, named", [
    (["--switches=1@5:00"], "--switches"),  # pyslurm 25.11.2 raises NameError on it
    (["--mem-per-gpu=8G"], "--mem-per-gpu"),
    (["--exclusive=topo"], "--exclusive=topo"),
    (["--gres=gpu"], "--gres=gpu"),
    (["-B", "2:8"], "-B"),
    (["--export=NONE"], "--export"),
    (["script.sh", "arg"], "script.sh"),
    (["--ntasks=two"], "two"),
    (["-t"], "--time without a value"),
])
def test_what_pyslurm_would_not_carry_is_named(options, named):
    with pytest.raises(NotCarried) as e:
        submit_kwargs("#!/bin/sh\ntrue\n", options)
    assert named in str(e.value)


def test_an_unknown_directive_in_the_script_is_named_too():
    with pytest.raises(NotCarried, match="--hint"):
        submit_kwargs("#!/bin/sh\n#SBATCH --hint=nomultithread\ntrue\n", [])


def test_short_options_glued_or_separate():
    assert parse_words(["-N2", "-w", "gpu07", "-t10"]) == [("nodes", "2"), ("nodelist", "gpu07"), ("time", "10")]


def test_what_sbatch_fills_in_itself():
    """Measured against 25.11.7's sbatch: a script from standard input is named `sbatch`, and a node count without
    a task count means one task per node (pyslurm alone would ask for one task in all)."""
    assert submit_kwargs("#!/bin/sh\ntrue\n", ["-N1-3"]) == {"nodes": "1-3", "ntasks": 1, "name": "sbatch"}
    assert submit_kwargs("#!/bin/sh\ntrue\n", ["-n", "4", "-N", "2"])["ntasks"] == 4
    with pytest.raises(NotCarried, match="--ntasks without --nodes"):
        submit_kwargs("#!/bin/sh\ntrue\n", ["-n", "4"])


def test_directive_lines_as_sbatch_reads_them():
    """Only lines starting with #SBATCH at their first character count (sbatch 25.11, opt.c); an indented one is a
    comment; an unquoted # inside a word ends the line, a quoted one does not."""
    script = ('#!/bin/sh\n  #SBATCH -J indented\n#SBATCH --comment=a#b\n#SLURM -p old\n'
              '#SBATCH --comment="c#d"\ntrue\n')
    assert directive_words(script) == ["--comment=a", "-p", "old", "--comment=c#d"]
