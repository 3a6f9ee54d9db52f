"""Names the fabric file gives Slurm (switches, node features, GPU types, NICs, hosts) and the fabric's link: each
is checked when the file is loaded, as the site file's names are. Before, a blank or comma went into slurm.conf's
Feature= and NodeName=, a colon into Gres=gpu:TYPE:N, a spine named like a leaf or a link Slurm has no width for
crashed every renderer with a traceback, and a second spine of the same name replaced the first without a word."""

from __future__ import annotations

import pytest

from tests.hostile.site_check_support import cli, fabric_site, refusal

WORD = "expected a name of letters, digits, '_', '.' or '-' (what Slurm's config takes as one word)"


CASES = [
    ((('features = ["h100", "nvswitch"]', 'features = ["h100,evil", "nvswitch"]'),), "node_types.dgx-h100.features",
     f"{WORD}, got 'h100,evil'"),
    ((('gpu_type = "h100"', 'gpu_type = "h100:evil"'),), "node_types.dgx-h100.gpu_type", f"{WORD}, got 'h100:evil'"),
    ((('nics = ["mlx5_0"', 'nics = ["mlx5 0"'),), "node_types.dgx-h100.nics", f"{WORD}, got 'mlx5 0'"),
    ((('[node_types.dgx-h100]', '[node_types."dgx h100"]'),), 'node_types."dgx h100"', WORD),
    ((('name = "leaf1"', 'name = "leaf 1"'), ('leaves = ["leaf1",', 'leaves = ["leaf 1",')), "leaves[0].name",
     f"{WORD}, got 'leaf 1'"),
    ((('hosts = "gpu[01-04]"', 'hosts = "gpu 01,gpu[02-04]"'),), "leaves[0].hosts", f"host 'gpu 01': {WORD}"),
    ((('node_type = "dgx-h100"', 'node_type = "dgx-h100"\nrack = "row 1"'),), "leaves[0].rack", f"{WORD}, got 'row 1'"),
    # one switch namespace: was `ValueError: cannot link 'switch:leaf1' to itself` from every renderer
    ((('name = "spine1"', 'name = "leaf1"'),), "spines[0].name", "'leaf1' is already the name of a leaf"),
    # the second spine replaced the first: three leaves lost their uplinks in topology.conf
    ((('uplinks_per_leaf = 16', 'uplinks_per_leaf = 16\n\n[[spines]]\nname = "spine1"\nleaves = ["leaf1"]'),),
     "spines[1].name", "duplicate spine name 'spine1'"),
]


@pytest.mark.parametrize("edits,key,words", CASES, ids=[c[1] for c in CASES])
def test_fabric_names(tmp_path, edits, key, words):
    site, fab = fabric_site(tmp_path, *edits)
    line = refusal("site", "check", str(site))
    assert line == f"{fab}: {key}: {words}"
    assert refusal("admin", "render", "slurm-conf", "--slurm-version", "25.11", "--site", str(site)) == line


@pytest.mark.parametrize("link", ["0xNDR", "3xNDR", "99999999999999999999xNDR", "٤xNDR"])
def test_a_link_slurm_has_no_width_for(tmp_path, link):
    """The loader read these (any digits); building the topology then refused them with a ValueError traceback."""
    site, fab = fabric_site(tmp_path, ('link = "4xNDR"', f'link = "{link}"'))
    line = refusal("site", "check", str(site))
    assert line == (f'{fab}: fabric.link: expected an IB link like "4xNDR" (widths 1, 2, 4, 8, 12; speeds SDR, DDR, '
                    f"QDR, FDR10, FDR, EDR, HDR, NDR, XDR), got {link!r}")
    assert refusal("admin", "render", "topology-conf", "--slurm-version", "25.11", "--site", str(site)) == line
    assert refusal("topo", "show", str(fab)) == line


def test_hosts_of_a_gpu_type_the_partition_does_not_have(tmp_path):
    """slurm.conf got Gres=gpu:a100:8 on a partition whose plans, prices and policies all say h100."""
    site, fab = fabric_site(tmp_path, ('gpu_type = "h100"', 'gpu_type = "a100"'))
    line = refusal("site", "check", str(site))
    assert line == (f"{site}: partitions.gpu.nodes: gpu01 has a100 GPUs (node type dgx-h100 in {fab}), not a GPU "
                    "type of the partition (gpu_types: h100)")
    assert refusal("plan", "--site", str(site), "--gpus", "8", "--user", "alice", "--slurm-version", "25.11",
                   "--idle", "--", "python", "x.py") == line


def test_names_slurm_takes_still_pass(tmp_path):
    site, _ = fabric_site(tmp_path, ('features = ["h100", "nvswitch"]', 'features = ["h100", "nv.switch_2-a"]'),
                          ('name = "spine1"', 'name = "spine.1"'), ('link = "4xNDR"', 'link = "4xndr"'))
    r = cli("admin", "render", "slurm-conf", "--slurm-version", "25.11", "--site", str(site))
    assert r.code == 0, r.err
    assert "Feature=h100,nv.switch_2-a,leaf1 " in r.out
