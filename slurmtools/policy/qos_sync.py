"""`slurmtools admin sync-qos`: make the accounting database's QoS match the site's tiers, idempotently.

`plan_qos_sync` is pure (current QoS table in, sacctmgr argv lists out); reading and applying go through a
runner callable (argv -> stdout), so the decision never shells out. The wanted settings are the ones
`slurmtools.render.accounting.qos_settings` renders for a fresh database.
"""

from __future__ import annotations

from typing import Callable

from slurmtools.durations import parse_duration
from slurmtools.errors import SlurmError
from slurmtools.site.model import Site

Runner = Callable[[list[str]], str]

#: sacctmgr `show qos` columns, and the `set` key each one is compared with
FIELDS = (("Name", None), ("Priority", "Priority"), ("Preempt", "Preempt"), ("PreemptMode", "PreemptMode"),
          ("GraceTime", "GraceTime"), ("MaxTRES", "MaxTRESPerJob"), ("MaxTRESPU", "MaxTRESPerUser"),
          ("MaxWall", "MaxWall"), ("Description", "Description"))


def read_qos(run: Runner) -> dict[str, dict[str, str]]:
    """The QoS table as sacctmgr prints it (`--parsable2`), keyed by name, values by `set` key."""
    fmt = ",".join(f for f, _ in FIELDS)
    out: dict[str, dict[str, str]] = {}
    for line in run(["sacctmgr", "-n", "-P", "show", "qos", f"format={fmt}"]).splitlines():
        if not line.strip():
            continue
        cols = (line.split("|") + [""] * len(FIELDS))[:len(FIELDS)]
        out[cols[0]] = {key: cols[i] for i, (_, key) in enumerate(FIELDS) if key}
    return out


def _seconds(text: str) -> int | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        return parse_duration(text)
    except ValueError:
        return None


def _tres(text: str) -> dict[str, str]:
    out = {}
    for part in (text or "").split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            if v not in ("-1", ""):
                out[k.strip().lower()] = v.strip()
    return out


def same(key: str, current: str, wanted: str) -> bool:
    """Compare a sacctmgr value with a `set` value in the form each is written."""
    if key == "GraceTime":
        return (_seconds(current) or 0) == int(wanted)
    if key == "MaxWall":
        return _seconds(current) == int(wanted) * 60
    if key in ("MaxTRESPerJob", "MaxTRESPerUser"):
        return _tres(current) == _tres(wanted)
    if key == "Preempt":
        return {x for x in current.split(",") if x} == {x for x in wanted.split(",") if x}
    if key == "PreemptMode":
        return current.strip().lower() == wanted.strip().lower()
    if key == "Priority":
        return current.strip() == wanted.strip()
    if key == "Description":
        return current.strip().lower() == wanted.strip().lower()  # sacctmgr stores descriptions in lower case
    return current == wanted


def wanted_settings(site: Site) -> dict[str, dict[str, str]]:
    from slurmtools.render.accounting import qos_settings

    out = {}
    for t in site.tiers_by_priority():
        s = dict(qos_settings(site, t))
        s.setdefault("Preempt", "")
        out[t.name] = s
    return out


def plan_qos_sync(site: Site, current: dict[str, dict[str, str]]) -> list[list[str]]:
    """sacctmgr commands that turn `current` into the site's tiers; empty when they already match.

    Only fields that differ are set. QoS that are not tiers are left alone (other tools may own them).
    """
    cmds: list[list[str]] = []
    wanted = wanted_settings(site)
    missing = [n for n in wanted if n not in current]
    if missing:
        cmds.append(["sacctmgr", "-i", "add", "qos", ",".join(missing)])
    for name, settings in wanted.items():
        have = current.get(name, {})
        diff = []
        for key, value in settings.items():
            if name in current and same(key, have.get(key, ""), value):
                continue
            if name not in current and key == "Preempt" and not value:
                continue
            diff.append(f"{key}={value}" if value else f"{key}=''")
        if diff:
            cmds.append(["sacctmgr", "-i", "modify", "qos", "where", f"name={name}", "set", *diff])
    return cmds


def apply(cmds: list[list[str]], run: Runner, done: Callable[[list[str]], None] | None = None) -> None:
    """Run the commands in order; `done(cmd)` after each one sacctmgr accepted (the CLI writes the decision log
    there, so a record exists for every change made even when a later command fails)."""
    for c in cmds:
        try:
            run(c)
        except SlurmError as exc:
            raise SlurmError("sacctmgr", f"{' '.join(c)}: {exc}") from None
        if done is not None:
            done(c)


def change_record(cmd: list[str]) -> dict[str, object]:
    """The decision-log details of one applied sacctmgr command: the action, the QoS and the settings."""
    action = cmd[2] if len(cmd) > 2 else ""
    if action == "add":
        return {"action": "add", "qos": cmd[4].split(",") if len(cmd) > 4 else [], "command": cmd}
    qos = next((a.split("=", 1)[1] for a in cmd if a.startswith("name=")), None)
    sets = cmd[cmd.index("set") + 1:] if "set" in cmd else []
    return {"action": action, "qos": [qos] if qos else [], "settings": sets, "command": cmd}
