"""Energy in the report (issue 13 section 3), over the hand-made sacct dump (reports_handmade) and epilog records
whose counters are written here: kWh, cost and CO2e per job, user, account, tier and GPU type equal the values
worked out by hand from the recorded counters; idle GPUs' energy apart; unknown energy (no prolog mark, a counter
reset, no record) never counted; Slurm's energy TRES used where the epilog has none; the slack windows table;
every output format carries them; the site's [energy] and [telemetry] keys are validated."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

import reports_handmade as hm
from slurmtools.errors import ConfigError
from slurmtools.reports import energy, ingest, metrics, outputs
from slurmtools.reports.epilog import read_epilog_dir
from slurmtools.reports.sacct import read_sacct
from slurmtools.site import load_site

REPO = Path(__file__).resolve().parents[3]
SINCE, UNTIL = datetime.fromisoformat(hm.SINCE), datetime.fromisoformat(hm.UNTIL)
PRICE, CARBON = 0.2, 0.4
KWH = 3.6e9  # mJ per kWh


def t(s: str) -> float:
    return datetime.fromisoformat(s).timestamp()


def site_with(tmp_path: Path, extra: str):
    text = (REPO / "site_configs/example/site.toml").read_text()
    text = text.replace('"../../topology/example/fabric.toml"', f'"{REPO}/topology/example/fabric.toml"')
    p = tmp_path / "site.toml"
    p.write_text(text + "\n" + extra)
    return p


def sacct_text() -> str:
    """The hand-made dump, with Slurm's energy TRES on run 103 (1,800,000 J = 0.5 kWh)."""
    lines = hm.TEXT.splitlines()
    i = next(k for k, ln in enumerate(lines) if "|103|103|" in ln)
    lines[i] = lines[i].replace("billing=12,", "billing=12,energy=1800000,")
    return "\n".join(lines) + "\n"


def record(job, run, node, gpus, start, end, energy_rows, util=None, windows=None):
    d = {"job": job, "run": run, "node": node, "gpus": gpus, "start": t(start), "end": t(end), "user": "x",
         "gpu_energy": energy_rows}
    if util is not None:
        d["gpu_accounting"] = [{"gpu": g, "processes": 1, "gpu_util_pct": u, "mem_util_pct": 0,
                                "max_memory_bytes": 0, "why": None} for g, u in util.items()]
    if windows is not None:
        d["slack_windows"] = windows
    return d


def gpu(g, start_mj, end_mj):
    ok = start_mj is not None and end_mj is not None and end_mj >= start_mj
    return {"gpu": g, "start_mj": start_mj, "end_mj": end_mj, "energy_j": (end_mj - start_mj) / 1000 if ok else None,
            "why": None if ok else "unknown"}


D = "2026-11-02T"
WINDOWS = [{"mode": "heavy", "start_step": 0, "end_step": 40, "start_time": t(D + "01:31:00"),
            "end_time": t(D + "02:00:00"), "run": 0, "why": "first signal", "ended": "switch"},
           {"mode": "light", "start_step": 40, "end_step": 400, "start_time": t(D + "02:00:00"),
            "end_time": t(D + "07:29:00"), "run": 0, "why": "7 idle GPUs", "ended": "end"}]
