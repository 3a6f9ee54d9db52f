"""Read and validate a site file into the typed model.

Lookup order: --site PATH, $SLURMTOOLS_SITE, /etc/slurmtools/site.toml, then the bundled example site.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from slurmtools.durations import TIME_LIMIT_MAX
from slurmtools.errors import ConfigError
from slurmtools.site.model import (MIG_PROFILE, Account, AdviseSettings, EnergySettings, GpuType, Partition,
                                   PolicySettings, ReportSettings, Site, TelemetrySettings, Tier)
from slurmtools.site.tomlread import Table, each, load_toml, shown
from slurmtools.site.validate import (CPU_MEM_TOLERANCE, EXACT, GPU_MEMORY_GB, MIN_RUNS, NAME, NAME_RULE, POLLS,
                                      SHARDS_PER_GPU, TIME_RATIO, check_hosts, check_site)

SYSTEM_SITE = Path("/etc/slurmtools/site.toml")
#: a plugin's settings are the table [policy.<its name>]; said when a [policy] key is unknown
_PLUGIN_HINT = "; a plugin's settings go in [policy.<its name>] once enabled lists it"


def _checkpoint_signal(t: Table) -> str:
    """A tier's warning signal: one of slurmtools.warning_signals.USABLE (`SIGURG`, `urg` accepted), else refused."""
    from slurmtools.warning_signals import DEFAULT, normalize, why_not

    v = t.str("checkpoint_signal", DEFAULT)
    sig = normalize(v)
    if sig is None:
        raise t.error("checkpoint_signal", why_not(v))
    return sig


def find_site_path(explicit: str | os.PathLike | None = None) -> Path:
    from slurmtools.resources import example_site

    if explicit:
        return Path(explicit)
    env = os.environ.get("SLURMTOOLS_SITE")
    if env:
        return Path(env)
    if SYSTEM_SITE.exists():
        return SYSTEM_SITE
    return example_site()


def load_site(path: str | os.PathLike | None = None) -> Site:
    p = find_site_path(path)
    src = str(p)
    root = Table(src, load_toml(p))

    s = root.table("site")
    name = s.str("name")
    if not name.strip():   # it heads reports (where "" reads as "no site"), job_submit.lua and the fingerprint
        raise s.error("name", "an empty name: the site's name heads its reports and job_submit.lua; name the site")
    cluster = s.str("cluster_name", name)
    spool = _spool_dir(s)
    currency = s.str("currency", "USD")
    if not currency.strip():   # every cost in the reports would be shown without its unit
        raise s.error("currency", 'an empty currency: the reports\' costs would have no unit; name it (e.g. "EUR"), '
                                  "or leave the key out for USD")
    default_tier = s.str("default_tier")
    fabric = s.str("fabric", None)
    if fabric is not None and not fabric.strip():
        raise s.error("fabric", "an empty path: name the fabric file, or leave the key out for a site without one")
    # realpath, not Path.resolve(): that raises RuntimeError on a symlink loop (Python 3.11); the loop is then
    # named by the read, in one line
    fabric_path = Path(os.path.realpath(p.parent / fabric)) if fabric else None
    s.check_unknown()

    gpu_types = each(root.tables("gpu_types"), _gpu_type)
    if not gpu_types:
        raise root.error("gpu_types", "at least one GPU type is required")

    partitions = each(root.tables("partitions"), lambda n, t: _partition(n, t, gpu_types))
    if not partitions:
        raise root.error("partitions", "at least one partition is required")

    tiers = each(root.tables("tiers"), lambda n, t: _tier(n, t, partitions))
    if not tiers:
        raise root.error("tiers", "at least one tier is required")

    accounts = each(root.tables("accounts", {}), lambda n, t: _account(n, t, tiers))
    _one_name_to_slurm(root, "tiers", tiers, "QoS")
    _one_name_to_slurm(root, "accounts", accounts, "account")
    pol = root.table("policy", {})
    policy = PolicySettings(
        require_gpu_type=pol.bool("require_gpu_type", True),
        require_checkpoint_signal=pol.bool("require_checkpoint_signal", True),
        cpu_mem_tolerance=pol.float("cpu_mem_tolerance", 1.0, minimum=1.0, maximum=CPU_MEM_TOLERANCE),
        fail_mode=pol.str("fail_mode", "closed", choices=("closed", "open")),
        require_gpus_on_gpu_partitions=pol.bool("require_gpus_on_gpu_partitions", False),
        enabled=pol.str_list("enabled", ()),
        extra=_policy_extra(pol),
    )
    pol.check_unknown(_PLUGIN_HINT)
    rep = root.table("reports", {})
    share = rep.float("max_bad_share", None, minimum=0.0)
    if share is not None and share > 1.0:
        raise rep.error("max_bad_share", f"expected a share from 0 to 1 (0.01 is 1%), got {share:g}")
    rep.check_unknown()
    slack = _slack(root.table("slack", {}), spool)
    advise = _advise(root.table("advise", {}))
    telemetry, energy = _telemetry(root.table("telemetry", {})), _energy(root.table("energy", {}))
    root.check_unknown()
    site = Site(name=name, cluster_name=cluster, source=p, spool_dir=spool, currency=currency,
                default_tier=default_tier, gpu_types=gpu_types, partitions=partitions, tiers=tiers,
                accounts=accounts, fabric_path=fabric_path, policy=policy,
                reports=ReportSettings(max_bad_share=share), advise=advise, slack=slack,
                telemetry=telemetry, energy=energy)
    check_site(site)
    fabric = None
    if fabric_path is not None:
        from slurmtools.topology.sitefile import load_fabric

        _check_fabric_path(src, fabric_path)
        fabric = load_fabric(fabric_path)
        check_hosts(site, fabric)
    _check_policies(site, fabric)
    return site


