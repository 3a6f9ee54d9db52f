"""The window the command backend hands sacct and sacctmgr is local wall-clock time, as they read -S/-E and
Start=/End=: a datetime that carries its zone is turned into local time first (its reading in UTC moved the window
by the zone's offset under TZ=Europe/Berlin, and a lab helper asking for the last day in UTC found no job)."""

import os
import time
from datetime import datetime, timezone

import pytest

from slurmtools.slurm.commands import CommandBackend


class _Argv(CommandBackend):
    """Records the command line instead of running it: what is checked is the argv slurmtools builds."""

    def __init__(self, env=None):
        super().__init__(env={"TZ": os.environ["TZ"]} if env is None else env)
        self.argv = None

    def run(self, argv, *a, **k):
        self.argv = list(argv)
        return ""


@pytest.fixture
def berlin(monkeypatch):
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _after(argv, flag):
    return argv[argv.index(flag) + 1]


def test_an_aware_window_reaches_sacct_as_local_time(berlin):
    b = _Argv()
    b.accounting_dump(datetime(2026, 11, 27, 6, 0, tzinfo=timezone.utc), datetime(2026, 7, 1, 22, 30, tzinfo=timezone.utc))
    assert _after(b.argv, "-S") == "2026-11-27T07:00:00"    # CET, UTC+1
    assert _after(b.argv, "-E") == "2026-07-02T00:30:00"    # CEST, UTC+2


def test_a_naive_window_is_taken_as_local_already(berlin):
    b = _Argv()
    b.accounting_dump(datetime(2026, 11, 27, 6, 0), datetime(2026, 11, 28, 6, 0))
    assert (_after(b.argv, "-S"), _after(b.argv, "-E")) == ("2026-11-27T06:00:00", "2026-11-28T06:00:00")


def test_the_events_window_too(berlin):
    b = _Argv()
    b.events_dump(datetime(2026, 3, 29, 0, 30, tzinfo=timezone.utc), datetime(2026, 3, 29, 1, 30, tzinfo=timezone.utc))
    assert "Start=2026-03-29T01:30:00" in b.argv and "End=2026-03-29T03:30:00" in b.argv   # the spring change at 01:00 UTC


def test_the_window_is_in_the_zone_of_the_commands_environment(berlin):
    # sacct reads -S/-E in its own TZ: a backend run with another TZ than this process gets its window in that one
    b = _Argv({"TZ": "America/New_York"})
    b.accounting_dump(datetime(2026, 11, 27, 6, 0, tzinfo=timezone.utc), datetime(2026, 7, 1, 22, 30, tzinfo=timezone.utc))
    assert (_after(b.argv, "-S"), _after(b.argv, "-E")) == ("2026-11-27T01:00:00", "2026-07-01T18:30:00")
    b = _Argv({"TZ": ":Asia/Kolkata"})
    b.events_dump(datetime(2026, 3, 29, 0, 30, tzinfo=timezone.utc), datetime(2026, 3, 29, 1, 30, tzinfo=timezone.utc))
    assert "Start=2026-03-29T06:00:00" in b.argv and "End=2026-03-29T07:00:00" in b.argv


def test_without_tz_the_commands_read_etc_localtime(berlin):
    from zoneinfo import ZoneInfo

    b = _Argv({})
    when = datetime(2026, 11, 27, 6, 0, tzinfo=timezone.utc)
    b.accounting_dump(when, when)
    with open("/etc/localtime", "rb") as fh:
        expect = when.astimezone(ZoneInfo.from_file(fh)).strftime("%Y-%m-%dT%H:%M:%S")
    assert _after(b.argv, "-S") == expect   # on this machine UTC, not this process's Berlin


def test_a_tz_this_process_cannot_read_is_one_line():
    from slurmtools.errors import SlurmtoolsError

    b = _Argv({"TZ": "Mars/Olympus_Mons"})
    with pytest.raises(SlurmtoolsError) as err:
        b.accounting_dump(datetime(2026, 11, 27, 6, 0, tzinfo=timezone.utc), datetime(2026, 11, 28, tzinfo=timezone.utc))
    assert "TZ=Mars/Olympus_Mons" in str(err.value) and "\n" not in str(err.value)
