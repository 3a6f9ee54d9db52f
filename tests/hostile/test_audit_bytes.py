"""Class 9 (bytes): no value a decision-log writer accepts may make a line the reader refuses, and no two writer ids
may share a counter file.

Before the fix: job_submit.lua wrote a `--qos`/`--account` byte that is not UTF-8 raw (slurmctld hands job options
over as bytes), so `audit verify` called the line "not a decision record" and `audit show` skipped it: any user
could fail the audit check. Writer ids `a b@n` and `a_b@n` shared the counter file `<log>.seq.a_b@n`, so verify
reported gaps and repeats that were not there. Now a byte outside valid UTF-8 is written as the text `\\xHH`
(by both writers) and a writer id's odd characters as `%HH` in its counter file's name.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess

import pytest

from slurmtools import audit
from slurmtools.policy import JobRequest
from slurmtools.render.job_submit import lua_literal, render_job_submit

from .admission_support import LUAS, example, job_desc
from policy_luarun import DRIVER

H = "0123456789abcdef"
pytestmark = pytest.mark.usefixtures("require_lua")  # a missing Lua fails, never skips


def _lua_bytes(b: bytes) -> str:
    return '"' + "".join("\\%03d" % x for x in b) + '"'


def _run_lua(tmp_path, raw: dict[str, bytes], lua: str, hostname: bytes | None = None, seq: bytes | None = None,
             strace: bool = False):
    """The generated job_submit.lua on one job whose fields `raw` are byte strings; the decision log's path."""
    site, fabric, _ = example()
    log = tmp_path / "d.jsonl"
    text = render_job_submit(site, fabric, audit_log=str(log)).text
    if hostname is not None:  # the controller's name as the Lua reads it, bytes and all
        text = text.replace('read_first_line("/proc/sys/kernel/hostname")', _lua_bytes(hostname), 1)
    if seq is not None:
        writer = "job_submit.lua@" + os.fsdecode(hostname or b"x")
        audit.seq_path(log, writer).write_bytes(seq)
    d = job_desc(JobRequest.from_sbatch(["-A", "vision", "-q", "production", "--gres=gpu:h100:1"]))
    marks = {}
    for k, b in raw.items():
        d[k] = marks.setdefault(k, f"MARK{len(marks)}")
    cases = "return " + lua_literal([d]) + "\n"
    for k, m in marks.items():
        cases = cases.replace(f'"{m}"', _lua_bytes(raw[k]))
    (tmp_path / "job_submit.lua").write_text(text)
    (tmp_path / "driver.lua").write_text(DRIVER)
    (tmp_path / "cases.lua").write_text(cases)
    cmd = [lua, str(tmp_path / "driver.lua"), str(tmp_path / "job_submit.lua"), str(tmp_path / "cases.lua")]
    if strace:
        cmd = ["strace", "-f", "-e", "trace=write", "-o", str(tmp_path / "strace.out")] + cmd
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return log


@pytest.mark.parametrize("lua", LUAS)
def test_lua_writes_bytes_that_are_not_utf8_as_text_the_reader_takes(tmp_path, lua):
    qos = b"pro\xffduc\xc3\xa9tion\xe2\x82"  # a stray byte, a valid e-acute, a cut-off euro sign
    log = _run_lua(tmp_path, {"qos": qos, "account": b"vi\x00si\x80on", "user_name": b"\xfe"}, lua)
    data = log.read_bytes()
    data.decode("utf-8")  # strict
    [rec] = list(audit.read(log, strict=True))
    assert rec["event"] == "admission_refused"
    assert rec["details"]["qos"] == "pro\\xffducétion\\xe2\\x82" == qos.decode("utf-8", "backslashreplace")
    assert rec["details"]["account"] == "vi\x00si\\x80on" and rec["user"] == "\\xfe"
    assert "QoS pro\\xffducétion\\xe2\\x82 is not a tier" in rec["details"]["message"]
    assert audit.verify(log) == []


