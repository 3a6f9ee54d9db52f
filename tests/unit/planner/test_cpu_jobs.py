"""CPU jobs (`--gpus 0`, `--cpus N`): the request's checks, the plan on a site with CPU partitions (CPU-only hosts
and an overlay of the GPU hosts capped per host), the one-line refusal on a site without one, the rendered
scripts (no GPU line), and the CLI. The test site is tests/data/sites/cpu: 4 GPU hosts, 2 CPU-only hosts."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from slurmtools.errors import ConfigError
from slurmtools.planner.explain import plan_dict, plan_text
from slurmtools.planner.plan import plan_job
from slurmtools.planner.request import JobRequest
from slurmtools.planner.templates import directive_lines, find_template, render
from slurmtools.planner.view import from_fabric
from slurmtools.resources import example_site
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric

CPU_SITE = Path(__file__).resolve().parents[2] / "data" / "sites" / "cpu" / "site.toml"
GPU_OPTIONS = ("gpus-per-node", "cpus-per-gpu", "mem-per-gpu", "gres-flags", "gpu-bind", "gres", "gpus")


@pytest.fixture(scope="module")
def cpu_site():
    return load_site(CPU_SITE)


@pytest.fixture(scope="module")
def cpu_view(cpu_site):
    return from_fabric(load_fabric(cpu_site.fabric_path))


def req(**kw) -> JobRequest:
    base = dict(command=("python", "prep.py"), user="alice", time_limit=3600)
    base.update(kw)
    return JobRequest(**base)


def plan(site, view, template="python", **kw):
    info = find_template(template, site.source)
    return plan_job(req(**kw), site, view, info.shape)


def opts(p) -> dict[str, str | None]:
    return {d.option: d.value for d in p.directives}


# ------------------------------------------------------------------------------------------------ request
def test_gpus_zero_or_cpus_alone_make_a_cpu_job():
    assert req(gpus=0).cpu_job and req(cpus=4).cpu_job and req(nodes=2, cpus=4).cpu_job
    assert not req(gpus=1).cpu_job and not req(nodes=2).cpu_job


@pytest.mark.parametrize("field,value,option", [("gpus_per_node", 4, "--gpus-per-node"),
                                                ("gpu_type", "h100", "--gpu-type"), ("tp_size", 2, "--tp-size")])
def test_gpu_options_are_refused_for_a_cpu_job(field, value, option):
    with pytest.raises(ConfigError, match=f"^request: {option}: a CPU job .* has no GPUs; leave it out$"):
        req(gpus=0, **{field: value})


@pytest.mark.parametrize("field,option", [("cpus", "--cpus"), ("ntasks", "--ntasks"), ("mem_mb", "--mem")])
def test_cpu_options_are_refused_for_a_gpu_job(field, option):
    with pytest.raises(ConfigError, match=f"^request: {option}: is for CPU jobs"):
        req(gpus=8, **{field: 4})


@pytest.mark.parametrize("kw,match", [
    (dict(gpus=0, ntasks=3, nodes=2), "--ntasks: 3 tasks cannot be spread evenly over 2 nodes"),
    (dict(gpus=0, ntasks=1, nodes=2), "--ntasks: 1 task"),
    (dict(gpus=0, mem_mb=0), "--mem: must be a whole number >= 1"),
    (dict(cpus=0, ntasks=2), "--cpus: must be a whole number >= 1"),
    (dict(gpus=-1), "--gpus: must be a whole number >= 1, or 0 for a CPU job"),
])
def test_cpu_shape_errors_name_the_option(kw, match):
    with pytest.raises(ConfigError, match=match):
        req(**kw)


# ------------------------------------------------------------------------------------------------ planner
def test_one_task_goes_to_the_first_cpu_partition_with_no_gpu_directive(cpu_site, cpu_view):
    p = plan(cpu_site, cpu_view, gpus=0, cpus=8)
    assert p.cpu_job and p.partition == "cpu" and p.node_type == "epyc" and p.hosts == ("cpu01",)
    assert [d.text for d in p.directives] == [
        "--job-name=job", "--partition=cpu", "--qos=standard", "--account=vision", "--time=01:00:00", "--nodes=1",
        "--ntasks-per-node=1", "--cpus-per-task=8", "--mem=32000M", "--output=%x-%j.out", "--requeue",
        "--open-mode=append", "--signal=B:URG@300"]
    assert not any(k.startswith("NCCL") for k, _ in p.env)
    assert ("SRUN_CPUS_PER_TASK", "8") in p.env  # srun (22.05+) does not take --cpus-per-task from the job
    assert "a CPU job (no GPUs)" in p.directive("partition").why
    assert "512000 MB x 8/128" in p.directive("mem").why
    text = plan_text(p)
    assert text.startswith("plan: CPU job (no GPUs): 1 x 1 task(s) x 8 CPU(s)") and "GB/s" not in text
    d = plan_dict(p)
    assert d["cpu_job"] is True and d["cpus_per_task"] == 8 and "quality" not in d and "gpu_type" not in d
    assert d["launcher_procs_per_node"] is None


def test_mem_given_is_used_and_checked(cpu_site, cpu_view):
    assert opts(plan(cpu_site, cpu_view, gpus=0, mem_mb=4096))["mem"] == "4096M"
    with pytest.raises(ConfigError, match="--mem: 600000 MB per node, but one epyc host of partition cpu has 512000"):
        plan(cpu_site, cpu_view, gpus=0, mem_mb=600000)


def test_many_tasks_fill_the_fewest_hosts_under_one_leaf(cpu_site, cpu_view):
    p = plan(cpu_site, cpu_view, "mpi", cpus=16, ntasks=16)
    o = opts(p)
    assert (o["nodes"], o["ntasks-per-node"], o["cpus-per-task"]) == ("2", "8", "16")
    assert o["switches"] == "1@00:02:00" and "talk (--comm allreduce)" in p.directive("switches").why
    assert p.hosts == ("cpu01", "cpu02") and p.rank_groups == ("cpu[01-02]",)


def test_independent_tasks_spread_freely(cpu_site, cpu_view):
    p = plan(cpu_site, cpu_view, "mpi", cpus=16, ntasks=16, comm="independent")
    assert "switches" not in opts(p) and not p.rank_groups
    assert any("--comm independent" in n for n in p.notes)


def test_overlay_partition_caps_cpus_per_host_and_says_so(cpu_site, cpu_view):
    p = plan(cpu_site, cpu_view, "mpi", cpus=8, ntasks=8, partition="gpucpu")
    o = opts(p)
    assert (o["nodes"], o["ntasks-per-node"], o["mem"]) == ("2", "4", f"{2000000 * 32 // 112}M")
    assert "max_cpus_per_node" in p.directive("nodes").why
    assert any("overlays GPU hosts" in n and "CPU-only hosts: cpu" in n for n in p.notes)
    with pytest.raises(ConfigError, match="--cpus: 40 CPUs per task, but partition gpucpu gives a job at most 32"):
        plan(cpu_site, cpu_view, cpus=40, partition="gpucpu")


def test_gpu_partition_named_for_a_cpu_job_is_refused(cpu_site, cpu_view):
    with pytest.raises(ConfigError, match=r"^request: --partition: partition gpu has no CPU-only use: it holds h100 "
                                          r"GPUs for GPU jobs \(CPU partitions: cpu, gpucpu\)$"):
        plan(cpu_site, cpu_view, gpus=0, partition="gpu")


def test_site_without_cpu_partition_refuses_in_one_line(site, fabric):
    with pytest.raises(ConfigError) as exc:
        plan(site, from_fabric(fabric), gpus=0, cpus=8, user="labuser")
    assert str(exc.value) == ("request: --gpus: site example has no CPU partition (partitions: gpu: h100 GPUs only); "
                              "ask your admins for one, or request GPUs")


def test_gpu_job_never_lands_on_a_cpu_partition(cpu_site, cpu_view):
    with pytest.raises(ConfigError, match="--partition: partition cpu is a CPU partition"):
        plan(cpu_site, cpu_view, gpus=8, partition="cpu")
    # a CPU default partition takes bare jobs; a GPU job without --partition still goes to the GPU partition
    parts = {n: replace(p, default=(n == "cpu")) for n, p in cpu_site.partitions.items()}
    p = plan(replace(cpu_site, partitions=parts), cpu_view, gpus=8)
    assert p.partition == "gpu" and not p.cpu_job


def test_tier_time_and_node_limits_apply_gpu_limits_do_not(cpu_site, cpu_view):
    with pytest.raises(ConfigError, match="--tier: 3 nodes is over tier standard's 2 nodes per job"):
        plan(cpu_site, cpu_view, "mpi", gpus=0, nodes=3, ntasks=3, partition="gpucpu")
    with pytest.raises(ConfigError, match="--tier: 5h is over partition gpucpu's 4h time limit"):
        plan(cpu_site, cpu_view, gpus=0, partition="gpucpu", time_limit=5 * 3600)
    p = plan(cpu_site, cpu_view, gpus=0, tier="production")
    assert p.tier == "production" and not p.preemptible
    assert not {"requeue", "signal", "open-mode"} & set(opts(p))
    assert "only its time and node limits apply" in p.directive("qos").why


def test_live_view_predicts_hosts_with_free_cpus(cpu_site, cpu_view):
    hosts = dict(cpu_view.hosts)
    hosts["cpu01"] = hosts["cpu01"]._replace(cpus_free=4)
    p = plan(cpu_site, replace(cpu_view, hosts=hosts, live=True), gpus=0, cpus=8)
    assert p.hosts == ("cpu02",) and p.starts_now
    hosts["cpu02"] = hosts["cpu02"]._replace(cpus_free=4)
    p = plan(cpu_site, replace(cpu_view, hosts=hosts, live=True), gpus=0, cpus=8)
    assert not p.starts_now and p.start_in is None and any("must queue" in n for n in p.notes)


# ------------------------------------------------------------------------------------------------ templates
@pytest.mark.parametrize("template,kw,launch", [
    ("python", dict(gpus=0, cpus=4), "srun --ntasks=1 --kill-on-bad-exit=1 python prep.py"),
    ("mpi", dict(cpus=16, ntasks=16), "srun --kill-on-bad-exit=1 --distribution=arbitrary python prep.py"),
    ("array", dict(gpus=0, sweep=(("--shard", "0"), ("--shard", "1"))),
     "srun --ntasks=1 --kill-on-bad-exit=1 python prep.py \"$@\""),
])
def test_cpu_plans_render_without_gpu_lines(cpu_site, cpu_view, template, kw, launch):
    info = find_template(template, cpu_site.source)
    p = plan_job(req(tier="production", **kw), cpu_site, cpu_view, info.shape)
    script = render(p, info, cpu_site.source)
    sbatch = directive_lines(script)
    assert sbatch == ["#SBATCH " + d.text for d in p.directives]
    assert not [ln for ln in sbatch if any(f"--{g}" in ln for g in GPU_OPTIONS)]
    assert "NCCL" not in script and "GPUs" not in script
    assert "# Written by slurmtools from a plan: CPU job," in script
    assert script.rstrip().splitlines()[-1] == launch


@pytest.mark.parametrize("template", ["accelerate", "deepspeed"])
def test_gpu_launchers_are_refused_for_cpu_jobs(cpu_site, cpu_view, template):
    with pytest.raises(ConfigError, match=f"--template: template {template} starts one launcher per host"):
        plan(cpu_site, cpu_view, template, gpus=0)


def test_torchrun_starts_the_hosts_tasks_as_its_processes(cpu_site, cpu_view):
    info = find_template("torchrun", cpu_site.source)
    p = plan_job(req(cpus=16, ntasks=8, nodes=2, tier="production"), cpu_site, cpu_view, info.shape)
    o = opts(p)
    assert (o["nodes"], o["ntasks-per-node"], o["cpus-per-task"]) == ("2", "1", "64")
    assert p.procs_per_node == 4 and ("SRUN_CPUS_PER_TASK", "64") in p.env
    assert plan_dict(p)["launcher_procs_per_node"] == 4
    assert "plan: CPU job (no GPUs): 2 x 1 torchrun starting 4 process(es), 64 CPU(s)" in plan_text(p)
    script = render(p, info, cpu_site.source)
    assert " --nnodes=\"$SLURM_JOB_NUM_NODES\" --nproc-per-node=4 " in script and "NCCL" not in script
    assert not [ln for ln in directive_lines(script) if any(f"--{g}" in ln for g in GPU_OPTIONS)]


def test_one_task_templates_refuse_many_tasks(cpu_site, cpu_view):
    with pytest.raises(ConfigError, match="--ntasks: template python starts one task, but the job has 4"):
        plan(cpu_site, cpu_view, "python", gpus=0, ntasks=4)


# ------------------------------------------------------------------------------------------------ CLI
def _cli(*args):
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "SLURMTOOLS_TEMPLATE_PATH", "SLURMTOOLS_SITE")}
    return subprocess.run([sys.executable, "-m", "slurmtools", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_cli_plans_a_cpu_job_on_the_cpu_site():
    p = _cli("plan", "--idle", "--site", str(CPU_SITE), "--user", "alice", "--gpus", "0", "--cpus", "8", "--mem",
             "16G", "--", "python", "prep.py")
    assert p.returncode == 0, p.stderr
    assert "plan: CPU job (no GPUs): 1 x 1 task(s) x 8 CPU(s) and 16384 MB per host (epyc) on partition cpu" in p.stdout
    assert "#SBATCH --cpus-per-task=8\n#SBATCH --mem=16384M\n" in p.stdout and "--gpus-per-node" not in p.stdout


def test_cli_cpu_job_on_the_example_site_is_refused_in_one_line():
    p = _cli("plan", "--idle", "--site", str(example_site()), "--user", "labuser", "--gpus", "0", "--cpus", "8",
             "--", "python", "prep.py")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == [
        "slurmtools: error: request: --gpus: site example has no CPU partition (partitions: gpu: h100 GPUs only); "
        "ask your admins for one, or request GPUs"]


def test_cli_bad_mem_names_the_option():
    p = _cli("plan", "--idle", "--site", str(CPU_SITE), "--user", "alice", "--gpus", "0", "--mem", "lots", "--",
             "python", "prep.py")
    assert p.returncode == 2 and "--mem: expected memory like" in p.stderr and len(p.stderr.strip().splitlines()) == 1
