"""Decision log: one line per event, concurrent writers never interleave, bad input is one clear error."""

from __future__ import annotations

import json
import os

import pytest

from slurmtools import audit


def test_record_and_read_back(tmp_path):
    p = tmp_path / "d.jsonl"
    rec = audit.record("admission_refused", job=None, user="carol",
                       details={"policy": "tier-limits", "message": "too many GPUs"}, path=p, time=100.0,
                       policy="0123456789abcdef", writer="cli@login1")
    assert rec == {"time": 100.0, "event": "admission_refused", "job": None, "user": "carol",
                   "details": {"policy": "tier-limits", "message": "too many GPUs"},
                   "policy": "0123456789abcdef", "writer": "cli@login1", "seq": 1}
    audit.record("preempted", job="1234", user="bob", path=p)
    got = list(audit.read(p, strict=True))
    assert [g["event"] for g in got] == ["admission_refused", "preempted"] and got[1]["job"] == 1234
    assert p.read_text().count("\n") == 2


def test_default_path_from_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURMTOOLS_AUDIT_LOG", raising=False)
    monkeypatch.setenv("SLURMTOOLS_SPOOL_DIR", str(tmp_path))
    audit.record("requeued", job=5)
    assert json.loads((tmp_path / "decisions.jsonl").read_text())["job"] == 5
    monkeypatch.setenv("SLURMTOOLS_AUDIT_LOG", str(tmp_path / "other.jsonl"))
    assert audit.default_path() == tmp_path / "other.jsonl"


def test_bad_inputs_are_one_line_errors(tmp_path):
    p = tmp_path / "d.jsonl"
    with pytest.raises(audit.AuditError, match="event must be a non-empty word"):
        audit.record("two words", path=p)
    with pytest.raises(audit.AuditError, match="over the 65536-byte limit"):
        audit.record("big", details={"x": "y" * 70000}, path=p)
    (tmp_path / "target").write_text("precious\n")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "target")
    with pytest.raises(audit.AuditError, match="cannot open .*link.jsonl"):
        audit.record("requeued", path=tmp_path / "link.jsonl")
    assert (tmp_path / "target").read_text() == "precious\n"
    assert not p.exists()


def test_torn_line_is_skipped_or_reported(tmp_path):
    p = tmp_path / "d.jsonl"
    audit.record("requeued", job=1, path=p)
    with open(p, "a") as f:
        f.write('{"event": "pre')
    assert [r["job"] for r in audit.read(p)] == [1]
    with pytest.raises(audit.AuditError, match=r"d.jsonl:2: bad decision-log line"):
        list(audit.read(p, strict=True))


def test_concurrent_writers_do_not_interleave(tmp_path):
    p = tmp_path / "d.jsonl"
    writers, each = 16, 200
    pids = []
    for w in range(writers):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                for i in range(each):
                    audit.record("requeued", job=w * 10000 + i, user=f"u{w}", details={"pad": "x" * (100 * w)}, path=p)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        pids.append(pid)
    for pid in pids:
        assert os.waitpid(pid, 0)[1] == 0
    recs = list(audit.read(p, strict=True))
    assert len(recs) == writers * each
    assert sorted(r["job"] for r in recs) == sorted(w * 10000 + i for w in range(writers) for i in range(each))
    for r in recs:
        assert r["details"]["pad"] == "x" * (100 * int(r["user"][1:]))
