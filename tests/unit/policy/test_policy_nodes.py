"""The most nodes a job may get, and the GPUs that come with them: a job without -N whose tasks Slurm may spread over
as many nodes, `--exclusive` (every GPU of each node), and what a heterogeneous job's check sees. The Python side
and the generated job_submit.lua (Lua 5.1 and 5.3, the job_desc written out by hand from Slurm 25.11's source)
decide alike; every refusal is one line naming the option that fixes it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from policy_luarun import LUAS, run_lua
from slurmtools.policy import JobRequest, PolicyContext, RequestError, evaluate, load_policies
from slurmtools.policy.usage import render_usage_lua
from slurmtools.render.job_submit import render_job_submit
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric

pytestmark = pytest.mark.usefixtures("require_lua")  # a missing Lua fails, never skips

SIG = "#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsleep 1\n"
NO_VAL, NO_VAL16 = 4294967294, 65534
STD = ["-A", "vision", "-q", "standard"]
SPREAD = "without -N, Slurm may spread its {w} over {n} nodes: add -N {f} (or the node count it needs)"
WHOLE = "--exclusive gives the job every GPU of each of its nodes (8 a node)"
GPUS = "tier standard allows at most 32 GPUs per job; this job asks for {g}"
NODES = "tier standard allows at most 4 nodes per job; this job asks for {n}"
CPU_SITE = Path(__file__).resolve().parents[2] / "data" / "sites" / "cpu" / "site.toml"


def decide(policies, ctx, args, script=SIG):
    return evaluate(JobRequest.from_sbatch(args, script=script, user="alice", default_account="vision"), policies, ctx)


# (sbatch args after -A vision -q standard, job_desc fields sbatch 25.11 sends for them (src/common/slurm_opt.c
# slurm_opt_create_job_desc, src/sbatch/opt.c _opt_verify), the refusal both sides give or None)
CASES = [
    # no -N: max_nodes stays NO_VAL (init_msg.c), num_tasks is sent; each task may get its own node, at most the
    # tier's 4 (its QoS's MaxTRESPerJob node=4: node_scheduler.c get_node_cnts), so 4 x 8 = 32 GPUs pass
    (["-n", "8", "--gres=gpu:h100:8"], {"num_tasks": 8, "tres_per_node": "gres/gpu:h100:8"}, None),
    (["-n", "8", "--gres=gpu:h100:8", "-N", "1"],
     {"num_tasks": 8, "min_nodes": 1, "max_nodes": 1, "tres_per_node": "gres/gpu:h100:8"}, None),
    (["-n", "4", "--gpus-per-node=h100:8"], {"num_tasks": 4, "tres_per_node": "gres/gpu:h100:8"}, None),
    # -n with --ntasks-per-node and no -N: sbatch sends min_nodes = tasks / per node, rounded up
    (["-n", "16", "--ntasks-per-node=8", "--gres=gpu:h100:8"],
     {"num_tasks": 16, "ntasks_per_node": 8, "min_nodes": 2, "tres_per_node": "gres/gpu:h100:8"}, None),
    # ... never fewer nodes than that: 5 nodes at least, more than the tier's 4, and not spread (no hint)
    (["-n", "40", "--ntasks-per-node=8", "--gres=gpu:h100:1"],
     {"num_tasks": 40, "ntasks_per_node": 8, "min_nodes": 5, "tres_per_node": "gres/gpu:h100:1"}, NODES.format(n=5)),
    (["-n", "8", "--gpus-per-task=h100:1"], {"num_tasks": 8, "tres_per_task": "gres/gpu:h100=1"}, None),
    # no node refusal (4 nodes), but 64 CPUs for the 1 GPU of its fewest nodes are too many: no hint either
    (["-n", "64", "--gres=gpu:h100:1"], {"num_tasks": 64, "tres_per_node": "gres/gpu:h100:1"},
     "on partition gpu each GPU comes with at most 14 CPUs: 1 GPUs allow 14 CPUs, this job asks for 64"),
    # 40 tasks on at most 4 nodes: 1200000 MB for 16 GPUs pass (on 16 nodes 4800000 MB would not)
    (["-n", "40", "--gpus=h100:16", "--mem=300000"],
     {"num_tasks": 40, "tres_per_job": "gres/gpu:h100:16", "min_mem_per_node": 300000}, None),
    # --mem is per node: 4 nodes x 600G for 4 GPUs
    (["-n", "4", "--gpus=h100:4", "--mem=600G"],
     {"num_tasks": 4, "tres_per_job": "gres/gpu:h100:4", "min_mem_per_node": 600 * 1024},
     "on partition gpu each GPU comes with at most 250000 MB of memory: 4 GPUs allow 1000000 MB, this job asks for "
     "2457600 MB; " + SPREAD.format(w="4 tasks", n=4, f=1)),
    # no -n either: each GPU of --gpus may come from its own node (measured: --gpus=h100:4 ran on 4 nodes, 4 tasks)
    (["--gpus=h100:4", "--mem=600G"], {"tres_per_job": "gres/gpu:h100:4", "min_mem_per_node": 600 * 1024},
     "on partition gpu each GPU comes with at most 250000 MB of memory: 4 GPUs allow 1000000 MB, this job asks for "
     "2457600 MB; " + SPREAD.format(w="4 GPUs", n=4, f=1)),
    (["--gpus=h100:4", "-c", "16"], {"tres_per_job": "gres/gpu:h100:4", "cpus_per_task": 16},
     "on partition gpu each GPU comes with at most 14 CPUs: 4 GPUs allow 56 CPUs, this job asks for 64; "
     + SPREAD.format(w="4 GPUs", n=4, f=1)),
    # 12 GPUs need 2 nodes of 8 at least (slurmctld shows NumNodes=2): the hint proposes 2
    (["--gpus=h100:12", "--mem=800G"], {"tres_per_job": "gres/gpu:h100:12", "min_mem_per_node": 800 * 1024},
     "on partition gpu each GPU comes with at most 250000 MB of memory: 12 GPUs allow 3000000 MB, this job asks "
     "for 3276800 MB; " + SPREAD.format(w="12 GPUs", n=4, f=2)),
    # -n bounds the nodes: one task, one node
    (["--gpus=h100:4", "-n", "1", "--mem=600G"],
     {"tres_per_job": "gres/gpu:h100:4", "num_tasks": 1, "min_mem_per_node": 600 * 1024}, None),
    (["--gpus=h100:12", "--mem=300G"], {"tres_per_job": "gres/gpu:h100:12", "min_mem_per_node": 300 * 1024}, None),
    # CPUs per GPU are tightest on the fewest nodes: one node, 4 GPUs, 60 CPUs
    (["-N", "1-4", "-n", "4", "--gres=gpu:h100:4", "-c", "15"],
     {"min_nodes": 1, "max_nodes": 4, "num_tasks": 4, "cpus_per_task": 15, "tres_per_node": "gres/gpu:h100:4"},
     "on partition gpu each GPU comes with at most 14 CPUs: 4 GPUs allow 56 CPUs, this job asks for 60"),
    # sbatch cuts a range's top to the tasks (-N 2-8 -n 4: 2-4)
    (["-N", "2-8", "-n", "4", "--gres=gpu:h100:8"],
     {"min_nodes": 2, "max_nodes": 4, "num_tasks": 4, "tres_per_node": "gres/gpu:h100:8"}, None),
    # with -N the range's top counts, past the tier's limit too (its QoS would cut it; admission refuses it)
    (["-N", "2-8", "-n", "8", "--gres=gpu:h100:1"],
     {"min_nodes": 2, "max_nodes": 8, "num_tasks": 8, "tres_per_node": "gres/gpu:h100:1"}, NODES.format(n=8)),
    # --exclusive: job_desc.shared 0 (JOB_SHARED_NONE), every GPU of each node
    (["--exclusive", "-N", "4"], {"shared": 0, "min_nodes": 4, "max_nodes": 4}, None),
    (["--exclusive", "-N", "5"], {"shared": 0, "min_nodes": 5, "max_nodes": 5},
     GPUS.format(g=40) + "; " + WHOLE),
    (["--exclusive", "-N", "5", "--gres=gpu:h100:1"],
     {"shared": 0, "min_nodes": 5, "max_nodes": 5, "tres_per_node": "gres/gpu:h100:1"},
     GPUS.format(g=40) + "; " + WHOLE),
    (["--exclusive", "--gpus=h100:33"], {"shared": 0, "tres_per_job": "gres/gpu:h100:33"},
     GPUS.format(g=40) + "; " + WHOLE),
    # spread over at most the tier's 4 nodes: 32 GPUs
    (["--exclusive", "-n", "8"], {"shared": 0, "num_tasks": 8}, None),
    # an untyped request stays untyped: the partition's type rule still applies
    (["--exclusive", "--gres=gpu:4"], {"shared": 0, "tres_per_node": "gres/gpu:4"},
     "partition gpu needs a GPU type: ask for e.g. --gres=gpu:h100:N instead of an untyped GPU count "
     "(GPU types here: h100)"),
    # =user, =mcs, =topo, =oversubscribe keep others off but allocate what the job asks for
    (["--exclusive=user", "-N", "4", "--gres=gpu:h100:1"],
     {"shared": 2, "min_nodes": 4, "max_nodes": 4, "tres_per_node": "gres/gpu:h100:1"}, None),
    (["--exclusive=MCS", "-N", "4", "--gres=gpu:h100:1"],
     {"shared": 3, "min_nodes": 4, "max_nodes": 4, "tres_per_node": "gres/gpu:h100:1"}, None),
    (["--exclusive=topo", "-N", "4", "--gres=gpu:h100:1"],
     {"shared": 4, "min_nodes": 4, "max_nodes": 4, "tres_per_node": "gres/gpu:h100:1"}, None),
    (["--oversubscribe", "-N", "4", "--gres=gpu:h100:1"],
     {"shared": 1, "min_nodes": 4, "max_nodes": 4, "tres_per_node": "gres/gpu:h100:1"}, None),
]


def _job_desc(fields: dict) -> dict:
    d = {"user_name": "alice", "account": "vision", "default_account": "vision", "qos": "standard", "script": SIG,
         "min_nodes": NO_VAL, "max_nodes": NO_VAL, "num_tasks": NO_VAL, "time_limit": NO_VAL,
         "ntasks_per_node": NO_VAL16, "cpus_per_task": NO_VAL16, "sockets_per_node": NO_VAL16, "shared": NO_VAL16}
    d.update(fields)
    return d


@pytest.mark.parametrize("lua", LUAS)
def test_nodes_and_whole_nodes_decide_alike_in_the_cli_and_in_slurm(site, fabric, policies, tmp_path, lua):
    ctx = PolicyContext(site=site, fabric=fabric, usage=None, month=datetime.now().strftime("%Y-%m"))
    got = run_lua(render_job_submit(site, fabric).text, [_job_desc(f) for _, f, _ in CASES], tmp_path, lua)
    for (args, _, refusal), g in zip(CASES, got):
        d = decide(policies, ctx, STD + args)
        if refusal is None:
            assert d.action != "deny", (args, d.message)
            assert (g["rc"], g["user"]) == (0, ""), (args, g)
        else:
            assert (d.action, d.message) == ("deny", refusal), args
            assert (g["rc"], g["user"]) == (-1, refusal), args


def test_sbatch_node_counts_as_sbatch_sends_them():
    """src/sbatch/opt.c _opt_verify and src/common/slurm_opt.c slurm_opt_create_job_desc."""
    def counts(*a):
        r = JobRequest.from_sbatch(list(a))
        return r.min_nodes, r.max_nodes, r.num_tasks

    assert counts("-N", "2-8", "-n", "4") == (2, 4, 4)  # the range cut to the tasks
    assert counts("-N", "4", "-n", "2") == (2, 2, 2)  # "can't run 2 processes on 4 nodes, setting nnodes to 2"
    assert counts("-n", "16", "--ntasks-per-node=8") == (2, None, 16)
    assert counts("-n", "17", "--ntasks-per-node=8") == (3, None, 17)
    assert counts("-N", "2", "-n", "16", "--ntasks-per-node=4") == (2, 2, 16)  # -N given: kept
    assert counts("-n", "8") == (None, None, 8)


def test_most_and_fewest_nodes():
    r = JobRequest.from_sbatch(["-n", "16", "--ntasks-per-node=8", "--gpus-per-node=h100:8"])
    assert (r.fewest_nodes, r.nodes, r.spread, r.gpus) == (2, 16, True, 128)
    assert r.pinned().nodes == 2 and r.pinned().gpus == 16 and not r.pinned().spread
    capped = r.with_changes({"node_cap": 4})
    assert (capped.nodes, capped.gpus) == (4, 32)
    # the tier's node limit (its QoS's node=) caps the spread too, whichever cap is lower ...
    assert r.with_changes({"tier_nodes": 4}).nodes == 4
    assert r.with_changes({"tier_nodes": 8, "node_cap": 16}).nodes == 8
    assert r.with_changes({"tier_nodes": 8, "node_cap": 3}).nodes == 3
    # ... never below the fewest nodes (16 tasks at most 8 a node: 2), which is then no spread
    assert (r.with_changes({"tier_nodes": 1}).nodes, r.with_changes({"tier_nodes": 1}).spread) == (2, False)
    # ... and not with -N: a range's top counts (tier_limits refuses it past the tier's limit)
    assert JobRequest.from_sbatch(["-N", "2-8", "-n", "8"]).with_changes({"tier_nodes": 4}).nodes == 8
    r = JobRequest.from_sbatch(["-N", "2-8", "--gpus-per-node=h100:8"])
    assert (r.fewest_nodes, r.nodes, r.spread) == (2, 8, False)  # a range is asked for: no hint about -N
    r = JobRequest.from_sbatch(["--ntasks-per-node=8", "--gpus-per-node=h100:8"])  # no -n: one node's tasks
    assert (r.nodes, r.tasks, r.gpus) == (1, 8, 8)
    r = JobRequest.from_sbatch(["-n", "4", "--gpus-per-task=h100:2"])  # per-task GPUs do not grow with nodes
    assert (r.nodes, r.gpus) == (4, 8)


def test_the_partitions_node_count_caps_the_spread(policies, ctx):
    d = decide(policies, ctx, ["-A", "vision", "-q", "scavenger", "-n", "40", "--gpus-per-node=h100:8"],
               script="#!/bin/bash\n#SBATCH --signal=B:USR1@120\nsleep 1\n")
    assert d.allowed  # 16 nodes x 8 = 128, scavenger's limit (40 nodes would be 320)
    d = decide(policies, ctx, ["-A", "vision", "-q", "scavenger", "-n", "40", "--gpus-per-node=h100:9"],
               script="#!/bin/bash\n#SBATCH --signal=B:USR1@120\nsleep 1\n")
    assert d.message == ("tier scavenger allows at most 128 GPUs per job; this job asks for 144; "
                         + SPREAD.format(w="40 tasks", n=16, f=1))


def _both(site, fabric, tmp_path, lua, cases, usage=None):
    """Each (sbatch args, job_desc fields sbatch sends, the refusal or None) decided by the Python policies and the
    rendered Lua alike; returns the Python decisions."""
    month = datetime.now().strftime("%Y-%m")
    usage_file = tmp_path / "usage.lua"
    usage_file.unlink(missing_ok=True)
    if usage is not None:
        usage_file.write_text(render_usage_lua(usage, month))
    ctx = PolicyContext(site=site, fabric=fabric, usage=usage, month=month)
    pols = load_policies(site, fabric)
    text = render_job_submit(site, fabric, usage_file=str(usage_file)).text
    got = run_lua(text, [_job_desc(f) for _, f, _ in cases], tmp_path, lua)
    out = []
    for (args, fields, refusal), g in zip(cases, got):
        d = decide(pols, ctx, args)
        if refusal is None:
            assert d.action != "deny", (args, d.message)
            assert (g["rc"], g["user"]) == (0, ""), (args, g)
            assert g["qos"] == d.changes.get("qos", _job_desc(fields)["qos"] or ""), (args, g)
        else:
            assert (d.action, d.message) == ("deny", refusal), args
            assert (g["rc"], g["user"]) == (-1, refusal), args
        out.append(d)
    return out


MEM16 = ("on partition gpu each GPU comes with at most 250000 MB of memory: 16 GPUs allow 4000000 MB, this job asks "
         "for 4800000 MB")
# a job without -N on each tier: at most the tier's node limit (production 8, standard 4), else the partition's 16
TIER_CASES = [
    (["-A", "vision", "-q", "production", "-n", "16", "--gres=gpu:h100:8"],
     {"qos": "production", "num_tasks": 16, "tres_per_node": "gres/gpu:h100:8"}, None),
    (["-A", "vision", "-q", "production", "-n", "16", "--gpus-per-task=h100:1"],
     {"qos": "production", "num_tasks": 16, "tres_per_task": "gres/gpu:h100=1"}, None),
    (["-A", "vision", "-q", "production", "-n", "9", "--ntasks-per-node=1", "--gres=gpu:h100:1"],
     {"qos": "production", "num_tasks": 9, "ntasks_per_node": 1, "min_nodes": 9, "tres_per_node": "gres/gpu:h100:1"},
     "tier production allows at most 8 nodes per job; this job asks for 9"),
    (["-A", "vision", "-q", "standard", "-n", "40", "--gpus=h100:16", "--mem=300000"],
     {"num_tasks": 40, "tres_per_job": "gres/gpu:h100:16", "min_mem_per_node": 300000}, None),
    (["-A", "vision", "-q", "scavenger", "-n", "40", "--gpus=h100:16", "--mem=300000"],
     {"qos": "scavenger", "num_tasks": 40, "tres_per_job": "gres/gpu:h100:16", "min_mem_per_node": 300000},
     MEM16 + "; " + SPREAD.format(w="40 tasks", n=16, f=2)),
    (["-A", "vision", "-q", "scavenger", "-n", "8", "--gres=gpu:h100:8"],
     {"qos": "scavenger", "num_tasks": 8, "tres_per_node": "gres/gpu:h100:8"}, None),
    # no QoS named: the default tier's limit (routing sets qos standard)
    (["-A", "vision", "-n", "8", "--gres=gpu:h100:8"],
     {"qos": None, "num_tasks": 8, "tres_per_node": "gres/gpu:h100:8"}, None),
    (["-A", "vision", "-n", "40", "--gpus=h100:16", "--mem=300000"],
     {"qos": None, "num_tasks": 40, "tres_per_job": "gres/gpu:h100:16", "min_mem_per_node": 300000}, None),
]


@pytest.mark.parametrize("lua", LUAS)
def test_a_spread_job_counts_at_most_its_tiers_node_limit(site, fabric, tmp_path, lua):
    """Slurm gives a job without -N at most its QoS's MaxTRESPerJob node= nodes (src/slurmctld/node_scheduler.c
    get_node_cnts: acct_policy_get_max_nodes), which sync-qos sets to the tier's max_nodes; a tier without one
    leaves the partition's node count."""
    ds = _both(site, fabric, tmp_path, lua, TIER_CASES)
    assert ds[6].changes == {"partition": "gpu", "qos": "standard"}


