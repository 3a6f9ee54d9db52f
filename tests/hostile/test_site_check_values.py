"""Values that read as the right type but crash a command later or render what Slurm refuses or misreads: each is
refused by `site check` (and by every command that loads the site) in one line naming file and key, exit 2."""

from __future__ import annotations

import pytest

from tests.hostile.site_check_support import edited, refusal

CASES = [
    # inf / nan anywhere a number is read
    ('price_per_gpu_hour = 2.40', 'price_per_gpu_hour = nan', "gpu_types.h100.price_per_gpu_hour",
     "expected a finite number, got nan"),
    ('monthly_gpu_hours = 20000', 'monthly_gpu_hours = inf', "accounts.vision.monthly_gpu_hours",
     "expected a finite number, got inf"),
    ('cpu_mem_tolerance = 1.0', 'cpu_mem_tolerance = nan', "policy.cpu_mem_tolerance",
     "expected a finite number, got nan"),
    # an integer past a float's range where a number is read (was an OverflowError traceback; the mutation test
    # found it)
    ('cpu_mem_tolerance = 1.0', 'cpu_mem_tolerance = ' + '9' * 400, "policy.cpu_mem_tolerance",
     "expected a finite number, got 9999"),
    ('grace_time = "5m"', 'grace_time = inf', "tiers.standard.grace_time",
     'expected a duration like "5m", "2h" or "1d", got inf'),
    ('grace_time = "5m"', 'grace_time = -inf', "tiers.standard.grace_time",
     'expected a duration like "5m", "2h" or "1d", got -inf'),
    # a bare number is minutes in sbatch --time but seconds in GraceTime: the unit must be written
    ('grace_time = "5m"', 'grace_time = 300', "tiers.standard.grace_time",
     'grace_time = 300: say the unit, e.g. "300s" or "5m"'),
    ('max_time = "2d"', 'max_time = "2880"', "partitions.gpu.max_time",
     'max_time = "2880": say the unit, e.g. "2880s" or "48m"'),
    ('signal_lead = "5m"', 'signal_lead = 7.5', "tiers.standard.signal_lead",
     'signal_lead = 7.5: say the unit, e.g. "7.5s" or "7.5m"'),
    # past what Slurm accepts
    ('signal_lead = "5m"', 'signal_lead = "20h"', "tiers.standard.signal_lead",
     "72000 s is more than Slurm's --signal lead allows (65535 s)"),
    ('grace_time = "5m"', 'grace_time = "100000d"', "tiers.standard.grace_time",
     "8640000000 s is more than Slurm's QoS GraceTime holds (2147483647 s)"),
    ('priority = 1000', 'priority = 12345678901234567890123', "tiers.production.priority",
     "12345678901234567890123 is more than Slurm's QoS Priority holds (2147483647)"),
    ('max_walltime = "2d"', 'max_walltime = "30000d"', "tiers.production.max_walltime",
     "2592000000 s is more than Slurm's time limits hold (2147483580 s)"),
    ('max_gpus_per_job = 64', 'max_gpus_per_job = 99999999999999999999', "tiers.production.max_gpus_per_job",
     "99999999999999999999 is more than Slurm's counts hold (4294967293)"),
    ('max_time = "2d"', 'max_time = "99999999999999999999999999999999999999999999999999999999999999999999999d"',
     "partitions.gpu.max_time", "is more than Slurm's time limits hold (2147483580 s)"),
    # zero wall times
    ('max_walltime = "1d"', 'max_walltime = "0s"', "tiers.standard.max_walltime",
     "0 s: a time limit must be at least 1 minute (Slurm counts time limits in whole minutes)"),
    ('max_time = "2d"', 'max_time = "0s"', "partitions.gpu.max_time",
     "0 s: a time limit must be at least 1 minute (Slurm counts time limits in whole minutes)"),
    # a tier longer than every partition it runs on
    ('max_walltime = "2d"', 'max_walltime = "9d"', "tiers.production.max_walltime",
     "9d is longer than the longest max_time of the tier's partitions (gpu: 2d)"),
    # the spool folder
    ('spool_dir = "/var/spool/slurmtools"', 'spool_dir = ""', "site.spool_dir",
     "expected an absolute folder like \"/var/spool/slurmtools\", got ''"),
    ('spool_dir = "/var/spool/slurmtools"', 'spool_dir = "spool"', "site.spool_dir",
     "expected an absolute folder like \"/var/spool/slurmtools\", got 'spool'"),
    ('spool_dir = "/var/spool/slurmtools"', 'spool_dir = "/"', "site.spool_dir",
     "expected a folder of its own, not '/'"),
    ('spool_dir = "/var/spool/slurmtools"', 'spool_dir = "/var/spool/../../etc"', "site.spool_dir",
     "expected a plain absolute folder (no '.', '..' or '//'), got '/var/spool/../../etc'"),
    # names: a newline splits the rendered slurm.conf line; control characters anywhere
    ('[partitions.gpu]', '[partitions."gpu\\n"]', 'partitions."gpu\\n"',
     "names must start with a letter and hold only letters, digits, _ or -"),
    ('[tiers.standard]', '[tiers."standard\\u0000"]', 'tiers."standard\\u0000"',
     "names must start with a letter and hold only letters, digits, _ or -"),
    ('description = "Computer vision group"', 'description = "Computer\\nvision"', "accounts.vision.description",
     "control character '\\n' in 'Computer\\nvision'"),
    ('users = ["bob", "labuser"]', 'users = ["bob", "evil\\rroot"]', "accounts.nlp.users",
     "control character '\\r' in 'evil\\rroot'"),
    ('users = ["bob", "labuser"]', 'users = ["bob", "two words"]', "accounts.nlp.users",
     "'two words' is not a user name (letters, digits, _ . - and a leading letter or _)"),
    ('cluster_name = "lab"', 'cluster_name = "lab cluster"', "site.cluster_name",
     "names must start with a letter and hold only letters, digits, _ or -"),
]


