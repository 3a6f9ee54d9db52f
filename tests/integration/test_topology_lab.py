"""The topology renderers against the real lab's slurmctld (scripts/slurm-lab): a topology.conf written from the
graph is loaded by `scontrol reconfigure`, and `scontrol show topology` must agree with the graph; the lab's
gres.conf and node features must agree with the graph built from the same fabric."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from slurmtools.hostlist import expand
from slurmtools.site import load_site
from slurmtools.topology import queries as q
from slurmtools.topology.build_site import build_site
from slurmtools.topology.checks import check_gres
from slurmtools.topology.graph import Topology, ib_link
from slurmtools.topology.render_slurm import node_features, render_topology_conf
from slurmtools.topology.sitefile import load_fabric

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]


def site_topology() -> Topology:
    import os

    site = load_site(os.environ.get("SLURMTOOLS_SITE", str(REPO / "site_configs" / "example" / "site.toml")))
    return build_site(load_fabric(site.fabric_path))


def show_topology(lab) -> dict[str, dict]:
    out = lab.sh("scontrol show topology").stdout
    rows = {}
    for line in out.splitlines():
        if not line.startswith("SwitchName="):
            continue
        kv = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        rows[kv["SwitchName"]] = {"level": int(kv["Level"]), "nodes": set(expand(kv.get("Nodes", ""))),
                                  "switches": set(expand(kv.get("Switches", "")))}
    return rows


def load_topology_conf(lab, text: str) -> None:
    """Install topology.conf atomically, then reconfigure and wait for every node to answer again. Measured on
    25.11: a slurmd still re-reading the file from the previous reconfigure read it empty while `cat >` rewrote it,
    and died (`fatal: No switches configured`), leaving its node NOT_RESPONDING for every later test."""
    path = Path(lab.dir) / "etc" / "topology.conf"
    tmp = path.with_suffix(".conf.tmp")
    tmp.write_text(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    lab.sh("scontrol reconfigure")
    lab.wait_nodes_idle()


def assert_agrees(lab, t: Topology) -> None:
    shown = show_topology(lab)
    levels = q.switch_levels(t)
    assert set(shown) == set(levels), shown
    for name, row in shown.items():
        assert row["level"] == levels[name], name
        assert row["nodes"] == set(q.hosts_under(t, name)), name
        if levels[name] > 0:
            assert row["switches"] == {s for s in levels if levels[s] == levels[name] - 1
                                       and set(q.hosts_under(t, s)) <= set(q.hosts_under(t, name))}, name


def test_generated_topology_conf_is_what_slurmctld_shows(lab):
    t = site_topology()
    path = Path(lab.dir) / "etc" / "topology.conf"
    original = lab.sh(f"cat {shlex.quote(str(path))}").stdout
    try:
        load_topology_conf(lab, render_topology_conf(t))
        assert_agrees(lab, t)

        # a different wiring of the same hosts (two leaves of 8 under another spine): slurmctld must follow it,
        # so the check above cannot pass on a stale file
        hosts = t.host_names()
        other = Topology("rewired")
        other.add_switch("spineX")
        for i, leaf in enumerate(("leafA", "leafB")):
            other.add_switch(leaf)
            other.link(f"switch:{leaf}", "switch:spineX", ib_link("4xNDR", 4))
            for h in hosts[i * len(hosts) // 2:(i + 1) * len(hosts) // 2]:
                other.add_host(h)
                other.link(f"host:{h}", f"switch:{leaf}", ib_link("4xNDR", 8))
        load_topology_conf(lab, render_topology_conf(other))
        assert_agrees(lab, other)
        assert set(show_topology(lab)) == {"leafA", "leafB", "spineX"}
    finally:
        load_topology_conf(lab, original)
    assert set(show_topology(lab)) == set(q.switch_levels(t))


def test_lab_gres_conf_and_features_agree_with_the_graph(lab):
    t = site_topology()
    gres = (Path(lab.dir) / "etc" / "gres.conf").read_text()
    assert check_gres(t, gres, "lab gres.conf") == []
    feats = node_features(t)
    out = lab.sh("scontrol show node -o").stdout
    seen = 0
    for line in out.splitlines():
        kv = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        name = kv.get("NodeName")
        if name in feats:
            seen += 1
            assert set(kv["AvailableFeatures"].split(",")) == set(feats[name]), name
            assert kv["Gres"].startswith(f"gpu:{t.gpus(name)[0].gpu_type}:{len(t.gpus(name))}"), name
    assert seen == len(feats)
