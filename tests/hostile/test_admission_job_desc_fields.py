"""job_desc fields admission must read as Slurm means them (25.11 src/plugins/job_submit/lua/job_submit_lua.c,
src/common/slurm_opt.c slurm_opt_create_job_desc, src/common/proc_args.c verify_node_count), on both sides."""

from __future__ import annotations

import pytest

from slurmtools.policy import JobRequest, RequestError
from slurmtools.policy.update import modified_request, parse_update, record_request

from .admission_support import lua_results, needs_lua, python_decision, same_on_both_sides

SIG = "#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsleep 1\n"
NO_VAL = 4294967294


def _req(*args: str) -> JobRequest:
    return JobRequest.from_sbatch(["-A", "vision", *args], script=SIG, user="labuser", default_account="vision")


def test_node_range_is_read_as_min_and_max_nodes():
    """sbatch sends `-N 2-8` as min_nodes 2, max_nodes 8, `-N 4` as both 4, 25.11's `-N 2,4,8` as 2 and 8."""
    assert (_req("-N", "2-8").min_nodes, _req("-N", "2-8").max_nodes) == (2, 8)
    assert (_req("-N", "4").min_nodes, _req("-N", "4").max_nodes) == (4, 4)
    assert (_req("--nodes=2,4,8").min_nodes, _req("--nodes=2,4,8").max_nodes) == (2, 8)
    assert (_req("-N", "0").min_nodes, _req("-N", "0").nodes) == (0, 1)   # sbatch 22.05 takes it (the lab)
    for bad in ("8-2", "2-", "x", ""):
        with pytest.raises(RequestError, match="-N: "):
            _req("-N", bad)


@needs_lua
def test_a_node_range_counts_its_most_nodes(tmp_path):
    """`-N 1-8 --gpus-per-node=h100:8` may run on 8 nodes, 64 GPUs: it was counted as 1 node, 8 GPUs."""
    reqs = [_req("-q", "standard", "--gpus-per-node=h100:8", "-N", "1-8"),
            _req("-q", "standard", "--gpus-per-node=h100:8", "--nodes=1,2,8"),
            _req("-q", "standard", "--gres=gpu:h100:1", "-N", "1-5"),
            _req("-q", "standard", "--gpus-per-node=h100:8", "-N", "1-4"),
            _req("-q", "standard", "--gpus-per-node=h100:8")]
    d = same_on_both_sides(reqs, tmp_path)
    assert d[0].message == "tier standard allows at most 32 GPUs per job; this job asks for 64"
    assert d[1].message == d[0].message
    assert d[2].message == "tier standard allows at most 4 nodes per job; this job asks for 5"
    assert d[3].action != "deny" and d[4].action != "deny"


@needs_lua
def test_lua_reads_max_nodes_as_25_11_sends_it(tmp_path):
    """The raw job_desc of `sbatch -N 1-8 --gpus-per-node=h100:8` on 25.11 (gres/ prefix); unset max_nodes is
    NO_VAL (slurm_init_job_desc_msg) and counts nothing."""
    base = {"account": "vision", "qos": "standard", "user_name": "labuser", "script": SIG,
            "tres_per_node": "gres/gpu:h100:8", "num_tasks": NO_VAL, "time_limit": NO_VAL,
            "ntasks_per_node": 65534, "cpus_per_task": 65534, "sockets_per_node": 65534}
    descs = [{**base, "min_nodes": 1, "max_nodes": 8}, {**base, "min_nodes": 1, "max_nodes": NO_VAL},
             {**base, "min_nodes": NO_VAL, "max_nodes": NO_VAL}]
    for name, got in lua_results(descs, tmp_path).items():
        assert [(x["rc"], x["user"]) for x in got] == [
            (-1, "tier standard allows at most 32 GPUs per job; this job asks for 64"), (0, ""), (0, "")], name


@needs_lua
def test_update_to_a_node_range_is_checked_on_both_sides(tmp_path):
    """`scontrol update NumNodes=1-8` sends min_nodes 1, max_nodes 8 (update_job.c: verify_node_count)."""
    upd = parse_update(["JobId=7", "NumNodes=1-8"])
    assert (upd.change.min_nodes, upd.change.max_nodes) == (1, 8)
    show = {"Account": "vision", "QOS": "standard", "Partition": "gpu", "TimeLimit": "01:00:00", "NumNodes": "1-1",
            "TresPerNode": "gres/gpu:h100:8", "ReqTRES": "cpu=1,mem=1G,node=1,billing=1,gres/gpu=8,gres/gpu:h100=8",
            "UserId": "labuser(1001)"}
    current, tres = record_request(show, script=SIG)
    assert (current.min_nodes, current.max_nodes) == (1, 1)
    req, touched = modified_request(current, upd.change, tres)
    d = python_decision(req)
    assert touched and d.message == "tier standard allows at most 32 GPUs per job; this job asks for 64"
    rec = {"account": "vision", "qos": "standard", "partition": "gpu", "time_limit": 60, "min_nodes": 1,
           "max_nodes": 1, "tres_per_node": "gres/gpu:h100:8", "script": SIG, "name": "job.sh",
           "tres_fmt_req_str": show["ReqTRES"]}
    desc = {"min_nodes": 1, "max_nodes": 8, "num_tasks": NO_VAL, "time_limit": NO_VAL, "ntasks_per_node": 65534,
            "cpus_per_task": 65534, "sockets_per_node": 65534, "user_name": "labuser"}
    for name, got in lua_results([{"modify": True, "rec": rec, "desc": desc}], tmp_path).items():
        assert (got[0]["rc"], got[0]["user"]) == (-1, d.message), name


def test_numnodes_of_one_count_is_read_as_each_release_sends_it():
    """`scontrol update JobId=N NumNodes=4` on a `-N 1-8` job, measured in the lab: 25.11 sends min_nodes 4 and
    max_nodes 4 (the job becomes 4-4); 22.05 sends min_nodes 4 only (job_desc.max_nodes NO_VAL: it becomes 4-8,
    and may still run on 8 nodes). The check counts what the job may get on its release."""
    from slurmtools.policy.update import modified_request
    from slurmtools.slurm.releases import RELEASES

    upd = parse_update(["JobId=7", "NumNodes=4"])
    current = JobRequest(min_nodes=1, max_nodes=8, qos="standard")
    for rel, nodes in (("22.05", 8), ("25.11", 4), ("24.05", 8)):   # 24.05: not measured, the larger count
        change = upd.for_release(RELEASES[rel]).change
        merged, touched = modified_request(current, change, "")
        assert touched and merged.nodes == nodes, rel
    assert parse_update(["JobId=7", "NumNodes=2-3"]).for_release(RELEASES["22.05"]).change.max_nodes == 3
