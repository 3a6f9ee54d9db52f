"""What real clusters running Slurm 22.05 to 25.11 print that the lab dumps do not show, read by the report's reader
and counted by both engines: heterogeneous jobs and steps, pending arrays and array tasks, `.interactive`/`.extern`
steps, GPU types as AutoDetect names them, MIG slices, gres/shard and gres/mps, every job state, `None` and
`Unknown` times, federations and dumps of several clusters, `--units=G` and `--noconvert`, `-p` and `-X` dumps.

The dumps (tests/data/reports/sacct-handwritten-*.txt) are written by hand in sacct's format (tests/data/SOURCES.md).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reports_equal import assert_reports_equal
from slurmtools.errors import ParseError
from slurmtools.reports import columnar, metrics
from slurmtools.reports.sacct import read_sacct
from slurmtools.site import load_site

DATA = Path(__file__).resolve().parents[2] / "data" / "reports"
HET = DATA / "sacct-handwritten-25.11-het-array-gpus-P.txt"
STATES = DATA / "sacct-handwritten-22.05-states-P.txt"
FED = DATA / "sacct-handwritten-24.05-federation-P.txt"
TWO = DATA / "sacct-handwritten-23.11-two-clusters-P.txt"
UNITS = [DATA / "sacct-handwritten-25.11-units-G-P.txt", DATA / "sacct-handwritten-25.11-units-noconvert-P.txt"]
ALL = [HET, STATES, FED, TWO, *UNITS]
SINCE, UNTIL = datetime(2026, 11, 2), datetime(2026, 11, 3)


@pytest.fixture(scope="module")
def site():
    return load_site(None)


def _variants(path: Path) -> dict[str, bytes]:
    """The dump as written (`-P`), as `sacct -p` prints it (every line ends with the delimiter) and as `sacct -X`
    prints it (allocations only: no step line)."""
    lines = path.read_text().splitlines()
    return {"P": path.read_bytes(),
            "p": ("\n".join(ln + "|" for ln in lines) + "\n").encode(),
            "X": ("\n".join(ln for i, ln in enumerate(lines) if i == 0 or "." not in ln.split("|")[1]) + "\n").encode()}


def _careful(data: bytes, **kw):
    return read_sacct(data, source="x", careful=True, **kw)


def _both(jobs, site, notes=()):
    old = metrics.compute(jobs, site, SINCE, UNTIL, notes=list(notes))
    new = columnar.compute(jobs, site, SINCE, UNTIL, notes=list(notes))
    assert_reports_equal(old, new)
    return old


@pytest.mark.parametrize("kind", ["P", "p", "X"])
@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_shape_reads_without_a_bad_row_and_alike_on_both_paths(path, kind):
    data = _variants(path)[kind]
    fast = read_sacct(data, source="x")
    assert fast.bad.rows == []
    careful = _careful(data)
    assert careful.bad.rows == []
    assert careful.jobs.astype(str).equals(fast.jobs.astype(str))
    assert (careful.steps, careful.notes) == (fast.steps, fast.notes)
    # -p and -X read as -P does, less the steps' use under -X
    plain = read_sacct(path)
    cols = [c for c in fast.jobs.columns if kind != "X" or c not in ("gpu_util_slurm", "gpu_mem_slurm_mb")]
    assert fast.jobs[cols].astype(str).equals(plain.jobs[cols].astype(str))


def test_het_jobs_arrays_gpu_names_and_steps_are_read_as_sacct_keeps_them():
    j = read_sacct(HET).jobs.set_index("job_id")
    # a heterogeneous job's components are allocations of their own, each with its JobIDRaw and TRES
    assert (j.loc["2001+0", "job_id_raw"], j.loc["2001+0", "gpus"]) == (2001, 8)
    assert (j.loc["2001+1", "job_id_raw"], j.loc["2001+1", "gpus"]) == (2002, 0)
    assert j.loc["2001+0", "gpu_type"] == "nvidia_h100_80gb_hbm3"
    # steps 2001.batch and 2001.0 belong to component +0 (by JobIDRaw); 2010.0+0 and 2010.0+1 (a het step) to 2010
    # Slurm's gres/gpuutil is a task's SM use summed over its GPUs, averaged over the step's tasks: the GPUs' mean
    # is the figure x NTasks / the step's GPUs (one task each here): 2001.0's 700 on 8 GPUs is 87.5 %
    assert (j.loc["2001+0", "gpu_util_slurm"], j.loc["2001+0", "gpu_mem_slurm_mb"]) == (87.5, 71680)
    assert j.loc["2010", "gpu_util_slurm"] == 97.5  # 2010.0+0: 390 on its 4 GPUs
    assert j.loc["2020", "gpu_util_slurm"] == 35  # the .interactive step, one GPU
    # the pending array is one record under the array's id, with nothing allocated; its tasks have their own ids
    assert (j.loc["2100_[4-9%2]", "job_id_raw"], j.loc["2100_[4-9%2]", "state"]) == (2100, "PENDING")
    assert pd.isna(j.loc["2100_[4-9%2]", "start"]) and j.loc["2100_[4-9%2]", "req_gpus"] == 1
    assert [j.loc[f"2100_{k}", "job_id_raw"] for k in range(4)] == [2101, 2102, 2103, 2104]
    assert pd.isna(j.loc["2100_3", "end"]) and j.loc["2100_3", "state"] == "RUNNING"


def test_a_job_of_several_gpu_types_is_one_run_not_a_requeue(site):
    """Job 2021 holds two MIG profiles: a row per type, one run. The rows after the first used to count as later
    runs, so the first was reported requeued and preempted, its GPU-hours lost."""
    acc = read_sacct(HET)
    j = acc.jobs[acc.jobs["job_id"] == "2021"]
    assert sorted(zip(j["gpu_type"].astype(str), j["gpus"])) == [("1g.10gb", 2), ("3g.40gb", 1)]
    r = _both(acc.jobs, site, acc.notes)
    assert (r.summary["preempted_runs"], r.summary["requeued_runs"]) == (0, 0)
    assert r.summary["gpu_hours_lost_to_preemption"] == 0
    assert r.summary["jobs"] == 9  # 2021 once; 2001+1, 2031, 2030 and the pending array hold no GPU


def test_a_resized_job_is_one_run_not_a_preemption(site):
    """sacct -D prints a job resized while it ran as a row that ended RESIZING and a row from the resize on."""
    acc = read_sacct(STATES)
    r = _both(acc.jobs, site, acc.notes)
    pre = r.tables["preempted_runs"]
    assert sorted(pre["job_id"]) == ["3003", "3004", "3008"]  # node failure requeued, scontrol requeue, PREEMPTED
    assert r.summary["preempted_runs"] == 2 and r.summary["requeued_runs"] == 2
    runs = metrics.prepare(acc.jobs, site, UNTIL, [])
    r3005 = runs[runs["job_id_raw"] == 3005]
    assert r3005["run"].tolist() == [0, 0] and not r3005["requeued"].any()


def test_every_state_and_unset_time_is_kept_as_sacct_wrote_it():
    j = read_sacct(STATES).jobs.set_index("job_id")
    assert j.loc["3001", "state"] == "CANCELLED"  # "CANCELLED by 0"
    states = set(j["state"].astype(str))
    assert {"OUT_OF_MEMORY", "NODE_FAIL", "REQUEUED", "RESIZING", "BOOT_FAIL", "DEADLINE", "PREEMPTED", "SUSPENDED",
            "RUNNING", "PENDING", "TIMEOUT", "FAILED"} <= states
    assert pd.isna(j.loc["3007", "start"]) and pd.notna(j.loc["3007", "end"])   # Start None, never ran
    assert pd.isna(j.loc["3013", "eligible"]) and pd.isna(j.loc["3013", "start"])  # Eligible Unknown, Start None
    assert j.loc["3012", "partition"] == "gpu,cpu" and j.loc["3012", "nodelist"] == "None assigned"
    assert j.loc["3015", "qos"] == "" and j.loc["3015", "exit_code"] == "0:9"


def test_units_g_and_noconvert_read_alike():
    a, b = (read_sacct(p).jobs for p in UNITS)
    assert a["gpu_util_slurm"].tolist() == b["gpu_util_slurm"].tolist() == [75, 60]  # 150 on 2 GPUs, 60 on 1
    # gres/gpumem: 20.50G and 22011707392 bytes are both 20992 MB
    assert a["gpu_mem_slurm_mb"].tolist() == b["gpu_mem_slurm_mb"].tolist() == [20992, 768]


def test_gpu_shares_and_mig_slices_are_said_not_silently_counted_or_dropped():
    """gres/shard and gres/mps jobs hold no whole GPU: they were dropped from GPU-hours without a word."""
    notes = read_sacct(HET).notes
    assert ("2 job run(s) held shares of a GPU (gres/shard or gres/mps) and no whole GPU: not counted in GPU-hours, "
            "which count whole GPUs (first: job 2030)") in notes
    mig = [n for n in notes if "MIG slices" in n]
    assert mig == ["4 job run row(s) held MIG slices (1g.10gb, 3g.40gb, nvidia_a100-sxm4-80gb_3g.40gb): each slice "
                   "counts as one GPU, as Slurm's gres/gpu counts it, not as a fraction of one"]
    assert not [n for n in read_sacct(STATES).notes if "share" in n or "MIG" in n]


def test_job_ids_are_per_cluster_in_a_dump_of_several(site):
    """`sacct -L` lists job 7001 of alpha and job 7001 of beta: one job's steps gave the other its utilisation,
    and the later was taken for a second run of the earlier, which was then reported requeued and preempted."""
    acc = read_sacct(TWO)
    j = acc.jobs
    assert list(zip(j["cluster"].astype(str), j["gpu_util_slurm"])) == [("alpha", 95), ("beta", 5)]  # per GPU
    assert _careful(TWO.read_bytes()).jobs.astype(str).equals(j.astype(str))
    runs = metrics.prepare(j, site, UNTIL, [])
    assert runs["run"].tolist() == [0, 0] and not runs["requeued"].any()
    r = _both(j, site, acc.notes)
    assert (r.summary["jobs"], r.summary["requeued_runs"], r.summary["preempted_runs"]) == (2, 0, 0)
    # the site's cluster is kept, and the others said
    beta = read_sacct(TWO, cluster="beta")
    assert beta.jobs["cluster"].astype(str).tolist() == ["beta"] and beta.jobs["gpu_util_slurm"].tolist() == [5]
    assert ("1 job run row(s) of other clusters (alpha) left out: the site file names cluster beta (the dump holds "
            "2 clusters)") in beta.notes
    with pytest.raises(ParseError) as e:
        read_sacct(TWO, cluster="lab")
    assert str(e.value) == (f"{TWO}: the dump holds jobs of 2 clusters (alpha, beta) and none of lab, the cluster "
                            f"the site file names (cluster_name): dump it with `sacct -M lab`")
    # a dump of one cluster is read whole, whatever the site file calls it
    assert len(read_sacct(STATES, cluster="elsewhere").jobs) == len(read_sacct(STATES).jobs)


def test_a_federation_keeps_its_own_cluster_and_a_revoked_sibling_holds_nothing():
    acc = read_sacct(FED, cluster="fedB")
    j = acc.jobs
    assert list(zip(j["job_id"], j["state"].astype(str), j["gpus"])) == [("67109365", "COMPLETED", 2)]
    assert j["gpu_util_slurm"].tolist() == [75]
    a = read_sacct(FED, cluster="fedA").jobs
    assert sorted(zip(a["job_id"], a["state"].astype(str), a["gpus"])) == [("67109365", "REVOKED", 0),
                                                                           ("67109366", "COMPLETED", 4)]
    assert np.isnan(a.loc[a["state"] == "REVOKED", "gpu_util_slurm"]).all()  # fedB's step is not fedA's


def test_tied_waste_rows_come_in_the_same_order_from_both_engines(site):
    """Runs with the same idle GPU-hours: the old engine's sort was not stable and put them in either order (the
    differential test of test_reports_columnar found such a generated dump). Here three copies of one wasteful run
    under other job ids, placed out of order in the frame, tie: both engines list them by job."""
    from slurmtools.reports import capacity, synth
    from slurmtools.topology.sitefile import load_fabric

    text = synth.generate(44, datetime(2026, 10, 1), 7, seed=10000, nodes=16, node_fmt="gpu{:02d}", arrays=0.3,
                          account_names=["vision", "nlp", "students"])
    jobs = read_sacct(text, text=True).jobs
    one = jobs[(jobs["gpus"] > 0) & jobs["end"].notna() & (jobs["state"] == "COMPLETED")].iloc[[0]]
    copies = pd.concat([one.assign(job_id=str(k), job_id_raw=k, gpu_util_slurm=np.float32(1.0))
                        for k in (90050, 90040, 90045)], ignore_index=True)
    jobs = pd.concat([jobs, copies], ignore_index=True)
    for c in ("user", "account", "partition", "qos", "state", "gpu_type", "cluster"):
        jobs[c] = jobs[c].astype("category")
    since, until = datetime(2026, 10, 1), datetime(2026, 10, 7, 16)
    cap = capacity.capacity_table(capacity.nodes_from_site(site, load_fabric(site.fabric_path)), None, since, until)
    old = metrics.compute(jobs, site, since, until, capacity=cap, top=50)
    assert_reports_equal(old, columnar.compute(jobs, site, since, until, capacity=cap, top=50))
    ids = [i for i in old.tables["top_waste_jobs"]["job_id"].tolist() if i.startswith("900")]
    assert ids == ["90040", "90045", "90050"]


def test_the_report_reads_the_site_files_cluster(tmp_path):
    """`slurmtools report` hands the site's cluster_name to the reader (`ingest.load_jobs`)."""
    from slurmtools.reports import ingest

    jobs, _, notes, _ = ingest.load_jobs(SINCE, UNTIL, sacct_file=TWO, cluster="alpha")
    assert jobs["cluster"].astype(str).tolist() == ["alpha"] and jobs["gpu_util_slurm"].tolist() == [95]
    assert any("other clusters (beta) left out" in n for n in notes)