@pytest.mark.parametrize("lua", LUAS)
def test_a_re_routed_job_counts_its_new_tiers_nodes(site, fabric, tmp_path, lua):
    """vision is over its budget: budget re-routes its standard jobs to scavenger, which has no node limit, so
    from then on the job counts the partition's 16 nodes, not standard's 4 (the same job passes on standard)."""
    big = (["-A", "vision", "-q", "standard", "-n", "40", "--gpus=h100:16", "--mem=300000"],
           {"num_tasks": 40, "tres_per_job": "gres/gpu:h100:16", "min_mem_per_node": 300000})
    small = (["-A", "vision", "-q", "standard", "-n", "8", "--gres=gpu:h100:8"],
             {"num_tasks": 8, "tres_per_node": "gres/gpu:h100:8"})
    ds = _both(site, fabric, tmp_path, lua, [(*big, MEM16 + "; " + SPREAD.format(w="40 tasks", n=16, f=2)),
                                                (*small, None)],
               usage={"vision": 25000.0})
    assert ds[1].changes == {"partition": "gpu", "qos": "scavenger"}
    ds = _both(site, fabric, tmp_path, lua, [(*big, None), (*small, None)], usage={"vision": 100.0})
    assert [d.changes for d in ds] == [{"partition": "gpu"}] * 2


