"""`right_size` (pure): which findings change the request, which are only named, and never a silent change."""

from __future__ import annotations

from slurmtools.advise.model import Finding, Shape, ShapeAdvice
from slurmtools.advise.rightsize import right_size
from slurmtools.planner.request import JobRequest

REQ = JobRequest(command=("python", "t.py"), gpus=8, name="train-vit", user="alice", time_limit=4 * 3600)


def advice(*findings, gpus=8):
    return [ShapeAdvice(Shape("alice", "train-vit", gpus), "vision", "h100", 5, {}, {}, tuple(findings))]


GPUS = Finding("gpus", "5 of your last 5 `train-vit` runs used at most 2 of 8 GPUs", "plan with --gpus 2",
               {"gpus": (8, 2)})
TIME = Finding("time", "your time limit (4h) is 4x your longest run (1h)", "use --time 90m",
               {"time_limit": (14400, 5400)})
TYPE = Finding("memory_bound", "5 of ... were memory-bound", "plan with --gpu-type h200", {"gpu_type": ("h100",
                                                                                                       "h200")})
UNIT = Finding("gpu_unit", "5 of ... kept their one GPU at most 20% busy", "share a GPU: --gres=shard:2")


def test_applies_gpus_time_and_type_with_from_to_and_evidence():
    req, rs = right_size(REQ, advice(GPUS, TIME, TYPE), 5, "30d")
    assert (req.gpus, req.time_limit, req.gpu_type, req.nodes, req.gpus_per_node) == (2, 5400, "h200", None, None)
    assert [(f, a, b) for f, a, b, _ in rs.changes] == [("gpus", 8, 2), ("time_limit", 14400, 5400),
                                                         ("gpu_type", "h100", "h200")]
    assert rs.notes == ("--right-size: --gpus 8 -> 2 because 5 of your last 5 `train-vit` runs used at most 2 of 8 "
                        "GPUs",
                        "--right-size: --time 4h -> 90m because your time limit (4h) is 4x your longest run (1h)",
                        "--right-size: --gpu-type h100 -> h200 because 5 of ... were memory-bound")


def test_never_lengthens_and_never_overrides_another_chosen_type():
    req, rs = right_size(JobRequest(gpus=8, name="train-vit", user="alice", time_limit=3600, gpu_type="a100"),
                         advice(TIME, TYPE), 5, "30d")
    assert (req.time_limit, req.gpu_type) == (3600, "a100") and rs.changes == ()
    assert rs.notes == (f"--right-size: {TIME.sentence()}; the request already asks --time 1h",
                        f"--right-size: {TYPE.sentence()}; not applied: the request asks --gpu-type a100, the history "
                        f"h100")


def test_a_smaller_unit_is_named_not_applied():
    req, rs = right_size(REQ, advice(UNIT), 5, "30d")
    assert req == REQ and rs.changes == ()
    assert rs.notes == ("--right-size: not applied (the planner plans whole GPUs and the CPUs and memory that come "
                        "with them): 5 of ... kept their one GPU at most 20% busy: share a GPU: --gres=shard:2",)


def test_no_history_and_no_match_are_said():
    req, rs = right_size(REQ, [], 0, "30d")
    assert req == REQ and rs.notes == ("--right-size: no finished run of user alice in the last 30d; the request is "
                                       "planned as asked",)
    req, rs = right_size(REQ, advice(GPUS, gpus=4), 3, "30d")
    assert req == REQ and rs.notes == ("--right-size: no finished run of `train-vit` (8 GPU(s), user alice) in the "
                                       "last 30d; the request is planned as asked",)
