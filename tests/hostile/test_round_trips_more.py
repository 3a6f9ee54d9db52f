"""More files slurmtools writes and reads back itself (after test_round_trips.py): whatever the writer accepts, its
own reader must read as written, or the writer must refuse it in one line.

Before: `admin render node-expectations` wrote, from a graph holding GPUs 0 and 2 of a host (no 1), a PCIe gen 8
edge, an HCA of rate 0 or link layer "roce", a file whose reader (the prolog, node-health) refused it, leaving
those hosts unchecked at every job start. `audit.record(time=1e300)` (or NaN, or a negative time) wrote a line
that stopped every `slurmtools audit show` of the log with an OverflowError traceback."""

from __future__ import annotations

import json
import math
from datetime import date, datetime

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st
from typer.testing import CliRunner

from slurmtools import audit
from slurmtools.checkpoint import Checkpointer
from slurmtools.cli.main import app
from slurmtools.errors import SlurmtoolsError
from slurmtools.hooks.expectations import parse_all
from slurmtools.render import node_expectations as ne
from slurmtools.topology.graph import Topology
from slurmtools.topology.nvml_capture import GpuRecord, NvLinkEnd, NvmlCapture, parse_capture

#: 9999-12-30 UTC: the latest record time `audit show` prints in every time zone (audit.MAX_TIME)
MAX_TIME = 253402128000.0
FAST = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
H = "0123456789abcdef"

# user names Slurm and slurmtools accept (slurm/model.py is_user_name): AD-joined, with spaces, unicode
users = st.sampled_from(["alice", "DOMAIN\\user", "john smith", "jürgen", "user@EXAMPLE.ORG", "a" * 64])
hosts = st.sampled_from(["gpu01", "a" * 63, "n-0.rack1", "gpu-a100-0001"])


# ------------------------------------------------------------------------------------------ node expectations

@st.composite
def graphs(draw):
    t = Topology(draw(st.sampled_from(["x", "site ü"])))
    for h in draw(st.lists(hosts, min_size=1, max_size=3, unique=True)):
        t.add_host(h, node_type=draw(st.sampled_from([None, "dgx-h100", "dgx h100"])))
        sw = t.add_pcie_switch(h, 0)
        for i in sorted(draw(st.sets(st.integers(0, 9), max_size=4))):
            g = t.add_gpu(h, i)
            if draw(st.booleans()):
                t.link_pcie(g, sw, gen=draw(st.sampled_from([None, 1, 4, 5, 6, 7, 8])),
                            width=draw(st.sampled_from([None, 1, 3, 16, 32])))
        leaf = t.add_switch(f"leaf-{h}")
        for k in range(draw(st.integers(0, 2))):
            n = t.add_nic(h, f"mlx5_{k}", rate_gbytes=draw(st.sampled_from([None, 0.0, 12.5, 50.0])),
                          link_layer=draw(st.sampled_from([None, "ib", "ethernet", "roce"])))
            if draw(st.booleans()):
                t.link_ib(n, leaf, width=draw(st.sampled_from([1, 2, 4, 12])),
                          speed=draw(st.sampled_from(["HDR", "NDR", "XDR"])))
    return t


@FAST
@given(graphs())
def test_node_expectations_read_back_as_rendered_or_refused_in_one_line(t):
    try:
        text = ne.render(t)
    except SlurmtoolsError as e:  # ne.UnreadableFact
        assert "\n" not in str(e) and str(e).startswith("node expectations: ")
        return
    got = parse_all(text, "f")
    assert sorted(got) == sorted(t.host_names())
    for h, exp in got.items():
        facts = ne.host_facts(t, h)
        assert exp.gpus == facts["gpus"]
        assert [(g.index, g.nvlinks, g.pcie_gen, g.pcie_width) for g in exp.gpu] == \
            [(g["index"], g["nvlinks"], g["pcie_gen"], g["pcie_width"]) for g in facts["gpu"]]
        assert (None if exp.hcas is None else [(x.name, x.rate_gbytes, x.width, x.speed, x.link_layer, x.cabled)
                                              for x in exp.hcas]) == \
            (None if facts["hcas"] is None else [tuple(x.values()) for x in facts["hcas"]])


