"""A report sets the dump's GPU-hours against the site's capacity: a dump of another cluster, or one whose GPU
runs ran on hosts the site does not hold, made a report of numbers that were not this cluster's with exit 0 (a
real third-party dump, `Cluster=cluster` on node gpu-10, against the bundled example site). Now: another
cluster is refused, every GPU run outside the site's partitions is refused, some of them is a note."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.reports.capacity import hosts_outside

DUMP = Path(__file__).resolve().parents[2] / "data" / "reports" / "sacct-handwritten-25.11-units-G-P.txt"
runner = CliRunner()


def _report(tmp_path, text: str):
    p = tmp_path / "dump.txt"
    p.write_text(text)
    r = runner.invoke(app, ["report", "--sacct-file", str(p), "--since", "2026-11-02", "--until", "2026-11-03",
                            "--out", str(tmp_path / "out"), "--format", "json", "-q", "--epilog-dir",
                            str(tmp_path / "none")])
    return p, r


def test_the_sites_own_dump_reports_as_before(tmp_path):
    _p, r = _report(tmp_path, DUMP.read_text())
    assert r.exit_code == 0, r.output
    notes = json.loads((tmp_path / "out" / "report.json").read_text())["notes"]
    assert not [n for n in notes if "capacity does not hold" in n]


def test_a_dump_of_another_cluster_is_refused(tmp_path):
    p, r = _report(tmp_path, DUMP.read_text().replace("|lab|", "|cluster|"))
    assert r.exit_code != 0
    assert str(r.exception).startswith(f"{p}: its runs are of cluster cluster, not of lab, the cluster the site file")
    assert "(cluster_name): report it with that cluster's site file (--site)" in str(r.exception)


def test_gpu_runs_on_hosts_the_site_lacks(tmp_path):
    # every GPU run elsewhere: nothing of the report would be this cluster's
    p, r = _report(tmp_path, DUMP.read_text().replace("|gpu01|", "|gpu-10|").replace("|gpu02|", "|gpu-11|"))
    assert r.exit_code != 0
    assert str(r.exception).startswith(f"{p}: none of its GPU runs ran on a node of the site's partitions (its "
                                       "hosts gpu-[10-11] are not among them")
    # one of them elsewhere (a node retired since): counted, and said
    _p, r = _report(tmp_path, DUMP.read_text().replace("|gpu02|", "|gpu-11|"))
    assert r.exit_code == 0, r.output
    notes = json.loads((tmp_path / "out" / "report.json").read_text())["notes"]
    assert "1 of 2 GPU run(s) ran on host(s) the capacity does not hold (gpu-11): their GPU-hours count, those " \
           "hosts' GPUs do not (retired nodes, or missing from the site's partitions?)" in notes


def test_runs_partly_on_the_sites_hosts_are_not_refused(tmp_path):
    """A run that spans a site node and one the site lacks (a node added before the site file knew it) ran on the
    site: every run so is a note, not a refusal."""
    _p, r = _report(tmp_path, DUMP.read_text().replace("|gpu01|", "|gpu[16-17]|").replace("|gpu02|", "|gpu[01,17]|"))
    assert r.exit_code == 0, r.output
    notes = json.loads((tmp_path / "out" / "report.json").read_text())["notes"]
    assert any(n.startswith("2 of 2 GPU run(s) ran on host(s) the capacity does not hold (gpu17)") for n in notes)


def test_hosts_outside_reads_hostlists_and_skips_runs_never_placed():
    got = hosts_outside({"gpu[01-02]": 3, "gpu[16-17]": 2, "gpu[20-21]": 4, "None assigned": 5, "": 1, "odd[": 1},
                        {f"gpu{i:02d}" for i in range(1, 17)})
    assert got.hosts == ("gpu17", "gpu20", "gpu21", "odd[") and got.runs == 7 and got.placed == 10
    assert got.entirely == 5   # gpu[20-21] and odd[: none of their hosts is the site's
