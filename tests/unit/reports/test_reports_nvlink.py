"""Idle GPU-hours per NVLink domain, on the hand-written dump (numbers worked out in reports_handmade.py)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from datetime import datetime

import pytest

import reports_handmade as hm
from slurmtools.reports import capacity, metrics, outputs
from slurmtools.reports.sacct import read_sacct
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric

SINCE, UNTIL = datetime.fromisoformat(hm.SINCE), datetime.fromisoformat(hm.UNTIL)


def _report(fabric):
    site = load_site(None)
    events = capacity.read_events(hm.EVENTS)
    cap = capacity.capacity_table(capacity.nodes_from_site(site, fabric), events, SINCE, UNTIL)
    return metrics.compute(read_sacct(hm.TEXT, text=True).jobs, site, SINCE, UNTIL, capacity=cap, events=events,
                           fabric=fabric)


@pytest.fixture(scope="module")
def nv():
    # gpu06 and gpu07 share one NVLink domain (two hosts, 16 GPUs); every other host is its own NVSwitch domain
    fabric = load_fabric(load_site(None).fabric_path)
    fabric = dataclasses.replace(fabric, nvlink_domains={"nvl0": ("gpu06", "gpu07")})
    return _report(fabric)


def test_one_row_per_domain_with_its_gpus(nv):
    t = nv.tables["usage_by_nvlink_domain"]
    assert len(t) == 15  # nvl0 + the 14 other hosts
    assert t.loc["nvl0", "gpus"] == 16 and t.loc["nvl0", "hosts"] == 2
    assert t.loc["gpu01", "gpus"] == 8 and t.loc["gpu01", "hosts"] == 1
    assert "gpu06" not in t.index


def test_allocated_capacity_and_idle_by_hand(nv):
    t = nv.tables["usage_by_nvlink_domain"]
    # 106 held 16 GPUs on gpu[06-07] 00:00-06:00 in the window: 96 GPU-h, all in nvl0 (16 GPUs x 24 h = 384)
    assert t.loc["nvl0", "capacity_gpu_hours"] == pytest.approx(384)
    assert t.loc["nvl0", "allocated_gpu_hours"] == pytest.approx(96)
    assert t.loc["nvl0", "idle_gpu_hours"] == pytest.approx(288)
    assert t.loc["nvl0", "utilization_pct"] == pytest.approx(25)
    # gpu01: 101, 8 GPUs x 6 h = 48 of 192
    assert t.loc["gpu01", "allocated_gpu_hours"] == pytest.approx(48)
    assert t.loc["gpu01", "idle_gpu_hours"] == pytest.approx(144)
    # gpu05: the two array tasks, 2 GPUs x 2 h + 2 GPUs x 1 h
    assert t.loc["gpu05", "allocated_gpu_hours"] == pytest.approx(6)
    # gpu16 was down 00:00-12:00: 192 installed, 96 available, nothing allocated
    assert t.loc["gpu16", "capacity_gpu_hours"] == pytest.approx(192)
    assert t.loc["gpu16", "available_gpu_hours"] == pytest.approx(96)
    assert t.loc["gpu16", "idle_gpu_hours"] == pytest.approx(96)
    # every allocated GPU-hour of the window lands in some domain
    assert t["allocated_gpu_hours"].sum() == pytest.approx(203.5)
    assert t["available_gpu_hours"].sum() == pytest.approx(2976)


def test_single_host_domains_of_the_example_fabric():
    t = _report(load_fabric(load_site(None).fabric_path)).tables["usage_by_nvlink_domain"]
    assert len(t) == 16
    # 106's 96 GPU-h spread evenly over its two hosts
    assert t.loc["gpu06", "allocated_gpu_hours"] == pytest.approx(48)
    assert t.loc["gpu07", "allocated_gpu_hours"] == pytest.approx(48)


def test_in_every_output(nv, tmp_path):
    outputs.write(nv, tmp_path, ("csv", "json", "html", "md"))
    csv = (tmp_path / "usage_by_nvlink_domain.csv").read_text().splitlines()
    assert csv[0] == ("nvlink_domain,hosts,gpus,capacity_gpu_hours,available_gpu_hours,allocated_gpu_hours,"
                      "idle_gpu_hours,utilization_pct")
    assert any(line.startswith("nvl0,2,16,384.0,384.0,96.0,288.0,25.0") for line in csv)
    j = outputs.to_json(nv)["tables"]["usage_by_nvlink_domain"]
    assert {"nvlink_domain": "nvl0", "hosts": 2, "gpus": 16, "capacity_gpu_hours": 384.0,
            "available_gpu_hours": 384.0, "allocated_gpu_hours": 96.0, "idle_gpu_hours": 288.0,
            "utilization_pct": 25.0} in j
    html = (tmp_path / "report.html").read_text()
    assert "Idle GPU-hours per NVLink domain" in html and "<td class=\"t\">nvl0</td>" in html
    md = (tmp_path / "summary.md").read_text()
    # the most idle: nvl0 (288), then the untouched 8-GPU hosts (192 each), first gpu09 and gpu11
    assert ("Most idle NVLink domains: nvl0 (288.0 GPU-hours idle, 25.0% used), "
            "gpu09 (192.0 GPU-hours idle, 0.0% used), gpu11 (192.0 GPU-hours idle, 0.0% used)") in md


def test_no_fabric_no_table_and_networkx_stays_unloaded():
    r = metrics.compute(read_sacct(hm.TEXT, text=True).jobs, load_site(None), SINCE, UNTIL)
    assert "usage_by_nvlink_domain" not in r.tables
    code = ("import sys; import slurmtools.reports.metrics, slurmtools.reports.outputs; "
            "print('networkx' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
