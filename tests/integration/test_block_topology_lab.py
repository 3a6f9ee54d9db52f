"""Block topology and topology.yaml in a live slurmctld: a second lab from a test site whose partitions use three
topologies (tree by leaf switch, block by NVLink domain with an incomplete domain and a placeholder block, flat).

On 25.11 the generated topology.yaml must be loaded as written (`scontrol show topology` agrees with the graph,
block by block) and jobs must land inside one block / one segment. On 22.05, which has neither topology.yaml nor
topology/block, the same lab must be refused in one line that names the release.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from slurmtools.hostlist import expand
from slurmtools.render.topology import block_layout
from slurmtools.site import load_site
from slurmtools.topology import queries as q
from slurmtools.topology.build_site import build_site
from slurmtools.topology.sitefile import load_fabric

from labtools import LAB_SCRIPT, REPO, Lab, _lab_env, lab_slurm

pytestmark = pytest.mark.lab

SITE = REPO / "tests" / "integration" / "sites" / "nvl" / "site.toml"
#: beside the session's lab: its own ports, relative to the session's (two releases' lab phases run side by side)
OFFSET = str(int(os.environ.get("SLURMTOOLS_LAB_PORT_OFFSET") or 0) + 1000)


def _env(d: Path) -> dict:
    env = dict(os.environ, SLURMTOOLS_SITE=str(SITE), SLURMTOOLS_LAB_DIR=str(d),
               SLURMTOOLS_LAB_PORT_OFFSET=OFFSET)
    return env


@pytest.fixture(scope="module")
def nvl_lab(lab):
    """The block lab beside the session's lab (own folder and ports); stopped at the end of the module."""
    d = REPO / f".lab-nvl-{lab_slurm()}"
    p = subprocess.run([str(LAB_SCRIPT), "up", "--slurm", lab_slurm()], capture_output=True, text=True,
                       env=_env(d), timeout=900)
    try:
        yield d, p
    finally:
        subprocess.run([str(LAB_SCRIPT), "down"], capture_output=True, env=_env(d), timeout=300)


def _graph():
    site = load_site(str(SITE))
    return site, build_site(load_fabric(site.fabric_path))


def _started_nodes(nl: Lab, job: int, timeout: float = 60) -> list[str]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        out = nl.sh(f"squeue -h -j {job} -o '%T %N'", check=False).stdout.split()
        if out and out[0] == "RUNNING":
            return expand(out[1])
        time.sleep(0.5)
    raise AssertionError(f"job {job} did not start: {nl.sh(f'squeue -j {job} -o %T,%r', check=False).stdout}")


