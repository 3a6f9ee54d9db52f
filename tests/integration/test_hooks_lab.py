"""Prolog/epilog in the real Slurm lab: a failing GPU drains its node with a reason naming the GPU; a degraded
NVLink and an HCA at HDR instead of the declared NDR drain theirs (topology drift against the node expectations
rendered from the site); odd jobs never drain a node; the epilog's per-job record carries what only Slurm knows
(the QoS).

The lab has no GPUs, no NVML and no HCAs, so the faults come from the root-owned lab fault file the prolog honours
(slurmtools/hooks/labfake.py), which may name a fake sysfs tree for the HCAs; everything else (slurmd running the
prolog as root, the drain, the held requeue) is the real Slurm.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from slurmtools.hooks.expectations import NAME as EXPECTATIONS_NAME
from slurmtools.hooks.gpuhealth import FAKE_NAME

pytestmark = pytest.mark.lab
USER = "labuser"


def node_info(lab, node: str) -> dict[str, str]:
    out = lab.sh(f"scontrol show node -o {node}").stdout
    info: dict[str, str] = {}
    key = None
    for tok in out.split():  # Reason=... may contain spaces: glue words without '=' to the previous value
        if "=" in tok and tok.split("=", 1)[0].isidentifier():
            key, val = tok.split("=", 1)
            info[key] = val
        elif key:
            info[key] += " " + tok
    return info


def wait_node(lab, node: str, pred, timeout: float) -> dict[str, str]:
    end = time.monotonic() + timeout
    info: dict[str, str] = {}
    while time.monotonic() < end:
        info = node_info(lab, node)
        if pred(info):
            return info
        time.sleep(0.5)
    raise AssertionError(f"{node} never reached the expected state in {timeout}s: {info}")


@pytest.fixture
def fault_file(lab):
    path = lab.dir / "etc" / FAKE_NAME

    def write(doc: dict) -> Path:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        return path

    yield write
    path.unlink(missing_ok=True)


def test_failing_gpu_drains_its_node_with_the_reason(lab, fault_file):
    node = "gpu15"
    fault_file({"nodes": {node: {"count": 8, "faults": {"5": {"ecc_uncorrected": 3}}}}})
    job = int(lab.sh(f"sbatch --parsable -J sick -p gpu --qos=production -A nlp -w {node} --gres=gpu:h100:8 "
                     f"-t 5 -o /dev/null --wrap 'true'", user=USER).stdout.strip())
    try:
        info = wait_node(lab, node, lambda i: "DRAIN" in i.get("State", ""), 60)
        assert "GPU 5 (GPU-fake-gpu15-5) has 3 uncorrected ECC errors" in info.get("Reason", ""), info
        lab.wait_state(job, "PENDING", 60)  # Slurm requeues the job held after a prolog failure
        rec = lab.sh(f"scontrol show job -o {job}").stdout
        assert "launch_failed_requeued_held" in rec, rec
        from slurmtools import audit
        events = [e for e in audit.read(lab.dir / "spool" / "slurmtools" / audit.LOG_NAME)
                  if e["event"] == "node_drained" and e["job"] == job]
        assert events and events[0]["details"]["node"] == node
    finally:
        lab.sh(f"scancel {job}", check=False)
        lab.sh(f"scontrol update nodename={node} state=resume", check=False)
    wait_node(lab, node, lambda i: "DRAIN" not in i.get("State", ""), 60)


@pytest.fixture
def expectations_file(lab):
    """The node expectations rendered from the lab's site, installed in its etc folder as an admin would."""
    path = lab.dir / "etc" / EXPECTATIONS_NAME
    site = (lab.dir / "site.path").read_text().strip()
    lab.sh(f"{sys.executable} -m slurmtools admin render node-expectations --site {site} --out {path}")
    yield path
    path.unlink(missing_ok=True)


