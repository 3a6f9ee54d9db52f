"""The checks a loaded site must pass before anything is planned or rendered from it. Pure: one pass over the
model (`check_site`) and one against the fabric (`check_hosts`); `load_site` runs both, so every command that
loads a site refuses what `site check` refuses. Every error is one ConfigError naming file and key.

The limits are Slurm's own (read in the Slurm 25.11.7 source; 22.05 parses these fields the same way):
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from slurmtools.durations import TIME_LIMIT_MAX, human
from slurmtools.errors import ConfigError
from slurmtools.site.tomlread import Bound

if TYPE_CHECKING:
    from slurmtools.site.model import Site
    from slurmtools.topology.sitefile import Fabric

#: sbatch --signal=[B:]SIG@LEAD: get_signal_opts (src/common/proc_args.c) refuses a lead over 0xffff seconds
SIGNAL_LEAD_MAX = 0xFFFF
#: sacctmgr reads GraceTime and Priority with get_uint (src/sacctmgr/common.c): strtol cast to uint32_t, so a value
#: past 2^32 wraps silently; slurmdbd then stores them only while `(int32_t)value >= 0`
#: (src/plugins/accounting_storage/mysql/as_mysql_qos.c): 2^31 and above is dropped without a word ("Nothing
#: modified" alone, silently left out beside other settings). Measured on 22.05.8 and 25.11.7
#: (tests/hostile/test_site_limits_lab.py)
QOS_INT_MAX = 2**31 - 1
#: other counts (MaxTRES gres/gpu=N, MaxCPUsPerNode) are uint32; 0xfffffffe (NO_VAL) and 0xffffffff (INFINITE)
#: mean "unset" and "clear"
UINT32_MAX_VALUE = 0xFFFFFFFD
#: Slurm counts time limits in whole minutes; a limit under one is "0s", which leaves no job any time
TIME_LIMIT_MIN = 60

# Bounds of the site's numbers that are not a Slurm field of their own (Table.int/float `maximum`). A finite 1e308
# passed the finite check and then became inf in the reports' sums (cost "inf USD", null in report.json) or broke
# job_submit.lua's rendering; each bound is what the key can mean, and is said in the error.
#: money and GPU-hours (prices, budgets, energy factors, bandwidths): the reports and the budget policy (Lua numbers
#: are doubles too) add them as floats, which past 2**53 no longer hold every whole number: one GPU-hour or unit of
#: currency more or less is lost, and near 1e308 the sums become inf
EXACT = Bound(2**53, "the reports' float sums hold exactly, 2**53")
#: a GPU's memory: advise compares it with Slurm's gres/gpumem, a uint64 count of bytes (gpu_nvml.c) whose top
#: values NO_VAL64 and INFINITE64 mean "unset"; in GB that is (0xfffffffffffffffd) // 2**30
GPU_MEMORY_GB = Bound(0xFFFFFFFFFFFFFFFD // 2**30, "Slurm's gres/gpumem (uint64 bytes) holds in GB")
#: gres.conf's shard Count= is read with strtoll, LONG_MAX refused (src/interfaces/gres.c), and a node's shards are
#: its GPUs' (at most MAX_GRES_BITMAP = 1024 GPUs per node): (2**63 - 2) // 1024 per GPU
SHARDS_PER_GPU = Bound((2**63 - 2) // 1024, "Slurm's gres.conf shard Count= holds per GPU of a 1024-GPU node")
#: CPUs and memory per GPU may exceed the node's share by this factor: at a node's GPU count one GPU may take the
#: whole node, and no node has more than MAX_GRES_BITMAP = 1024 GPUs, so a larger tolerance checks nothing (and
#: near 1e308 the limits rendered into job_submit.lua were inf, a traceback)
CPU_MEM_TOLERANCE = Bound(1024, "the most GPUs a node has, at which one GPU may take the whole node")
#: runs of one job shape: a cluster has at most MAX_JOB_ID (0x3ffffff, slurm/slurm.h) local job ids, so more runs
#: are never seen and advise would silently recommend nothing
MIN_RUNS = Bound(0x3FFFFFF, "the job ids one Slurm cluster has, MAX_JOB_ID")
#: a time limit over the longest run: a limit is at most TIME_LIMIT_MAX s and a run lasts at least 1 s, so a larger
#: ratio is never reached and the time rule would silently never fire
TIME_RATIO = Bound(TIME_LIMIT_MAX, "the longest Slurm time limit over a run of 1 s")
#: [slack] polls in a row before a mode changes: more, at least a second apart, outlast Slurm's longest time limit,
#: so no job would ever see the mode change
POLLS = Bound(TIME_LIMIT_MAX, "the polls a second apart in Slurm's longest time limit")

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
NAME_RULE = "names must start with a letter and hold only letters, digits, _ or -"
#: user names as useradd and sacctmgr take them (POSIX portable characters, a trailing $ for machine accounts)
USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?")


def check_site(site: "Site") -> None:
    """Names, Slurm's limits and the references between tables."""
    src = str(site.source)

    def fail(key: str, msg: str) -> ConfigError:
        return ConfigError(src, key, msg)

    if not NAME.fullmatch(site.cluster_name):
        raise fail("site.cluster_name", NAME_RULE)
    for p in site.partitions.values():
        _time_limit(fail, f"partitions.{p.name}.max_time", p.max_time)
        _at_most(fail, f"partitions.{p.name}.max_cpus_per_node", p.max_cpus_per_node, "Slurm's MaxCPUsPerNode holds")
    defaults = [p.name for p in site.partitions.values() if p.default]
    if len(defaults) > 1:
        raise fail("partitions", f"only one partition may be the default, got {', '.join(defaults)}")

    for t in site.tiers.values():
        key = f"tiers.{t.name}"
        _at_most(fail, f"{key}.priority", t.priority, "Slurm's QoS Priority holds", QOS_INT_MAX)
        for field in ("max_gpus_per_job", "max_gpus_per_user", "max_nodes"):
            _at_most(fail, f"{key}.{field}", getattr(t, field), "Slurm's counts hold")
        _time_limit(fail, f"{key}.max_walltime", t.max_walltime)
        longest = max(site.partitions[p].max_time for p in t.partitions)
        if t.max_walltime > longest:
            parts = ", ".join(f"{p}: {human(site.partitions[p].max_time)}" for p in t.partitions)
            raise fail(f"{key}.max_walltime", f"{human(t.max_walltime)} is longer than the longest max_time of the "
                                              f"tier's partitions ({parts})")
        if t.grace_time > QOS_INT_MAX:
            raise fail(f"{key}.grace_time", f"{t.grace_time} s is more than Slurm's QoS GraceTime holds "
                                            f"({QOS_INT_MAX} s)")
        if t.signal_lead > SIGNAL_LEAD_MAX:
            raise fail(f"{key}.signal_lead", f"{t.signal_lead} s is more than Slurm's --signal lead allows "
                                             f"({SIGNAL_LEAD_MAX} s)")
        for other in t.preempted_by:
            if other not in site.tiers:
                raise fail(f"{key}.preempted_by", f"unknown tier {other!r} (tiers: {', '.join(site.tiers)})")
            if site.tiers[other].priority <= t.priority:
                raise fail(f"{key}.preempted_by",
                           f"tier {other!r} must have a higher priority than {t.name!r} to preempt it")
        if t.preemptible and t.grace_time <= 0:
            raise fail(f"{key}.grace_time", "a preemptible tier needs a grace time > 0")
    if site.default_tier not in site.tiers:
        raise fail("site.default_tier", f"unknown tier {site.default_tier!r} (tiers: {', '.join(site.tiers)})")

    for a in site.accounts.values():
        for u in a.users:
            if not USER.fullmatch(u):
                raise fail(f"accounts.{a.name}.users",
                           f"{u!r} is not a user name (letters, digits, _ . - and a leading letter or _)")


