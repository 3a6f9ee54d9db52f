"""The sandbox's history reader (`load_trace`) on what real clusters running Slurm 22.05 to 25.11 print (the
hand-written dumps tests/data/reports/sacct-handwritten-*.txt, tests/data/SOURCES.md): what it cannot replay
faithfully is refused in one line naming the job, what is not a run is left out and counted, never replayed as
something else."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmtools.errors import ParseError
from slurmtools.sandbox.trace import load_trace

DATA = Path(__file__).resolve().parents[2] / "data" / "reports"
HET = DATA / "sacct-handwritten-25.11-het-array-gpus-P.txt"
STATES = DATA / "sacct-handwritten-22.05-states-P.txt"
FED = DATA / "sacct-handwritten-24.05-federation-P.txt"
TWO = DATA / "sacct-handwritten-23.11-two-clusters-P.txt"


def _without(tmp_path, path: Path, *jobs: str, change=None) -> str:
    """The dump without the lines of `jobs` (and their steps), each line passed through `change`."""
    keep = []
    for i, ln in enumerate(path.read_text().splitlines()):
        jid = ln.split("|")[0]
        if i and any(jid == j or jid.startswith(j + ".") or jid.startswith(j + "+") for j in jobs):
            continue
        keep.append(change(ln) if change and i else ln)
    p = tmp_path / path.name
    p.write_text("\n".join(keep) + "\n")
    return str(p)


def refused(path: str, words: str) -> None:
    with pytest.raises(ParseError) as e:
        load_trace(path)
    msg = str(e.value)
    assert msg == f"{path}: {words}", msg


def test_a_heterogeneous_job_is_refused_not_replayed_as_separate_jobs(tmp_path):
    """Its components 2001+0 (8 GPUs) and 2001+1 (CPUs) were replayed as two jobs free to start apart."""
    refused(str(HET), "job 2001: a heterogeneous job (component 2001+0); the sandbox replays single jobs and would "
                      "start its components apart")


def test_a_share_of_a_gpu_is_refused_not_replayed_as_a_cpu_job(tmp_path):
    """ReqTRES gres/shard=4 or gres/mps=50 and no gres/gpu: the job was replayed holding no GPU at all."""
    p = _without(tmp_path, HET, "2001", "2021")
    refused(p, "job 2030: gres/shard=4 is a share of a GPU; the sandbox replays whole GPUs")
    p = _without(tmp_path, HET, "2001", "2021", "2030")
    refused(p, "job 2031: gres/mps=50 is a share of a GPU; the sandbox replays whole GPUs")


def test_the_rest_of_the_shapes_replay_as_recorded(tmp_path):
    t = load_trace(_without(tmp_path, HET, "2001", "2021", "2030", "2031"))
    assert [(j.key, j.gpus, j.gpu_type, j.nodes, j.array_job, j.array_task) for j in t.jobs] == [
        ("2010", 8, None, 2, None, None),        # a het step (2010.0+0, 2010.0+1) in a plain job
        ("2020", 1, "1g.10gb", 1, None, None),   # salloc's .interactive step; a MIG profile asked by name
        ("2022", 1, None, 1, None, None),
        ("2100_0", 1, None, 1, "2100", 0), ("2100_1", 1, None, 1, "2100", 1)]
    # 2100_2 and 2100_3 still running, and the array's pending rest 2100_[4-9%2]
    assert t.notes == ("3 job(s) still pending or running when the history was taken: not replayed",)


def test_a_resized_job_is_refused_not_replayed_from_its_last_size(tmp_path):
    """Job 3005 ran on 16 GPUs, then on 8 after a resize: it was replayed as a 16-GPU job of the second part's
    length, started 20 minutes late."""
    refused(str(STATES), "job 3005: resized while it ran (a run of it ended RESIZING); the sandbox replays a job "
                         "at one size")


def test_every_ending_state_replays_and_the_jobs_that_never_ran_are_counted(tmp_path):
    p = _without(tmp_path, STATES, "3005", "3015")
    t = load_trace(p)
    got = {j.key: (j.state, j.run_s) for j in t.jobs}
    assert got == {"3001": ("CANCELLED", 3600.0), "3002": ("OUT_OF_MEMORY", 1800.0), "3003": ("COMPLETED", 3600.0),
                   "3004": ("COMPLETED", 3600.0), "3006": ("BOOT_FAIL", 300.0), "3008": ("PREEMPTED", 2399.0),
                   "3016": ("TIMEOUT", 3630.0)}
    # 3007 DEADLINE and 3014 cancelled while pending (Start None); 3009 SUSPENDED, 3011 RUNNING, 3012/3013 PENDING
    assert t.notes == ("2 job(s) never started in history (cancelled while pending): not replayed",
                       "4 job(s) still pending or running when the history was taken: not replayed")


def test_a_history_of_several_clusters_keeps_the_sites_or_is_refused(tmp_path):
    """Job 7001 of alpha and job 7001 of beta were one job: alpha's run was lost, silently."""
    refused(str(TWO), "the dump holds jobs of 2 clusters (alpha, beta) and job ids are per cluster: dump one with "
                      "`sacct -M NAME`")
    t = load_trace(str(TWO), cluster="alpha")
    assert [(j.key, j.gpus, j.user) for j in t.jobs] == [("7001", 2, "ann")]
    assert t.notes == ("1 job record(s) of other clusters (beta) left out: --site names cluster alpha (the dump "
                       "holds 2 clusters)",)


