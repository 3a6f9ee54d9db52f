"""Issue 15 against the real lab: `cluster show` reads only QoS names and grace times, and they are what the full
QoS table (and the site's tiers, which the lab's QoS are rendered from) say."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from slurmtools.resources import example_site
from slurmtools.site import load_site

pytestmark = pytest.mark.lab


def test_qos_grace_times_equal_the_full_qos_table(lab):
    b = lab.backend()
    grace = b.qos_grace_times()
    assert grace == {q.name: q.grace_time_s for q in b.qos()}
    site = load_site(example_site())
    for t in site.tiers.values():   # the lab's QoS are the site's tiers, rendered by `admin render qos`
        assert grace[t.name] == t.grace_time, t.name
    assert grace["standard"] == 300 and grace["scavenger"] == 60


def test_cluster_show_tiers_carry_slurms_grace_times(lab):
    p = subprocess.run([sys.executable, "-m", "slurmtools", "cluster", "show", "--json"], capture_output=True,
                       text=True, env=lab.env, check=True)
    shown = json.loads(p.stdout)
    full = {q.name: q.grace_time_s for q in lab.backend().qos()}
    assert [(t["name"], t["in_slurm"], t["slurm_grace_time_s"]) for t in shown["tiers"]] == \
        [(n, True, full[n]) for n in ("production", "standard", "scavenger")]
    assert [t["slurm_grace_time_s"] for t in shown["tiers"]] == [t["grace_time_s"] for t in shown["tiers"]]


def test_cluster_show_run_without_typer_prints_what_typer_prints(lab):
    """`launch.py` runs `cluster show` without importing typer: on the real Slurm its output, text and JSON, equals
    the typer app's (SLURMTOOLS_DIRECT=0), and the direct process never imported typer."""
    for extra in ([], ["--json"]):
        argv = [sys.executable, "-X", "importtime", "-m", "slurmtools", "cluster", "show", *extra]
        direct = subprocess.run(argv, capture_output=True, text=True, env=lab.env, check=True)
        typer_ = subprocess.run(argv, capture_output=True, text=True, env={**lab.env, "SLURMTOOLS_DIRECT": "0"},
                                check=True)
        imported = {ln.rsplit("|", 1)[1].strip().split(".")[0] for ln in direct.stderr.splitlines()
                    if ln.startswith("import time:") and "|" in ln}
        assert "slurmtools" in imported and "typer" not in imported
        assert "typer" in {ln.rsplit("|", 1)[1].strip().split(".")[0] for ln in typer_.stderr.splitlines()
                           if ln.startswith("import time:") and "|" in ln}
        assert direct.stdout == typer_.stdout
        if extra:
            assert [t["name"] for t in json.loads(direct.stdout)["tiers"]] == ["production", "standard", "scavenger"]
        else:
            assert direct.stdout.startswith("Slurm ") and "tier scavenger: priority 10, grace 60s" in direct.stdout


def test_cluster_show_into_a_closed_pipe_ends_as_typer_ends_it(lab):
    """`cluster show --json | head -1` on both paths: the reader takes one line and goes away; each process ends
    with exit 1 and nothing on stderr (a pipe of one page, so the JSON of 16 nodes does not fit before it closes)."""
    import fcntl
    import os

    for extra in ({}, {"SLURMTOOLS_DIRECT": "0"}):
        r, w = os.pipe()
        fcntl.fcntl(r, 1031, 4096)   # F_SETPIPE_SZ
        p = subprocess.Popen([sys.executable, "-m", "slurmtools", "cluster", "show", "--json"], stdout=w,
                             stderr=subprocess.PIPE, text=True, env={**lab.env, **extra})
        os.close(w)
        with os.fdopen(r) as out:
            assert out.readline() == "{\n"
        err = p.stderr.read()
        assert (p.wait(timeout=60), err) == (1, ""), extra


def _imports(stderr: str) -> set[str]:
    return {ln.rsplit("|", 1)[1].strip().split(".")[0] for ln in stderr.splitlines()
            if ln.startswith("import time:") and "|" in ln}


def test_plan_run_without_typer_prints_what_typer_prints(lab):
    """`plan` against the live lab (Slurm's node states, jobs and associations) runs without typer and prints what
    the typer app prints, JSON and text. The cluster may change between two runs (an earlier test's job ending),
    so each direct run is compared with the typer run next to it; one of the two pairs must agree."""
    for extra in (["--json"], []):
        argv = [sys.executable, "-X", "importtime", "-m", "slurmtools", "plan", *extra, "--gpus", "16", "--user",
                "alice", "--tier", "standard", "--", "python", "train.py"]
        runs = [subprocess.run(argv, capture_output=True, text=True, env={**lab.env, **env}, check=True)
                for env in ({}, {"SLURMTOOLS_DIRECT": "0"}, {})]
        assert "slurmtools" in _imports(runs[0].stderr) and "typer" not in _imports(runs[0].stderr)
        assert "typer" not in _imports(runs[2].stderr) and "typer" in _imports(runs[1].stderr)
        assert runs[1].stdout in (runs[0].stdout, runs[2].stdout)
        if extra:
            plan = json.loads(runs[1].stdout)
            assert (plan["gpus_per_node"], plan["qos"], plan["account"]) == (8, "standard", "vision")
            assert (plan["live"], plan["note"]) == (True, "")   # Slurm's state, not the idle fallback
        else:
            assert "#SBATCH" in runs[1].stdout and "planned against the declared topology" not in runs[1].stdout
