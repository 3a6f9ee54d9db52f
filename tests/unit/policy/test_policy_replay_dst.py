"""`admin policy replay` in a zone with clock changes: sacct prints local wall-clock times, and the autumn change
prints an hour of them twice. The replay read each as the C library does (a repeated time as its first pass), so a
job that ended in the hour's second pass ended an hour early for the budgets (a job submitted before it ended was
refused as if the budget were spent), and a requeued job's run begun in the second pass was not its last. Its
budget months were UTC's. It now reads the times as the report does (`reports.zone.resolve` through
`slurm.sacct_times`, docs/reports.md "Time zones and clock changes"), in --tz's zone for a --sacct-file written
elsewhere, and counts budgets per month of that zone, as admission does."""

from __future__ import annotations

import json

import pytest

from slurmtools.site import find_site_path
from tests.inproc import cli
from tests.inproc import sacct_printing as _sacct

HEAD = ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Eligible|Start|End|ElapsedRaw|"
        "TimelimitRaw|NodeList|AllocTRES|ReqTRES|AllocCPUS")
#: Europe/Berlin's autumn change of 2026: 03:00 CEST back to 02:00 CET at 01:00 UTC on 2026-10-25
D = "2026-10-25"
SITE = str(find_site_path(None))   # students: 2000 GPU-hours a month, over_budget = "reject"


