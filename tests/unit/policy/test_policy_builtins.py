import sys
import textwrap
from dataclasses import replace

import pytest

from slurmtools.errors import ConfigError
from slurmtools.policy import Decision, JobRequest, PolicyContext, evaluate, load_policies, registry
from slurmtools.site.model import PolicySettings

SIG = "#!/bin/bash\n#SBATCH --signal=B:USR1@300\n"
SIG_SCAV = "#!/bin/bash\n#SBATCH --signal=B:USR1@120\n"


def decide(policies, ctx, args, script=SIG, **kw):
    return evaluate(JobRequest.from_sbatch(args, script=script, **kw), policies, ctx)


def test_defaults_are_routed(policies, ctx):
    d = decide(policies, ctx, ["-A", "nlp", "--gres=gpu:h100:8"])
    assert d == Decision("modify", changes={"partition": "gpu", "qos": "standard"}, policy="routing")


def test_unknown_tier_and_partition(policies, ctx):
    d = decide(policies, ctx, ["-A", "nlp", "-q", "normal"])
    assert d.message == "QoS normal is not a tier of this site (tiers: production, standard, scavenger)"
    d = decide(policies, ctx, ["-A", "nlp", "-p", "cpu"])
    assert d.message == "partition cpu is not a partition of this site (partitions: gpu)"


def test_account_tier_access(policies, ctx):
    d = decide(policies, ctx, ["-A", "students", "-q", "production", "--gres=gpu:h100:1"])
    assert (d.action, d.policy) == ("deny", "routing")
    assert d.message == "account students may not use tier production (its tiers: standard, scavenger)"
    # the default account stands in when -A is not given
    d = decide(policies, ctx, ["-q", "production"], default_account="students")
    assert d.action == "deny"


@pytest.mark.parametrize("qos,limit", [("production", 64), ("standard", 32), ("scavenger", 128)])
def test_gpus_per_job_edge(policies, ctx, qos, limit):
    script = SIG_SCAV if qos == "scavenger" else SIG
    ok = decide(policies, ctx, ["-A", "vision", "-q", qos, f"--gpus=h100:{limit}", "-N", "1"], script=script)
    assert ok.allowed, ok
    bad = decide(policies, ctx, ["-A", "vision", "-q", qos, f"--gpus=h100:{limit + 1}"], script=script)
    assert bad.message == f"tier {qos} allows at most {limit} GPUs per job; this job asks for {limit + 1}"


def test_walltime_and_nodes_edges(policies, ctx):
    base = ["-A", "vision", "-q", "standard", "--gres=gpu:h100:8"]
    assert decide(policies, ctx, base + ["-t", "1-00:00:00"]).allowed
    d = decide(policies, ctx, base + ["-t", "1-00:01:00"])
    assert d.message == "tier standard allows a time limit of at most 1-00:00:00; this job asks for 1-00:01:00"
    d = decide(policies, ctx, base + ["-t", "UNLIMITED"])
    assert d.message.endswith("this job asks for UNLIMITED")
    assert decide(policies, ctx, base + ["-N", "4"]).allowed
    d = decide(policies, ctx, base[:-1] + ["--gres=gpu:h100:1", "-N", "5"])
    assert d.message == "tier standard allows at most 4 nodes per job; this job asks for 5"


def test_gpu_type_required_and_known(policies, ctx):
    d = decide(policies, ctx, ["-A", "vision", "--gres=gpu:8"])
    assert d.policy == "gpu_type"
    assert d.message == ("partition gpu needs a GPU type: ask for e.g. --gres=gpu:h100:N instead of an untyped "
                         "GPU count (GPU types here: h100)")
    d = decide(policies, ctx, ["-A", "vision", "--gpus-per-node=a100:2"])
    assert d.message == "partition gpu has no GPU type a100 (GPU types here: h100)"


def test_untyped_gpus_count_against_per_type_limits(site, fabric):
    s = replace(site, policy=PolicySettings(require_gpu_type=False, require_checkpoint_signal=False,
                                            extra={"max_gpus_per_type": {"h100": 16}}))
    pols = load_policies(s, fabric)
    ctx = PolicyContext(site=s, fabric=fabric)
    assert evaluate(JobRequest.from_sbatch(["--gpus=h100:16"]), pols, ctx).allowed
    assert evaluate(JobRequest.from_sbatch(["--gres=gpu:16"]), pols, ctx).allowed
    d = evaluate(JobRequest.from_sbatch(["--gres=gpu:17"]), pols, ctx)
    assert d.message == ("at most 16 h100 GPUs per job; this job asks for 17 "
                         "(untyped GPUs count against every type's limit)")