@pytest.mark.parametrize("build, says", [
    (lambda t: (t.add_gpu("gpu01", 0), t.add_gpu("gpu01", 2)), "gpu: GPU index 2 but gpus = 2"),
    (lambda t: t.link_pcie(t.add_gpu("gpu01", 0), t.add_pcie_switch("gpu01", 0), gen=8, width=16),
     "gpu[0].pcie_gen: expected 7 or less, found 8"),
    (lambda t: t.add_nic("gpu01", "mlx5_0", rate_gbytes=0.0), "hcas[0].rate_gbytes"),
    (lambda t: t.add_nic("gpu01", "mlx5_0", link_layer="roce"), "hcas[0].link_layer"),
])
def test_node_expectations_the_reader_would_refuse_are_not_written(tmp_path, build, says):
    t = Topology("x")
    t.add_host("gpu01", node_type="dgx")
    t.add_host("gpu02", node_type="dgx")
    build(t)
    with pytest.raises(SlurmtoolsError) as e:  # ne.UnreadableFact
        ne.render(t)
    assert str(e.value).startswith(f"node expectations: host(s) gpu01: {says}")
    assert "\n" not in str(e.value)
    assert ne.render(t, ["gpu02"])  # the other host still renders
    src, out = tmp_path / "t.json", tmp_path / "exp.json"
    src.write_text(t.to_json())
    r = CliRunner().invoke(app, ["admin", "render", "node-expectations", str(src), "--out", str(out)])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and says in r.output and not out.exists()


# ------------------------------------------------------------------------------------------ the decision log

jobs = st.one_of(st.none(), st.integers(1, 2**32 - 1), st.sampled_from(["1234_7", "1234_[1-3]", "99+1", "12.batch"]))
details = st.dictionaries(st.text(min_size=1, max_size=8),
                          st.one_of(st.text(max_size=20), st.integers(-2**63, 2**63), st.none(), st.booleans()),
                          max_size=3)


@FAST
@given(jobs, users, details, st.one_of(st.none(), st.floats(0, MAX_TIME)))
@example(None, "DOMAIN\\user", {}, 1e300)
@example(None, "alice", {}, float("nan"))
@example(None, "alice", {}, -1.0)
@example(None, "alice", {}, 0.0)
@example(1, "alice", {}, MAX_TIME)
def test_audit_show_reads_every_record_the_writer_writes(tmp_path, job, user, det, when):
    p = tmp_path / f"log{abs(hash((job, user, str(det), when)))}.jsonl"
    try:
        rec = audit.record("preempted", job=job, user=user, details=det, path=p, time=when, policy=H,
                           writer="epilog@gpu01")
    except audit.AuditError as e:  # refused, in one line, only for a time `audit show` cannot print
        assert when is not None and not (0 <= when <= MAX_TIME) and "\n" not in str(e)
        assert not p.exists()
        return
    assert list(audit.read(p, strict=True)) == [rec]
    r = CliRunner().invoke(app, ["audit", "show", "--log", str(p)])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert len(r.output.splitlines()) == 1 and "epilog@gpu01#1" in r.output
    r = CliRunner().invoke(app, ["audit", "show", "--log", str(p), "--json", "--user", user,
                                 "--job", str(rec["job"]), "--since", "1970-01-01T00:00+00:00"])
    assert r.exit_code == 0 and [json.loads(x) for x in r.output.splitlines()] == [rec]
    assert CliRunner().invoke(app, ["audit", "verify", "--log", str(p)]).exit_code == 0


# ------------------------------------------------------------------------------------------ checkpoints

@FAST
@given(st.lists(st.one_of(st.integers(0, 10**12 - 1), st.sampled_from([0, 1, 10**12 - 1])), min_size=1,
                max_size=6), st.integers(1, 4), st.sampled_from(["pickle", "json"]))
def test_checkpoint_load_returns_the_newest_step_saved(tmp_path, steps, keep, fmt):
    d = tmp_path / f"run-{abs(hash((tuple(steps), keep, fmt)))}"
    c = Checkpointer(d, keep=keep, fmt=fmt, install=False, requeue=False, job_id="", log=lambda m: None)
    for s in steps:
        c.save({"step": s, "user": "DOMAIN\\user", "name": "jürgen smith", "empty": []}, step=s)
    top = max(steps)
    got = Checkpointer(d, keep=keep, fmt=fmt, install=False, requeue=False, job_id="", log=lambda m: None)
    assert got.load() == {"step": top, "user": "DOMAIN\\user", "name": "jürgen smith", "empty": []}
    # the save just written is never pruned, so a step saved below the newest stays beside the newest `keep`
    assert got.latest_step() == top and len(got.checkpoints()) <= min(keep + 1, len(set(steps)))


# ------------------------------------------------------------------------------------------ NVML capture

