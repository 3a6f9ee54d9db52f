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
