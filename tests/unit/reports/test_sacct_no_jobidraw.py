"""A dump without JobIDRaw (`sacct -P -o JobID,User,...`, a field list of the user's own): the steps of array tasks
and of heterogeneous job components (`123_4.batch`, `77+1.0`) were keyed by the JobID's leading number, the array's
or het job's, which is no allocation row's id there, so Slurm's GPU use of those steps was lost (NaN). Each step
must join its own task or component, as in the same dump with JobIDRaw."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reports_equal import _same, assert_tables_equal
from slurmtools.reports import metrics
from slurmtools.reports.sacct import read_sacct
from slurmtools.site import load_site

DATA = Path(__file__).resolve().parents[2] / "data" / "reports"
HET = DATA / "sacct-handwritten-25.11-het-array-gpus-P.txt"
SINCE, UNTIL = datetime(2026, 11, 2), datetime(2026, 11, 3)
LOST = "step(s) reporting GPU use (gres/gpuutil, gres/gpumem) have no allocation row in the dump"


def _drop_raw(text: str) -> str:
    lines = text.splitlines()
    k = lines[0].split("|").index("JobIDRaw")
    return "\n".join("|".join(f for i, f in enumerate(ln.split("|")) if i != k) for ln in lines) + "\n"


def _read(text: str):
    """Both reading paths, which must agree."""
    fast = read_sacct(text.encode(), source="x")
    careful = read_sacct(text.encode(), source="x", careful=True)
    assert careful.jobs.astype(str).equals(fast.jobs.astype(str))
    assert (careful.notes, careful.steps) == (fast.notes, fast.steps)
    assert fast.bad.rows == [] and careful.bad.rows == []
    return fast


def _by_job(jobs: pd.DataFrame) -> pd.DataFrame:
    """The runs by JobID text, without JobIDRaw (a code of the text where the dump lacks it)."""
    return jobs.drop(columns="job_id_raw").sort_values(["job_id", "start", "gpu_type"], kind="stable") \
        .reset_index(drop=True).astype(str)


def _same_without_raw(text: str):
    with_raw, without = _read(text), _read(_drop_raw(text))
    assert _by_job(without.jobs).equals(_by_job(with_raw.jobs))
    # a step without its allocation row is named by its job: JobIDRaw where the dump has it, else the JobID text
    bare = lambda notes: [re.sub(r"\(first: job [^)]*\)", "", n) for n in notes if "no JobIDRaw" not in n]  # noqa
    assert bare(without.notes) == bare(with_raw.notes)
    return with_raw, without


def test_steps_of_array_tasks_and_het_components_join_their_own_allocation():
    h = "JobID|User|State|Start|End|NTasks|AllocTRES|TRESUsageInAve"
    t = "2026-11-02T01:00:00|2026-11-02T02:00:00"
    text = "\n".join([
        h,
        f"123_4|ann|COMPLETED|{t}||billing=4,cpu=4,gres/gpu=2,node=1|",
        f"123_4.batch|ann|COMPLETED|{t}|1|cpu=4,gres/gpu=2,node=1|gres/gpumem=1000M,gres/gpuutil=60",
        f"123_4.0|ann|COMPLETED|{t}|2|cpu=4,gres/gpu=2,node=1|gres/gpumem=3000M,gres/gpuutil=90",
        f"123_5|ann|COMPLETED|{t}||billing=4,cpu=4,gres/gpu=1,node=1|",
        f"123_5.batch|ann|COMPLETED|{t}|1|cpu=4,gres/gpu=1,node=1|gres/gpumem=500M,gres/gpuutil=40",
        f"77+0|bob|COMPLETED|{t}||billing=4,cpu=4,node=1|",
        f"77+0.batch|bob|COMPLETED|{t}|1|cpu=4,node=1|gres/gpumem=0M",
        f"77+1|bob|COMPLETED|{t}||billing=4,cpu=4,gres/gpu=4,node=1|",
        f"77+1.batch|bob|COMPLETED|{t}|1|cpu=4,gres/gpu=4,node=1|gres/gpumem=2G,gres/gpuutil=100",
        f"77+1.0|bob|COMPLETED|{t}|4|cpu=4,gres/gpu=4,node=1|gres/gpumem=8G,gres/gpuutil=70",
    ]) + "\n"
    j = _read(text).jobs.set_index("job_id")
    # 123_4.0: 90 x 2 tasks / 2 GPUs; 77+1.0: 70 x 4 tasks / 4 GPUs; the busiest step wins
    assert j.loc["123_4", ["gpu_util_slurm", "gpu_mem_slurm_mb"]].tolist() == [90, 3000]
    assert j.loc["123_5", ["gpu_util_slurm", "gpu_mem_slurm_mb"]].tolist() == [40, 500]
    assert j.loc["77+1", ["gpu_util_slurm", "gpu_mem_slurm_mb"]].tolist() == [70, 8192]
    assert pd.isna(j.loc["77+0", "gpu_util_slurm"]) and j.loc["77+0", "gpu_mem_slurm_mb"] == 0


def test_the_het_and_array_dump_reads_alike_with_and_without_jobidraw():
    with_raw, without = _same_without_raw(HET.read_text())
    j = without.jobs.set_index("job_id")
    assert (j.loc["2001+0", "gpu_util_slurm"], j.loc["2001+0", "gpu_mem_slurm_mb"]) == (87.5, 71680)
    assert [j.loc[f"2100_{k}", "gpu_util_slurm"] for k in (0, 1)] == [91, 88]
    # the pending array range stays one PENDING row with nothing allocated, joined by no step
    pend = j.loc["2100_[4-9%2]"]
    assert (pend["state"], pend["gpus"], pend["job_id_raw"] < 0) == ("PENDING", 0, True)
    assert pd.isna(pend["gpu_util_slurm"]) and pd.isna(pend["gpu_mem_slurm_mb"])


def test_the_report_numbers_are_the_same_with_and_without_jobidraw():
    site = load_site(None)
    with_raw, without = _same_without_raw(HET.read_text())
    a = metrics.compute(with_raw.jobs, site, SINCE, UNTIL)
    b = metrics.compute(without.jobs, site, SINCE, UNTIL)
    assert b.summary.keys() == a.summary.keys()
    assert [k for k in a.summary if not _same(a.summary[k], b.summary[k])] == []  # sums in another row order
    assert set(a.tables) == set(b.tables)
    for name in a.tables:
        ta, tb = (t.reset_index().drop(columns=["job_id_raw"], errors="ignore") for t in (a.tables[name],
                                                                                        b.tables[name]))
        assert_tables_equal(ta, tb, name)


@pytest.mark.parametrize("seed", [4, 5])
def test_a_generated_dump_with_arrays_reads_alike_with_and_without_jobidraw(seed):
    from slurmtools.reports import synth

    text = synth.generate(400, datetime(2026, 10, 1), 3, seed=seed, nodes=16, arrays=0.5)
    with_raw, without = _same_without_raw(text)
    tasks = without.jobs["job_id"].str.contains("_", regex=False)
    assert tasks.sum() > 50 and without.jobs.loc[tasks, "gpu_util_slurm"].notna().sum() > 50


def test_steps_without_their_allocation_row_are_said_not_silently_dropped():
    keep = [ln for ln in HET.read_text().splitlines() if not ln.startswith(("2100_0|", "2001+0|", "2010|"))]
    with_raw, without = _same_without_raw("\n".join(keep) + "\n")
    # 2100_0.batch, 2001+0.batch, 2001+0.0, 2010.0+0 and 2010.0+1 report GPU use (the .extern steps none)
    for acc, first in ((with_raw, "2001"), (without, "2001+0")):
        said = [n for n in acc.notes if LOST in n]
        assert len(said) == 1 and said[0].startswith("5 ") and f"(first: job {first})" in said[0]
        assert not acc.jobs["job_id"].isin(["2100_0", "2001+0", "2010"]).any()
    assert not any(LOST in n for n in _read(_drop_raw(HET.read_text())).notes)


def test_a_step_is_not_joined_to_a_plain_job_of_its_leading_number():
    # a step of array task 9_1 whose task row is not in the dump; job 9 is another allocation's row: the step's
    # use is not given to job 9 (by its leading number), it is said as belonging to no run
    h = "JobID|State|Start|End|AllocTRES|TRESUsageInAve"
    t = "2026-11-02T01:00:00|2026-11-02T02:00:00"
    acc = _read("\n".join([h, f"9|COMPLETED|{t}|gres/gpu=1|",
                           f"9_1.batch|COMPLETED|{t}|gres/gpu=1|gres/gpumem=1G,gres/gpuutil=50"]) + "\n")
    assert acc.jobs["job_id"].tolist() == ["9"] and np.isnan(acc.jobs["gpu_util_slurm"]).all()
    assert any(LOST in n and "(first: job 9_1)" in n for n in acc.notes)


def test_array_tasks_of_two_clusters_keep_their_own_steps():
    h = "JobID|State|Start|End|NTasks|AllocTRES|TRESUsageInAve|Cluster"
    t = "2026-11-02T01:00:00|2026-11-02T02:00:00"
    rows = [f"5_1|COMPLETED|{t}||gres/gpu=1|{{}}|a", f"5_1.batch|COMPLETED|{t}|1|gres/gpu=1|gres/gpuutil=30|a",
            f"5_1|COMPLETED|{t}||gres/gpu=1||b", f"5_1.batch|COMPLETED|{t}|1|gres/gpu=1|gres/gpuutil=80|b"]
    acc = _read("\n".join([h, *(r.replace("{}", "") for r in rows)]) + "\n")
    got = dict(zip(acc.jobs["cluster"].astype(str), acc.jobs["gpu_util_slurm"]))
    assert got == {"a": 30, "b": 80}
    mine = read_sacct(("\n".join([h, *(r.replace("{}", "") for r in rows)]) + "\n").encode(), source="x",
                      cluster="b")
    assert mine.jobs["gpu_util_slurm"].tolist() == [80]