def test_a_revoked_federation_sibling_does_not_hide_the_run(tmp_path):
    """67109365 ran on fedB and was REVOKED on fedA (Start None): the two were one job whose last record never
    started, so the job that ran was left out as 'never started'."""
    t = load_trace(str(FED), cluster="fedB")
    assert [(j.key, j.gpus, j.run_s) for j in t.jobs] == [("67109365", 2, 3600.0)]
    assert t.notes == ("1 job record(s) of other clusters (fedA) left out: --site names cluster fedB (the dump holds "
                       "2 clusters)",)   # the sibling REVOKED on fedA is fedA's
    t = load_trace(str(FED), cluster="fedA")
    assert [(j.key, j.gpus) for j in t.jobs] == [("67109366", 4)]
    assert "1 federation sibling record(s) REVOKED (the job ran on another cluster): not replayed" in t.notes
    one = _without(tmp_path, FED, "67109366", change=lambda ln: ln.replace("|fedA", "|fedB"))
    t = load_trace(one)   # every record of one cluster: the revoked sibling beside the run
    assert [(j.key, j.gpus) for j in t.jobs] == [("67109365", 2)]
    assert t.notes == ("1 federation sibling record(s) REVOKED (the job ran on another cluster): not replayed",)


def test_times_written_with_a_blank_are_read_like_the_reports_read_them(tmp_path):
    """SLURM_TIME_FORMAT="%F %T" makes sacct write `2026-11-02 01:00:00`: the report read it, the sandbox refused
    the whole history."""
    (tmp_path / "t").mkdir()
    plain = load_trace(_without(tmp_path, STATES, "3005", "3015"))
    p = _without(tmp_path / "t", STATES, "3005", "3015", change=lambda ln: ln.replace("2026-11-02T", "2026-11-02 "))
    assert "2026-11-02 01:00:00" in Path(p).read_text()
    blank = load_trace(p)
    assert [(j.key, j.submit, j.start, j.run_s) for j in blank.jobs] == \
        [(j.key, j.submit, j.start, j.run_s) for j in plain.jobs]


def _edit_job(ln: str, fields: dict[str, str]) -> str:
    """A line of the STATES dump with job 3001's allocation record's fields replaced (by header name)."""
    head = STATES.read_text().splitlines()[0].split("|")
    f = ln.split("|")
    if f[0] == "3001":
        for k, v in fields.items():
            f[head.index(k)] = v
    return "|".join(f)


def test_what_a_job_held_beyond_its_request_is_replayed_as_it_ran(tmp_path):
    """Real records (a simulator's, jobstats#6): a job Slurm spread over more nodes than ReqTRES node= (`-n 24` on
    12-CPU nodes) was replayed on one node, where it fits nowhere; an --exclusive job (ReqTRES 1 CPU, AllocTRES 36
    CPUs and 4 GPUs) was replayed as a 1-CPU job. Each is replayed as it ran now, and said."""
    from slurmtools.sandbox.submission import _options

    wide = _without(tmp_path, STATES, "3005", "3015", change=lambda ln: _edit_job(ln, {
        "NodeList": "gpu[01-02]", "AllocTRES": "billing=16,cpu=16,gres/gpu:h100=4,gres/gpu=4,mem=128G,node=2",
        "ReqTRES": "billing=16,cpu=16,gres/gpu:h100=4,gres/gpu=4,mem=128G,node=1"}))
    t = load_trace(wide)
    j = next(j for j in t.jobs if j.key == "3001")
    assert (j.nodes, j.gpus, j.exclusive) == (2, 4, False)
    assert "1 job(s) ran on more nodes than they asked for (NodeList or AllocTRES node= above ReqTRES node=; " \
           "first: job 3001): replayed on the nodes they ran on" in t.notes
    whole = _without(tmp_path, STATES, "3005", "3015", change=lambda ln: _edit_job(ln, {
        "AllocTRES": "billing=36,cpu=36,gres/gpu:h100=4,gres/gpu=4,mem=500G,node=1",
        "ReqTRES": "billing=2,cpu=1,mem=5G,node=1"}))
    t = load_trace(whole)
    j = next(j for j in t.jobs if j.key == "3001")
    assert (j.nodes, j.gpus, j.cpus, j.exclusive) == (1, 0, 1, True)
    assert any(n.startswith("1 job(s) held more GPUs than they asked for") for n in t.notes)
    assert "--exclusive" in _options(j, _Clock(), None)
    assert not [x for x in t.jobs if x.key != "3001" and x.exclusive]