def test_block_lab_on_this_release(lab, nvl_lab):
    d, up = nvl_lab
    if not lab.release.topology_yaml:
        # 22.05: refused before any daemon starts, in one line naming the feature and the release
        assert up.returncode != 0
        errs = [ln for ln in up.stderr.splitlines() if ln.startswith("slurmtools: error:")]
        assert errs == [f"slurmtools: error: --slurm-version: {lab.release.name}: partitions with different "
                        f"topologies (block, flat, tree) is not supported by Slurm {lab.release.name} "
                        f"(Slurm 25.05 and later have it)"], up.stderr
        assert not list((d / "run").glob("slurmctld.pid")), "no controller may be left running"
        return

    assert up.returncode == 0, up.stdout + up.stderr
    env, version = _lab_env(d)
    env["SLURMTOOLS_LAB_PORT_OFFSET"] = OFFSET
    nl = Lab(dir=d, env=env, slurm_version=version)
    nl.wait_nodes_idle()
    site, t = _graph()
    assert (d / "etc" / "topology.yaml").exists() and not (d / "etc" / "topology.conf").exists()

    # what slurmctld shows is what the graph says: leaves and spine for the tree, blocks for the block topology
    # with several topologies, `scontrol show topology` shows the cluster default (the tree here) and
    # `scontrol show topology NAME` each other one (25.11)
    shown = nl.sh("scontrol show topology").stdout.splitlines()
    switches = {kv["SwitchName"]: set(expand(kv.get("Nodes", ""))) for kv in
                (dict(tok.split("=", 1) for tok in ln.split() if "=" in tok) for ln in shown)
                if "SwitchName" in kv}
    shown = nl.sh("scontrol show topology block").stdout.splitlines()
    assert switches == {s: set(q.hosts_under(t, s)) for s in q.switch_levels(t)}
    blocks = {kv["BlockName"]: set(expand(kv.get("Nodes", ""))) for kv in
              (dict(tok.split("=", 1) for tok in ln.split() if "=" in tok) for ln in shown) if "BlockName" in kv}
    layout = block_layout(t, lab.release)
    assert blocks == {b.name: set(b.hosts) for b in layout.blocks}
    assert blocks["nvl3"] == {"gpu09", "gpu10", "gpu11"} and blocks["leaf2-placeholder1"] == set()
    # the placeholder keeps leaf2's blocks out of leaf1's aggregate
    aggregated = [set(expand(dict(tok.split("=", 1) for tok in ln.split() if "=" in tok)["Nodes"]))
                  for ln in shown if ln.startswith("AggregatedBlock=")]
    assert {"gpu09", "gpu10", "gpu11"} in aggregated and set(expand("gpu[01-08]")) in aggregated

    domains = {d_.name: set(d_.hosts) for d_ in q.nvlink_domains(t) if d_.multi_node}

    def sbatch(args: str) -> int:
        out = nl.sh(f"sbatch --parsable -t 5 -A team {args} --wrap 'sleep 60'", user="labuser").stdout
        return int(out.strip().split(";")[0])

    jobs = []
    try:
        # a 4-node job in the block partition fills one NVLink domain exactly
        j = sbatch("-p nvl -N4 -J whole-block")
        jobs.append(j)
        four = set(_started_nodes(nl, j))
        assert any(four == hosts for hosts in domains.values()), four
        # a 4-node job in 2-node segments: each segment inside one domain
        j = sbatch("-p nvl -N4 --segment=2 -J segments")
        jobs.append(j)
        nodes = _started_nodes(nl, j)
        inside = [name for name, hosts in domains.items() if hosts & set(nodes)]
        assert all(len(set(nodes) & domains[name]) % 2 == 0 for name in inside), (nodes, inside)
        assert nl.sh(f"scontrol show job {j}").stdout.count("SegmentSize=2") == 1
        # the tree partition of the same nodes still places by leaf switch
        j = sbatch("-p ib -N4 --switches=1 -J leaf")
        jobs.append(j)
        leaf = set(_started_nodes(nl, j))
        assert any(leaf <= set(q.hosts_under(t, s)) for s, k in q.switch_levels(t).items() if k == 0), leaf
    finally:
        for j in jobs:
            nl.sh(f"scancel {j}", check=False)


