"""Lists in the site and fabric files are sets of names: a name listed twice is a typo for another name, and an empty
list where one name at least is needed once crashed a command or dropped what it declared. Each is refused in one
line naming file and key, exit 2."""

from __future__ import annotations

import pytest

from tests.hostile.site_check_support import BASE, FABRIC, edited, refusal

SITE = [
    # was a ValueError traceback (max() of no partitions) in `site check` and every command that loads the site
    ('max_nodes = 8', 'max_nodes = 8\npartitions = []', "tiers.production.partitions",
     "an empty list: name at least one partition (or leave the key out for every partition)"),
    # a window of no days never applied, silently
    ('[advise]', '[slack]\n[[slack.windows]]\nname = "night"\nstart = "22:00"\nend = "06:00"\nfactor = 0.5\n'
                 'days = []\n\n[advise]', "slack.windows[0].days",
     "an empty list: name at least one day (or leave the key out for every day)"),
    ('users = ["carol"]', 'users = ["carol", "carol"]', "accounts.students.users", "'carol' is listed twice"),
    ('tiers = ["standard", "scavenger"]', 'tiers = ["standard", "standard"]', "accounts.students.tiers",
     "'standard' is listed twice"),
    ('preempted_by = ["production"]', 'preempted_by = ["production", "production"]', "tiers.standard.preempted_by",
     "'production' is listed twice"),
    ('gpu_types = ["h100"]', 'gpu_types = ["h100", "h100"]', "partitions.gpu.gpu_types", "'h100' is listed twice"),
    ('[policy]', '[policy]\nenabled = ["routing", "routing"]', "policy.enabled", "'routing' is listed twice"),
]


@pytest.mark.parametrize("old,new,key,words", SITE, ids=[c[2] for c in SITE])
def test_site_lists(tmp_path, old, new, key, words):
    p = edited(tmp_path, old, new)
    assert refusal("site", "check", str(p)) == f"{p}: {key}: {words}"


FABRIC_CASES = [
    # a spine with no leaves was left out of topology.conf without a word
    (('leaves = ["leaf1", "leaf2", "leaf3", "leaf4"]', 'leaves = []'), "spines[0].leaves",
     "an empty list: name the leaves under this spine"),
    (('leaves = ["leaf1", "leaf2", "leaf3", "leaf4"]', 'leaves = ["leaf1", "leaf1", "leaf3", "leaf4"]'),
     "spines[0].leaves", "'leaf1' is listed twice"),
    (('nics = ["mlx5_0", "mlx5_1"', 'nics = ["mlx5_0", "mlx5_0"'), "node_types.dgx-h100.nics",
     "'mlx5_0' is listed twice"),
    (('features = ["h100", "nvswitch"]', 'features = ["h100", "h100"]'), "node_types.dgx-h100.features",
     "'h100' is listed twice"),
    # a leaf or rack of no hosts
    (('hosts = "gpu[01-04]"', 'hosts = ""'), "leaves[0].hosts", "expected a Slurm hostlist like \"gpu[01-04]\", got ''"),
    (('uplinks_per_leaf = 16', 'uplinks_per_leaf = 16\n\n[[racks]]\nname = "r1"\nhosts = ""'), "racks[0].hosts",
     "expected a Slurm hostlist like \"gpu[01-04]\", got ''"),
]


@pytest.mark.parametrize("edit,key,words", FABRIC_CASES, ids=[c[1] + ":" + c[0][1][:20] for c in FABRIC_CASES])
def test_fabric_lists(tmp_path, edit, key, words):
    text = FABRIC.read_text()
    assert edit[0] in text
    fab = tmp_path / "fabric.toml"
    fab.write_text(text.replace(edit[0], edit[1], 1))
    site = edited(tmp_path, f'fabric = "{FABRIC}"', f'fabric = "{fab}"', text=BASE)
    line = refusal("site", "check", str(site))
    assert line == f"{fab}: {key}: {words}"
    assert refusal("admin", "render", "topology-conf", "--slurm-version", "25.11", "--site", str(site)) == line
