"""`topo lint --gres` on real site gres.conf files (tests/data/SOURCES.md): it says what it compared, and a file
that matches nothing in the topology fails in one line instead of passing vacuously (issue 11, class 7)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slurmtools.errors import ParseError
from slurmtools.resources import bundled
from slurmtools.topology.checks import check_gres, compare_gres, read_gres_conf
from slurmtools.topology.graph import Topology

DATA = Path(__file__).resolve().parents[2] / "data" / "slurm"
BCM = DATA / "gres-hyxcl-bcm-node12-dgxa100.conf"  # NodeName=node[1-2] and dgxa100, 8 GPUs each, nodeName= once
NVL72 = DATA / "gres-hyxcl-bcm-gb200-nvl72.conf"  # NodeName=nvl721001-T[01-18] File=/dev/nvidia[0-3]
LAMBDA = DATA / "gres-arlk-lambda-8gpu-cpus.conf"  # NodeName=lambda, CPUs= (the old name of Cores=)
EXAMPLE = bundled("topology") / "example" / "fabric.toml"  # hosts gpu01..gpu16: none of the files' nodes


def topo_with(hosts, gpus: int = 8, name: str = "built", numa_cores=None) -> Topology:
    """Hosts with `gpus` GPUs each; `numa_cores` [(cores, GPU indices)] gives each NUMA node its cores and GPUs."""
    t = Topology(name)
    for h in hosts:
        for numa, (cores, idx) in enumerate(numa_cores or [(range(64), range(gpus))]):
            cpu = t.add_cpu(h, numa, numa, cpus=cores, cores=cores)
            for i in idx:
                t.add_gpu(h, i, parent=cpu)
    return t


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "slurmtools", "topo", *args], capture_output=True, text=True)


def test_real_site_file_against_a_topology_without_its_hosts_fails_in_one_line():
    r = run("lint", str(EXAMPLE), "--gres", str(BCM))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (f"slurmtools: error: --gres: nothing matched: {BCM}: compared 0 GPU(s) on 0 host(s) of "
                        f"topology example; node(s) dgxa100,node[1-2] not in the topology (16 line(s) skipped "
                        f"whole)\n")
    r = run("lint", str(EXAMPLE), "--gres", str(NVL72))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert "compared 0 GPU(s)" in r.stderr and "node(s) nvl721001-T[01-18] not in the topology (1 line(s)" in r.stderr
    # the library says so too: no empty list of findings for a file that matched nothing
    found = check_gres(topo_with([]), NVL72.read_text(), "nvl72")
    assert [f.code for f in found] == ["gres-unmatched"]


def test_real_site_file_against_a_topology_built_with_its_hosts(tmp_path):
    src = tmp_path / "bcm.json"
    src.write_text(topo_with(["node1", "node2", "dgxa100"], name="bcm").to_json())
    r = run("lint", str(src), "--gres", str(BCM))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"{BCM}: compared 24 GPU(s) on 3 host(s) (dgxa100,node[1-2]) of topology bcm (Cores= on 0, Links= on 0); "
        f"AutoDetect=nvml: slurmd takes what the file leaves out from the driver; host(s) dgxa100,node[1-2]: "
        f"/dev/nvidiaN read as GPU index N, as the topology states no device minor (an NVML capture, `slurmtools "
        f"topo capture`, does)",
        "topology bcm: no problems found"]
    r = run("lint", str(src), "--gres", str(BCM), "--json")
    out = json.loads(r.stdout)
    assert (out["findings"], out["gres"]["gpus"], out["gres"]["hosts"]) == ([], 24, ["dgxa100", "node1", "node2"])
    assert out["gres"]["matched_by_index"] == ["dgxa100", "node1", "node2"]
    # node2 has 7 GPUs: the `nodeName=` line (lower-case key, line 11) declares the eighth
    t = topo_with(["node1", "dgxa100"], name="bcm")
    for i in range(7):
        t.add_gpu("node2", i, parent=t.add_cpu("node2", 0, 0, cpus=range(64), cores=range(64)))
    found = compare_gres(t, BCM.read_text(), "gres.conf")
    assert [f.line() for f in found.findings] == ["node2: gres.conf:11: GPU 7 is not in the capture"]
    assert (found.gpus, found.absent) == (23, [])


def test_partly_matching_file_names_what_it_skipped():
    c = compare_gres(topo_with(["node1"], name="one"), BCM.read_text(), "gres.conf")
    assert (c.gpus, c.hosts, c.absent, c.absent_lines) == (8, ["node1"], ["dgxa100", "node2"], 8)
    assert c.summary("one") == ("compared 8 GPU(s) on 1 host(s) (node1) of topology one (Cores= on 0, Links= on 0); "
                                "AutoDetect=nvml: slurmd takes what the file leaves out from the driver; node(s) "
                                "dgxa100,node2 not in the topology (8 line(s) skipped whole); host(s) node1: "
                                "/dev/nvidiaN read as GPU index N, as the topology states no device minor (an NVML "
                                "capture, `slurmtools topo capture`, does)")


def test_cpus_keyword_is_compared_as_cores():
    socket0, socket1 = [*range(0, 16), *range(32, 48)], [*range(16, 32), *range(48, 64)]
    good = topo_with(["lambda"], numa_cores=[(socket0, range(4)), (socket1, range(4, 8))])
    c = compare_gres(good, LAMBDA.read_text(), "gres.conf")
    assert (c.gpus, c.cores, c.findings) == (8, 8, [])
    # GPU 7 on socket 0 in the capture: the file's line 8 binds it to socket 1's cores
    moved = topo_with(["lambda"], numa_cores=[(socket0, [0, 1, 2, 3, 7]), (socket1, [4, 5, 6])])
    assert [f.line() for f in compare_gres(moved, LAMBDA.read_text(), "gres.conf").findings] == [
        "lambda: gres.conf:8: GPU 7 Cores=16-31,48-63, the capture has 0-15,32-47"]


def test_real_files_read_as_slurmd_reads_them():
    bcm = read_gres_conf(BCM.read_text(), "bcm")
    assert len(bcm.gpus) == 24 and bcm.autodetect == {"node1": "nvml", "node2": "nvml", "dgxa100": "nvml"}
    assert sorted({(g.node, g.index) for g in bcm.gpus if g.line == 11}) == [("node1", 7), ("node2", 7)]
    nvl = read_gres_conf(NVL72.read_text(), "nvl72")
    assert len(nvl.gpus) == 72 and {g.index for g in nvl.gpus} == {0, 1, 2, 3}
    assert {g.node for g in nvl.gpus} == {f"nvl721001-T{i:02d}" for i in range(1, 19)}


def test_gres_conf_syntax_as_slurm_parses_it():
    text = ('# site file\n'
            'AutoDetect=off\n'
            'NodeName="gpu[01-02]" name=GPU Type=a100 \\\n'
            '    File=/dev/nvidia[0-1],/dev/nvidia3 Cores=0-7 Links=-1,12,0 # NVLink row\n'
            'NodeName=gpu03 AutoDetect=nvml\n'
            'Name=mps Count=100K File=/dev/nvidia0\n'
            'Name=gpu Count=2\n'
            'Name=gpu Type=orin File=/dev/dri/renderD128\n'
            'Name=gpu Type=1g.10gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21\n')
    c = read_gres_conf(text, "g")
    assert [(g.node, g.index, g.line, g.gpu_type, g.cores, g.links) for g in c.gpus if g.node == "gpu01"] == [
        ("gpu01", i, 3, "a100", tuple(range(8)), (-1, 12, 0)) for i in (0, 1, 3)]
    assert len(c.gpus) == 6 and c.other == 1
    assert c.autodetect == {None: "off", "gpu03": "nvml"}
    assert [n for n, _ in c.skipped] == [7, 8, 9]
    assert "no GPU index" in c.skipped[0][1] and "/dev/dri/renderD128" in c.skipped[1][1]


@pytest.mark.parametrize("text, message", [
    ("Name=gpu File=/dev/nvidia0 Foo=1", "g:1: unknown key 'Foo': a gres.conf line holds AutoDetect, Count,"),
    ("\nName=gpu File=/dev/nvidia0 oops", "g:2: expected Key=Value, got 'oops'"),
    ("Type=a100 Name=gpu File=/dev/nvidia0", "g:1: a line starts with NodeName=, Name= or AutoDetect=, got Type="),
    ("Name=gpu NodeName=n1 File=/dev/nvidia0", "g:1: NodeName= must come first on its line"),
    ("AutoDetect=nvml Name=gpu File=/dev/nvidia0", "g:1: a line that starts with AutoDetect= holds nothing else"),
    ("NodeName=n1 Type=a100", "g:1: expected Name="),
    ("Name=gpu File=/dev/nvidia0 File=/dev/nvidia1", "g:1: File= given twice"),
    ("Name=gpu File=/dev/nvidia0 Count=lots", "g:1: Count: expected a number"),
    ("NodeName=n[1-2 Name=gpu File=/dev/nvidia0", "g:1: NodeName: bad hostlist"),
    ("# a\nName=gpu File=/dev/nvidia0 Links=-1,x", "g:2: Links: expected integers"),
    ("Include /etc/slurm/gres.d/a.conf", "g:1: Include: the included file is not read here"),
])
def test_what_cannot_be_read_fails_with_file_and_line(text, message):
    with pytest.raises(ParseError) as e:
        read_gres_conf(text, "g")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_a_file_with_no_gpu_by_device_says_so(tmp_path):
    p = tmp_path / "gres.conf"
    p.write_text("AutoDetect=nvml\n")
    # AutoDetect alone (the most common gres.conf today) leaves every GPU to the driver: nothing to disagree with
    r = run("lint", str(EXAMPLE), "--gres", str(p))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"{p}: compared 0 GPU(s) on 0 host(s) of topology example; the file declares "
                                     "no GPU by device (File=/dev/nvidiaN); AutoDetect=nvml",
                                     "topology example: no problems found"]
    # without it, a file that declares no GPU matched nothing: refused in one line
    p.write_text("Name=shard Count=8\n")
    r = run("lint", str(EXAMPLE), "--gres", str(p))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert "declares no GPU by device (File=/dev/nvidiaN)" in r.stderr