@pytest.mark.slurm_release("25.11")
def test_planner_keeps_tensor_parallel_groups_in_blocks(lab, nvl_lab):
    """`slurmtools submit --tp-size` on the block partition: the planner writes --segment and --exclusive=topo for
    the Slurm that answers, and the real slurmctld keeps every 2-host group inside one NVLink block."""
    d, up = nvl_lab
    assert up.returncode == 0, up.stdout + up.stderr
    env, version = _lab_env(d)
    env.update(SLURMTOOLS_LAB_PORT_OFFSET=OFFSET, SLURMTOOLS_SITE=str(SITE))
    nl = Lab(dir=d, env=env, slurm_version=version)
    nl.wait_nodes_idle()
    _, t = _graph()
    domains = {d_.name: set(d_.hosts) for d_ in q.nvlink_domains(t) if d_.multi_node}
    work = nl.jobs_dir / f"tp-{int(time.time())}"
    work.mkdir(parents=True)
    work.chmod(0o777)
    import sys

    cmd = (f"cd {work} && SLURMTOOLS_SITE={SITE} {sys.executable} -m slurmtools submit --partition nvl --nodes 8 "
           f"--gpus-per-node 4 --tp-size 8 --tier production --account team --template mpi --name tp --time 5m "
           f"--output-dir {work} -- sleep 30")
    p = nl.sh(cmd, user="labuser", check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    job = int(p.stdout.split("submitted job ")[1].split(":")[0])
    try:
        script = nl.sh(f"scontrol write batch_script {job} -", check=False).stdout
        assert "#SBATCH --segment=2" in script and "#SBATCH --exclusive=topo" in script, script
        rec = nl.sh(f"scontrol show job {job}").stdout
        assert "SegmentSize=2" in rec, rec
        nodes = _started_nodes(nl, job, 90)
        assert len(nodes) == 8
        for name, hosts in domains.items():
            assert len(set(nodes) & hosts) % 2 == 0, (nodes, name)  # whole 2-host segments per block
    finally:
        nl.sh(f"scancel {job}", check=False)


def _shown(nl: Lab, args: str, head: str) -> list[dict[str, str]]:
    """`scontrol show topology ARGS` lines that start with `head=`, as key -> value."""
    out = nl.sh(f"scontrol show topology {args}".strip()).stdout.splitlines()
    return [dict(tok.split("=", 1) for tok in ln.split() if "=" in tok) for ln in out if ln.startswith(f"{head}=")]


@pytest.mark.slurm_release("25.11")
def test_the_topology_yaml_slurmctld_runs_on_imports_as_it_shows_it(lab, nvl_lab):
    """`topo import --from topology.yaml` on the file this slurmctld loaded: its cluster default is the tree that
    `scontrol show topology` shows (every switch, its level, its hosts and children), and its block topology the
    blocks `scontrol show topology block` shows, block by block, with the BlockSizes Slurm works with."""
    from slurmtools.cli.topo_providers import build
    from slurmtools.topology.slurm_topology_yaml import parse_topology_yaml

    d, up = nvl_lab
    assert up.returncode == 0, up.stdout + up.stderr
    env, version = _lab_env(d)
    env["SLURMTOOLS_LAB_PORT_OFFSET"] = OFFSET
    nl = Lab(dir=d, env=env, slurm_version=version)
    nl.wait_nodes_idle()
    path = d / "etc" / "topology.yaml"
    doc = parse_topology_yaml(path.read_text(), str(path))
    assert [(x.name, x.kind, x.cluster_default) for x in doc.topologies] == [
        ("tree", "tree", True), ("block", "block", False), ("flat", "flat", False)]

    notes: list[str] = []
    t = build("topology.yaml", str(path), warn=notes.append)   # the cluster default, as `topo import` picks it
    assert notes == [f"{path}: 3 topologies (tree, block, flat); imported tree (tree, the cluster default)"]
    levels = q.switch_levels(t)
    tree = doc.select().conf
    switches = {kv["SwitchName"]: kv for kv in _shown(nl, "", "SwitchName")}
    assert set(switches) == set(levels) == set(tree.switches)
    for name, kv in switches.items():
        assert int(kv["Level"]) == levels[name], name
        assert set(expand(kv.get("Nodes", ""))) == set(q.hosts_under(t, name)), name
        assert set(expand(kv.get("Switches", ""))) == set(tree.switches[name].switches), name

    block = doc.select("block").conf
    shown = {kv["BlockName"]: kv for kv in _shown(nl, "block", "BlockName")}
    assert {n: set(expand(kv.get("Nodes", ""))) for n, kv in shown.items()} == \
           {n: set(b.nodes) for n, b in block.blocks.items()}
    assert {int(kv["BlockSize"]) for kv in shown.values()} == {block.block_sizes[0]}
    assert {int(kv["BlockSize"]) for kv in _shown(nl, "block", "AggregatedBlock")} <= set(block.block_sizes)
    t_block = build("topology.yaml", str(path), topology_name="block")
    assert set(t_block.host_names()) == set().union(*(set(b.nodes) for b in block.blocks.values()))
    assert t_block.count("switch") == 0
