from datetime import datetime, timedelta, timezone
from pathlib import Path

from typer.testing import CliRunner

from slurmtools.policy.qos_sync import plan_qos_sync, read_qos
from slurmtools.policy.replay import replay, request_from_record
from slurmtools.policy.usage import gpu_hours_by_account, month_window, render_usage_lua
from slurmtools.slurm.model import AcctRecord

# what `sacctmgr -n -P show qos format=...` prints after the site's tiers were applied: TRES in TRES id order
# (node is id 4, gres/gpu one past 1000), unset limits left out
LAB_QOS = """normal|0||cluster|00:00:00||||Normal QOS default
production|1000|scavenger,standard|cluster|00:00:00|node=8,gres/gpu=64|gres/gpu=64|2-00:00:00|deadline work; never preempted
standard|100|scavenger|requeue|00:05:00|node=4,gres/gpu=32|gres/gpu=64|1-00:00:00|everyday training; preemptible by production after a grace period
scavenger|10||requeue|00:01:00|gres/gpu=128||12:00:00|idle capacity at no charge against budgets; preemptible by everyone at short notice
"""


def test_qos_settings_carry_the_tiers_gpus_and_nodes_per_job(site):
    from slurmtools.render.accounting import qos_settings, render_qos

    per_job = {t.name: qos_settings(site, t)["MaxTRESPerJob"] for t in site.tiers.values()}
    assert per_job == {"production": "gres/gpu=64,node=8", "standard": "gres/gpu=32,node=4",
                       "scavenger": "gres/gpu=128,node=-1"}  # no max_nodes: -1 clears a node limit
    assert "MaxTRESPerJob=gres/gpu=32,node=4" in render_qos(site)[2]


def test_tres_limits_compare_as_sacctmgr_prints_them():
    from slurmtools.policy.qos_sync import same

    assert same("MaxTRESPerJob", "node=4,gres/gpu=32", "gres/gpu=32,node=4")
    assert same("MaxTRESPerJob", "gres/gpu=128", "gres/gpu=128,node=-1")  # unset is not printed
    assert same("MaxTRESPerJob", "", "gres/gpu=-1,node=-1")
    assert not same("MaxTRESPerJob", "gres/gpu=32", "gres/gpu=32,node=4")
    assert not same("MaxTRESPerJob", "node=4,gres/gpu=32", "gres/gpu=32,node=-1")
    assert not same("MaxTRESPerJob", "node=8,gres/gpu=32", "gres/gpu=32,node=4")


def test_sync_plan_adds_the_node_limit_to_a_database_without_it(site):
    """The QoS as sync-qos rendered them before the tier's node limit was in them: only gres/gpu per job."""
    text = LAB_QOS.replace("|node=8,gres/gpu=64|", "|gres/gpu=64|").replace("|node=4,gres/gpu=32|", "|gres/gpu=32|")
    assert plan_qos_sync(site, read_qos(lambda argv: text)) == [
        ["sacctmgr", "-i", "modify", "qos", "where", "name=production", "set", "MaxTRESPerJob=gres/gpu=64,node=8"],
        ["sacctmgr", "-i", "modify", "qos", "where", "name=standard", "set", "MaxTRESPerJob=gres/gpu=32,node=4"],
    ]


def test_sync_plan_clears_a_node_limit_the_tier_no_longer_has(site):
    from dataclasses import replace

    s = replace(site, tiers={**site.tiers, "standard": replace(site.tiers["standard"], max_nodes=None)})
    assert plan_qos_sync(s, read_qos(lambda argv: LAB_QOS)) == [
        ["sacctmgr", "-i", "modify", "qos", "where", "name=standard", "set", "MaxTRESPerJob=gres/gpu=32,node=-1"]]


def test_sync_plan_is_empty_when_the_database_matches(site):
    assert plan_qos_sync(site, read_qos(lambda argv: LAB_QOS)) == []


def test_sync_plan_sets_only_what_differs(site):
    text = LAB_QOS.replace("|00:05:00|", "|00:07:00|").replace("production|1000|scavenger,standard|", "production|999|standard|")
    cmds = plan_qos_sync(site, read_qos(lambda argv: text))
    assert cmds == [
        ["sacctmgr", "-i", "modify", "qos", "where", "name=production", "set", "Priority=1000",
         "Preempt=standard,scavenger"],
        ["sacctmgr", "-i", "modify", "qos", "where", "name=standard", "set", "GraceTime=300"],
    ]


def test_sync_plan_adds_missing_tiers_and_leaves_other_qos_alone(site):
    text = "\n".join(x for x in LAB_QOS.splitlines() if not x.startswith("scavenger"))
    cmds = plan_qos_sync(site, read_qos(lambda argv: text))
    assert cmds[0] == ["sacctmgr", "-i", "add", "qos", "scavenger"]
    assert cmds[1][:6] == ["sacctmgr", "-i", "modify", "qos", "where", "name=scavenger"]
    assert not any("name=normal" in c for cmd in cmds for c in cmd)


