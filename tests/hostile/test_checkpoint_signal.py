"""Class 8 (pure and bash parts): the checkpoint warning signal is a site and per-job choice from a short list,
with a default (URG) that the launchers and NCCL leave alone; a bad choice is refused in one line naming the field
or option; the plan, the script, the wiring, the library and the admission policy all agree on the chosen signal.
The lab half (the signal reaching the training processes under every template) is test_checkpoint_signal_lab.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings, strategies as st

from slurmtools.checkpoint import Checkpointer, CheckpointError, wiring_path
from slurmtools.errors import ConfigError
from slurmtools.planner.plan import TemplateShape, plan_job
from slurmtools.planner.request import JobRequest, RequestError
from slurmtools.planner.templates import find_template, launcher_guard, render
from slurmtools.planner.view import from_fabric
from slurmtools.policy.builtin import CheckpointSignal
from slurmtools.policy.base import PolicyContext
from slurmtools.policy.request import JobRequest as PolicyRequest
from slurmtools.resources import example_site
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric
from slurmtools.warning_signals import DEFAULT, USABLE, normalize

TORCHRUN = TemplateShape("torchrun", tasks="per-node", multi_node=True)


@pytest.fixture(scope="module")
def site():
    return load_site(example_site())


@pytest.fixture(scope="module")
def view(site):
    return from_fabric(load_fabric(site.fabric_path))


def req(**kw):
    base = dict(command=("python", "train.py"), time_limit=3600, user="labuser", account="vision", gpus=8,
                tier="scavenger")
    base.update(kw)
    return JobRequest(**base)


def site_with(tmp_path, line: str):
    src = example_site()
    text = src.read_text().replace('fabric = "../../topology/example/fabric.toml"',
                                   f'fabric = "{(src.parent / "../../topology/example/fabric.toml").resolve()}"')
    text = text.replace("[tiers.scavenger]\n", f"[tiers.scavenger]\n{line}\n", 1)
    p = tmp_path / "site.toml"
    p.write_text(text)
    return p


def test_the_default_is_urg_everywhere(site, view):
    assert DEFAULT == "URG" and USABLE[0] == "URG"
    assert {t.checkpoint_signal for t in site.tiers.values()} == {"URG"}
    p = plan_job(req(), site, view, TORCHRUN)
    assert p.checkpoint_signal == "URG" and p.directive("signal").value == "B:URG@120"
    assert ("SLURMTOOLS_CHECKPOINT_SIGNAL", "URG") in p.env
    assert "tier scavenger's checkpoint_signal" in p.directive("signal").why


@pytest.mark.parametrize("given_, want", [("USR2", "USR2"), ("sigusr1", "USR1"), ("SIGURG", "URG")])
def test_a_job_chooses_its_own_signal(site, view, given_, want):
    p = plan_job(req(checkpoint_signal=given_), site, view, TORCHRUN)
    assert p.directive("signal").value == f"B:{want}@120"
    assert ("SLURMTOOLS_CHECKPOINT_SIGNAL", want) in p.env
    assert "--checkpoint-signal" in p.directive("signal").why


@pytest.mark.parametrize("bad", ["TERM", "INT", "CONT", "KILL", "HUP", "ALRM", "USR3", "", "10", "USR1;rm -rf /"])
def test_a_bad_job_signal_is_refused_naming_the_option(bad):
    with pytest.raises(RequestError) as e:
        req(checkpoint_signal=bad)
    msg = str(e.value)
    assert "--checkpoint-signal" in msg and "not a usable checkpoint signal" in msg and "\n" not in msg


@pytest.mark.parametrize("bad", ["TERM", "CONT", "INT", "WINCH"])
def test_a_bad_site_signal_is_refused_naming_file_and_key(tmp_path, bad):
    p = site_with(tmp_path, f'checkpoint_signal = "{bad}"')
    with pytest.raises(ConfigError) as e:
        load_site(p)
    msg = str(e.value)
    assert str(p) in msg and "tiers.scavenger.checkpoint_signal" in msg and "usable: URG, USR1, USR2" in msg


def test_a_site_may_choose_per_tier(tmp_path, view):
    s = load_site(site_with(tmp_path, 'checkpoint_signal = "SIGUSR2"'))
    assert s.tiers["scavenger"].checkpoint_signal == "USR2" and s.tiers["standard"].checkpoint_signal == "URG"
    assert plan_job(req(), s, view, TORCHRUN).directive("signal").value == "B:USR2@120"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=12))
def test_any_name_is_either_one_usable_signal_or_refused(name):
    n = normalize(name)
    if n is None:
        with pytest.raises(RequestError, match="--checkpoint-signal"):
            req(checkpoint_signal=name)
    else:
        assert n in USABLE and name.strip().upper().removeprefix("SIG") == n


@pytest.mark.parametrize("sig, guarded", [(None, False), ("USR1", True), ("USR2", True)])
def test_launchers_are_told_to_ignore_a_signal_that_would_kill_them(site, view, sig, guarded):
    """torchrun/accelerate/deepspeed have no handler for USR1/USR2 and srun signals every process of the step:
    the launch line ignores it (inherited across exec) so only the training process, which handles it, acts."""
    for name in ("torchrun", "accelerate", "deepspeed"):
        info = find_template(name)
        p = plan_job(req(checkpoint_signal=sig, nodes=2, gpus_per_node=8, gpus=None), site, view, info.shape)
        script = render(p, info)
        assert (f'trap "" {sig}; ' in script) == guarded, (name, script)
        assert launcher_guard(p) == (f'trap "" {sig}; ' if guarded else "")
    for name in ("mpi", "python"):  # the program is srun's task itself: nothing in between to protect
        info = find_template(name)
        p = plan_job(req(checkpoint_signal=sig), site, view, info.shape)
        assert 'trap ""' not in render(p, info)


def test_the_policy_accepts_any_usable_signal_and_refuses_others(site):
    pol = CheckpointSignal(site, None)
    ctx = PolicyContext(site=site, fabric=None, usage=None, month="")
    for sig in USABLE + ("SIGUSR2", "23", "12"):
        r = PolicyRequest.from_sbatch(["-q", "scavenger"], script=f"#!/bin/bash\n#SBATCH --signal=B:{sig}@60\nx\n")
        assert pol.check(r, ctx).action == "allow", sig
    for sig in ("TERM", "9", "CONT"):
        r = PolicyRequest.from_sbatch(["-q", "scavenger"], script=f"#!/bin/bash\n#SBATCH --signal=B:{sig}@60\nx\n")
        d = pol.check(r, ctx)
        assert d.action == "deny" and "--signal=B:URG@120" in d.message, sig


def test_the_library_refuses_a_bad_signal_in_its_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMTOOLS_CHECKPOINT_SIGNAL", "TERM")
    with pytest.raises(CheckpointError, match="SLURMTOOLS_CHECKPOINT_SIGNAL: 'TERM' is not a usable"):
        Checkpointer(tmp_path, install=False)
    monkeypatch.setenv("SLURMTOOLS_CHECKPOINT_SIGNAL", "sigusr2")
    assert Checkpointer(tmp_path, install=False).warning_signal == "USR2"
    monkeypatch.delenv("SLURMTOOLS_CHECKPOINT_SIGNAL")
    assert Checkpointer(tmp_path, install=False).warning_signal == "URG"


# ---- the bash wiring, outside Slurm (no SLURM_JOB_ID, so no scancel: the direct child gets the signal)

PROG = """
import os, signal, sys, time, pathlib
out = pathlib.Path(sys.argv[1]); got = []
for name in ("URG", "USR1", "USR2"):
    signal.signal(getattr(signal, "SIG" + name), lambda s, f: got.append(signal.Signals(s).name))