def test_per_type_limits_are_validated(site, fabric):
    s = replace(site, policy=PolicySettings(extra={"max_gpus_per_type": {"b200": 4}}))
    with pytest.raises(ConfigError, match="policy.max_gpus_per_type.b200: unknown GPU type"):
        load_policies(s, fabric)


def test_cpus_and_memory_per_gpu(policies, ctx):
    # node type: 112 CPUs, 2,000,000 MB, 8 GPUs -> 14 CPUs and 250000 MB per GPU
    base = ["-A", "vision", "--gres=gpu:h100:4", "-n", "4"]
    assert decide(policies, ctx, base + ["-c", "14"]).allowed
    d = decide(policies, ctx, base + ["-c", "15"])
    assert d.message == ("on partition gpu each GPU comes with at most 14 CPUs: 4 GPUs allow 56 CPUs, "
                         "this job asks for 60")
    assert decide(policies, ctx, base + ["--mem=1000000"]).allowed
    d = decide(policies, ctx, base + ["--mem=1000001"])
    assert d.message == ("on partition gpu each GPU comes with at most 250000 MB of memory: 4 GPUs allow "
                         "1000000 MB, this job asks for 1000001 MB")
    d = decide(policies, ctx, base + ["--mem-per-cpu=100000", "-c", "3"])
    assert d.policy == "cpu_mem_per_gpu" and "this job asks for 1200000 MB" in d.message
    assert decide(policies, ctx, ["-A", "vision", "-c", "100"]).allowed  # no GPUs: not this policy's business


def test_tolerance_widens_the_share(site, fabric):
    s = replace(site, policy=replace(site.policy, cpu_mem_tolerance=1.5))
    pols = load_policies(s, fabric)
    ctx = PolicyContext(site=s, fabric=fabric)
    assert evaluate(JobRequest.from_sbatch(["-A", "vision", "--gres=gpu:h100:1", "-c", "21"], script=SIG),
                    pols, ctx).allowed
    d = evaluate(JobRequest.from_sbatch(["-A", "vision", "--gres=gpu:h100:1", "-c", "22"], script=SIG), pols, ctx)
    assert "at most 21 CPUs" in d.message


@pytest.mark.parametrize("line,ok", [
    ("#SBATCH --signal=B:USR1@300", True), ("#SBATCH --signal=USR1@60", True), ("#SBATCH --signal SIGUSR1", True),
    ("#SBATCH --signal=RB:10@300", True), ("#SBATCH --signal=B:USR2@300", True), ("#SBATCH --signal=B:URG@300", True),
    ("#SBATCH --signal=B:TERM@300", False), ("#SBATCH --time=5", False),
    ("# SBATCH --signal=B:USR1@300", False),
])
def test_checkpoint_signal_on_preemptible_tiers(policies, ctx, line, ok):
    d = decide(policies, ctx, ["-A", "vision", "-q", "standard", "--gres=gpu:h100:1"], script=f"#!/bin/bash\n{line}\n")
    assert d.allowed == ok
    if not ok:
        assert d.message == ("tier standard is preemptible: add '#SBATCH --signal=B:URG@300' to the batch script "
                             "so the job can checkpoint (a --signal on the command line is not visible here)")


def test_signal_after_first_command_does_not_count(policies, ctx):
    d = decide(policies, ctx, ["-A", "vision", "--gres=gpu:h100:1"], script="#!/bin/bash\necho\n#SBATCH --signal=USR1\n")
    assert d.policy == "checkpoint_signal"
    # interactive jobs (no script: srun/salloc) have nothing to checkpoint
    assert decide(policies, ctx, ["-A", "vision", "--gres=gpu:h100:1"], script="").allowed
    # production is not preemptible: no signal needed
    assert decide(policies, ctx, ["-A", "vision", "-q", "production", "--gres=gpu:h100:1"], script="").allowed


