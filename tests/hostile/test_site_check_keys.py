"""Unknown or misspelt keys and policy names: never ignored, the error names the key and the keys that exist."""

from __future__ import annotations

import pytest

from tests.hostile.site_check_support import cli, edited, refusal


@pytest.mark.parametrize("old,new,key,words", [
    ("require_gpu_type = true", "require_gpu_typo = true", "policy.require_gpu_typo",
     "unknown key (did you mean require_gpu_type?; keys here: require_gpu_type, require_checkpoint_signal, "
     "cpu_mem_tolerance, "),
    ("[policy]", "[policy]\nmax_gpu_per_type = {h100 = 8}", "policy.max_gpu_per_type",
     "unknown key (did you mean max_gpus_per_type?"),
    ("[site]", "[site]\nfabrik = \"x\"", "site.fabrik", "unknown key (did you mean fabric?"),
    ("[accounts.students]", "[acounts.students]", "acounts",
     "unknown key (did you mean accounts?; keys here: site, gpu_types, partitions, tiers, accounts, policy"),
    ("max_nodes = 8", "max_node = 8", "tiers.production.max_node", "unknown key (did you mean max_nodes?"),
    ("[policy]", "[policy]\nfriday_limit = 4", "policy.friday_limit",
     "a plugin's settings go in [policy.<its name>] once enabled lists it"),
])
def test_unknown_keys_are_named_with_the_keys_that_exist(tmp_path, old, new, key, words):
    p = edited(tmp_path, old, new)
    line = refusal("site", "check", str(p))
    assert line.startswith(f"{p}: {key}: "), line
    assert words in line, line


def test_unknown_policy_name(tmp_path):
    p = edited(tmp_path, "[policy]", '[policy]\nenabled = ["routing", "budgte"]')
    line = refusal("site", "check", str(p))
    assert line.startswith(f"{p}: policy.enabled: unknown policy 'budgte' (known: routing, partition_gpus, budget, "), line


def test_policy_settings_are_checked_by_site_check(tmp_path):
    """A built-in policy's own table is read when the site is loaded, not first by `submit`."""
    p = edited(tmp_path, "[policy]", "[policy.max_gpus_per_type]\nb200 = 4\n\n[policy]")
    line = refusal("site", "check", str(p))
    assert line == f"{p}: policy.max_gpus_per_type.b200: unknown GPU type 'b200' (known: h100)"


def test_a_plugin_table_needs_the_plugin_enabled(tmp_path):
    p = edited(tmp_path, "[policy]", "[policy.no_friday]\nlimit = 4\n\n[policy]")
    line = refusal("site", "check", str(p))
    assert line.startswith(f"{p}: policy.no_friday: unknown key"), line


def test_a_key_with_control_characters_is_shown_escaped(tmp_path):
    p = edited(tmp_path, "[policy]", '[policy]\n"require\\ngpu" = true')
    line = refusal("site", "check", str(p))
    assert line.startswith(f'{p}: policy."require\\ngpu": unknown key'), line


def test_the_bundled_example_passes():
    r = cli("site", "check")
    assert r.code == 0, r.err
    assert "tier standard (priority 100): preemptible by production after 5m" in r.out


def test_an_enabled_plugin_reads_its_own_table(tmp_path, monkeypatch):
    """A plugin's settings are `[policy.<its name>]`; the plugin's configure() runs at load and may refuse them."""
    import textwrap

    from slurmtools.site import load_site

    (tmp_path / "st_rules.py").write_text(textwrap.dedent('''
        from slurmtools.errors import ConfigError
        from slurmtools.policy import Decision, Policy
        class Limit(Policy):
            def configure(self, site, fabric):
                n = site.policy.extra.get("st_limit", {}).get("limit", 8)
                if not isinstance(n, int):
                    raise ConfigError(str(site.source), "policy.st_limit.limit", f"expected an integer, got {n!r}")
                return {"limit": n}
            def check(self, request, ctx):
                return Decision.allow()
    '''))
    dist = tmp_path / "st_rules-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: st-rules\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[slurmtools.policies]\nst_limit = st_rules:Limit\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    p = edited(tmp_path, "[policy]", '[policy.st_limit]\nlimit = 4\n\n[policy]\nenabled = ["routing", "st_limit"]')
    assert load_site(p).policy.extra["st_limit"] == {"limit": 4}
    p.write_text(p.read_text().replace("limit = 4", 'limit = "four"'))
    assert refusal("site", "check", str(p)) == f"{p}: policy.st_limit.limit: expected an integer, got 'four'"
