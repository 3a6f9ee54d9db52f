"""The `--json` readers on real output captured from both lab releases (tests/data/slurm/*-<version>-*.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmtools.slurm.readers import data_parser, reader_for, v0038
from slurmtools.slurm.releases import release_for

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def test_each_release_gets_the_reader_of_its_shape():
    assert reader_for(release_for("22.05")) is v0038
    assert reader_for(release_for("25.11")) is data_parser
    assert data_parser.nodes_argv(release_for("25.11").json_flag()) == ["scontrol", "show", "nodes", "--json=v0.0.44"]
    assert data_parser.jobs_argv("--json=v0.0.44") == ["squeue", "--json=v0.0.44", "--states=all"]


@pytest.mark.parametrize("parser", ["v0.0.41", "v0.0.44"])
def test_25_11_jobs(parser):
    data = _load(f"squeue-25.11.7-{parser}.json")
    assert data["meta"]["plugin"]["data_parser"] == f"data_parser/{parser}"
    jobs = {j.job_id: j for j in map(data_parser.job, data["jobs"])}
    two = jobs[1]
    assert (two.name, two.state, two.nodes, two.num_nodes) == ("twonode", "RUNNING", ("gpu01", "gpu02"), 2)
    assert two.gpus == 16 and two.gpus_by_type == {"h100": 16}
    assert two.time_limit_s == 600 and two.restarts == 0
    assert two.array_job_id is None and two.array_task_id is None  # {"set": true, "number": 0} means no array
    assert two.submit_time is not None and two.start_time >= two.submit_time
    assert jobs[2].name == "hostile|name"
    pend = jobs[4]
    assert pend.state == "PENDING" and pend.nodes == () and pend.reason == "Resources"
    # v0.0.43+ keeps the pattern in standard_output; the path the job writes to is what users need
    assert two.std_out.endswith("/jobs/slurm-1.out")


@pytest.mark.parametrize("parser", ["v0.0.41", "v0.0.44"])
def test_25_11_nodes(parser):
    data = _load(f"scontrol-nodes-25.11.7-{parser}.json")
    nodes = {n.name: n for n in map(data_parser.node, data_parser.nodes(data))}
    assert len(nodes) == 16
    g1 = nodes["gpu01"]
    # ["MIXED", "PLANNED"]: the base state, then the flags
    assert (g1.state, g1.flags) == ("mixed", ("PLANNED",))
    assert g1.gpus_by_type == {"h100": 8} and g1.gpus_used_by_type == {"h100": 8}
    assert g1.gpus_used_idx == tuple(range(8))
    assert g1.features == ("h100", "nvswitch", "leaf1") and g1.partitions == ("gpu",)
    assert g1.cpus == 112 and g1.memory_mb == 2000000
    idle = nodes["gpu16"]
    assert idle.state == "idle" and idle.gpus_used == 0 and idle.schedulable and idle.gpus_free == 8
