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
def test_each_bad_record_is_skipped_with_its_reason(tmp_path, kind):
    rec, words = BAD[kind]
    (tmp_path / "1.0.gpu01.json").write_text(json.dumps(_rec(1, 40)))
    (tmp_path / "bad.0.gpu01.json").write_text(json.dumps(rec))
    got = read_epilog_dir(tmp_path)
    assert got.frame["job_id_raw"].tolist() == [1]
    assert got.frame["gpu_util_pct"].tolist() == [40]
    assert [(b.source, b.line) for b in got.bad.rows] == [(str(tmp_path / "bad.0.gpu01.json"), None)]
    assert got.bad.rows[0].reason.startswith(words)
    assert (got.bad.total, len(got.bad.rows)) == (2, 1)


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
