"""The report says what happened, the same way everywhere: the timeline's bucket follows the window, one money
rule for the page and the summary, whole numbers on count axes and human column headers, one definition of the
GPU-hours charged against a budget (shared with admission), capacity never counted before the cluster existed,
and a preempted-and-requeued run counted as preempted, not failed."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime

import pandas as pd
import pytest

import reports_handmade as hm
from slurmtools.errors import ConfigError
from slurmtools.reports import capacity, fmt, ingest, metrics, outputs
from slurmtools.reports.sacct import read_sacct
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric

SINCE, UNTIL = datetime.fromisoformat(hm.SINCE), datetime.fromisoformat(hm.UNTIL)


def _cap(site, since, until, events=None, start=None):
    return capacity.capacity_table(capacity.nodes_from_site(site, load_fabric(site.fabric_path)), events, since,
                                   until, start=start)


def _one_job(start: str, end: str, gpus: int = 1, state: str = "COMPLETED", qos: str = "standard") -> str:
    return hm.HEADER + "\n" + hm._row(state, "j", "500", "500", "bob", "nlp", qos, start, start, start, end, gpus, 1,
                                      "gpu01") + "\n"


# --- 1. the timeline's bucket follows the window


@pytest.mark.parametrize("span,step", [(20, 1), (50, 5), (170, 10), (180, 60), (3600, 300), (6 * 3600, 900), (86400, 3600),
                                       (7 * 86400, 6 * 3600), (28 * 86400, 86400), (31 * 86400, 86400),
                                       (365 * 86400, 7 * 86400)])
def test_timeline_bucket_follows_the_window(span, step):
    assert metrics.bucket_seconds(span) == step
    assert 2 <= -(-span // step) <= metrics.TIMELINE_MAX_BUCKETS


def test_a_three_minute_window_has_a_bucket_per_minute_and_a_capacity_line():
    site = load_site(None)
    since, until = datetime(2026, 11, 2, 2, 0), datetime(2026, 11, 2, 2, 3)
    text = _one_job("2026-11-02T01:00:00", "2026-11-02T02:01:30", gpus=2)
    r = metrics.compute(read_sacct(text, text=True).jobs, site, since, until, capacity=_cap(site, since, until))
    tl = r.timeline
    assert list(tl.index) == [pd.Timestamp("2026-11-02T02:00"), pd.Timestamp("2026-11-02T02:01"),
                              pd.Timestamp("2026-11-02T02:02")]
    assert tl["standard"].tolist() == pytest.approx([2 / 60, 1 / 60, 0])
    assert tl["capacity_gpu_hours"].tolist() == pytest.approx([128 / 60] * 3)
    svg = str(outputs.timeline_chart(r))
    assert "mean per minute" in svg
    assert len(re.findall(r'id="timeline-bar-\d+"', svg)) == 2  # the two minutes with a GPU allocated


# --- 2. one rounding rule for money


def test_headline_cost_and_markdown_cost_are_the_same_string():
    site = load_site(None)
    # 1 GPU for 20 minutes at 2.40 USD per GPU-hour: 0.80 USD
    text = _one_job("2026-11-02T01:00:00", "2026-11-02T01:20:00")
    r = metrics.compute(read_sacct(text, text=True).jobs, site, SINCE, UNTIL, capacity=_cap(site, SINCE, UNTIL))
    assert r.summary["cost"] == pytest.approx(0.8)
    html = outputs.render_html(r)
    md = outputs.render_md(r)
    headline = re.search(r'id="kpi-cost"><b>(.*?)</b>', html).group(1)
    assert headline == fmt.money(0.8, "USD") == "0.80 USD"
    assert f"Cost {headline};" in md
    # the tables use the same rule, without the currency (it is in the header)
    assert "<th>Cost (USD)</th>" in html and "<td>0.80</td>" in html


# --- 3. whole numbers on count axes, human headers


def _svg_of(html: str, name: str) -> str:
    return re.search(rf'<svg[^>]*data-chart="{name}".*?</svg>', html, re.S).group(0)


def test_count_axis_has_integer_ticks():
    html = outputs.render_html(_hm_report())
    wait = _svg_of(html, "wait")
    ticks = re.findall(r'<g id="wait-ytick-\d+"[^>]*>.*?<text[^>]*>([^<]*)</text>', wait, re.S)
    assert len(ticks) >= 2 and all(re.fullmatch(r"\d[\d,]*", t) for t in ticks), ticks  # at most 2 runs per bin


def _hm_report(**kw):
    site = load_site(None)
    fabric = load_fabric(site.fabric_path)
    events = capacity.read_events(hm.EVENTS)
    return metrics.compute(read_sacct(hm.TEXT, text=True).jobs, site, SINCE, UNTIL,
                           capacity=_cap(site, SINCE, UNTIL, events), events=events, fabric=fabric, **kw)


def test_every_table_column_has_a_human_header():
    r = _hm_report()
    # demand_daily_by_tier has a column per tier (data, not fields; CSV only)
    fields = {str(c) for name, t in r.tables.items() for c in [*t.columns, t.index.name]
              if c is not None and name != "demand_daily_by_tier"}
    missing = sorted(fields - set(fmt.HEADERS))
    assert missing == []
    html = outputs.render_html(r)
    heads = re.findall(r"<th>(.*?)</th>", html)
    assert heads and not [h for h in heads if "_" in h or h != h.strip()]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html)
    assert "True" not in cells and "False" not in cells and "yes" in cells  # booleans read yes/no
    md = outputs.render_md(r)
    assert "| Tier | GPU-hours | Share of use % | Median wait (min) |" in md


# --- 4. one definition of the GPU-hours charged against a budget


def test_budget_counts_only_charged_tiers_as_admission_does():
    from slurmtools.policy.usage import gpu_hours_by_account, uncharged_tiers
    from slurmtools.slurm.commands import parse_sacct

    site = load_site(None)
    assert uncharged_tiers(site) == ("scavenger",) and site.tiers["scavenger"].charged is False
    b = _hm_report().tables["budget"]
    # vision: 101 (48) + 107 (32) charged; 104/105 ran in the scavenger tier (6): shown, not charged
    assert b.loc["vision", "month_to_date_gpu_hours"] == pytest.approx(86)
    assert b.loc["vision", "not_charged_gpu_hours"] == pytest.approx(6)
    assert b.loc["vision", "charged_gpu_hours"] == pytest.approx(80)
    assert b.loc["vision", "budget_used_pct"] == pytest.approx(80 / 20000 * 100)
    # admission's own count over the same month, through the same definition
    recs = parse_sacct(hm.TEXT)   # sacct prints local times; the records hold them as instants (UTC)
    # the report reads its naive window in the local zone too: the same instants, whatever TZ the tests run in
    policy = gpu_hours_by_account(recs, datetime(2026, 11, 1).astimezone(), UNTIL.astimezone(),
                                  free_tiers=uncharged_tiers(site))
    assert b["charged_gpu_hours"][b["charged_gpu_hours"] > 0].to_dict() == pytest.approx(policy)


def test_tier_charged_flag_in_the_site_file(tmp_path):
    from slurmtools.resources import example_site

    # the fabric named by absolute path: a site is checked against its fabric when loaded
    text = example_site().read_text().replace('fabric = "../../', f'fabric = "{example_site().parent}/../../')
    assert "charged = false" in text
    p = tmp_path / "site.toml"
    p.write_text(text.replace("charged = false", 'charged = "no"'))
    with pytest.raises(ConfigError) as err:
        load_site(p)
    assert str(err.value).startswith(f"{p}: tiers.scavenger.charged: expected true or false")
    p.write_text(text.replace("charged = false", ""))
    assert all(t.charged for t in load_site(p).tiers.values())  # charged unless the site says otherwise


# --- 5. charts written by hand as SVG: matplotlib is never imported for the report (it cost ~1 s per report)


def test_charts_are_inline_svg_and_writing_html_never_imports_matplotlib(tmp_path):
    html = outputs.render_html(_hm_report())
    for name in ("timeline", "users", "accounts", "wait", "waste"):
        svg = _svg_of(html, name)
        assert re.match(r'<svg class="chart" data-chart="%s" role="img" aria-label="[^"]+" '
                        r'xmlns="http://www.w3.org/2000/svg" width="\d+" height="\d+" viewBox="0 0 \d+ \d+"' % name,
                        svg)
        # nothing that runs, styles the page or loads from elsewhere
        assert "<script" not in svg and "<style" not in svg and "href" not in svg and "url(" not in svg
        assert "http" not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "")
        ids = re.findall(r' id="([^"]+)"', svg)
        assert ids and all(i.startswith(name + "-") for i in ids)  # no id clashes between the page's charts
    ids = re.findall(r' id="([^"]+)"', html)
    assert len(ids) == len(set(ids))
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import reports_handmade as hm\n"
            "from datetime import datetime\n"
            "from pathlib import Path\n"
            "from slurmtools.reports import charts, metrics, outputs\n"
            "from slurmtools.reports.sacct import read_sacct\n"
            "r = metrics.compute(read_sacct(hm.TEXT, text=True).jobs, None, datetime(2026, 11, 2), "
            "datetime(2026, 11, 3))\n"
            "outputs.write(r, Path(%r), ('html',))\n"
            "print('html', Path(%r).read_text().count('<svg'), 'matplotlib' in sys.modules)\n"
            ) % (str(hm.__file__).rsplit("/", 1)[0], str(tmp_path / "a"), str(tmp_path / "a" / "report.html"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["html", "5", "False"]


# --- 6. capacity starts at the cluster's first record


EVENTS_NEW_CLUSTER = ("NodeName|TimeStart|TimeEnd|State|Reason\n"
                      "|2026-11-02T12:00:00|Unknown||Cluster Registered TRES\n")


def test_capacity_is_never_counted_before_the_cluster_existed():
    site = load_site(None)
    assert capacity.first_event(EVENTS_NEW_CLUSTER) == pd.Timestamp("2026-11-02T12:00")
    text = _one_job("2026-11-02T13:00:00", "2026-11-02T14:00:00")
    jobs = read_sacct(text, text=True).jobs
    cap, events, notes = ingest.load_capacity(site, SINCE, UNTIL, events_text=EVENTS_NEW_CLUSTER,
                                              first_job=ingest.first_job(jobs))
    assert cap["gpu_hours"].sum() == pytest.approx(128 * 12)  # from 12:00, when the cluster registered
    assert [n for n in notes if n.startswith(metrics.CAPACITY_NOTE)] == [
        "capacity counted from 2026-11-02 12:00:00 (the cluster's first record: its first accounting event), "
        "not from the window's start 2026-11-02 00:00:00"]
    r = metrics.compute(jobs, site, SINCE, UNTIL, capacity=cap, events=events, notes=notes)
    assert r.summary["installed_gpu_hours"] == pytest.approx(128 * 12)
    assert r.summary["utilization_pct"] == pytest.approx(1 / (128 * 12) * 100)
    tl = r.timeline["capacity_gpu_hours"]
    assert tl.iloc[:12].sum() == 0 and tl.iloc[12:].tolist() == pytest.approx([128] * 12)
    assert "capacity counted from 2026-11-02 12:00:00" in outputs.render_md(r)
    assert "capacity counted from 2026-11-02 12:00:00" in outputs.render_html(r)
    # without events, the first job is the first record; a cluster seen before the window is counted whole
    cap2, _, notes2 = ingest.load_capacity(site, SINCE, UNTIL, events_text="", first_job=ingest.first_job(jobs))
    assert cap2["gpu_hours"].sum() == pytest.approx(128 * 11)
    assert "its first job" in notes2[-1]
    old = "NodeName|TimeStart|TimeEnd|State|Reason\n|2026-10-01T00:00:00|Unknown||Cluster Registered TRES\n"
    cap3, _, notes3 = ingest.load_capacity(site, SINCE, UNTIL, events_text=old, first_job=ingest.first_job(jobs))
    assert cap3["gpu_hours"].sum() == pytest.approx(128 * 24)
    assert not [n for n in notes3 if n.startswith(metrics.CAPACITY_NOTE)]


# --- preempted and requeued runs are preempted, not failed


def test_requeued_run_killed_by_the_warning_signal_is_preempted_not_failed():
    # the shape sacct -D prints when a preempted run's program died of the warning signal and Slurm requeued it:
    # the first run FAILED (signal 10), the rerun of the same JobIDRaw completed
    text = hm.TEXT.replace("PREEMPTED|ft|102|102|bob|nlp|standard|", "FAILED|ft|102|102|bob|nlp|standard|")
    assert text != hm.TEXT
    r = metrics.compute(read_sacct(text, text=True).jobs, load_site(None), SINCE, UNTIL)
    p = r.tables["preemption_by_tier"]
    assert p.loc["standard", "preempted_runs"] == 1 and p.loc["standard", "requeued_runs"] == 1
    assert r.summary["failed_runs"] == 1  # 103 only, which really failed
    # a run that ended for a node failure and was requeued is requeued, not preempted
    text = hm.TEXT.replace("PREEMPTED|ft|102|102|bob|nlp|standard|", "NODE_FAIL|ft|102|102|bob|nlp|standard|")
    p = metrics.compute(read_sacct(text, text=True).jobs, load_site(None), SINCE, UNTIL).tables["preemption_by_tier"]
    assert p.loc["standard", "preempted_runs"] == 0 and p.loc["standard", "requeued_runs"] == 1


DATA = __import__("pathlib").Path(__file__).resolve().parents[2] / "data" / "reports"
# the epilog's decision-log line for the 22.05 capture's run, as the lab's epilog wrote it
PREEMPTED_EVENT_22_05 = ('{"details":{"exit_code":"0:10","node":"gpu16","preempt_time":"2026-11-23T22:01:06",'
                         '"qos":"scavenger","reason":"JobLaunchFailure","restarts":"0","run":0,"state":"COMPLETING"},'
                         '"event":"preempted","job":1,"time":1795471266.068,"user":"labuser"}\n')


def _capture_report(name: str, epilog=None):
    site = load_site(None)
    since, until = datetime(2026, 11, 23, 22, 0), datetime(2026, 11, 23, 22, 10)
    acc = read_sacct(DATA / name)
    return metrics.compute(acc.jobs, site, since, until, epilog=epilog)


def test_real_25_11_preemption_requeue_is_preempted_not_failed():
    """Slurm 25.11.7 lab: a plain program (no trap) in a scavenger job, preempted by a production job; the warning
    signal killed the batch step (CANCELLED 0:10), Slurm recorded the run PREEMPTED and requeued it; the rerun
    completed."""
    r = _capture_report("sacct-lab-25.11.7-preempted-requeued.txt")
    p = r.tables["preemption_by_tier"]
    assert p.loc["scavenger", "preempted_runs"] == 1 and p.loc["scavenger", "requeued_runs"] == 1
    assert r.summary["failed_runs"] == 0 and r.summary["runs"] == 3


def test_real_22_05_preemption_by_signal_is_preempted_with_the_decision_log(tmp_path):
    """Slurm 22.05.8 lab, the same jobs: the program died of the warning signal during GraceTime, so sacct says
    FAILED 0:10 and Slurm did not requeue it. sacct alone cannot tell that from a crash; the epilog's decision log
    (PreemptTime was set) can, and then the run is preempted, not failed."""
    name = "sacct-lab-22.05.8-preempted-by-signal.txt"
    plain = _capture_report(name)
    assert plain.summary["failed_runs"] == 1 and plain.summary["preempted_runs"] == 0
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (tmp_path / "decisions.jsonl").write_text(PREEMPTED_EVENT_22_05)
    ep, notes = ingest.load_epilog(jobs)
    assert notes == []
    r = _capture_report(name, ep)
    assert r.summary["preempted_runs"] == 1 and r.summary["failed_runs"] == 0
    assert r.tables["preemption_by_tier"].loc["scavenger", "requeued_runs"] == 0