def test_budgets(policies, site, fabric):
    ctx = PolicyContext(site=site, fabric=fabric, usage={"nlp": 40000.0, "vision": 20000.0, "students": 1999.9},
                        month="2026-11")
    d = decide(policies, ctx, ["-A", "nlp", "--gres=gpu:h100:1"])
    assert d.message == ("account nlp has used 40000.0 of its 40000.0 GPU-hours for 2026-11; only tier scavenger "
                         "is open to it until the budget is raised")
    # over_budget = scavenger: re-routed, and then scavenger's own rules apply (its checkpoint signal)
    d = decide(policies, ctx, ["-A", "vision", "--gres=gpu:h100:1"], script=SIG_SCAV)
    assert d == Decision("modify", changes={"partition": "gpu", "qos": "scavenger"}, policy="routing,budget")
    assert decide(policies, ctx, ["-A", "students", "--gres=gpu:h100:1"]).allowed
    assert decide(policies, ctx, ["-A", "nlp", "-q", "scavenger", "--gres=gpu:h100:1"], script=SIG_SCAV).allowed
    # unknown usage: budgets are not checked
    assert decide(policies, replace(ctx, usage=None), ["-A", "nlp", "--gres=gpu:h100:1"]).allowed


def test_modify_refuses_other_fields():
    with pytest.raises(ValueError, match="may not change extra"):
        Decision.modify("x", extra="boom")


def test_enabled_list_selects_and_names_unknown(site, fabric):
    s = replace(site, policy=replace(site.policy, enabled=("routing", "tier_limits")))
    assert [p.name for p in load_policies(s, fabric)] == ["routing", "tier_limits"]
    s = replace(site, policy=replace(site.policy, enabled=("routing", "nosuch")))
    with pytest.raises(ConfigError, match="policy.enabled: unknown policy 'nosuch'"):
        load_policies(s, fabric)


def test_plugin_through_entry_point(tmp_path, monkeypatch, site, fabric):
    """A site policy installed as a distribution with a `slurmtools.policies` entry point is found and run."""
    (tmp_path / "site_rules.py").write_text(textwrap.dedent('''
        from slurmtools.policy import Decision, Policy
        class NoFriday(Policy):
            name = "no_big_jobs_named_friday"
            def check(self, request, ctx):
                if request.name == "friday":
                    return Decision.deny("jobs named friday are not allowed")
                return Decision.allow()
    '''))
    dist = tmp_path / "site_rules-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: site-rules\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[slurmtools.policies]\nno_friday = site_rules:NoFriday\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "no_friday" in registry()
    s = replace(site, policy=replace(site.policy, enabled=("routing", "no_friday")))
    pols = load_policies(s, fabric)
    d = evaluate(JobRequest.from_sbatch(["-J", "friday"]), pols, PolicyContext(site=s, fabric=fabric))
    assert (d.action, d.policy, d.message) == ("deny", "no_friday", "jobs named friday are not allowed")
    sys.modules.pop("site_rules", None)


def test_a_plugin_cannot_take_a_builtins_name(tmp_path, monkeypatch, site, fabric):
    """A built-in's name always means the built-in: a plugin registered under one is refused in one line naming
    it, once the entry points are read (a site naming a plugin, `admin policy list`)."""
    (tmp_path / "shadow_rules.py").write_text(textwrap.dedent('''
        from slurmtools.policy import Decision, Policy
        class Everything(Policy):
            name = "routing"
            def check(self, request, ctx):
                return Decision.deny("no")
    '''))
    dist = tmp_path / "shadow_rules-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: shadow-rules\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[slurmtools.policies]\nrouting = shadow_rules:Everything\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="shadow_rules:Everything: policy plugin 'routing' takes the name of a "
                                          "built-in policy"):
        registry()
    # a site naming only built-ins runs the built-ins, whatever is installed
    s = replace(site, policy=replace(site.policy, enabled=("routing",)))
    assert [type(p).__module__ for p in load_policies(s, fabric)] == ["slurmtools.policy.builtin"]


def test_a_site_of_builtins_loads_without_reading_entry_points():
    """Reading the installed distributions' entry points costs every command ~20 ms: a site that names only
    built-in policies (the example site) never reads them."""
    import subprocess

    code = ("import sys\nfrom slurmtools.site import load_site\nload_site(None)\n"
            "print('importlib.metadata' in sys.modules, 'slurmtools.policy.builtin' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]
