"""Site file loading: the bundled example, the lookup order, and one-line errors that name file and key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmtools.errors import ConfigError
from slurmtools.resources import example_site
from slurmtools.site import find_site_path, load_site

EXAMPLE = example_site().read_text()


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "site.toml"
    p.write_text(text)
    return p


def test_example_site_is_realistic():
    s = load_site(example_site())
    assert [t.name for t in s.tiers_by_priority()] == ["production", "standard", "scavenger"]
    assert not s.tiers["production"].preemptible
    assert s.tiers["standard"].preempted_by == ("production",) and s.tiers["standard"].grace_time == 300
    assert set(s.tiers["scavenger"].preempted_by) == {"production", "standard"}
    assert s.tiers["scavenger"].grace_time == 60
    assert s.preempts("production") == ["standard", "scavenger"]
    assert s.gpu_types["h100"].price_per_gpu_hour > 0
    assert all(a.monthly_gpu_hours for a in s.accounts.values())
    assert s.default_partition.name == "gpu"
    assert s.fabric_path and s.fabric_path.exists()


def test_lookup_order(tmp_path, monkeypatch):
    p = write(tmp_path, EXAMPLE.replace('name = "example"', 'name = "other"'))
    monkeypatch.setenv("SLURMTOOLS_SITE", str(p))
    assert find_site_path(None) == p
    assert find_site_path("/explicit.toml") == Path("/explicit.toml")
    monkeypatch.delenv("SLURMTOOLS_SITE")
    if not Path("/etc/slurmtools/site.toml").exists():
        assert find_site_path(None) == example_site()


@pytest.mark.parametrize("old,new,key,words", [
    ('grace_time = "5m"', 'grace_time = "soon"', "tiers.standard.grace_time",
     'expected a duration like "5m", "2h" or "1d", got \'soon\''),
    ('priority = 100\n', 'priority = "high"\n', "tiers.standard.priority", "expected an integer"),
    ('preempted_by = ["production"]', 'preempted_by = ["gold"]', "tiers.standard.preempted_by", "unknown tier 'gold'"),
    ('default_tier = "standard"', 'default_tier = "bronze"', "site.default_tier", "unknown tier 'bronze'"),
    ('nodes = "gpu[01-16]"', 'nodes = "gpu[01-"', "partitions.gpu.nodes", "Slurm hostlist"),
    ('over_budget = "scavenger"', 'over_budget = "shrug"', "accounts.vision.over_budget", "expected one of reject, scavenger"),
    ('max_gpus_per_job = 64', 'max_gpus_per_jb = 64', "tiers.production.max_gpus_per_jb", "unknown key"),
    ('price_per_gpu_hour = 2.40', 'price_per_gpu_hour = -1', "gpu_types.h100.price_per_gpu_hour", "expected a number >= 0"),
])
def test_errors_name_file_and_key(tmp_path, old, new, key, words):
    assert old in EXAMPLE
    p = write(tmp_path, EXAMPLE.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        load_site(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}: {key}: "), msg
    assert words in msg
    assert "\n" not in msg


def test_preempting_tier_needs_higher_priority(tmp_path):
    p = write(tmp_path, EXAMPLE.replace("priority = 1000", "priority = 50", 1))
    with pytest.raises(ConfigError, match="must have a higher priority"):
        load_site(p)


def test_invalid_toml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_site(write(tmp_path, "[site\nname="))
    with pytest.raises(ConfigError, match="file not found"):
        load_site(tmp_path / "nope.toml")


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "slurmtools", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def test_site_check_cli_ok_and_error(tmp_path):
    ok = _cli("site", "check")
    assert ok.returncode == 0, ok.stderr
    assert "tier standard (priority 100): preemptible by production after 5m" in ok.stdout
    assert "16 hosts, 128 GPUs, 4 leaf switches" in ok.stdout
    bad = write(tmp_path, EXAMPLE.replace('grace_time = "5m"', 'grace_time = "soon"'))
    r = _cli("site", "check", str(bad))
    assert r.returncode == 2
    assert r.stderr.strip() == (f"slurmtools: error: {bad}: tiers.standard.grace_time: "
                                "expected a duration like \"5m\", \"2h\" or \"1d\", got 'soon'")
    assert "Traceback" not in r.stderr


def test_cli_without_slurm_says_so_in_one_line():
    r = _cli("cluster", "show", env={"SLURM_CONF": "/nonexistent/slurm.conf", "PATH": "/usr/bin:/bin"})
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("slurmtools: error: "), r.stderr


def test_version_and_help_are_cheap():
    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("slurmtools ")
    # --help must not import the heavy libraries
    code = ("import sys; sys.argv=['slurmtools','--help']\n"
            "from slurmtools.cli.main import app\n"
            "try:\n    app()\nexcept SystemExit:\n    pass\n"
            "heavy=[m for m in ('pandas','networkx','jinja2','matplotlib','pyarrow') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("table, key, what", [("tiers", "Production", "QoS"), ("accounts", "Vision", "account")])
def test_names_that_differ_only_in_case_are_one_to_slurm(tmp_path, table, key, what):
    """slurmdbd keeps QoS and account names in lower case: `Production` beside `production` would be folded into it
    by sacctmgr, so the site file is refused, naming both."""
    body = EXAMPLE.split(f"[{table}.{key.lower()}]", 1)[1].split("\n[", 1)[0]
    p = write(tmp_path, EXAMPLE + f"\n[{table}.{key}]{body}\n")
    with pytest.raises(ConfigError) as err:
        load_site(p)
    assert str(err.value) == (f'{p}: "{table}.{key}": the same {what} as {table}.{key.lower()} to Slurm, which keeps '
                              f"{what} names in lower case; give it a name of its own")