# each byte of an invalid sequence, and every valid form next to the edges of its ranges
EDGES = [b"\xc0\x80", b"\xc1\xbf", b"\xc2\x80", b"\xdf\xbf", b"\xe0\x80\x80", b"\xe0\xa0\x80", b"\xed\x9f\xbf",
         b"\xed\xa0\x80", b"\xee\x80\x80", b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf",
         b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\x80", b"\xe2\x82", b"\xf0\x9f\x98", b"\xf0\x9f\x98\x80",
         b"a\\b\"c\x00\x1f\x7f", b"\xe2\x80\xa8", b""]


@pytest.mark.parametrize("lua", LUAS)
def test_lua_json_str_is_pythons_backslashreplace_on_any_bytes(tmp_path, lua):
    site, fabric, _ = example()
    text = render_job_submit(site, fabric).text
    start = text.index("local function utf8_text(s)")
    end = text.index("\nend\n", text.index("local function json_str(s)")) + 5
    rng = random.Random(12)
    alphabet = [0, 10, 34, 65, 92, 127, 128, 159, 160, 191, 192, 194, 223, 224, 237, 239, 240, 244, 245, 255]
    cases = EDGES + [bytes(rng.choice(alphabet + [rng.randrange(256)]) for _ in range(rng.randrange(1, 12)))
                     for _ in range(1500)]
    prog = ("local function int(n) return string.format('%d', n) end\n" + text[start:end]
            + "local cases = {" + ",".join(_lua_bytes(c) for c in cases) + "}\n"
            + "for _, c in ipairs(cases) do io.write(json_str(c), '\\n') end\n")
    (tmp_path / "j.lua").write_text(prog)
    out = subprocess.run([lua, str(tmp_path / "j.lua")], capture_output=True, timeout=60, check=True).stdout
    lines = out.split(b"\n")[:-1]
    assert len(lines) == len(cases)
    for c, line in zip(cases, lines):
        assert json.loads(line.decode("utf-8")) == c.decode("utf-8", "backslashreplace"), c


def test_python_writer_writes_undecodable_bytes_as_the_lua_does(tmp_path):
    p = tmp_path / "d.jsonl"
    raw = b"pro\xffduc\xc3\xa9tion\xe2\x82"
    audit.record("admission_refused", user=os.fsdecode(b"\xfe"), path=p, policy=H, writer="cli@h",
                 details={"qos": os.fsdecode(raw), os.fsdecode(b"k\xff"): ["\ud800", os.fsdecode(b"\x80")]})
    [rec] = list(audit.read(p, strict=True))
    assert rec["details"]["qos"] == raw.decode("utf-8", "backslashreplace") and rec["user"] == "\\xfe"
    assert rec["details"]["k\\xff"] == ["\\ud800", "\\x80"]
    assert audit.text("plain é ✓") == "plain é ✓"
    assert audit.verify(p) == []


def test_writer_ids_that_differ_only_in_odd_characters_keep_their_own_counters(tmp_path):
    p = tmp_path / "d.jsonl"
    for w in ("a b@n", "a_b@n", "a/b@n", "a%2Fb@n", "a b@n", "a_b@n"):
        audit.record("requeued", job=1, path=p, policy=H, writer=w)
    assert [(r["writer"], r["seq"]) for r in audit.read(p, strict=True)] == [
        ("a b@n", 1), ("a_b@n", 1), ("a/b@n", 1), ("a%2Fb@n", 1), ("a b@n", 2), ("a_b@n", 2)]
    assert audit.verify(p) == []
    # ordinary ids keep the counter file they always had
    assert audit.seq_path(p, "epilog@gpu01.cluster-a") == tmp_path / "d.jsonl.seq.epilog@gpu01.cluster-a"
    names = {audit.seq_name(w) for w in ("a b@n", "a_b@n", "a/b@n", "a%2Fb@n", "x" * 300, "x" * 299 + "y")}
    assert len(names) == 6 and all("/" not in n and len(n) <= 200 for n in names)


