"""The `--json` readers on real output captured from both lab releases (tests/data/slurm/*-<version>-*.json), and on
hand-written samples of the shapes no lab runs (23.02's data_parser/v0.0.39, 23.11's v0.0.40, 26.05's v0.0.45)."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
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


# -- 23.02 (data_parser/v0.0.39), 23.11 (v0.0.40), 26.05 (v0.0.45): hand-written samples, from each parser's source
#: the samples' release and the parser its `--json` writes (tests/data/SOURCES.md says where each shape comes from)
HAND = {"23.02": "v0.0.39", "23.11": "v0.0.40", "26.05": "v0.0.45"}


def _utc(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, tz=timezone.utc)


T0 = 1796040000  # the samples' "now", 2026-11-30T12:00:00Z

#: what the samples say of each job, field by field (JobInfo names)
JOBS_SAY = {
    4101: dict(name="vit-pretrain", user="mira", account="vision", partition="gpu", qos="normal", state="PENDING",
               reason="Resources", nodes=(), num_nodes=2, gpus=16, gpus_by_type={"untyped": 16},
               time_limit_s=2880 * 60, restarts=0, submit_time=_utc(T0 + 60), start_time=None, end_time=None,
               array_job_id=None, array_task_id=None, req_switch=1, comment="",
               std_out="/home/mira/vit/slurm-4101.out"),
    4114: dict(name="lr-sweep", user="omar", account="nlp", partition="gpu", qos="scavenger", state="RUNNING",
               reason="None", nodes=("gpu12",), num_nodes=1, gpus=2, gpus_by_type={"h100": 2}, time_limit_s=7200,
               restarts=1, submit_time=_utc(T0 + 300), start_time=_utc(T0 + 900), end_time=_utc(T0 + 900 + 7200),
               array_job_id=4110, array_task_id=3, req_switch=None, comment="sweep lr",
               std_out="/scratch/omar/sweep/sweep.log"),
    4110: dict(state="PENDING", reason="JobArrayTaskLimit", nodes=(), array_job_id=4110, array_task_id=None,
               gpus=2, start_time=None),
    4090: dict(state="COMPLETING", nodes=("gpu14",), num_nodes=1, gpus=4, gpus_by_type={"h100": 4},
               time_limit_s=None, start_time=_utc(T0 - 2100), end_time=_utc(T0 + 1500)),
    # running, its node still booting: Slurm's word for it is CONFIGURING (squeue -o %T, scontrol, v0.0.39)
    4120: dict(state="CONFIGURING", nodes=("gpu09",), gpus=4, time_limit_s=14400, start_time=_utc(T0 + 1200)),
}

#: what the samples say of each node (NodeInfo names)
NODES_SAY = {
    "gpu09": dict(state="mixed", flags=(), cpus=112, cpus_alloc=16, memory_mb=2000000, memory_alloc_mb=245760,
                  gpus_by_type={"h100": 8}, gpus_used_by_type={"h100": 4}, gpus_used_idx=(0, 1, 2, 3),
                  features=("h100", "nvswitch", "leaf2"), partitions=("gpu",), reason="", schedulable=True,
                  gpus_free=4),
    "gpu10": dict(state="idle", flags=(), cpus_alloc=0, gpus_used_by_type={"h100": 0}, gpus_used_idx=(),
                  schedulable=True, gpus_free=8),
    "gpu12": dict(state="mixed", gpus_used_idx=(0, 1), gpus_free=6),
    "gpu13": dict(state="idle", flags=("DRAIN",), reason="xid 79 on one GPU", schedulable=False, gpus_free=0),
    "gpu14": dict(state="mixed", flags=("DRAIN", "COMPLETING"), gpus_used_idx=(4, 5, 6, 7),
                  reason="swap NIC after jobs end", schedulable=False),
    "gpu15": dict(state="down", flags=("NOT_RESPONDING",), reason="Not responding", schedulable=False),
}


def _facts(obj, names) -> dict:
    return {k: getattr(obj, k) for k in names}


@pytest.mark.parametrize("release", HAND)
def test_hand_written_jobs_read_as_the_samples_say(release):
    data = _load(f"squeue-handwritten-{release}-{HAND[release]}.json")
    reader = reader_for(release_for(release))
    assert reader is data_parser
    jobs = {j.job_id: j for j in map(reader.job, data["jobs"])}
    assert set(jobs) == set(JOBS_SAY)
    for jid, say in JOBS_SAY.items():
        assert _facts(jobs[jid], say) == say, jid


@pytest.mark.parametrize("release", HAND)
def test_hand_written_nodes_read_as_the_samples_say(release):
    data = _load(f"scontrol-nodes-handwritten-{release}-{HAND[release]}.json")
    nodes = {n.name: n for n in map(data_parser.node, data_parser.nodes(data))}
    assert set(nodes) == set(NODES_SAY)
    for name, say in NODES_SAY.items():
        assert _facts(nodes[name], say) == say, name


def test_23_02_23_11_and_26_05_say_the_same_of_the_same_jobs():
    """One reader for the family: the string of v0.0.39 and the list of v0.0.40, plain and wrapped times, give the
    same facts; so do v0.0.45's required_switches and output pattern beside its expanded path."""
    def read(release):
        data = _load(f"squeue-handwritten-{release}-{HAND[release]}.json")
        return [dataclasses.replace(data_parser.job(j), raw={}) for j in data["jobs"]]

    assert read("23.02") == read("23.11") == read("26.05")