def _rec(job, account, qos, gpus, start, hours, req_tres=None, state="COMPLETED"):
    end = start + timedelta(hours=hours)
    return AcctRecord(job_id=str(job), job_id_raw=job, step=None, name="j", user="alice", account=account,
                      partition="gpu", qos=qos, state=state, exit_code="0:0", submit=start, eligible=start,
                      start=start, end=end, elapsed_s=int(hours * 3600), timelimit_s=3600 * 24,
                      nodelist=("gpu01",), alloc_gpus=gpus, alloc_gpus_by_type={"h100": gpus}, req_gpus=gpus,
                      alloc_cpus=8, alloc_tres="", req_tres=req_tres or f"cpu=8,mem=64G,node=1,gres/gpu:h100={gpus},gres/gpu={gpus}")


def test_usage_counts_overlap_and_skips_the_free_tier():
    t0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
    recs = [_rec(1, "nlp", "standard", 8, t0 - timedelta(hours=1), 3),  # 2 of its 3 hours are in November
            _rec(2, "nlp", "scavenger", 8, t0, 10), _rec(3, "vision", "production", 2, t0, 5)]
    start, end, month = month_window(datetime(2026, 11, 21, 12, tzinfo=timezone.utc))
    assert (start, month) == (t0, "2026-11")
    assert gpu_hours_by_account(recs, start, end, free_tiers=("scavenger",)) == {"nlp": 16.0, "vision": 10.0}
    text = render_usage_lua({"nlp": 16.0}, "2026-11")
    assert 'month = "2026-11"' in text and '["nlp"] = 16.0,' in text


def test_request_from_sacct_record():
    t0 = datetime(2026, 11, 2, tzinfo=timezone.utc)
    r = request_from_record(_rec(7, "nlp", "standard", 16, t0, 1, req_tres="cpu=32,mem=500G,node=2,gres/gpu:h100=16,gres/gpu=16"))
    assert (r.gpus, r.nodes, r.cpus, r.mem_mb, r.time_limit) == (16, 2, 32, 512000, 1440)
    assert r.gpus_by_type() == {"h100": 16}


def test_replay_reports_refusals_and_reroutes(site, fabric):
    t0 = datetime(2026, 11, 2, tzinfo=timezone.utc)
    recs = [
        _rec(1, "students", "standard", 8, t0, 300),            # 2400 GPU-h: spends the 2000 budget
        _rec(2, "students", "standard", 1, t0 + timedelta(days=13), 1),  # after that: refused (over_budget=reject)
        _rec(3, "vision", "standard", 40, t0, 1),               # over standard's 32 GPUs per job
        _rec(4, "vision", "production", 8, t0, 2),
        _rec(5, "vision", "scavenger", 8, t0, 2),
    ]
    rep = replay(site, fabric, recs)
    assert rep.jobs == 5 and rep.skipped_policies == ("checkpoint_signal",)
    b = rep.buckets
    assert (b[("students", "standard")].refused, b[("students", "standard")].reasons) == (1, {"budget": 1})
    assert b[("vision", "standard")].reasons == {"tier_limits": 1}
    assert b[("vision", "production")].refused == 0
    assert b[("vision", "scavenger")].reasons == {"tier_limits": 1}  # its 1-day limit is over 12h
    assert [c[0] for c in rep.changed] == ["3", "5", "2"]


