"""Report numbers on the hand-written dump (see reports_handmade.py for the worked-out table)."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd
import pytest

import reports_handmade as hm
from slurmtools.reports import capacity, metrics
from slurmtools.reports.sacct import read_sacct
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric

SINCE, UNTIL = datetime.fromisoformat(hm.SINCE), datetime.fromisoformat(hm.UNTIL)


@pytest.fixture(scope="module")
def rep():
    site = load_site(None)
    acc = read_sacct(hm.TEXT, text=True)
    events = capacity.read_events(hm.EVENTS)
    cap = capacity.capacity_table(capacity.nodes_from_site(site, load_fabric(site.fabric_path)), events,
                                  SINCE, UNTIL)
    return metrics.compute(acc.jobs, site, SINCE, UNTIL, capacity=cap, events=events, notes=acc.notes)


def test_totals_capacity_and_cost(rep):
    s = rep.summary
    assert s["gpu_hours"] == pytest.approx(203.5)
    assert s["installed_gpu_hours"] == pytest.approx(128 * 24)
    assert s["down_gpu_hours"] == pytest.approx(96)  # gpu16 down 12 h; the overlapping drain is not counted twice
    assert s["available_gpu_hours"] == pytest.approx(2976)
    assert s["utilization_pct"] == pytest.approx(203.5 / 2976 * 100)
    assert s["idle_capacity_gpu_hours"] == pytest.approx(2976 - 203.5)
    assert s["cost"] == pytest.approx(203.5 * 2.40)
    assert s["jobs"] == 8  # raw ids 101-107 and 110; not 108 (pending) or 109 (no GPU)
    assert s["runs"] == 9  # 102 ran twice


def test_by_tier_account_user(rep):
    t = rep.tables
    assert t["by_tier"]["gpu_hours"].to_dict() == pytest.approx({"production": 80, "standard": 117.5,
                                                                 "scavenger": 6})
    assert t["by_account"]["gpu_hours"].to_dict() == pytest.approx({"vision": 86, "nlp": 116, "students": 1.5})
    assert t["by_user"]["gpu_hours"]["bob"] == pytest.approx(116)
    assert t["by_partition"].loc["gpu", "utilization_pct"] == pytest.approx(203.5 / 2976 * 100)
    assert t["by_gpu_type"].loc["h100", "cost"] == pytest.approx(488.4)
    assert t["by_tier"].loc["standard", "share_of_use_pct"] == pytest.approx(117.5 / 203.5 * 100)


def test_queue_wait(rep):
    s = rep.summary
    assert s["median_wait_min"] == pytest.approx(9)  # 0,0,0,8,10,30,60,600
    w = rep.tables["wait_by_tier"]
    assert w.loc["production", "median_wait_min"] == pytest.approx(45)
    assert w.loc["standard", "median_wait_min"] == pytest.approx(4)
    assert w.loc["scavenger", "median_wait_min"] == pytest.approx(300)
    assert w.loc["standard", "runs"] == 4
    assert w.loc["production", "p90_wait_min"] == pytest.approx(30 + 0.9 * 30)
    size = rep.tables["wait_by_size"]
    assert size.loc["5-8", "runs"] == 2 and size.loc["1", "runs"] == 2
    assert int(rep.wait_hist.to_numpy().sum()) == 8


def test_preemption_and_requeue(rep):
    p = rep.tables["preemption_by_tier"]
    assert p.loc["standard", "preempted_runs"] == 1
    assert p.loc["standard", "requeued_runs"] == 1
    assert p.loc["standard", "gpu_hours_lost"] == pytest.approx(12)
    assert rep.summary["gpu_hours_lost_to_preemption"] == pytest.approx(12)
    assert rep.summary["failed_runs"] == 1


def test_efficiency_from_slurm_gpuutil(rep):
    s = rep.summary
    assert s["gpu_hours_with_utilization"] == pytest.approx(48 + 1)
    assert s["idle_gpu_hours_allocated"] == pytest.approx(48 * 0.1 + 1 * 0.95)
    waste = rep.tables["top_waste_jobs"]
    assert list(waste["job_id"]) == ["110"]  # 101 ran at 90 %, above the threshold
    assert waste.loc[0, "name"] == "a|b <script>alert(1)</script>"


def test_budget_month_to_date(rep):
    b = rep.tables["budget"]
    # 106 began 11-01 18:00: all 12 h x 16 GPUs count this month; 2 of 30 days have passed
    assert b.loc["nlp", "month_to_date_gpu_hours"] == pytest.approx(12 + 8 + 192)
    assert b.loc["nlp", "projected_month_gpu_hours"] == pytest.approx(212 * 15)
    assert b.loc["vision", "not_charged_gpu_hours"] == pytest.approx(6)
    assert b.loc["students", "budget_used_pct"] == pytest.approx(1.5 / 2000 * 100)
    assert set(b["status"]) == {"ok"}


def test_timeline_adds_up_and_capacity_line(rep):
    tl = rep.timeline
    assert len(tl) == 24  # a one-day window is shown hour by hour
    tiers = [c for c in tl.columns if c != "capacity_gpu_hours"]
    assert tl[tiers].to_numpy().sum() == pytest.approx(203.5)
    assert tl["capacity_gpu_hours"].iloc[0] == pytest.approx(120)  # gpu16's 8 GPUs down
    assert tl["capacity_gpu_hours"].iloc[-1] == pytest.approx(128)
    assert tl.loc[pd.Timestamp("2026-11-02T20:00"), "production"] == pytest.approx(8)


def test_epilog_utilisation_wins_over_slurm(rep):
    site = load_site(None)
    acc = read_sacct(hm.TEXT, text=True)
    ep = pd.DataFrame({"job_id_raw": [101, 102, 102], "run": [0, 0, 1], "gpu_util_pct": [10.0, 50.0, 20.0]})
    r = metrics.compute(acc.jobs, site, SINCE, UNTIL, epilog=ep)
    s = r.summary
    assert s["gpu_hours_with_utilization"] == pytest.approx(48 + 12 + 8 + 1)
    assert s["idle_gpu_hours_allocated"] == pytest.approx(48 * 0.9 + 12 * 0.5 + 8 * 0.8 + 0.95)
    assert list(r.tables["top_waste_jobs"]["job_id"]) == ["101", "102", "110"]
    assert s["utilization_pct"] is None  # no capacity given: said so, not invented


def test_untyped_gpus_take_the_partitions_only_type():
    text = ("JobID|State|Start|End|AllocTRES|Partition|QOS|Account|User\n"
            "7|COMPLETED|2026-11-02T00:00:00|2026-11-02T01:00:00|cpu=1,gres/gpu=2|gpu|standard|nlp|bob\n")
    r = metrics.compute(read_sacct(text, text=True).jobs, load_site(None), SINCE, UNTIL)
    assert r.tables["by_gpu_type"].index.tolist() == ["h100"]
    assert r.summary["cost"] == pytest.approx(2 * 2.40)


def test_empty_window_still_reports():
    r = metrics.compute(read_sacct(hm.TEXT, text=True).jobs, load_site(None), datetime(2025, 1, 1),
                        datetime(2025, 1, 2))
    assert r.summary["gpu_hours"] == 0 and r.summary["median_wait_min"] is None
    assert np.isfinite(len(r.timeline))


def test_placement_counts_runs_spread_over_extra_leaves():
    site = load_site(None)
    fabric = load_fabric(site.fabric_path)
    spread = hm._row("COMPLETED", "spread", "120", "120", "bob", "nlp", "standard", hm.D + "01:00:00",
                     hm.D + "01:00:00", hm.D + "01:00:00", hm.D + "02:00:00", 16, 2, "gpu[04-05]")
    acc = read_sacct(hm.TEXT + spread + "\n", text=True)
    cap = capacity.capacity_table(capacity.nodes_from_site(site, fabric), None, SINCE, UNTIL)
    r = metrics.compute(acc.jobs, site, SINCE, UNTIL, capacity=cap, fabric=fabric)
    p = r.tables["placement_by_tier"]
    # 106 (gpu[06-07]) sits in one leaf; 120 (gpu04 + gpu05) straddles two where one would hold its 2 nodes
    assert p.loc["standard", "multi_node_runs"] == 2
    assert p.loc["standard", "runs_on_more_leaves_than_needed"] == 1
    assert p.loc["standard", "their_gpu_hours"] == pytest.approx(16)
    leaf = r.tables["usage_by_leaf"]["gpu_hours"]
    assert leaf.sum() == pytest.approx(203.5 + 16)
    # leaf1 gpu01-04: 101 (48), 102's runs on gpu02/gpu03 (12 + 8), 103 (0.5), half of 120 (8)
    assert leaf["leaf1"] == pytest.approx(48 + 12 + 8 + 0.5 + 8)
    # leaf2 gpu05-08: 104 and 105 (4 + 2), 106 (96), 107 (32), the other half of 120 (8); leaf3: 110 on gpu10
    assert leaf["leaf2"] == pytest.approx(4 + 2 + 96 + 32 + 8)
    assert leaf["leaf3"] == pytest.approx(1) and leaf["leaf4"] == 0
    assert r.tables["usage_by_leaf"].loc["leaf1", "available_gpu_hours"] == pytest.approx(4 * 8 * 24)
