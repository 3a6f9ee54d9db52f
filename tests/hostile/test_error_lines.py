"""Every error the CLI prints is one line, whatever characters a hostile name carries (issue 12).

The site fuzz found a key named "\\x85" (NEL, a line break to str.splitlines, editors and log viewers) splitting the
CLI's one-line error in two; the class is any character that breaks or hides a line, in any error message."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from slurmtools.errors import ConfigError, one_line
from tests.hostile.site_check_support import cli, edited


@given(st.text())
def test_one_line_never_breaks_and_keeps_printable_text(text):
    shown = one_line(text)
    assert len(shown.splitlines()) <= 1
    assert shown.isprintable()
    if text.isprintable():
        assert shown == text  # names in plain text are shown as written, accents and all


def test_config_error_with_line_breaks_in_the_key_prints_escaped():
    e = ConfigError("site.toml", 'site."\u2028x"', "unknown key")
    assert one_line(str(e)) == 'site.toml: site."\\u2028x": unknown key'


def test_cli_error_naming_a_key_with_nel_is_one_line(tmp_path):
    p = edited(tmp_path, "[site]\n", '[site]\n"\\u0085" = "lab"\n')
    r = cli("site", "check", str(p))
    assert r.code == 2
    assert r.err.splitlines() == [f'slurmtools: error: {p}: site."\\x85": unknown key (keys here: name, '
                                  "cluster_name, spool_dir, currency, default_tier, fabric)"], r.err