def _at_most(fail, key: str, value: int | None, what: str, limit: int = UINT32_MAX_VALUE) -> None:
    if value is not None and value > limit:
        raise fail(key, f"{value} is more than {what} ({limit})")


def _time_limit(fail, key: str, seconds: int) -> None:
    if seconds < TIME_LIMIT_MIN:
        raise fail(key, f"{seconds} s: a time limit must be at least 1 minute (Slurm counts time limits in whole "
                        "minutes)")
    if seconds > TIME_LIMIT_MAX:
        raise fail(key, f"{seconds} s is more than Slurm's time limits hold ({TIME_LIMIT_MAX} s)")


def check_hosts(site: "Site", fabric: "Fabric") -> None:
    """Partitions against the fabric's hosts: a partition names only hosts the fabric has (else slurm.conf gets
    nodes no NodeName line defines), a GPU partition holds only hosts with GPUs of its GPU types, and a CPU
    partition over GPU hosts caps its CPUs per host (max_cpus_per_node) below the host's count, so CPU jobs cannot
    take the cores the GPUs' jobs need."""
    from slurmtools.hostlist import compress, expand

    src = str(site.source)
    known = set(fabric.hosts)
    for p in site.partitions.values():
        hosts = expand(p.nodes)
        missing = [h for h in hosts if h not in known]
        if missing:
            shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
            raise ConfigError(src, f"partitions.{p.name}.nodes",
                              f"{shown} {'is not a host' if len(missing) == 1 else 'are not hosts'} of fabric "
                              f"{fabric.name} ({fabric.source}: {compress(fabric.hosts)})")
        gpu_hosts = []
        for h in hosts:
            nt = fabric.node_type_of(h)
            if not p.cpu_only and not nt.gpus:
                raise ConfigError(src, f"partitions.{p.name}.nodes",
                                  f"{h} has no GPUs (node type {nt.name}); put CPU-only hosts in a partition with "
                                  "gpu_types = []")
            if nt.gpus:
                gpu_hosts.append((h, nt))
                if not p.cpu_only and nt.gpu_type not in p.gpu_types:
                    # else slurm.conf offers gpu:<type> that no plan, price or policy of the site knows
                    raise ConfigError(src, f"partitions.{p.name}.nodes",
                                      f"{h} has {nt.gpu_type} GPUs (node type {nt.name} in {fabric.source}), not a "
                                      f"GPU type of the partition (gpu_types: {', '.join(p.gpu_types)})")
        if p.cpu_only and gpu_hosts:
            h, nt = gpu_hosts[0]
            if p.max_cpus_per_node is None:
                raise ConfigError(src, f"partitions.{p.name}.max_cpus_per_node",
                                  f"CPU partition {p.name} holds GPU hosts ({h}: {nt.gpus} GPUs); cap its CPUs per "
                                  "host so GPU jobs keep their cores")
            for h, nt in gpu_hosts:
                if p.max_cpus_per_node >= nt.cpus:
                    raise ConfigError(src, f"partitions.{p.name}.max_cpus_per_node",
                                      f"{p.max_cpus_per_node} leaves no CPU of GPU host {h} ({nt.cpus} CPUs) to its "
                                      "GPU jobs; give fewer")