@pytest.mark.parametrize("lua", LUAS)
def test_a_tier_without_a_node_limit_counts_the_partitions_nodes(site, fabric, tmp_path, lua):
    """standard without max_nodes: `-n 8 --gres=gpu:h100:8` may get 8 nodes (64 GPUs) and is refused, with the
    hint; at most the partition's 16 nodes."""
    from dataclasses import replace

    s = replace(site, tiers={**site.tiers, "standard": replace(site.tiers["standard"], max_nodes=None)})
    cases = [(["-n", "8", "--gres=gpu:h100:8"], {"num_tasks": 8, "tres_per_node": "gres/gpu:h100:8"},
              GPUS.format(g=64) + "; " + SPREAD.format(w="8 tasks", n=8, f=1)),
             (["-n", "16", "--ntasks-per-node=8", "--gres=gpu:h100:8"],
              {"num_tasks": 16, "ntasks_per_node": 8, "min_nodes": 2, "tres_per_node": "gres/gpu:h100:8"},
              GPUS.format(g=128) + "; " + SPREAD.format(w="16 tasks", n=16, f=2)),
             (["-n", "40", "--gpus-per-node=h100:8"], {"num_tasks": 40, "tres_per_node": "gres/gpu:h100:8"},
              GPUS.format(g=128) + "; " + SPREAD.format(w="40 tasks", n=16, f=1)),
             (["--exclusive", "-n", "8"], {"shared": 0, "num_tasks": 8},
              GPUS.format(g=64) + "; " + WHOLE + "; " + SPREAD.format(w="8 tasks", n=8, f=1)),
             (["-n", "4", "--gres=gpu:h100:8"], {"num_tasks": 4, "tres_per_node": "gres/gpu:h100:8"}, None)]
    _both(s, fabric, tmp_path, lua, [(STD + a, f, r) for a, f, r in cases])


