"""The planner's only I/O: read the fabric, build the topology graph, and join Slurm's live node and job state.

Kept apart so everything else in the planner stays pure. Where no Slurm answers, the view is the declared
topology as if idle, and the caller says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from slurmtools.errors import ConfigError, SlurmUnavailable
from slurmtools.planner.plan import Planned, Release, planned_from_starts, releases_from_jobs
from slurmtools.planner.view import ClusterView, from_topology


@dataclass(frozen=True)
class State:
    view: ClusterView
    releases: tuple[Release, ...]
    note: str  # "" when live; else why the plan is against the idle declared topology
    jobs: tuple = ()
    graph: object = None  # the topology graph the view came from
    backend: object = None  # the backend that answered (None when idle)
    release: object = None  # the SlurmRelease that will run the job: the live Slurm's, or --slurm-version's
    planned: tuple[Planned, ...] = ()  # pending jobs Slurm has planned (squeue --start)


def load_fabric_of(site):
    if site.fabric_path is None:
        raise ConfigError(str(site.source), "site.fabric", "the planner needs the site's fabric file (topology)")
    from slurmtools.topology.sitefile import load_fabric

    return load_fabric(site.fabric_path)


def gather(site, backend=None, *, idle: bool = False, slurm_version: str | None = None) -> State:
    """The cluster view for planning: live when a backend answers, else idle with a note."""
    from slurmtools.slurm.releases import release_for
    from slurmtools.topology.build_site import build_site

    named = release_for(slurm_version) if slurm_version else None
    fabric = load_fabric_of(site)
    graph = build_site(fabric)
    if idle:
        return State(from_topology(graph, fabric.node_types), (), "planned against the declared topology as if idle "
                                                                  "(--idle)", graph=graph, release=named)
    try:
        if backend is None:
            from slurmtools.slurm.backend import get_backend

            backend = get_backend()
        nodes = backend.nodes()
        jobs = backend.jobs()
        running = backend.slurm_release() if hasattr(backend, "slurm_release") else None
        starts = backend.scheduled_starts()
    except SlurmUnavailable as exc:
        return State(from_topology(graph, fabric.node_types), (),
                     f"no Slurm reachable ({exc}); planned against the declared topology as if idle", graph=graph,
                     release=named)
    if named is not None and running is not None and named.name != running.name:
        raise ConfigError("--slurm-version", slurm_version, f"the Slurm that answers here is {running.name}")
    view = from_topology(graph, fabric.node_types, nodes)
    now = datetime.now(timezone.utc)
    rel = releases_from_jobs(jobs, _aware(now, jobs))
    planned = planned_from_starts(starts, datetime.now())  # squeue prints local time
    return State(view, tuple(rel), "", tuple(jobs), graph=graph, backend=backend, release=running or named,
                 planned=tuple(planned))


def _aware(now: datetime, jobs) -> datetime:
    """Match the backend's datetimes (naive local or aware) so subtraction works."""
    for j in jobs:
        if j.start_time is not None:
            return now if j.start_time.tzinfo is not None else datetime.now()
    return now