(out / "ready").touch()
end = time.time() + 20
while len(got) < int(sys.argv[2]) and time.time() < end:
    time.sleep(0.02)
(out / "got").write_text(" ".join(got))
"""


def run_wired(tmp_path, chosen: str | None, send: list[int], expect: int):
    (tmp_path / "prog.py").write_text(PROG)
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\nsource {wiring_path()}\nslurmtools_run {sys.executable} {tmp_path}/prog.py "
                      f"{tmp_path} {expect}\necho rc=$?\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env["SLURMTOOLS_FORWARD_SIGNAL"] = "1"
    if chosen:
        env["SLURMTOOLS_CHECKPOINT_SIGNAL"] = chosen
    p = subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.time() + 20
    while not (tmp_path / "ready").exists() and time.time() < end:
        time.sleep(0.02)
    for s in send:
        p.send_signal(s)
        time.sleep(0.3)
    out, err = p.communicate(timeout=40)
    return (tmp_path / "got").read_text().split(), out, err


def test_wiring_passes_on_the_default_urg(tmp_path):
    got, out, err = run_wired(tmp_path, None, [signal.SIGURG], 1)
    assert got == ["SIGURG"] and out.strip() == "rc=0", err


def test_wiring_passes_on_only_the_chosen_signal(tmp_path):
    """USR1 and URG sent to a job whose warning is USR2: neither is passed on (each is named), USR2 is."""
    got, out, err = run_wired(tmp_path, "USR2", [signal.SIGUSR1, signal.SIGURG, signal.SIGUSR2], 1)
    assert got == ["SIGUSR2"] and out.strip() == "rc=0", err
    assert "SIGUSR1 ignored: the checkpoint warning signal of this job is SIGUSR2" in err
    assert "SIGURG ignored" in err


def test_wiring_refuses_an_unusable_signal_before_starting_anything(tmp_path):
    (tmp_path / "prog.py").write_text(PROG)
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\nsource {wiring_path()}\nslurmtools_run touch {tmp_path}/ran\necho rc=$?\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env["SLURMTOOLS_CHECKPOINT_SIGNAL"] = "TERM"
    p = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert p.stdout.strip() == "rc=2" and not (tmp_path / "ran").exists()
    assert "SLURMTOOLS_CHECKPOINT_SIGNAL=TERM is not a usable checkpoint signal" in p.stderr