def test_shapes_of_the_partitions(site, fabric):
    from slurmtools.policy.base import partition_shapes

    assert partition_shapes(site, fabric) == {"gpu": {"nodes": 16, "gpus": [["h100", 8]]}}
    assert partition_shapes(site, None) == {"gpu": {"nodes": 16, "gpus": []}}  # no fabric: GPUs a node unknown
    s = load_site(CPU_SITE)
    assert partition_shapes(s, load_fabric(s.fabric_path)) == {
        "gpu": {"nodes": 4, "gpus": [["h100", 8]]}, "cpu": {"nodes": 2, "gpus": []},
        "gpucpu": {"nodes": 4, "gpus": [["h100", 8]]}}


def test_exclusive_forms():
    shared = lambda *a: JobRequest.from_sbatch(list(a)).shared  # noqa: E731
    assert shared() is None
    assert shared("--exclusive") == 0 and shared("--exclusive=EXCLUSIVE") == 0
    assert (shared("--exclusive=user"), shared("--exclusive=mcs"), shared("--exclusive=topo")) == (2, 3, 4)
    assert shared("--exclusive=oversubscribe") == 1 and shared("-s") == 1
    # the command line wins over the script, as in sbatch
    assert JobRequest.from_sbatch(["--exclusive"], script="#!/bin/sh\n#SBATCH --exclusive=user\ntrue\n").shared == 0
    for args, needle in ((["--exclusive=bogus"], "option --exclusive: expected --exclusive or"),
                         (["--exclusive", "-s"], "option --exclusive: given with --oversubscribe (-s)")):
        with pytest.raises(RequestError, match=needle.replace("(", r"\(").replace(")", r"\)")):
            JobRequest.from_sbatch(args)


