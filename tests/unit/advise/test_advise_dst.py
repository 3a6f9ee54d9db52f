"""Daylight-saving changes in advise: sacct prints local wall-clock times without an offset, and advise reads them
as the report does (docs/reports.md, "Time zones and clock changes"): as instants of the zone they were printed in
(TZ, or --tz for a saved dump). Under TZ=Europe/Berlin (02:00 -> 03:00 on 2026-03-29, 03:00 -> 02:00 on
2026-10-25) and TZ=America/New_York (02:00 -> 03:00 on 2026-03-08, 02:00 -> 01:00 on 2026-11-01): a run across
the spring change counts the hour it ran (it counted two), one across the autumn change three (it counted two),
and one from the repeated hour's first pass to its second is a run (it was a bad row). The rules judge those real
times, the epilog's records and steps land on their runs by instants, and `advise --tz` takes the report's rules
and one-line errors. UTC and zones without a change read as before."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from slurmtools.advise import rules
from slurmtools.advise.usage import load_runs
from slurmtools.reports.sacct import REPORT_FIELDS
from slurmtools.resources import example_site
from slurmtools.site import load_site
from tests.unit.advise.history import Job, epilog_records, sacct_dump
from tests.inproc import cli as _cli

#: per zone: the spring day and its skipped hour, the autumn day and its repeated hour (local wall clock)
ZONES = {
    "Europe/Berlin": {"spring": (2026, 3, 29), "gap": 2, "autumn": (2026, 10, 25), "twice": 2},
    "America/New_York": {"spring": (2026, 3, 8), "gap": 2, "autumn": (2026, 11, 1), "twice": 1},
}
#: the dump's fields, fixed here (not advise's own list): ElapsedRaw included, as `advise --fields` asks
FIELDS = tuple(REPORT_FIELDS) + ("Timelimit", "TotalCPU", "MaxRSS")
WINDOW = (datetime(2026, 1, 1), datetime(2026, 11, 20))


def _at(day: tuple, hour: int, minute: int = 0) -> datetime:
    return datetime(*day, hour, minute)


def _epoch(tz: str, t: datetime, second_pass: bool = False) -> float:
    """The instant of local time `t` in `tz` (in a repeated hour: its first pass, or its second)."""
    return t.replace(tzinfo=ZoneInfo(tz), fold=int(second_pass)).timestamp()


def _spring(tz: str, job_id: int, **kw) -> Job:
    """From half an hour before the skipped hour to half an hour after it: one hour."""
    day, gap = ZONES[tz]["spring"], ZONES[tz]["gap"]
    s, e = _at(day, gap - 1, 30), _at(day, gap + 1, 30)
    return Job(job_id, start=s, end=e, elapsed=3600, epoch=(_epoch(tz, s), _epoch(tz, e)), **kw)


def _autumn(tz: str, job_id: int, **kw) -> Job:
    """From half an hour before the repeated hour to half an hour after it: three hours."""
    day, h = ZONES[tz]["autumn"], ZONES[tz]["twice"]
    s, e = _at(day, h - 1, 30), _at(day, h + 1, 30)
    return Job(job_id, start=s, end=e, elapsed=10800, epoch=(_epoch(tz, s), _epoch(tz, e)), **kw)


def _twice(tz: str, job_id: int, **kw) -> Job:
    """From :40 in the repeated hour's first pass to :20 in its second: 40 minutes (End reads before Start)."""
    day, h = ZONES[tz]["autumn"], ZONES[tz]["twice"]
    s, e = _at(day, h, 40), _at(day, h, 20)
    return Job(job_id, start=s, end=e, elapsed=2400, epoch=(_epoch(tz, s), _epoch(tz, e, second_pass=True)), **kw)


def _write(tmp: Path, jobs: list[Job], extra_rows: tuple[str, ...] = ()) -> tuple[Path, Path]:
    dump = tmp / "sacct.txt"
    dump.write_text(sacct_dump(jobs, FIELDS) + "".join(r + "\n" for r in extra_rows))
    return dump, epilog_records(jobs, tmp / "jobs")


CASES = {"spring": (_spring, 3600), "autumn": (_autumn, 10800), "twice": (_twice, 2400)}


