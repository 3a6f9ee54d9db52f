"""Parsers of Slurm's output: TRES/GRES, durations, hostlists, scontrol lines, real sacct dumps."""

from __future__ import annotations

import pytest

from slurmtools.durations import parse_duration, slurm_time
from slurmtools.hostlist import compress, expand
from slurmtools.errors import ParseError
from slurmtools.slurm import parsable
from slurmtools.slurm.commands import CommandBackend, parse_kv_line, parse_sacct
from slurmtools.slurm.tres import gpus_in, parse_gres, parse_tres
from tests.conftest import SHARED_DATA, TEST_DATA


@pytest.mark.parametrize("text,seconds", [("90s", 90), ("5m", 300), ("2h", 7200), ("1d12h", 129600),
                                          ("2-00:00:00", 172800), ("30", 1800), ("30:00", 1800),
                                          ("1:00:00", 3600), ("1-12", 129600), (45, 2700)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["soon", "", "5x", "-1:00", "1h soon"])
def test_bad_durations(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


@pytest.mark.parametrize("bad", ["٣h", "٣", "1:٣0", "٣-00:00:00", "1d٣h", "٣٠m", "9" * 5000 + "-1", "9" * 5000])
def test_durations_are_ascii_digits(bad):
    """`\\d` matched digits of other scripts, which int() reads as numbers: "٣h" was 3 hours. A Slurm-form number
    of over 4300 digits was int()'s own ValueError, not the duration message."""
    with pytest.raises(ValueError, match=r"^expected a duration like"):
        parse_duration(bad)


def test_slurm_time():
    assert slurm_time(172800) == "2-00:00:00" and slurm_time(90) == "00:02:00"


def test_tres_from_22_05():
    t = parse_tres("billing=2,cpu=2,gres/gpu:h100=16,gres/gpu=16,mem=2000M,node=2")
    assert (t.cpu, t.nodes, t.gpus, t.gpus_by_type, t.mem_mb) == (2, 2, 16, {"h100": 16}, 2000)
    untyped = parse_tres("cpu=4,gres/gpu=4,mem=1G")
    assert untyped.gpus == 4 and untyped.gpus_by_type == {"untyped": 4} and untyped.mem_mb == 1024
    mixed = parse_tres("gres/gpu=6,gres/gpu:a100=2,gres/gpu:h100=2")
    assert mixed.gpus_by_type == {"a100": 2, "h100": 2, "untyped": 2}
    assert parse_tres("") == parse_tres(None) == parse_tres("(null)")


def test_gres_forms():
    assert gpus_in("gpu:h100:8(S:0-1)") == {"h100": 8}
    assert gpus_in("gres:gpu:4") == {"untyped": 4}
    assert gpus_in("gpu:h100:3(IDX:0-2,5),gpu:a100:1(IDX:4)") == {"h100": 3, "a100": 1}
    assert parse_gres("gpu:h100:3(IDX:0-2,5)")[0].indexes == [0, 1, 2, 5]
    assert gpus_in("gpu:h100:0(IDX:N/A)") == {"h100": 0}
    with pytest.raises(ValueError):
        parse_gres("gpu:h100:x:y:z")


def test_hostlists_use_the_library():
    assert expand("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert compress(["gpu03", "gpu01", "gpu02"]) == "gpu[01-03]"
    with pytest.raises(ValueError):
        expand("gpu[01-")


def test_scontrol_one_line_with_spaces():
    kv = parse_kv_line("PartitionName=gpu AllowGroups=ALL Default=YES MaxTime=2-00:00:00 Nodes=gpu[01-16] "
                       "State=UP Comment=two words here TRES=cpu=1792,mem=32000000M,node=16")
    assert kv["Default"] == "YES" and kv["Nodes"] == "gpu[01-16]" and kv["Comment"] == "two words here"
    assert kv["TRES"] == "cpu=1792,mem=32000000M,node=16"


def test_slurm_error_message_keeps_the_specific_line():
    msg = CommandBackend._message("sbatch", "sbatch: error: invalid partition specified: foo\n"
                                            "sbatch: error: Batch job submission failed: Invalid partition name specified\n")
    assert msg.startswith("sbatch: error: invalid partition specified: foo")


def test_a_refused_option_is_named_not_the_help_hint():
    """A Slurm command refusing an option prints getopt's reason, then `Try "squeue --help" for more information`
    (squeue/scontrol opts: `case '?'`, exit 1). The error was that hint alone (23.02 refusing --json=v0.0.39 read
    `Try "squeue --help" for more information`)."""
    said = "squeue: option '--json' doesn't allow an argument\nTry \"squeue --help\" for more information\n"
    assert CommandBackend._message("squeue", said) == "squeue: option '--json' doesn't allow an argument"
    # the hint alone (nothing else said) is still shown rather than nothing
    assert CommandBackend._message("sinfo", 'Try "sinfo --help" for more information\n') == \
        'Try "sinfo --help" for more information'


def test_real_sacct_dump_slurm2sql():
    """A real 50-column `sacct -P` dump (see tests/data/SOURCES.md): jobs and their steps, no ElapsedRaw column."""
    recs = parse_sacct((TEST_DATA / "slurm" / "slurm2sql_test-data1.csv").read_text())
    jobs = [r for r in recs if r.step is None]
    assert [r.job_id for r in jobs][0] == "43974388"
    first = jobs[0]
    assert first.user == "user1" and first.account == "cs" and first.partition == "jupyter-long"
    assert first.state == "CANCELLED"  # "CANCELLED by 1300204" keeps its first word
    assert first.elapsed_s == 3 * 3600 + 33 * 60 + 25
    assert first.timelimit_s == 5 * 86400
    assert first.nodelist == ("pe2",)
    steps = {r.step for r in recs if r.job_id == "43974388"}
    assert "batch" in steps
    assert "SubmitLine" in first.extra


def test_shared_sacct_dumps_all_parse():
    folder = SHARED_DATA / "traces" / "sacct"
    files = sorted(folder.glob("*.csv")) if folder.is_dir() else [TEST_DATA / "slurm" / "slurm2sql_test-data1.csv"]
    for f in files:
        recs = parse_sacct(f.read_text())
        assert recs and all(r.job_id for r in recs), f


def test_sacct_job_name_with_pipes_stays_whole():
    text = ("JobID|JobIDRaw|User|State|AllocCPUS|AllocTRES|JobName\n"
            "7|7|alice|COMPLETED|4|cpu=4,gres/gpu=2|a|b||c\n"
            "7.batch|7.batch||COMPLETED|4|cpu=4|batch\n")
    recs = parse_sacct(text)
    assert recs[0].name == "a|b||c" and recs[0].alloc_cpus == 4 and recs[0].alloc_gpus == 2
    assert recs[1].step == "batch" and recs[1].name == "batch"


def test_compress_agrees_with_the_library_on_fabric_names():
    import hostlist as lib

    names = [f"node{i:05d}" for i in range(1, 2049, 3)] + ["leaf1", "leaf2", "leaf10", "spine-a"]
    assert compress(names) == lib.collect_hostlist(names)
    assert set(expand(compress(names))) == set(names)


@pytest.mark.parametrize("release", ["22.05.8", "25.11.7"])
def test_real_sacctmgr_associations_of_labuser(release):
    """The lab's `sacctmgr -nP show assoc where user=labuser format=<ASSOC_FIELDS>` and `show user` output."""
    from slurmtools.slurm.commands import parse_associations
    from slurmtools.slurm.model import Association

    d = TEST_DATA / "slurm"
    ua = parse_associations("labuser", (d / f"sacctmgr-assoc-labuser-{release}.txt").read_text(),
                            (d / f"sacctmgr-user-labuser-{release}.txt").read_text())
    assert ua.user == "labuser" and ua.default_account == "vision"
    assert ua.rows == (Association("lab", "nlp", "labuser", "", ("production", "scavenger", "standard"), "standard"),
                       Association("lab", "vision", "labuser", "", ("production", "scavenger", "standard"),
                                   "standard"))


@pytest.mark.parametrize("release", ["22.05.8", "25.11.7"])
def test_real_sacctmgr_associations_of_root_with_no_default_qos(release):
    from slurmtools.slurm.commands import parse_associations

    d = TEST_DATA / "slurm"
    ua = parse_associations("root", (d / f"sacctmgr-assoc-root-{release}.txt").read_text(),
                            (d / f"sacctmgr-user-root-{release}.txt").read_text())
    assert ua.default_account == "vision"
    root = next(r for r in ua.rows if r.account == "root")
    assert root.qos == ("normal",) and root.default_qos == ""
    users = (d / f"sacctmgr-users-{release}.txt").read_text().split()
    assert users == ["alice", "bob", "carol", "labuser", "root"]


def test_sacctmgr_associations_of_an_unknown_user_and_short_rows():
    from slurmtools.errors import SlurmError
    from slurmtools.slurm.commands import parse_associations

    ua = parse_associations("mallory", "", "")  # what sacctmgr prints (rc 0) for a user it does not know
    assert ua.rows == () and ua.default_account is None
    with pytest.raises(SlurmError, match="expected 6 fields"):
        parse_associations("x", "lab|vision|x\n", "")


def test_scheduled_starts_from_a_real_squeue_start_capture():
    """Pending jobs Slurm has planned keep their start and nodes; held ones (N/A, (null)) have neither; a pending
    array record keeps its array job id."""
    from datetime import datetime

    from slurmtools.hostlist import expand
    from slurmtools.slurm.commands import parse_scheduled_starts

    text = (TEST_DATA / "slurm" / "squeue-start-22.05.8.txt").read_text()
    got = {s.job_id: s for s in parse_scheduled_starts(text, expand)}
    assert got[38].start == datetime(2026, 11, 23, 22, 15, 30) and got[38].nodes == ("gpu01",)
    assert got[38].qos == "standard"
    assert got[41].start is None and got[41].nodes == ()
    assert got[42].start is None and got[42].qos == "production"


def test_parse_sacct_refuses_a_line_of_50000_extra_delimiters_at_once():
    """Every reader of a parsable dump (policy replay's --sacct-file, the sandbox, the reports) fitted the pieces
    in time growing with their square; the shared splitter now refuses past MAX_EXTRA_PIECES first."""
    import time

    from slurmtools.errors import ParseError

    text = "JobID|JobName|State\n1|x" + "|" * 50_000 + "|COMPLETED\n"
    t = time.monotonic()
    with pytest.raises(ParseError, match=r"^dump:2: 50002 '\|' on one line for 3 fields: no value holds that many"):
        parse_sacct(text, "dump")
    assert time.monotonic() - t < 2


def test_a_comma_dump_fits_thousands_of_pieces_quickly():
    """Under `--delimiter=,` the fields after a job name (a TRES list, a hostlist) were tried at every length for
    every split of the name: 1,000 extra pieces took 2 s, 5,000 minutes. The last fields take what is left, and a
    hostlist holding `=` is not tried longer."""
    import time

    text = "JobID,JobName,State,AllocTRES,NodeList\n1,x" + "," * 3000 + ",COMPLETED,cpu=1,n1\n"
    t = time.monotonic()
    (rec,) = parse_sacct(text, "dump")
    assert time.monotonic() - t < 2
    assert rec.name == "x" + "," * 3000 and rec.state == "COMPLETED" and rec.nodelist == ("n1",)


@pytest.mark.parametrize("text", ["cpu=٣", "gres/gpu=-1", "gres/gpu:h100=٣", "node=+2", "billing=1_0", "gres/gpu",
                                  "mem=inf", "mem=-1M", "mem=٣G", "mem=1e3M", "cpu=2,=3"])
def test_tres_counts_are_ascii_digits(text):
    """int() read `٣` as 3 and took -1, `+2` and `1_0`; float() took inf and 1e3; a GPU count it refused went to
    `other`, so the job had 0 GPUs; an item without `=` was dropped. Slurm writes none of these."""
    with pytest.raises(ValueError, match=r"^TRES "):
        parse_tres(text)


def test_tres_keeps_what_slurm_writes():
    t = parse_tres("billing=2,cpu=2,gres/gpu:h100=16,gres/gpu=16,mem=1.50G,node=2,energy=٣,license/x=1")
    assert (t.cpu, t.mem_mb, t.nodes, t.gpus, t.gpus_by_type) == (2, 1536.0, 2, 16, {"h100": 16})
    assert t.other == {"energy": "٣", "license/x": "1"}   # not read as numbers: kept verbatim


@pytest.mark.parametrize("text", ["gpu:h100:٣", "gpu:٣", "gpu:-1", "gpu:h100:3(IDX:٣)", "gpu:h100:3(IDX:2-0)",
                                  "gpu:h100:3(IDX:-1)"])
def test_gres_counts_and_indexes_are_ascii_digits(text):
    """`\\d` matched `٣`, read as 3 GPUs or GPU 3; a reversed range was no GPUs."""
    with pytest.raises(ValueError):
        for g in parse_gres(text):
            g.indexes


def test_gres_idx_not_applicable_is_no_index():
    assert [g.indexes for g in parse_gres("gpu:h100:0(IDX:N/A)")] == [[]]


@pytest.mark.parametrize("field,value", [("Submit", "2026-02-30T00:00:00"), ("End", "soon"),
                                         ("AllocCPUS", "٣"), ("AllocCPUS", "-1"), ("TimelimitRaw", "٣"),
                                         ("Timelimit", "soon"), ("ElapsedRaw", "-5"), ("JobIDRaw", "abc"),
                                         ("AllocTRES", "gres/gpu=x")])
def test_parse_sacct_refuses_what_sacct_does_not_write(field, value):
    """Each was read as unset, 0 or another number (a Submit of Feb 30 as no Submit, `٣` CPUs as 3)."""
    from slurmtools.errors import ParseError

    head = ["JobID", "JobIDRaw", "State", "Submit", "End", "AllocCPUS", "ElapsedRaw", "AllocTRES",
            "TimelimitRaw" if field != "Timelimit" else "Timelimit"]
    good = {"JobID": "5", "JobIDRaw": "5", "State": "COMPLETED", "Submit": "2026-11-01T00:00:00",
            "End": "2026-11-01T01:00:00", "AllocCPUS": "2", "ElapsedRaw": "3600", "AllocTRES": "cpu=2,gres/gpu=1",
            "TimelimitRaw": "60", "Timelimit": "01:00:00"}
    row = {**good, field: value}
    text = "|".join(head) + "\n" + "|".join(row[h] for h in head) + "\n"
    with pytest.raises(ParseError, match=rf"^d:2: {field}: "):
        parse_sacct(text, "d")
    (r,) = parse_sacct("|".join(head) + "\n" + "|".join(good[h] for h in head) + "\n", "d")
    assert (r.alloc_cpus, r.timelimit_s, r.elapsed_s, r.alloc_gpus) == (2, 3600, 3600, 1)


@pytest.mark.parametrize("value", ["٣", "-1", -1, 3.5, True, "x", float("nan")])
def test_json_counts_are_refused_not_unset(value):
    """`readers.common.num` read `٣` as 3 and -1 as -1, and anything else as unset."""
    from slurmtools.slurm.readers.common import num

    with pytest.raises(ValueError, match="not a count"):
        num(value)
    with pytest.raises(ValueError, match="not a count"):
        num({"set": True, "infinite": False, "number": value})


@pytest.mark.parametrize("value", ["2026-02-30T00:00:00", "soon", -5, 1.5, True, 10**30, float("inf")])
def test_json_times_are_refused_not_unset(value):
    """`readers.common.ts` read an invalid date as unset, and a huge epoch was an OverflowError."""
    from slurmtools.slurm.readers.common import ts

    with pytest.raises(ValueError, match="not a"):
        ts(value)


def test_squeue_json_with_a_count_slurm_does_not_write_is_one_line(monkeypatch):
    import json

    from slurmtools.errors import ParseError
    from slurmtools.slurm.releases import release_for

    job = {"job_id": 7, "node_count": {"set": True, "infinite": False, "number": -1}, "job_state": ["RUNNING"]}
    b = CommandBackend()
    monkeypatch.setattr(b, "slurm_release", lambda: release_for("25.11"))
    monkeypatch.setattr(b, "run", lambda argv, *a, **k: json.dumps({"jobs": [job]}))
    with pytest.raises(ParseError, match=r"^squeue --json\S*: job 7: not a count: -1$"):
        b.jobs()


def _random_line(rng, names, d):
    """A line of values for `names`, joined by `d`: mostly values Slurm writes (TRES lists, hostlists, job ids
    with brackets and job names holding the delimiter), some built from pieces that break each field kind's rule."""
    tres_items = ["cpu=4", "cpu=٣", "mem=100G", "node=1", "billing=8", "gres/gpu:a100=2", "gres/gpu:a800=2",
                  "gres/gpu=2", "=3", "energy=", "gres/gpuutil=35"]
    good = {
        "text": ["train", "a b", "x[1,2]", "", "run=3", "lr0.01,seed=3", "٣", "eval" + d + "v2"],
        "tres": ["cpu=4,mem=100G,node=1", "billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2", "", "cpu=٣,mem=1G",
                 "gres/gpu:a100=2,gres/gpu:a800=2", "gres/gpu:a100=2,gres/gpu:a100=2", "mem=1G,cpu=4",
                 "cpu=4,mem=1G,billing=4"],
        "usage": ["cpu=00:01:02,mem=1234K", "", "energy=0,gres/gpuutil=35", "cpu=00:00:01"],
        "hosts": ["gpu01", "gpu[01-02,05]", "None assigned", "", "gpu01,gpu03", "a[1,3],b[2-4]", "n],b[1",
                  "a[1,b]", "a[1 ,2]", "a]]", "[1,2]x,y"],
        "jobid": ["123", "123_[1,3-5]", "123_4", "123.batch", "123_[1]", "12],3[4", "123_[1,2"],
        "list": ["gpu", "gpu,debug", "", "cpu"],
        "time": ["2026-10-01T00:00:22", "Unknown", "None", ""],
        "int": ["1", "-3", "12"],
        "exit": ["0:0", "1:9", ""],
        "one": ["u1", "COMPLETED", "", "a b"],
    }
    odd = ["gpu[01", "03]", "n]", "b[[", "1=2", "x", "٢٠٢٦-10-01T00:00:22", "0", "2026-10-01", ""] + tres_items
    values = []
    for name in names:
        kind = parsable._kind(name)
        if rng.random() < 0.9:
            values.append(rng.choice(good[kind]))
        else:
            values.append(d.join(rng.choice(odd) for _ in range(rng.choice((1, 2, 3)))))
    return d.join(values)


@pytest.mark.parametrize("d", [",", "|", ";"])
def test_a_line_splits_as_the_search_splits_it_whatever_lines_came_before(d):
    """`Splitter` keeps the split of each sequence of piece classes for the lines after it: every line of a long
    mixed dump, read by one Splitter, splits (or is refused) exactly as a fresh search of that line alone does."""
    import random

    rng = random.Random(11)
    for names in (["JobID", "JobName", "State", "AllocTRES", "ReqTRES", "NodeList", "End"],
                  ["JobIDRaw", "Partition", "Start", "JobName", "TRESUsageInAve", "NNodes", "ExitCode", "Comment"],
                  ["JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "QOS", "State", "ExitCode",
                   "Submit", "Start", "End", "NodeList", "NNodes", "AllocTRES", "ReqTRES", "Cluster"],
                  ["Partition", "JobName", "Start", "AllocTRES"]):
        header = parsable.read_header(d.join(names), "dump")
        shared = parsable.Splitter(header, "dump")
        agreed = refused = 0
        for i in range(3000):
            line = _random_line(rng, names, d)
            alone = parsable.Splitter(header, "dump")
            try:
                want = alone.split(line, i)
            except ParseError as exc:
                with pytest.raises(ParseError) as got:
                    shared.split(line, i)
                assert str(got.value) == str(exc)
                refused += 1
            else:
                assert shared.split(line, i) == want
                agreed += 1
        assert agreed > 100 and refused > 100, (agreed, refused)  # both outcomes were exercised


def test_a_step_line_splits_as_sacct_orders_its_tres():
    """A `.batch` step's AllocTRES has no billing and its ReqTRES starts with it: under `--delimiter=,` billing
    could close the first list or open the second. sacct writes every TRES list sorted, so only the second reads
    as sacct writes; a line that stays ambiguous in sacct's order is still refused."""
    header = parsable.read_header("JobID,AllocTRES,ReqTRES,State", "dump")
    s = parsable.Splitter(header, "dump")
    assert s.split("1.batch,cpu=12,mem=100G,node=1,billing=12,cpu=12,mem=100G,node=1,COMPLETED", 2) == [
        "1.batch", "cpu=12,mem=100G,node=1", "billing=12,cpu=12,mem=100G,node=1", "COMPLETED"]
    assert s.split("2,billing=12,cpu=12,mem=100G,node=1,billing=12,cpu=12,COMPLETED", 3) == [
        "2", "billing=12,cpu=12,mem=100G,node=1", "billing=12,cpu=12", "COMPLETED"]
    with pytest.raises(ParseError, match=r"^dump:4: ',' occurs inside values and the line splits into fields in "
                                         r"more than one way \(AllocTRES, ReqTRES differ\)"):
        s.split("3,cpu=1,mem=2,node=1,RUNNING", 4)
    # lines of the same shapes share one search
    assert s.split("4.batch,cpu=96,mem=800G,node=1,billing=96,cpu=96,mem=800G,node=1,FAILED", 5)[1] == (
        "cpu=96,mem=800G,node=1")
    assert len(s._found) == 3
    # under `|` a whole TRES list is one piece: its order still tells two splits of a job name and a comment apart
    bar = parsable.Splitter(parsable.read_header("JobName|AllocTRES|Comment", "dump"), "dump")
    assert bar.split("a|mem=1,cpu=1|cpu=2,mem=2|c", 2) == ["a|mem=1,cpu=1", "cpu=2,mem=2", "c"]
    with pytest.raises(ParseError, match="more than one way"):
        bar.split("a|cpu=1,mem=1|cpu=2,mem=2|c", 3)


# -- command output as Slurm 25.11 prints it, beyond the captures (the output audit) -----------------------------
@pytest.mark.parametrize("text, by_type, idx", [
    ("gpu:(null):2(IDX:0-1)", {"untyped": 2}, [0, 1]),        # GresUsed of GPUs given by File= without Type=
    ("gpu:(null):0(IDX:N/A)", {"untyped": 0}, []),
    ("gpu:no_consume:4", {"untyped": 4}, []),                  # a flag, not the type "no_consume"
    ("gpu:h100:no_consume:8(S:0-1)", {"h100": 8}, []),
    ("gpu:1g.10gb:2(S:0)", {"1g.10gb": 2}, []),                # a Type= that starts with a digit
    ("gpu:h100:8(S:0-1),shard:h100:1K(S:0-1)", {"h100": 8}, []),   # 1024 shards print as 1K
])
def test_gres_as_slurm_prints_it(text, by_type, idx):
    """src/interfaces/gres.c: `_node_gres_used` prints a NULL type as `(null)`, `_build_node_gres_str` adds
    `:no_consume` and a K/M/G suffix (`_get_suffix`). `(null)` and `1K` were refused (every node query failed on a
    site with untyped GPUs), `no_consume` was read as a GPU type."""
    assert gpus_in(text) == by_type
    assert [i for g in parse_gres(text) for i in g.indexes] == idx
    assert [g.count for g in parse_gres("shard:1K,mps:2M")] == [1024, 2 * 1024 ** 2]


@pytest.mark.parametrize("text", ["gpu:(null)", "gpu:h100:1Q", "gpu:-1", "gres:"])
def test_gres_that_slurm_does_not_print_is_still_refused(text):
    with pytest.raises(ValueError, match="cannot read GRES"):
        parse_gres(text)


def _backend_printing(monkeypatch, out: str) -> CommandBackend:
    b = CommandBackend()
    monkeypatch.setattr(b, "run", lambda argv, *a, **k: out)
    return b


PART = ("PartitionName=gpu AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=YES QoS=N/A "
        "DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED "
        "MaxTime=2-00:00:00 MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=gpu[01-02] PriorityJobFactor=1 "
        "PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO State=UP TotalCPUs=224 TotalNodes=2")


def test_partitions_read_as_scontrol_prints_them(monkeypatch):
    empty = PART.replace("PartitionName=gpu", "PartitionName=spare").replace("Nodes=gpu[01-02]", "Nodes=(null)")
    text = PART + "\n" + empty.replace("MaxTime=2-00:00:00", "MaxTime=UNLIMITED").replace("Default=YES", "Default=NO")
    gpu, spare = _backend_printing(monkeypatch, text + "\n").partitions()
    assert (gpu.name, gpu.nodes, gpu.default, gpu.state, gpu.max_time_s) == ("gpu", ("gpu01", "gpu02"), True, "UP",
                                                                            172800)
    assert (spare.nodes, spare.max_time_s, spare.qos) == ((), None, None)


@pytest.mark.parametrize("line, field", [
    (PART.replace(" MaxTime=2-00:00:00", ""), "MaxTime"), (PART.replace(" State=UP", ""), "State"),
    (PART.replace(" Nodes=gpu[01-02]", ""), "Nodes"),
    (PART.replace("MaxTime=2-00:00:00", "MaxTime=INVALID"), "MaxTime"),
    (PART.replace("MaxTime=2-00:00:00", "MaxTime=90"), "MaxTime"), (PART.replace("gpu[01-02]", "gpu[01-"), "Nodes")])
def test_a_partition_line_without_what_scontrol_prints_is_refused(monkeypatch, line, field):
    """A line without MaxTime read as UNLIMITED, without State as UNKNOWN, without Nodes as no nodes; `INVALID`
    (what secs2time_str prints for a limit that overflows) and a bad hostlist were a ValueError with no field."""
    with pytest.raises(ParseError, match=rf"^scontrol show partition -o:1: partition gpu: .*{field}"):
        _backend_printing(monkeypatch, line + "\n").partitions()


QOS_ROW = "high|100|low,scavenger|requeue|00:05:00|gres/gpu=16|gres/gpu=32|2-00:00:00|DenyOnLimit"


def test_qos_read_as_sacctmgr_prints_it(monkeypatch):
    """Unset Priority, GraceTime and MaxWall print empty (print_fields_uint/_time_from_secs/_time)."""
    text = QOS_ROW + "\nnormal|||cluster|||||\n"
    high, normal = _backend_printing(monkeypatch, text).qos()
    assert (high.priority, high.preempt, high.preempt_mode, high.grace_time_s, high.max_wall_s) == \
        (100, ("low", "scavenger"), "requeue", 300, 172800)
    assert (high.max_tres_per_job, high.max_tres_per_user) == ("gres/gpu=16", "gres/gpu=32")
    assert (normal.priority, normal.preempt, normal.grace_time_s, normal.max_wall_s) == (0, (), 0, None)


@pytest.mark.parametrize("line, what", [
    ("high|100|low|requeue|00:05:00", "expected 9 fields"),                      # short: was padded with ""
    (QOS_ROW.replace("DenyOnLimit", "DenyOnLimit,Relative"), "Flags=Relative"),  # percents, read as counts
    (QOS_ROW.replace("|100|", "|٣|"), "Priority"), (QOS_ROW.replace("00:05:00", "soon"), "GraceTime"),
    (QOS_ROW.replace("2-00:00:00", "INVALID"), "MaxWall")])
def test_qos_lines_sacctmgr_does_not_print_are_refused(monkeypatch, line, what):
    with pytest.raises(ParseError, match=rf"^sacctmgr show qos format=Name,\S*:1: .*{what}"):
        _backend_printing(monkeypatch, line + "\n").qos()


def test_a_relative_qos_without_tres_limits_reads():
    from slurmtools.slurm.commands import parse_qos

    (q,) = parse_qos("part|0||cluster|00:00:00|||01:00:00|Relative\n")
    assert (q.max_tres_per_job, q.max_wall_s) == ("", 3600)


@pytest.mark.parametrize("text, what", [("high\n", "expected 2 fields"), ("high|soon\n", "GraceTime")])
def test_qos_grace_times_sacctmgr_does_not_print_are_refused(monkeypatch, text, what):
    """`high` alone read as no grace; `soon` was a ValueError naming no command."""
    b = _backend_printing(monkeypatch, text)
    with pytest.raises(ParseError, match=rf"^sacctmgr show qos format=Name,GraceTime:1: .*{what}"):
        b.qos_grace_times()
    assert _backend_printing(monkeypatch, "high|00:02:00\nlow|\n").qos_grace_times() == {"high": 120, "low": 0}


def test_sacctmgr_lowers_a_user_name_and_the_rows_are_still_theirs():
    """sacctmgr lowers the name of `where user=Alice` unless slurmdbd keeps case (PreserveCaseUser): its rows print
    as `alice`, and were dropped as another user's, so Alice looked unknown to Slurm's accounting."""
    from slurmtools.slurm.commands import parse_associations

    ua = parse_associations("Alice", "lab|vision|alice||normal,high|normal\n", "alice|vision\n")
    assert [r.account for r in ua.rows] == ["vision"] and ua.default_account == "vision"
    kept = parse_associations("Alice", "lab|vision|Alice||normal|normal\nlab|nlp|alice||normal|normal\n",
                              "Alice|vision\nalice|nlp\n")   # case kept: two users
    assert [r.account for r in kept.rows] == ["vision"] and kept.default_account == "vision"


@pytest.mark.parametrize("line, field", [("38|standard|Tomorrow|gpu01", "%S"), ("38|standard|N/A", "expected 4"),
                                         ("abc|standard|N/A|(null)", "%i"), ("38|standard|N/A|gpu[01-", "%Y")])
def test_scheduled_starts_squeue_does_not_print_are_refused(line, field):
    """A start squeue does not print read as "no estimate", and a line of other fields or a job id that is none
    was skipped: a planned job went missing from the queue ahead of a new one."""
    from slurmtools.slurm.commands import parse_scheduled_starts

    with pytest.raises(ParseError, match=rf"^squeue -h -t PD -o %i\|%q\|%S\|%Y:1: {field}"):
        parse_scheduled_starts(line + "\n", expand)