def test_replay_cli_with_a_sacct_file(tmp_path: Path):
    from slurmtools.cli.main import app

    now = datetime.now(timezone.utc).replace(microsecond=0)
    start = (now - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%S")
    end = (now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")
    header = "JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Eligible|Start|End|ElapsedRaw|TimelimitRaw|NodeList|AllocTRES|ReqTRES|AllocCPUS"
    rows = [f"10|10|a|alice|vision|gpu|standard|COMPLETED|0:0|{start}|{start}|{start}|{end}|86400|1440|gpu01|"
            f"cpu=8,gres/gpu=40|cpu=8,node=5,gres/gpu:h100=40,gres/gpu=40|8",
            f"11|11|b|alice|vision|gpu|production|COMPLETED|0:0|{start}|{start}|{start}|{end}|86400|1440|gpu01|"
            f"cpu=8,gres/gpu=8|cpu=8,node=1,gres/gpu:h100=8,gres/gpu=8|8"]
    f = tmp_path / "sacct.txt"
    f.write_text("\n".join([header] + rows) + "\n")
    from slurmtools.site import find_site_path

    site = str(find_site_path(None))
    res = CliRunner().invoke(app, ["admin", "policy", "replay", "--site", site, "--sacct-file", str(f), "--since", "7d"])
    assert res.exit_code == 0, res.output
    assert "replayed 2 jobs" in res.output
    assert "job 10 (vision/standard): tier standard allows at most 32 GPUs per job; this job asks for 40" in res.output
    bad = tmp_path / "bad.txt"
    bad.write_text("not sacct\n")
    res = CliRunner().invoke(app, ["admin", "policy", "replay", "--site", site, "--sacct-file", str(bad)])
    assert res.exit_code != 0


def test_check_cli_explains_and_exits_nonzero_on_refusal():
    from slurmtools.cli.main import app

    res = CliRunner().invoke(app, ["admin", "policy", "check", "--no-usage", "--default-account", "vision", "--",
                                   "-q", "standard", "--gres=gpu:8"])
    assert res.exit_code == 1
    assert res.output.startswith("refused by gpu_type: partition gpu needs a GPU type")
    res = CliRunner().invoke(app, ["admin", "policy", "check", "--no-usage", "--", "-A", "vision", "-q", "production",
                                   "--gres=gpu:h100:8"])
    assert res.exit_code == 0 and res.output.strip() == "allowed with changes partition=gpu (routing)"


def test_preflight_writes_refusals_to_the_decision_log(site, tmp_path, monkeypatch):
    from slurmtools import audit
    from slurmtools.policy import JobRequest, preflight

    log = tmp_path / "decisions.jsonl"
    monkeypatch.setenv("SLURMTOOLS_AUDIT_LOG", str(log))
    d = preflight(JobRequest.from_sbatch(["-A", "vision", "--gres=gpu:8"], user="alice"), site, None)
    assert d.action == "deny"
    (rec,) = list(audit.read(log, strict=True))
    assert (rec["event"], rec["user"], rec["details"]["policy"], rec["details"]["source"]) == \
        ("admission_refused", "alice", "gpu_type", "cli")
    assert preflight(JobRequest.from_sbatch(["-A", "vision", "-q", "production", "--gres=gpu:h100:1"]), site, None).allowed
    # an admission the policy changed (routing fills in the partition) is logged too, with the policy hash
    from slurmtools.policy.engine import load_fabric_for
    from slurmtools.policy.fingerprint import policy_hash

    recs = list(audit.read(log))
    assert [r["event"] for r in recs] == ["admission_refused", "admission_modified"]
    assert recs[1]["details"]["changes"] == {"partition": "gpu"} and {r["policy"] for r in recs} == {policy_hash(site, load_fabric_for(site))}


def test_replay_refuses_a_value_sacct_does_not_write_naming_the_line(tmp_path: Path):
    """Policy replay reads --sacct-file through parse_sacct: `gres/gpu:h100=٣` was 3 GPUs, `-1` was -1 GPUs, a
    TimelimitRaw of `٣` and a Submit of 2026-02-30 were unset. Each is refused in one line naming file, line, field."""
    import pytest

    from slurmtools.cli.main import app
    from slurmtools.errors import ParseError
    from slurmtools.site import find_site_path

    site = str(find_site_path(None))
    header = ("JobID|JobIDRaw|User|Account|Partition|QOS|State|Submit|Start|End|ElapsedRaw|TimelimitRaw|ReqTRES|"
              "AllocCPUS")
    good = {"JobID": "10", "JobIDRaw": "10", "User": "alice", "Account": "vision", "Partition": "gpu",
            "QOS": "standard", "State": "COMPLETED", "Submit": "2026-11-01T00:00:00", "Start": "2026-11-01T00:00:00",
            "End": "2026-11-01T01:00:00", "ElapsedRaw": "3600", "TimelimitRaw": "60",
            "ReqTRES": "cpu=8,gres/gpu:h100=8,node=1", "AllocCPUS": "8"}
    for field, value in (("ReqTRES", "cpu=8,gres/gpu:h100=٣,node=1"), ("ReqTRES", "cpu=8,gres/gpu=-1,node=1"),
                         ("ReqTRES", "cpu=8,mem=inf,node=1"), ("TimelimitRaw", "٣"), ("AllocCPUS", "-1"),
                         ("Submit", "2026-02-30T00:00:00")):
        f = tmp_path / "sacct.txt"
        f.write_text(header + "\n" + "|".join({**good, field: value}[k] for k in header.split("|")) + "\n")
        res = CliRunner().invoke(app, ["admin", "policy", "replay", "--site", site, "--sacct-file", str(f)])
        assert isinstance(res.exception, ParseError), (field, value, res.output)
        assert str(res.exception).startswith(f"{f}:2: {field}: "), str(res.exception)
        with pytest.raises(ParseError):
            from slurmtools.policy.replay import REPLAY_FIELDS
            from slurmtools.slurm.commands import parse_sacct

            parse_sacct(f.read_text(), str(f), REPLAY_FIELDS)
