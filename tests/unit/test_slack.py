"""slurmtools.slack without Slurm: the signal from Slurm snapshots, the score, the hysteresis (property tests: it
never flaps), the price windows, and the cached file the library reads inside a job."""

from __future__ import annotations

import json
import os
from datetime import datetime

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from slurmtools.resources import example_site
from slurmtools.site import load_site
from slurmtools.slack import (MODES, ModeState, PriceWindow, Slack, SlackError, SlackSettings, SlackSignal,
                              array_tasks, cache_document, decide, fill_size, measure, plain_mode, preempt_chance,
                              read_cache, score, signal_from_cache, target, write_cache)
from slurmtools.slurm.model import JobInfo, NodeInfo

SITE = load_site(example_site())
S = SlackSettings(poll_interval=10, heavy_at=0.5, light_at=0.15, margin=0.05, polls=3, max_age=120)


def node(name: str, used: int = 0, state: str = "idle", parts=("gpu",)) -> NodeInfo:
    return NodeInfo(name=name, state=state, flags=(), cpus=112, cpus_alloc=0, memory_mb=2_000_000,
                    memory_alloc_mb=0, gpus_by_type={"h100": 8}, gpus_used_by_type={"h100": used},
                    gpus_used_idx=tuple(range(used)), features=(), partitions=parts)


def job(jid: int, qos: str, state: str, gpus: int, reason: str = "", partition: str = "gpu", raw=None,
        array: int | None = None) -> JobInfo:
    return JobInfo(job_id=jid, name="j", user="u", account="a", partition=partition, qos=qos, state=state,
                   reason=reason, nodes=(), num_nodes=1, gpus=gpus, gpus_by_type={"h100": gpus}, time_limit_s=600,
                   restarts=0, submit_time=None, start_time=None, end_time=None, array_job_id=array,
                   raw=raw or {})


def sig(**kw) -> SlackSignal:
    d = dict(partition="gpu", tier="scavenger", idle_gpus=64, total_gpus=128, demand_ahead=0, preemptor_demand=0,
             exposed_lower_gpus=0, exposed_same_gpus=0, preempt_chance=0.0, taken_at=1000.0)
    d.update(kw)
    return SlackSignal(**d)


# ------------------------------------------------------------------------------------------------ measuring


def test_measure_counts_idle_demand_ahead_and_preemptors():
    nodes = [node("gpu01"), node("gpu02", used=8), node("gpu03", used=3), node("gpu04", state="down"),
             node("cpu01", parts=("cpu",))]
    jobs = [job(1, "production", "PENDING", 8, "Resources"),
            job(2, "standard", "PENDING", 4, "Priority"),
            job(3, "scavenger", "PENDING", 2, "Priority"),
            job(4, "production", "PENDING", 16, "JobHeldUser"),  # held: no demand
            job(8, "production", "PENDING", 64, "QOSMaxGRESPerUser"),  # blocked by a limit: no demand now
            job(10, "standard", "PENDING", 8, "BeginTime"),  # a requeued run waiting for its begin time
            job(5, "standard", "RUNNING", 8),
            job(6, "scavenger", "RUNNING", 3),
            job(7, "production", "PENDING", 8, "Resources", partition="other")]
    s = measure(nodes, jobs, SITE.tiers, "gpu", "standard", 5.0)
    # gpu04 is down: its 8 GPUs count in the total, not as idle; cpu01 is another partition
    assert (s.idle_gpus, s.total_gpus) == (8 + 5, 32)
    assert s.demand_ahead == 8 + 4  # production and standard pending, not scavenger, not the held job
    assert s.preemptor_demand == 8  # standard is preempted by production only
    assert (s.exposed_lower_gpus, s.exposed_same_gpus) == (3, 8)
    assert s.preempt_chance == 0.0  # 8 wanted, 13 idle
    sc = measure(nodes, jobs, SITE.tiers, "gpu", "scavenger", 5.0)
    assert sc.demand_ahead == 8 + 4 + 2 and sc.preemptor_demand == 8 + 4
    assert sc.exposed_same_gpus == 3 and sc.exposed_lower_gpus == 0
    prod = measure(nodes, jobs, SITE.tiers, "gpu", "production", 5.0)
    assert prod.demand_ahead == 8 and prod.preempt_chance == 0.0 and prod.preemptor_demand == 0


