"""What differs between the Slurm releases slurmtools supports: one table, read by the renderers and the backend.

Pure. Everything version-dependent that slurmtools writes for Slurm or reads from it is a field here, so renderers
ask `release.topology_yaml` instead of comparing version numbers. A release not in the table is refused with one
line: slurmtools never guesses what an unknown Slurm accepts.

Sources: each release's changelog and man pages (slurm.conf(5), topology.conf(5), topology.yaml(5), sbatch(1)), and
the two labs (22.05.8 from Debian, 25.11.7 built from source), which prove the rows marked `lab`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurmtools.errors import ConfigError


@dataclass(frozen=True)
class SlurmRelease:
    """One Slurm major release (year.month) and what it accepts."""

    name: str  # "25.11"
    #: slurm.conf line that makes the preemption warning reach a `--signal=B:SIG@T` handler at grace start
    preempt_signal_conf: str
    #: topology plugins besides topology/tree (and flat, the default)
    block_topology: bool  # topology/block with BlockSizes (24.05+; 23.11 had BlockLevels)
    topology_yaml: bool  # several topologies, one per partition (`Topology=` in PartitionName lines)
    empty_blocks: bool  # blocks with fewer nodes than the base block size (placeholders), 25.05+
    segment: bool  # sbatch --segment and --exclusive=topo
    restricted_cores_per_gpu: bool  # NodeName ... RestrictedCoresPerGPU=
    #: the data parser whose `--json` shape slurmtools reads (it picks the reader, `readers.reader_for`); None for
    #: 22.05's openapi/v0.0.38 output
    json_parser: str | None
    #: does Slurm itself requeue a preempted job (PreemptMode=REQUEUE) that ends during its GraceTime? Measured:
    #: 22.05 no (it ends COMPLETED), 25.11 yes (and a `scontrol requeue` by the job then requeues the NEXT run too);
    #: None where no lab has measured it
    preempted_exit_requeued: bool | None = None
    #: SchedulerParameters=requeue_delay= (how long a requeued job waits before its next start; without it the
    #: wait is AuthInfo's cred_expire + 1 s, at least 6 s). 25.11 reads it (job_mgr.c), 22.05's slurmctld has
    #: no such option; None where no one has checked
    requeue_delay: bool | None = None
    #: does `--json` take the data parser's name (`--json=v0.0.40`)? 23.11 and later: their squeue, scontrol, sinfo
    #: and sacct declare the option with an optional argument; 23.02's take none (getopt refuses `--json=v0.0.39`:
    #: "option '--json' doesn't allow an argument", exit 1) and always write v0.0.39, the only parser 23.02 has
    json_parser_flag: bool = True
    #: does `scontrol update NumNodes=N` send max_nodes N too? Measured: 25.11 yes (a 1-8 job becomes 4-4), 22.05
    #: no (min_nodes only: it becomes 4-8, and job_submit.lua's job_desc.max_nodes is NO_VAL); None where no lab has
    #: measured it (the update check then keeps the job's max, the larger count)
    numnodes_update_sets_max: bool | None = None
    #: the micro release this slurmtools' lab suite runs against, if any
    lab: str | None = None

    @property
    def version(self) -> tuple[int, int]:
        a, b = self.name.split(".")
        return int(a), int(b)

    def json_flag(self) -> str:
        """`--json` or `--json=v0.0.44`: the output shape slurmtools reads must not change under it on upgrade.
        Plain `--json` where the release names no parser on its command line (22.05, 23.02: one shape each)."""
        return f"--json={self.json_parser}" if self.json_parser and self.json_parser_flag else "--json"

    def require(self, feature: str, what: str) -> None:
        """One line refusing `what` when this release lacks `feature` (a field name above)."""
        if not getattr(self, feature):
            first = next((r.name for r in RELEASES.values() if getattr(r, feature)), None)
            since = f" (Slurm {first} and later have it)" if first else ""
            raise ConfigError("--slurm-version", self.name, f"{what} is not supported by Slurm {self.name}{since}")


_OLD_SIGNAL = "SlurmctldParameters=preempt_send_user_signal"  # 22.05's spelling; still read by 25.11's slurmctld
_NEW_SIGNAL = "PreemptParameters=send_user_signal"  # documented from 25.11 on

RELEASES: dict[str, SlurmRelease] = {r.name: r for r in (
    SlurmRelease("22.05", _OLD_SIGNAL, block_topology=False, topology_yaml=False, empty_blocks=False, segment=False,
                 restricted_cores_per_gpu=False, json_parser=None, json_parser_flag=False,
                 preempted_exit_requeued=False, requeue_delay=False, numnodes_update_sets_max=False, lab="22.05.8"),
    SlurmRelease("23.02", _OLD_SIGNAL, block_topology=False, topology_yaml=False, empty_blocks=False, segment=False,
                 restricted_cores_per_gpu=False, json_parser="v0.0.39", json_parser_flag=False),
    SlurmRelease("23.11", _OLD_SIGNAL, block_topology=False, topology_yaml=False, empty_blocks=False, segment=False,
                 restricted_cores_per_gpu=False, json_parser="v0.0.40"),
    SlurmRelease("24.05", _OLD_SIGNAL, block_topology=True, topology_yaml=False, empty_blocks=False, segment=True,
                 restricted_cores_per_gpu=True, json_parser="v0.0.41"),
    SlurmRelease("24.11", _OLD_SIGNAL, block_topology=True, topology_yaml=False, empty_blocks=False, segment=True,
                 restricted_cores_per_gpu=True, json_parser="v0.0.42"),
    SlurmRelease("25.05", _OLD_SIGNAL, block_topology=True, topology_yaml=True, empty_blocks=True, segment=True,
                 restricted_cores_per_gpu=True, json_parser="v0.0.43"),
    SlurmRelease("25.11", _NEW_SIGNAL, block_topology=True, topology_yaml=True, empty_blocks=True, segment=True,
                 restricted_cores_per_gpu=True, json_parser="v0.0.44", preempted_exit_requeued=True, requeue_delay=True,
                 numnodes_update_sets_max=True, lab="25.11.7"),
    # 26.05: no lab; from its source and changelog (CHANGELOG/slurm-26.05.md): data_parser v0.0.45 keeps every job
    # and node key the readers use (it drops the job's `shared`, which they never read); job_desc still carries
    # --exclusive as `shared`; topology.yaml, topology/block, --segment, --exclusive=topo and RestrictedCoresPerGPU
    # remain; the changelog removes no preemption setting. What only a lab shows is left None.
    SlurmRelease("26.05", _NEW_SIGNAL, block_topology=True, topology_yaml=True, empty_blocks=True, segment=True,
                 restricted_cores_per_gpu=True, json_parser="v0.0.45"),
)}

_VERSION = re.compile(r"(?:slurm(?:-wlm)?\s+)?(\d{2})\.(\d{1,2})(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int | None]:
    """'slurm 22.05.8' / '25.11' / '25.11.7' -> (25, 11, 7)."""
    m = _VERSION.search(text.strip())
    if not m:
        raise ConfigError("--slurm-version", text, 'expected a Slurm version like "25.11" or "22.05.8"')
    return int(m.group(1)), int(m.group(2)), int(m.group(3)) if m.group(3) else None


def release_for(version: str) -> SlurmRelease:
    """The table row for a version string; one line naming the version when slurmtools does not know it."""
    major, minor, _ = parse_version(version)
    name = f"{major:02d}.{minor:02d}"
    rel = RELEASES.get(name)
    if rel is None:
        known = ", ".join(RELEASES)
        raise ConfigError("--slurm-version", version,
                          f"Slurm {name} is not a release this slurmtools knows (known: {known})")
    return rel


def latest() -> SlurmRelease:
    return list(RELEASES.values())[-1]
