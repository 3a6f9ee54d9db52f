"""Issue 12: the directive reader uses 25.11's sbatch option table (slurmtools.policy.directives.SBATCH_LONG) for
scripts of both releases. Slurm 22.05.8's sbatch, captured into tests/data/slurm (its `--help`/`--usage`, and each
option's kind as its getopt_long answers: sources in the files' headers and tests/data/SOURCES.md), differs in a
few options, recorded with why each is safe in `SBATCH_22_05`. These tests fail when the capture and the record
part ways: a long option 22.05's help lists that neither the table nor the record knows, a kind that differs
unrecorded, or a difference that could make the reader find a `--signal` where sbatch 22.05 sets none.
"""

from __future__ import annotations

import re

from slurmtools.policy.directives import SBATCH_ALIASES, SBATCH_LONG, SBATCH_SHORT, SBATCH_22_05

from ..conftest import TEST_DATA

HELP = (TEST_DATA / "slurm" / "sbatch-22.05.8-help.txt").read_text()
PROBED = dict(line.split("\t") for line in
              (TEST_DATA / "slurm" / "sbatch-22.05.8-options.tsv").read_text().splitlines() if not line.startswith("#"))


def table_2205() -> dict[str, int]:
    """22.05's long options and kinds as the record says: SBATCH_LONG with SBATCH_22_05 applied."""
    out = {**SBATCH_LONG, **{k: v for k, v in SBATCH_22_05.items() if v is not None}}
    return {k: v for k, v in out.items() if not (k in SBATCH_22_05 and SBATCH_22_05[k] is None)}


def test_every_long_option_of_the_2205_help_is_known():
    listed = set(re.findall(r"(?<![\w-])--([a-z][a-z0-9-]+)", HELP))
    assert len(listed) > 90  # the capture is whole
    missing = sorted(listed - set(SBATCH_LONG) - set(SBATCH_22_05))
    assert not missing, f"sbatch 22.05 lists --{', --'.join(missing)}: add them to SBATCH_LONG or SBATCH_22_05"


def test_the_record_is_what_2205_sbatch_answers():
    probed = {k: (None if v == "unknown" else int(v)) for k, v in PROBED.items()}
    assert set(probed) >= set(SBATCH_LONG) | {k for k, v in SBATCH_22_05.items() if v is not None}
    want = table_2205()
    assert {k: v for k, v in probed.items() if v is not None} == want
    # tasks-per-node is no name of its own in 22.05's help, but its getopt takes it (the alias of ntasks-per-node)
    assert probed["tasks-per-node"] == 1 and SBATCH_ALIASES["tasks-per-node"] == "ntasks-per-node"


def _resolve(table: dict[str, int], prefix: str) -> str | None:
    """getopt_long: an exact name, else the one option (or aliases of one) the prefix begins; None: unknown or
    ambiguous."""
    if prefix in table:
        return SBATCH_ALIASES.get(prefix, prefix)
    hits = {SBATCH_ALIASES.get(k, k) for k in table if k.startswith(prefix)}
    return hits.pop() if len(hits) == 1 else None


def test_no_difference_lets_the_reader_see_a_signal_2205_would_not_set():
    t22 = table_2205()
    for name in set(t22) | set(SBATCH_LONG):
        for i in range(1, len(name) + 1):
            p = name[:i]
            a, b = _resolve(t22, p), _resolve(SBATCH_LONG, p)
            if a is not None and b is not None:
                assert a == b, (p, a, b)  # both take the word: as the same option
                # which words an option takes without `=` must match: a value kind against a no-value kind would
                # shift every later word
                assert (t22[a] == 1) == (SBATCH_LONG[b] == 1), (p, t22[a], SBATCH_LONG[b])
    shorts = set(re.findall(r"(?<![\w-])-([A-Za-z])\b", HELP)) - {"r"}  # `-r n` in --usage: 22.05 refuses it
    assert shorts == set(SBATCH_SHORT)