def test_a_job_slurm_names_by_a_running_flag_is_exposed_like_a_running_one():
    """While its nodes boot (or a signal is sent) Slurm names a running job CONFIGURING (SIGNALING), as 23.02's JSON
    and every release's squeue print it: its GPUs are held and preemptible all the same."""
    nodes = [node("gpu01", used=8), node("gpu02", used=4)]
    jobs = [job(1, "scavenger", "CONFIGURING", 8), job(2, "scavenger", "SIGNALING", 4),
            job(3, "scavenger", "PENDING", 2, "Priority")]
    s = measure(nodes, jobs, SITE.tiers, "gpu", "scavenger", 0.0)
    assert s.exposed_same_gpus == 12


def test_pending_array_counts_every_task():
    j = job(9, "production", "PENDING", 2, "Resources", array=9, raw={"array_task_string": "0-9%2"})
    s = measure([node("gpu01")], [j], SITE.tiers, "gpu", "scavenger", 0.0)
    assert s.demand_ahead == 20
    assert array_tasks("3,5-7") == 4 and array_tasks("0-15:4") == 4 and array_tasks("") == 1


def test_preempt_chance_takes_idle_then_lower_tiers_first():
    assert preempt_chance(8, 10, 0, 16) == 0.0  # idle GPUs meet it
    assert preempt_chance(20, 4, 8, 16) == 0.5  # 8 reach this tier's 16
    assert preempt_chance(100, 0, 0, 16) == 1.0
    assert preempt_chance(5, 0, 0, 0) == 1.0 and preempt_chance(5, 5, 0, 0) == 0.0


def test_score_and_price_window():
    mon_noon, mon_23, tue_3 = datetime(2026, 11, 23, 12), datetime(2026, 11, 23, 23), datetime(2026, 11, 24, 3)
    assert score(sig(idle_gpus=64, demand_ahead=0), S, mon_noon) == (0.5, None)
    assert score(sig(idle_gpus=64, demand_ahead=80), S, mon_noon)[0] == 0.0
    assert score(sig(idle_gpus=64, preempt_chance=0.5), S, mon_noon)[0] == 0.25
    night = PriceWindow("night", 22 * 60, 6 * 60, 1.5, days=(0,))  # Monday night, into Tuesday morning
    ws = SlackSettings(windows=(night,))
    assert score(sig(idle_gpus=64), ws, mon_23) == (0.75, "night")
    assert score(sig(idle_gpus=64), ws, tue_3) == (0.75, "night")
    assert score(sig(idle_gpus=64), ws, datetime(2026, 11, 24, 23))[1] is None  # Tuesday night: not listed
    assert score(sig(idle_gpus=128), ws, mon_23)[0] == 1.0  # clamped
    assert fill_size(sig(idle_gpus=13, demand_ahead=4), 2) == 4 and fill_size(sig(idle_gpus=13), 1, 5) == 5


# ------------------------------------------------------------------------------------------------ hysteresis


def run(scores, settings=S, start: ModeState | None = None) -> list[ModeState]:
    st_, out = start or ModeState(), []
    for i, s in enumerate(scores):
        st_ = decide(st_, s, settings, taken_at=float(i))
        out.append(st_)
    return out


def test_first_signal_sets_the_mode_then_three_polls_change_it():
    states = run([0.9, 0.05, 0.05, 0.05])
    assert [s.mode for s in states] == ["heavy", "heavy", "heavy", "light"]
    assert states[-1].changed_at == 4 and "after 3 consecutive" in states[-1].reason


def test_the_same_observation_read_twice_counts_once():
    st_ = decide(ModeState(), 0.9, S, taken_at=1.0)
    for _ in range(5):
        st_ = decide(st_, 0.0, S, taken_at=2.0)
    assert st_.mode == "heavy" and st_.count == 1


def test_no_signal_holds_the_mode_and_says_why():
    st_ = decide(decide(ModeState(), 0.9, S, 1.0), None, S, why_none="cache 700s old")
    assert st_.mode == "heavy" and "cache 700s old" in st_.reason and st_.observations == 1


settings_st = st.builds(
    lambda light, gap, margin_share, polls: SlackSettings(light_at=light, heavy_at=min(1.0, light + gap),
                                                          margin=margin_share * gap / 2 * 0.99, polls=polls),
    st.floats(0.0, 0.6), st.floats(0.05, 0.4), st.floats(0.0, 1.0), st.integers(1, 5))
