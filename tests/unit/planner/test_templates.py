"""Templates: every bundled one renders, the #SBATCH lines are exactly the plan's, and hostile user strings
reach the program byte for byte without adding a directive or running anything. The rendered scripts are run
by bash with a stand-in `srun` (a unit test of quoting, not of Slurm; the lab tests run them under Slurm)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from slurmtools.errors import ConfigError
from slurmtools.planner.plan import plan_job
from slurmtools.planner.request import JobRequest
from slurmtools.planner.templates import directive_lines, find_template, list_templates, render, sh
from slurmtools.planner.view import from_fabric

HOSTILE = [
    "plain",
    "two words",
    "new\nline",
    "#SBATCH --qos=production",
    "x\n#SBATCH --qos=production\n",
    "$(touch PWNED)",
    "`touch PWNED`",
    "'; touch PWNED; echo '",
    '"; touch PWNED; echo "',
    "\\$HOME\\",
    "tab\there\rcr",
    "ünï\u2028code",
    "-",
    "",
    "*",
    "$'\\x41'",
]

# the stand-in srun drops its own options and execs the rest, like srun running one task
FAKE_SRUN = """#!/bin/bash
while [ $# -gt 0 ]; do case "$1" in --*) shift ;; *) break ;; esac; done
exec "$@"
"""
DUMP = [sys.executable, "-c", "import json,sys; json.dump(sys.argv[1:], open('argv.json','w'))"]
# the stand-in scontrol knows one thing, `show hostnames EXPR` (hostlist expansion, by the python-hostlist library)
FAKE_SCONTROL = f"""#!{sys.executable}
import sys, hostlist
assert sys.argv[1:3] == ["show", "hostnames"], sys.argv
print("\\n".join(hostlist.expand_hostlist(sys.argv[3])))
"""


def _plan(site, fabric, template, **kw):
    info = find_template(template, site.source)
    base = dict(command=tuple(DUMP) + tuple(HOSTILE), gpus=1, time_limit=3600, user="labuser", account="vision")
    base.update(kw)
    return info, plan_job(JobRequest(**base), site, from_fabric(fabric), info.shape)


def _run(script: str, tmp_path: Path, extra_env=None) -> subprocess.CompletedProcess:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    srun = bindir / "srun"
    srun.write_text(FAKE_SRUN)
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    scontrol = bindir / "scontrol"
    scontrol.write_text(FAKE_SCONTROL)
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IEXEC)
    path = tmp_path / "job.sh"
    path.write_text(script)
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "SLURM_JOB_ID": "4242", "SLURM_JOB_NUM_NODES": "1",
           "SLURM_ARRAY_TASK_ID": "0", "HOME": str(tmp_path)}
    env.update(extra_env or {})
    return subprocess.run(["bash", str(path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


def test_bundled_templates_are_listed(site):
    names = {t.name for t in list_templates(site.source)}
    assert {"python", "torchrun", "accelerate", "deepspeed", "mpi", "array"} <= names
    assert "_base" not in names


@pytest.mark.parametrize("tier", ["production", "scavenger"])
def test_hostile_arguments_reach_the_program_unchanged(site, fabric, tmp_path, tier):
    info, plan = _plan(site, fabric, "python", tier=tier,
                       env=(("USER_VALUE", "$(touch PWNED)\n#SBATCH --x"),), name="safe-name")
    script = render(plan, info, site.source)
    assert directive_lines(script) == ["#SBATCH " + d.text for d in plan.directives]
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    r = _run(script, tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "argv.json").read_text()) == HOSTILE
    assert not (tmp_path / "PWNED").exists()


def test_hostile_env_value_is_exported_verbatim(site, fabric, tmp_path):
    value = "a'b\"c $(touch PWNED) `touch PWNED`\n#SBATCH --qos=production"
    info, plan = _plan(site, fabric, "python", env=(("USER_VALUE", value),),
                       command=(sys.executable, "-c", "import os; open('env.txt','w').write(os.environ['USER_VALUE'])"))
    script = render(plan, info, site.source)
    assert _run(script, tmp_path).returncode == 0
    assert (tmp_path / "env.txt").read_text() == value
    assert not (tmp_path / "PWNED").exists()
    assert len(directive_lines(script)) == len(plan.directives)


def test_sweep_entries_are_quoted_and_selected_by_task_id(site, fabric, tmp_path):
    sweep = (("--lr", "0.1"), tuple(HOSTILE))
    info, plan = _plan(site, fabric, "array", sweep=sweep, command=tuple(DUMP))
    script = render(plan, info, site.source)
    assert "#SBATCH --array=0-1" in script
    _run(script, tmp_path, {"SLURM_ARRAY_TASK_ID": "1"})
    assert json.loads((tmp_path / "argv.json").read_text()) == HOSTILE
    _run(script, tmp_path, {"SLURM_ARRAY_TASK_ID": "0"})
    assert json.loads((tmp_path / "argv.json").read_text()) == ["--lr", "0.1"]
    assert _run(script, tmp_path, {"SLURM_ARRAY_TASK_ID": "7"}).returncode == 2
    assert not (tmp_path / "PWNED").exists()


def test_torchrun_launcher_and_hostile_template_vars(site, fabric, tmp_path):
    # the launcher stand-in prints its argv; master_addr is a hostile template variable
    launcher = f"{sys.executable} -c \"import json,sys,os; json.dump([os.environ['MASTER_ADDR']]+sys.argv[1:], open('argv.json','w'))\""
    info, plan = _plan(site, fabric, "torchrun", gpus=16, tier="production", command=("train.py", "$(touch PWNED)"),
                       template_vars=(("torchrun", launcher), ("master_addr", "127.0.0.1\n#SBATCH --x $(touch PWNED)")))
    script = render(plan, info, site.source)
    assert directive_lines(script) == ["#SBATCH " + d.text for d in plan.directives]
    # the job got gpu05 and gpu03 (leaf2 and leaf1): rank order puts leaf1's host first; this task runs on gpu05
    r = _run(script, tmp_path, {"SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "gpu[03,05]",
                                "SLURMD_NODENAME": "gpu05"})
    assert r.returncode == 0, r.stderr
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[0] == "127.0.0.1\n#SBATCH --x $(touch PWNED)"
    assert argv[1:] == ["--nnodes=2", "--nproc-per-node=8", f"--master-addr={argv[0]}",
                        f"--master-port={20000 + 4242 % 20000}", "--node-rank=1", "train.py", "$(touch PWNED)"]
    assert not (tmp_path / "PWNED").exists()


def test_torchrun_rank_zero_host_is_the_rendezvous_and_one_host_jobs_keep_c10d(site, fabric, tmp_path):
    launcher = f"{sys.executable} -c \"import json,sys,os; json.dump([os.environ['MASTER_ADDR']]+sys.argv[1:], open('argv.json','w'))\""
    info, plan = _plan(site, fabric, "torchrun", gpus=16, tier="production", command=("train.py",),
                       template_vars=(("torchrun", launcher),))
    env = {"SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "gpu[16,01]", "SLURMD_NODENAME": "gpu01"}
    assert _run(render(plan, info, site.source), tmp_path, env).returncode == 0
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[0] == "gpu01" and "--node-rank=0" in argv  # leaf1 before leaf4
    info, plan = _plan(site, fabric, "torchrun", gpus=8, tier="production", command=("train.py",),
                       template_vars=(("torchrun", launcher),))
    assert plan.rank_groups == ()  # one host: torchrun's own c10d rendezvous, no order to keep
    assert "--rdzv-backend=c10d" in render(plan, info, site.source)


def test_accelerate_passes_machine_rank_per_host(site, fabric, tmp_path):
    info, plan = _plan(site, fabric, "accelerate", gpus=16, tier="production", command=("train.py", "a b"),
                       template_vars=(("accelerate", ARGV_LAUNCHER), ("master_addr", "10.0.0.1")))
    r = _run(render(plan, info, site.source), tmp_path, {"SLURM_JOB_NUM_NODES": "2", "SLURM_NODEID": "0",
                                                          "SLURM_JOB_NODELIST": "gpu[03,05]",
                                                          "SLURMD_NODENAME": "gpu05"})
    assert r.returncode == 0, r.stderr
    argv = json.loads((tmp_path / "argv.json").read_text())
    # --num_processes is the job's total; static rendezvous (no --rdzv_backend=c10d), so --machine_rank holds
    assert argv == ["--multi_gpu", "--num_machines=2", "--num_processes=16", "--main_process_ip=10.0.0.1",
                    f"--main_process_port={20000 + 4242}", "--machine_rank=1", "train.py", "a b"]


def test_accelerate_on_one_gpu_does_not_ask_for_multi_gpu(site, fabric, tmp_path):
    # accelerate refuses --multi_gpu with fewer than 2 processes
    info, plan = _plan(site, fabric, "accelerate", gpus=1, command=("train.py",),
                       template_vars=(("accelerate", ARGV_LAUNCHER),))
    assert _run(render(plan, info, site.source), tmp_path, {"SLURM_NODEID": "0"}).returncode == 0
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert "--multi_gpu" not in argv and "--num_processes=1" in argv and "--machine_rank=0" in argv


# The user's documented forms. A first word that is a script path is handed to the launcher as its script (the
# launcher's Python runs it); anything else runs as given behind the launcher's no-python flag.
FORMS = {
    "python-script": (("python", "train.py", "--lr", "3e-4"), True),
    "script-path": (("train.py", "--lr", "3e-4"), False),
    "python-module": (("python", "-m", "pkg.mod", "--lr", "3e-4"), True),
    "hostile": (("python", "train.py") + tuple(HOSTILE), True),
}
NO_PYTHON = {"torchrun": "--no-python", "accelerate": "--no_python", "deepspeed": "--no_python"}
ARGV_LAUNCHER = f"{sys.executable} -c \"import json,sys; json.dump(sys.argv[1:], open('argv.json','w'))\""


@pytest.mark.parametrize("tier", ["production", "scavenger"])  # scavenger: through the checkpoint wiring
@pytest.mark.parametrize("template", sorted(NO_PYTHON))
@pytest.mark.parametrize("form", sorted(FORMS))
def test_launcher_templates_pass_each_command_form(site, fabric, tmp_path, template, form, tier):
    command, no_python = FORMS[form]
    info, plan = _plan(site, fabric, template, gpus=16, tier=tier, command=command,
                       template_vars=((template, ARGV_LAUNCHER),))
    script = render(plan, info, site.source)
    r = _run(script, tmp_path, {"SLURM_JOB_NUM_NODES": "2", "SLURM_NODEID": "1", "SLURM_JOB_NODELIST": "gpu[03,05]",
                                "SLURMD_NODENAME": "gpu05", "TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    argv = json.loads((tmp_path / "argv.json").read_text())
    # the command arrives last and word for word (each hostile string is still one argument)
    assert argv[len(argv) - len(command):] == list(command)
    opts = argv[:len(argv) - len(command)]
    assert all(o.startswith("--") for o in opts), opts  # nothing of the command leaked in front
    assert (NO_PYTHON[template] in opts) == no_python
    assert not (tmp_path / "PWNED").exists()


def test_deepspeed_runs_one_launcher_per_host_without_ssh(site, fabric, tmp_path):
    info, plan = _plan(site, fabric, "deepspeed", gpus=16, tier="production", command=("train.py",),
                       template_vars=(("deepspeed", ARGV_LAUNCHER), ("master_addr", "10.0.0.1")))
    script = render(plan, info, site.source)
    assert directive_lines(script) == ["#SBATCH " + d.text for d in plan.directives]
    # the job got gpu05 and gpu03 (leaf2 and leaf1): rank order puts leaf1's host first; this task runs on gpu05
    r = _run(script, tmp_path, {"SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "gpu[03,05]",
                                "SLURMD_NODENAME": "gpu05", "TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    argv = json.loads((tmp_path / "argv.json").read_text())
    hostfile = tmp_path / "slurmtools-deepspeed-hosts-4242-gpu05"
    assert argv == ["--no_ssh", "--num_nodes=2", "--num_gpus=8", "--master_addr=10.0.0.1",
                    f"--master_port={20000 + 4242}", "--no_local_rank", f"--hostfile={hostfile}", "--node_rank=1",
                    "train.py"]
    assert hostfile.read_text() == "gpu03 slots=8\ngpu05 slots=8\n"
    # one host, no rank groups: the allocation's own order
    info, plan = _plan(site, fabric, "deepspeed", gpus=8, command=("train.py",),
                       template_vars=(("deepspeed", ARGV_LAUNCHER),))
    r = _run(render(plan, info, site.source), tmp_path, {"SLURM_JOB_NODELIST": "gpu07", "SLURMD_NODENAME": "gpu07",
                                                          "TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert "--master_addr=gpu07" in argv and "--node_rank=0" in argv and "--no_python" not in argv


def test_mpi_renders_one_task_per_gpu(site, fabric):
    info, plan = _plan(site, fabric, "mpi", gpus=16, tier="production", template_vars=(("mpi", "pmix"),))
    script = render(plan, info, site.source)
    assert "#SBATCH --ntasks-per-node=8" in script and "#SBATCH --gpu-bind=closest" in script
    assert "srun --kill-on-bad-exit=1 --distribution=arbitrary --mpi=pmix " in script
    assert "export SLURM_HOSTFILE=" in script  # the rank order (groups: NVLink domain or leaf switch)


def test_site_template_path_overrides_and_unquoted_multiline_values_are_refused(site, fabric, tmp_path, monkeypatch):
    d = tmp_path / "tpl"
    d.mkdir()
    (d / "python.sbatch.j2").write_text(
        '{#- slurmtools: {"description": "site override", "tasks": "per-node", "multi_node": false} -#}\n'
        '{% extends "_base.sbatch.j2" %}{% block launch %}echo {{ vars.msg }}{% endblock %}\n')
    monkeypatch.setenv("SLURMTOOLS_TEMPLATE_PATH", str(d))
    info = find_template("python", site.source)
    assert info.origin == "env" and info.description == "site override"
    plan = plan_job(JobRequest(command=("x",), gpus=1, user="labuser", template_vars=(("msg", "hi\n#SBATCH --x"),)),
                    site, from_fabric(fabric), info.shape)
    with pytest.raises(ConfigError, match="line break reached the script unquoted"):
        render(plan, info, site.source)


def test_bad_template_metadata_names_the_file(site, tmp_path, monkeypatch):
    d = tmp_path / "tpl"
    d.mkdir()
    (d / "bad.sbatch.j2").write_text('{#- slurmtools: {"tasks": "per-core"} -#}\n')
    monkeypatch.setenv("SLURMTOOLS_TEMPLATE_PATH", str(d))
    with pytest.raises(ConfigError, match=r"bad\.sbatch\.j2: line 1: tasks"):
        list_templates(site.source)


def test_unknown_template_lists_known_ones(site):
    with pytest.raises(ConfigError, match="--template: unknown template 'nope' \\(known: accelerate, array"):
        find_template("nope", site.source)


def test_sh_never_emits_a_line_break():
    for s in HOSTILE:
        q = sh(s)
        assert "\n" not in q and "\r" not in q
        out = subprocess.run(["bash", "-c", f"printf %s {q}"], capture_output=True).stdout
        assert out.decode("utf-8") == s
