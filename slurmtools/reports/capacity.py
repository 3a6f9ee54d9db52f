"""GPU capacity over a window: which nodes hold how many GPUs of which type in which partitions, minus the
time they were down or drained (from `sacctmgr -P show event` text).

The node list comes either from the site (partitions' hostlists x the fabric's node types) or from the backend's
node snapshot; both are turned into `NodeGpus` here so metrics never care which.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from slurmtools.errors import ParseError
from slurmtools.slurm.parsable import read_header

#: what to ask sacctmgr for; `read_events` accepts these fields in any order
EVENT_FIELDS = ("NodeName", "TimeStart", "TimeEnd", "State", "Reason")


@dataclass(frozen=True)
class NodeGpus:
    node: str
    gpu_type: str
    gpus: int
    partitions: tuple[str, ...]


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


def _read_event_rows(text: str, source: str) -> pd.DataFrame:
    """Every event row (node and cluster-wide; a cluster-wide one has an empty node), times parsed."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    cols = {"node": "str", "start": "datetime64[s]", "end": "datetime64[s]", "state": "str"}
    if not lines:
        return pd.DataFrame({k: pd.Series(dtype=v) for k, v in cols.items()})
    h = read_header(lines[0], source)
    h.missing(("NodeName", "TimeStart", "TimeEnd", "State"), source,
              f"use sacctmgr -P show event format={','.join(EVENT_FIELDS)}")
    need = {"nodename": "node", "timestart": "start", "timeend": "end", "state": "state"}
    if len(h.delimiter) != 1:
        raise ParseError(source, 1, f"the delimiter {h.delimiter!r} is {len(h.delimiter)} characters; expected "
                                    f"`sacctmgr -P` output ('|')")
    head = h.lower() + ([""] if h.trailing else [])
    df = pd.read_csv(io.StringIO("\n".join(lines)), sep=h.delimiter, dtype=str, keep_default_na=False,
                     quoting=3, header=0, names=head, usecols=list(need), index_col=False)
    df = df.rename(columns=need)
    df["node"] = df["node"].str.strip()
    for c in ("start", "end"):
        vals = df[c].where(~df[c].isin(["Unknown", "None", ""]))
        conv = pd.to_datetime(vals, format="%Y-%m-%dT%H:%M:%S", errors="coerce")
        bad = conv.isna() & vals.notna()
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise ParseError(source, int(df.index[i]) + 2, f"field Time{c.capitalize()}: "
                                                           f"expected YYYY-MM-DDTHH:MM:SS, got {vals.iloc[i]!r}")
        df[c] = conv.astype("datetime64[s]")
    if df["start"].isna().any():
        i = int(df["start"].isna().to_numpy().nonzero()[0][0])
        raise ParseError(source, int(df.index[i]) + 2, "field TimeStart: missing")
    return df.astype(cols)


def read_events(text: str, source: str = "sacctmgr show event") -> pd.DataFrame:
    """`sacctmgr -P show event format=NodeName,TimeStart,TimeEnd,State,Reason` -> node, start, end, state.

    Cluster-wide events (no NodeName) are dropped (see `first_event`); an open event (TimeEnd `Unknown`) has
    end NaT."""
    df = _read_event_rows(text, source)
    df = df[df["node"] != ""]
    # node names may be hostlists ("gpu[01-02]")
    from slurmtools.hostlist import expand

    if df["node"].str.contains(r"[\[,]", regex=True).any():
        df = df.assign(node=df["node"].map(lambda s: expand(s))).explode("node")
    return df.astype({"node": "str"}).reset_index(drop=True)


def first_event(text: str, source: str = "sacctmgr show event") -> pd.Timestamp | None:
    """The start of the earliest event in `sacctmgr show event` text, cluster-wide ones included: slurmdbd
    records `Cluster Registered TRES` when a cluster first registers, so this is the cluster's first record."""
    df = _read_event_rows(text, source)
    return pd.Timestamp(df["start"].min()) if len(df) else None


def counted_from(since: datetime, *records) -> pd.Timestamp | None:
    """When capacity starts counting: the earliest of `records` (the cluster's first accounting event, its
    first job), if that is after `since`; None when the cluster was already there at `since` or nothing is known.
    Capacity is never counted before the cluster's first record."""
    known = [pd.Timestamp(r) for r in records if r is not None and not pd.isna(r)]
    if not known:
        return None
    first = min(known)
    return first if first > pd.Timestamp(since) else None


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
                   until: datetime, start: datetime | None = None) -> pd.DataFrame:
    """One row per node and GPU type: gpus, gpu_hours (the window), down_gpu_hours, available_gpu_hours, and
    `counted_from`: the window's start, or `start` (the cluster's first record, see `counted_from`) when later."""
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