scores_st = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=80)


def _beyond(s: float, frm: str, to: str, cfg: SlackSettings) -> bool:
    """Whether score s is past the threshold between modes frm and to by the margin, in that direction."""
    if MODES.index(to) > MODES.index(frm):
        t = cfg.light_at if frm == "light" and to == "moderate" else cfg.heavy_at
        return s > t + cfg.margin
    t = cfg.heavy_at if frm == "heavy" and to == "moderate" else cfg.light_at
    return s < t - cfg.margin


@hsettings(max_examples=300, deadline=None)
@given(settings_st, scores_st)
def test_hysteresis_never_flaps(cfg, scores):
    states = run(scores, cfg)
    changes = [i for i in range(1, len(states)) if states[i].mode != states[i - 1].mode]
    # two changes are at least `polls` observations apart
    for a, b in zip(changes, changes[1:]):
        assert b - a >= cfg.polls
    # each change rests on `polls` consecutive observations past a threshold by the margin, the same way
    for i in changes:
        frm, to = states[i - 1].mode, states[i].mode
        assert i + 1 - cfg.polls >= 1  # never before the first decision plus `polls` more
        for k in range(i + 1 - cfg.polls, i + 1):
            got = target(scores[k], frm, cfg)
            assert got != frm and (MODES.index(got) > MODES.index(frm)) == (MODES.index(to) > MODES.index(frm))
        assert _beyond(scores[i], frm, to, cfg)


@hsettings(max_examples=200, deadline=None)
@given(settings_st, st.sampled_from(["light", "heavy"]), st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=60))
def test_noise_within_the_margin_around_a_threshold_changes_nothing(cfg, which, noise):
    t = cfg.light_at if which == "light" else cfg.heavy_at
    scores = [t + x * cfg.margin for x in noise]  # the margin itself included: "past by the margin" is strict
    for start in MODES:
        states = run(scores, cfg, ModeState(mode=start, known=True))
        if start == "moderate" or (start == "heavy") == (which == "heavy"):
            assert {s.mode for s in states} == {start}


@hsettings(max_examples=200, deadline=None)
@given(settings_st, st.floats(0.0, 1.0), st.sampled_from(MODES))
def test_a_steady_signal_settles_within_polls_and_stays(cfg, s, start):
    states = run([s] * (cfg.polls + 10), cfg, ModeState(mode=start, known=True))
    assert states[cfg.polls - 1].mode == target(s, start, cfg)
    assert {x.mode for x in states[cfg.polls - 1:]} == {states[cfg.polls - 1].mode}  # and never moves again


def test_state_round_trips_through_json_and_refuses_unknown_modes():
    st_ = run([0.9, 0.1])[-1]
    assert ModeState.from_dict(json.loads(json.dumps(st_.to_dict()))) == st_
    with pytest.raises(SlackError, match="unknown mode"):
        ModeState.from_dict({"mode": "turbo"})


# ------------------------------------------------------------------------------------------------ the cached file


