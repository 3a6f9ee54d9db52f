"""Typed model of a site. Pure data: loading and validation live in `load.py`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from slurmtools.slack_settings import SlackSettings

#: a MIG profile as Slurm's GRES type names it: compute slices (of 7) and memory, e.g. 1g.10gb, 3g.40gb
MIG_PROFILE = re.compile(r"([1-7])g\.(\d{1,4})gb")


@dataclass(frozen=True)
class GpuType:
    """A GPU model as Slurm's GRES type names it (`h100`), with its price per GPU-hour."""

    name: str
    description: str
    memory_gb: int
    price_per_gpu_hour: float
    #: peak memory bandwidth per GPU (GB/s); None: not stated. `advise` names a type with more for memory-bound jobs
    memory_bandwidth_gbs: float | None = None
    #: units smaller than a GPU the site's Slurm offers on this type (what `advise` may recommend instead of a whole
    #: GPU): MIG profiles as Slurm's GRES types name them ("1g.10gb"), gres/shard per GPU (0: none), gres/mps
    mig_profiles: tuple[str, ...] = ()
    shards_per_gpu: int = 0
    mps: bool = False


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: str  # Slurm hostlist expression, e.g. "gpu[01-16]"
    default: bool
    max_time: int  # seconds
    #: GPU types its jobs may ask for; absent in the site file: every type; `[]`: a CPU partition
    gpu_types: tuple[str, ...]
    #: multi-node jobs get whole nodes unless this is true
    allow_partial_nodes: bool = False
    description: str = ""
    #: which Slurm topology places this partition's jobs: "tree" (leaf switches, --switches), "block" (NVLink
    #: domains or leaves as blocks, --segment) or "flat"; partitions of different kinds need topology.yaml
    topology: str = "tree"
    #: Slurm's MaxCPUsPerNode: the most CPUs this partition's jobs may hold on one host together. A CPU partition
    #: over GPU hosts must set it, so CPU jobs leave the GPU jobs their cores; None: no cap
    max_cpus_per_node: int | None = None

    @property
    def cpu_only(self) -> bool:
        """`gpu_types = []`: a CPU partition (no GPU is ever allocated through it)."""
        return not self.gpu_types


@dataclass(frozen=True)
class Tier:
    """A service tier, enforced as a Slurm QoS of the same name."""

    name: str
    description: str
    priority: int
    #: tiers whose jobs may preempt this one; empty means never preempted
    preempted_by: tuple[str, ...]
    #: seconds between the preemption warning and SIGKILL (Slurm's GraceTime)
    grace_time: int
    max_gpus_per_job: int | None
    max_gpus_per_user: int | None
    max_walltime: int  # seconds
    max_nodes: int | None
    partitions: tuple[str, ...]
    #: the signal sent to the batch shell ahead of time limit and preemption (sbatch --signal=B:SIG@lead); one of
    #: slurmtools.warning_signals.USABLE (default URG: see docs/checkpoint.md, "Which signal")
    checkpoint_signal: str = "URG"
    #: seconds of warning before the time limit
    signal_lead: int = 300
    #: whether this tier's GPU-hours count against the accounts' monthly budgets (`charged = false`: idle capacity
    #: given away, e.g. a scavenger tier); read by `slurmtools.policy.usage.charged_tiers`
    charged: bool = True

    @property
    def qos(self) -> str:
        return self.name

    @property
    def preemptible(self) -> bool:
        return bool(self.preempted_by)


@dataclass(frozen=True)
class Account:
    name: str
    description: str
    #: GPU-hours per calendar month; None means unlimited
    monthly_gpu_hours: float | None
    users: tuple[str, ...]
    tiers: tuple[str, ...]
    #: what happens to a job once the budget is spent: "reject" or "scavenger" (route to the lowest tier)
    over_budget: str = "reject"


@dataclass(frozen=True)
class PolicySettings:
    """Site-wide switches for the admission policies (which ones run, and their tolerances)."""

    require_gpu_type: bool = True
    require_checkpoint_signal: bool = True
    #: how far a job's CPUs/memory per GPU may exceed the node type's share (1.0 = exactly its share)
    cpu_mem_tolerance: float = 1.0
    #: what job_submit.lua does with a job when the policy itself fails: "closed" refuses it (no input that breaks
    #: the evaluator gets a job past admission), "open" admits it; audited either way (docs/policy.md)
    fail_mode: str = "closed"
    #: refuse a job without GPUs on a GPU partition (policy `partition_gpus`), pointing to the CPU partitions; off by
    #: default: many sites let CPU-only work (data preparation, evaluation) use the GPU hosts' spare cores
    require_gpus_on_gpu_partitions: bool = False
    enabled: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ReportSettings:
    """`[reports]`: how much dirty accounting data a report tolerates before it fails."""

    #: the share of an input's rows (sacct lines, epilog records) that may be bad; None: the reports' default
    max_bad_share: float | None = None