RECORDS = {
    # 101: 8 GPUs, 2 kWh each plus i J; GPUs 6 and 7 idle by accounting
    "101.0.gpu01": record(101, 0, "gpu01", list(range(8)), D + "01:30:00", D + "07:30:00",
                          [gpu(i, 1_000_000 * i, 1_000_000 * i + 7_200_000_000 + 1000 * i) for i in range(8)],
                          util={i: (80 if i < 6 else 0) for i in range(8)}, windows=WINDOWS),
    # 102 run 0: 4 GPUs x 0.1 kWh, no accounting (idle unknown); run 1: the prolog did not run
    "102.0.gpu02": record(102, 0, "gpu02", [0, 1, 2, 3], D + "02:10:00", D + "05:10:00",
                          [gpu(i, 5, 5 + 360_000_000) for i in range(4)]),
    "102.1.gpu03": record(102, 1, "gpu03", [0, 1, 2, 3], D + "05:20:00", D + "07:20:00",
                          [gpu(i, None, 9_000_000) for i in range(4)]),
    # 106: two nodes, 8 GPUs each at 1 kWh, the run 12 h long with 6 h in the window
    "106.0.gpu06": record(106, 0, "gpu06", list(range(8)), "2026-11-01T18:00:00", D + "06:00:00",
                          [gpu(i, 0, 3_600_000_000) for i in range(8)]),
    "106.0.gpu07": record(106, 0, "gpu07", list(range(8)), "2026-11-01T18:00:00", D + "06:00:00",
                          [gpu(i, 10, 3_600_000_010) for i in range(8)]),
    # 110: the counter was reset during the run
    "110.0.gpu10": record(110, 0, "gpu10", [0], D + "12:00:00", D + "13:00:00", [gpu(0, 9_000_000, 1_000)]),
}


def write_records(d: Path) -> Path:
    d.mkdir(exist_ok=True)
    for name, rec in RECORDS.items():
        (d / f"{name}.json").write_text(json.dumps(rec))
    return d


def report(tmp_path, extra=f"[energy]\nprice_per_kwh = {PRICE}\ncarbon_kg_per_kwh = {CARBON}\n"):
    site = load_site(site_with(tmp_path, extra))
    epilog, notes = ingest.load_epilog(write_records(tmp_path / "jobs"))
    return metrics.compute(read_sacct(sacct_text(), text=True).jobs, site, SINCE, UNTIL, epilog=epilog,
                           notes=notes)


def mj(name: str) -> int:
    return sum(g["end_mj"] - g["start_mj"] for g in RECORDS[name]["gpu_energy"])


def test_energy_per_job_equals_the_recorded_counters(tmp_path):
    r = report(tmp_path)
    jobs = r.tables["energy_jobs"].set_index(["job_id", "run"])
    assert jobs.loc[("101", 0), "energy_kwh"] == mj("101.0.gpu01") / KWH == 57_600_028_000 / KWH
    assert jobs.loc[("101", 0), "idle_energy_kwh"] == (2 * 7_200_000_000 + 6000 + 7000) / KWH
    assert jobs.loc[("102", 0), "energy_kwh"] == mj("102.0.gpu02") / KWH == 0.4
    assert pd.isna(jobs.loc[("102", 0), "idle_energy_kwh"])  # no accounting: idle unknown, not 0
    # 106 ran 12 h, 6 h of them in the window: half its two nodes' 16 kWh
    assert jobs.loc[("106", 0), "energy_kwh"] == pytest.approx((mj("106.0.gpu06") + mj("106.0.gpu07")) / KWH / 2,
                                                               rel=1e-15)
    assert jobs.loc[("103", 0), "energy_kwh"] == 0.5 and jobs.loc[("103", 0), "energy_source"] == "slurm"
    assert jobs.loc[("101", 0), "energy_source"] == "gpu counters"
    assert jobs.loc[("101", 0), "energy_cost"] == pytest.approx(57_600_028_000 / KWH * PRICE, rel=1e-15)
    assert jobs.loc[("101", 0), "co2e_kg"] == pytest.approx(57_600_028_000 / KWH * CARBON, rel=1e-15)
    # unknown energy is never a row: 102 run 1 (no prolog mark), 110 (reset), 104/105/107 (no record)
    assert set(jobs.index) == {("101", 0), ("102", 0), ("103", 0), ("106", 0)}


