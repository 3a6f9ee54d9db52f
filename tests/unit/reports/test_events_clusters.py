"""`sacctmgr show event` dumps with a Cluster column (real ones carry it: a site's docs, an exporter's fixtures):
another cluster's rows were dropped from the down time in silence, yet its first event moved the start of the
capacity count. Now only the site's cluster's rows count, the others are said in a note, a dump without any of
them is refused; and a dump written without its header is told so, naming the event fields, not sacct's."""

from __future__ import annotations

import pytest

from slurmtools.errors import ParseError
from slurmtools.reports.capacity import first_event, parse_events, read_events

TWO = ("Cluster|NodeName|TimeStart|TimeEnd|State|Reason\n"
       "lab|gpu01|2026-11-24T00:00:00|2026-11-24T02:00:00|DOWN|x\n"
       "other|gpu02|2026-11-23T00:00:00|2026-11-23T02:00:00|DOWN|y\n"
       "other||2026-01-01T00:00:00|Unknown||Cluster Registered TRES\n")


def test_only_the_sites_clusters_events_count_and_the_rest_is_said():
    notes: list[str] = []
    events, first, bad = parse_events(TWO, "ev.txt", cluster="lab", notes=notes)
    assert list(events["node"]) == ["gpu01"] and str(first) == "2026-11-24 00:00:00"
    assert notes == ["ev.txt: 2 event row(s) of other clusters (other) left out: the site file names cluster lab"]
    assert bad.rows == [] and bad.total == 1
    assert list(read_events(TWO, "ev.txt", cluster="lab")["node"]) == ["gpu01"]
    assert str(first_event(TWO, "ev.txt", cluster="lab")) == "2026-11-24 00:00:00"
    # without a cluster to keep (a caller with no site), every row is read as before
    assert len(read_events(TWO, "ev.txt")) == 2


def test_a_dump_of_another_cluster_only_is_refused():
    text = "".join(ln + "\n" for ln in TWO.splitlines() if not ln.startswith("lab|"))
    with pytest.raises(ParseError) as err:
        parse_events(text, "ev.txt", cluster="lab", notes=[])
    assert str(err.value) == ("ev.txt: the dump holds events of cluster other only and none of lab, the cluster the "
                              "site file names (cluster_name): dump it with `sacctmgr -P show event clusters=lab "
                              "format=NodeName,TimeStart,TimeEnd,State,Reason`")


def test_a_dump_without_its_header_names_the_event_fields():
    with pytest.raises(ParseError) as err:
        parse_events("|2026-09-24T20:45:24|Unknown||Cluster Registered TRES|\n", "ev.txt")
    assert str(err.value) == ("ev.txt:1: expected a header line of field names (NodeName|TimeStart|TimeEnd|State|"
                              "Reason), got '|2026-09-24T20:45:24|Unknown||Cluster Registered TRES|' (written with -n "
                              "/ --noheader? write it with the header); as `sacctmgr -P show event format=NodeName,"
                              "TimeStart,TimeEnd,State,Reason` writes it")


def test_another_clusters_faulty_rows_are_not_the_sites_bad_rows():
    """Rows of another cluster were checked before they were left out: their faults counted against the site's
    bad-row share (3 of 13, failing the report at 1 %), and a strict read refused the whole dump for them."""
    text = ("Cluster|NodeName|TimeStart|TimeEnd|State|Reason\n"
            + "".join(f"lab|gpu{i:02d}|2026-11-24T00:00:00|2026-11-24T02:00:00|DOWN|x\n" for i in range(1, 11))
            + "other|n1|2026-11-24T05:00:00|2026-11-24T02:00:00|DOWN|backwards\n" * 3
            + "other|n2|2026-11-24T00:00:00|2026-11-24T02:00:00|DOWN|fine\n" * 20)
    events, _first, bad = parse_events(text, "ev.txt", cluster="lab", notes=[])
    assert len(events) == 10 and bad.rows == [] and bad.total == 10
    assert len(read_events(text, "ev.txt", cluster="lab")) == 10