@st.composite
def captures(draw):
    n = draw(st.integers(0, 4))
    words = ["PIX", "PXB", "PHB", "NODE", "SYS", "unknown"]
    anc = [["X"] * n for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            anc[a][b] = anc[b][a] = draw(st.sampled_from(words))
    gpus = tuple(GpuRecord(
        i, draw(st.sampled_from(["NVIDIA H100 80GB HBM3", "", "GPU ü"])), f"GPU-{i:08x}",
        f"00000000:{0x07 + i:02X}:00.0", draw(st.integers(0, 2**40)), draw(st.one_of(st.none(), st.integers(0, 255))),
        tuple(sorted(draw(st.sets(st.integers(0, (1 << 16) - 1), max_size=4)))),
        draw(st.one_of(st.none(), st.integers(0, 2**31))),
        tuple(NvLinkEnd(k, "00000000:00:00.0", draw(st.sampled_from(["gpu", "switch", "npu", "unknown"])),
                        draw(st.one_of(st.none(), st.integers(1, 5)))) for k in range(draw(st.integers(0, 2)))),
        draw(st.one_of(st.none(), st.just("ab" * 4 + "-0000-0000-0000-" + "0" * 12))),
        draw(st.one_of(st.none(), st.integers(0, 2**32 - 1))), draw(st.one_of(st.none(), st.integers(0, 2**31))))
        for i in range(n))
    return NvmlCapture(draw(hosts), draw(st.sampled_from(["", "550.54.15"])), gpus, tuple(map(tuple, anc)),
                       notes=tuple(draw(st.lists(st.text(max_size=10), max_size=2))))


@FAST
@given(captures())
def test_nvml_capture_reads_back_as_written(cap):
    assert parse_capture(json.dumps(cap.to_dict(), indent=1), "cap.json") == cap


# ------------------------------------------------------------------------------------------ topology JSON

@FAST
@given(hosts, st.sampled_from([None, "dgx h100", "ü"]), st.integers(0, 2**31), st.sampled_from(["ib", None]))
def test_topology_json_reads_back_as_written(host, node_type, index, layer):
    t = Topology("site ü")
    t.add_host(host, node_type=node_type, features=("a b", ""))
    g = t.add_gpu(host, index, name="H100", memory_mb=2**40)
    n = t.add_nic(host, "mlx5_0", port_guids=("0x1",), rate_gbytes=50.0, link_layer=layer)
    t.link_pcie(g, t.add_pcie_switch(host, 0), gen=5, width=16)
    t.link_ib(n, t.add_switch("leaf 1"), width=4, speed="NDR", count=2)
    back = Topology.from_json(t.to_json(indent=1), "t.json")
    assert back.same_as(t) and back.to_dict() == t.to_dict()


# ------------------------------------------------------------------------------------------ reports' day cache

def test_day_cache_reads_back_odd_users_and_job_ids(tmp_path):
    import numpy as np
    import pandas as pd

    from slurmtools.reports.cache import DayCache
    from slurmtools.reports.sacct import JOB_COLUMNS

    t0 = np.datetime64("2026-01-01T00:00:00")
    rows = [dict(job_id=jid, job_id_raw=k + 1, name=name, user=user, account="a", partition="p", qos="q",
                 state="COMPLETED", exit_code="0:0", submit=t0, eligible=t0, start=t0,
                 end=t0 + np.timedelta64(86399 - k, "s"), nodelist=nl, nnodes=1, gpus=g, gpu_type=gt, req_gpus=g,
                 cluster="c", gpu_util_slurm=np.nan, gpu_mem_slurm_mb=0.0, energy_slurm_j=np.nan)
            for k, (jid, name, user, nl, g, gt) in enumerate([
                ("1234_7", "ünï code", "DOMAIN\\user", "gpu[01-02]", 16, "h100"),
                ("99+1", "", "john smith", "a" * 63, 0, None)])]
    df = pd.DataFrame(rows)
    jobs = pd.DataFrame({k: df[k].astype(t if t != "str" else "str") for k, t in JOB_COLUMNS.items()})
    c = DayCache(tmp_path)
    assert c.store(jobs, date(2026, 1, 1), date(2026, 1, 2)) == [date(2026, 1, 1), date(2026, 1, 2)]
    back = c.load(date(2026, 1, 1), date(2026, 1, 2))
    assert back.astype(str).to_dict("records") == jobs.astype(str).to_dict("records")
    assert back["gpu_type"].isna().tolist() == [False, True]
    assert c.load(date(2026, 1, 2), date(2026, 1, 2)).empty
    assert not math.isnan(c.load_usage(date(2026, 1, 1), date(2026, 1, 1))["gpu_hours"].sum())
    assert datetime(2026, 1, 1).date() in c.days()