@pytest.mark.parametrize("key, parser", [("minimum_switches", "v0.0.39 to v0.0.41"), ("required_switches", "v0.0.42+")])
def test_the_switch_count_is_read_under_both_names(key, parser):
    """v0.0.39, v0.0.40 and v0.0.41 (23.02, 23.11, 24.05) print `--switches` as minimum_switches: read only as
    required_switches, `explain` lost the job's switch limit there."""
    job = {"job_id": 9, "job_state": ["PENDING"], key: 2}
    assert data_parser.job(job).req_switch == 2
    assert data_parser.job({**job, key: 0}).req_switch is None   # 0: not asked


@pytest.mark.parametrize("listed, word", [
    (["PENDING", "REQUEUED"], "REQUEUED"), (["RUNNING", "CONFIGURING"], "CONFIGURING"),
    (["COMPLETED", "COMPLETING"], "COMPLETING"), (["PENDING", "REQUEUED", "COMPLETING"], "COMPLETING"),
    (["PENDING", "REQUEUE_HOLD"], "REQUEUE_HOLD"), (["RUNNING", "SIGNALING"], "SIGNALING"),
    (["PENDING", "LAUNCH_FAILED"], "PENDING"), (["RUNNING"], "RUNNING"), (["TIMEOUT"], "TIMEOUT"),
])
def test_job_state_lists_read_as_slurms_one_word(listed, word):
    """v0.0.40+ list a job's base state and flags; v0.0.39 (23.02), 22.05, scontrol and squeue print one word
    (job_state_string: the first named flag, else the base state). Read as the base state, a requeue under way
    (["PENDING", "REQUEUED"]) looked PENDING on 23.11+ and REQUEUED on 23.02, and `admin restart-now` started the
    job before the requeue was done."""
    from slurmtools.slurm.restart import next_step

    got = data_parser.job({"job_id": 9, "job_state": listed}).state
    assert got == word
    assert data_parser.job({"job_id": 9, "job_state": word}).state == word   # v0.0.39's string, as is
    if word == "REQUEUED":
        assert next_step(got, "None", None, 0.0)[0] == "wait"


def _sample(release: str, kind: str) -> dict:
    return json.loads((DATA / f"{kind}-handwritten-{release}-{HAND[release]}.json").read_text())


@pytest.mark.parametrize("release, flag", [("23.02", "--json"), ("23.11", "--json=v0.0.40"),
                                           ("26.05", "--json=v0.0.45")])