@pytest.mark.parametrize("lua", LUAS)
def test_lua_counter_file_is_the_one_verify_reads(tmp_path, lua):
    host = b"ctl/../x\xff"  # a slash and a byte that is not UTF-8 in the controller's name
    log = _run_lua(tmp_path, {}, lua, hostname=host)
    log = _run_lua(tmp_path, {}, lua, hostname=host)
    recs = list(audit.read(log, strict=True))
    assert [r["seq"] for r in recs] == [1, 2] and recs[0]["writer"] == "job_submit.lua@ctl/../x\\xff"
    assert audit.seq_path(log, recs[0]["writer"]).read_text() == "2\n"
    log.write_text(log.read_text().splitlines(keepends=True)[0])
    assert [x.message for x in audit.verify(log)] == [
        "writer job_submit.lua@ctl/../x\\xff: its counter is at 2 but its last record is seq 1 (line 1): "
        "1 record(s) missing from the end"]


@pytest.mark.parametrize("lua", LUAS)
def test_lua_line_over_max_line_is_cut_and_still_one_record(tmp_path, lua):
    log = _run_lua(tmp_path, {"qos": b"q\x01\xff" * 30000, "account": "é".encode() * 20000}, lua)
    data = log.read_bytes()
    assert len(data) <= audit.MAX_LINE and data.count(b"\n") == 1
    [rec] = list(audit.read(log, strict=True))
    assert rec["details"]["qos"].startswith("q\x01\\xff") and rec["details"]["qos"].endswith(" bytes cut)")
    assert rec["details"]["account"] == "é" * 256 + "...(39488 bytes cut)"  # never half a character
    assert audit.verify(log) == []


@pytest.mark.parametrize("lua", LUAS)
def test_lua_writes_a_long_line_in_one_write(tmp_path, lua):
    if not shutil.which("strace"):  # a set-up failure, never a skip: scripts/test installs it
        pytest.fail("no strace to count the write() calls: apt-get install -y strace (scripts/test installs it)",
                    pytrace=False)
    log = _run_lua(tmp_path, {"qos": b"q" * 20000}, lua, strace=True)
    size = len(log.read_bytes())
    assert size > 20000
    writes = re.findall(r"write\(\d+, .*\) = (\d+)", (tmp_path / "strace.out").read_text())
    assert str(size) in writes, writes  # stdio splits it at 4 KiB unless unbuffered


@pytest.mark.parametrize("lua", LUAS)
def test_lua_counter_beyond_2_53_still_writes_a_line(tmp_path, lua):
    log = _run_lua(tmp_path, {}, lua, hostname=b"c", seq=b"99999999999999999999\n")
    [rec] = list(audit.read(log, strict=True))
    assert rec["seq"] == 1 and audit.verify(log) == []


def test_counter_files_read_alike_and_garbage_is_reported(tmp_path):
    p = tmp_path / "d.jsonl"
    audit.seq_path(p, "w@h").write_bytes(b" 7 trailing\n")  # as the Lua reads it: 7
    assert audit.record("requeued", path=p, policy=H, writer="w@h")["seq"] == 8
    audit.seq_path(p, "w@h").write_bytes(b"garbage\n")
    assert [x.message for x in audit.verify(p)] == [
        "writer w@h: seq 8 as its first line in this log: 7 record(s) missing",
        f"writer w@h: its counter file {audit.seq_path(p, 'w@h')} holds no number"]


def test_deep_details_are_one_line_errors_and_deep_lines_a_problem(tmp_path):
    p = tmp_path / "d.jsonl"
    deep: list = []
    for _ in range(100000):
        deep = [deep]
    with pytest.raises(audit.AuditError, match="not JSON-serialisable"):
        audit.record("requeued", path=p, details={"x": deep}, policy=H, writer="w@h")
    p.write_text('{"event":"x","d":' + "[" * 100000 + "]" * 100000 + "}\n")
    assert [(x.line, x.message) for x in audit.verify(p)] == [
        (1, "not a decision record (torn, edited or foreign line)")]
    assert list(audit.read(p)) == []
