"""sbatch option forms that real users write, read by the CLI (`JobRequest.from_sbatch`) and, as the job_desc that
sbatch 25.11 sends for them, by the generated job_submit.lua: both must reach the same decision.

Each case's job_desc is written out by hand from Slurm 25.11's source (src/common/slurm_opt.c
slurm_opt_create_job_desc, src/common/parse_time.c, src/common/proc_args.c), not derived from the CLI's parser,
so a parser that reads an option otherwise than sbatch does fails here.
"""

from datetime import datetime

import pytest

from policy_luarun import run_lua
from slurmtools.policy import JobRequest, PolicyContext, evaluate
from slurmtools.policy.request import INFINITE
from slurmtools.render.job_submit import render_job_submit

pytestmark = pytest.mark.usefixtures("require_lua")  # a missing Lua fails, never skips

SIG = "#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsleep 1\n"
NO_VAL, NO_VAL16 = 4294967294, 65534
UNSET = {"min_nodes": NO_VAL, "num_tasks": NO_VAL, "time_limit": NO_VAL, "ntasks_per_node": NO_VAL16,
         "cpus_per_task": NO_VAL16, "sockets_per_node": NO_VAL16}
BASE = ["-A", "vision", "-q", "standard"]
WALLTIME_UNLIMITED = "tier standard allows a time limit of at most 1-00:00:00; this job asks for UNLIMITED"
TOO_MANY = "tier standard allows at most 32 GPUs per job; this job asks for 64"
CPUS = "on partition gpu each GPU comes with at most 14 CPUs: 2 GPUs allow 28 CPUs, this job asks for 40"

# (extra sbatch args, job_desc fields sbatch 25.11 sets for them, the refusal both sides give or None)
CASES = [
    # arg_set_time_limit: a limit of zero is sent as INFINITE; time_str2secs reads "-1" as INFINITE
    (["--gres=gpu:h100:1", "-t", "0"], {"time_limit": INFINITE, "tres_per_node": "gres/gpu:h100:1"},
     WALLTIME_UNLIMITED),
    (["--gres=gpu:h100:1", "--time=00:00:00"], {"time_limit": INFINITE, "tres_per_node": "gres/gpu:h100:1"},
     WALLTIME_UNLIMITED),
    (["--gres=gpu:h100:1", "-t", "-1"], {"time_limit": INFINITE, "tres_per_node": "gres/gpu:h100:1"},
     WALLTIME_UNLIMITED),
    (["--gres=gpu:h100:1", "-t", "0:30"], {"time_limit": 1, "tres_per_node": "gres/gpu:h100:1"}, None),
    # str_to_mbytes: K/M/G/T, each optionally followed by B
    (["--gres=gpu:h100:2", "--mem=100GB"], {"min_mem_per_node": 102400, "tres_per_node": "gres/gpu:h100:2"}, None),
    (["--gres=gpu:h100:1", "--mem=489gb"], {"min_mem_per_node": 489 * 1024, "tres_per_node": "gres/gpu:h100:1"},
     "on partition gpu each GPU comes with at most 250000 MB of memory: 1 GPUs allow 250000 MB, this job asks for "
     "500736 MB"),
    (["--gpus-per-node=h100:1", "--mem-per-cpu=4000MB"], {"min_mem_per_cpu": 4000,
                                                          "tres_per_node": "gres/gpu:h100:1"}, None),
    (["--gres=gpu:h100:2", "--mem-per-gpu=80GB"], {"mem_per_tres": "gres/gpu:81920",
                                                   "tres_per_node": "gres/gpu:h100:2"}, None),
    # gres_prepend_tres_type: 25.11's TRES form is taken as it is
    (["--gres=gres/gpu:h100:8", "-N", "8"], {"min_nodes": 8, "tres_per_node": "gres/gpu:h100:8"}, TOO_MANY),
    (["--gres=gres/gpu:8"], {"tres_per_node": "gres/gpu:8"},
     "partition gpu needs a GPU type: ask for e.g. --gres=gpu:h100:N instead of an untyped GPU count "
     "(GPU types here: h100)"),
    # --gpus-per-node and --gres both land in tres_per_node, --gpus-per-node's first, whatever their order
    (["--gpus-per-node=h100:8", "--gres=shard:1", "-N", "8"], {"min_nodes": 8,
                                                               "tres_per_node": "gres/gpu:h100:8,gres/shard:1"},
     TOO_MANY),
    (["--gres=shard:1", "--gpus-per-node=h100:8", "-N", "8"], {"min_nodes": 8,
                                                               "tres_per_node": "gres/gpu:h100:8,gres/shard:1"},
     TOO_MANY),
    (["--gpus-per-node=h100:8", "--gres=none", "-N", "8"], {"min_nodes": 8, "tres_per_node": "gres/gpu:h100:8"},
     TOO_MANY),
    # xfmt_tres: a comma list of [type:]count, each item its own entry; a type listed twice asks for its larger
    # count (measured on 22.05 and 25.11: --gpus=h100:2,h100:3 asked for and got 3; --gpus-per-node=h100:1
    # --gres=gpu:h100:2 asked for 2)
    (["--gpus=h100:40,h100:16", "-N", "4"], {"min_nodes": 4, "tres_per_job": "gres/gpu:h100:40,gres/gpu:h100:16"},
     "tier standard allows at most 32 GPUs per job; this job asks for 40"),
    (["--gpus=h100:16,h100:32", "-N", "4"], {"min_nodes": 4, "tres_per_job": "gres/gpu:h100:16,gres/gpu:h100:32"},
     None),
    (["--gpus-per-node=h100:8", "--gres=gpu:h100:2", "-N", "4"],
     {"min_nodes": 4, "tres_per_node": "gres/gpu:h100:8,gres/gpu:h100:2"}, None),
    # --tres-per-task's cpu=N sets cpus_per_task (_set_tres_per_task_from_sibling_opt)
    (["--tres-per-task=cpu=20,gres/gpu:h100:1", "-n", "2"], {"num_tasks": 2, "cpus_per_task": 20,
                                                             "tres_per_task": "cpu=20,gres/gpu:h100=1"}, CPUS),
    # -p a,b: the job may start in either, so each must take it
    (["-p", "gpu,gpu", "--gres=gpu:h100:1"], {"partition": "gpu,gpu", "tres_per_node": "gres/gpu:h100:1"}, None),
    (["-p", "gpu,debug", "--gres=gpu:h100:1"], {"partition": "gpu,debug", "tres_per_node": "gres/gpu:h100:1"},
     "partition debug is not a partition of this site (partitions: gpu)"),
    (["-p", "gpu,", "--gres=gpu:h100:1"], {"partition": "gpu,", "tres_per_node": "gres/gpu:h100:1"},
     "partition gpu, is not a partition of this site (partitions: gpu)"),
]