@pytest.mark.parametrize("old,new,key,words", CASES, ids=[c[2] + ":" + c[1][:24] for c in CASES])
def test_site_check_refuses(tmp_path, old, new, key, words):
    p = edited(tmp_path, old, new)
    line = refusal("site", "check", str(p))
    assert line.startswith(f"{p}: {key}: "), line
    assert words in line, line


@pytest.mark.parametrize("cmd", [("admin", "render", "qos"), ("admin", "render", "slurm-conf", "--slurm-version",
                                                                  "25.11"), ("admin", "render", "accounts")])
def test_every_command_that_loads_the_site_refuses_the_same(tmp_path, cmd):
    p = edited(tmp_path, 'priority = 1000', 'priority = 12345678901234567890123')
    same = refusal("site", "check", str(p))
    assert refusal(*cmd, "--site", str(p)) == same


def test_plan_refuses_the_same(tmp_path):
    p = edited(tmp_path, '[partitions.gpu]', '[partitions."gpu\\n"]')
    same = refusal("site", "check", str(p))
    assert refusal("plan", "--site", str(p), "--gpus", "8", "--user", "alice", "--slurm-version", "25.11", "--",
                   "python", "x.py") == same


def test_limits_at_the_edge_pass(tmp_path):
    """The largest values Slurm accepts are accepted (the limits are Slurm's, not lower)."""
    p = edited(tmp_path, 'signal_lead = "2m"', 'signal_lead = "65535s"')
    p.write_text(p.read_text().replace("priority = 1000", "priority = 2147483647")
                 .replace('grace_time = "5m"', 'grace_time = "2147483647s"'))
    from tests.hostile.site_check_support import cli

    r = cli("site", "check", str(p))
    assert r.code == 0, r.err
    assert "tier production (priority 2147483647)" in r.out
