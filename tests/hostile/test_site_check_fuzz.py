"""Random TOML-ish mutations of the example site (drop or rename keys and tables, swap value types, inf/nan, huge
integers, control characters in names and values): `site check` either accepts the file, and then every renderer
works and writes each value on its own line, or refuses it in one line naming the file, with exit 2."""

from __future__ import annotations

import json
import re
import shlex

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest

from tests.hostile.site_check_support import BASE, FABRIC, cli, edited, refusal

LINES = BASE.splitlines()
KEY_LINES = [i for i, ln in enumerate(LINES) if re.match(r"^[A-Za-z_]+\s*=", ln)]
HEADERS = [i for i, ln in enumerate(LINES) if ln.startswith("[") and "." in ln]
#: a slurm.conf line: Key=Value pairs, no value holding a space or a line break
CONF_LINE = re.compile(r"[A-Za-z]+=\S+( [A-Za-z]+=\S+)*")

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=10)
values = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**80).map(str),
    st.integers(min_value=0, max_value=5000).map(str),
    st.sampled_from(["inf", "-inf", "nan", "+nan", "1e400", "0.0", "-0.5", "true", "false", "[]", "{}", '""',
                     '"/"', '"spool"', '["h100", "h100"]', "{a = 1}", '"gpu[01-20]"', '"gpu[01-04]"', '"0s"',
                     '"production"', '"scavenger"', '["production"]', '["nobody"]', '["gpu"]', '"USR2"', '"KILL"',
                     '"٣h"', '"1d٣h"', "9" * 4400, "9" * 400, "-60", "-1.5"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.tuples(st.integers(min_value=0, max_value=10**12), st.sampled_from("smhdw")).map(lambda t: f'"{t[0]}{t[1]}"'),
    text.map(lambda s: json.dumps(s, ensure_ascii=False)),
    st.lists(text, max_size=3).map(lambda xs: json.dumps(xs, ensure_ascii=False)),
)
names = st.one_of(st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,10}", fullmatch=True),
                  text.map(lambda s: json.dumps(s, ensure_ascii=False)))


@st.composite
def mutations(draw):
    lines = list(LINES)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        kind = draw(st.sampled_from(["value", "value", "value", "drop", "rename", "header"]))
        if kind == "header":
            i = draw(st.sampled_from(HEADERS))
            table, _, _ = lines[i].strip("[]").partition(".")
            lines[i] = f"[{table}.{draw(names)}]"
            continue
        i = draw(st.sampled_from(KEY_LINES))
        key, _, _ = lines[i].partition("=")
        if kind == "value":
            lines[i] = f"{key.strip()} = {draw(values)}"
        elif kind == "drop":
            lines[i] = ""
        else:
            lines[i] = f"{draw(names)} = {lines[i].partition('=')[2].strip()}"
    return "\n".join(lines) + "\n"


def _renders_cleanly(path) -> None:
    from slurmtools.render.accounting import as_shell, render_accounts, render_qos
    from slurmtools.render.job_submit import render_job_submit
    from slurmtools.render.slurm_conf import render_slurm_conf, site_topology
    from slurmtools.site import load_site
    from slurmtools.slurm.releases import release_for
    from slurmtools.topology.sitefile import load_fabric

    site = load_site(path)
    if site.fabric_path is None:  # a site without a fabric: the renderers that need one refuse in one line
        r = cli("admin", "render", "gres-conf", "--site", str(path))
        assert r.code == 2 and r.err.strip() == (f"slurmtools: error: {site.source}: site.fabric: this command needs "
                                                 "a fabric file (site.fabric)"), (r.code, r.err)
        return
    fabric = load_fabric(site.fabric_path)
    for version in ("22.05", "25.11"):
        conf = render_slurm_conf(site, fabric, release_for(version))
        bad = [ln for ln in conf.splitlines() if ln and not ln.startswith("#") and not CONF_LINE.fullmatch(ln)]
        assert not bad, bad
        parts = [ln for ln in conf.splitlines() if ln.startswith("PartitionName=")]
        assert len(parts) == len(site.partitions)
        site_topology(site, fabric, release_for(version))
    for cmds in (render_qos(site), render_accounts(site)):
        shell = as_shell(cmds)
        assert shell.count("\n") == len(cmds), shell  # no argument holds a line break
        assert [shlex.split(ln) for ln in shell.splitlines()] == cmds
    lua = render_job_submit(site, fabric)
    assert "function slurm_job_submit(" in lua.text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(mutations())
def test_mutated_site_is_accepted_and_renders_or_refused_in_one_line(tmp_path, site_text):
    p = tmp_path / "site.toml"
    p.write_text(site_text)
    r = cli("site", "check", str(p))
    if r.code == 0:
        assert r.err == "" and ": OK" in r.out
        _renders_cleanly(p)
        return
    assert r.code == 2, (r.code, r.err)
    lines = r.err.splitlines()
    assert len(lines) == 1, r.err
    assert lines[0].startswith(f"slurmtools: error: {p}: "), lines[0]


def test_the_mutations_reach_both_outcomes(tmp_path):
    """The property above is only worth something if mutations both pass and fail: one of each, by hand."""
    ok = tmp_path / "ok.toml"
    ok.write_text(BASE.replace("priority = 1000", "priority = 4000", 1))
    assert cli("site", "check", str(ok)).code == 0
    _renders_cleanly(ok)
    bad = tmp_path / "bad.toml"
    bad.write_text(BASE.replace('[partitions.gpu]', '[partitions."gpu\\nPartitionName=evil"]', 1))
    r = cli("site", "check", str(bad))
    assert r.code == 2 and r.err.count("\n") == 1 and 'partitions."gpu\\nPartitionName=evil"' in r.err


# What the mutations above draw now and then, by hand: each once refused or misread.
@pytest.mark.parametrize("old,new,key,says", [
    ('grace_time = "5m"', 'grace_time = "٣h"', "grace_time",                   # was read as 3 hours
     'expected a duration like "5m", "2h" or "1d" in ASCII digits, got \'٣h\''),
    ('grace_time = "5m"', "grace_time = " + "9" * 400, "grace_time",            # was an OverflowError traceback
     'expected a duration like "5m", "2h" or "1d", got 9999'),
    ('grace_time = "5m"', "grace_time = -60", "grace_time",                     # suggested "-60s" or "-1m"
     'expected a duration like "5m", "2h" or "1d", got -60'),
    ("priority = 1000", "priority = " + "9" * 4400, "",                         # was a ValueError traceback
     "invalid TOML: a number too long to read (more than 4300 digits)"),
])
def test_site_values_once_misread_are_refused_in_one_line(tmp_path, old, new, key, says):
    p = edited(tmp_path, old, new)
    line = refusal("site", "check", str(p))
    assert line.startswith(f"{p}: " + (f"tiers.standard.{key}: " if key else "")), line
    assert says in line, line
    assert "-60s" not in line and "-1m" not in line


def test_a_fabric_integer_of_4400_digits_is_refused_in_one_line(tmp_path):
    fab = tmp_path / "fabric.toml"
    fab.write_text(FABRIC.read_text().replace("gpus = 8", "gpus = " + "9" * 4400, 1))
    p = edited(tmp_path, f'fabric = "{FABRIC}"', f'fabric = "{fab}"')
    assert refusal("site", "check", str(p)) == (f"{fab}: invalid TOML: a number too long to read "
                                                f"(more than 4300 digits)")