def row(job, account, gpus, submit, start, end, elapsed, state="COMPLETED"):
    nodes = -(-gpus // 8)
    v = {"JobID": str(job), "JobIDRaw": str(job), "JobName": "j", "User": "carol", "Account": account,
         "Partition": "gpu", "QOS": "standard", "State": state, "ExitCode": "0:0", "Submit": submit,
         "Eligible": submit, "Start": start, "End": end, "ElapsedRaw": str(elapsed), "TimelimitRaw": "1440",
         "NodeList": "gpu01", "AllocTRES": f"cpu=8,gres/gpu={gpus},node={nodes}",
         "ReqTRES": f"cpu=8,mem=64G,node={nodes},gres/gpu:h100={gpus},gres/gpu={gpus}", "AllocCPUS": "8"}
    return "|".join(v[f] for f in HEAD.split("|"))


def dump(tmp_path, *rows) -> str:
    p = tmp_path / "sacct.txt"
    p.write_text(HEAD + "\n" + "\n".join(rows) + "\n")
    return str(p)


def replay(path: str, *more: str) -> dict:
    code, out, err = cli("admin", "policy", "replay", "--site", SITE, "--sacct-file", path, "--since", "36500d",
                         "--json", *more)
    assert code == 0, err
    return json.loads(out)


#: job 1 spends the students' budget (8 GPUs x 312 h 40 min) and ends at 02:20 in the repeated hour's second pass
#: (01:20 UTC; its first pass, 00:20 UTC, is 40 minutes short of its ElapsedRaw); job 2 is submitted at 02:40 in
#: the first pass (00:40 UTC: it starts 02:45 CEST and runs to 04:00 CET, 2 h 15 min), before job 1 ended
BUDGET = (row(1, "students", 8, "2026-10-12T02:40:00", "2026-10-12T02:40:00", f"{D}T02:20:00", 13 * 86400 + 2400),
          row(2, "students", 1, f"{D}T02:40:00", f"{D}T02:45:00", f"{D}T04:00:00", 8100))


def test_a_job_submitted_before_the_budget_was_spent_is_admitted(tmp_path, in_zone):
    """Read as the first pass, job 1 ended at 00:20 UTC, before job 2's submission, and job 2 was refused (budget).
    It ended at 01:20 UTC: job 2 is admitted."""
    in_zone("Europe/Berlin")
    doc = replay(dump(tmp_path, *BUDGET))
    assert doc["changed"] == [] and doc["notes"] == []
    (b,) = doc["by_account_tier"]
    assert (b["account"], b["jobs"], b["refused"]) == ("students", 2, 0)


def test_tz_names_the_zone_of_a_dump_written_elsewhere(tmp_path, in_zone):
    """The Berlin dump on a UTC machine with `--tz Europe/Berlin` replays as under TZ=Europe/Berlin (there was no
    --tz). Without --tz it is read in the machine's zone, UTC: job 1 ends at 02:20, before job 2's submission at
    02:40, and job 2 is refused."""
    in_zone("UTC")
    path = dump(tmp_path, *BUDGET)
    in_berlin = replay(path, "--tz", "Europe/Berlin")
    assert in_berlin["changed"] == [] and in_berlin["by_account_tier"][0]["refused"] == 0
    in_utc = replay(path)
    assert [(c["job_id"], c["policy"]) for c in in_utc["changed"]] == [("2", "budget")]


def test_a_requeued_jobs_last_run_is_the_one_begun_later(tmp_path, in_zone):
    """`sacct -D`: run 1 02:40-02:50 (first pass, requeued), run 2 02:10 (second pass) to 03:30. By wall-clock times
    run 1 was the last and the job, refused for its 40 GPUs, refused 40 x 10 min of GPU time; its last run took
    80 minutes."""
    in_zone("Europe/Berlin")
    doc = replay(dump(tmp_path,
                      row(7, "vision", 40, f"{D}T02:30:00", f"{D}T02:40:00", f"{D}T02:50:00", 600, "REQUEUED"),
                      row(7, "vision", 40, f"{D}T02:30:00", f"{D}T02:10:00", f"{D}T03:30:00", 4800)))
    (b,) = doc["by_account_tier"]
    assert (b["jobs"], b["refused"], b["gpu_hours_refused"]) == (1, 1, round(40 * 4800 / 3600, 3))
    assert doc["notes"] == ["1 earlier run(s) of requeued or resized jobs (sacct -D) left out: each job is replayed "
                            "once, as its last run (what sacct lists without --duplicates)"]


def test_budget_months_are_the_zones(tmp_path, in_zone):
    """Job 2 is submitted at 00:30 on 1 November in Berlin (23:30 UTC on 31 October): November's budget, untouched.
    Its month was UTC's, October, which job 1 had spent: refused."""
    in_zone("Europe/Berlin")
    doc = replay(dump(tmp_path,
                      row(1, "students", 8, "2026-10-18T00:00:00", "2026-10-18T00:00:00", "2026-10-31T00:00:00",
                          13 * 86400 + 3600),
                      row(2, "students", 1, "2026-11-01T00:30:00", "2026-11-01T00:30:00", "2026-11-01T01:30:00",
                          3600)))
    assert doc["changed"] == []


def test_a_time_nothing_tells_apart_is_said_in_a_note(tmp_path, in_zone):
    in_zone("Europe/Berlin")
    doc = replay(dump(tmp_path, row(5, "vision", 8, f"{D}T02:05:00", f"{D}T02:10:00", f"{D}T05:00:00", 10200)))
    assert doc["notes"] == ["1 job line(s) hold a time in the repeated hour of a change back from daylight-saving "
                            "time in Europe/Berlin that nothing tells apart (no ElapsedRaw on the line, or a Submit "
                            "that fits either pass): read as that hour's first pass"]


def test_a_time_the_spring_change_skipped_is_refused_in_one_line(tmp_path, in_zone):
    in_zone("Europe/Berlin")
    path = dump(tmp_path, row(1, "vision", 8, "2026-03-29T01:50:00", "2026-03-29T02:30:00", "2026-03-29T04:00:00",
                              3600))
    code, out, err = cli("admin", "policy", "replay", "--site", SITE, "--sacct-file", path, "--since", "36500d")
    assert (code, out) == (2, "")
    assert err == (f"slurmtools: error: {path}:2: Start: 2026-03-29T02:30:00 is no time in Europe/Berlin: the "
                   f"clocks went from 02:00 to 03:00 that night (sacct never prints it)\n")


def test_tz_errors_are_the_reports(tmp_path, in_zone):
    """--tz without --sacct-file, an unknown --tz, and a TZ the C library would read as UTC: one line each, word for
    word `report`'s."""
    in_zone("UTC")
    path = dump(tmp_path, *BUDGET)
    report = ("report", "--site", SITE, "--since", "2026-10-01", "--until", "2026-11-01", "--format", "json",
              "--out", str(tmp_path / "o"), "-q")
    for bad in (("--tz", "Europe/Berlin"), ("--sacct-file", path, "--tz", "Mars/Olympus")):
        code, _, err = cli("admin", "policy", "replay", "--site", SITE, *bad)
        assert code == 2 and len(err.splitlines()) == 1 and err.startswith("slurmtools: error: --tz: "), err
        assert (code, err) == cli(*report, *bad)[::2]
    in_zone("Mars/Olympus")
    code, _, err = cli("admin", "policy", "replay", "--site", SITE, "--sacct-file", path)
    assert code == 2 and len(err.splitlines()) == 1 and "TZ=Mars/Olympus" in err
    assert (code, err) == cli(*report, "--sacct-file", path)[::2]


def test_the_live_replay_reads_sacct_as_a_dump_is_read(tmp_path, in_zone, monkeypatch):
    """Without --sacct-file the commands backend's sacct text is read the same way (its records read the repeated
    hour as its first pass: job 2 was refused)."""
    import slurmtools.cli.common as common

    in_zone("Europe/Berlin")
    from slurmtools.slurm.commands import ACCT_FIELDS

    text = "|".join(ACCT_FIELDS) + "\n" + "\n".join(
        "|".join(dict(zip(HEAD.split("|"), r.split("|")), JobName="j").get(f, "") for f in ACCT_FIELDS)
        for r in BUDGET) + "\n"
    backend = _sacct(text)
    monkeypatch.setattr(common, "backend", lambda: backend)
    code, out, err = cli("admin", "policy", "replay", "--site", SITE, "--json")
    assert code == 0, err
    assert "--allocations" in backend.argv and "--duplicates" not in backend.argv
    doc = json.loads(out)
    assert doc["changed"] == [] and doc["by_account_tier"][0]["jobs"] == 2


@pytest.mark.parametrize("tz", ["UTC", "Asia/Tokyo"])
def test_zones_without_a_change_replay_as_before(tmp_path, in_zone, tz):
    """A guard: without a clock change every time reads as the C library reads it; budget months are the zone's
    (in UTC as before)."""
    in_zone(tz)
    doc = replay(dump(tmp_path, *BUDGET))
    assert [(c["job_id"], c["policy"]) for c in doc["changed"]] == [("2", "budget")] and doc["notes"] == []
