"""The sandbox's report files from hand-made outcomes: the Markdown and CSV figures equal the hand-computed ones,
the change is candidate - baseline, user-chosen names are escaped (HTML, Markdown) and neutralised (CSV), the
JSON round-trips, a single replay renders without a change column, and a bad --formats is refused in one line."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import replace

import pytest

from slurmtools.errors import ConfigError
from slurmtools.sandbox.outcome import JobOutcome, RepeatRun, ReplayResult, Summary, summarise
from slurmtools.sandbox.report import FIGURES, text_table, write
from slurmtools.sandbox.trace import Trace

XSS = "<script>x</script>"
FORMULA = '=HYPERLINK("http://evil","x")'


def _result(label: str, jobs: list[JobOutcome], nodes: int, gpus: int, span_s: float, notes=()) -> ReplayResult:
    cap = gpus * span_s
    tiers = sorted({j.tier for j in jobs})
    accounts = sorted({j.account for j in jobs})
    return ReplayResult(
        label=label, site=f"site_configs/{label}/site.toml", release="22.05", speedup=30.0, nodes=nodes, gpus=gpus,
        span_h=span_s / 3600, wall_s=span_s / 30, jobs=jobs, overall=summarise("all", jobs, cap),
        by_tier=[summarise(t, [j for j in jobs if j.tier == t], cap) for t in tiers],
        by_account=[summarise(a, [j for j in jobs if j.account == a], cap) for a in accounts], notes=list(notes))


def _job(key, tier, account, gpus, status, wait_h=None, held_s=0.0, work_s=0.0, preemptions=0, why=""):
    return JobOutcome(key=key, tier=tier, account=account, gpus=gpus, nodes=1, status=status, why=why,
                      wait_s=None if wait_h is None else wait_h * 3600, runs=preemptions + (held_s > 0),
                      preemptions=preemptions, held_s=held_s, work_s=work_s)


def baseline() -> ReplayResult:
    # 16 GPUs over 9900 s: 158,400 GPU-s; held 8 x 7200 + 4 x 5400 = 79,200 -> utilisation 50%
    return _result("baseline", [
        _job("1", "standard", "vision", 8, "finished", wait_h=1.0, held_s=7200, work_s=7200),
        # preempted once: held 5400 s for 3600 s of work -> 1800 s x 4 GPUs = 2.00 GPU-hours lost
        _job("2", "standard", XSS, 4, "finished", wait_h=2.0, held_s=5400, work_s=3600, preemptions=1),
        _job("3", "scavenger", FORMULA, 2, "refused", why="job_submit.lua: too many GPUs"),
        _job("4", "scavenger", "vision", 1, "never_started", why="QOSMaxGRESPerUser"),
    ], nodes=2, gpus=16, span_s=9900, notes=["3 jobs cancelled while pending are not replayed"])


def candidate() -> ReplayResult:
    # 24 GPUs over 7875 s: 189,000 GPU-s; held 8 x 7200 + 4 x 3600 + 2 x 1800 = 75,600 -> utilisation 40%
    return _result("candidate", [
        _job("1", "standard", "vision", 8, "finished", wait_h=0.5, held_s=7200, work_s=7200),
        _job("2", "standard", XSS, 4, "finished", wait_h=1.5, held_s=3600, work_s=3600),
        _job("3", "scavenger", FORMULA, 2, "finished", wait_h=0.0, held_s=1800, work_s=1800),
        _job("4", "scavenger", "vision", 1, "refused", why="QOSMaxGRESPerUser"),
    ], nodes=3, gpus=24, span_s=7875, notes=["3 jobs cancelled while pending are not replayed",
                                             "speed-up 30 holds for every job"])


TRACE = Trace(jobs=(), source="history.txt")


def _both():
    return {"baseline": baseline(), "candidate": candidate()}


def _md_section(text: str, title: str) -> dict[str, list[str]]:
    """The rows of the Markdown table under `## title`, keyed by their first cell."""
    part = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in part.splitlines()
            if line.startswith("|")]
    return {r[0]: r[1:] for r in rows[2:]} | {"__head__": rows[0]}


def _csv(path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_markdown_figures_and_change_equal_the_hand_computed_ones(tmp_path):
    (p,) = write(_both(), TRACE, tmp_path, ("md",))
    assert p.name == "sandbox.md"
    md = p.read_text()
    assert "# Capacity sandbox: candidate vs baseline" in md and "0 jobs from history.txt" in md
    # overall waits: baseline [1, 2] h -> p50 1.5, p90 1.9, max 2; candidate [0, 0.5, 1.5] h -> 0.5, 1.3, 1.5
    p50 = _md_section(md, "Wait p50 (h)")
    assert p50["__head__"] == ["Group", "baseline", "candidate", "Change"]
    assert p50["all"] == ["1.50", "0.50", "-1.00"]
    assert _md_section(md, "Wait p90 (h)")["all"] == ["1.90", "1.30", "-0.60"]
    assert _md_section(md, "Wait max (h)")["all"] == ["2.00", "1.50", "-0.50"]
    # tier standard: [1, 2] against [0.5, 1.5]; scavenger's only wait is the candidate's job 3 (0 h)
    assert p50["tier standard"] == ["1.50", "1.00", "-0.50"]
    assert p50["tier scavenger"] == ["n/a", "0.00", "n/a"]
    assert _md_section(md, "Preemptions")["all"] == ["1", "0", "-1"]
    assert _md_section(md, "GPU-hours lost")["all"] == ["2.00", "0.00", "-2.00"]
    assert _md_section(md, "GPU-hours lost")["tier scavenger"] == ["0.00", "0.00", "+0.00"]
    assert _md_section(md, "Refused")["all"] == ["1", "1", "+0"]
    assert _md_section(md, "Never started")["all"] == ["1", "0", "-1"]
    util = _md_section(md, "Utilisation")
    assert util["all"] == ["50.0%", "40.0%", "-10.0 pts"]
    assert util["tier scavenger"] == ["0.0%", "1.9%", "+1.9 pts"]  # 2 x 1800 / 189,000
    # the account chosen by a user is text, never markup or a broken table
    assert "<script>" not in md
    assert p50["account &lt;script&gt;x&lt;/script&gt;"] == ["2.00", "1.50", "-0.50"]
    assert p50["account vision"] == ["1.00", "0.50", "-0.50"]
    facts = _md_section(md, "Runs")
    assert facts["Nodes"] == ["2", "3"] and facts["GPUs"] == ["16", "24"] and facts["Slurm"] == ["22.05", "22.05"]
    assert facts["Speed-up"] == ["30x", "30x"] and facts["Replayed span"] == ["2.75 h", "2.19 h"]
    assert facts["Wall time"] == ["330 s", "262 s"] and facts["Jobs finished"] == ["2 of 4", "3 of 4"]
    # a note both replays have is listed once; one only the candidate has says so
    notes = md.split("## Notes\n", 1)[1]
    assert notes.count("cancelled while pending") == 1
    assert "- (candidate) speed-up 30 holds for every job" in notes


def test_a_single_replay_renders_without_a_change_column(tmp_path):
    paths = write({"candidate": candidate()}, TRACE, tmp_path, ("md", "html", "csv", "json"))
    assert sorted(p.name for p in paths) == ["sandbox.html", "sandbox.json", "sandbox.md", "sandbox_jobs.csv",
                                            "sandbox_runs.csv", "sandbox_summary.csv"]
    md = (tmp_path / "sandbox.md").read_text()
    assert "Change" not in md and "# Capacity sandbox: candidate" in md
    table = _md_section(md, "Per group")
    assert table["__head__"] == ["Group"] + [name for _, name, _ in FIGURES]
    assert table["all"] == ["0.50", "1.30", "1.50", "0", "0.00", "1", "0", "40.0%", "n/a", "n/a"]
    html = (tmp_path / "sandbox.html").read_text()
    assert "change" not in html.split('class="groups"', 1)[1]
    doc = json.loads((tmp_path / "sandbox.json").read_text())
    assert doc["comparison"] == [] and "baseline" not in doc


def test_csv_holds_every_summary_field_per_group_and_label_and_neutralises_names(tmp_path):
    paths = write(_both(), TRACE, tmp_path, ("csv",))
    assert [p.name for p in paths] == ["sandbox_runs.csv", "sandbox_summary.csv", "sandbox_jobs.csv",
                                       "sandbox_comparison.csv"]
    summary = _csv(tmp_path / "sandbox_summary.csv")
    assert list(summary[0]) == ["label", "scope", "group", "jobs", "finished", "refused", "never_started",
                                "wait_median_h", "wait_p90_h", "wait_max_h", "preemptions", "gpu_hours",
                                "gpu_hours_lost", "utilisation", "multinode_jobs",
                                "leaves_per_multinode_job", "allreduce_gbs"]
    by = {(r["label"], r["scope"], r["group"]): r for r in summary}
    assert len(summary) == 2 * (1 + 2 + 3)
    b = by[("baseline", "all", "all")]
    assert (float(b["wait_median_h"]), float(b["wait_p90_h"]), float(b["wait_max_h"])) == \
        pytest.approx((1.5, 1.9, 2.0))
    assert (b["jobs"], b["finished"], b["refused"], b["never_started"], b["preemptions"]) == \
        ("4", "2", "1", "1", "1")
    assert float(b["gpu_hours"]) == pytest.approx(22.0) and float(b["gpu_hours_lost"]) == pytest.approx(2.0)
    assert float(b["utilisation"]) == pytest.approx(0.5)
    assert float(by[("candidate", "all", "all")]["utilisation"]) == pytest.approx(0.4)
    # the formula account is text in every file; nothing starts with a formula trigger
    assert ("baseline", "account", "'" + FORMULA) in by
    assert by[("baseline", "account", "'" + FORMULA)]["refused"] == "1"
    jobs = _csv(tmp_path / "sandbox_jobs.csv")
    assert len(jobs) == 8 and {j["label"] for j in jobs} == {"baseline", "candidate"}
    j2 = next(j for j in jobs if j["label"] == "baseline" and j["key"] == "2")
    assert j2["account"] == XSS and float(j2["lost_gpu_h"]) == pytest.approx(2.0) and j2["preemptions"] == "1"
    j3 = next(j for j in jobs if j["label"] == "baseline" and j["key"] == "3")
    assert j3["account"] == "'" + FORMULA and j3["status"] == "refused" and j3["wait_s"] == ""
    for name in ("sandbox_summary.csv", "sandbox_jobs.csv", "sandbox_comparison.csv"):
        for row in _csv(tmp_path / name):
            assert not any(str(v).startswith(("=", "+", "@")) for v in row.values()), (name, row)
    cmp_rows = {(r["scope"], r["group"], r["figure"]): r for r in _csv(tmp_path / "sandbox_comparison.csv")}
    w = cmp_rows[("all", "all", "wait_p90_h")]
    assert (float(w["baseline"]), float(w["candidate"]), float(w["change"])) == pytest.approx((1.9, 1.3, -0.6))
    assert cmp_rows[("tier", "scavenger", "wait_median_h")]["change"] == ""
    pre = cmp_rows[("all", "all", "preemptions")]
    assert [float(pre[k]) for k in ("baseline", "candidate", "change")] == [1, 0, -1]
    runs = _csv(tmp_path / "sandbox_runs.csv")
    assert [(r["label"], r["nodes"], r["gpus"]) for r in runs] == [("baseline", "2", "16"), ("candidate", "3", "24")]


def test_html_escapes_names_and_draws_the_charts(tmp_path):
    (p,) = write(_both(), TRACE, tmp_path, ("html",))
    html = p.read_text()
    assert XSS not in html and "<script" not in html
    assert "account &lt;script&gt;x&lt;/script&gt;" in html
    for chart in ("sandbox-wait", "sandbox-lost", "sandbox-admission"):
        assert f'id="{chart}-bar-0"' in html
    # the wait chart: p50 and p90 per label for all + 2 tiers (12 bars); its tooltips carry the figures
    assert 'id="sandbox-wait-bar-11"' in html and 'id="sandbox-wait-bar-12"' not in html
    assert "baseline p90 all: 1.9" in html
    # the table's overall row: p50 1.50 -> 0.50, a fall in wait is better; preemptions too; a change in
    # utilisation is neither (more GPUs for the same work lower it)
    row = html.split('<td class="t">all</td>', 1)[1].split("</tr>", 1)[0]
    cells = re.findall(r"<td(?: class=\"([^\"]*)\")?>([^<]*)</td>", row)
    assert cells[:3] == [("", "1.50"), ("", "0.50"), ("change better", "-1.00")]
    assert cells[9:12] == [("", "1"), ("", "0"), ("change better", "-1")]
    assert cells[21:24] == [("", "50.0%"), ("", "40.0%"), ("change", "-10.0 pts")]
    assert cells[-3:] == [("", "n/a"), ("", "n/a"), ("change", "n/a")]  # no multi-node job: no bandwidth
    assert "job_submit.lua: too many GPUs" in html  # the refused job and why


def test_json_round_trips_every_result_and_the_comparison(tmp_path):
    base, cand = baseline(), candidate()
    (p,) = write({"candidate": cand, "baseline": base}, TRACE, tmp_path, ("json",))
    doc = json.loads(p.read_text())
    assert list(doc) == ["baseline", "candidate", "comparison", "spread", "trace"]
    assert doc["spread"] == []          # no repeated replays
    assert doc["candidate"] == json.loads(json.dumps(cand.to_json()))
    for label, r in (("baseline", base), ("candidate", cand)):
        d = doc[label]
        assert Summary(**d["overall"]) == r.overall
        assert [Summary(**s) for s in d["by_account"]] == r.by_account
        assert [JobOutcome(**{k: v for k, v in j.items() if k != "lost_gpu_h"}) for j in d["jobs"]] == r.jobs
    rows = {(c["scope"], c["group"], c["figure"]): c for c in doc["comparison"]}
    assert len(rows) == 6 * len(FIGURES)
    u = rows[("all", "all", "utilisation")]
    assert (u["baseline"], u["candidate"], u["change"]) == pytest.approx((0.5, 0.4, -0.1))
    assert rows[("account", XSS, "gpu_hours_lost")]["change"] == pytest.approx(-2.0)
    assert doc["trace"] == {"source": "history.txt", "jobs": 0, "notes": []}


def test_a_group_only_one_replay_has_shows_na_and_no_change(tmp_path):
    cand = candidate()
    extra = cand.jobs + [_job("5", "production", "vision", 8, "finished", wait_h=0.25, held_s=3600, work_s=3600)]
    results = {"baseline": baseline(), "candidate": _result("candidate", extra, nodes=3, gpus=24, span_s=7875)}
    (p,) = write(results, TRACE, tmp_path, ("md",))
    p50 = _md_section(p.read_text(), "Wait p50 (h)")
    assert p50["tier production"] == ["n/a", "0.25", "n/a"]


@pytest.mark.parametrize("formats, line", [
    (("md", "pdf"), "--formats: unknown format 'pdf' (valid: html, csv, json, md)"),
    (("HTML",), "--formats: unknown format 'HTML' (valid: html, csv, json, md)"),
    ((), "--formats: no format given (valid: html, csv, json, md)"),
])
def test_a_bad_format_is_refused_in_one_line_before_anything_is_written(tmp_path, formats, line):
    out = tmp_path / "report"
    with pytest.raises(ConfigError) as e:
        write(_both(), TRACE, out, formats)
    assert str(e.value) == line and e.value.source == "--formats"
    assert not out.exists()


def test_text_table_still_shows_both_replays():
    text = text_table(_both(), TRACE)
    assert "baseline: site_configs/baseline/site.toml (2 nodes, 16 GPUs)" in text
    row = next(line for line in text.splitlines() if line.startswith("all "))
    assert row.split()[1:] == ["1.50", "0.50", "1.90", "1.30", "2.00", "1.50"]


def test_a_job_that_did_not_finish_is_named_with_its_last_state_in_the_text_and_the_page(tmp_path):
    res = _both()
    res["candidate"].jobs[0] = _job("1", "standard", "vision", 8, "unfinished", wait_h=0.5, held_s=60,
                                    why="last state NODE_FAIL")
    text = text_table(res, TRACE)
    assert "candidate: job 1 (standard, 8 GPUs) did not finish: last state NODE_FAIL" in text
    assert "baseline: job" not in text
    write(res, TRACE, tmp_path / "r", ("html",))
    page = (tmp_path / "r" / "sandbox.html").read_text()
    rows = re.findall(r"<tr><td class=\"t\">(\w+)</td><td class=\"t\">(\w+)</td>.*?<td class=\"t\">([^<]*)</td></tr>",
                      page.split('id="unstarted"')[1])
    assert ("candidate", "1", "last state NODE_FAIL") in rows
    assert ("baseline", "3", "job_submit.lua: too many GPUs") in rows


def _with_repeats() -> dict:
    """Each replay run twice more (`--repeat 3`): the baseline's standard-tier job 2 waited 2 h, then 2.5 h and
    3 h; the candidate's 1.5 h, then 1 h and 1.5 h; everything else as in the first replay."""
    base, cand = baseline(), candidate()
    base.lead_in_s = cand.lead_in_s = 1.0
    for res, waits in ((base, (2.5, 3.0)), (cand, (1.0, 1.5))):
        for k, w in enumerate(waits, start=1):
            jobs = [replace(j, wait_s=w * 3600) if j.key == "2" else j for j in res.jobs]
            again = _result(res.label, jobs, res.nodes, res.gpus, res.span_h * 3600)
            res.repeat_of(again, 1.0 + 7 * k)
    return {"baseline": base, "candidate": cand}