def test_energy_totals_by_user_account_tier_and_gpu_type(tmp_path):
    r = report(tmp_path)
    e101, e102, e103, e106 = 57_600_028_000 / KWH, 0.4, 0.5, 8.0
    total = e101 + e102 + e103 + e106
    s = r.summary
    assert s["energy_kwh"] == pytest.approx(total, rel=1e-12)
    assert s["energy_kwh_gpu_counters"] == pytest.approx(e101 + e102 + e106, rel=1e-12)
    assert s["energy_kwh_slurm"] == 0.5
    assert s["idle_energy_kwh"] == pytest.approx(14_400_013_000 / KWH, rel=1e-12)
    assert s["energy_cost"] == pytest.approx(total * PRICE, rel=1e-12)
    assert s["co2e_kg"] == pytest.approx(total * CARBON, rel=1e-12)
    assert (s["runs_with_energy"], s["runs_energy_unknown"]) == (4, 5)
    by = {k: r.tables[f"energy_by_{k}"] for k in ("user", "account", "tier", "gpu_type")}
    assert by["user"].loc["alice", "energy_kwh"] == pytest.approx(e101, rel=1e-12)
    assert by["user"].loc["bob", "energy_kwh"] == pytest.approx(e102 + e106, rel=1e-12)
    assert by["user"].loc["carol", "energy_kwh"] == 0.5
    assert by["user"].loc["alice", "runs_energy_unknown"] == 3 and by["user"].loc["bob", "runs"] == 3
    assert by["account"].loc["vision", "energy_cost"] == pytest.approx(e101 * PRICE, rel=1e-12)
    assert by["tier"].loc["standard", "energy_kwh"] == pytest.approx(e102 + e103 + e106, rel=1e-12)
    assert pd.isna(by["tier"].loc["scavenger", "energy_kwh"])  # every scavenger run's energy unknown
    assert by["gpu_type"].loc["h100", "energy_kwh"] == pytest.approx(total, rel=1e-12)
    assert by["user"].loc["alice", "idle_energy_kwh"] == pytest.approx(14_400_013_000 / KWH, rel=1e-12)
    assert any("energy unknown for 5 run(s)" in n for n in r.notes)


def test_every_format_carries_the_energy_and_the_windows(tmp_path):
    r = report(tmp_path)
    out = tmp_path / "out"
    outputs.write(r, out, ("html", "csv", "md", "json"))
    doc = json.loads((out / "report.json").read_text())
    assert doc["summary"]["energy_kwh"] == pytest.approx(r.summary["energy_kwh"], rel=1e-15)
    assert {x["user"]: x["energy_kwh"] for x in doc["tables"]["energy_by_user"]}["carol"] == 0.5
    csv = pd.read_csv(out / "energy_jobs.csv")
    assert csv.set_index("job_id").loc[101, "energy_kwh"] == pytest.approx(57_600_028_000 / KWH, rel=1e-12)
    md = (out / "summary.md").read_text()
    total = r.summary["energy_kwh"]
    assert f"- GPU energy {total:,.3f} kWh ({14_400_013_000 / KWH:,.3f} kWh on idle GPUs); energy cost " \
           f"{total * PRICE:,.2f} USD; {total * CARBON:,.3f} kg CO2e; unknown for 5 runs" in md
    html = (out / "report.html").read_text()
    assert re.search(r'id="kpi-energy"><b>24\.900 kWh</b><span>GPU energy, 4\.98 USD, 9\.960 kg CO2e', html)
    assert "<h2>Energy</h2>" in html and "<th>Energy cost (USD)</th>" in html
    assert "<th>Of which idle GPUs (kWh)</th>" in html
    # the slack windows of job 101, once
    w = r.tables["slack_windows"]
    assert list(w["mode"]) == ["heavy", "light"] and list(w["start_step"]) == [0, 40]
    assert list(w["job_id"]) == ["101", "101"] and w["start_time"].iloc[1] == pd.Timestamp(D + "02:00:00")
    assert "<h2>Slack windows</h2>" in html and "7 idle GPUs" in html
    assert len(doc["tables"]["slack_windows"]) == 2


