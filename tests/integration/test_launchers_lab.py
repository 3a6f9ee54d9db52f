"""The launcher templates with the REAL launchers: torchrun, `accelerate launch` and `deepspeed` from the cached
environment that scripts/launchers-env builds (torch CPU-only, gloo), in 2-host jobs of the real Slurm lab.

Each job's ranks run a real `init_process_group("gloo")` and an all_reduce over every rank, so a launch line the
launcher's parser refuses, a wrong node rank, a wrong process count or a rendezvous that never completes fails the
test. Every documented command form is run: `python train.py ...`, `train.py ...` (a script path) and
`python -m pkg.mod ...`, with an argument holding spaces and shell syntax that must arrive as one word.
The lab's hosts are processes on one machine, so the rendezvous is 127.0.0.1 on a free port (--var master_addr,
--var master_port) and the
jobs ask for 2 GPUs per host (torch CPU-only starts one process per planned GPU; the machine has few cores).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from slurmtools.planner.live import gather
from slurmtools.planner.plan import plan_job
from slurmtools.planner.request import JobRequest
from slurmtools.planner.templates import find_template, render
from slurmtools.resources import example_site
from slurmtools.site import load_site

from labtools import job_folder, launchers_env

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]
TAG = "two words $(touch PWNED) 'q' \"dq\""
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")


@pytest.fixture(scope="module")
def launchers() -> Path:
    return launchers_env()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The example site, except that multi-node jobs may take part of a host (allow_partial_nodes), so a 2-host job
    can have 2 GPUs per host."""
    src = example_site()
    text = src.read_text()
    fabric = (src.parent / "../../topology/example/fabric.toml").resolve()
    patched = text.replace('fabric = "../../topology/example/fabric.toml"', f'fabric = "{fabric}"').replace(
        "[partitions.gpu]\n", "[partitions.gpu]\nallow_partial_nodes = true\n")
    assert patched.count(str(fabric)) == 1 and "allow_partial_nodes = true" in patched, "example site changed shape"
    d = tmp_path_factory.mktemp("site")
    (d / "site.toml").write_text(patched)
    return load_site(d / "site.toml")


@pytest.fixture
def clean(lab):
    lab.sh("scancel --full -u labuser", check=False)
    yield
    lab.sh("scancel --full -u labuser", check=False)


def workdir(lab) -> Path:
    return job_folder(lab, "launch")


def free_port() -> int:
    """A port nothing listens on now. The templates' default (20000 + job id) can land on one of the lab's own
    slurmd ports, which all live on this one machine."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def forms(d: Path, out: Path) -> dict[str, tuple[str, ...]]:
    """The documented command forms, all running planner_lab/allreduce.py."""
    return {"python-script": ("python", str(d / "allreduce.py"), str(out), TAG),
            "script-path": (str(d / "allreduce.py"), str(out), TAG),
            "python-module": ("python", "-m", "allreduce", str(out), TAG)}


def submit(lab, site, launchers: Path, d: Path, template: str, command: tuple[str, ...], **kw) -> tuple[int, str]:
    """Plan from the lab's live state, render, sbatch as labuser; the launcher environment's bin/ first on PATH."""
    base = dict(user="labuser", account="vision", time_limit=600, name=f"launch-{template}", tier="production",
                nodes=2, gpus_per_node=2, command=command,
                env=(("PATH", f"{launchers}/bin:{lab.env['PATH']}"),),
                template_vars=(("master_addr", "127.0.0.1"), ("master_port", str(free_port()))))
    base.update(kw)
    state = gather(site, lab.backend())
    assert state.note == "" and state.view.live
    info = find_template(template, site.source)
    plan = plan_job(JobRequest(**base), site, state.view, info.shape, state.releases)
    script = render(plan, info, site.source)
    out = lab.sh(f"cd {d} && sbatch --parsable", user="labuser", input=script).stdout.strip()
    return int(out.split(";")[0]), script


def check_ranks(lab, d: Path, job: int, out: Path, name: str, nodes: int, per_node: int, launchers: Path) -> None:
    state = lab.wait_state(job, FINISHED, timeout=300)
    log_path = d / f"{name}-{job}.out"
    log = log_path.read_text() if log_path.exists() else "(no job output)"
    assert state == "COMPLETED", f"job {job} ({out.name}) ended {state}:\n{log[-6000:]}"
    recs = [json.loads(p.read_text()) for p in sorted(out.glob("rank-*.json"))]
    world = nodes * per_node
    assert sorted(r["rank"] for r in recs) == list(range(world)), log[-6000:]
    assert {r["world"] for r in recs} == {world}
    assert {r["sum"] for r in recs} == {world * (world + 1) / 2}  # the all_reduce reached every rank
    assert all(r["extra"] == [TAG] for r in recs)  # the hostile argument arrived as one word
    assert {r["SLURM_JOB_ID"] for r in recs} == {str(job)}
    assert all(r["executable"].startswith(str(launchers)) for r in recs)  # torch from the launcher environment
    by_node: dict[str, list[int]] = {}
    for r in recs:
        by_node.setdefault(r["SLURMD_NODENAME"], []).append(r["rank"])
        assert int(r["LOCAL_RANK"]) == r["rank"] % per_node
    assert len(by_node) == nodes
    # node ranks follow the plan's rank order (both hosts under one leaf: natural order), ranks consecutive per host
    assert [sorted(by_node[h]) for h in sorted(by_node)] == [
        list(range(i * per_node, (i + 1) * per_node)) for i in range(nodes)], by_node
    assert not (d / "PWNED").exists()


def run_forms(lab, site, launchers, template: str, flag: str) -> None:
    d = workdir(lab)
    jobs = []
    for form in ("python-script", "script-path", "python-module"):
        out = d / form
        out.mkdir()
        os.chmod(out, 0o777)
        command = forms(d, out)[form]
        job, script = submit(lab, site, launchers, d, template, command)
        # the launch line: a script path goes to the launcher as its script, anything else behind its no-python flag
        assert (flag in script) == (form != "script-path"), script
        jobs.append((job, out))
    for job, out in jobs:
        check_ranks(lab, d, job, out, f"launch-{template}", 2, 2, launchers)


def test_torchrun_real_launcher_every_command_form(lab, site, launchers, clean):
    """Static rendezvous with --node-rank from the plan's rank order, 2 hosts x 2 processes."""
    run_forms(lab, site, launchers, "torchrun", "--no-python")