class _Clock:
    """The scaled clock at 1x, as `_options` asks it."""
    def limit_minutes(self, s):
        return max(1, round(s / 60))


def test_a_record_without_tres_is_refused_not_replayed_without_gpus(tmp_path):
    p = _without(tmp_path, STATES, "3005", "3015", change=lambda ln: _edit_job(ln, {"AllocTRES": "", "ReqTRES": ""}))
    refused(p, "job 3001: ReqTRES and AllocTRES are both empty and no GRES column says its GPUs, so they are not "
               "known (a record from before Slurm kept TRES?)")


def test_a_history_without_the_needed_fields_names_the_sandboxs_own_sacct_command(tmp_path):
    """The refusal gave the report's field list without -X -D and the trace's own fields."""
    p = tmp_path / "h.txt"
    p.write_text("JobID|User\n1|a\n")
    with pytest.raises(ParseError) as e:
        load_trace(str(p))
    assert str(e.value).endswith("; dump with `sacct -X -D --parsable2 -o JobID,JobIDRaw,JobName,User,Account,"
                                 "Partition,QOS,State,ExitCode,Submit,Eligible,Start,End,ElapsedRaw,TimelimitRaw,"
                                 "NodeList,AllocTRES,ReqTRES,AllocCPUS`")


def test_gpus_per_node_spread_wider_is_not_exclusive(tmp_path):
    """ReqTRES counts the GPUs asked per node over the nodes asked: `-n 24 --gres=gpu:2` spread over 2 nodes holds
    4 GPUs and asked 2 per node. It was taken as an --exclusive job replayed with 2 GPUs over 2 nodes; it is
    replayed on its 2 nodes with the 4 it held. A job that held more per node than it asked is still exclusive."""
    from slurmtools.sandbox.submission import _options

    wide = _without(tmp_path, STATES, "3005", "3015", change=lambda ln: _edit_job(ln, {
        "NodeList": "gpu[01-02]", "AllocTRES": "billing=24,cpu=24,gres/gpu:h100=4,gres/gpu=4,mem=128G,node=2",
        "ReqTRES": "billing=24,cpu=24,gres/gpu=2,mem=128G,node=1"}))
    j = next(j for j in load_trace(wide).jobs if j.key == "3001")
    assert (j.nodes, j.gpus, j.exclusive) == (2, 4, False)
    assert "--gres=gpu:2" in _options(j, _Clock(), None) and "--exclusive" not in _options(j, _Clock(), None)
    # a planner shape's own --exclusive=topo does not take the history's whole nodes back: sbatch keeps the last
    whole = _without(tmp_path, STATES, "3005", "3015", change=lambda ln: _edit_job(ln, {
        "AllocTRES": "billing=36,cpu=36,gres/gpu:h100=8,gres/gpu=8,mem=500G,node=1",
        "ReqTRES": "billing=8,cpu=8,gres/gpu:h100=2,gres/gpu=2,mem=64G,node=1"}))
    j = next(j for j in load_trace(whole).jobs if j.key == "3001")
    assert j.exclusive and j.gpus == 2
    assert _options(j, _Clock(), None, shape=("--nodes=1", "--exclusive=topo"))[-2:] == ["--exclusive=topo",
                                                                                          "--exclusive"]


def test_a_record_without_tres_reads_its_gres_columns_where_the_dump_has_them():
    """slurm2sql's 2019 dump: empty ReqTRES and AllocTRES beside a ReqGRES column. An empty GRES states no GPU (the
    trace reads it, a CPU job); GPUs in GRES on one node are read; on several nodes (per node or per job? the
    column does not say) and without any GRES column they are not known."""
    from dataclasses import replace

    from slurmtools.slurm.commands import parse_sacct
    from slurmtools.slurm.tres import record_tres

    r = next(r for r in parse_sacct((DATA / "slurm2sql_test-data1.csv").read_text(), "d")
             if r.job_id == "43974388" and r.step is None)
    assert (r.req_tres, r.alloc_tres, r.extra["ReqGRES"]) == ("", "", "")
    assert record_tres(r) == "cpu=2,node=1"
    assert record_tres(replace(r, extra={**r.extra, "ReqGRES": "gpu:tesla:2"})) == \
        "cpu=2,gres/gpu:tesla=2,gres/gpu=2,node=1"
    assert record_tres(replace(r, extra={**r.extra, "ReqGRES": "gpu:2"}, nodelist=("pe2", "pe3"))) is None
    assert record_tres(replace(r, extra={})) is None
    with pytest.raises(ValueError, match="ReqGRES: cannot read GRES"):
        record_tres(replace(r, extra={**r.extra, "ReqGRES": "+7"}))