def _job_desc(fields: dict) -> dict:
    d = {"user_name": "alice", "account": "vision", "default_account": "vision", "qos": "standard", "script": SIG}
    d.update(UNSET)
    d.update(fields)
    return {k: v for k, v in d.items() if v is not None}


def _decide(site, fabric, policies, tmp_path, cases):
    month = datetime.now().strftime("%Y-%m")
    ctx = PolicyContext(site=site, fabric=fabric, usage=None, month=month)
    py = [evaluate(JobRequest.from_sbatch(a, script=SIG, user="alice", default_account="vision"), policies, ctx)
          for a, _ in cases]
    lua = run_lua(render_job_submit(site, fabric).text, [_job_desc(f) for _, f in cases], tmp_path)
    return py, lua


@pytest.mark.parametrize("args,fields,refusal", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_sbatch_forms_decide_the_same_in_the_cli_and_in_slurm(site, fabric, policies, tmp_path, args, fields,
                                                              refusal):
    (d,), (lua,) = _decide(site, fabric, policies, tmp_path, [(BASE + args, fields)])
    if refusal is None:
        assert d.action != "deny", d.message
        assert (lua["rc"], lua["user"]) == (0, "")
    else:
        assert (d.action, d.message) == ("deny", refusal)
        assert (lua["rc"], lua["user"]) == (-1, refusal)


def test_several_partitions_meet_each_partitions_rules(cpu_site, tmp_path):
    """On the CPU test site: a GPU job naming a GPU and a CPU partition is refused for the CPU one, a CPU job
    naming both for the GPU one (GPUs required there); the default QoS is set once either way."""
    site, fabric, policies = cpu_site
    cases = [(["-A", "vision", "-p", "gpu,cpu", "--gres=gpu:h100:1"],
              {"qos": None, "partition": "gpu,cpu", "tres_per_node": "gres/gpu:h100:1"}),
             (["-A", "vision", "-p", "cpu,gpucpu", "-c", "4"],
              {"qos": None, "partition": "cpu,gpucpu", "cpus_per_task": 4}),
             (["-A", "vision", "-p", "cpu,gpu", "-c", "4"], {"qos": None, "partition": "cpu,gpu", "cpus_per_task": 4})]
    py, lua = _decide(site, fabric, policies, tmp_path, cases)
    assert py[0].action == "deny" and py[0].message.startswith("partition cpu is a CPU partition: it gives no GPUs")
    assert py[1].action == "modify" and py[1].changes == {"qos": "standard"}
    assert py[2].action == "deny" and py[2].message.startswith("partition gpu is for GPU jobs")
    for d, got in zip(py, lua):
        if d.action == "deny":
            assert (got["rc"], got["user"]) == (-1, d.message)
        else:
            assert (got["rc"], got["user"], got["partition"], got["qos"]) == (0, "", "cpu,gpucpu", "standard")


def test_cli_reads_the_forms_as_sbatch_does():
    r = JobRequest.from_sbatch(["-t", "0", "--mem=100GB", "--gpus-per-node=h100:8", "--gres=shard:1"])
    assert (r.time_limit, r.min_mem_per_node) == (INFINITE, 102400)
    assert r.tres_per_node == "gres:gpu:h100:8,gres:shard:1" and r.gpus == 8
    assert JobRequest.from_sbatch(["--mem=4K"]).min_mem_per_node == 1  # rounded up to a MB, as str_to_mbytes does
    assert JobRequest.from_sbatch(["--gres=none"]).tres_per_node is None
    r = JobRequest.from_sbatch(["--tres-per-task=cpu=8,gres/gpu:2", "-n", "2"])
    assert (r.cpus_per_task, r.gpus, r.cpus) == (8, 4, 16)


@pytest.mark.parametrize("args,needle", [
    (["--mem=100B"], "option --mem: expected memory like 4000, 250G or 2T, got '100B'"),
    (["--gpus=h100:4,"], "option --gpus: expected [type:]count, got 'h100:4,'"),
    (["--tres-per-task=cpu=x"], "option --tres-per-task cpu=: expected a whole number >= 1, got 'x'"),
])
def test_forms_sbatch_refuses_name_the_option(args, needle):
    from slurmtools.policy import RequestError

    with pytest.raises(RequestError) as e:
        JobRequest.from_sbatch(args)
    assert str(e.value) == needle
