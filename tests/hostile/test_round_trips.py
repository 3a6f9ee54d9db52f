"""Files slurmtools writes and reads back itself: whatever the writer accepts, its own reader must read as written.

Before: a prolog mark up to 300 s ahead of the epilog's clock (which the epilog accepts: NTP steps) or 25.11's
SLURM_JOB_START_TIME from a controller clock ahead of the node's gave a record whose start is after its end, and
the report refused the whole record (its GPU use and energy with it); so did SLURM_JOB_START_TIME far in the future,
SLURM_JOB_GPUS="0,0" (`gpus: [0, 0]`), SLURM_JOB_ID=0 or 4294967296 and a restart count past int32. A slack window
time of 1e300 or a step of 10**30 in the job's windows file was copied into the record and stopped the report with
an OverflowError or TypeError. The site took a price window starting at "24:00", which every job's reader of the
cached slack signal then refused (`start_min ... 0 to 1439`)."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from slurmtools.errors import ConfigError
from slurmtools.hooks import epilog
from slurmtools.hooks.common import MAX_JOB_ID, HookLog
from slurmtools.reports.energy import windows_table
from slurmtools.reports.epilog import read_epilog_dir
from slurmtools.site import load_site
from slurmtools.slack import SlackSettings, cache_document, read_cache, write_cache
from slurmtools.slack_loop import WINDOWS_FORMAT, WINDOWS_NAME, Window
from tests.unit.test_slack_cli_site import site_with

NOW = 1_790_000_000.0
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


class QuietLog(HookLog):
    def __init__(self):
        super().__init__("epilog")
        self.lines: list[str] = []

    def __call__(self, msg: str) -> None:
        self.lines.append(msg)


@contextmanager
def environ(env: dict[str, str]):
    old = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(old)


_n = [0]


def run_epilog(tmp: Path, env: dict[str, str], mark: str | None = None, windows: dict | None = None):
    """One epilog in-process (no Slurm: SLURMTOOLS_EPILOG_SCONTROL=0) in a fresh spool -> (record, spool/jobs)."""
    _n[0] += 1
    root = tmp / f"t{_n[0]}"
    root.mkdir(mode=0o755)
    os.chmod(tmp, 0o755)
    sp = root / "spool"
    sp.mkdir(mode=0o755)
    full = {"SLURMD_NODENAME": "gpu03", "SLURM_JOB_UID": "0", "SLURM_NODELIST": "gpu03", "SLURM_JOB_GPUS": "",
            "SLURMTOOLS_SPOOL_DIR": str(sp), "SLURMTOOLS_EPILOG_SCONTROL": "0", "SLURMTOOLS_SCONTROL": "/bin/false",
            "SLURMTOOLS_SCRATCH_PATTERN": str(root / "scratch-{job_id}"), "SLURMTOOLS_LAB_ETC": "/nonexistent",
            **env}
    if mark is not None:
        (sp / "running").mkdir(mode=0o755)
        (sp / "running" / f"{full['SLURM_JOB_ID']}.gpu03").write_text(mark)
    if windows is not None:
        s = root / f"scratch-{full['SLURM_JOB_ID']}"
        s.mkdir(mode=0o700)
        (s / WINDOWS_NAME).write_text(json.dumps(windows))
    log = QuietLog()
    with environ(full):
        rec = epilog.run(log, now=NOW)
    return rec, sp / "jobs", log


def read_back(jobs: Path):
    got = read_epilog_dir(jobs)
    assert [b.reason for b in got.bad.rows] == []
    return got


# ------------------------------------------------------------------------------- epilog record -> reports' reader

user_names = st.sampled_from(["alice", "DOMAIN\\user", "john smith", "user@REALM.EXAMPLE", "HOST$", "jos\u00e9",
                              "\u7528\u6237", "x" * 255])
job_ids = st.one_of(st.integers(1, 5), st.integers(MAX_JOB_ID - 2, MAX_JOB_ID + 2), st.integers(0, 10**18 - 1))
gpu_lists = st.lists(st.integers(0, 9999), max_size=6).map(lambda g: ",".join(map(str, g)))


@pytest.mark.usefixtures("require_root")
@FAST
@given(job=job_ids, user=user_names, restarts=st.integers(0, 10**12), gpus=gpu_lists,
       env_start=st.one_of(st.none(), st.integers(0, 10**12), st.integers(int(NOW) - 10**6, int(NOW) + 10**6)),
       mark_ahead=st.one_of(st.none(), st.floats(-10**9, 300.0)))
def test_every_record_the_epilog_writes_is_read_back_as_written(tmp_path, job, user, restarts, gpus, env_start,
                                                                 mark_ahead):
    """Job ids at and past 32 bits, odd user names, restart counts, GPU lists with repeats, starts from Slurm and
    from the prolog's mark far in the past and ahead of the epilog's clock: the record is read, never refused."""
    env = {"SLURM_JOB_ID": str(job), "SLURM_JOB_USER": user, "SLURM_JOB_RESTART_COUNT": str(restarts),
           "SLURM_JOB_GPUS": gpus}
    if env_start is not None:
        env["SLURM_JOB_START_TIME"] = str(env_start)
    mark = None if mark_ahead is None or NOW + mark_ahead <= 0 else f"{NOW + mark_ahead:.3f} {restarts}"
    rec, jobs, log = run_epilog(tmp_path, env, mark)
    if not 0 < job <= MAX_JOB_ID:
        assert rec is None and not jobs.exists()
        assert any("SLURM_JOB_ID" in line and "not a job id" in line for line in log.lines), log.lines
        return
    got = read_back(jobs)
    [row] = got.frame.to_dict("records")
    assert row["job_id_raw"] == job and row["user"] == user
    assert row["gpus"] == len(rec["gpus"] or [])
    assert rec["start"] is None or rec["start"] <= rec["end"]
    if rec["start_why"] is not None:  # a start left out is said, in the record and in hooks.log
        assert rec["start"] is None and f"record's start left empty: {rec['start_why']}" in log.lines


def test_a_start_after_the_epilogs_clock_is_left_out_with_the_reason(tmp_path, require_root):
    """A prolog mark 200 s ahead (accepted: a clock stepped by NTP): the record is read, its start unknown."""
    rec, jobs, log = run_epilog(tmp_path, {"SLURM_JOB_ID": "77"}, mark=f"{NOW + 200:.3f} 0")
    assert rec["start"] is None and rec["start_source"] is None and rec["end"] == NOW
    assert rec["start_why"].startswith(f"its start {NOW + 200:.3f} is 200 s after the run's end")
    assert f"record's start left empty: {rec['start_why']}" in log.lines
    assert read_back(jobs).frame["job_id_raw"].tolist() == [77]


def test_a_repeated_gpu_is_an_unreadable_gpu_list(tmp_path, require_root):
    rec, jobs, log = run_epilog(tmp_path, {"SLURM_JOB_ID": "78", "SLURM_JOB_GPUS": "0,0"})
    assert rec["gpus"] is None and "SLURM_JOB_GPUS='0,0' is not a list of GPU indices; unknown" in log.lines
    assert read_back(jobs).frame["job_id_raw"].tolist() == [78]


# ---------------------------------------------------------- slack windows file -> epilog record -> windows table

steps = st.one_of(st.integers(0, 10**6), st.integers(-(2**70), 2**70))
times = st.one_of(st.floats(NOW - 10**6, NOW + 10**6), st.floats(allow_nan=False, allow_infinity=False),
                  st.integers(-(2**70), 2**70))


@pytest.mark.usefixtures("require_root")
@FAST
@given(st.lists(st.tuples(st.sampled_from(["light", "moderate", "heavy"]), steps, steps, times, times,
                          st.text(max_size=300)), max_size=4))
def test_slack_windows_the_epilog_copies_are_shown_by_the_report(tmp_path, wins):
    """The training-loop helper's windows (Window.to_dict) with any step and time a Python int or float holds: the
    epilog copies what the report can show and leaves the rest null; the report reads the record and its table."""
    doc = {"format": WINDOWS_FORMAT, "job_id": "79", "run": 0, "written_at": NOW,
           "windows": [Window(m, a, t0, b, t1, why=why, ended="switch").to_dict() for m, a, b, t0, t1, why in wins]}
    rec, jobs, _ = run_epilog(tmp_path, {"SLURM_JOB_ID": "79"}, windows=doc)
    got = read_back(jobs)
    assert len(rec["slack_windows"]) == len(wins)
    table = windows_table(got.frame)
    assert (table is None) == (not wins) and (table is None or len(table) <= len(wins))


def test_a_record_of_an_older_epilog_with_an_unshowable_window_is_listed_not_fatal(tmp_path):
    """A record written before the epilog bounded the windows: listed as bad with the field, the report goes on."""
    good = {"job": 1, "run": 0, "gpus": [0], "start": NOW - 60, "end": NOW}
    (tmp_path / "1.0.gpu01.json").write_text(json.dumps(good))
    bad = {**good, "job": 2, "slack_windows": [{"mode": "light", "start_step": 1, "end_step": 2,
                                                "start_time": 1e300, "end_time": NOW}]}
    (tmp_path / "2.0.gpu01.json").write_text(json.dumps(bad))
    got = read_epilog_dir(tmp_path)
    assert got.frame["job_id_raw"].tolist() == [1]
    assert [b.reason for b in got.bad.rows] == ["field slack_windows.start_time: 1e+300 is not epoch seconds of "
                                                "1971-2199"]
    windows_table(got.frame)


# ------------------------------------------------------------------ site [slack] -> cached signal -> every job's reader

clock = st.one_of(st.sampled_from(["00:00", "23:59", "24:00", "12:30"]),
                  st.tuples(st.integers(0, 24), st.integers(0, 59)).map(lambda t: f"{t[0]:02d}:{t[1]:02d}"))
durations = st.sampled_from(["1s", "59s", "1m", "1h", "1d", "24855d", "24856d", "99999999999999d"])
factors = st.one_of(st.floats(0, 1e308), st.sampled_from([0, 1e308, 5e-324]))
windows_st = st.lists(st.tuples(clock, clock, factors, st.lists(st.sampled_from(["mon", "tue", "sun"]), min_size=1,
                                                                 max_size=3, unique=True)), max_size=3)
scores = st.sampled_from([0.0, 1e-300, 0.15, 0.5, 0.999999, 1.0])


@FAST
@example(poll="1m", age="1h", polls=3, heavy=0.5, light=0.15, margin=0.05, wins=[("24:00", "06:00", 1.0, ["mon"])])
@given(poll=durations, age=durations, polls=st.sampled_from([1, 3, 2147483580, 2147483581]), heavy=scores,
       light=scores, margin=st.sampled_from([0.0, 5e-324, 0.05, 0.49]), wins=windows_st)
def test_every_slack_table_the_site_takes_reaches_jobs_through_the_cache(tmp_path, poll, age, polls, heavy, light,
                                                                         margin, wins):
    """The site's [slack] at and past its bounds: either refused in one line naming the key, or written to the
    cached file and read back by the jobs' reader as the same settings."""
    body = [f'poll_interval = "{poll}"', f'max_age = "{age}"', f"polls = {polls}", f"heavy_at = {heavy!r}",
            f"light_at = {light!r}", f"margin = {margin!r}"]
    for i, (start, end, factor, days) in enumerate(wins):
        body += ["[[slack.windows]]", f'name = "w{i}"', f'start = "{start}"', f'end = "{end}"',
                 f"factor = {factor!r}", f"days = {json.dumps(days)}"]
    d = tmp_path / f"s{_n[0]}"
    _n[0] += 1
    d.mkdir()
    try:
        site = load_site(site_with(d, "[slack]\n" + "\n".join(body) + "\n"))
    except ConfigError as e:
        assert "\n" not in str(e) and ": slack." in str(e), str(e)
        return
    write_cache(d / "slack.json", cache_document([], site.slack, NOW))
    assert SlackSettings.from_dict(read_cache(d / "slack.json")["settings"]) == site.slack


def test_a_window_starting_at_24_00_is_refused_by_the_site(tmp_path):
    p = site_with(tmp_path, '[slack]\n[[slack.windows]]\nname = "n"\nstart = "24:00"\nend = "06:00"\nfactor = 1.0\n')
    with pytest.raises(ConfigError) as e:
        load_site(p)
    assert str(e.value) == (f'{p}: slack.windows[0].start: "24:00" is the end of a day, not a start: a window from '
                            'midnight starts at "00:00" (of the day after, in `days`)')

