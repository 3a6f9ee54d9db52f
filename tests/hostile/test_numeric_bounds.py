"""Finite numbers past what their key can mean, and empty names the reports show. Before: `price_per_gpu_hour =
1e308` made every cost inf ("Cost inf USD" in summary.md, null in report.json), `cpu_mem_tolerance = 1e308` broke
`admin render job-submit` with a traceback (inf in Lua), `nvlink_gbytes_per_link = 1e308` put Infinity (not JSON)
in `plan --json`, a 10**30 `uplinks_per_leaf` showed 2e+36 GB/s uplinks, a huge `min_runs` or `time_ratio` silently
turned advise's rules off, `lookback = "99999999d"` was an OverflowError in `advise`, and `currency = ""` left
every cost without its unit. Each is refused in one line naming file and key, with the bound stated."""

from __future__ import annotations

import pytest

from tests.hostile.site_check_support import cli, edited, refusal
from tests.hostile.test_fabric_names import fabric_site

BIG = "9" * 30
EXACT = "is more than the reports' float sums hold exactly, 2**53 (9007199254740992)"

SITE_CASES = [
    ('price_per_gpu_hour = 2.40', 'price_per_gpu_hour = 1e308', "gpu_types.h100.price_per_gpu_hour",
     f"1e+308 {EXACT}"),
    ('monthly_gpu_hours = 20000', 'monthly_gpu_hours = 1e308', "accounts.vision.monthly_gpu_hours",
     f"1e+308 {EXACT}"),
    ('[policy]', '[energy]\nprice_per_kwh = 1e300\n\n[policy]', "energy.price_per_kwh", f"1e+300 {EXACT}"),
    ('[policy]', '[energy]\ncarbon_kg_per_kwh = 1e300\n\n[policy]', "energy.carbon_kg_per_kwh", f"1e+300 {EXACT}"),
    ('memory_bandwidth_gbs = 3350', 'memory_bandwidth_gbs = 1e308', "gpu_types.h100.memory_bandwidth_gbs",
     f"1e+308 {EXACT}"),
    ('memory_gb = 80', f'memory_gb = {BIG}', "gpu_types.h100.memory_gb",
     "is more than Slurm's gres/gpumem (uint64 bytes) holds in GB (17179869183)"),
    ('memory_gb = 80', f'memory_gb = 80\nshards_per_gpu = {BIG}', "gpu_types.h100.shards_per_gpu",
     "is more than Slurm's gres.conf shard Count= holds per GPU of a 1024-GPU node (9007199254740991)"),
    ('cpu_mem_tolerance = 1.0', 'cpu_mem_tolerance = 1e308', "policy.cpu_mem_tolerance",
     "1e+308 is more than the most GPUs a node has, at which one GPU may take the whole node (1024)"),
    ('min_runs = 3', f'min_runs = {BIG}', "advise.min_runs",
     "is more than the job ids one Slurm cluster has, MAX_JOB_ID (67108863)"),
    ('time_ratio = 2.0', 'time_ratio = 1e308', "advise.time_ratio",
     "1e+308 is more than the longest Slurm time limit over a run of 1 s (2147483580)"),
    ('min_runs = 3', 'min_runs = 3\nlookback = "99999999d"', "advise.lookback",
     "99999999d back from now is before 1970, where Slurm's accounting begins"),
    ('currency = "USD"', 'currency = ""', "site.currency",
     "an empty currency: the reports' costs would have no unit; name it (e.g. \"EUR\"), or leave the key out for USD"),
    ('name = "example"', 'name = " "', "site.name",
     "an empty name: the site's name heads its reports and job_submit.lua; name the site"),
    # [slack]: the site took poll_interval = "99999999999999d", which the cached signal's reader then refused
    ('[policy]', '[slack]\npoll_interval = "24856d"\n\n[policy]', "slack.poll_interval",
     "expected at most 2147483580s, Slurm's longest time limit (no job would see a second poll), got 2147558400s"),
    ('[policy]', '[slack]\nmax_age = "24856d"\n\n[policy]', "slack.max_age",
     "expected at most 2147483580s, Slurm's longest time limit (a signal that old is never stale to any job), got "
     "2147558400s"),
    ('[policy]', f'[slack]\npolls = {BIG}\n\n[policy]', "slack.polls",
     "is more than the polls a second apart in Slurm's longest time limit (2147483580)"),
]


@pytest.mark.parametrize("old,new,key,words", SITE_CASES, ids=[c[2] for c in SITE_CASES])
def test_site_numbers_past_their_bound(tmp_path, old, new, key, words):
    p = edited(tmp_path, old, new)
    line = refusal("site", "check", str(p))
    assert line.startswith(f"{p}: {key}: ") and line.endswith(words), line


def test_the_bounds_themselves_pass(tmp_path):
    """The bound is the largest value taken, not lower."""
    p = edited(tmp_path, 'price_per_gpu_hour = 2.40', 'price_per_gpu_hour = 9007199254740992\nshards_per_gpu = '
                                                      '9007199254740991')
    p.write_text(p.read_text().replace("cpu_mem_tolerance = 1.0", "cpu_mem_tolerance = 1024")
                 .replace("min_runs = 3", "min_runs = 67108863").replace("time_ratio = 2.0", "time_ratio = 2147483580"))
    p.write_text(p.read_text().replace("[policy]", '[slack]\npoll_interval = "2147483580s"\nmax_age = '
                                                   '"2147483580s"\npolls = 2147483580\n\n[policy]', 1))
    r = cli("site", "check", str(p))
    assert r.code == 0, r.err


FABRIC_CASES = [
    ('nvlinks_per_gpu = 18', 'nvlinks_per_gpu = 18\nnvlink_gbytes_per_link = 1e308',
     "node_types.dgx-h100.nvlink_gbytes_per_link",
     "1e+308 is more than ten times NVLink 5's 50 GB/s per link and direction (500)"),
    # was "NVLink speed of GPU type 'h100' is not known to slurmtools", for a GPU type whose speed is known
    ('nvlinks_per_gpu = 18', 'nvlinks_per_gpu = 18\nnvlink_gbytes_per_link = -25',
     "node_types.dgx-h100.nvlink_gbytes_per_link", "expected GB/s per link and direction above 0, got -25"),
    ('uplinks_per_leaf = 16', f'uplinks_per_leaf = {BIG}', "spines[0].uplinks_per_leaf",
     "is more than the ports of one switch (1024)"),
]


@pytest.mark.parametrize("old,new,key,words", FABRIC_CASES, ids=[c[2] + c[1][-6:] for c in FABRIC_CASES])
def test_fabric_numbers_past_their_bound(tmp_path, old, new, key, words):
    site, fab = fabric_site(tmp_path, (old, new))
    line = refusal("site", "check", str(site))
    assert line.startswith(f"{fab}: {key}: ") and line.endswith(words), line
