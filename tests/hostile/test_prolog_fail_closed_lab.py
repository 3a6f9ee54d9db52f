"""Issue 12, class 2 in the real Slurm lab: a node whose (faked) GPU fails is drained by the prolog even when the
prolog's bookkeeping cannot work, here because an admin left the spool folder, or its `running` folder,
group-writable (the hooks then refuse to write there: a job user in that group could plant links for root).

Before the fix, an unsafe `running` folder raised out of the start-mark step and the prolog skipped its health
check: the job ran on the sick node. The GPU fault comes from the lab's root-owned fault file (the lab has no
GPUs); slurmd running the prolog as root, the drain and the held requeue are the real Slurm's.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from slurmtools.hooks.gpuhealth import FAKE_NAME

pytestmark = pytest.mark.lab
USER = "labuser"


def node_state(lab, node: str) -> tuple[str, str]:
    out = lab.sh(f"scontrol show node -o {node}").stdout
    state = out.split("State=", 1)[1].split()[0] if "State=" in out else ""
    reason = out.split("Reason=", 1)[1] if "Reason=" in out else ""
    return state, reason


@pytest.mark.parametrize("folder, node", [("", "gpu05"), ("running", "gpu06")], ids=["spool", "spool-running"])
def test_failing_gpu_drains_its_node_although_the_spool_is_group_writable(lab, folder, node):
    spool = lab.dir / "spool" / "slurmtools"
    unsafe = spool / folder if folder else spool
    unsafe.mkdir(mode=0o755, exist_ok=True)
    mode = unsafe.stat().st_mode & 0o7777
    fault = lab.dir / "etc" / FAKE_NAME
    tmp = fault.with_suffix(".h1.tmp")
    tmp.write_text(json.dumps({"nodes": {node: {"count": 8, "faults": {"2": {"ecc_uncorrected": 7}}}}}))
    os.chmod(tmp, 0o644)
    os.replace(tmp, fault)
    job = None
    try:
        os.chmod(unsafe, 0o775)
        job = int(lab.sh(f"sbatch --parsable -J sick -p gpu --qos=production -A nlp -w {node} --gres=gpu:h100:8 "
                         f"-t 5 -o /dev/null --wrap 'sleep 1'", user=USER).stdout.strip())
        end = time.monotonic() + 90
        state, reason = node_state(lab, node)
        while "DRAIN" not in state and time.monotonic() < end:
            time.sleep(0.5)
            state, reason = node_state(lab, node)
        assert "DRAIN" in state, f"{node} with a failing GPU was not drained (state {state}, job {job} " \
                                 f"{lab.job_state(job)})"
        assert reason.startswith("slurmtools prolog: GPU 2 (GPU-fake-"), reason
        assert "has 7 uncorrected ECC errors" in reason, reason
        # Slurm requeues the job held after the prolog's failure: it never ran on the sick node
        lab.wait_state(job, "PENDING", 60)
        rec = lab.sh(f"scontrol show job -o {job}").stdout
        assert "launch_failed_requeued_held" in rec, rec
        assert not (spool / "running" / f"{job}.{node}").exists()  # the unsafe folder got no start mark
    finally:
        os.chmod(unsafe, mode)
        fault.unlink(missing_ok=True)
        if job is not None:
            lab.sh(f"scancel {job}", check=False)
        lab.sh(f"scontrol update nodename={node} state=resume", check=False)
    end = time.monotonic() + 60
    while "DRAIN" in node_state(lab, node)[0] and time.monotonic() < end:
        time.sleep(0.5)
    assert "DRAIN" not in node_state(lab, node)[0]
