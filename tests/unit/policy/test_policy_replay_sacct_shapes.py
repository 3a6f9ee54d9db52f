"""`admin policy replay --sacct-file` on dumps shaped as real clusters print them (the hand-written dumps
tests/data/reports/sacct-handwritten-*.txt, tests/data/SOURCES.md): a replay is of submissions, so a `sacct -D`
dump's earlier runs of a job, a federation's REVOKED siblings and other clusters' jobs are not replayed as more
submissions; each is said in a note."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from slurmtools.cli.main import app
from slurmtools.site import find_site_path

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "tests" / "data" / "reports"
STATES = DATA / "sacct-handwritten-22.05-states-P.txt"
FED = DATA / "sacct-handwritten-24.05-federation-P.txt"


def _replay(site: str, dump: Path, *more: str):
    return CliRunner().invoke(app, ["admin", "policy", "replay", "--site", site, "--sacct-file", str(dump),
                                    "--since", "36500d", *more])


def _site(tmp_path: Path, cluster: str) -> str:
    text = (REPO / "site_configs" / "example" / "site.toml").read_text()
    text = text.replace('cluster_name = "lab"', f'cluster_name = "{cluster}"')
    text = text.replace('fabric = "', f'fabric = "{REPO / "site_configs" / "example"}/')
    p = tmp_path / "site.toml"
    p.write_text(text)
    return str(p)


def test_each_job_of_a_duplicates_dump_is_replayed_once():
    """3003 (node failure, requeued), 3004 (requeued) and 3005 (resized) have two records each under `sacct -D`:
    they were replayed as six submissions, each refusal counted twice."""
    res = _replay(str(find_site_path(None)), STATES, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["jobs"] == 15
    assert doc["notes"] == ["3 earlier run(s) of requeued or resized jobs (sacct -D) left out: each job is replayed "
                            "once, as its last run (what sacct lists without --duplicates)"]
    res = _replay(str(find_site_path(None)), STATES)
    assert res.output.splitlines()[:2] == [
        f"replayed 15 jobs from the last 36500d against {find_site_path(None)}",
        "  note: 3 earlier run(s) of requeued or resized jobs (sacct -D) left out: each job is replayed once, as its "
        "last run (what sacct lists without --duplicates)"]


def test_a_federation_replays_the_sites_cluster_without_revoked_siblings(tmp_path):
    res = _replay(_site(tmp_path, "fedA"), FED, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["jobs"] == 1 and doc["changed"][0]["job_id"] == "67109366"
    assert doc["notes"] == ["1 job record(s) of other clusters (fedB) left out: --site names cluster fedA (the dump "
                            "holds 2 clusters)",
                            "1 federation sibling record(s) REVOKED (the job ran on another cluster) left out"]
    res = _replay(str(find_site_path(None)), FED)
    assert res.exit_code != 0
    assert str(res.exception) == (f"{FED}: the dump holds jobs of 2 clusters (fedA, fedB) and none of lab, the "
                                  f"cluster --site names (cluster_name): dump it with `sacct -M lab`")
