"""GPU capacity over a window: which nodes hold how many GPUs of which type in which partitions, minus the
time they were down or drained (from `sacctmgr -P show event` text).

The node list comes either from the site (partitions' hostlists x the fabric's node types) or from the backend's
node snapshot; both are turned into `NodeGpus` here so metrics never care which.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from slurmtools.errors import ParseError
from slurmtools.hostlist import NO_HOST
from slurmtools.reports.badrows import BadRow, BadRows
from slurmtools.slurm.parsable import read_header

#: what to ask sacctmgr for; `read_events` accepts these fields in any order
EVENT_FIELDS = ("NodeName", "TimeStart", "TimeEnd", "State", "Reason")


@dataclass(frozen=True)
class NodeGpus:
    node: str
    gpu_type: str
    gpus: int
    partitions: tuple[str, ...]


@dataclass(frozen=True)
class HostsOutside:
    """Runs that ran on hosts the capacity does not hold (`hosts_outside`)."""
    hosts: tuple[str, ...]   # the hosts, in name order
    runs: int                # runs that ran on at least one of them
    placed: int              # runs with a host at all (a pending run has none)
    entirely: int = 0        # runs that ran on none of the capacity's hosts


def hosts_outside(runs_by_nodelist, known) -> HostsOutside:
    """The hosts runs ran on (sacct NodeList hostlists, with the runs of each) that `known` (the capacity's hosts)
    lacks. A report whose runs ran on hosts its capacity does not count would set GPU-hours it cannot hold against
    capacity that is not theirs; a NodeList that is not a hostlist counts as a host outside, under its own text."""
    from slurmtools.hostlist import expand

    outside: set[str] = set()
    runs = placed = entirely = 0
    for nodelist, n in runs_by_nodelist.items():
        if nodelist is None or nodelist != nodelist or str(nodelist).strip() in NO_HOST:
            continue
        placed += n
        try:
            hosts = expand(str(nodelist))
        except ValueError:
            hosts = [str(nodelist)]
        out = [h for h in hosts if h not in known]
        if out:
            outside.update(out)
            runs += n
            if len(out) == len(hosts):
                entirely += n
    from slurmtools.topology.names import natural

    return HostsOutside(tuple(sorted(outside, key=natural)), runs, placed, entirely)


def nodes_from_site(site, fabric) -> list[NodeGpus]:
    """GPU nodes of every partition, typed by the fabric's node types. Hosts the fabric lacks get the partition's
    only GPU type and the GPU count of that type's node type, when that is unambiguous; otherwise a ConfigError."""
    from slurmtools.errors import ConfigError
    from slurmtools.hostlist import expand

    parts: dict[str, list[str]] = {}
    for p in site.partitions.values():
        for h in expand(p.nodes):
            parts.setdefault(h, []).append(p.name)
    out = []
    for host, plist in parts.items():
        nt = None
        if fabric is not None:
            try:
                nt = fabric.node_type_of(host)
            except KeyError:
                nt = None
        if nt is None:
            p = site.partitions[plist[0]]
            cands = [t for t in (fabric.node_types.values() if fabric else []) if t.gpu_type in p.gpu_types]
            if len(cands) != 1:
                raise ConfigError(str(site.source), f"partitions.{p.name}.nodes",
                                  f"cannot tell how many GPUs host {host} has (not in the fabric file)")
            nt = cands[0]
        out.append(NodeGpus(host, nt.gpu_type, nt.gpus, tuple(plist)))
    return out


def nodes_from_backend(nodes) -> list[NodeGpus]:
    """From `Backend.nodes()` (NodeInfo): one entry per GPU type a node holds."""
    out = []
    for n in nodes:
        for typ, cnt in n.gpus_by_type.items():
            if cnt:
                out.append(NodeGpus(n.name, typ, cnt, tuple(n.partitions)))
    return out


#: the times an event may hold (the sacct reader's bounds): 1970 .. 2200
_T_MIN, _T_MAX = datetime(1970, 1, 1, 0, 0, 1), datetime(2200, 1, 1)


def _shown(text: str) -> str:
    """A line as read, bytes that are not UTF-8 (kept as surrogates) shown as U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _event_time(v: str, label: str, required: bool):
    if v in ("Unknown", "None", ""):
        if required:
            raise ValueError(f"field {label}: missing")
        return None
    try:
        t = datetime.strptime(v, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        raise ValueError(f"field {label}: expected YYYY-MM-DDTHH:MM:SS, got {_shown(v)!r}") from None
    if not _T_MIN <= t < _T_MAX:
        raise ValueError(f"field {label}: {v} is not between 1970 and 2200")
    return t


def _read_event_rows(text: str, source: str, bad: BadRows | None = None, zone=None, cluster: str | None = None,
                     notes: list | None = None) -> pd.DataFrame:
    """Every event row (node and cluster-wide; a cluster-wide one has an empty node), times parsed.

    A dump with a Cluster column (`sacctmgr show event` of several clusters, or of another) keeps `cluster`'s rows
    (the site's: another cluster's first record or node down time is not this one's) and says in `notes` how many
    it left out; one without any of `cluster`'s rows is refused (`parsable.pick_cluster`), as the sacct reader does.

    A row that is torn (fields missing), holds a time that is not YYYY-MM-DDTHH:MM:SS or lies outside 1970-2200,
    ends before it starts, or has bytes that are not UTF-8 (kept as surrogates by the reader) in a field the
    report uses, is bad: with `bad` it is skipped and listed there (line, reason, text; `bad.total` counts the
    rows), without it the first one raises a ParseError naming its line.

    `zone` (`reports.zone.Zone`): sacctmgr's local times become UTC instants; a time the clocks skipped is bad, a
    repeated one is read as its first pass unless only the second keeps the end after the start."""
    from slurmtools.hostlist import expand

    changes = zone is not None and not zone.fixed
    cols = {"node": "str", "start": "datetime64[s]", "end": "datetime64[s]", "state": "str"}
    numbered = [(n, ln[:-1] if ln.endswith("\r") else ln) for n, ln in enumerate(text.split("\n"), 1)
                if ln.strip()]
    if not numbered:
        return pd.DataFrame({k: pd.Series(dtype=v) for k, v in cols.items()})
    h = read_header(_shown(numbered[0][1]), source, "|".join(EVENT_FIELDS),
                    f"`sacctmgr -P show event format={','.join(EVENT_FIELDS)}`")
    h.missing(("NodeName", "TimeStart", "TimeEnd", "State"), source,
              f"use sacctmgr -P show event format={','.join(EVENT_FIELDS)}")
    if len(h.delimiter) != 1:
        raise ParseError(source, 1, f"the delimiter {h.delimiter!r} is {len(h.delimiter)} characters; expected "
                                    f"`sacctmgr -P` output ('|')")
    head = h.lower() + ([""] if h.trailing else [])
    at = {k: head.index(k) for k in ("nodename", "timestart", "timeend", "state")}
    at_cluster = head.index("cluster") if "cluster" in head and cluster is not None else None
    clusters: dict[str, int] = {}
    reason_last = "reason" in head and head.index("reason") == len(head) - 1 - (1 if h.trailing else 0)
    rows, lines = [], []
    for n, line in numbered[1:]:
        try:
            f = line.split(h.delimiter)
            if len(f) > len(head) and reason_last:  # a `|` inside Reason (free text, last): rejoin it
                k = len(head) - 1 - (1 if h.trailing else 0)
                f = f[:k] + [h.delimiter.join(f[k:len(f) - (1 if h.trailing else 0)])] + ([""] if h.trailing else [])
            if len(f) != len(head):
                raise ValueError(f"torn: {len(f)} fields, expected {len(head)}")
            if at_cluster is not None:   # another cluster's rows are not read at all, their faults not the site's
                name = f[at_cluster].strip()
                clusters[name] = clusters.get(name, 0) + 1
                if name != cluster:
                    continue
            node, state = f[at["nodename"]].strip(), f[at["state"]].strip()
            for label, v in (("NodeName", node), ("State", state), ("TimeStart", f[at["timestart"]]),
                             ("TimeEnd", f[at["timeend"]])):
                if any("\udc80" <= c <= "\udcff" for c in v):
                    raise ValueError(f"field {label}: bytes that are not UTF-8")
            start = _event_time(f[at["timestart"]].strip(), "TimeStart", True)
            end = _event_time(f[at["timeend"]].strip(), "TimeEnd", False)
            if end is not None and end < start and not changes:  # judged on the instants below
                raise ValueError(f"field TimeEnd: {end:%Y-%m-%dT%H:%M:%S} is before TimeStart "
                                 f"{start:%Y-%m-%dT%H:%M:%S}")
            if node and any(c in node for c in "[,"):
                try:
                    expand(node)
                except ValueError:
                    raise ValueError(f"field NodeName: {node!r} is not a Slurm hostlist") from None
        except ValueError as exc:
            if bad is None:
                raise ParseError(source, n, str(exc)) from None
            bad.rows.append(BadRow(source, n, str(exc), _shown(line)))
            continue
        rows.append((node, start, end, state))
        lines.append((n, line))
    if clusters and cluster not in clusters:
        from slurmtools.slurm.parsable import pick_cluster

        pick_cluster(source, clusters, cluster, what="events",
                     command="sacctmgr -P show event clusters={} format=" + ",".join(EVENT_FIELDS))
    left = sum(k for name, k in clusters.items() if name != cluster)
    if left and notes is not None:
        others = ", ".join(n or "(no name)" for n in sorted(set(clusters) - {cluster}))
        notes.append(f"{source}: {left} event row(s) of other clusters ({others}) left out: the site file names "
                     f"cluster {cluster}")
    if bad is not None:
        bad.total += len(numbered) - 1 - left
    df = pd.DataFrame(rows, columns=list(cols)) if rows else pd.DataFrame({k: pd.Series(dtype=v)
                                                                           for k, v in cols.items()})
    df = df.astype(cols)
    if zone is not None and not zone.is_utc and len(df):
        df = _instants(df, lines, zone, source, bad)
    return df


def _instants(df: pd.DataFrame, lines: list, zone, source: str, bad: BadRows | None) -> pd.DataFrame:
    """Event times read as UTC instants (`zone.resolve`, no elapsed time); rows at a skipped time, or ending before
    they start however read, are bad."""
    import numpy as np

    from slurmtools.reports.zone import resolve, skipped_why

    st, en = df["start"].to_numpy(dtype="datetime64[s]"), df["end"].to_numpy(dtype="datetime64[s]")
    has_end = ~np.isnat(en)
    s_loc = st.astype(np.int64)
    e_loc = np.where(has_end, en, np.datetime64(0, "s")).astype(np.int64)
    r = resolve(zone, {"start": (s_loc, np.ones(len(df), bool)), "end": (e_loc, has_end)})
    why = {}
    for i in np.flatnonzero(r.backwards):
        why[i] = (f"field TimeEnd: {pd.Timestamp(e_loc[i], unit='s'):%Y-%m-%dT%H:%M:%S} is before TimeStart "
                  f"{pd.Timestamp(s_loc[i], unit='s'):%Y-%m-%dT%H:%M:%S}")
    for label, key, loc in (("TimeEnd", "end", e_loc), ("TimeStart", "start", s_loc)):
        for i in np.flatnonzero(r.skipped[key]):
            shown = f"{pd.Timestamp(loc[i], unit='s'):%Y-%m-%dT%H:%M:%S}"
            why[i] = f"field {label}: {shown} {skipped_why(zone, int(loc[i]))}"
    if why:
        first = min(why)
        if bad is None:
            raise ParseError(source, lines[first][0], why[first])
        bad.rows.extend(BadRow(source, lines[i][0], why[i], _shown(lines[i][1])) for i in sorted(why))
        bad.rows.sort(key=lambda b: b.line or 0)
    ok = np.ones(len(df), dtype=bool)
    ok[list(why)] = False
    out = df.assign(start=r.times["start"].astype("datetime64[s]"),
                    end=np.where(has_end, r.times["end"].astype("datetime64[s]"), np.datetime64("NaT", "s")))
    return out[ok].reset_index(drop=True).astype({"start": "datetime64[s]", "end": "datetime64[s]"})


def parse_events(text: str, source: str = "sacctmgr show event", zone=None, cluster: str | None = None,
                 notes: list | None = None) -> tuple[pd.DataFrame, pd.Timestamp | None, BadRows]:
    """(node events as `read_events` gives them, the cluster's first record as `first_event` gives it, the rows
    skipped as bad): the report's one pass over an event dump. With `zone`, times are UTC instants; with `cluster`,
    only its rows of a dump with a Cluster column (`_read_event_rows`)."""
    bad = BadRows(source, "rows")
    df = _read_event_rows(text, source, bad, zone, cluster, notes)
    return _node_events(df), (pd.Timestamp(df["start"].min()) if len(df) else None), bad


def _node_events(df: pd.DataFrame) -> pd.DataFrame:
    df = df[df["node"] != ""]
    # node names may be hostlists ("gpu[01-02]")
    from slurmtools.hostlist import expand

    if df["node"].str.contains(r"[\[,]", regex=True).any():
        df = df.assign(node=df["node"].map(lambda s: expand(s))).explode("node")
    return df.astype({"node": "str"}).reset_index(drop=True)


def read_events(text: str, source: str = "sacctmgr show event", zone=None, cluster: str | None = None
                ) -> pd.DataFrame:
    """`sacctmgr -P show event format=NodeName,TimeStart,TimeEnd,State,Reason` -> node, start, end, state.

    Cluster-wide events (no NodeName) are dropped (see `first_event`); an open event (TimeEnd `Unknown`) has
    end NaT. A bad row raises a ParseError (`parse_events` skips and lists them instead). With `zone`, times are
    UTC instants; with `cluster`, only its rows of a dump with a Cluster column."""
    return _node_events(_read_event_rows(text, source, zone=zone, cluster=cluster))


def first_event(text: str, source: str = "sacctmgr show event", zone=None, cluster: str | None = None
                ) -> pd.Timestamp | None:
    """The start of the earliest event in `sacctmgr show event` text, cluster-wide ones included: slurmdbd
    records `Cluster Registered TRES` when a cluster first registers, so this is the cluster's first record (of
    `cluster`, in a dump with a Cluster column)."""
    df = _read_event_rows(text, source, zone=zone, cluster=cluster)
    return pd.Timestamp(df["start"].min()) if len(df) else None


def counted_from(since: datetime, *records, zone=None) -> pd.Timestamp | None:
    """When capacity starts counting: the earliest of `records` (the cluster's first accounting event, its
    first job: instants), if that is after `since` (a local time of `zone`; None: UTC); None when the cluster
    was already there at `since` or nothing is known. Capacity is never counted before the cluster's first
    record."""
    from slurmtools.reports.zone import get

    known = [pd.Timestamp(r) for r in records if r is not None and not pd.isna(r)]
    if not known:
        return None
    first = min(known)
    return first if first > get(zone).utc(since) else None


def down_seconds(events: pd.DataFrame, since: datetime, until: datetime) -> dict[str, float]:
    """Seconds each node was down or drained inside [since, until), overlapping events merged."""
    out: dict[str, float] = {}
    if events is None or events.empty:
        return out
    lo, hi = pd.Timestamp(since), pd.Timestamp(until)
    for node, g in events.groupby("node"):
        spans = sorted((max(s, lo), min(e if not pd.isna(e) else hi, hi)) for s, e in zip(g["start"], g["end"]))
        total, cur_s, cur_e = 0.0, None, None
        for s, e in spans:
            if e <= s:
                continue
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    total += (cur_e - cur_s).total_seconds()
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        if cur_e is not None:
            total += (cur_e - cur_s).total_seconds()
        if total:
            out[str(node)] = total
    return out


def capacity_table(nodes: list[NodeGpus], events: pd.DataFrame | None, since: datetime,
                   until: datetime, start: datetime | None = None, zone=None) -> pd.DataFrame:
    """One row per node and GPU type: gpus, gpu_hours (the window), down_gpu_hours, available_gpu_hours, and
    `counted_from`: the window's start, or `start` (the cluster's first record, see `counted_from`) when later.
    `since` and `until` are local times of `zone` (None: UTC), `start` and the events' times instants; the
    hours are real ones (a window over a clock change is an hour longer or shorter), `counted_from` an instant."""
    from slurmtools.reports.zone import get

    z = get(zone)
    since, until = z.utc(since), z.utc(until)
    lo = max(pd.Timestamp(since), pd.Timestamp(start)) if start is not None else pd.Timestamp(since)
    lo = min(lo, pd.Timestamp(until))
    secs = (pd.Timestamp(until) - lo).total_seconds()
    down = down_seconds(events, lo, until) if events is not None else {}
    rows = [{"node": n.node, "gpu_type": n.gpu_type, "partitions": ",".join(n.partitions), "gpus": n.gpus,
             "gpu_hours": n.gpus * secs / 3600, "down_gpu_hours": n.gpus * down.get(n.node, 0.0) / 3600}
            for n in nodes]
    df = pd.DataFrame(rows, columns=["node", "gpu_type", "partitions", "gpus", "gpu_hours", "down_gpu_hours"])
    df["available_gpu_hours"] = df["gpu_hours"] - df["down_gpu_hours"]
    df["counted_from"] = pd.Series([lo] * len(df), dtype="datetime64[s]")
    return df
