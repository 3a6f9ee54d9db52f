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


def test_a_record_without_tres_is_refused_and_an_empty_reqtres_reads_the_allocation(tmp_path):
    """A record from before Slurm kept TRES (ReqTRES and AllocTRES empty) was replayed as a request for no GPU at
    all, its GPU-hours 0; refused now, naming the job. A job whose ReqTRES alone is empty is asked as allocated."""
    head = STATES.read_text().splitlines()[0].split("|")
    req, alloc = head.index("ReqTRES"), head.index("AllocTRES")

    def edit(blank_alloc: bool) -> Path:
        out = []
        for ln in STATES.read_text().splitlines():
            f = ln.split("|")
            if f[0] == "3001":
                f[req] = ""
                if blank_alloc:
                    f[alloc] = ""
            out.append("|".join(f))
        p = tmp_path / f"d{int(blank_alloc)}.txt"
        p.write_text("\n".join(out) + "\n")
        return p

    p = edit(True)
    res = _replay(str(find_site_path(None)), p)
    assert res.exit_code != 0
    assert str(res.exception) == (f"{p}: job 3001: ReqTRES and AllocTRES are both empty and no GRES column says its "
                                  "GPUs, so what it asked for is not known (a record from before Slurm kept TRES?)")
    from dataclasses import replace

    from slurmtools.policy.replay import request_from_record
    from slurmtools.slurm.commands import parse_sacct

    r = next(r for r in parse_sacct(STATES.read_text(), "d") if r.job_id == "3001" and r.step is None)
    assert request_from_record(replace(r, req_tres="")).tres_per_job == "gres:gpu:h100:2"
    assert _replay(str(find_site_path(None)), edit(False)).exit_code == 0