class Clock:
    def __init__(self, t: float = 10_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def write_doc(path, taken_at: float, idle: int, cfg=S):
    doc = cache_document([sig(idle_gpus=idle, taken_at=taken_at, tier=t) for t in ("scavenger", "standard")], cfg,
                         taken_at, cluster="lab", default_partition="gpu", default_tier="standard")
    write_cache(path, doc)
    return doc


def test_cache_round_trip_and_age(tmp_path):
    p = tmp_path / "slack.json"
    write_doc(p, 9_990.0, 100)
    assert oct(p.stat().st_mode & 0o777) == "0o644"
    doc = read_cache(p)
    s = signal_from_cache(doc, None, None, 10_000.0, str(p))
    assert (s.tier, s.idle_gpus, s.source, s.age_s) == ("standard", 100, "cache", 10.0)
    with pytest.raises(SlackError, match="no signal for partition 'gpu' and tier 'production'.*gpu/scavenger"):
        signal_from_cache(doc, "gpu", "production", 10_000.0, str(p))


def test_cache_is_readable_by_every_user_whatever_the_umask(tmp_path):
    """The cache is written by the admin's cron and read by every user's training processes: a hardened root's 077
    umask must not make it root's alone."""
    old = os.umask(0o077)
    try:
        write_doc(tmp_path / "slack.json", 9_990.0, 100)
    finally:
        os.umask(old)
    assert oct((tmp_path / "slack.json").stat().st_mode & 0o777) == "0o644"


@pytest.mark.parametrize("body, words", [
    (None, "no cached signal"), (b'{"format": "slurmtools-slack/1", "taken', "not JSON"),
    (b'{"format": "other"}', "format 'other'"), (b"[1]", "format 'list'"),
    (b'{"format": "slurmtools-slack/1"}', "taken_at or signals missing")])
def test_bad_cache_files_are_one_line_errors_naming_the_file(tmp_path, body, words):
    p = tmp_path / "slack.json"
    if body is not None:
        p.write_bytes(body)
    with pytest.raises(SlackError) as e:
        read_cache(p)
    assert words in str(e.value) and str(p) in str(e.value) and "\n" not in str(e.value)


def test_library_reads_the_cache_no_more_often_than_the_interval(tmp_path, monkeypatch):
    p = tmp_path / "slack.json"
    clock, mono = Clock(), Clock(0.0)
    write_doc(p, clock.t, 120)  # 120 of 128 idle: heavy
    monkeypatch.setenv("SLURMTOOLS_SLACK_CACHE", str(p))
    sl = Slack(partition="gpu", tier="scavenger", source="cache", clock=clock, monotonic=mono)
    assert sl.mode() == "heavy" and sl.settings == S  # the site's settings travel in the file
    write_doc(p, clock.t + 1, 0)  # the cluster fills up
    for _ in range(2):
        mono.t += 4  # under the 10 s interval: the file is not read again
        clock.t += 4
        assert sl.mode() == "heavy" and sl.state.observations == 1
    modes = []
    for i in range(3):
        mono.t += 10
        clock.t += 10
        write_doc(p, clock.t, 0)
        modes.append(sl.mode())
    assert modes == ["heavy", "heavy", "light"]  # three polls past the threshold
    assert sl.last.signal.age_s == 0.0 and sl.last.signal.source == "cache"


def test_a_stale_cache_holds_the_mode_and_says_how_old(tmp_path):
    p = tmp_path / "slack.json"
    clock, mono = Clock(), Clock(0.0)
    write_doc(p, clock.t, 120)
    sl = Slack(partition="gpu", tier="scavenger", source="cache", cache=p, clock=clock, monotonic=mono)
    assert sl.mode() == "heavy"
    clock.t += 500
    mono.t += 500
    assert sl.mode() == "heavy"
    assert "500s old, past max_age 120s" in sl.state.reason and sl.last.signal is None


def test_auto_source_reads_the_cache_when_slurm_commands_are_absent(tmp_path, monkeypatch):
    p = tmp_path / "slack.json"
    write_doc(p, 1.0, 0)
    monkeypatch.setenv("PATH", str(tmp_path))  # no squeue, no scontrol
    monkeypatch.setenv("SLURM_JOB_PARTITION", "gpu")
    monkeypatch.setenv("SLURM_JOB_QOS", "scavenger")
    sl = Slack(cache=p, clock=Clock(2.0))
    assert sl.source == "cache" and sl.mode() == "light" and sl.last.signal.tier == "scavenger"
    monkeypatch.setenv("SLURMTOOLS_SLACK_SOURCE", "bogus")
    with pytest.raises(SlackError, match="source: expected auto, slurm or cache, got 'bogus'"):
        Slack(cache=p)


def test_settings_from_the_cache_round_trip():
    cfg = SlackSettings(poll_interval=5, windows=(PriceWindow("n", 0, 360, 2.0, (5, 6)),))
    assert SlackSettings.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert os.path.isabs(SlackSettings().cache_file)


def test_live_source_names_an_unknown_partition_or_tier_before_asking_slurm():
    for part, tier, words in (("nope", "scavenger", "partition 'nope' is not one of the site's (gpu)"),
                              ("gpu", "gold", "tier 'gold' is not one of the site's (production, standard, "
                                              "scavenger)")):
        sl = Slack(partition=part, tier=tier, source="slurm", site=SITE)
        r = sl.poll()
        assert r.signal is None and r.note == words and sl._backend is None
        assert sl.state.mode == "moderate" and words in sl.state.reason