def test_hand_written_releases_command_lines_are_ones_that_release_accepts(release, flag):
    """23.02's squeue and scontrol declare --json with no argument (getopt: "option '--json' doesn't allow an
    argument", exit 1): slurmtools asked them for --json=v0.0.39 and every live query failed there. The command
    backend builds its argv from exactly these (`CommandBackend.jobs`, `.nodes`)."""
    rel = release_for(release)
    reader = reader_for(rel)
    assert reader.jobs_argv(rel.json_flag()) == ["squeue", flag, "--states=all"]
    assert reader.nodes_argv(rel.json_flag()) == ["scontrol", "show", "nodes", flag]


@pytest.mark.parametrize("release", HAND)
def test_cluster_show_and_the_planner_read_the_hand_written_samples(release):
    from slurmtools.cli.cluster_show import summary
    from slurmtools.planner.plan import releases_from_jobs
    from slurmtools.planner.view import from_fabric
    from slurmtools.resources import example_site
    from slurmtools.site import load_site
    from slurmtools.topology.sitefile import load_fabric

    reader = reader_for(release_for(release))
    nodes = [reader.node(n) for n in reader.nodes(_sample(release, "scontrol-nodes"))]
    jobs = [reader.job(j) for j in _sample(release, "squeue")["jobs"]]
    site = load_site(example_site())
    st = summary(nodes, [], {}, (int(release[:2]), int(release[3:]), 7), site)
    assert st["node_states"] == {"mixed": 3, "idle": 2, "down": 1}
    # used: 4 + 2 + 4; free on the schedulable nodes: 4 + 8 + 6; the drained and down ones: 8 + 4 + 8
    assert st["gpus"] == {"h100": {"total": 48, "used": 10, "free": 18, "unavailable": 20}}
    # the configuring job holds gpu09 as a running one does: its GPUs come back at its time limit
    rel = releases_from_jobs(jobs, datetime.now(timezone.utc))
    assert sorted((r.host, r.gpus, r.job_id) for r in rel) == [("gpu09", 4, 4120), ("gpu12", 2, 4114)]
    view = from_fabric(load_fabric(site.fabric_path), nodes)
    assert {h: view.hosts[h].gpus_free for h in ("gpu09", "gpu10", "gpu12", "gpu13", "gpu14", "gpu15")} == \
        {"gpu09": 4, "gpu10": 8, "gpu12": 6, "gpu13": 0, "gpu14": 0, "gpu15": 0}


# -- fields absent, null or in another shape (the output audit) ---------------------------------------------------
NODE = {"name": "gpu01", "state": ["IDLE"], "cpus": 112, "alloc_cpus": 0, "real_memory": 2000000,
        "alloc_memory": 0, "gres": "gpu:4(S:0-1)", "gres_used": "gpu:(null):2(IDX:0-1)", "partitions": ["gpu"]}


def test_untyped_gpus_given_by_file_read_as_untyped():
    """`_node_gres_used` prints the NULL type of GPUs given by File= without Type= as `(null)`: every node query
    failed on such a site ("cannot read GRES")."""
    n = data_parser.node(NODE)
    assert (n.gpus_by_type, n.gpus_used_by_type, n.gpus_used_idx, n.gpus_free) == \
        ({"untyped": 4}, {"untyped": 2}, (0, 1), 2)
    v = v0038.node({**NODE, "state": "idle", "state_flags": []})
    assert (v.gpus_used_by_type, v.gpus_used_idx) == ({"untyped": 2}, (0, 1))


@pytest.mark.parametrize("reader", [data_parser, v0038])
def test_a_node_without_gpus_has_none_in_use(reader):
    """Slurm prints `gpu:0` as the GresUsed of a node without GPUs: it read as `{"untyped": 0}` in use, naming a GPU
    type the node does not have (`cluster show --json`); a type the node has keeps its count of 0."""
    base = NODE if reader is data_parser else {**NODE, "state": "idle"}
    bare = reader.node({**base, "gres": "", "gres_used": "gpu:0"})
    assert (bare.gpus_by_type, bare.gpus_used_by_type, bare.gpus_free) == ({}, {}, 0)
    typed = reader.node({**base, "gres": "gpu:h100:8(S:0-1)", "gres_used": "gpu:h100:0(IDX:N/A)"})
    assert (typed.gpus_by_type, typed.gpus_used_by_type, typed.gpus_free) == ({"h100": 8}, {"h100": 0}, 8)


