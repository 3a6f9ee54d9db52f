"""Random requests (odd strings, odd numbers, random scripts) through the Python evaluator and the generated Lua
under lua5.1: same decision, byte-identical message, same changes. Numbers stay below job_desc's NO_VAL16
sentinel (a real job_desc cannot carry a set value there) and within a double's exact range."""

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy_luarun import job_desc, run_lua
from slurmtools.policy import JobRequest, PolicyContext, evaluate
from slurmtools.policy.usage import render_usage_lua
from slurmtools.render.job_submit import render_job_submit

# under CI a missing interpreter is a set-up failure, not a skip
pytestmark = pytest.mark.usefixtures("require_lua")  # a missing Lua fails, never skips

ints = st.one_of(st.none(), st.integers(min_value=0, max_value=65533), st.sampled_from([0, 1, 4, 8, 9, 14, 15]))
names = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(
    ["production", "standard", "scavenger", "gpu", "vision", "nlp", "students", "", "normal", "cpu", "gpucpu"]))
gres = st.one_of(st.none(), st.text(alphabet="gpu:res/h10a,0123456789 \t=", max_size=24), st.builds(
    lambda t, n: f"gres:gpu:{t}{n}", st.sampled_from(["", "h100:", "a100:", ":", "x:y:"]),
    st.integers(min_value=0, max_value=9999)), st.builds(  # the `name:type=count` form of newer releases
    lambda t, n: f"gres/gpu{t}={n}", st.sampled_from(["", ":h100", ":a100", ":", ":x:y"]),
    st.integers(min_value=0, max_value=9999)))
sig_lines = st.builds(lambda pre, sig, rest: f"{pre}--signal{sig}{rest}",
                      st.sampled_from(["#SBATCH ", "#SBATCH -J x ", "# SBATCH ", "#SBATCH\t", "  #SBATCH "]),
                      st.sampled_from(["=B:USR1@300", "=usr1", " SIGUSR1", "=RB:10@5", "=B:USR2", "==USR1", "=#"]),
                      st.sampled_from(["", " # note", "@x", "\r"]))
scripts = st.one_of(st.text(max_size=60), st.builds(
    lambda first, lines, body: first + "\n".join(lines) + "\n" + body,
    st.sampled_from(["#!/bin/bash\n", "", "\n", "#!/bin/sh\n\n"]),
    st.lists(st.one_of(sig_lines, st.text(alphabet="# SBATCH-abc\t", max_size=15)), max_size=4),
    st.text(max_size=20)))

requests = st.builds(
    JobRequest, user_name=names, account=names, default_account=names, qos=names, partition=names,
    time_limit=ints, min_nodes=ints, max_nodes=ints, num_tasks=ints, ntasks_per_node=ints, cpus_per_task=ints,
    shared=st.one_of(st.none(), st.integers(min_value=0, max_value=4)),  # 0: --exclusive
    min_mem_per_node=st.one_of(st.none(), st.integers(min_value=0, max_value=10**9)),
    min_mem_per_cpu=st.one_of(st.none(), st.integers(min_value=0, max_value=10**6)),
    tres_per_job=gres, tres_per_node=gres, tres_per_task=gres, tres_per_socket=gres, sockets_per_node=ints,
    cpus_per_tres=gres, mem_per_tres=gres,
    script=scripts)


@settings(max_examples=25, deadline=None)
@given(st.lists(requests, min_size=40, max_size=40), st.booleans())
def test_random_requests_same_in_lua_and_python(site, fabric, policies, tmp_path_factory, reqs, with_usage):
    _same_in_lua_and_python(site, fabric, policies, tmp_path_factory, reqs, with_usage)


@settings(max_examples=10, deadline=None)
@given(st.lists(requests, min_size=40, max_size=40), st.booleans())
def test_random_requests_on_a_site_with_cpu_partitions(cpu_site, tmp_path_factory, reqs, with_usage):
    """The CPU test site: CPU partitions (one an overlay of the GPU hosts) and GPUs required on the GPU one, so the
    partition_gpus rule decides too."""
    site, fabric, policies = cpu_site
    _same_in_lua_and_python(site, fabric, policies, tmp_path_factory, reqs, with_usage)


def _same_in_lua_and_python(site, fabric, policies, tmp_path_factory, reqs, with_usage):
    tmp = tmp_path_factory.mktemp("luafuzz")
    month = datetime.now().strftime("%Y-%m")
    usage = {"vision": 25000.0, "nlp": 39999.9, "students": 2000.0} if with_usage else None
    if usage:
        (tmp / "usage.lua").write_text(render_usage_lua(usage, month))
    text = render_job_submit(site, fabric, usage_file=str(tmp / "usage.lua")).text
    got = run_lua(text, [job_desc(r) for r in reqs], tmp)
    ctx = PolicyContext(site=site, fabric=fabric, usage=usage, month=month)
    for r, lua in zip(reqs, got):
        d = evaluate(r, policies, ctx)
        if d.action == "deny":
            assert (lua["rc"], lua["user"]) == (-1, d.message), r
        else:
            assert (lua["rc"], lua["user"]) == (0, ""), (r, lua)
            assert lua["partition"] == d.changes.get("partition", r.partition or ""), r
            assert lua["qos"] == d.changes.get("qos", r.qos or ""), r
