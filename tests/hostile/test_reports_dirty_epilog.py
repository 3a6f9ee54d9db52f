"""Class 3: the epilog's GPU records are dirty data too. A record with a GPU utilisation NVML never reports
(300 %), a torn file, a negative count or an absurd time is skipped and listed; the good records count."""

from __future__ import annotations

import json

import pytest

from slurmtools.reports import ingest
from slurmtools.reports.epilog import read_epilog_dir


def _rec(job: int, util, **over) -> dict:
    r = {"job": job, "run": 0, "user": "alice", "qos": "standard", "gpus": [0, 1], "start": 1793581200,
         "end": 1793584800, "gpu_accounting": [{"gpu_util_pct": util, "max_memory_bytes": 2**30}] * 2}
    r.update(over)
    return r


BAD = {
    "gpuutil=300": (_rec(900, 300), "field gpu_util_pct: 300 is not 0 to 100"),
    "negative util (flat)": ({"job_id": 901, "gpu_util_pct": [-5, 10]}, "field gpu_util_pct: -5 is not 0 to 100"),
    "NaN util": ({"job_id": 902, "gpu_util_pct": float("nan")}, "field gpu_util_pct: nan is not 0 to 100"),
    "negative GPUs": (_rec(903, 50, gpus=-2), "field gpus: -2 is not a count of GPUs"),
    "year 1": (_rec(904, 50, start="0001-01-01T00:00:00"), "field start: expected epoch seconds or an ISO time"),
    "end before start": (_rec(905, 50, end=1793500000), "field end: "),
    "job id 0": (_rec(0, 50), "field job: 0 is not a job id"),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_each_bad_record_is_skipped_with_its_reason(tmp_path, kind, cases=BAD):
    """A good record and `cases[kind]`: the good one counts, the bad one is listed once, with its reason on one line
    (the wrong-type cases below go through here too)."""
    rec, words = cases[kind]
    (tmp_path / "1.0.gpu01.json").write_text(json.dumps(_rec(1, 40)))
    (tmp_path / "bad.0.gpu01.json").write_text(json.dumps(rec))
    got = read_epilog_dir(tmp_path)
    assert got.frame["job_id_raw"].tolist() == [1]
    assert got.frame["gpu_util_pct"].tolist() == [40]
    assert [(b.source, b.line) for b in got.bad.rows] == [(str(tmp_path / "bad.0.gpu01.json"), None)]
    assert got.bad.rows[0].reason.startswith(words), got.bad.rows[0].reason
    assert "\n" not in got.bad.rows[0].reason
    assert (got.bad.total, len(got.bad.rows), got.files) == (2, 1, 2)


def test_a_truncated_record_is_listed_with_its_line_and_text(tmp_path):
    whole = json.dumps(_rec(2, 40), indent=1)
    (tmp_path / "2.0.gpu01.json").write_text(whole[:len(whole) // 2])
    (tmp_path / "3.0.gpu01.json").write_text(json.dumps(_rec(3, 70)))
    bad: list = []
    frame, notes = ingest.load_epilog(tmp_path, bad_rows=bad)
    assert frame["job_id_raw"].tolist() == [3]
    [b] = bad[0].rows
    assert b.text == whole[:len(whole) // 2] and b.line is not None and b.line > 1
    assert bad[0].summary().startswith(f"1 of 2 records of {tmp_path} were bad and skipped (50.00%)")
    assert notes == []  # listed in bad_rows.csv, not repeated as notes


#: values of a type the epilog never writes: each used to be coerced or dropped unseen (a string utilisation left
#: the run's mean to the other GPUs, `gpus: true` counted one GPU, a fraction of a job id or run was cut off)
WRONG_TYPE = {
    "utilisation as text": (_rec(906, 50, gpu_accounting=[{"gpu": 0, "gpu_util_pct": "5"},
                                                          {"gpu": 1, "gpu_util_pct": 90}]),
                            "field gpu_accounting.gpu_util_pct: '5' is not a number"),
    "utilisation true": (_rec(907, 50, gpu_accounting=[{"gpu": 0, "gpu_util_pct": True}]),
                         "field gpu_accounting.gpu_util_pct: True is not a number"),
    "memory as text": (_rec(908, 50, gpu_accounting=[{"gpu": 0, "gpu_util_pct": 5, "max_memory_bytes": "9"}]),
                       "field gpu_accounting.max_memory_bytes: '9' is not a number"),
    "flat utilisation as text": ({"job_id": 909, "gpu_util_pct": "40"}, "field gpu_util_pct: '40' is not a number"),
    "flat memory object of text": ({"job_id": 910, "gpu_mem_mb": {"0": "x", "1": 5}},
                                   "field gpu_mem_mb: 'x' is not a number"),
    "gpus true": (_rec(911, 50, gpus=True), "field gpus: expected a count or a list of GPU indexes, got True"),
    "gpus fraction": (_rec(912, 50, gpus=2.7), "field gpus: expected a count or a list of GPU indexes, got 2.7"),
    "gpus as text": (_rec(913, 50, gpus="0,1"), "field gpus: expected a count or a list of GPU indexes, got '0,1'"),
    "gpus list of names": (_rec(914, 50, gpus=["a", "b", "c"]), "field gpus: ['a', 'b', 'c'] is not a list of"),
    "gpus index twice": (_rec(915, 50, gpus=[0, 0]), "field gpus: [0, 0] is not a list of distinct GPU indexes"),
    "job id fraction": (_rec(9.5, 50), "field job: expected a number, got 9.5"),
    "job id other digits": (_rec("\u0669\u0669", 50), "field job: expected a number, got '\u0669\u0669'"),
    "job id above 32 bits": (_rec(2**40, 50), f"field job: {2**40} is not a job id"),
    "run fraction": (_rec(916, 50, run=1.9), "field run: 1.9 is not a run index"),
    "run true": (_rec(917, 50, run=True), "field run: True is not a run index"),
    "unknown-run as text": (_rec(918, 50, run="unknown-run"), "field run: 'unknown-run' is not a run index"),
    "user a list": (_rec(919, 50, user=["a"]), "field user: ['a'] is not a name"),
    "energy GPU twice": (_rec(920, 50, gpu_energy=[{"gpu": 0, "start_mj": 0, "end_mj": 10**9}] * 2),
                         "field gpu_energy: GPU 0 listed twice"),
    "accounting GPU twice": (_rec(921, 50, gpu_accounting=[{"gpu": 0, "gpu_util_pct": 5}] * 2),
                             "field gpu_accounting: GPU 0 listed twice"),
    "cluster a number": (_rec(923, 50, cluster=5), "field cluster: 5 is not a cluster name"),
    "cluster empty": (_rec(924, 50, cluster=""), "field cluster: '' is not a cluster name"),
    "energy past 64 bits": (_rec(922, 50, gpu_energy=[{"gpu": 0, "start_mj": 0, "end_mj": 10**30}]),
                            "field gpu_energy.end_mj: 1000000000000000000000000000000 is not an energy counter"),
}


@pytest.mark.parametrize("kind", sorted(WRONG_TYPE))
def test_a_value_of_the_wrong_type_is_skipped_not_coerced(tmp_path, kind):
    test_each_bad_record_is_skipped_with_its_reason(tmp_path, kind, WRONG_TYPE)


def test_a_job_id_past_64_bits_is_listed_not_a_crash(tmp_path):
    (tmp_path / "1.0.gpu01.json").write_text(json.dumps(_rec(1, 40)))
    (tmp_path / "x.0.gpu01.json").write_text(json.dumps(_rec(10**30, 40)))
    bad: list = []
    frame, _ = ingest.load_epilog(tmp_path, bad_rows=bad)  # was: OverflowError out of the whole report
    assert frame["job_id_raw"].tolist() == [1]
    assert [r.reason for r in bad[0].rows] == [f"field job: {10**30} is not a job id"]


def _node_rec(job: int, node: str, end: int = 1793584800, gpus: int = 2) -> dict:
    r = _rec(job, 50, node=node, end=end, gpus=list(range(gpus)))
    r["gpu_energy"] = [{"gpu": i, "start_mj": 0, "end_mj": 3_600_000_000} for i in range(gpus)]
    return r


def test_a_second_record_of_one_run_and_node_counts_once_and_is_listed(tmp_path):
    # the epilog names a second record of one job, run and node `<stem>.2.json`; a copy or a symlink says the same
    (tmp_path / "5.0.gpu01.json").write_text(json.dumps(_node_rec(5, "gpu01")))
    (tmp_path / "5.0.gpu01.2.json").write_text(json.dumps(_node_rec(5, "gpu01", end=1793584805)))
    (tmp_path / "5.0.gpu02.json").write_text(json.dumps(_node_rec(5, "gpu02")))
    got = read_epilog_dir(tmp_path)
    # was: 6 GPUs on 3 nodes and 6 GPUs' energy (the run's GPUs and energy counted half again), nothing listed
    assert got.frame[["job_id_raw", "gpus", "nodes", "energy_mj"]].values.tolist() == [[5, 4, 2, 4 * 3.6e9]]
    [b] = got.bad.rows
    assert b.source == str(tmp_path / "5.0.gpu01.2.json")
    first = tmp_path / "5.0.gpu01.json"
    assert b.reason.startswith(f"a second record of job 5 run 0 on node gpu01 (the first: {first})")
    assert (got.bad.total, got.files) == (3, 3)


def test_two_runs_numbered_alike_on_one_node_are_not_duplicates(tmp_path):
    # records written before issue 16 could number two runs alike: more than SAME_RUN_GAP_S apart, both count
    (tmp_path / "5.0.gpu01.json").write_text(json.dumps(_node_rec(5, "gpu01")))
    (tmp_path / "5.0.gpu01.2.json").write_text(json.dumps(_node_rec(5, "gpu01", end=1793584800 + 3600)))
    got = read_epilog_dir(tmp_path)
    assert got.bad.rows == [] and got.frame["gpus"].tolist() == [2, 2]


def test_files_that_are_no_records_are_listed_and_a_fifo_does_not_hang(tmp_path):
    import os

    (tmp_path / "5.0.gpu01.json").write_text(json.dumps(_node_rec(5, "gpu01")))
    os.symlink(tmp_path / "5.0.gpu01.json", tmp_path / "link.json")    # was: counted twice
    os.symlink("/nonexistent", tmp_path / ".#5.0.gpu01.json")           # an editor's lock file
    os.mkfifo(tmp_path / "6.0.gpu01.json")                              # was: the report hung reading it
    (tmp_path / "big.json").write_bytes(b" " * (5 << 20))
    (tmp_path / "7.0.gpu01.json").mkdir()                               # a folder: searched, not a record
    (tmp_path / "7.0.gpu01.json" / "7.0.gpu01.json").write_text(json.dumps(_node_rec(7, "gpu01")))
    got = read_epilog_dir(tmp_path)
    assert got.frame[["job_id_raw", "gpus", "nodes"]].values.tolist() == [[5, 2, 1], [7, 2, 1]]
    assert {(b.source.removeprefix(str(tmp_path) + "/"), b.reason.split(" (")[0].split(",")[0])
            for b in got.bad.rows} == {("link.json", "a symlink"), (".#5.0.gpu01.json", "a symlink"),
                                       ("6.0.gpu01.json", "not a plain file"), ("big.json", "5")}
    assert [b.reason for b in got.bad.rows if b.source.endswith("big.json")] == [
        "5,242,880 bytes, more than a record holds (4,194,304); not read"]
    assert (got.bad.total, got.files) == (6, 6)


def test_gpus_summed_over_a_jobs_records_never_wrap(tmp_path):
    for n in range(3):
        (tmp_path / f"5.0.gpu0{n}.json").write_text(json.dumps(_rec(5, 50, node=f"gpu0{n}", gpus=999_999_999)))
    got = read_epilog_dir(tmp_path)
    # was: one run of -1,294,967,299 GPUs (int32 wrapped), nothing listed
    assert got.frame["gpus"].tolist() == [999_999_999]
    assert sorted(b.source[-14:] for b in got.bad.rows) == ["5.0.gpu01.json", "5.0.gpu02.json"]
    assert all(b.reason == "field gpus: 999999999 more GPUs give job 5 more than 999,999,999" for b in got.bad.rows)


def test_records_of_another_cluster_are_listed_not_joined(tmp_path):
    # job ids are per cluster: records collected from two clusters hold job 7001 of each
    (tmp_path / "alpha").mkdir()
    (tmp_path / "beta").mkdir()
    (tmp_path / "alpha" / "7001.0.a01.json").write_text(json.dumps(_rec(7001, 40, cluster="alpha", node="a01")))
    (tmp_path / "beta" / "7001.0.b01.json").write_text(json.dumps(_rec(7001, 90, cluster="beta", node="b01",
                                                                       gpus=[0, 1, 2, 3])))
    (tmp_path / "beta" / "7002.0.b01.json").write_text(json.dumps(_rec(7002, 10, cluster="beta", node="b01")))
    # written by an epilog before the field (or one that did not know): cannot be told apart, so it is used
    (tmp_path / "7003.0.a02.json").write_text(json.dumps(_rec(7003, 60, node="a02")))
    (tmp_path / "7004.0.a02.json").write_text(json.dumps(_rec(7004, 70, cluster=None, node="a02")))
    got = read_epilog_dir(tmp_path, cluster="alpha")
    # was: job 7001 with 6 GPUs at 65 % (beta's GPUs and use joined to alpha's job), and beta's job 7002 kept
    assert got.frame.sort_values("job_id_raw")[["job_id_raw", "gpus", "gpu_util_pct"]].values.tolist() == [
        [7001, 2, 40], [7003, 2, 60], [7004, 2, 70]]
    assert [(b.source, b.reason) for b in got.bad.rows] == [
        (str(tmp_path / "beta" / f"{j}.0.b01.json"),
         f"field cluster: job {j}'s record is of cluster beta, not of alpha (the site's cluster_name): job ids are "
         f"per cluster; not joined to alpha's job {j}") for j in (7001, 7002)]
    assert (got.bad.total, got.files) == (5, 5)
    # Slurm lower-cases ClusterName: a site file that writes it otherwise still names the same cluster
    assert sorted(read_epilog_dir(tmp_path, cluster="Alpha").frame["job_id_raw"]) == [7001, 7003, 7004]
    # without the site's cluster nothing can be compared: every record is read (as before)
    assert read_epilog_dir(tmp_path).bad.rows == []


def test_the_report_and_advise_pass_the_sites_cluster_to_the_records(tmp_path):
    """`slurmtools report` (ingest.load_epilog) and advise (usage.gpu_records) hand the site's cluster_name to the
    record reader: another cluster's record of the same job id is listed in bad_rows, not joined."""
    from slurmtools.advise.usage import gpu_records

    (tmp_path / "7001.0.a01.json").write_text(json.dumps(_rec(7001, 40, cluster="alpha", node="a01")))
    (tmp_path / "7001.0.b01.json").write_text(json.dumps(_rec(7001, 90, cluster="beta", node="b01")))
    bad: list = []
    frame, _ = ingest.load_epilog(tmp_path, bad_rows=bad, cluster="alpha")
    assert frame["gpu_util_pct"].tolist() == [40]
    assert [r.source for r in bad[0].rows] == [str(tmp_path / "7001.0.b01.json")]
    recs, notes = gpu_records(tmp_path, "alpha")
    assert [r["utils"] for r in recs] == [[40.0, 40.0]]
    assert notes and "is of cluster beta, not of alpha" in notes[0]
    assert len(gpu_records(tmp_path)[0]) == 2  # no site cluster: nothing to compare