def test_degraded_links_drain_the_node_with_the_reason(lab, fault_file, expectations_file):
    node = "gpu14"
    sysfs = lab.dir / "fake-sys"  # root's, like the lab's etc folder: the prolog refuses anything else
    for i in range(8):
        port = sysfs / "sys" / "class" / "infiniband" / f"mlx5_{i}" / "ports" / "1"
        port.mkdir(parents=True, exist_ok=True)
        (port / "rate").write_text("200 Gb/sec (4X HDR)\n" if i == 5 else "400 Gb/sec (4X NDR)\n")
        (port / "state").write_text("4: ACTIVE\n")
        (port / "phys_state").write_text("5: LinkUp\n")
        (port / "link_layer").write_text("InfiniBand\n")
    fault_file({"nodes": {node: {"count": 8, "links": {"nvlinks": 18, "pcie_gen": 5, "pcie_width": 16, "pstate": 0},
                                 "faults": {"3": {"nvlinks_up": 16}}, "sysfs_root": str(sysfs)}}})
    job = int(lab.sh(f"sbatch --parsable -J drift -p gpu --qos=production -A nlp -w {node} --gres=gpu:h100:1 "
                     f"-t 5 -o /dev/null --wrap 'true'", user=USER).stdout.strip())
    try:
        info = wait_node(lab, node, lambda i: "DRAIN" in i.get("State", ""), 60)
        assert info.get("Reason", "").startswith(
            "slurmtools prolog: GPU 3 NVLink 16/18 up (down: 16-17); HCA mlx5_5 port 1 at 200 Gb/sec (4X HDR), "
            "declared 4X NDR"), info
        lab.wait_state(job, "PENDING", 60)  # requeued held, as for a GPU fault
    finally:
        lab.sh(f"scancel {job}", check=False)
        lab.sh(f"scontrol update nodename={node} state=resume", check=False)
    wait_node(lab, node, lambda i: "DRAIN" not in i.get("State", ""), 60)
    log = (lab.dir / "spool" / "slurmtools" / "hooks.log").read_text()
    assert f"job={job} node={node} topology drift ({expectations_file}, profile dgx-h100" in log


ODD_JOBS = [
    "--comment='$(reboot); `id` \"quoted\" \\\\back' --wrap 'true'",
    "-J 'na me;|&' --wrap 'true'",
    "--chdir=/tmp --wrap 'true'",
    "--gres=gpu:h100:3 --wrap 'exit 7'",
    "--wrap 'kill -9 $$'",
    "-o '/tmp/lab-odd-%j with space \u00e9.out' --wrap 'true'",
]


def test_odd_jobs_never_drain_a_healthy_node_and_get_records(lab, fault_file):
    node = "gpu16"
    fault_file({"nodes": {"gpu15": {"count": 8, "faults": {"1": {"lost": True}}}}})  # another node's fault
    ids = []
    for opts in ODD_JOBS:
        out = lab.sh(f"sbatch --parsable -p gpu --qos=production -A nlp -w {node} -t 2 -o /dev/null {opts}",
                     user=USER).stdout.strip()
        ids.append(int(out))
    for j in ids:
        lab.wait_state(j, {"COMPLETED", "FAILED"}, 90)
    info = node_info(lab, node)
    assert "DRAIN" not in info["State"] and info.get("Reason", "") in ("", "(null)"), info
    spool = lab.dir / "spool" / "slurmtools" / "jobs"
    for j in ids:
        rec = json.loads((spool / f"{j}.0.{node}.json").read_text())
        assert rec["job"] == j and rec["user"] == USER and rec["qos"] == "production" and rec["node"] == node
    rec = json.loads((spool / f"{ids[3]}.0.{node}.json").read_text())
    assert len(set(rec["gpus"])) == 3 and set(rec["gpus"]) <= set(range(8))  # the jobs share the node
    assert rec["exit_code"] == "7:0"