def test_repeated_replays_report_each_figures_lowest_and_highest_value(tmp_path):
    """`--repeat`: the spread of a figure over a replay and its repeats in every format, with whether the
    baseline's and the candidate's ranges are apart; a figure that did not move shows one value."""
    results = _with_repeats()
    assert [r.lead_in_s for r in results["baseline"].repeats] == [8.0, 15.0]
    assert all(isinstance(r, RepeatRun) for r in results["candidate"].repeats)
    paths = {p.name: p for p in write(results, TRACE, tmp_path, ("md", "csv", "json", "html"))}
    rows = {(r["scope"], r["group"], r["figure"]): r for r in _csv(paths["sandbox_spread.csv"])}
    # standard tier: baseline waits 1 h and 2 / 2.5 / 3 h -> p90 over two jobs; max 2 to 3 h; candidate max 1.5 h
    mx = rows[("tier", "standard", "wait_max_h")]
    assert (float(mx["baseline_min"]), float(mx["baseline_max"]), mx["baseline_runs"]) == (2.0, 3.0, "3")
    assert (float(mx["candidate_min"]), float(mx["candidate_max"])) == (1.0, 1.5)
    assert mx["apart"] == "True"
    p50 = rows[("tier", "standard", "wait_median_h")]   # baseline 1.5 to 2.0 h, candidate 0.75 to 1.0 h
    assert (float(p50["baseline_min"]), float(p50["baseline_max"])) == (1.5, 2.0)
    assert (float(p50["candidate_min"]), float(p50["candidate_max"])) == (0.75, 1.0)
    util = rows[("all", "all", "utilisation")]          # the waits moved, not the GPU time held
    assert util["baseline_min"] == util["baseline_max"] and util["apart"] == "True"
    part = paths["sandbox.md"].read_text().split("## Spread over repeated replays\n", 1)[1].split("\n## ", 1)[0]
    md = [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in part.splitlines() if line.startswith("|")]
    assert md[0] == ["Group", "Figure", "baseline", "candidate", "Ranges apart"]
    assert ["tier standard", "Wait max (h)", "2.00 to 3.00", "1.00 to 1.50", "yes"] in md
    assert ["all", "Utilisation", "50.0%", "40.0%", "yes"] in md
    doc = json.loads(paths["sandbox.json"].read_text())
    assert len(doc["spread"]) == len(rows) and len(doc["baseline"]["repeats"]) == 2
    assert doc["baseline"]["repeats"][1]["lead_in_s"] == 15.0
    html = paths["sandbox.html"].read_text()
    assert '<table id="spread">' in html and "2.00 to 3.00" in html and "1, 8, 15 s" in html
    text = text_table(results, TRACE)
    assert "spread over 3 replays of each (lead-ins 1, 8, 15 s)" in text
    assert re.search(r"tier standard\s+Wait max \(h\)\s+2\.00 to 3\.00\s+1\.00 to 1\.50\s+yes", text), text


def test_without_repeats_no_spread_is_shown(tmp_path):
    paths = {p.name: p for p in write(_both(), TRACE, tmp_path, ("md", "csv", "html"))}
    assert "sandbox_spread.csv" not in paths
    assert "Spread over" not in paths["sandbox.md"].read_text()
    assert 'id="spread"' not in paths["sandbox.html"].read_text()
    assert "spread over" not in text_table(_both(), TRACE)
