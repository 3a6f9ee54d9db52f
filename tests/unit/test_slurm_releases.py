"""The release table and what renders differently per release (pure: no Slurm needed)."""

from __future__ import annotations

import pytest

from slurmtools.errors import ConfigError
from slurmtools.render.slurm_conf import render_slurm_conf, site_topology
from slurmtools.site import load_site
from slurmtools.slurm.releases import RELEASES, parse_version, release_for
from slurmtools.topology.sitefile import load_fabric


@pytest.fixture(scope="module")
def example():
    site = load_site(None)
    return site, load_fabric(site.fabric_path)


def test_versions_parse_in_every_form_slurm_prints():
    assert parse_version("slurm 22.05.8") == (22, 5, 8)
    assert parse_version("25.11") == (25, 11, None)
    assert release_for("slurm 25.11.7").name == "25.11"
    assert release_for("22.5").name == "22.05"


def test_unknown_release_is_refused_in_one_line():
    with pytest.raises(ConfigError) as e:
        release_for("26.11.0")
    assert str(e.value).startswith("--slurm-version: 26.11.0: Slurm 26.11 is not a release this slurmtools knows")
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="expected a Slurm version"):
        release_for("latest")


def test_each_release_pins_its_own_data_parser():
    assert release_for("22.05").json_flag() == "--json"  # 22.05 offers no choice
    # 23.02's --json takes no argument (getopt refuses --json=v0.0.39) and writes v0.0.39, its only parser;
    # the parser name is still what picks the reader
    assert release_for("23.02").json_flag() == "--json" and release_for("23.02").json_parser == "v0.0.39"
    assert release_for("23.11").json_flag() == "--json=v0.0.40"  # 23.11 added --json=<data_parser>
    assert release_for("25.11").json_flag() == "--json=v0.0.44"
    assert release_for("slurm 26.05.5").json_flag() == "--json=v0.0.45"   # 26.05 ships v0.0.45 as its newest
    parsers = [r.json_parser for r in RELEASES.values() if r.json_parser]
    assert len(parsers) == len(set(parsers))


def test_preemption_signal_setting_per_release(example):
    site, fabric = example
    old = render_slurm_conf(site, fabric, release_for("22.05"))
    new = render_slurm_conf(site, fabric, release_for("25.11"))
    assert "SlurmctldParameters=preempt_send_user_signal" in old and "PreemptParameters" not in old
    assert "PreemptParameters=send_user_signal" in new and "preempt_send_user_signal" not in new
    assert "TopologyPlugin=topology/tree" in old and "TopologyPlugin=topology/tree" in new
    # 26.05 reads the same PreemptParameters as 25.11 (its changelog removes no preemption setting)
    newer = render_slurm_conf(site, fabric, release_for("26.05"))
    assert newer.splitlines()[0].endswith("for Slurm 26.05") and newer.splitlines()[1:] == new.splitlines()[1:]


def test_restricted_cores_written_only_where_the_release_has_them(example, tmp_path):
    site, _ = example
    src = (site.fabric_path.read_text()
           .replace('features = ["h100", "nvswitch"]', 'features = ["h100", "nvswitch"]\nrestricted_cores_per_gpu = 2'))
    f = tmp_path / "fabric.toml"
    f.write_text(src)
    fabric = load_fabric(f)
    new = render_slurm_conf(site, fabric, release_for("25.11"))
    old = render_slurm_conf(site, fabric, release_for("22.05"))
    assert new.count("RestrictedCoresPerGPU=2") == 4  # one NodeName line per leaf
    assert not any(ln.startswith("NodeName") and "RestrictedCoresPerGPU" in ln for ln in old.splitlines())
    assert "left out: Slurm 22.05 has no such parameter" in old


def test_block_topology_refused_before_24_05(example, tmp_path):
    site, fabric = example
    blocky = site.__class__(**{**site.__dict__, "partitions": {
        n: p.__class__(**{**p.__dict__, "topology": "block"}) for n, p in site.partitions.items()}})
    with pytest.raises(ConfigError, match=r"topology/block .* not supported by Slurm 22.05 \(Slurm 24.05 and later"):
        site_topology(blocky, fabric, release_for("22.05"))
    name, text = site_topology(blocky, fabric, release_for("25.11"))
    assert name == "topology.conf"
    # no multi-node NVLink domain in the example: leaf switches are the blocks, 4 nodes each, 4 under one spine
    assert "BlockName=leaf1 Nodes=gpu[01-04]" in text and "BlockSizes=4,8,16" in text