def test_exclusive_without_a_fabric_counts_as_asked(site, policies):
    ctx = PolicyContext(site=site, fabric=None)
    assert decide(load_policies(site, None), ctx, STD + ["--exclusive", "-N", "4", "--gres=gpu:h100:1"]).allowed
    d = decide(load_policies(site, None), ctx, STD + ["--exclusive", "-N", "5", "--gres=gpu:h100:1"])
    assert d.message == NODES.format(n=5)  # no whole-node GPUs known: the node limit speaks, with no hint


def test_exclusive_on_a_cpu_partition_over_gpu_hosts(tmp_path):
    """The overlay's hosts have GPUs: an --exclusive job there would get them (node_scheduler.c
    _handle_exclusive_gres), so it is refused as a GPU job on a CPU partition, and says why."""
    s = load_site(CPU_SITE)
    f = load_fabric(s.fabric_path)
    pols = load_policies(s, f)
    ctx = PolicyContext(site=s, fabric=f)
    cases = [["-A", "vision", "-q", "standard", "-p", "gpucpu", "--exclusive", "-c", "4"],
             ["-A", "vision", "-q", "standard", "-p", "cpu", "--exclusive", "-c", "4"],
             ["-A", "vision", "-q", "standard", "-p", "gpucpu", "--exclusive=user", "-c", "4"],
             ["-A", "vision", "-q", "standard", "-p", "gpu", "--exclusive", "-c", "4"]]
    ds = [decide(pols, ctx, a) for a in cases]
    assert ds[0].message == ("partition gpucpu is a CPU partition: it gives no GPUs, and this job asks for 8; GPU "
                             "jobs go to gpu; --exclusive gives the job every GPU of each of its nodes (8 a node)")
    assert ds[1].allowed and ds[2].allowed
    assert ds[3].allowed  # a GPU-less job on the GPU partition (GPUs required there) gets the nodes' GPUs
    descs = [{"user_name": "alice", "account": "vision", "qos": "standard", "partition": p, "cpus_per_task": 4,
              "shared": sh, "script": SIG}
             for p, sh in (("gpucpu", 0), ("cpu", 0), ("gpucpu", 2), ("gpu", 0))]
    got = run_lua(render_job_submit(s, f).text, descs, tmp_path)
    for d, g in zip(ds, got):
        assert (g["rc"], g["user"]) == ((-1, d.message) if d.action == "deny" else (0, "")), (d, g)


def test_a_heterogeneous_job_is_checked_component_by_component(policies, ctx):
    """slurmctld calls job_submit once per component (src/slurmctld/proc_req.c: validate_job_create_req in the
    loop over job_req_list, each job_desc carrying its het_job_offset), and the CLI reads the directives up to the
    first `#SBATCH hetjob`: two components of 32 GPUs each pass a 32-GPU tier on both sides (docs/policy.md says
    so). This pins the documented limit, it does not endorse it."""
    script = ("#!/bin/bash\n#SBATCH --signal=B:USR1@300 -N 4 --gres=gpu:h100:8\n#SBATCH hetjob\n"
              "#SBATCH -N 4 --gres=gpu:h100:8\nsrun true\n")
    assert JobRequest.from_sbatch(STD, script=script).gpus == 32
    assert decide(policies, ctx, STD, script=script).allowed
