"""Class 9 (pure part): every decision-log record carries the policy hash and its writer's sequence number, and
`audit verify` names the line of a deleted, moved, repeated or foreign line. The lab half is
test_audit_log_lab.py (a real budget re-route and a real sync-qos change in slurmctld's and the CLI's log)."""

from __future__ import annotations

import json
import multiprocessing
import os

import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from slurmtools import audit
from slurmtools.cli.main import app
from slurmtools.policy.fingerprint import policy_hash
from slurmtools.policy.qos_sync import apply, change_record
from slurmtools.render.job_submit import render_job_submit
from slurmtools.resources import example_site
from slurmtools.site import load_site

H = "0123456789abcdef"


def write(path, n, writer="cli@h"):
    for i in range(n):
        audit.record("admission_modified", job=i, user="u", details={"i": i}, path=path, policy=H, writer=writer)


def _worker(args):
    path, writer, n = args
    write(path, n, writer)


def test_concurrent_writers_number_their_own_lines_and_verify_passes(tmp_path):
    p = tmp_path / "d.jsonl"
    jobs = [(str(p), f"w{k % 3}@h", 25) for k in range(6)]  # two processes share each writer id
    with multiprocessing.get_context("fork").Pool(6) as pool:
        pool.map(_worker, jobs)
    recs = list(audit.read(p, strict=True))
    assert len(recs) == 150
    for w in ("w0@h", "w1@h", "w2@h"):
        assert [r["seq"] for r in recs if r["writer"] == w] == list(range(1, 51))
    assert audit.verify(p) == []


def lines_of(p):
    return p.read_text().splitlines(keepends=True)


def test_a_deleted_line_is_a_gap_named_by_line(tmp_path):
    p = tmp_path / "d.jsonl"
    write(p, 5)
    write(p, 2, writer="epilog@gpu01")
    ls = lines_of(p)
    p.write_text("".join(ls[:2] + ls[3:]))
    assert [(x.line, x.message) for x in audit.verify(p)] == [
        (3, "writer cli@h: seq 4 after seq 2 (line 2): 1 record(s) missing")]


def test_a_swapped_line_is_reported(tmp_path):
    p = tmp_path / "d.jsonl"
    write(p, 4)
    ls = lines_of(p)
    p.write_text("".join([ls[0], ls[2], ls[1], ls[3]]))
    msgs = [(x.line, x.message) for x in audit.verify(p)]
    assert (2, "writer cli@h: seq 3 after seq 1 (line 1): 1 record(s) missing") in msgs
    assert (3, "writer cli@h: seq 2 after seq 3 (line 2): out of order or repeated") in msgs


def test_a_deleted_last_line_is_seen_from_the_counter(tmp_path):
    p = tmp_path / "d.jsonl"
    write(p, 3)
    p.write_text("".join(lines_of(p)[:2]))
    assert [(x.line, x.message) for x in audit.verify(p)] == [
        (0, "writer cli@h: its counter is at 3 but its last record is seq 2 (line 2): 1 record(s) missing from the end")]


def test_foreign_and_unhashed_lines_are_reported(tmp_path):
    p = tmp_path / "d.jsonl"
    write(p, 1)
    with open(p, "a") as f:
        f.write("not json\n")
        f.write(json.dumps({"event": "admission_refused", "time": 1}) + "\n")
    audit.record("requeued", job=1, path=p, writer="epilog@x")  # no policy file beside the log: null
    msgs = [(x.line, x.message) for x in audit.verify(p)]
    assert (2, "not a decision record (torn, edited or foreign line)") in msgs
    assert (3, "admission_refused record has no writer and sequence number") in msgs
    assert (4, "requeued record carries no policy hash") in msgs