@pytest.mark.parametrize("tz", sorted(ZONES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_history_counts_the_time_a_run_ran(tmp_path, in_zone, tz, case):
    """Each run's time is its ElapsedRaw, and so its GPU-hours: 2 GPUs x 1 h across the spring change (it counted
    4 GPU-hours), x 3 h across the autumn change (it counted 4), x 40 min from the repeated hour's first pass to
    its second (a bad row, left out). Its epilog record lands on it."""
    in_zone(tz)
    make, secs = CASES[case]
    job = make(tz, 10, gpus=2, gpu_util=[90, 70])
    dump, ep = _write(tmp_path, [job])
    runs, notes = load_runs(*WINDOW, sacct_file=dump, epilog_dir=ep)
    assert notes == []
    (r,) = runs
    assert r.elapsed_s == secs
    assert r.gpus * r.elapsed_s / 3600 == pytest.approx(2 * secs / 3600)
    assert r.gpu_util == (90, 70)  # the epilog's record, placed on the run by instants
    assert r.time_limit_s == 4 * 3600 and r.cpus == 64  # advise's own fields joined to the run
    assert r.cpu_efficiency_pct == pytest.approx(100 * 38400 / (64 * secs))


@pytest.mark.parametrize("tz", sorted(ZONES))
@pytest.mark.parametrize("season", ["spring", "autumn"])
def test_the_time_rule_judges_real_run_times(tmp_path, in_zone, tz, season):
    """Across the spring change three runs of an hour under a 3 h limit get `--time 90m` (read as two hours each,
    3 h was under twice the longest run: nothing said). Across the autumn change three runs of three hours under
    a 5 h limit get nothing (read as two hours each, they got `--time 3h`, shorter than they ran)."""
    in_zone(tz)
    site = load_site(example_site())
    make, limit = (_spring, "03:00:00") if season == "spring" else (_autumn, "05:00:00")
    dump, _ = _write(tmp_path, [make(tz, 20 + i, limit=limit) for i in range(3)])
    runs, notes = load_runs(*WINDOW, sacct_file=dump, epilog_dir=tmp_path / "none")
    (a,) = rules.advise(runs, site)
    found = [f for f in a.findings if f.rule == "time"]
    if season == "spring":
        assert a.used["longest_completed_run_s"] == 3600
        (time_rule,) = found
        assert time_rule.changes == {"time_limit": (3 * 3600, 5400)}
        assert "longest run (1h)" in time_rule.evidence
    else:
        assert found == []
        assert a.used["longest_completed_run_s"] == 10800


@pytest.mark.parametrize("tz", sorted(ZONES))
def test_a_run_from_the_repeated_hours_first_pass_to_its_second_is_judged(tmp_path, in_zone, tz):
    """Three runs of a 4-GPU job, one of them from the repeated hour's first pass to its second, each with one GPU
    busy: `--gpus 1`, on all three runs (that run was a bad row, two runs are under min_runs: nothing said)."""
    in_zone(tz)
    site = load_site(example_site())
    day = ZONES[tz]["autumn"]
    busy = dict(gpus=4, gpu_util=[90, 0, 0, 0], name="sweep")
    jobs = [_twice(tz, 40, **busy)] + [Job(41 + i, start=datetime(*day) + timedelta(hours=8 + i), elapsed=2400,
                                           **busy) for i in range(2)]
    dump, ep = _write(tmp_path, jobs)
    runs, notes = load_runs(*WINDOW, sacct_file=dump, epilog_dir=ep)
    assert notes == []
    (a,) = rules.advise(runs, site)
    assert a.runs == 3 and a.used["gpus_busy_at_share"] == 1 and a.used["runs_with_gpu_use"] == 3
    (gpus,) = [f for f in a.findings if f.rule == "gpus"]
    assert gpus.changes == {"gpus": (4, 1)} and gpus.evidence.startswith("3 of your last 3 `sweep` runs")


@pytest.mark.parametrize("tz", sorted(ZONES))
def test_a_step_begun_in_the_repeated_hours_second_pass_is_its_runs(tmp_path, in_zone, tz):
    """A run begun at :50 in the repeated hour's first pass, with a step begun at :10 in its second pass: the
    step's MaxRSS is the run's (by wall-clock times the step began before its run and was placed on none)."""
    in_zone(tz)
    day, h = ZONES[tz]["autumn"], ZONES[tz]["twice"]
    start, end = _at(day, h, 50), _at(day, h + 1, 30)
    secs = int(_epoch(tz, end) - _epoch(tz, start))  # 100 minutes
    job = Job(50, start=start, end=end, elapsed=secs, max_rss="2G")
    step_start = _at(day, h, 10)
    step_secs = int(_epoch(tz, end) - _epoch(tz, step_start, second_pass=True))
    values = {"JobID": "50.0", "JobIDRaw": "50.0", "JobName": "python", "User": "alice", "Account": "vision",
              "State": "COMPLETED", "Start": f"{step_start:%Y-%m-%dT%H:%M:%S}", "End": f"{end:%Y-%m-%dT%H:%M:%S}",
              "ElapsedRaw": str(step_secs), "NodeList": "gpu01", "NNodes": "1", "NTasks": "1",
              "TRESUsageInAve": "cpu=00:10:00,mem=30G", "MaxRSS": "30G"}
    dump, _ = _write(tmp_path, [job], ("|".join(values.get(f, "") for f in FIELDS),))
    (r,), notes = load_runs(*WINDOW, sacct_file=dump)
    assert r.max_rss_mb == 30 * 1024
    assert r.elapsed_s == secs == 6000


def test_tz_names_the_zone_of_a_dump_written_elsewhere(tmp_path, in_zone):
    """A Berlin dump read on a UTC machine with `advise --tz Europe/Berlin` reads as under TZ=Europe/Berlin: the
    spring runs lasted an hour. Its errors are the report's, word for word: an unknown --tz, --tz without
    --sacct-file, and a TZ the C library would silently read as UTC."""
    tz = "Europe/Berlin"
    dump, _ = _write(tmp_path, [_spring(tz, 20 + i, limit="03:00:00") for i in range(3)])
    in_zone("UTC")
    site = str(example_site())
    base = ("--site", site, "--sacct-file", str(dump), "--epilog-dir", str(tmp_path / "none"))
    code, out, err = _cli("advise", *base, "--since", "2026-01-01", "--tz", tz, "--json", "--all")
    assert code == 0, err
    (shape,) = json.loads(out)["shapes"]
    assert shape["used"]["longest_completed_run_s"] == 3600
    assert "time" in [f["rule"] for f in shape["findings"]]
    report = ("report", "--site", site, "--since", "2026-03-01", "--until", "2026-04-01", "--format", "json",
              "--out", str(tmp_path / "o"), "-q")
    for bad in (("--sacct-file", str(dump), "--tz", "Mars/Olympus"), ("--tz", tz)):
        code, _, err = _cli("advise", "--site", site, *bad)
        assert code == 2 and len(err.splitlines()) == 1 and err.startswith("slurmtools: error: --tz: "), err
        assert (code, err) == _cli(*report, *bad)[::2]
    in_zone("Mars/Olympus")
    code, _, err = _cli("advise", *base)
    assert code == 2 and len(err.splitlines()) == 1 and "TZ=Mars/Olympus" in err and "--tz" in err
    assert (code, err) == _cli(*report, "--sacct-file", str(dump))[::2]


@pytest.mark.parametrize("tz", ["UTC", "Asia/Tokyo"])
def test_zones_without_a_change_read_as_before(tmp_path, in_zone, tz):
    """In UTC and in a zone without a change every figure is the wall-clock one, as before: a run's time is End -
    Start as printed, and its epilog record (epoch seconds) lands on it."""
    in_zone(tz)
    start = datetime(2026, 3, 29, 1, 30)
    jobs = [Job(60, start=start, elapsed=7200, gpus=2, gpu_util=[90, 70]),
            Job(61, start=datetime(2026, 10, 25, 2, 40), elapsed=2400, gpus=1, gpu_util=[50])]
    dump, ep = _write(tmp_path, jobs)
    runs, notes = load_runs(*WINDOW, sacct_file=dump, epilog_dir=ep)
    assert notes == []
    assert [(r.job_id, r.elapsed_s, r.gpu_util, r.time_limit_s) for r in runs] == [
        (60, 7200, (90, 70), 4 * 3600), (61, 2400, (50,), 4 * 3600)]


def test_the_reports_right_sizing_reads_the_dump_in_its_tz(tmp_path, in_zone):
    """`report --tz Europe/Berlin` on a UTC machine: its right-sizing section is advise's reading in that zone (the
    spring runs lasted an hour; read in the machine's zone, two)."""
    tz = "Europe/Berlin"
    dump, _ = _write(tmp_path, [_spring(tz, 30 + i, limit="03:00:00") for i in range(3)])
    in_zone("UTC")
    code, _, err = _cli("report", "--site", str(example_site()), "--sacct-file", str(dump), "--tz", tz,
                        "--epilog-dir", str(tmp_path / "none"), "--since", "2026-03-28", "--until", "2026-03-31",
                        "--history", "0", "--format", "json", "--out", str(tmp_path / "o"), "-q")
    assert code == 0, err
    (row,) = json.loads((tmp_path / "o" / "report.json").read_text())["tables"]["right_sizing"]
    assert row["longest_run_s"] == 3600 and row["runs"] == 3


def _site_looking_back_ten_years(tmp: Path) -> str:
    """The example site, its [advise] lookback ten years (2026's clock changes are in `plan --right-size`'s window,
    which ends now)."""
    src = example_site()
    text = src.read_text().replace('fabric = "', f'fabric = "{src.parent}/', 1)
    text = text.replace("\n[advise]\n", '\n[advise]\nlookback = "3650d"\n', 1)
    p = tmp / "site-10y.toml"
    p.write_text(text)
    return str(p)


def test_plan_right_size_reads_the_dump_in_its_tz(tmp_path, in_zone):
    """`plan --right-size --sacct-file F --tz Europe/Berlin` on a UTC machine reads the dump as `advise --tz` does:
    three runs of an hour across the spring change under a 3 h limit get `--time 90m`. There was no --tz (a usage
    error), and read in the machine's zone the runs lasted two hours (nothing said). As a process the command line
    is read without typer (`launch.DIRECT`), --tz included."""
    import os
    import subprocess

    tz = "Europe/Berlin"
    dump, _ = _write(tmp_path, [_spring(tz, 20 + i, limit="03:00:00") for i in range(3)])
    in_zone("UTC")
    plan = ("plan", "--idle", "--site", _site_looking_back_ten_years(tmp_path), "--user", "alice", "--name",
            "train-vit", "--gpus", "8", "--time", "3h", "--right-size", "--sacct-file", str(dump), "--epilog-dir",
            str(tmp_path / "none"), "--json")
    code, out, err = _cli(*plan, "--tz", tz, "--", "python", "t.py")
    assert code == 0, err
    d = json.loads(out)
    assert [(c["field"], c["from"], c["to"]) for c in d["right_size"]["changes"]] == [("time_limit", 10800, 5400)]
    assert d["time_limit_s"] == 5400 and "#SBATCH --time=01:30:00" in d["script"]
    code, out, err = _cli(*plan, "--", "python", "t.py")   # the machine's zone, UTC: two hours each
    assert code == 0, err
    assert json.loads(out)["right_size"]["changes"] == []
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "SLURMTOOLS_SITE", "SLURMTOOLS_DIRECT")}
    p = subprocess.run([sys.executable, "-m", "slurmtools", *plan, "--tz", tz, "--", "python", "t.py"],
                       capture_output=True, text=True, env={**env, "TZ": "UTC"}, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["right_size"] == d["right_size"]
    in_zone(tz)   # the machine in the dump's zone: the same without --tz
    code, out, err = _cli(*plan, "--", "python", "t.py")
    assert code == 0, err
    assert json.loads(out)["right_size"] == d["right_size"]


def test_plan_tz_errors_are_advises(tmp_path, in_zone):
    """--tz without --right-size, and --tz without --sacct-file, are one line each (the second word for word
    `advise`'s); an unknown zone too."""
    in_zone("UTC")
    dump, _ = _write(tmp_path, [_spring("Europe/Berlin", 20)])
    plan = ("plan", "--idle", "--site", str(example_site()), "--user", "alice", "--gpus", "8")
    code, _, err = _cli(*plan, "--tz", "Europe/Berlin", "--", "x")
    assert (code, err) == (2, "slurmtools: error: --tz: only with --right-size\n")
    code, _, err = _cli(*plan, "--right-size", "--tz", "Europe/Berlin", "--", "x")
    assert code == 2 and err.startswith("slurmtools: error: --tz: Europe/Berlin: only with --sacct-file")
    assert (code, err) == _cli("advise", "--site", str(example_site()), "--tz", "Europe/Berlin")[::2]
    code, _, err = _cli(*plan, "--right-size", "--sacct-file", str(dump), "--tz", "Mars/Olympus", "--", "x")
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("slurmtools: error: --tz: "), err
