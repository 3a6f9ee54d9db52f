"""The site file's `[advise]` table and the GPU type fields advise reads: defaults, and one line naming the key
for each bad value."""

from __future__ import annotations

import pytest

from slurmtools.errors import ConfigError
from slurmtools.site import load_site
from slurmtools.site.model import AdviseSettings
from tests.unit.advise.sites import site_file


def test_defaults_and_stated_values(tmp_path):
    s = load_site(site_file(tmp_path, extra='[advise]\nmin_runs = 5\nlookback = "14d"\nmail = true\n'
                                            'mail_domain = "example.org"\n',
                            gpu_extra='memory_bandwidth_gbs = 3350\nmig_profiles = ["1g.10gb", "3g.40gb"]\n'
                                      'shards_per_gpu = 4\nmps = true'))
    assert s.advise == AdviseSettings(min_runs=5, lookback=14 * 86400, mail=True, mail_domain="example.org")
    g = s.gpu_types["h100"]
    assert (g.memory_bandwidth_gbs, g.mig_profiles, g.shards_per_gpu, g.mps) == (3350.0, ("1g.10gb", "3g.40gb"), 4,
                                                                                  True)
    assert load_site(site_file(tmp_path, name="plain.toml")).advise == AdviseSettings(min_runs=3, runs_share=0.8,
                                                                                     time_ratio=2.0)


@pytest.mark.parametrize("extra,gpu_extra,key,words", [
    ("[advise]\nruns_share = 1.5\n", "", "advise.runs_share", "expected a share above 0 and at most 1"),
    ("[advise]\ngpu_idle_pct = 120\n", "", "advise.gpu_idle_pct", "expected a percentage from 0 to 100, got 120"),
    ("[advise]\nmin_runs = 0\n", "", "advise.min_runs", "expected an integer >= 1, got 0"),
    ("[advise]\ntime_ratio = 0.5\n", "", "advise.time_ratio", "expected a number >= 1.0"),
    ("[advise]\ntime_ratio = 1.2\n", "", "advise.time_headroom", "is above time_ratio (1.2)"),
    ("[advise]\nlookback = 30\n", "", "advise.lookback", 'say the unit'),
    ("[advise]\nlookback = \"5m\"\n", "", "advise.lookback", "expected at least an hour of history"),
    ("[advise]\nmail = \"yes\"\n", "", "advise.mail", "expected true or false"),
    ("[advise]\nmail_domain = \"a b\"\n", "", "advise.mail_domain", 'expected a domain like "example.org"'),
    ("[advise]\nrun_share = 0.5\n", "", "advise.run_share", "unknown key (did you mean runs_share?"),
    ("", 'mig_profiles = ["1g10gb"]', "gpu_types.h100.mig_profiles", 'like "1g.10gb" or "3g.40gb", got \'1g10gb\''),
    ("", 'mig_profiles = ["7g.160gb"]', "gpu_types.h100.mig_profiles", "7g.160gb holds more memory than the GPU's "
                                                                       "memory_gb (80)"),
    ("", "memory_bandwidth_gbs = 0", "gpu_types.h100.memory_bandwidth_gbs", "expected a bandwidth in GB/s above 0"),
    ("", "shards_per_gpu = -1", "gpu_types.h100.shards_per_gpu", "expected an integer >= 0"),
])
def test_bad_values_are_one_line_naming_the_key(tmp_path, extra, gpu_extra, key, words):
    with pytest.raises(ConfigError) as e:
        load_site(site_file(tmp_path, extra=extra, gpu_extra=gpu_extra))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{tmp_path / 'site.toml'}: {key}: "), msg
    assert words in msg, msg