def test_no_price_no_cost_and_no_energy_no_tables(tmp_path):
    r = report(tmp_path, extra="")
    assert "energy_cost" not in r.tables["energy_jobs"].columns and r.summary["energy_cost"] is None
    assert r.summary["co2e_kg"] is None and r.summary["energy_kwh"] == pytest.approx(24.9000077778, rel=1e-9)
    html = outputs.render_html(r)
    assert "Energy cost" not in html and "kg CO2e" not in html
    site = load_site(site_with(tmp_path, ""))
    bare = metrics.compute(read_sacct(hm.TEXT, text=True).jobs, site, SINCE, UNTIL)
    assert "energy_by_user" not in bare.tables and bare.summary["energy_kwh"] is None
    assert "<h2>Energy</h2>" not in outputs.render_html(bare) and "GPU energy" not in outputs.render_md(bare)


def test_a_record_with_a_counter_the_epilog_never_writes_is_a_bad_row(tmp_path):
    d = tmp_path / "jobs"
    d.mkdir()
    bad = record(5, 0, "gpu01", [0], D + "01:00:00", D + "02:00:00", [{"gpu": 0, "start_mj": -5, "end_mj": 10}])
    (d / "5.0.gpu01.json").write_text(json.dumps(bad))
    (d / "6.0.gpu01.json").write_text(json.dumps(record(6, 0, "gpu01", [0], D + "01:00:00", D + "02:00:00",
                                                        [gpu(0, 1, 3_600_001)])))
    rec = read_epilog_dir(d)
    assert [b.reason for b in rec.bad.rows] == ["field gpu_energy.start_mj: -5 is not an energy counter (mJ)"]
    assert rec.frame.set_index("job_id_raw").loc[6, "energy_mj"] == 3_600_000.0


def test_record_energy_and_multi_node_merge():
    a = energy.record_energy(record(1, 0, "n1", [0, 1], D + "01:00:00", D + "02:00:00",
                                    [gpu(0, 0, 100), gpu(1, None, 5)], util={0: 3}))
    assert a == {"energy_mj": 100.0, "idle_energy_mj": 100.0, "energy_gpus": 1, "energy_unknown_gpus": 1}
    b = energy.record_energy(record(1, 0, "n2", [0], D + "01:00:00", D + "02:00:00", [gpu(0, 0, 40)]))
    assert b["energy_mj"] == 40.0 and pd.isna(b["idle_energy_mj"])
    energy.merge_energy(a, b)
    assert a["energy_mj"] == 140.0 and pd.isna(a["idle_energy_mj"]) and a["energy_unknown_gpus"] == 1
    assert energy.record_energy({"job": 1})["energy_gpus"] == 0


@pytest.mark.parametrize("extra, key", [
    ("[energy]\nprice_per_kwh = -1\n", "energy.price_per_kwh"),
    ("[energy]\ncarbon_kg_per_kwh = 'lots'\n", "energy.carbon_kg_per_kwh"),
    ("[energy]\nprice_per_kWh = 0.2\n", "energy.price_per_kWh"),
    ("[telemetry]\ngpu_utilization = 'dcgm'\n", "telemetry.gpu_utilization"),
    ("[telemetry]\nsampling = true\n", "telemetry.sampling"),
])
def test_site_energy_and_telemetry_keys_are_validated(tmp_path, extra, key):
    with pytest.raises(ConfigError) as e:
        load_site(site_with(tmp_path, extra))
    msg = str(e.value)
    assert key in msg and "\n" not in msg and "site.toml" in msg


def test_site_energy_and_telemetry_defaults_and_values(tmp_path):
    s = load_site(site_with(tmp_path, "[telemetry]\ngpu_utilization = 'off'\n[energy]\nprice_per_kwh = 0\n"))
    assert s.telemetry.gpu_utilization == "off" and s.energy.price_per_kwh == 0.0
    assert s.energy.carbon_kg_per_kwh is None
    d = load_site(site_with(tmp_path, ""))
    assert d.telemetry.gpu_utilization == "accounting" and d.energy.price_per_kwh is None
