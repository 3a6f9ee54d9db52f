"""The view derived from the topology graph, job explanations, and the CLI commands that need no Slurm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timezone

from slurmtools.planner.explain import job_report, job_text
from slurmtools.planner.view import from_fabric, from_topology
from slurmtools.slurm.model import JobInfo, NodeInfo
from slurmtools.topology.build_site import build_site


def test_graph_view_matches_fabric_view(fabric):
    a, b = from_fabric(fabric), from_topology(build_site(fabric), fabric.node_types)
    assert a.leaves == b.leaves and a.hosts == b.hosts
    assert a.leaf_uplink_gbytes == b.leaf_uplink_gbytes and a.leaf_spines == b.leaf_spines
    assert a.link_gbytes == b.link_gbytes == 50.0
    # the graph's PCIe distances put each GPU next to the two HCAs on its PCIe switch
    assert b.nearest_nics("dgx-h100", 3) == ("mlx5_2", "mlx5_3")


def test_live_state_marks_drained_and_partly_used_hosts(fabric):
    nodes = [NodeInfo(name=h, state="idle", flags=(), cpus=112, cpus_alloc=0, memory_mb=2_000_000, memory_alloc_mb=0,
                      gpus_by_type={"h100": 8}, gpus_used_by_type={"h100": 0}, gpus_used_idx=(), features=(),
                      partitions=("gpu",)) for h in fabric.hosts]
    nodes[0] = replace(nodes[0], state="drained", flags=("DRAIN",))
    nodes[1] = replace(nodes[1], state="mixed", gpus_used_by_type={"h100": 3}, cpus_alloc=42)
    v = from_topology(build_site(fabric), fabric.node_types, nodes[:-1])  # gpu16 not reported at all
    assert v.hosts["gpu01"].gpus_free == 0 and v.hosts["gpu02"].gpus_free == 5 and v.hosts["gpu16"].gpus_free == 0
    assert v.hosts["gpu02"].cpus_free == 70 and v.live


def _job(nodes, state="RUNNING", reason="None", req_switch=None):
    now = datetime.now(timezone.utc)
    return JobInfo(job_id=12, name="j", user="u", account="vision", partition="gpu", qos="standard", state=state,
                   reason=reason, nodes=tuple(nodes), num_nodes=len(nodes), gpus=8 * len(nodes),
                   gpus_by_type={"h100": 8 * len(nodes)}, time_limit_s=3600, restarts=0, submit_time=now,
                   start_time=now, end_time=None, req_switch=req_switch)


def test_job_report_scores_a_spread_job_below_a_packed_one(fabric):
    v = from_fabric(fabric)
    spread = job_report(_job(["gpu01", "gpu05"]), v)
    packed = job_report(_job(["gpu01", "gpu02"]), v)
    assert set(spread["leaves"]) == {"leaf1", "leaf2"} and set(packed["leaves"]) == {"leaf1"}
    assert packed["quality"]["vs_empty"] == 1.0 and packed["quality"]["vs_now"] == 1.0
    assert spread["quality"]["vs_empty"] < 1.0 and spread["quality"]["leaves_best_empty"] == 1
    text = job_text(spread)
    assert "placement: leaf1: gpu01; leaf2: gpu05" in text and "quality:" in text


def test_pending_job_reason_in_words(fabric):
    r = job_report(_job([], state="PENDING", reason="Resources", req_switch=1), from_fabric(fabric))
    assert "waiting for resources" in r["reason_text"] and "--switches" in r["reason_text"]


def test_an_ended_jobs_reason_is_said_once_or_in_words(fabric):
    """`explain` of a failed job read `FAILED (NonZeroExitCode: NonZeroExitCode)`: a reason without words of ours is
    said once, and the common end reasons have words."""
    v = from_fabric(fabric)
    failed = job_text(job_report(_job(["gpu01"], state="FAILED", reason="NonZeroExitCode"), v))
    assert failed.splitlines()[0] == ("job 12: FAILED (NonZeroExitCode: its program exited with a non-zero code (see "
                                      "the job's output file))")
    odd = job_text(job_report(_job(["gpu01"], state="FAILED", reason="RaisedSignal:9_Killed"), v))
    assert odd.splitlines()[0] == "job 12: FAILED (RaisedSignal:9_Killed)"


def _cli(*args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "SLURMTOOLS_TEMPLATE_PATH")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "slurmtools", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_cli_plan_without_slurm_says_so_and_plans_idle():
    p = _cli("plan", "--json", "--gpus", "40", "--user", "labuser", "--account", "vision", "--tier", "best", "--", "python", "t.py")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert "no Slurm reachable" in d["note"] and d["live"] is False
    assert d["switches"] == 2 and d["nodes"] == 5 and d["tier"] == "production"
    assert "#SBATCH --switches=2@00:02:00" in d["script"]


def test_cli_errors_are_one_line_without_traceback():
    """Each bad input is refused by the check meant for it (the named option), in one line."""
    me = ["--user", "labuser"]  # a user of the site's accounts, so the identity check passes
    for args, option in ((["plan", *me, "--gpus", "12", "--", "x"], "--gpus"),
                         (["plan", *me, "--gpus", "8", "--time", "soon", "--", "x"], "--time"),
                         (["plan", *me, "--gpus", "8", "--time", "٣h", "--", "x"], "--time"),  # was 3 h
                         (["plan", *me, "--gpus", "8", "--template", "nope", "--", "x"], "nope"),
                         (["templates", "show", "nope"], "nope"),
                         (["plan", *me, "--gpus", "8", "--name", "a\nb", "--", "x"], "--name"),
                         (["plan", "--user", "mallory", "--gpus", "8", "--", "x"], "--user")):
        p = _cli(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert "Traceback" not in p.stderr and p.stderr.startswith("slurmtools: error: ")
        assert len(p.stderr.strip().splitlines()) == 1
        assert option in p.stderr, (args, p.stderr)


def test_cli_templates_list_and_show():
    p = _cli("templates", "list", "--json")
    names = {t["name"] for t in json.loads(p.stdout)}
    assert {"python", "torchrun", "accelerate", "mpi", "array"} <= names
    s = _cli("templates", "show", "torchrun")
    assert s.returncode == 0 and "rdzv-endpoint" in s.stdout


def test_cli_submit_without_slurm_refuses_cleanly():
    p = _cli("submit", "--gpus", "8", "--", "x")
    assert p.returncode == 4 and "cannot submit: no Slurm reachable" in p.stderr and "Traceback" not in p.stderr
