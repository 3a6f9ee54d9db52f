"""Class 8 in the real lab: the chosen checkpoint warning signal reaches the training processes under each bundled
launcher template, and the launchers survive it.

Each job runs tests/hostile/signal_lab/sig_trainer.py (slurmtools.checkpoint's handlers, as a trainer would) on a
preemptible tier. Once every rank is ready, Slurm itself signals the batch shell (`scancel --batch --signal`, the
same delivery as `--signal=B:SIG`); the wiring passes the signal on. The job must end COMPLETED with every rank
reporting the chosen signal: the default (URG, passed on through `scancel --signal`, which srun does not forward)
and USR2 (forwarded by srun; the launchers are told to ignore it). Before this class, the default USR1 killed
torchrun (`srun: error: gpu01: task 0: User defined signal 1`) and the job ended FAILED.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
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
TRAINER = Path(__file__).resolve().parent / "signal_lab" / "sig_trainer.py"
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED")


@pytest.fixture(scope="module")
def launchers() -> Path:
    return launchers_env()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The example site with partial hosts allowed (2 hosts x 2 GPUs keep the machine's few cores enough)."""
    src = example_site()
    fabric = (src.parent / "../../topology/example/fabric.toml").resolve()
    text = src.read_text().replace('fabric = "../../topology/example/fabric.toml"', f'fabric = "{fabric}"').replace(
        "[partitions.gpu]\n", "[partitions.gpu]\nallow_partial_nodes = true\n")
    assert str(fabric) in text and "allow_partial_nodes = true" in text, "example site changed shape"
    d = tmp_path_factory.mktemp("site")
    (d / "site.toml").write_text(text)
    s = load_site(d / "site.toml")
    assert s.tiers["scavenger"].preemptible and s.tiers["scavenger"].checkpoint_signal == "URG"
    return s


@pytest.fixture
def clean(lab):
    lab.sh("scancel --full -u labuser", check=False)
    yield
    lab.sh("scancel --full -u labuser", check=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_signalled(lab, site, launchers: Path, template: str, signal: str | None) -> tuple[list[dict], str]:
    """Plan on the scavenger tier, submit as labuser, signal the batch shell once all ranks are ready, wait."""
    d = job_folder(lab, "ckptsig")
    shutil.copy(TRAINER, d / TRAINER.name)
    kw = dict(user="labuser", account="vision", time_limit=600, name=f"sig-{template}", tier="scavenger",
              command=("python", str(d / TRAINER.name), str(d)), checkpoint_signal=signal,
              env=(("PATH", f"{launchers}/bin:{lab.env['PATH']}"), ("PYTHONPATH", str(REPO))),
              template_vars=(("master_addr", "127.0.0.1"), ("master_port", str(free_port()))))
    if template == "array":
        kw.update(gpus=1, sweep=(("a",), ("b",)))
        ranks = 2
    else:
        kw.update(nodes=2, gpus_per_node=2)
        ranks = 4
    state = gather(site, lab.backend())
    info = find_template(template, site.source)
    plan = plan_job(JobRequest(**kw), site, state.view, info.shape, state.releases)
    want = signal or "URG"
    assert plan.checkpoint_signal == want and f"--signal=B:{want}@" in render(plan, info, site.source)
    script = render(plan, info, site.source)
    job = int(lab.sh(f"cd {d} && sbatch --parsable", user="labuser", input=script).stdout.strip().split(";")[0])
    end = time.monotonic() + 180
    while len(list(d.glob("*.ready"))) < ranks and time.monotonic() < end:
        time.sleep(0.5)
    logs = lambda: "\n".join(p.read_text()[-3000:] for p in d.glob("*.out"))  # noqa: E731
    assert len(list(d.glob("*.ready"))) == ranks, f"ranks not ready in 180 s:\n{logs()}"
    time.sleep(2)  # the launcher's own start-up past the ranks' handlers
    ids = [f"{job}_{i}" for i in range(2)] if template == "array" else [str(job)]
    for j in ids:
        lab.sh(f"scancel --batch --signal={want} {j}")
    for j in ids:
        st = lab.wait_state(j, FINISHED, timeout=180)
        assert st == "COMPLETED", f"job {j} ended {st}:\n{logs()}"
    return [json.loads(p.read_text()) for p in sorted(d.glob("rank-*.json"))], logs()


@pytest.mark.parametrize("signal", [None, "USR2"], ids=["default-URG", "USR2"])
@pytest.mark.parametrize("template", ["torchrun", "accelerate", "mpi", "array"])
def test_the_chosen_signal_reaches_every_training_process(lab, site, launchers, clean, template, signal):
    recs, log = run_signalled(lab, site, launchers, template, signal)
    want = signal or "URG"
    assert len(recs) == (2 if template == "array" else 4), log
    assert {r["signal"] for r in recs} == {want}, log
    assert {r["warning_signal"] for r in recs} == {want}
    if template == "array":
        assert sorted(r["task"] for r in recs) == ["0", "1"]
    else:
        assert sorted(r["rank"] for r in recs) == [0, 1, 2, 3]
        assert len({r["node"] for r in recs}) == 2
