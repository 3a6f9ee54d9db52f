"""The cached slack file as a training process meets it: torn, empty, foreign, of the wrong types, NaN, huge, a FIFO
or folder, a planted symlink, a clock far ahead. A bad file must never raise into the training loop nor hang it:
the mode holds, the reason names the file and what is wrong, it is said once, and a good file brings the signal
back (docs/slack.md, "Inside a job")."""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from slurmtools.slack import Slack, SlackError, SlackSettings, SlackSignal, cache_document, read_cache, write_cache
from slurmtools.slack_loop import SlackLoop

CFG = SlackSettings(poll_interval=1, polls=1, margin=0.0, max_age=120)
T0 = 10_000.0


def good_doc(taken_at: float, idle: int) -> dict:
    s = SlackSignal(partition="gpu", tier="scavenger", idle_gpus=idle, total_gpus=100, demand_ahead=0,
                    preemptor_demand=0, exposed_lower_gpus=0, exposed_same_gpus=0, preempt_chance=0.0,
                    taken_at=taken_at)
    return cache_document([s], CFG, taken_at, default_partition="gpu", default_tier="scavenger")


def with_signal(**kw) -> bytes:
    d = good_doc(T0, 90)
    d["signals"][0].update(kw)
    return json.dumps(d).encode()


def with_settings(**kw) -> bytes:
    d = good_doc(T0, 90)
    d["settings"].update(kw)
    return json.dumps(d).encode()


def put(p: Path, body: bytes) -> None:
    """A file as someone other than the refresher leaves it (no atomic rename), mode 0644."""
    p.write_bytes(body)
    p.chmod(0o644)


class Timer:
    """The training process's clocks, moved by hand; each boundary is a new poll."""

    def __init__(self) -> None:
        self.t = T0

    def wall(self) -> float:
        return self.t

    def mono(self) -> float:
        return self.t * 100