@dataclass(frozen=True)
class AdviseSettings:
    """`[advise]`: when `slurmtools advise` recommends a smaller request (docs/advise.md). Percentages are 0-100."""

    #: how far back advise looks by default, seconds
    lookback: int = 30 * 86400
    #: runs of one job shape needed before anything is recommended
    min_runs: int = 3
    #: the share of a shape's runs that must support a recommendation ("12 of 14" is 0.86)
    runs_share: float = 0.8
    #: a GPU whose utilisation stayed at or below this counted as unused
    gpu_idle_pct: float = 5.0
    #: one GPU busy at most this much (SM) in the runs: a smaller unit (MIG, shard, MPS) is recommended if offered
    fraction_util_pct: float = 40.0
    #: time limit at least this many times the longest run: a shorter --time is recommended
    time_ratio: float = 2.0
    #: the recommended --time is the longest run times this, rounded up
    time_headroom: float = 1.5
    #: CPU efficiency (TotalCPU / CPUs x elapsed) below this is reported
    cpu_efficiency_pct: float = 25.0
    #: peak memory (MaxRSS) below this share of the request is reported
    memory_used_pct: float = 25.0
    #: memory-bound GPUs: memory controller busy at least this, SM at most `memory_bound_sm_pct`
    memory_bound_mem_pct: float = 60.0
    memory_bound_sm_pct: float = 50.0
    #: `advise --notify` mails through the local sendmail instead of writing files
    mail: bool = False
    #: appended to user names for mail ("example.org" -> alice@example.org); "": local delivery
    mail_domain: str = ""


@dataclass(frozen=True)
class TelemetrySettings:
    """`[telemetry]`: how the hooks get each job's GPU utilisation (docs/telemetry.md)."""

    #: "accounting": the prolog switches NVML accounting mode on for the job's GPUs, the epilog reads it;
    #: "off": neither touches it (slurmtools.hooks.telemetry.MODES)
    gpu_utilization: str = "accounting"


@dataclass(frozen=True)
class EnergySettings:
    """`[energy]`: what the reports charge for GPU energy (docs/telemetry.md). None: not stated, not shown."""

    #: the site's price of a kWh, in the site's currency
    price_per_kwh: float | None = None
    #: kg CO2e per kWh of the site's electricity
    carbon_kg_per_kwh: float | None = None


@dataclass(frozen=True)
class Site:
    name: str
    cluster_name: str
    source: Path
    spool_dir: Path
    currency: str
    default_tier: str
    gpu_types: dict[str, GpuType]
    partitions: dict[str, Partition]
    tiers: dict[str, Tier]
    accounts: dict[str, Account]
    fabric_path: Path | None
    policy: PolicySettings = PolicySettings()
    reports: ReportSettings = ReportSettings()
    advise: AdviseSettings = AdviseSettings()
    #: `[slack]`: the slack signal for training code (slurmtools.slack, docs/slack.md)
    slack: SlackSettings = SlackSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    energy: EnergySettings = EnergySettings()

    @property
    def default_partition(self) -> Partition:
        for p in self.partitions.values():
            if p.default:
                return p
        return next(iter(self.partitions.values()))

    @property
    def cpu_partitions(self) -> list[Partition]:
        """CPU partitions (`gpu_types = []`), the default one first, then in file order."""
        parts = [p for p in self.partitions.values() if p.cpu_only]
        return sorted(parts, key=lambda p: not p.default)

    def tiers_by_priority(self) -> list[Tier]:
        """Highest priority first."""
        return sorted(self.tiers.values(), key=lambda t: -t.priority)

    def preempts(self, tier: str) -> list[str]:
        """Names of the tiers that `tier` may preempt (Slurm's QoS Preempt= list)."""
        return [t.name for t in self.tiers.values() if tier in t.preempted_by]

    def topology_kinds(self) -> dict[str, str]:
        """Partition -> topology kind ("tree", "block", "flat")."""
        return {p.name: p.topology for p in self.partitions.values()}

    @property
    def lowest_tier(self) -> Tier:
        return min(self.tiers.values(), key=lambda t: t.priority)
