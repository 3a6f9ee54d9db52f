"""Reading history: the report's sacct reader plus advise's own fields from the same dump, and the epilog's
per-GPU records joined to the right run."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from slurmtools.advise.usage import _cpu_time, _limit, gpu_detail, load_runs, sacct_fields
from tests.unit.advise.history import WINDOW, Job, epilog_records, sacct_dump, write


def test_runs_carry_asked_and_used(tmp_path):
    jobs = [Job(101, gpu_util=[90, 80] + [0] * 6, mem_util=[40, 30] + [0] * 6, gpu_mem_bytes=30 * 2**30,
                total_cpu="1-02:00:00", max_rss="20G", elapsed=5400)]
    d, e = write(tmp_path, jobs)
    (r,), notes = load_runs(*WINDOW, sacct_file=d, epilog_dir=e)
    assert notes == []
    assert (r.job_id, r.run, r.user, r.name, r.gpus, r.gpu_type, r.cpus) == (101, 0, "alice", "train-vit", 8, "h100",
                                                                              64)
    assert r.mem_mb == 512 * 1024 and r.time_limit_s == 4 * 3600 and r.elapsed_s == 5400
    assert r.total_cpu_s == 26 * 3600 and r.max_rss_mb == 20 * 1024
    assert r.gpu_util == (90, 80, 0, 0, 0, 0, 0, 0) and r.gpu_mem_util == (40, 30, 0, 0, 0, 0, 0, 0)
    assert r.gpu_mem_mb == 30 * 1024
    assert r.cpu_efficiency_pct == pytest.approx(100 * 26 * 3600 / (64 * 5400))


def test_slurm_gpuutil_when_no_epilog_record(tmp_path):
    d, _ = write(tmp_path, [Job(102, slurm_util=150.0)])
    (r,), notes = load_runs(*WINDOW, sacct_file=d, epilog_dir=tmp_path / "none")
    assert r.gpu_util == () and r.slurm_gpu_util == 150.0
    assert notes == [f"{tmp_path / 'none'}: no epilog GPU records (folder missing): GPU use from Slurm's gres/gpuutil "
                     f"only"]


def test_requeued_runs_get_their_own_steps_and_records(tmp_path):
    a = Job(103, elapsed=600, state="REQUEUED", max_rss="2G", gpu_util=[50] * 8)
    b = Job(103, elapsed=1200, max_rss="9G", start=a.start + timedelta(hours=1), gpu_util=[90] + [0] * 7)
    (tmp_path / "sacct.txt").write_text(sacct_dump([a, b]))
    folder = epilog_records([a], tmp_path / "jobs")
    rec = json.loads((folder / "103.0.gpu01.json").read_text())
    # the second run's record, as the epilog names it: run 1
    rec2 = dict(rec, run=1, restart_count=1, start=b.start.timestamp(),
                end=(b.start + timedelta(seconds=b.elapsed)).timestamp(),
                gpu_accounting=[dict(g, gpu_util_pct=(90 if g["gpu"] == 0 else 0)) for g in rec["gpu_accounting"]])
    (folder / "103.1.gpu01.json").write_text(json.dumps(rec2))
    runs, _ = load_runs(*WINDOW, sacct_file=tmp_path / "sacct.txt", epilog_dir=folder)
    got = {r.run: r for r in runs}
    assert got[0].state == "REQUEUED" and got[0].max_rss_mb == 2 * 1024 and got[0].gpu_util == (50,) * 8
    assert got[1].state == "COMPLETED" and got[1].max_rss_mb == 9 * 1024 and got[1].gpu_util == (90,) + (0,) * 7


def test_a_dump_without_advise_fields_says_what_is_not_judged(tmp_path):
    from slurmtools.reports.sacct import SACCT_FIELDS

    (tmp_path / "s.txt").write_text(sacct_dump([Job(104)], fields=tuple(SACCT_FIELDS)))
    (r,), notes = load_runs(*WINDOW, sacct_file=tmp_path / "s.txt")
    # CPUs and memory asked come from AllocTRES and ReqTRES, which the report reads too
    assert r.cpus == 64 and r.mem_mb == 512 * 1024
    assert r.time_limit_s is None and r.total_cpu_s is None and r.max_rss_mb is None
    assert notes == [f"the sacct dump has no Timelimit, TotalCPU, MaxRSS: what depends on them is "
                     f"not judged (dump with `sacct --parsable2 --format={','.join(sacct_fields())}`)"]


def test_runs_outside_the_window_or_still_running_are_left_out(tmp_path):
    jobs = [Job(105), Job(106, state="RUNNING")]
    d, _ = write(tmp_path, jobs)
    runs, _ = load_runs(*WINDOW, sacct_file=d)
    assert [r.job_id for r in runs] == [105]
    runs, _ = load_runs(jobs[0].start + timedelta(days=1), jobs[0].start + timedelta(days=2), sacct_file=d)
    assert runs == []
    # a run that ended in the very second the window ends counts (advise runs right after the jobs it judges)
    end = jobs[0].start + timedelta(seconds=jobs[0].elapsed)
    assert [r.job_id for r in load_runs(jobs[0].start, end, sacct_file=d)[0]] == [105]


def test_unreadable_epilog_records_are_skipped_and_counted(tmp_path):
    folder = epilog_records([Job(107, gpu_util=[10] * 8)], tmp_path / "jobs")
    (folder / "torn.json").write_text('{"job": 108, "gpu_acc')
    (folder / "bad.json").write_text(json.dumps({"job": 109, "gpu_util_pct": 250}))
    got, notes = gpu_detail(folder)
    assert set(got) == {(107, 0)}
    assert len(notes) == 1 and notes[0].startswith("2 unreadable epilog record(s) skipped (first: bad.json: field "
                                                   "gpu_util_pct: 250 is not 0 to 100)")


@pytest.mark.parametrize("text,secs", [("00:01.500", 1.5), ("01:02:03", 3723.0), ("2-00:00:01", 172801.0),
                                       ("10:00", 600.0), (None, None)])
def test_total_cpu_forms(text, secs):
    assert _cpu_time(text) == secs


@pytest.mark.parametrize("text,secs", [("04:00:00", 14400), ("1-00:00:00", 86400), ("UNLIMITED", None),
                                       ("Partition_Limit", None), (None, None)])
def test_time_limit_forms(text, secs):
    assert _limit(text) == secs


def test_a_job_name_holding_the_delimiter_keeps_its_facts(tmp_path):
    j = Job(110, name="a|b", total_cpu="02:00:00", max_rss="7G", limit="02:00:00")
    d, _ = write(tmp_path, [j, Job(111)])
    runs, notes = load_runs(*WINDOW, sacct_file=d)
    r = next(x for x in runs if x.job_id == 110)
    assert r.name == "a|b" and r.time_limit_s == 7200 and r.total_cpu_s == 7200 and r.max_rss_mb == 7 * 1024
    assert notes and "rejoined" in notes[0]


def test_records_land_on_sacct_runs_by_time_as_the_report_places_them(tmp_path):
    """A rerun whose record carries run 0 (a hook that missed the restart) is placed on sacct's second run by its
    end time (reports.runmatch), and the note says so."""
    a = Job(120, elapsed=600, state="REQUEUED", gpu_util=[50] * 8)
    b = Job(120, elapsed=1200, start=a.start + timedelta(hours=1), gpu_util=[90] + [0] * 7)
    (tmp_path / "sacct.txt").write_text(sacct_dump([a, b]))
    folder = epilog_records([a], tmp_path / "jobs")
    rec = json.loads((folder / "120.0.gpu01.json").read_text())
    late = dict(rec, run=0, start=b.start.timestamp(), end=(b.start + timedelta(seconds=b.elapsed)).timestamp(),
                gpu_accounting=[dict(g, gpu_util_pct=(90 if g["gpu"] == 0 else 0)) for g in rec["gpu_accounting"]])
    (folder / "120.0.gpu01-rerun.json").write_text(json.dumps(late))
    runs, notes = load_runs(*WINDOW, sacct_file=tmp_path / "sacct.txt", epilog_dir=folder)
    got = {r.run: r.gpu_util for r in runs}
    assert got == {0: (50,) * 8, 1: (90,) + (0,) * 7}
    assert "1 epilog record(s) placed on sacct's run by time: the run number they carry differs" in notes


def test_the_nodes_of_one_run_are_merged(tmp_path):
    j = Job(121, gpus=16, gpu_util=[80] * 8)
    d, folder = write(tmp_path, [j])
    rec = json.loads((folder / "121.0.gpu01.json").read_text())
    (folder / "121.0.gpu02.json").write_text(json.dumps(dict(rec, node="gpu02", gpu_accounting=[
        dict(g, gpu_util_pct=0) for g in rec["gpu_accounting"]])))
    (r,), _ = load_runs(*WINDOW, sacct_file=d, epilog_dir=folder)
    assert sorted(r.gpu_util) == [0] * 8 + [80] * 8


def test_the_same_facts_under_sacct_s_other_field_names(tmp_path):
    """TimelimitRaw (whole minutes) stands for Timelimit, UserCPU + SystemCPU (sacct's own definition of TotalCPU)
    for TotalCPU: a real dump written with those (`sacct -o ...,SystemCPU,TimelimitRaw,UserCPU`) had its time
    limits and CPU use left unjudged as missing."""
    text = sacct_dump([Job(107, total_cpu="1-02:00:00", elapsed=5400)])
    lines = [ln.split("|") for ln in text.splitlines()]
    head = lines[0]
    t, c = head.index("Timelimit"), head.index("TotalCPU")
    out = []
    for i, row in enumerate(lines):
        if i == 0:
            row = row + ["TimelimitRaw", "UserCPU", "SystemCPU"]
        else:
            limit = _limit(row[t]) if row[t] else None
            total = _cpu_time(row[c]) if row[c] else None
            row = row + ["" if limit is None else str(limit // 60),
                         "" if total is None else "1-01:00:00" if total == 26 * 3600 else row[c],
                         "" if total is None else "01:00:00" if total == 26 * 3600 else "00:00"]
        out.append([v for k, v in enumerate(row) if k not in (t, c)])
    (tmp_path / "s.txt").write_text("\n".join("|".join(r) for r in out) + "\n")
    (r,), notes = load_runs(*WINDOW, sacct_file=tmp_path / "s.txt")
    assert notes == []
    assert r.time_limit_s == 4 * 3600 and r.total_cpu_s == 26 * 3600
    # one of the two parts missing: TotalCPU is not known, and said
    (tmp_path / "s.txt").write_text("\n".join("|".join(r[:-1]) for r in out) + "\n")
    (r,), notes = load_runs(*WINDOW, sacct_file=tmp_path / "s.txt")
    assert r.time_limit_s == 4 * 3600 and r.total_cpu_s is None
    assert notes[0].startswith("the sacct dump has no TotalCPU: what depends on them is not judged")
