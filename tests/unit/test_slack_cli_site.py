"""The site's [slack] table (one-line errors naming the key), `slurmtools slack --json` over the cached file, and
the training-loop helper: boundaries, windows file, and the mode kept across a checkpoint and resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmtools.checkpoint import Checkpointer
from slurmtools.errors import ConfigError
from slurmtools.resources import example_site
from slurmtools.site import load_site
from slurmtools.slack import ModeState, PriceWindow, Slack, SlackError, SlackSettings, cache_document, write_cache
from slurmtools.slack_loop import SlackLoop, read_windows

EXAMPLE = example_site().read_text()
FABRIC = str((example_site().parent / "../../topology/example/fabric.toml").resolve())
REPO = Path(__file__).resolve().parents[2]


def site_with(tmp_path: Path, slack: str) -> Path:
    p = tmp_path / "site.toml"
    text = EXAMPLE.replace('fabric = "../../topology/example/fabric.toml"', f'fabric = "{FABRIC}"')
    p.write_text(text + "\n" + slack)
    return p


def test_slack_table_read_with_windows(tmp_path):
    s = load_site(site_with(tmp_path, """
[slack]
poll_interval = "30s"
heavy_at = 0.6
light_at = 0.2
margin = 0.1
polls = 2
max_age = "5m"
cache_file = "/srv/slack.json"
[[slack.windows]]
name = "night"
start = "22:00"
end = "06:00"
factor = 1.5
[[slack.windows]]
name = "peak"
start = "17:00"
end = "20:00"
days = ["mon", "fri"]
factor = 0.5
"""))
    assert s.slack == SlackSettings(poll_interval=30, heavy_at=0.6, light_at=0.2, margin=0.1, polls=2, max_age=300,
                                    cache_file="/srv/slack.json",
                                    windows=(PriceWindow("night", 1320, 360, 1.5), PriceWindow("peak", 1020, 1200,
                                                                                               0.5, (0, 4))))


def test_default_slack_settings_and_cache_beside_the_spool():
    s = load_site(example_site())
    assert s.slack.poll_interval == 60 and s.slack.polls == 3
    assert s.slack.cache_file == "/var/spool/slurmtools/slack.json"


@pytest.mark.parametrize("body, key, words", [
    ('poll_interval = 30', "slack.poll_interval", "say the unit"),
    ('poll_interval = "0s"', "slack.poll_interval", "at least 1s"),
    ('heavy_at = 1.5', "slack.heavy_at", "from 0 to 1"),
    ('heavy_at = "high"', "slack.heavy_at", "expected a number"),
    ('light_at = 0.6', "slack.light_at", "below heavy_at (0.5)"),
    ('margin = 0.2', "slack.margin", "bands around light_at"),
    ('margin = -0.1', "slack.margin", ">= 0.0"),
    ('polls = 0', "slack.polls", ">= 1"),
    ('max_age = "10s"', "slack.max_age", "at least poll_interval (60s)"),
    ('cache_file = "slack.json"', "slack.cache_file", "absolute path"),
    ('poll_intervall = "1m"', "slack.poll_intervall", "did you mean poll_interval?"),
    ('[[slack.windows]]\nname = "n"\nstart = "25:00"\nend = "06:00"\nfactor = 1.0', "slack.windows[0].start",
     "time of day"),
    ('[[slack.windows]]\nname = "n"\nstart = "06:00"\nend = "06:00"\nfactor = 1.0', "slack.windows[0].end",
     "other than the start"),
    ('[[slack.windows]]\nname = "n"\nstart = "01:00"\nend = "06:00"\nfactor = 1.0\ndays = ["monday"]',
     "slack.windows[0].days", "mon, tue"),
    ('[[slack.windows]]\nname = "n"\nstart = "01:00"\nend = "06:00"', "slack.windows[0].factor", "missing"),
    ('[[slack.windows]]\nname = "n"\nstart = "01:00"\nend = "06:00"\nfactor = 1.0\n'
     '[[slack.windows]]\nname = "n"\nstart = "07:00"\nend = "08:00"\nfactor = 1.0', "slack.windows[1].name",
     "a second window"),
])
def test_bad_slack_values_are_one_line_errors_naming_the_key(tmp_path, body, key, words):
    p = site_with(tmp_path, "[slack]\n" + body + "\n")
    with pytest.raises(ConfigError) as e:
        load_site(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}: {key}: ") and words in msg and "\n" not in msg, msg


# ------------------------------------------------------------------------------------------------ the CLI


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "slurmtools", *args], capture_output=True, text=True, env=e,
                          cwd=str(REPO))


def cached(tmp_path: Path, idle: int, taken_at: float) -> Path:
    from slurmtools.slack import SlackSignal

    sigs = [SlackSignal(partition="gpu", tier=t, idle_gpus=idle, total_gpus=128, demand_ahead=0,
                        preemptor_demand=8, exposed_lower_gpus=0, exposed_same_gpus=16, preempt_chance=0.0,
                        taken_at=taken_at) for t in ("production", "standard", "scavenger")]
    p = tmp_path / "slack.json"
    write_cache(p, cache_document(sigs, SlackSettings(), taken_at, default_partition="gpu",
                                  default_tier="standard"))
    return p


def test_cli_json_from_the_cached_file(tmp_path):
    import time

    p = cached(tmp_path, 96, time.time() - 5)
    r = cli("slack", "--source", "cache", "--cache", str(p), "--tier", "scavenger", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["partition"], d["tier"], d["mode"], d["score"], d["source"]) == ("gpu", "scavenger", "heavy", 0.75,
                                                                              "cache")
    assert d["signal"]["idle_gpus"] == 96 and d["signal"]["source"] == "cache" and 4 <= d["signal"]["age_s"] < 60
    assert "cached in" in d["note"] and d["state"]["reason"].startswith("first signal")
    text = cli("slack", "--source", "cache", "--cache", str(p), "--tier", "scavenger")
    assert "mode heavy (score 0.75)" in text.stdout and "idle GPUs 96 of 128" in text.stdout


def test_cli_state_file_keeps_the_hysteresis_and_the_interval(tmp_path):
    import time

    p = cached(tmp_path, 120, time.time())
    state = tmp_path / "state.json"
    args = ("slack", "--source", "cache", "--cache", str(p), "--state", str(state), "--json")
    assert json.loads(cli(*args).stdout)["mode"] == "heavy"
    d = json.loads(cli(*args).stdout)  # within the 60 s interval: not polled again
    assert d["mode"] == "heavy" and "not polled" in d["note"] and d["signal"] is None
    saved = json.loads(state.read_text())
    saved["polled_at"] -= 120  # as if the last poll was two minutes ago
    state.write_text(json.dumps(saved))
    cached(tmp_path, 0, time.time())
    d = json.loads(cli(*args).stdout)
    assert d["mode"] == "heavy" and d["state"]["candidate"] == "light" and d["state"]["count"] == 1


@pytest.mark.parametrize("args, words", [
    (("--tier", "gold"), "--tier: unknown tier 'gold' (known: production, standard, scavenger)"),
    (("--partition", "cpu"), "--partition: unknown partition 'cpu'"),
    (("--source", "live"), "--source: expected auto, slurm or cache, got 'live'"),
    (("--out", "/tmp/x.json"), "--out: only with --refresh"),
    (("--source", "cache", "--cache", "/nonexistent/slack.json"),
     "no slack signal for partition gpu, tier standard: slack: /nonexistent/slack.json: no cached signal"),
])
def test_cli_bad_options_are_one_line_errors(args, words):
    r = cli("slack", *args)
    assert r.returncode != 0 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("slurmtools: error: ") and words in lines[0], r.stderr


def test_cli_bad_state_file_is_one_line(tmp_path):
    bad = tmp_path / "state.json"
    bad.write_text('{"state": {"mode": "turbo"}}')
    r = cli("slack", "--source", "cache", "--cache", str(cached(tmp_path, 1, 0.0)), "--state", str(bad))
    assert r.returncode == 2 and r.stderr.strip().startswith("slurmtools: error: --state:") and "turbo" in r.stderr


def test_fill_slack_option_conflicts_are_refused_before_slurm_is_asked():
    r = cli("submit", "--fill-slack", "--gpus", "8", "--", "true")
    assert r.returncode == 2 and "--gpus: not with --fill-slack" in r.stderr
    r = cli("submit", "--gpus-per-task", "2", "--gpus", "2", "--", "true")
    assert r.returncode == 2 and "--gpus-per-task and --max-tasks size a --fill-slack array" in r.stderr


# ------------------------------------------------------------------------------------------------ the loop helper


class Script:
    """A Slack whose signal is a scripted list of scores, read through the cached file as inside a job."""

    def __init__(self, tmp_path: Path, settings: SlackSettings):
        self.path = tmp_path / "slack.json"
        self.t = 1000.0
        self.settings = settings

    def set_idle(self, idle: int) -> None:
        from slurmtools.slack import SlackSignal

        self.t += 1
        s = SlackSignal(partition="gpu", tier="scavenger", idle_gpus=idle, total_gpus=100, demand_ahead=0,
                        preemptor_demand=0, exposed_lower_gpus=0, exposed_same_gpus=0, preempt_chance=0.0,
                        taken_at=self.t)
        write_cache(self.path, cache_document([s], self.settings, self.t, default_partition="gpu",
                                              default_tier="scavenger"))

    def slack(self) -> Slack:
        return Slack(source="cache", cache=self.path, clock=lambda: self.t, monotonic=lambda: self.t * 100)


def test_loop_switches_only_at_boundaries_and_records_windows(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    sc = Script(tmp_path, SlackSettings(poll_interval=1, polls=1, margin=0.0))
    sc.set_idle(90)
    ticks = iter(range(10_000))
    loop = SlackLoop(sc.slack(), every=10, path=tmp_path / "w.json", clock=lambda: float(next(ticks)))
    modes = []
    for step in range(40):
        if step == 13:
            sc.set_idle(5)  # the cluster fills up mid-window: the mode waits for the boundary at step 20
        if step == 33:
            sc.set_idle(30)
        modes.append(loop.step(step))
    loop.close(40)
    assert modes[:20] == ["heavy"] * 20 and modes[20:30] == ["light"] * 10 and modes[30:] == ["light"] * 10
    doc = read_windows(tmp_path / "w.json")
    ws = doc["windows"]
    assert [(w["mode"], w["start_step"], w["end_step"], w["ended"]) for w in ws] == [
        ("heavy", 0, 20, "switch"), ("light", 20, 40, "end")]
    assert all(w["end_time"] >= w["start_time"] for w in ws) and ws[0]["why"].startswith("first signal")


def test_epoch_only_boundaries(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    sc = Script(tmp_path, SlackSettings(poll_interval=1, polls=1, margin=0.0))
    sc.set_idle(90)
    loop = SlackLoop(sc.slack(), every=None, path=tmp_path / "w.json")
    assert loop.step(0) == "heavy"
    sc.set_idle(0)
    assert [loop.step(s) for s in range(1, 50)] == ["heavy"] * 49
    assert loop.epoch_end(50) == "light" and loop.step(50) == "light"
    with pytest.raises(SlackError, match="every must be a positive number"):
        SlackLoop(sc.slack(), every=0)


def test_mode_and_windows_survive_a_checkpoint_and_resume(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURMTOOLS_SCRATCH_PATTERN", str(tmp_path / "scratch-{job_id}"))
    for var in ("SLURMTOOLS_SIGNAL_PROMISE", "SLURM_RESTART_COUNT", "RANK", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    sc = Script(tmp_path, SlackSettings(poll_interval=1, polls=2, margin=0.0))
    sc.set_idle(90)
    ck = Checkpointer(tmp_path / "ck", fmt="json", install=False)
    loop = SlackLoop(sc.slack(), every=5, checkpointer=ck)
    state = {"step": 0}
    for step in range(12):
        loop.step(step)
        state = {"step": step + 1, "slack": loop.state_dict()}
        if step + 1 == 12:
            ck.save(state, step=12)
    assert loop.path == tmp_path / "ck" / "slack-windows.json"
    # the run is preempted here; the next run (SLURM_RESTART_COUNT=1) resumes from the checkpoint at step 12
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    sc.set_idle(0)
    ck2 = Checkpointer(tmp_path / "ck", fmt="json", install=False)
    saved = ck2.load()
    loop2 = SlackLoop(sc.slack(), every=5, checkpointer=ck2)
    loop2.load_state_dict(saved["slack"], step=saved["step"])
    assert loop2.mode == "heavy" and loop2.slack.state.mode == "heavy"  # restored, not re-decided
    assert loop2.step(12) == "heavy" and loop2.step(13) == "heavy"  # no boundary until 15
    assert loop2.step(15) == "heavy"  # first poll past the threshold: 1 of 2
    sc.set_idle(0)  # a new observation (the same file read again would not count twice)
    assert loop2.step(20) == "light"
    loop2.close(22)
    ws = read_windows(tmp_path / "ck" / "slack-windows.json")["windows"]
    assert [(w["mode"], w["start_step"], w["end_step"], w["run"], w["ended"]) for w in ws] == [
        ("heavy", 0, 12, 0, "checkpoint"), ("heavy", 12, 20, 1, "switch"), ("light", 20, 22, 1, "end")]
    # the copy for the epilog, in the job's private scratch folder
    copy = tmp_path / "scratch-4242" / "slack-windows.json"
    assert json.loads(copy.read_text())["windows"] == ws and (copy.parent.stat().st_mode & 0o077) == 0
    with pytest.raises(SlackError, match="format"):
        loop2.load_state_dict({"format": "x"}, 0)
    assert ModeState.from_dict(saved["slack"]["state"]).mode == "heavy"


def _run_beside_a_planted_scratch_folder(tmp_path, monkeypatch, job: str, **loop_kw) -> Path:
    """A loop of job `job` run to its close while its scratch folder is one others can write; that folder."""
    monkeypatch.setenv("SLURM_JOB_ID", job)
    monkeypatch.setenv("SLURMTOOLS_SCRATCH_PATTERN", str(tmp_path / "scratch-{job_id}"))
    monkeypatch.delenv("SLURMTOOLS_SLACK_WINDOWS", raising=False)
    planted = tmp_path / f"scratch-{job}"
    planted.mkdir()
    planted.chmod(0o777)
    sc = Script(tmp_path, SlackSettings(poll_interval=1, polls=1))
    sc.set_idle(90)
    loop = SlackLoop(sc.slack(), every=5, **loop_kw)
    loop.step(0)
    loop.close(3)
    return planted


def test_windows_are_not_written_into_a_scratch_folder_others_can_write(tmp_path, monkeypatch):
    said = []
    planted = _run_beside_a_planted_scratch_folder(tmp_path, monkeypatch, "77", log=said.append)
    assert not (planted / "slack-windows.json").exists()
    assert any("writable by group or others" in m for m in said), said


@pytest.mark.parametrize("rank", ["0", "1"])
def test_without_a_log_rank_zero_says_an_unwritten_windows_file_on_stderr(tmp_path, monkeypatch, capsys, rank):
    """The default log: a windows file that could not be written is said on rank 0's stderr (the job's error
    file), once per rank-0 job, and the other ranks, which write nothing, say nothing."""
    monkeypatch.setenv("RANK", rank)
    _run_beside_a_planted_scratch_folder(tmp_path, monkeypatch, "78")
    err = capsys.readouterr().err.splitlines()
    if rank == "0":
        assert any(ln.startswith("slurmtools.slack: slack windows not written to ") and
                   "writable by group or others" in ln for ln in err), err
    else:
        assert err == []