@pytest.mark.parametrize("reader", [data_parser, v0038])
@pytest.mark.parametrize("key, value", [("cpus", None), ("real_memory", "٣"), ("alloc_memory", {"set": False}),
                                        ("alloc_cpus", -1), ("name", None)])
def test_a_node_count_that_is_absent_or_not_a_count_is_refused(reader, key, value):
    """Absent, null or `٣` CPUs or memory were read as 0 or as 3 (`int()`), a missing name was a KeyError."""
    base = NODE if reader is data_parser else {**NODE, "state": "idle"}   # each reader's own state shape
    for node in ({**base, key: value}, {k: v for k, v in base.items() if k != key}):
        with pytest.raises(ValueError, match=key):
            reader.node(node)


def test_a_node_that_is_not_read_is_one_line_naming_the_command(monkeypatch):
    from slurmtools.errors import ParseError
    from slurmtools.slurm.commands import CommandBackend

    b = CommandBackend()
    monkeypatch.setattr(b, "slurm_release", lambda: release_for("25.11"))
    monkeypatch.setattr(b, "run", lambda argv, *a, **k: json.dumps({"nodes": [{**NODE, "cpus": None}]}))
    with pytest.raises(ParseError, match=r"^scontrol show nodes --json\S*: node gpu01: no cpus$"):
        b.nodes()


def test_v0038_prints_a_jobs_unset_time_limit_as_no_val():
    """v0.0.38 (22.05) prints an UNLIMITED time_limit as null but NO_VAL (Partition_Limit) as 4294967294, read as
    a limit of 8,171 years; data_parser's {"set": false} of the same reads as none."""
    job = {"job_id": 5, "job_state": "PENDING", "time_limit": 4294967294}
    assert v0038.job(job).time_limit_s is None
    assert v0038.job({**job, "time_limit": None}).time_limit_s is None
    assert v0038.job({**job, "time_limit": 60}).time_limit_s == 3600
    assert data_parser.job({**job, "time_limit": {"set": False, "infinite": False, "number": 0}}).time_limit_s is None


@pytest.mark.parametrize("reader", [data_parser, v0038])
def test_a_null_name_account_or_partition_reads_as_empty(reader):
    """v0.0.38 prints an unset string as null (22.05: a job's account without accounting, a user name the
    controller cannot resolve); it was read as None where every other reader of the field gives ""."""
    job = {"job_id": 5, "job_state": "RUNNING", "name": None, "user_name": None, "account": None,
           "partition": None, "qos": None}
    j = reader.job(job)
    assert (j.name, j.user, j.account, j.partition, j.qos) == ("", "", "", "", "")


# -- real captures of other sites (a helper's probe of 16, 2026-11-28) -------------------------------------------
JOB = {"job_id": 4716, "job_state": ["RUNNING"], "node_count": {"set": True, "infinite": False, "number": 2},
       "tasks": {"set": True, "infinite": False, "number": 4}, "tres_alloc_str": "cpu=1,mem=512M,node=1,billing=1",
       "tres_req_str": "cpu=1,mem=512M,node=1,billing=1", "tres_per_job": "", "tres_per_node": "", "tres_per_task": ""}