def _check_fabric_path(src: str, path: Path) -> None:
    """What is wrong with the path site.fabric names, said as that key's error (a bare path out of context does not
    tell which setting to fix); what is inside the file is the fabric loader's to say."""
    if not os.path.lexists(path):
        raise ConfigError(src, "site.fabric", f"{path}: no such file (a relative path is from the site file's "
                                              "folder)")
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:   # a symlink loop, a folder above it that cannot be searched
        raise ConfigError(src, "site.fabric", f"{path}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise ConfigError(src, "site.fabric", f"{path}: a folder, expected the fabric file (a topology/*.toml)")
    if not stat.S_ISREG(mode):
        raise ConfigError(src, "site.fabric", f"{path}: not a regular file, expected the fabric file")


def _telemetry(t: Table) -> TelemetrySettings:
    """`[telemetry]` (docs/telemetry.md): the hooks read the same key from the file themselves (hooks.telemetry)."""
    from slurmtools.hooks.telemetry import DEFAULT_MODE, MODES

    out = TelemetrySettings(gpu_utilization=t.str("gpu_utilization", DEFAULT_MODE, choices=MODES))
    t.check_unknown()
    return out


def _energy(t: Table) -> EnergySettings:
    """`[energy]`: price per kWh and carbon factor, each optional, 0 or more."""
    out = EnergySettings(price_per_kwh=t.float("price_per_kwh", None, minimum=0.0, maximum=EXACT),
                         carbon_kg_per_kwh=t.float("carbon_kg_per_kwh", None, minimum=0.0,
                                                             maximum=EXACT))
    t.check_unknown()
    return out


def _spool_dir(s: Table) -> Path:
    """The root-owned folder the epilog writes into: absolute and plain, never "" (the working folder) or "/"."""
    raw = s.str("spool_dir", "/var/spool/slurmtools")
    if not raw.startswith("/"):
        raise s.error("spool_dir", f'expected an absolute folder like "/var/spool/slurmtools", got {shown(raw)}')
    if not raw.strip("/"):
        raise s.error("spool_dir", f"expected a folder of its own, not {shown(raw)}")
    if os.path.normpath(raw) != raw.rstrip("/") or "//" in raw:
        raise s.error("spool_dir", f"expected a plain absolute folder (no '.', '..' or '//'), got {shown(raw)}")
    return Path(raw)


def _policy_extra(pol: Table) -> dict:
    """Settings the policies read beyond PolicySettings: the built-in `max_gpus_per_type` table and the table
    `[policy.<name>]` of each enabled plugin. Anything else in [policy] is an unknown key, never ignored."""
    from slurmtools.policy.builtin import BUILTINS

    builtin = {c.name for c in BUILTINS}
    extra = {}
    raw = pol.table("max_gpus_per_type", None)  # its entries are checked by the gpu_type_limits policy
    if raw.data:
        extra["max_gpus_per_type"] = raw.data
    for n in pol.str_list("enabled", ()):
        if n not in builtin and n in pol.data:
            extra[n] = pol.table(n).data
    return extra


def _check_policies(site: Site, fabric) -> None:
    """Configure the site's policies now: an unknown name in policy.enabled or a wrong policy setting fails every
    command that loads the site, not first `submit` or `admin render job-submit`."""
    from slurmtools.policy.base import load_policies

    load_policies(site, fabric)


def _one_name_to_slurm(root: Table, key: str, named: dict, what: str) -> None:
    """slurmdbd keeps QoS and account names in lower case: two names that differ only in case are one to it, and
    sacctmgr would fold the second into the first."""
    seen: dict[str, str] = {}
    for name in named:
        first = seen.setdefault(name.lower(), name)
        if first != name:
            raise root.error(f"{key}.{name}", f"the same {what} as {key}.{first} to Slurm, which keeps {what} names "
                                             f"in lower case; give it a name of its own")


def _name(t: Table, name: str) -> str:
    if not NAME.fullmatch(name):  # fullmatch: "$" lets a trailing newline through, into slurm.conf
        raise ConfigError(t.source, t.path, NAME_RULE)
    return name


def _gpu_type(name: str, t: Table) -> GpuType:
    memory_gb = t.int("memory_gb", 0, minimum=0, maximum=GPU_MEMORY_GB)
    migs = t.str_list("mig_profiles", ())
    for m in migs:
        got = MIG_PROFILE.fullmatch(m)
        if not got:
            raise t.error("mig_profiles", f"expected MIG profiles as Slurm's GRES types name them, like \"1g.10gb\" "
                                          f"or \"3g.40gb\", got {shown(m)}")
        if memory_gb and int(got.group(2)) > memory_gb:
            raise t.error("mig_profiles", f"{m} holds more memory than the GPU's memory_gb ({memory_gb})")
    bw = t.float("memory_bandwidth_gbs", None, minimum=0.0, maximum=EXACT)
    if bw is not None and bw <= 0:
        raise t.error("memory_bandwidth_gbs", f"expected a bandwidth in GB/s above 0, got {bw:g}")
    return GpuType(name=_name(t, name), description=t.str("description", name), memory_gb=memory_gb,
                   price_per_gpu_hour=t.float("price_per_gpu_hour", minimum=0.0, maximum=EXACT),
                   memory_bandwidth_gbs=bw, mig_profiles=migs,
                   shards_per_gpu=t.int("shards_per_gpu", 0, minimum=0, maximum=SHARDS_PER_GPU),
                   mps=t.bool("mps", False))


def _advise(t: Table) -> AdviseSettings:
    """`[advise]`: every threshold in its range, named when it is not (defaults: AdviseSettings)."""
    d = AdviseSettings()

    def pct(key: str) -> float:
        v = t.float(key, getattr(d, key), minimum=0.0)
        if v > 100:
            raise t.error(key, f"expected a percentage from 0 to 100, got {v:g}")
        return v

    share = t.float("runs_share", d.runs_share, minimum=0.0)
    if not 0 < share <= 1:
        raise t.error("runs_share", f"expected a share above 0 and at most 1 (0.8 is 80%), got {share:g}")
    lookback = t.duration("lookback", d.lookback)
    if lookback < 3600:
        raise t.error("lookback", "expected at least an hour of history")
    from datetime import datetime

    from slurmtools.durations import human

    if lookback > (datetime.now() - datetime(1970, 1, 1)).total_seconds():   # was an OverflowError in `advise`
        raise t.error("lookback", f"{human(lookback)} back from now is before 1970, where Slurm's accounting "
                                  "begins")
    out = AdviseSettings(
        lookback=lookback, min_runs=t.int("min_runs", d.min_runs, minimum=1, maximum=MIN_RUNS), runs_share=share,
        gpu_idle_pct=pct("gpu_idle_pct"), fraction_util_pct=pct("fraction_util_pct"),
        time_ratio=t.float("time_ratio", d.time_ratio, minimum=1.0, maximum=TIME_RATIO),
        time_headroom=t.float("time_headroom", d.time_headroom, minimum=1.0),
        cpu_efficiency_pct=pct("cpu_efficiency_pct"), memory_used_pct=pct("memory_used_pct"),
        memory_bound_mem_pct=pct("memory_bound_mem_pct"), memory_bound_sm_pct=pct("memory_bound_sm_pct"),
        mail=t.bool("mail", d.mail), mail_domain=t.str("mail_domain", d.mail_domain))
    if out.mail_domain and not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252})", out.mail_domain):
        raise t.error("mail_domain", f"expected a domain like \"example.org\", got {shown(out.mail_domain)}")
    if out.time_headroom > out.time_ratio:
        raise t.error("time_headroom", f"{out.time_headroom:g} is above time_ratio ({out.time_ratio:g}): the "
                                       f"recommended --time would be no shorter than the limit it replaces")
    t.check_unknown()
    return out


def _partition(name: str, t: Table, gpu_types: dict) -> Partition:
    from slurmtools.hostlist import expand

    nodes = t.str("nodes")
    try:
        if not expand(nodes):
            raise ValueError("empty")
    except ValueError:
        raise t.error("nodes", f'expected a Slurm hostlist like "gpu[01-16]", got {nodes!r}') from None
    types = t.str_list("gpu_types", tuple(gpu_types))
    for g in types:
        if g not in gpu_types:
            raise t.error("gpu_types", f"unknown GPU type {g!r} (known: {', '.join(gpu_types)})")
    return Partition(name=_name(t, name), nodes=nodes, default=t.bool("default", False),
                     max_time=t.duration("max_time", "7d"), gpu_types=types,
                     allow_partial_nodes=t.bool("allow_partial_nodes", False),
                     description=t.str("description", ""),
                     topology=t.str("topology", "tree", choices=("tree", "block", "flat")),
                     max_cpus_per_node=t.int("max_cpus_per_node", None, minimum=1))


def _tier(name: str, t: Table, partitions: dict) -> Tier:
    parts = t.str_list("partitions", tuple(partitions),
                       nonempty="name at least one partition (or leave the key out for every partition)")
    for p in parts:
        if p not in partitions:
            raise t.error("partitions", f"unknown partition {p!r} (known: {', '.join(partitions)})")
    preempted_by = t.str_list("preempted_by", ())
    return Tier(
        name=_name(t, name), description=t.str("description", ""), priority=t.int("priority", minimum=0),
        preempted_by=preempted_by, grace_time=t.duration("grace_time", 0),
        max_gpus_per_job=t.int("max_gpus_per_job", None, minimum=1),
        max_gpus_per_user=t.int("max_gpus_per_user", None, minimum=1),
        max_walltime=t.duration("max_walltime", "7d"), max_nodes=t.int("max_nodes", None, minimum=1),
        partitions=parts, checkpoint_signal=_checkpoint_signal(t),
        signal_lead=t.duration("signal_lead", "5m"), charged=t.bool("charged", True),
    )


def _account(name: str, t: Table, tiers: dict) -> Account:
    allowed = t.str_list("tiers", tuple(tiers))
    if not allowed:  # no QoS the account could use: every job of it would be refused, and no default QoS exists
        raise t.error("tiers", "an empty list: name at least one tier (or leave the key out for every tier)")
    for x in allowed:
        if x not in tiers:
            raise t.error("tiers", f"unknown tier {x!r} (known: {', '.join(tiers)})")
    users = t.str_list("users", ())
    return Account(name=_name(t, name), description=t.str("description", ""),
                   monthly_gpu_hours=t.float("monthly_gpu_hours", None, minimum=0.0, maximum=EXACT), users=users,
                   tiers=allowed, over_budget=t.str("over_budget", "reject", choices=("reject", "scavenger")))


def _slack(t: Table, spool: Path):
    """`[slack]` (docs/slack.md): how often the slack signal may poll Slurm, the mode thresholds, the hysteresis
    and the price windows; every value in its range, named when it is not."""
    from slurmtools.slack_settings import DAYS, PriceWindow, SlackSettings

    d = SlackSettings()
    interval = t.duration("poll_interval", d.poll_interval)
    if interval < 1:
        raise t.error("poll_interval", "expected at least 1s between two polls of Slurm")
    if interval > TIME_LIMIT_MAX:
        raise t.error("poll_interval", f"expected at most {TIME_LIMIT_MAX}s, Slurm's longest time limit (no job "
                                       f"would see a second poll), got {interval}s")
    heavy = t.float("heavy_at", d.heavy_at, minimum=0.0)
    light = t.float("light_at", d.light_at, minimum=0.0)
    if heavy > 1:
        raise t.error("heavy_at", f"expected a score from 0 to 1, got {heavy:g}")
    if light >= heavy:
        raise t.error("light_at", f"expected a score below heavy_at ({heavy:g}), got {light:g}")
    margin = t.float("margin", d.margin, minimum=0.0)
    if light + margin >= heavy - margin:
        raise t.error("margin", f"{margin:g} makes the bands around light_at ({light:g}) and heavy_at ({heavy:g}) "
                                f"meet: expected below {(heavy - light) / 2:g}")
    polls = t.int("polls", d.polls, minimum=1, maximum=POLLS)
    max_age = t.duration("max_age", d.max_age)
    if max_age < interval:
        raise t.error("max_age", f"expected at least poll_interval ({interval}s), got {max_age}s")
    if max_age > TIME_LIMIT_MAX:
        raise t.error("max_age", f"expected at most {TIME_LIMIT_MAX}s, Slurm's longest time limit (a signal that "
                                 f"old is never stale to any job), got {max_age}s")
    cache = t.str("cache_file", str(spool / "slack.json"))
    if not cache.startswith("/"):
        raise t.error("cache_file", f'expected an absolute path like "/var/spool/slurmtools/slack.json", got '
                                    f"{shown(cache)}")
    windows = []
    for w in t.table_list("windows", []):
        name = w.str("name")
        if not NAME.fullmatch(name):
            raise w.error("name", NAME_RULE)
        if name in (x.name for x in windows):
            raise w.error("name", f"a second window named {name!r}")
        start, end = _clock(w, "start"), _clock(w, "end")
        if start == 1440:  # the cached signal's reader (SlackSettings.from_dict) takes starts 0 to 1439 only
            raise w.error("start", '"24:00" is the end of a day, not a start: a window from midnight starts at '
                                   '"00:00" (of the day after, in `days`)')
        if start == end % 1440:
            raise w.error("end", "expected an end other than the start (a window of no time, or of the whole day)")
        days = w.str_list("days", DAYS, nonempty="name at least one day (or leave the key out for every day)")
        for x in days:
            if x not in DAYS:
                raise w.error("days", f"expected days among {', '.join(DAYS)}, got {shown(x)}")
        windows.append(PriceWindow(name=name, start_min=start, end_min=end, factor=w.float("factor", minimum=0.0),
                                   days=tuple(sorted({DAYS.index(x) for x in days}))))
        w.check_unknown()
    t.check_unknown()
    return SlackSettings(poll_interval=interval, heavy_at=heavy, light_at=light, margin=margin,
                         polls=polls,
                         max_age=max_age, cache_file=cache, windows=tuple(windows))


def _clock(t: Table, key: str) -> int:
    """"HH:MM" (24-hour, "24:00" is the end of the day) as minutes after midnight."""
    import re

    v = t.str(key)
    m = re.fullmatch(r"([01]\d|2[0-4]):([0-5]\d)", v)
    if not m or (m.group(1) == "24" and m.group(2) != "00"):
        raise t.error(key, f'expected a time of day like "22:00" (24-hour, local), got {shown(v)}')
    return int(m.group(1)) * 60 + int(m.group(2))
