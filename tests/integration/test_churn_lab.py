"""Churn (issue 16): checkpointing trainers and plain jobs preempted, requeued and rerun many times, nothing lost
and every run accounted.

40 trainers (examples/checkpoint_trainer.py through the batch wiring) and 10 plain programs on the scavenger and
standard tiers, production jobs arriving at random on busy nodes, requeued jobs restarted at once with
`slurmtools admin restart-now` or left to Slurm's requeue hold. Asserted (tests/integration/churn.py): every job
ends COMPLETED; every trainer's result is the uninterrupted run's; each resume starts from the newest save, so the
steps redone are at most the work since it; every run has its epilog record under sacct's run number with Slurm's
start; the report's preempted, requeued and failed runs and GPU-hours lost equal what sacct and the trainers'
checkpoints say; no node drained. Seeded: SLURMTOOLS_CHURN_SEED replays a run's choices."""

from __future__ import annotations

import pytest

from tests.integration.churn import ChurnConfig, run_churn, seed_from_env

pytestmark = pytest.mark.lab


def test_churn_loses_nothing_and_the_report_equals_sacct(lab):
    cfg = ChurnConfig(seed=seed_from_env(16))
    r = run_churn(lab, cfg, log=lambda m: print(m, flush=True))
    print(r.table())
    assert r.preemptions >= 20, r.table()
    assert r.immediate >= 5, r.table()
    assert r.problems == [], f"seed {r.seed} (replay: SLURMTOOLS_CHURN_SEED={r.seed})\n{r.table()}"
