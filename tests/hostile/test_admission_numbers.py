"""Issue 12, class 5: absurd numbers get one rule on both sides: a request holding a number (given or derived)
beyond 2^40 is refused before any policy, with the same message from Python and from the generated Lua.

Before the fix: per-CPU memory between 9.2e18 and 2^63 MB was taken as "unset" by the Lua and refused by Python;
counts at or above 2^53 printed differently in the Lua's messages; a 400-digit GPU count raised OverflowError in
Python (and a 5000-digit one ValueError).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slurmtools.policy import JobRequest
from slurmtools.policy.builtin import absurd
from slurmtools.policy.request import ABSURD

from .admission_support import needs_lua, python_decision, same_on_both_sides

SIG = "#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsleep 1\n"


def base(**kw) -> JobRequest:
    return JobRequest(account="vision", qos="production", partition="gpu", script=SIG, **kw)


def test_huge_gpu_counts_are_refused_not_raised():
    for digits in (400, 5000):
        d = python_decision(base(tres_per_node="gres:gpu:h100:" + "9" * digits))
        assert (d.action, d.policy, d.message) == ("deny", "request", absurd("--gres"))
    r = JobRequest.from_sbatch(["-A", "vision", "--gpus=h100:" + "9" * 400], script=SIG)
    assert python_decision(r).message == absurd("--gpus")


@needs_lua
def test_edges_same_on_both_sides(tmp_path):
    reqs = [base(min_mem_per_cpu=9_300_000_000_000_000_000, tres_per_node="gres:gpu:h100:1"),  # Lua took it as unset
            base(min_mem_per_cpu=2**63 - 1, tres_per_node="gres:gpu:h100:1"),
            base(tres_per_job="gres:gpu:h100:" + str(2**53)),                                 # printed wrong in Lua
            base(tres_per_job="gres:gpu:h100:" + str(2**53 + 1)),
            base(tres_per_job="gres:gpu:h100:" + "9" * 400),
            base(tres_per_node="gres:gpu:h100:1k", min_nodes=2**31, num_tasks=1),             # derived GPUs
            base(tres_per_task="gres:gpu:h100:1", num_tasks=2**32 - 2 - 1, cpus_per_task=65533),  # derived CPUs
            base(tres_per_node="gres:gpu:h100:1", min_mem_per_node=2**40),                   # at the limit: allowed
            base(tres_per_job="gres:gpu:h100:1t"),                                           # 2^40 exactly
            base(tres_per_job="gres:gpu:h100:1025g")]                                        # just above
    d = same_on_both_sides(reqs, tmp_path)
    assert [x.message for x in d[:5]] == [absurd("--mem-per-cpu")] * 2 + [absurd("--gpus")] * 3
    assert (d[5].message, d[6].message) == (absurd("GPU count"), absurd("CPU count"))
    assert d[7].policy == "cpu_mem_per_gpu"  # a real (huge) number meets the real rule
    assert d[8].message == "tier production allows at most 64 GPUs per job; this job asks for 1099511627776"
    assert d[9].message == absurd("--gpus")


big = st.one_of(st.integers(min_value=0, max_value=2**63 - 1), st.sampled_from([0, 1, ABSURD, ABSURD + 1, 2**53,
                                                                                2**53 + 1, 2**62]))
counts = st.one_of(st.integers(min_value=0, max_value=10**30).map(str), st.text("0123456789", min_size=1,
                   max_size=400), st.builds(lambda n, s: f"{n}{s}", st.integers(min_value=0, max_value=99999),
                   st.sampled_from(["k", "K", "kb", "KiB", "m", "g", "t", "p", "pb", "x", ""])))
gres = st.builds(lambda t, c: f"gres:gpu:{t}{c}", st.sampled_from(["", "h100:", "a100:"]), counts)
u32 = st.one_of(st.none(), st.integers(min_value=0, max_value=4294967293))
u16 = st.one_of(st.none(), st.integers(min_value=0, max_value=65533))

requests = st.builds(
    JobRequest, account=st.sampled_from(["vision", "nlp"]), qos=st.sampled_from(["production", "standard"]),
    partition=st.just("gpu"), time_limit=u32, min_nodes=u32, num_tasks=u32, ntasks_per_node=u16, cpus_per_task=u16,
    sockets_per_node=u16, min_mem_per_node=st.one_of(st.none(), big), min_mem_per_cpu=st.one_of(st.none(), big),
    tres_per_job=st.one_of(st.none(), gres), tres_per_node=st.one_of(st.none(), gres),
    tres_per_task=st.one_of(st.none(), gres), tres_per_socket=st.one_of(st.none(), gres),
    cpus_per_tres=st.one_of(st.none(), gres), mem_per_tres=st.one_of(st.none(), gres), script=st.just(SIG))


@settings(max_examples=30, deadline=None)
@given(st.lists(requests, min_size=30, max_size=30))
@needs_lua
def test_random_big_numbers_same_on_both_sides(tmp_path_factory, reqs):
    """Numbers anywhere up to what a job_desc can carry, counts up to 400 digits and every suffix: the same decision
    and byte-identical message from Python and from Lua 5.1 and 5.3; a refusal never prints a number above 2^40."""
    for d in same_on_both_sides(reqs, tmp_path_factory.mktemp("numbers")):
        nums = [int(w) for w in d.message.replace(",", " ").replace(";", " ").split() if w.isdigit()]
        assert all(n <= ABSURD for n in nums), d.message