def test_writers_without_a_policy_take_the_one_the_loaded_lua_left(tmp_path):
    p = tmp_path / "d.jsonl"
    audit.policy_path(p).write_text(H + "\n")
    assert audit.record("preempted", job=7, path=p, writer="epilog@gpu02")["policy"] == H


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 12), data=st.data())
def test_any_deletion_or_move_inside_a_writer_is_found(tmp_path_factory, n, data):
    p = tmp_path_factory.mktemp("log") / "d.jsonl"
    write(p, n)
    ls = lines_of(p)
    i = data.draw(st.integers(0, n - 1))
    if data.draw(st.booleans()):
        del ls[i]
    else:
        j = data.draw(st.integers(0, n - 1).filter(lambda j: j != i))
        ls[i], ls[j] = ls[j], ls[i]
    p.write_text("".join(ls))
    assert audit.verify(p), "a changed log passed verify"


def test_the_cli_verify_names_lines_and_exits_nonzero_and_show_filters(tmp_path):
    p = tmp_path / "d.jsonl"
    write(p, 3)
    audit.record("qos_sync", user="root", path=p, policy=H, writer="cli@h", details={"qos": ["scavenger"]})
    r = CliRunner().invoke(app, ["audit", "verify", "--log", str(p)])
    assert r.exit_code == 0 and "every record present and in order" in r.output
    r = CliRunner().invoke(app, ["audit", "show", "--log", str(p), "--event", "qos_sync"])
    assert r.exit_code == 0 and len(r.output.splitlines()) == 1
    assert " qos_sync job=- user=root policy=0123456789abcdef cli@h#4 " in r.output
    r = CliRunner().invoke(app, ["audit", "show", "--log", str(p), "--job", "1", "--user", "u"])
    assert len(r.output.splitlines()) == 1 and "job=1 " in r.output
    ls = lines_of(p)
    p.write_text("".join(ls[:1] + ls[2:]))
    r = CliRunner().invoke(app, ["audit", "verify", "--log", str(p)])
    assert r.exit_code == 1 and f"{p}:2: writer cli@h: seq 3 after seq 1 (line 1): 1 record(s) missing" in r.output
    r = CliRunner().invoke(app, ["audit", "show", "--log", str(tmp_path / "none.jsonl")])
    assert r.exit_code != 0 and "none.jsonl: no such file" in r.output
    r = CliRunner().invoke(app, ["audit", "show", "--log", str(p), "--since", "yesterday-ish"])
    assert r.exit_code != 0 and "--since" in r.output


def test_the_policy_hash_is_one_definition_baked_into_the_lua(tmp_path):
    site = load_site(example_site())
    h = policy_hash(site, None)
    assert len(h) == 16 and h == policy_hash(load_site(example_site()), None)
    text = render_job_submit(site, None, audit_log="/x/d.jsonl").text
    assert f'local POLICY_HASH = "{h}"' in text
    changed = example_site().read_text().replace("max_gpus_per_job = 32", "max_gpus_per_job = 31", 1)
    fab = (example_site().parent / "../../topology/example/fabric.toml").resolve()
    (tmp_path / "site.toml").write_text(changed.replace('fabric = "../../topology/example/fabric.toml"',
                                                        f'fabric = "{fab}"'))
    assert policy_hash(load_site(tmp_path / "site.toml"), None) != h


def test_sync_qos_reports_each_applied_change_even_when_a_later_one_fails():
    from slurmtools.errors import SlurmError

    done = []

    def run(cmd):
        if "bad" in cmd[-1]:
            raise SlurmError("sacctmgr", "refused")
        return ""
    cmds = [["sacctmgr", "-i", "add", "qos", "gold,silver"],
            ["sacctmgr", "-i", "modify", "qos", "where", "name=gold", "set", "GraceTime=60"],
            ["sacctmgr", "-i", "modify", "qos", "where", "name=x", "set", "bad"]]
    with pytest.raises(SlurmError):
        apply(cmds, run, done.append)
    assert done == cmds[:2]
    assert change_record(cmds[0])["qos"] == ["gold", "silver"]
    assert change_record(cmds[1]) == {"action": "modify", "qos": ["gold"], "settings": ["GraceTime=60"],
                                      "command": cmds[1]}
