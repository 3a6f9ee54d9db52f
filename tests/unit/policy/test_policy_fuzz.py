"""Random requests never make the Python side raise: every input ends in a Decision (or, for sbatch options,
a one-line RequestError naming the option)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from slurmtools.policy import Decision, JobRequest, RequestError, evaluate

ints = st.one_of(st.none(), st.integers(min_value=0, max_value=2**32), st.sampled_from([0, 1, 8, 64, 65, 4294967295]))
texts = st.one_of(st.none(), st.text(max_size=30), st.sampled_from(["production", "standard", "scavenger", "gpu",
                                                                     "vision", "nlp", "students", ""]))
gres = st.one_of(st.none(), st.text(max_size=30), st.builds(
    lambda t, n: f"gres:gpu:{t}{n}", st.sampled_from(["", "h100:", "a100:", ":", "x:y:"]),
    st.integers(min_value=0, max_value=10**6)))
scripts = st.one_of(st.text(max_size=200), st.builds(
    lambda sig, body: f"#!/bin/bash\n#SBATCH --signal={sig}\n{body}", st.text(max_size=20), st.text(max_size=40)))

requests = st.builds(
    JobRequest, user_name=texts, account=texts, default_account=texts, qos=texts, partition=texts,
    time_limit=ints, min_nodes=ints, max_nodes=ints, num_tasks=ints, ntasks_per_node=ints, cpus_per_task=ints,
    shared=st.one_of(st.none(), st.integers(min_value=0, max_value=4)), min_mem_per_node=ints, min_mem_per_cpu=ints,
    tres_per_job=gres, tres_per_node=gres, tres_per_task=gres,
    tres_per_socket=gres, sockets_per_node=ints,
    cpus_per_tres=gres, mem_per_tres=gres, script=scripts)


@settings(max_examples=400, deadline=None)
@given(requests, st.one_of(st.none(), st.dictionaries(st.sampled_from(["vision", "nlp", "students", "x"]),
                                                      st.floats(min_value=0, max_value=1e9))))
def test_evaluate_always_decides(policies, site, fabric, req, usage):
    from slurmtools.policy import PolicyContext

    d = evaluate(req, policies, PolicyContext(site=site, fabric=fabric, usage=usage, month="2026-11"))
    assert isinstance(d, Decision) and d.action in ("allow", "deny", "modify")
    if d.action == "deny":
        assert d.message and "\n" not in d.message and d.policy
    assert set(d.changes) <= {"partition", "qos"}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=12), st.sampled_from(
    ["-N", "-n", "-c", "-t", "--gres=gpu:4", "--gpus", "--mem", "-q", "-A", "--time=1-", "--mem=5X", "-",
     "--exclusive", "--exclusive=user", "--exclusive=x", "-s", "--ntasks-per-node"])),
    max_size=8), st.text(max_size=80))
def test_sbatch_parsing_fails_only_with_a_named_option(policies, site, fabric, args, script):
    from slurmtools.policy import PolicyContext

    try:
        req = JobRequest.from_sbatch(args, script=script)
    except RequestError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(evaluate(req, policies, PolicyContext(site=site, fabric=fabric)), Decision)