@pytest.mark.parametrize("fields, gpus, by_type", [
    ({"gres_detail": ["gpu:h100:1(IDX:0)", "gpu:h100:1(IDX:3)"], "tres_per_node": "gres/gpu:h100:1"}, 2, {"h100": 2}),
    ({"tres_per_node": "gres/gpu:h100:1"}, 2, {"h100": 2}),          # pending: per node x its 2 nodes
    ({"tres_per_job": "gres/gpu:6"}, 6, {"untyped": 6}),
    ({"tres_per_task": "gres/gpu:1"}, 4, {"untyped": 4}),            # per task x its 4 tasks
    ({"tres_per_node": "gres/shard:2"}, 0, {}),                      # no GPU asked
    ({"tres_per_task": "cpu=4"}, 0, {}),                             # --cpus-per-task: 25.11's lab writes it so
    ({"tres_per_task": "cpu=4,gres/gpu=1"}, 4, {"untyped": 4}),
    ({"tres_per_node": "gres:gpu:h100:2"}, 4, {"h100": 4}),          # 22.05's spelling
    ({}, 0, {}),
])
def test_a_jobs_gpus_without_gpu_tres_come_from_what_it_holds_or_asked(fields, gpus, by_type):
    """Slurm leaves gres/gpu out of a job's TRES strings unless AccountingStorageTRES lists it (its default): a job
    holding an H100 (Slurm-web's 25.11 capture) read as 0 GPUs, beside its node's 1 in use; a pending `--gpus=6`
    job (its 23.11 capture) too, so the slack's demand ahead missed them."""
    for reader in (data_parser, v0038):
        j = reader.job({**JOB, **fields, "job_state": "RUNNING" if reader is v0038 else ["RUNNING"]})
        assert (j.gpus, j.gpus_by_type) == (gpus, by_type), reader
    # GPUs in the TRES (the site tracks gres/gpu) are read from there, as before
    j = data_parser.job({**JOB, "tres_alloc_str": "cpu=2,gres/gpu:a100=3,gres/gpu=3,node=1",
                         "tres_per_job": "gres/gpu:9"})
    assert (j.gpus, j.gpus_by_type) == (3, {"a100": 3})
    with pytest.raises(ValueError, match="tres_per_task 'gres/gpu:1' with no task count"):
        data_parser.job({**JOB, "tres_per_task": "gres/gpu:1", "tasks": {"set": False}})


def test_json_of_another_shape_than_the_releases_is_refused_in_one_line(monkeypatch):
    """A `sinfo --version` of one release and commands of another (a client installed beside the controller's)
    read 21.08's state word letter by letter (`state='a'`) or failed with an AttributeError on 22.05's reader."""
    from slurmtools.errors import ParseError
    from slurmtools.slurm.commands import CommandBackend

    with pytest.raises(ValueError, match="state 'allocated' is one word, not data_parser's list"):
        data_parser.node({**NODE, "state": "allocated"})
    with pytest.raises(ValueError, match="state is a list, as data_parser writes it"):
        v0038.node({**NODE, "state_flags": []})
    with pytest.raises(ValueError, match="features is a list"):
        v0038.node({**NODE, "state": "idle", "features": ["a100"]})
    with pytest.raises(ValueError, match="job_state is a list"):
        v0038.job({**JOB, "job_state": ["RUNNING"]})
    b = CommandBackend()
    monkeypatch.setattr(b, "slurm_release", lambda: release_for("23.11"))
    meta = {"plugin": {"data_parser": "data_parser/v0.0.41"}}
    monkeypatch.setattr(b, "run", lambda argv, *a, **k: json.dumps({"meta": meta, "nodes": [NODE]}))
    with pytest.raises(ParseError) as err:
        b.nodes()
    assert str(err.value) == ("scontrol show nodes --json=v0.0.40: its JSON was written by data_parser v0.0.41, and "
                              "Slurm 23.11 (as sinfo --version says) is read as v0.0.40: the commands on PATH are of "
                              "another Slurm release than the one found")
    # `sinfo -N --json` holds its records under "sinfo": not an empty cluster
    monkeypatch.setattr(b, "run", lambda argv, *a, **k: json.dumps({"sinfo": [NODE], "meta": {}}))
    with pytest.raises(ParseError, match=r"no 'nodes' list in its JSON output \(it holds: sinfo, meta\)"):
        b.nodes()


def test_gpus_behind_all_cpus_or_memory_taken_are_not_free():
    """A MIG node with 48 of 48 CPUs allocated and 20 idle slices counted 20 free GPUs (talapas, 23.11): no job
    can start there. The planner's view and the slack say 0."""
    full = data_parser.node({**NODE, "alloc_cpus": 112})
    assert full.gpus_free == 0 and data_parser.node(NODE).gpus_free == 2
    assert data_parser.node({**NODE, "alloc_memory": 2000000}).gpus_free == 0