GOOD = json.dumps(good_doc(T0, 90)).encode()
BAD = [  # (id, how to make the path bad, words the reason must hold)
    ("torn", lambda p: put(p, GOOD[: len(GOOD) // 2]), "not JSON (a torn or foreign file)"),
    ("empty", lambda p: put(p, b""), "not JSON (empty)"),
    ("binary", lambda p: put(p, b"\xff\xfe\x00garbage"), "not JSON"),
    ("a list", lambda p: put(p, b"[1, 2]"), "format 'list'"),
    ("newer format", lambda p: put(p, GOOD.replace(b"slurmtools-slack/1", b"slurmtools-slack/2")),
     "format 'slurmtools-slack/2', expected 'slurmtools-slack/1'"),
    ("idle a string", lambda p: put(p, with_signal(idle_gpus="lots")), "gpu/scavenger: idle_gpus: expected a whole"),
    ("idle true", lambda p: put(p, with_signal(idle_gpus=True)), "idle_gpus: expected a whole number"),
    ("demand negative", lambda p: put(p, with_signal(demand_ahead=-5)), "demand_ahead: expected a whole number"),
    ("idle past a float", lambda p: put(p, with_signal(idle_gpus=10 ** 400)), "idle_gpus: expected a whole number"),
    ("field missing", lambda p: put(p, with_signal(total_gpus=None)), "total_gpus: expected a whole number"),
    ("chance NaN", lambda p: put(p, with_signal(preempt_chance=float("nan"))), "NaN in it"),
    ("chance overflows", lambda p: put(p, GOOD.replace(b'"preempt_chance": 0.0', b'"preempt_chance": 1e400')),
     "preempt_chance: expected a number from 0 to 1, got inf"),
    ("chance 5", lambda p: put(p, with_signal(preempt_chance=5)), "preempt_chance: expected a number from 0 to 1"),
    ("taken_at Infinity", lambda p: put(p, json.dumps({**good_doc(T0, 90), "taken_at": float("inf")}).encode()),
     "Infinity in it"),
    ("taken_at a string", lambda p: put(p, json.dumps({**good_doc(T0, 90), "taken_at": "now"}).encode()),
     "taken_at or signals missing"),
    ("dated far ahead", lambda p: put(p, json.dumps(good_doc(T0 + 10_000, 90)).encode()),
     "ahead of this node's clock, past max_age 120s"),
    ("huge", lambda p: (put(p, b""), os.truncate(p, 17 << 20)), "more than 16777216 bytes"),
    ("a folder", lambda p: p.mkdir(), "a folder, not a plain file"),
    ("a FIFO", lambda p: os.mkfifo(p), "a FIFO, not a plain file"),
    ("a symlink", lambda p: (put(p.with_name("elsewhere.json"), GOOD), p.symlink_to(p.with_name("elsewhere.json"))),
     "a symlink, not followed"),
    ("writable by anyone", lambda p: (put(p, GOOD), p.chmod(0o666)), "writable by anyone (mode 666"),
]


@pytest.fixture
def no_hang():
    """Opening a FIFO with no writer blocks for good: fail the test in seconds rather than hang the suite."""
    def boom(signum, frame):
        raise TimeoutError("the slack reader blocked")

    old = signal.signal(signal.SIGALRM, boom)
    signal.setitimer(signal.ITIMER_REAL, 5.0)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("make, words", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_signal_file_holds_the_mode_says_why_once_and_recovers(tmp_path, monkeypatch, no_hang, make, words):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    p = tmp_path / "slack.json"
    clock = Timer()
    write_cache(p, good_doc(clock.t, 90))  # 90 of 100 idle: heavy
    said: list[str] = []
    sl = Slack(source="cache", cache=p, clock=clock.wall, monotonic=clock.mono)
    loop = SlackLoop(sl, every=1, path=tmp_path / "w.json", log=said.append)
    assert loop.step(0) == "heavy"
    os.unlink(p)
    make(p)
    for step in range(1, 6):  # five boundaries, five polls of the bad file
        clock.t += 2
        assert loop.step(step) == "heavy"
        assert sl.last.signal is None and words in sl.last.note and str(p) in sl.last.note
    assert words in sl.state.reason and "mode heavy held" in sl.state.reason and "\n" not in sl.state.reason
    lost = [m for m in said if "signal lost" in m]
    assert len(lost) == 1 and words in lost[0] and "step 1" in lost[0], said
    # the refresher renames a good file into place: the signal is back, and the cluster is full now
    if p.is_dir():
        p.rmdir()
    clock.t += 2
    write_cache(p, good_doc(clock.t, 5))
    assert loop.step(6) == "light"
    assert [m for m in said if "signal back" in m] == [f"slack signal back at step 6: cached in {p}, 0s old"]
    assert sum("signal lost" in m for m in said) == 1


BAD_SETTINGS = [  # (id, the first file's settings, words): they are the site's thresholds, read from the first file
    ("poll_interval a string", with_settings(poll_interval="1m"),
     "settings: poll_interval: expected a whole number from 1 to 2147483580, got '1m'"),
    ("max_age below the interval", with_settings(max_age=0), "settings: max_age: expected a whole number from 1 to 2147483580"),
    ("margin a string", with_settings(margin="x"), "settings: margin: expected a finite number from 0 to 1, got 'x'"),
    ("bands meet", with_settings(margin=0.2), "settings: margin: 0.2 makes the bands around light_at and heavy_at"),
    ("polls a float", with_settings(polls=2.5), "settings: polls: expected a whole number from 1 to 2147483580, got 2.5"),
    ("window factor a string", with_settings(windows=[
        {"name": "n", "start_min": 0, "end_min": 1440, "factor": "2", "days": [0]}]), "settings: windows[0].factor"),
    ("window days names", with_settings(windows=[
        {"name": "n", "start_min": 0, "end_min": 1440, "factor": 2, "days": ["mon"]}]), "settings: windows[0].days"),
    ("settings missing", json.dumps({**good_doc(T0, 90), "settings": None}).encode(),
     "settings: expected a table, got None"),
    ("a key missing", json.dumps({**good_doc(T0, 90), "settings": {**CFG.to_dict(), "heavy_at": None}}).encode(),
     "settings: heavy_at: expected a finite number from 0 to 1, got None"),
]


@pytest.mark.parametrize("body, words", [b[1:] for b in BAD_SETTINGS], ids=[b[0] for b in BAD_SETTINGS])
def test_bad_site_settings_in_the_file_are_no_signal_not_defaults(tmp_path, body, words):
    """The thresholds and intervals come from the file: a wrong one used to raise TypeError at a later poll
    ('1m' + a float) or, when damaged otherwise, the library silently decided with its own defaults."""
    p = tmp_path / "slack.json"
    put(p, body)
    clock = Timer()
    sl = Slack(source="cache", cache=p, clock=clock.wall, monotonic=clock.mono)
    for _ in range(3):
        clock.t += 2
        assert sl.mode() == "moderate"
        assert sl.last.signal is None and sl.last.note.startswith(f"slack: {p}: {words}")
    write_cache(p, good_doc(clock.t, 90))
    clock.t += 2
    assert sl.mode() == "heavy" and sl.settings == CFG


def test_a_file_another_user_put_in_a_folder_anyone_can_write_is_not_read(tmp_path):
    """/tmp-like folders: another user may plant the file before the refresher writes it. The owner here is a
    stat of the real file with another uid, so the rule is tested without a second user account."""
    from slurmtools.slack import _not_the_refreshers

    d = tmp_path / "open"
    d.mkdir()
    d.chmod(0o1777)
    p = d / "slack.json"
    put(p, GOOD)
    st_ = os.stat(p)
    other = os.stat_result((st_.st_mode, st_.st_ino, st_.st_dev, st_.st_nlink, os.geteuid() + 4242, st_.st_gid,
                            st_.st_size, 0, 0, 0))
    assert _not_the_refreshers(p, other) == (f"owned by uid {os.geteuid() + 4242} in a folder anyone can write "
                                             f"(anyone could have put it there)")
    assert _not_the_refreshers(p, st_) is None  # this user's own file, or root's, stands
    d.chmod(0o755)  # the spool folder as the site makes it: the refresher's service user may own the file
    assert _not_the_refreshers(p, other) is None
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o644 and read_cache(p)["format"] == "slurmtools-slack/1"


_json = st.recursive(st.none() | st.booleans() | st.integers(-10 ** 20, 10 ** 20) | st.text(max_size=5)
                     | st.floats(allow_nan=True, allow_infinity=True),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                 max_size=3), max_leaves=6)
_paths = st.sampled_from([("signals", 0, k) for k in SlackSignal.__dataclass_fields__]
                         + [("settings", k) for k in CFG.to_dict()]
                         + [(k,) for k in good_doc(T0, 1)] + [("signals", 0), ("signals",), ("settings",)])


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(_paths, _json), min_size=1, max_size=3))
def test_no_document_makes_a_poll_raise(tmp_path, changes):
    """Any value at any place of a good document: a poll gives a signal or none with a reason, never an exception."""
    def holds(at, k) -> bool:
        return isinstance(at, dict) and isinstance(k, str) or isinstance(at, list) and type(k) is int and k < len(at)

    doc = good_doc(T0, 90)
    for path, value in changes:
        at = doc
        for k in path[:-1]:
            at = at[k] if holds(at, k) and (isinstance(at, list) or k in at) else None
        if holds(at, path[-1]):
            at[path[-1]] = value
    p = tmp_path / "slack.json"
    put(p, json.dumps(doc).encode())
    sl = Slack(source="cache", cache=p, clock=lambda: T0 + 1, monotonic=lambda: 0.0)
    r = sl.poll()
    assert r.signal is not None or (r.note and "\n" not in r.note and sl.state.mode == "moderate")
    if r.signal is not None:
        assert 0.0 <= r.score <= 1.0 and sl.state.mode in ("light", "moderate", "heavy")


def test_a_reader_error_is_one_line_naming_the_file_for_the_cli(tmp_path, no_hang):
    """The CLI and the refresher read with read_cache too: a FIFO at --out is refused at once, not waited on."""
    p = tmp_path / "slack.json"
    os.mkfifo(p)
    with pytest.raises(SlackError, match=f"slack: {p}: a FIFO, not a plain file"):
        read_cache(p)


@pytest.mark.parametrize("value", ["x", "-1", "\u00b2", "\u0661", "1.0"])
def test_an_unreadable_restart_count_is_refused_at_construction(tmp_path, monkeypatch, value):
    """SLURM_RESTART_COUNT='x' raised a bare ValueError; '\u0661' read as run 1, filing windows under another run."""
    monkeypatch.setenv("SLURM_RESTART_COUNT", value)
    sl = Slack(source="cache", cache=tmp_path / "none.json")
    with pytest.raises(SlackError) as e:
        SlackLoop(sl, path=tmp_path / "w.json")
    assert str(e.value) == (f"slack: SLURM_RESTART_COUNT={value!r}: expected a whole number of restarts "
                            f"(ASCII digits)")
    monkeypatch.setenv("SLURM_RESTART_COUNT", " 2 ")
    assert SlackLoop(sl, path=tmp_path / "w.json").run == 2
    monkeypatch.delenv("SLURM_RESTART_COUNT")
    assert SlackLoop(sl, path=tmp_path / "w.json").run == 0


@pytest.mark.parametrize("state, words", [
    ({"mode": "heavy", "known": True, "count": "1", "candidate": "light"}, "count: expected a whole number, got '1'"),
    ({"mode": "heavy", "known": True, "observations": None}, "observations: expected a whole number, got None"),
    ({"mode": "heavy", "known": True, "last_taken_at": "yesterday"}, "last_taken_at: expected a number"),
    ({"mode": "heavy", "known": "yes"}, "known or reason of the wrong type ('yes'"),
    (["heavy"], "expected a table, got ['heavy']"),
])
def test_a_saved_mode_state_of_wrong_types_is_refused_at_resume_not_in_the_loop(tmp_path, state, words):
    """A checkpoint's slack state with count '1' was taken in, then decide() raised TypeError at the first boundary
    after the resume, inside the training loop."""
    p = tmp_path / "slack.json"
    write_cache(p, good_doc(T0, 5))
    loop = SlackLoop(Slack(source="cache", cache=p, clock=lambda: T0), every=1, path=tmp_path / "w.json")
    with pytest.raises(SlackError) as e:
        loop.load_state_dict({"format": "slurmtools-slack-windows/1", "state": state, "windows": [],
                              "current": None}, step=10)
    assert words in str(e.value) and str(e.value).startswith("slack: saved mode state")


def test_settings_at_the_sites_bounds_read_back_from_the_cached_file_and_past_them_are_refused():
    """The site and the cached file's reader take the same range: the longest values the site takes (Slurm's
    longest time limit) read back as written, where a site's "99999999999999d" used to be written and then refused."""
    from slurmtools.durations import TIME_LIMIT_MAX
    from slurmtools.slack_settings import SlackSettings

    top = SlackSettings(poll_interval=TIME_LIMIT_MAX, max_age=TIME_LIMIT_MAX, polls=TIME_LIMIT_MAX)
    assert SlackSettings.from_dict(top.to_dict()) == top
    for key in ("poll_interval", "max_age", "polls"):
        d = top.to_dict()
        d[key] = TIME_LIMIT_MAX + 1
        with pytest.raises(ValueError, match=f"^{key}: expected a whole number from .* to {TIME_LIMIT_MAX}, got "):
            SlackSettings.from_dict(d)