def test_torchrun_real_c10d_rendezvous_on_one_host(lab, site, launchers, clean):
    """One host keeps torchrun's c10d rendezvous (no order to keep): the real c10d store and rendezvous run."""
    d = workdir(lab)
    out = d / "c10d"
    out.mkdir()
    os.chmod(out, 0o777)
    job, script = submit(lab, site, launchers, d, "torchrun", ("python", str(d / "allreduce.py"), str(out), TAG),
                         nodes=1, gpus_per_node=2)
    assert "--rdzv-backend=c10d" in script
    check_ranks(lab, d, job, out, "launch-torchrun", 1, 2, launchers)


def test_accelerate_real_launcher_every_command_form(lab, site, launchers, clean):
    """`accelerate launch --multi_gpu` per host: --num_processes is the total, --machine_rank from the rank order."""
    run_forms(lab, site, launchers, "accelerate", "--no_python")


def test_deepspeed_real_launcher_every_command_form(lab, site, launchers, clean):
    """`deepspeed --no_ssh --node_rank` per host with a hostfile each task writes: no ssh or pdsh anywhere."""
    run_forms(lab, site, launchers, "deepspeed", "--no_python")


def test_array_template_runs_each_sweep_entry_under_real_sbatch_and_srun(lab, site, clean):
    d = workdir(lab)
    out = d / "sweep"
    out.mkdir()
    os.chmod(out, 0o777)
    sweep = (("--lr", "3e-4"), ("--lr", TAG))
    state = gather(site, lab.backend())
    info = find_template("array", site.source)
    plan = plan_job(JobRequest(user="labuser", account="vision", time_limit=300, name="launch-array", gpus=1,
                               tier="production", sweep=sweep, command=("python3", str(d / "sweep_args.py"), str(out))),
                    site, state.view, info.shape, state.releases)
    job = int(lab.sh(f"cd {d} && sbatch --parsable", user="labuser", input=render(plan, info, site.source))
              .stdout.strip().split(";")[0])
    for i in range(len(sweep)):
        st = lab.wait_state(f"{job}_{i}", FINISHED, timeout=120)
        assert st == "COMPLETED", (st, [p.read_text() for p in d.glob("launch-array-*.out")])
    recs = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in out.glob("task-*.json")}
    assert recs == {0: {"args": ["--lr", "3e-4"], "ntasks": "1"}, 1: {"args": ["--lr", TAG], "ntasks": "1"}}
    assert not (d / "PWNED").exists()


def test_mpi_template_with_pmi2_under_real_srun(lab, site, clean):
    """`--var mpi=pmi2` (the MPI plugin both lab releases have): srun's PMI-2 server wires the tasks up and the
    ranks follow the plan's order, 2 per host. No MPI library is installed, so MPI_Init itself is not run."""
    d = workdir(lab)
    out = d / "mpi"
    out.mkdir()
    os.chmod(out, 0o777)
    state = gather(site, lab.backend())
    info = find_template("mpi", site.source)
    plan = plan_job(JobRequest(user="labuser", account="vision", time_limit=300, name="launch-mpi", nodes=2,
                               gpus_per_node=2, tier="production", template_vars=(("mpi", "pmi2"),),
                               command=("python3", str(d / "pmi_env.py"), str(out), TAG)),
                    site, state.view, info.shape, state.releases)
    script = render(plan, info, site.source)
    assert "--mpi=pmi2" in script and "--distribution=arbitrary" in script
    job = int(lab.sh(f"cd {d} && sbatch --parsable", user="labuser", input=script).stdout.strip().split(";")[0])
    st = lab.wait_state(job, FINISHED, timeout=120)
    log = "".join(p.read_text() for p in d.glob("launch-mpi-*.out"))
    assert st == "COMPLETED", log
    recs = [json.loads(p.read_text()) for p in out.glob("task-*.json")]
    assert sorted(int(r["SLURM_PROCID"]) for r in recs) == [0, 1, 2, 3], log
    assert all(r["PMI_RANK"] == r["SLURM_PROCID"] and r["PMI_SIZE"] == "4" and r["PMI_FD"] for r in recs), recs
    assert all(r["args"] == [TAG] for r in recs)
    by_host: dict[str, list[int]] = {}
    for r in recs:
        by_host.setdefault(r["SLURMD_NODENAME"], []).append(int(r["SLURM_PROCID"]))
    assert [sorted(by_host[h]) for h in sorted(by_host)] == [[0, 1], [2, 3]], by_host
    assert not (d / "PWNED").exists()
