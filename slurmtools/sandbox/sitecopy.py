"""The sandbox's own site file: the candidate's TOML with its durations scaled (`timescale.scaled_site_doc`), the
trace's users added to their accounts under sandbox names, written back as TOML for the lab to render from.

Pure. Trace users become `sbx0001`, `sbx0002`, ... (sorted by recorded name): the sandbox creates Unix users for
them, and must never start processes as a real person's account on the machine it runs on. Per-user limits and
fair-share still see one user per recorded user.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, time

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def sandbox_users(users) -> dict[str, str]:
    """Recorded user name -> sandbox user name."""
    return {u: f"sbx{i:04d}" for i, u in enumerate(sorted(set(users)), start=1)}


def with_trace_users(doc: dict, pairs, names: dict[str, str]) -> dict:
    """`doc` with each (recorded user, account) pair's sandbox user added to that account, where the site has it.
    Accounts the candidate site lacks get no users: Slurm refuses their jobs, as it would in production."""
    out = dict(doc)
    accounts = {k: dict(v) for k, v in (doc.get("accounts") or {}).items()}
    for user, account in sorted(set(pairs)):
        if account in accounts:
            have = list(accounts[account].get("users") or [])
            if names[user] not in have:
                accounts[account]["users"] = have + [names[user]]
    out["accounts"] = accounts
    return out


def _key(k: str) -> str:
    return k if _BARE.match(k) else json.dumps(k)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (datetime, date, time)):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def dumps(doc: dict) -> str:
    """TOML text for a site document (tables, arrays of tables, scalars, arrays): enough for what tomllib read."""
    lines: list[str] = []

    def table(path: list[str], body: dict) -> None:
        scalars = {k: v for k, v in body.items() if not _is_table(v) and not _is_table_array(v)}
        if path and (scalars or not body):
            lines.append("[" + ".".join(_key(p) for p in path) + "]")
        for k, v in scalars.items():
            lines.append(f"{_key(k)} = {_value(v)}")
        if scalars:
            lines.append("")
        for k, v in body.items():
            if _is_table(v):
                table(path + [k], v)
            elif _is_table_array(v):
                for item in v:
                    lines.append("[[" + ".".join(_key(p) for p in path + [k]) + "]]")
                    for ik, iv in item.items():
                        lines.append(f"{_key(ik)} = {_value(iv)}")
                    lines.append("")

    table([], doc)
    return "\n".join(lines) + "\n"


def _is_table(v) -> bool:
    return isinstance(v, dict)


def _is_table_array(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)
