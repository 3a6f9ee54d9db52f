"""Typed runs and advice. Pure data: what a run asked for and used (`RunUse`), the job shape runs are grouped by
(`Shape`), and what the rules found (`Finding`, `ShapeAdvice`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Shape:
    """What makes runs comparable: the same user submitting the same job name with the same GPU count.
    `plan --right-size` matches a request to a shape by these three."""

    user: str
    name: str
    gpus: int

    def label(self) -> str:
        return f"{self.user}/{self.name}/{self.gpus} GPU(s)"


@dataclass(frozen=True)
class RunUse:
    """One run of a job (a requeued job has one per run): asked against used. None: the sources do not say."""

    job_id: int
    run: int
    user: str
    account: str
    name: str
    state: str
    partition: str
    gpu_type: str
    gpus: int  # allocated
    nodes: int
    cpus: int  # allocated, all nodes
    mem_mb: float | None  # requested, per node
    time_limit_s: int | None  # None: no limit (UNLIMITED) or unknown
    elapsed_s: int
    total_cpu_s: float | None  # sacct TotalCPU
    max_rss_mb: float | None  # the largest step's MaxRSS (one task's peak)
    #: per GPU, from the epilog's records: SM and memory-controller utilisation (percent); empty: no record
    gpu_util: tuple[float, ...] = ()
    gpu_mem_util: tuple[float, ...] = ()
    gpu_mem_mb: float | None = None  # peak GPU memory of any one GPU
    #: from Slurm's gres/gpuutil when the epilog has no per-GPU record: the GPU time the run's GPUs were worth, in
    #: percent of one GPU (the busiest step's mean over its GPUs, as the report reads it, x the run's GPUs)
    slurm_gpu_util: float | None = None

    @property
    def shape(self) -> Shape:
        return Shape(self.user, self.name, self.gpus)

    @property
    def cpu_efficiency_pct(self) -> float | None:
        """TotalCPU over the CPUs held for the run's time: how busy the CPUs asked for were."""
        if self.total_cpu_s is None or not self.cpus or self.elapsed_s <= 0:
            return None
        return 100.0 * self.total_cpu_s / (self.cpus * self.elapsed_s)


@dataclass(frozen=True)
class Finding:
    """One rule's verdict on a shape: the evidence in one sentence, the fix (plan options; "" when no option
    fixes it) and, for `plan --right-size`, the request fields it changes: field -> (from, to)."""

    rule: str  # gpus | gpu_unit | time | memory_bound | cpu | memory
    evidence: str
    fix: str
    changes: dict = field(default_factory=dict)

    def sentence(self) -> str:
        return f"{self.evidence}: {self.fix}" if self.fix else self.evidence


@dataclass(frozen=True)
class ShapeAdvice:
    """A shape's runs summarised (asked vs used) and what the rules found; `findings` empty: nothing to change."""

    shape: Shape
    account: str
    gpu_type: str
    runs: int
    asked: dict
    used: dict
    findings: tuple[Finding, ...] = ()

    def sentence(self) -> str:
        """Every finding in one sentence ("12 of your last 14 ... plan with --gpus 2; your time limit ...")."""
        return "; ".join(f.sentence() for f in self.findings)

    def as_dict(self) -> dict:
        return {"user": self.shape.user, "name": self.shape.name, "gpus": self.shape.gpus, "account": self.account,
                "gpu_type": self.gpu_type, "runs": self.runs, "asked": self.asked, "used": self.used,
                "recommendation": self.sentence(),
                "findings": [{"rule": f.rule, "evidence": f.evidence, "fix": f.fix,
                              "changes": {k: {"from": a, "to": b} for k, (a, b) in f.changes.items()}}
                             for f in self.findings]}