def test_het_job_components_get_records_of_their_own(lab):
    """slurmd runs the hooks once per het component, each under the component's own job id (sacct's JobIDRaw of
    `N+1` is N+1's id, not N), so each record holds its component's GPUs and node and joins sacct's row of it
    (measured on 22.05 and 25.11)."""
    out = lab.sh("sbatch --parsable -p gpu --qos=production -A nlp -w gpu11 --gres=gpu:h100:2 -t 2 -o /dev/null "
                 ": -p gpu --qos=production -A nlp -w gpu10 --gres=gpu:h100:1 -t 2 --wrap 'true'",
                 user=USER).stdout.strip()
    leader = int(out.split(";")[0])
    lab.wait_state(leader, "COMPLETED", 90)
    # without -X: 22.05's `sacct -X -j N` prints only the leader's row, as `N`; and for a moment after the end
    # without -X too, until slurmdbd has the components (measured)
    deadline = time.monotonic() + 30
    while True:
        rows = [r for r in lab.sh(f"sacct -n -P -j {leader} -o JobID,JobIDRaw,NodeList").stdout.split()
                if "." not in r.split("|")[0]]
        raw = {r.split("|")[0]: (int(r.split("|")[1]), r.split("|")[2]) for r in rows}
        if len(raw) == 2 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert set(raw) == {f"{leader}+0", f"{leader}+1"}, rows
    spool = lab.dir / "spool" / "slurmtools" / "jobs"
    for comp, gpus in (("0", 2), ("1", 1)):
        job, node = raw[f"{leader}+{comp}"]
        path = spool / f"{job}.0.{node}.json"
        deadline = time.monotonic() + 30  # the epilog may still be writing after sacct's COMPLETED
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        rec = json.loads(path.read_text())
        assert (rec["job"], rec["node"], rec["user"], rec["exit_code"]) == (job, node, USER, "0:0"), rec
        assert len(set(rec["gpus"])) == gpus, rec
    assert raw[f"{leader}+1"][0] != leader


def test_node_health_keeps_a_drain_reason_someone_else_gave(lab, fault_file):
    """An admin drained the node with their own reason; the periodic health check then finds a GPU fault on it.
    The admin's reason, user and time stay (an update would replace them: Slurm keeps one reason); on a node the
    check drained itself, running it again does not restamp the drain."""
    node = "gpu12"
    repo = Path(__file__).resolve().parents[2]
    fault_file({"nodes": {node: {"count": 8, "faults": {"2": {"ecc_uncorrected": 1}}}}})
    env = (f"SLURMTOOLS_LAB_ETC={lab.dir / 'etc'} SLURMTOOLS_SPOOL_DIR={lab.dir / 'spool' / 'slurmtools'} "
           f"SLURMTOOLS_PYTHON={sys.executable} SLURMD_NODENAME={node}")
    health = f"env {env} {repo / 'scripts' / 'node-health'}"
    try:
        lab.sh(f"scontrol update nodename={node} state=drain reason='RMA ticket 4711'")
        before = node_info(lab, node)["Reason"]
        assert before.startswith("RMA ticket 4711 [root@"), before
        assert lab.sh(health, check=False).returncode == 1  # the fault is found ...
        info = node_info(lab, node)
        assert info["Reason"] == before and "DRAIN" in info["State"], info  # ... and the admin's reason kept
        log = (lab.dir / "spool" / "slurmtools" / "hooks.log").read_text()
        assert "for another reason, kept: RMA ticket 4711" in log

        lab.sh(f"scontrol update nodename={node} state=resume")
        wait_node(lab, node, lambda i: "DRAIN" not in i.get("State", ""), 30)
        assert lab.sh(health, check=False).returncode == 1
        first = wait_node(lab, node, lambda i: "DRAIN" in i.get("State", ""), 30)["Reason"]
        assert first.startswith("slurmtools node-health: GPU 2 (GPU-fake-gpu12-2) has 1 uncorrected ECC"), first
        time.sleep(1.1)  # Slurm stamps the reason in whole seconds
        assert lab.sh(health, check=False).returncode == 1
        assert node_info(lab, node)["Reason"] == first  # not restamped
    finally:
        lab.sh(f"scontrol update nodename={node} state=resume", check=False)
    wait_node(lab, node, lambda i: "DRAIN" not in i.get("State", ""), 60)
