"""`slurmtools advise` (text, --json, --notify to files and through sendmail), its one-line errors, and
`plan --right-size` applying the recommendation (and saying when it has none)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.resources import example_site
from tests.unit.advise.history import recent, write
from tests.unit.advise.sites import site_file

SITE = str(example_site())
VIT = "14 of your last 14 `train-vit` runs used at most 2 of 8 GPUs: plan with --gpus 2"


@pytest.fixture()
def history(tmp_path):
    jobs = recent(500, 14, gpu_util=[95, 90] + [0] * 6, elapsed=3000, max_rss="400G", total_cpu="40:00:00")
    jobs += recent(600, 3, user="bob", account="nlp", name="eval", gpus=1, gpu_util=[80], elapsed=3000,
                   limit="01:00:00", max_rss="400G", total_cpu="05:00:00", cpus=8)
    return write(tmp_path, jobs)


def cli(*args, env=None):
    return CliRunner().invoke(app, list(args), env=env)


def test_advise_text_and_json(history):
    dump, ep = history
    r = cli("advise", "--site", SITE, "--sacct-file", str(dump), "--epilog-dir", str(ep))
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == [
        "alice  train-vit  (8 GPU(s), 14 run(s), account vision)",
        f"  {VIT}; your time limit (4h) is 5x your longest run (50m) in 14 completed `train-vit` runs: use --time "
        f"75m."]
    r = cli("advise", "--site", SITE, "--sacct-file", str(dump), "--epilog-dir", str(ep), "--json", "--all")
    doc = json.loads(r.output)
    assert doc["runs"] == 17 and doc["notes"] == []
    by = {(s["user"], s["name"]): s for s in doc["shapes"]}
    vit = by[("alice", "train-vit")]
    assert vit["asked"] == {"gpus": 8, "gpu_type": "h100", "cpus": 64, "mem_mb_per_node": 524288.0,
                            "time_limit_s": 14400}
    assert vit["used"]["gpus_busy_at_share"] == 2 and vit["used"]["gpu_util_pct_median"] == 92.5
    assert vit["used"]["longest_completed_run_s"] == 3000 and vit["used"]["max_rss_mb_peak"] == 400 * 1024
    assert [f["rule"] for f in vit["findings"]] == ["gpus", "time"]
    assert vit["findings"][0]["changes"] == {"gpus": {"from": 8, "to": 2}}
    assert by[("bob", "eval")]["findings"] == [] and by[("bob", "eval")]["recommendation"] == ""


def test_advise_filters_by_user_and_account(history):
    dump, ep = history
    for opt in (("--user", "bob"), ("--account", "nlp")):
        r = cli("advise", "--site", SITE, "--sacct-file", str(dump), "--epilog-dir", str(ep), *opt)
        assert r.exit_code == 0
        assert r.output == "nothing to change: 3 finished run(s) of " + \
            ("user bob" if opt[0] == "--user" else "account nlp") + " in the last 30d give no recommendation\n"


def test_a_since_date_reads_as_a_span_people_read(history):
    """--since as a date: the window is said in days (it read "in the last 249488756s" for 2019-01-01)."""
    from datetime import datetime, timedelta

    dump, ep = history
    day = (datetime.now() - timedelta(days=40)).strftime("%Y-%m-%d")
    r = cli("advise", "--site", SITE, "--sacct-file", str(dump), "--epilog-dir", str(ep), "--user", "bob",
            "--since", day)
    assert r.exit_code == 0
    # 40 days and part of today back to that midnight
    assert r.output in (f"nothing to change: 3 finished run(s) of user bob in the last {n} days (since {day} "
                        "00:00:00) give no recommendation\n" for n in (40, 41))


def test_notify_writes_one_notice_per_user_with_evidence_and_fix(history, tmp_path):
    dump, ep = history
    out = tmp_path / "notices"
    r = cli("advise", "--site", SITE, "--sacct-file", str(dump), "--epilog-dir", str(ep), "--notify", "--out",
            str(out))
    assert r.exit_code == 0 and r.output == ""  # cron: quiet
    assert sorted(p.name for p in out.iterdir()) == ["alice.txt"]  # bob has nothing to change: no notice
    text = (out / "alice.txt").read_text()
    assert text.startswith("Subject: slurmtools: right-sizing advice for alice on lab (1 job shape(s))\n\nHello alice,")
    assert f"* `train-vit` (8 GPU(s), 14 run(s), account vision):\n  {VIT};" in text
    assert "  asked: 8 h100 GPU(s), 64 CPUs, 512 GB per node, time limit 4h\n" in text
    assert "  used: 2 GPU(s) busy in most runs (epilog), busy GPUs 92% utilised (median)" in text


def test_notify_with_nothing_to_say_is_silent_and_writes_nothing(tmp_path):
    dump, ep = write(tmp_path, recent(700, 4, gpus=1, gpu_util=[90], limit="01:00:00", elapsed=3000,
                                      max_rss="400G", total_cpu="40:00:00"))
    r = cli("advise", "--site", SITE, "--sacct-file", str(dump), "--epilog-dir", str(ep), "--notify", "--out",
            str(tmp_path / "n"))
    assert r.exit_code == 0 and r.output == ""
    assert list((tmp_path / "n").iterdir()) == []


def test_notify_mails_through_sendmail(history, tmp_path, monkeypatch):
    dump, ep = history
    bindir = tmp_path / "bin"
    bindir.mkdir()
    sent = tmp_path / "sent.txt"
    (bindir / "sendmail").write_text(f"#!/bin/sh\necho \"ARGS $*\" >> {sent}\ncat >> {sent}\n")
    (bindir / "sendmail").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    site = site_file(tmp_path, extra='[advise]\nmail = true\nmail_domain = "example.org"\n')
    r = cli("advise", "--site", str(site), "--sacct-file", str(dump), "--epilog-dir", str(ep), "--notify", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"notices": [{"user": "alice", "shapes": 1, "to": "alice@example.org"}]}
    mail = sent.read_text()
    assert mail.startswith("ARGS -t -oi\n") and "To: alice@example.org\n" in mail
    assert "Subject: slurmtools: right-sizing advice for alice on lab" in mail and VIT in mail


def test_notify_fails_in_one_line_when_sendmail_fails(history, tmp_path, monkeypatch):
    dump, ep = history
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "sendmail").write_text("#!/bin/sh\necho 'relay refused' >&2\nexit 75\n")
    (bindir / "sendmail").chmod(0o755)
    site = site_file(tmp_path, extra="[advise]\nmail = true\n")
    p = _run("advise", "--site", str(site), "--sacct-file", str(dump), "--epilog-dir", str(ep), "--notify",
             path=f"{bindir}:{os.environ['PATH']}")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == f"slurmtools: error: notice for alice: {bindir / 'sendmail'} exited 75: relay refused\n"


def _run(*args, path=None):
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "SLURMTOOLS_SITE")}
    if path:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "slurmtools", *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.parametrize("args,line", [
    (("--user", "a", "--account", "b"), "--user and --account exclude each other"),
    (("--out", "x"), "--out: only with --notify"),
    (("--notify",), "--notify: give --out DIR for the notice files (or set [advise] mail = true in the site file)"),
    (("--since", "lately"), '--since: expected a duration like "30d" or "12h", or a date like 2026-11-01, got '
                            "'lately'"),
    (("--since", "0d"), "--since: expected a duration above 0, got '0d'"),
    (("--sacct-file", "/nonexistent/s.txt"), "--sacct-file: /nonexistent/s.txt: no such file"),
])
def test_advise_bad_options_are_one_line(args, line):
    p = _run("advise", "--site", SITE, *args)
    assert p.returncode == 2 and p.stderr == f"slurmtools: error: {line}\n", p.stderr


def test_a_bad_dump_is_one_line_naming_it(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("this is not sacct\n")
    p = _run("advise", "--site", SITE, "--sacct-file", str(bad))
    assert p.returncode == 2 and p.stderr.startswith(f"slurmtools: error: {bad}:1: ") and p.stderr.count("\n") == 1


PLAN = ("plan", "--idle", "--site", SITE, "--user", "alice", "--name", "train-vit", "--gpus", "8", "--time", "4h")


def test_plan_right_size_applies_the_recommendation_and_says_so(history):
    dump, ep = history
    r = cli(*PLAN, "--right-size", "--sacct-file", str(dump), "--epilog-dir", str(ep), "--json", "--", "python",
            "train.py")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["nodes"] * d["gpus_per_node"] == 2 and d["time_limit_s"] == 75 * 60
    assert "#SBATCH --time=01:15:00" in d["script"]
    rs = d["right_size"]
    assert rs["shape"] == {"user": "alice", "name": "train-vit", "gpus": 8}
    assert [(c["field"], c["from"], c["to"]) for c in rs["changes"]] == [("gpus", 8, 2), ("time_limit", 14400, 4500)]
    assert rs["changes"][0]["evidence"] == "14 of your last 14 `train-vit` runs used at most 2 of 8 GPUs"
    assert "--right-size: --gpus 8 -> 2 because 14 of your last 14 `train-vit` runs used at most 2 of 8 GPUs" in \
        d["notes"]
    assert any(n.startswith("--right-size: --time 4h -> 75m because your time limit (4h) is 5x") for n in d["notes"])
    text = cli(*PLAN, "--right-size", "--sacct-file", str(dump), "--epilog-dir", str(ep), "--", "python", "t.py")
    assert "--right-size: --gpus 8 -> 2 because" in text.output


def test_plan_right_size_says_when_there_is_nothing_to_apply(history):
    dump, ep = history
    r = cli(*PLAN[:6], "--name", "other", "--gpus", "8", "--right-size", "--sacct-file", str(dump), "--json", "--",
            "x")
    d = json.loads(r.output)
    assert d["nodes"] * d["gpus_per_node"] == 8 and d["right_size"]["changes"] == []
    assert d["right_size"]["notes"] == ["--right-size: no finished run of `other` (8 GPU(s), user alice) in the last "
                                        "30d; the request is planned as asked"]
    assert d["right_size"]["notes"][0] in d["notes"]
    r = cli("plan", "--idle", "--site", SITE, "--user", "bob", "--name", "eval", "--gpus", "1", "--right-size",
            "--sacct-file", str(dump), "--epilog-dir", str(ep), "--json", "--", "x")
    assert json.loads(r.output)["right_size"]["notes"] == [
        "--right-size: 3 run(s) of `eval` (1 GPU(s), user bob) in the last 30d give no recommendation; the request "
        "is planned as asked"]


def test_plan_right_size_options_errors():
    p = _run(*PLAN, "--sacct-file", "/x", "--", "x")
    assert p.returncode == 2 and p.stderr == "slurmtools: error: --sacct-file: only with --right-size\n"
    p = _run(*PLAN, "--right-size", "--", "x")  # --idle: no Slurm to read history from
    assert p.returncode == 2 and p.stderr.startswith("slurmtools: error: --right-size: no job history without "
                                                     "Slurm (") and p.stderr.count("\n") == 1


def test_report_has_the_right_sizing_section(history, tmp_path):
    """The admins' view: `slurmtools report` over the same history carries advise's table (CSV, JSON, HTML and
    the Markdown line) with the same recommendation `advise` gives."""
    dump, ep = history
    out = tmp_path / "rep"
    from datetime import datetime, timedelta

    since = (datetime.now() - timedelta(days=7)).strftime("%Y-%m-%d")  # `recent` runs are 5 days old
    r = cli("report", "--site", SITE, "--sacct-file", str(dump), "--epilog-dir", str(ep), "--since", since,
            "--history", "0", "--format", "json,csv,html,md", "--out", str(out))
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "report.json").read_text())
    rows = doc["tables"]["right_sizing"]
    vit = next(x for x in rows if x["job_name"] == "train-vit")
    assert vit["user"] == "alice" and vit["gpus"] == 8 and vit["runs"] == 14 and VIT in vit["recommendation"]
    assert (out / "right_sizing.csv").read_text().splitlines()[0].startswith("user,account,job_name,gpus,runs")
    assert 'id="right-sizing"' in (out / "report.html").read_text()
    assert "Right-sizing:" in (out / "summary.md").read_text()
