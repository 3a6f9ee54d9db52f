"""sacctmgr commands for the site's tiers (QoS), accounts and users. Pure: returns argv lists.

`render_qos` is what a fresh accounting database needs; `slurmtools admin sync-qos` reconciles an existing one.
"""

from __future__ import annotations

import shlex

from slurmtools.site.model import Site, Tier


def _limit(value: int | None) -> str:
    """A TRES limit as sacctmgr's `set` takes it: the number, or -1 (no limit: sacctmgr clears it)."""
    return str(value) if value else "-1"


def qos_settings(site: Site, tier: Tier) -> dict[str, str]:
    """The sacctmgr `set` fields that make a QoS behave as the tier says. MaxTRESPerJob carries the tier's GPUs and
    nodes per job: slurmctld gives a job at most the QoS's `node=` nodes (src/slurmctld/node_scheduler.c
    `get_node_cnts`, `acct_policy_get_max_nodes`), which admission counts for a job without -N
    (`JobRequest.nodes`)."""
    preempts = site.preempts(tier.name)
    s = {
        "Priority": str(tier.priority),
        "PreemptMode": "requeue" if tier.preemptible else "cluster",
        "GraceTime": str(tier.grace_time),
        "MaxWall": str(max(1, tier.max_walltime // 60)),
        "MaxTRESPerJob": f"gres/gpu={_limit(tier.max_gpus_per_job)},node={_limit(tier.max_nodes)}",
        "MaxTRESPerUser": f"gres/gpu={_limit(tier.max_gpus_per_user)}",
        "Description": tier.description or tier.name,
    }
    if preempts:
        s["Preempt"] = ",".join(preempts)
    return s


def render_qos(site: Site, only: str | None = None) -> list[list[str]]:
    """`only="create"`: just the QoS names, which must exist before slurmctld reads partitions that allow them
    (Slurm 25.11 refuses an unknown AllowQos); `only="settings"`: their limits, which name TRES such as gres/gpu
    that exist only once slurmctld has registered them. Both by default."""
    cmds = []
    if only in (None, "create"):
        cmds.append(["sacctmgr", "-i", "add", "qos", ",".join(t.name for t in site.tiers_by_priority())])
    if only == "create":
        return cmds
    for t in site.tiers_by_priority():
        settings = qos_settings(site, t)
        cmd = ["sacctmgr", "-i", "modify", "qos", "where", f"name={t.name}", "set"]
        cmd += [f"{k}={v}" for k, v in settings.items()]
        cmds.append(cmd)
    return cmds


def render_accounts(site: Site, extra_users: tuple[str, ...] = ()) -> list[list[str]]:
    """Accounts, their users, and each user's allowed tiers (default QoS = the site's default tier)."""
    cmds: list[list[str]] = []
    for a in site.accounts.values():
        cmds.append(["sacctmgr", "-i", "add", "account", a.name, f"Description={a.description or a.name}",
                     f"Cluster={site.cluster_name}"])
    users: dict[str, list[str]] = {}
    for a in site.accounts.values():
        for u in a.users:
            users.setdefault(u, []).append(a.name)
    for u in extra_users:
        users.setdefault(u, [next(iter(site.accounts))] if site.accounts else [])
    for u, accts in users.items():
        if not accts:
            continue
        cmds.append(["sacctmgr", "-i", "add", "user", u, f"Account={','.join(accts)}", f"DefaultAccount={accts[0]}",
                     f"Cluster={site.cluster_name}"])
        for acct in accts:
            tiers = site.accounts[acct].tiers if acct in site.accounts else tuple(site.tiers)
            default = site.default_tier if site.default_tier in tiers else tiers[-1]
            cmds.append(["sacctmgr", "-i", "modify", "user", "where", f"name={u}", f"account={acct}", "set",
                         f"QOS={','.join(tiers)}", f"DefaultQOS={default}"])
    return cmds


def as_shell(cmds: list[list[str]]) -> str:
    return "\n".join(" ".join(shlex.quote(a) for a in c) for c in cmds) + "\n"
