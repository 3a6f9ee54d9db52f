import pytest

from slurmtools.policy.request import INFINITE, JobRequest, RequestError, gpu_counts


def test_gpu_counts_forms():
    assert gpu_counts("gres:gpu:h100:4") == {"h100": 4}
    assert gpu_counts("gres:gpu:8") == {"untyped": 8}
    assert gpu_counts("gres/gpu:h100:2,gres:gpu:3") == {"h100": 2, "untyped": 3}
    assert gpu_counts("gres:gpu") == {"untyped": 1}
    assert gpu_counts("gres:gpu:h100") == {"h100": 1}
    assert gpu_counts("gres:shard:4,license:x") == {}
    assert gpu_counts(None) == {} and gpu_counts("") == {}
    # tres_per_task as Slurm 25.11 hands it to job_submit.lua (measured in the 25.11 lab)
    assert gpu_counts("gres/gpu:h100=2") == {"h100": 2}
    assert gpu_counts("gres/gpu=1") == {"untyped": 1}
    assert gpu_counts("cpu=4,gres/gpu:h100=3") == {"h100": 3}
    assert gpu_counts("gres:gpu:\u00b2") == {"\u00b2": 1}  # a unicode digit is a type name, as in Lua


def test_from_sbatch_options_and_script():
    script = "#!/bin/bash\n#SBATCH -p gpu\n#SBATCH --qos=standard -t 1:00:00\n#SBATCH --signal=B:USR1@300\necho hi\n"
    r = JobRequest.from_sbatch(["-q", "production", "--gres=gpu:h100:8", "-N2", "--ntasks-per-node=8", "-c", "14",
                                "--mem=500G", "job.sh", "arg1"], script=script, user="alice", default_account="nlp")
    assert (r.partition, r.qos, r.time_limit) == ("gpu", "production", 60)  # the command line wins
    assert r.tres_per_node == "gres:gpu:h100:8" and r.min_nodes == 2 and r.ntasks_per_node == 8
    assert r.gpus == 16 and r.gpus_by_type() == {"h100": 16}
    assert r.tasks == 16 and r.cpus == 16 * 14
    assert r.min_mem_per_node == 500 * 1024 and r.mem_mb == 2 * 500 * 1024
    assert r.argv == ("arg1",) and r.effective_account == "nlp" and r.user_name == "alice"


def test_gpu_sources_take_the_largest():
    r = JobRequest.from_sbatch(["--gpus=h100:4", "--gpus-per-task=h100:1", "-n", "6"])
    assert r.gpus == 6
    r = JobRequest.from_sbatch(["--gpus=h100:12", "--gpus-per-node=h100:4", "-N", "2"])
    assert r.gpus_by_type() == {"h100": 12}


def test_gpus_per_socket_count():
    r = JobRequest.from_sbatch(["--gpus-per-socket=h100:4", "--sockets-per-node=2", "-N", "5"])
    assert r.gpus_by_type() == {"h100": 40}


def test_exclusive_with_or_without_a_value():
    """sbatch's --exclusive[=user|mcs|topo]: the planner writes --exclusive=topo on block partitions (found when the
    CLI's admission preflight refused the planner's own script)."""
    script = "#!/bin/sh\n#SBATCH --exclusive=topo\n#SBATCH --segment=2\ntrue\n"
    assert JobRequest.from_sbatch(["-N", "4", "--exclusive"], script=script).min_nodes == 4


@pytest.mark.parametrize("args,needle", [
    (["--gpus-per-socket=h100:4"], "needs --sockets-per-node"),
    (["--gpus=h100:4", "--gpus-per-task=1", "-n", "6"], "both with and without a type"),
    (["--gres=gpu:h100:8,gpu:2"], "both with and without a type"),
    (["--gpus=1", "-N", "3"], "fewer GPUs than nodes"),
])
def test_what_sbatch_itself_refuses(args, needle):
    """Measured in the lab: sbatch refuses these before the controller, so job_submit.lua never sees them."""
    with pytest.raises(RequestError, match=needle):
        JobRequest.from_sbatch(args)


def test_time_forms():
    assert JobRequest.from_sbatch(["-t", "90"]).time_limit == 90
    assert JobRequest.from_sbatch(["--time=0:30"]).time_limit == 1  # 30 s rounds up to a minute, as Slurm does
    assert JobRequest.from_sbatch(["--time=2-00:00:00"]).time_limit == 2880
    assert JobRequest.from_sbatch(["--time=UNLIMITED"]).time_limit == INFINITE


def test_command_line_signal_is_not_in_the_script():
    r = JobRequest.from_sbatch(["--signal=B:USR1@300", "--wrap=true"])
    assert "--signal" not in r.script and r.script == "#!/bin/sh\ntrue\n"


@pytest.mark.parametrize("args,needle", [
    (["-N", "zero"], "-N: expected a whole number"),
    (["--mem=lots"], "--mem: expected memory"),
    (["--time=soon"], "--time: expected a Slurm time"),
    (["--gpus=h100:x"], "--gpus: expected [type:]count"),
    (["-Z"], "-Z: unknown sbatch option"),
    (["--qos"], "--qos: needs a value"),
    (["--hold=yes"], "--hold: takes no value"),
])
def test_bad_options_name_the_option(args, needle):
    with pytest.raises(RequestError) as e:
        JobRequest.from_sbatch(args)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_bad_sbatch_line_names_the_line():
    with pytest.raises(RequestError, match="#SBATCH line 2"):
        JobRequest.from_sbatch([], script="#!/bin/sh\n#SBATCH --comment='unclosed\n")


def test_ntasks_per_gpu_becomes_a_task_count():
    """Measured in the lab: sbatch sends --ntasks-per-gpu as num_tasks = per GPU x GPUs."""
    r = JobRequest.from_sbatch(["--gpus=h100:2", "--ntasks-per-gpu=20", "-c", "2"])
    assert (r.num_tasks, r.cpus) == (40, 80)
