"""Every right-sizing rule over synthetic runs: what it recommends, the evidence sentence, and when it stays
silent (too few runs, a timeout, too small a gap, a share of runs below the site's)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmtools.advise.model import RunUse
from slurmtools.advise.rules import advise, at_share, round_time
from slurmtools.resources import example_site
from slurmtools.site import load_site
from tests.unit.advise.sites import H200, site_file

BASE = RunUse(job_id=1, run=0, user="alice", account="vision", name="train-vit", state="COMPLETED", partition="gpu",
              gpu_type="h100", gpus=8, nodes=1, cpus=64, mem_mb=512 * 1024.0, time_limit_s=4 * 3600,
              elapsed_s=3600, total_cpu_s=64 * 3600 * 0.5, max_rss_mb=300 * 1024.0)


EXAMPLE = load_site(example_site())


@pytest.fixture(scope="module")
def site():
    return EXAMPLE


def runs(n: int, **kw) -> list[RunUse]:
    return [replace(BASE, job_id=100 + i, **kw) for i in range(n)]


def one(site, rs):
    (a,) = advise(rs, site)
    return a, {f.rule: f for f in a.findings}


def test_gpus_rule_counts_busy_gpus_per_run_and_states_the_share(site):
    rs = runs(12, gpu_util=(95.0, 90.0) + (0.0,) * 6) + runs(2, gpu_util=(90.0,) * 4 + (1.0,) * 4)
    rs = [replace(r, job_id=200 + i) for i, r in enumerate(rs)]
    a, f = one(site, rs)
    assert f["gpus"].evidence == "12 of your last 14 `train-vit` runs used at most 2 of 8 GPUs"
    assert f["gpus"].fix == "plan with --gpus 2" and f["gpus"].changes == {"gpus": (8, 2)}
    assert a.used["gpus_busy_at_share"] == 2 and a.used["gpu_use_from"] == "epilog"


def test_gpus_rule_needs_the_share_of_runs(site):
    # 10 of 14 runs (71%) on 2 GPUs is under the site's 80%: the share-quantile is 4 GPUs, not 2
    rs = runs(10, gpu_util=(95.0, 90.0) + (0.0,) * 6) + runs(4, gpu_util=(90.0,) * 4 + (0.0,) * 4)
    rs = [replace(r, job_id=300 + i) for i, r in enumerate(rs)]
    _, f = one(site, rs)
    assert f["gpus"].evidence == "14 of your last 14 `train-vit` runs used at most 4 of 8 GPUs"


def test_gpus_rule_from_slurm_gpuutil_says_so(site):
    a, f = one(site, runs(5, slurm_gpu_util=180.0))
    assert f["gpus"].evidence == ("5 of your last 5 `train-vit` runs used at most 2 of 8 GPUs (by Slurm's "
                                  "gres/gpuutil, GPU time worth that many)")
    assert a.used["gpu_use_from"] == "slurm gres/gpuutil"


def test_gpus_rule_silent_when_every_gpu_works_or_use_unknown(site):
    _, f = one(site, runs(5, gpu_util=(60.0,) * 8))
    assert "gpus" not in f
    _, f = one(site, runs(5))
    assert "gpus" not in f


def test_too_few_runs_give_no_finding(site):
    a, f = one(site, runs(2, gpu_util=(90.0,) + (0.0,) * 7, time_limit_s=86400))
    assert f == {} and a.runs == 2 and a.sentence() == ""


def test_time_rule_recommends_the_longest_run_with_headroom(site):
    rs = [replace(r, elapsed_s=2400 + 60 * i) for i, r in enumerate(runs(4))]  # longest 43 min, limit 4h
    _, f = one(site, rs)
    assert f["time"].evidence == "your time limit (4h) is 6x your longest run (43m) in 4 completed `train-vit` runs"
    assert f["time"].fix == "use --time 75m" and f["time"].changes == {"time_limit": (14400, 4500)}


def test_time_rule_silent_after_a_timeout_or_when_the_limit_is_close(site):
    rs = runs(4, elapsed_s=1800)
    _, f = one(site, rs[:3] + [replace(rs[3], state="TIMEOUT", elapsed_s=14400)])
    assert "time" not in f
    _, f = one(site, runs(4, elapsed_s=3 * 3600))  # 4h limit, 3h runs: under time_ratio 2
    assert "time" not in f


@pytest.mark.parametrize("secs,want", [(100, 300), (3599, 3600), (3601, 4500), (86399, 86400), (90001, 93600)])
def test_round_time(secs, want):
    assert round_time(secs) == want


def test_gpu_unit_names_the_smallest_mig_profile_that_holds_the_job(tmp_path):
    site = load_site(site_file(tmp_path, gpu_extra='mig_profiles = ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]'))
    rs = runs(5, gpus=1, gpu_util=(25.0,), gpu_mem_util=(10.0,), gpu_mem_mb=15 * 1024.0)
    _, f = one(site, rs)
    # 25% of the SMs needs 2 of 7 slices (28.6%); 15 GB with a tenth to spare needs 20 GB
    assert f["gpu_unit"].evidence == ("5 of your last 5 `train-vit` runs kept their one GPU at most 25% busy, 15.0 "
                                      "GB of GPU memory at most")
    assert f["gpu_unit"].fix == "ask for a MIG slice instead of a whole h100: --gres=gpu:2g.20gb:1"


def test_gpu_unit_follows_the_gpus_rule_down_to_one_gpu(tmp_path):
    site = load_site(site_file(tmp_path, gpu_extra="shards_per_gpu = 8"))
    _, f = one(site, runs(5, gpus=4, gpu_util=(30.0, 0.0, 0.0, 0.0)))
    assert f["gpus"].fix == "plan with --gpus 1"
    assert f["gpu_unit"].fix == "share a GPU: --gres=shard:3 (of 8 per h100)"


def test_gpu_unit_mps_and_none_when_busy_or_not_offered(tmp_path, site):
    mps = load_site(site_file(tmp_path, gpu_extra="mps = true"))
    _, f = one(mps, runs(5, gpus=1, gpu_util=(33.0,)))
    assert f["gpu_unit"].fix == "share a GPU through MPS: --gres=mps:40 (percent of one h100)"
    _, f = one(mps, runs(5, gpus=1, gpu_util=(70.0,)))  # above fraction_util_pct 40
    assert "gpu_unit" not in f
    _, f = one(site, runs(5, gpus=1, gpu_util=(10.0,)))  # the example h100 offers no smaller unit
    assert "gpu_unit" not in f


def test_memory_bound_names_the_type_with_more_bandwidth(tmp_path, site):
    rs = runs(4, gpus=2, gpu_util=(35.0, 30.0), gpu_mem_util=(85.0, 80.0))
    _, f = one(load_site(site_file(tmp_path, extra=H200, gpu_extra="memory_bandwidth_gbs = 3350")), rs)
    assert f["memory_bound"].evidence == ("4 of your last 4 `train-vit` runs were memory-bound (memory controller "
                                          "82% busy, SM 32%, medians)")
    assert f["memory_bound"].fix == "plan with --gpu-type h200 (4800 GB/s against h100's 3350 GB/s)"
    assert f["memory_bound"].changes == {"gpu_type": ("h100", "h200")}
    _, f = one(site, rs)  # the example site has no faster type: flagged, no fix
    assert f["memory_bound"].sentence().endswith("(no GPU type here has more memory bandwidth)")
    assert f["memory_bound"].fix == ""
    _, f = one(load_site(site_file(tmp_path, extra=H200, name="nobw.toml")), rs)  # h100's bandwidth not stated
    assert f["memory_bound"].sentence().endswith("(the site states no memory_bandwidth_gbs for h100)")


def test_memory_bound_silent_when_sm_is_busy(site):
    _, f = one(site, runs(4, gpus=2, gpu_util=(90.0, 85.0), gpu_mem_util=(85.0, 80.0)))
    assert "memory_bound" not in f


def test_cpu_and_memory_rules_fix_cpu_jobs(site):
    rs = runs(4, gpus=0, gpu_type="", cpus=32, total_cpu_s=32 * 3600 * 0.1, mem_mb=64 * 1024.0,
              max_rss_mb=4 * 1024.0)
    _, f = one(site, rs)
    assert f["cpu"].evidence == "4 of your last 4 `train-vit` runs kept their 32 CPUs at most 10% busy"
    assert f["cpu"].fix == "plan with --cpus 4" and f["cpu"].changes == {"cpus": (32, 4)}
    assert f["memory"].evidence == "your last 4 `train-vit` runs peaked at 4.0 GB of the 64.0 GB asked per node"
    assert f["memory"].fix == "plan with --mem 6G" and f["memory"].changes == {"mem_mb": (65536, 6144)}


def test_cpu_and_memory_rules_inform_gpu_jobs_without_a_fix(site):
    _, f = one(site, runs(4, total_cpu_s=64 * 3600 * 0.05, max_rss_mb=8 * 1024.0))
    assert f["cpu"].fix == "" and f["cpu"].evidence.endswith("(GPU jobs get the CPUs that come with their GPUs)")
    assert f["memory"].fix == "" and "8.0 GB of the 512.0 GB" in f["memory"].evidence


def test_the_sentence_joins_findings_in_rule_order(site):
    rs = runs(14, gpu_util=(95.0, 90.0) + (0.0,) * 6, elapsed_s=3600, total_cpu_s=None, max_rss_mb=None)
    rs = [replace(r, elapsed_s=3000 + 40 * i) for i, r in enumerate(rs)]
    a, _ = one(site, rs)
    assert a.sentence() == ("14 of your last 14 `train-vit` runs used at most 2 of 8 GPUs: plan with --gpus 2; your "
                            "time limit (4h) is 4x your longest run (3520s) in 14 completed `train-vit` runs: use "
                            "--time 90m")


def test_shapes_are_user_name_and_gpu_count(site):
    rs = runs(3, gpu_util=(90.0,) + (0.0,) * 7) + [replace(r, user="bob") for r in runs(3)] + \
        [replace(r, gpus=4) for r in runs(3)]
    got = {(a.shape.user, a.shape.name, a.shape.gpus): a.runs for a in advise(rs, site)}
    assert got == {("alice", "train-vit", 8): 3, ("bob", "train-vit", 8): 3, ("alice", "train-vit", 4): 3}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=3, max_size=30), st.floats(0.05, 1.0))
def test_gpus_rule_property(busy, share):
    """The recommended count is the smallest that `share` of the runs stayed within, never 0, never above asked,
    and the sentence counts exactly the runs within it."""
    site = replace(EXAMPLE, advise=replace(EXAMPLE.advise, runs_share=share, min_runs=3))
    rs = [replace(BASE, job_id=i + 1, gpu_util=(90.0,) * b + (0.0,) * (8 - b), time_limit_s=None)
          for i, b in enumerate(busy)]
    (a,) = advise(rs, site)
    f = {x.rule: x for x in a.findings}.get("gpus")
    k = max(at_share(busy, share), 1)
    if k >= 8:
        assert f is None
        return
    assert f is not None and f.changes == {"gpus": (8, k)}
    within = sum(b <= k for b in busy)
    assert within >= share * len(busy) - 1e-9
    assert k == 1 or sum(b <= k - 1 for b in busy) < share * len(busy)
    assert f.evidence == f"{within} of your last {len(busy)} `train-vit` runs used at most {k} of 8 GPUs"


def test_report_section_lists_shapes_with_advice_only(site):
    from slurmtools.advise.section import COLUMNS, right_sizing_table

    rs = runs(5, gpu_util=(90.0,) + (0.0,) * 7, time_limit_s=None) + \
        [replace(r, user="bob", gpu_util=(90.0,) * 8, time_limit_s=None) for r in runs(5)]
    t = right_sizing_table(advise(rs, site))
    assert tuple(t.columns) == COLUMNS and len(t) == 1
    row = t.iloc[0]
    assert (row["user"], row["job_name"], row["gpus"], row["runs"], row["gpus_busy"]) == ("alice", "train-vit", 8, 5,
                                                                                          1)
    assert row["recommendation"].startswith("5 of your last 5 `train-vit` runs used at most 1 of 8 GPUs: plan with "
                                            "--gpus 1")
    assert len(right_sizing_table([])) == 0
