"""`plan --right-size` (pure): the request changed as the advice for its job shape says, and what was changed
from what, with the evidence. Never silent: no history, no matching shape and no recommendation are said too."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from slurmtools.advise.model import ShapeAdvice, Shape
from slurmtools.durations import human

#: request fields the planner can take from a finding (a MIG slice, shard or MPS share is named, not applied: the
#: planner plans whole GPUs)
APPLIED = ("gpus", "time_limit", "gpu_type", "cpus", "mem_mb")


@dataclass(frozen=True)
class RightSize:
    """What `--right-size` did: the shape looked up, each change (field, from, to, evidence), and notes."""

    shape: Shape
    changes: tuple[tuple[str, object, object, str], ...]
    notes: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"shape": {"user": self.shape.user, "name": self.shape.name, "gpus": self.shape.gpus},
                "changes": [{"field": f, "from": a, "to": b, "evidence": e} for f, a, b, e in self.changes],
                "notes": list(self.notes)}


def shape_of(req) -> Shape:
    """The shape a request matches: its user, job name and GPUs asked (nodes x GPUs per node when given so)."""
    gpus = req.gpus if req.gpus is not None else (req.nodes or 0) * (req.gpus_per_node or 0)
    return Shape(req.user or "", req.name, int(gpus or 0))


def right_size(req, advice: Sequence[ShapeAdvice], runs_seen: int, window: str):
    """(the request with the recommendation applied, RightSize). `runs_seen`: runs of any shape read over
    `window` of the request's user (to say when there was none at all)."""
    shape = shape_of(req)
    match = next((a for a in advice if a.shape == shape), None)
    who = f"`{shape.name}` ({shape.gpus} GPU(s), user {shape.user})"
    if match is None:
        why = f"no finished run of user {shape.user}" if runs_seen == 0 else f"no finished run of {who}"
        return req, RightSize(shape, (), (f"--right-size: {why} in the last {window}; the request is planned as "
                                          f"asked",))
    if not match.findings:
        return req, RightSize(shape, (), (f"--right-size: {match.runs} run(s) of {who} in the last {window} give no "
                                          f"recommendation; the request is planned as asked",))
    changes, notes, fields = [], [], {}
    for f in match.findings:
        applied = {k: v for k, v in f.changes.items() if k in APPLIED}
        if not applied:
            if f.fix:
                notes.append(f"--right-size: not applied (the planner plans whole GPUs and the CPUs and memory that "
                             f"come with them): {f.sentence()}")
            else:
                notes.append(f"--right-size: for your information: {f.sentence()}")
            continue
        for k, (old, new) in applied.items():
            now = _current(req, k)
            if k == "gpus" and now != old or k == "gpu_type" and now not in (None, old):
                notes.append(f"--right-size: {f.sentence()}; not applied: the request asks {_label(k)} "
                             f"{_show(k, now)}, the history {_show(k, old)}")
                continue
            if k in ("time_limit", "cpus", "mem_mb") and now is not None and new >= now:
                notes.append(f"--right-size: {f.sentence()}; the request already asks {_label(k)} {_show(k, now)}")
                continue
            fields[k] = new
            changes.append((k, now if now is not None else old, new, f.evidence))
            notes.append(f"--right-size: {_label(k)} {_show(k, now if now is not None else old)} -> "
                         f"{_show(k, new)} because {f.evidence}")
    if "gpus" in fields:
        req = replace(req, gpus=fields.pop("gpus"), nodes=None, gpus_per_node=None)
    if fields:
        req = replace(req, **fields)
    return req, RightSize(shape, tuple(changes), tuple(notes))


def _current(req, key: str):
    if key == "gpus":
        return shape_of(req).gpus
    return getattr(req, key)


def _label(key: str) -> str:
    return {"gpus": "--gpus", "time_limit": "--time", "gpu_type": "--gpu-type", "cpus": "--cpus",
            "mem_mb": "--mem"}[key]


def _show(key: str, v) -> str:
    if v is None:
        return "(default)"
    if key == "time_limit":
        return human(v)
    if key == "mem_mb":
        return f"{v // 1024}G" if v % 1024 == 0 else f"{v}M"
    return str(v)
