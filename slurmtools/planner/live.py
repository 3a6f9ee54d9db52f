"""The planner's only I/O: read the fabric, build the topology graph, and join Slurm's live node and job state.

Kept apart so everything else in the planner stays pure. Where no Slurm answers, the view is the declared
topology as if idle, and the caller says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from slurmtools.errors import ConfigError, SlurmUnavailable
from slurmtools.planner.plan import Planned, Release, planned_from_starts, releases_from_jobs
from slurmtools.planner.view import ClusterView, from_declared, from_topology


@dataclass(frozen=True)
class State:
    view: ClusterView
    releases: tuple[Release, ...]
    note: str  # "" when live; else why the plan is against the idle declared topology
    jobs: tuple = ()
    fabric: object = None  # the declared fabric the view came from
    backend: object = None  # the backend that answered (None when idle)
    release: object = None  # the SlurmRelease that will run the job: the live Slurm's, or --slurm-version's
    planned: tuple[Planned, ...] = ()  # pending jobs Slurm has planned (squeue --start)
    _graph: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def graph(self):
        """The topology graph of the fabric, built on first use: `explain` reads it, a plan does not (on a 16k-host
        site the graph is half a million vertices and seconds to build)."""
        if "g" not in self._graph and self.fabric is not None:
            from slurmtools.topology.build_site import build_site

            self._graph["g"] = build_site(self.fabric)
        return self._graph.get("g")


def _view(fabric, graph: dict, nodes=None) -> ClusterView:
    """The planner's view of the fabric: from the fabric file alone where that gives the graph's view (see
    `view.from_declared`), else from the graph, which is then kept for `State.graph`."""
    from slurmtools.planner.nearest_cache import nearest_of

    view = from_declared(fabric, nodes, nearest_of=nearest_of)
    if view is None:
        from slurmtools.topology.build_site import build_site

        graph["g"] = build_site(fabric)
        view = from_topology(graph["g"], fabric.node_types, nodes)
    return view


def load_fabric_of(site):
    if site.fabric_path is None:
        raise ConfigError(str(site.source), "site.fabric", "the planner needs the site's fabric file (topology)")
    from slurmtools.topology.sitefile import load_fabric

    return load_fabric(site.fabric_path)


def gather(site, backend=None, *, idle: bool = False, slurm_version: str | None = None) -> State:
    """The cluster view for planning: live when a backend answers, else idle with a note."""
    from slurmtools.slurm.releases import release_for

    named = release_for(slurm_version) if slurm_version else None
    fabric = load_fabric_of(site)
    graph: dict = {}
    if idle:
        return State(_view(fabric, graph), (), "planned against the declared topology as if idle (--idle)",
                     fabric=fabric, release=named, _graph=graph)
    try:
        if backend is None:
            from slurmtools.slurm.backend import get_backend

            backend = get_backend()
        nodes = backend.nodes()
        jobs = backend.jobs()
        running = backend.slurm_release() if hasattr(backend, "slurm_release") else None
        starts = backend.scheduled_starts()
    except SlurmUnavailable as exc:
        return State(_view(fabric, graph), (),
                     f"no Slurm reachable ({exc}); planned against the declared topology as if idle", fabric=fabric,
                     release=named, _graph=graph)
    if named is not None and running is not None and named.name != running.name:
        raise ConfigError("--slurm-version", slurm_version, f"the Slurm that answers here is {running.name}")
    view = _view(fabric, graph, nodes)
    now = datetime.now(timezone.utc)
    rel = releases_from_jobs(jobs, _aware(now, jobs))
    planned = planned_from_starts(starts, datetime.now())  # squeue prints local time
    return State(view, tuple(rel), "", tuple(jobs), fabric=fabric, backend=backend, release=running or named,
                 planned=tuple(planned), _graph=graph)


def _aware(now: datetime, jobs) -> datetime:
    """Match the backend's datetimes (naive local or aware) so subtraction works."""
    for j in jobs:
        if j.start_time is not None:
            return now if j.start_time.tzinfo is not None else datetime.now()
    return now
