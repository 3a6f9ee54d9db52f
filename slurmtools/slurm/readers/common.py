"""Value helpers shared by the JSON readers: timestamps and numbers in every form Slurm has written them."""

from __future__ import annotations

from datetime import datetime, timezone

from slurmtools.errors import SlurmError


def ts(value) -> datetime | None:
    """Epoch seconds (JSON) or ISO text (sacct) -> aware datetime; 0/Unknown/None/unset -> None."""
    if value in (None, "", 0, "Unknown", "None", "N/A"):
        return None
    if isinstance(value, dict):  # data_parser: {"set": .., "infinite": .., "number": ..}
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
        if not value:
            return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, tz=timezone.utc)
    try:
        return datetime.fromisoformat(str(value)).astimezone(timezone.utc)
    except ValueError:
        return None


def num(value) -> int | None:
    """A count or limit; None when unset, infinite or not a number."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if value in (None, "", "UNLIMITED", "Partition_Limit", "NOT_SET"):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def check_errors(cmd: str, data: dict) -> None:
    """Slurm reports some failures inside the JSON (`errors: [...]`) with exit code 0."""
    errs = [e for e in data.get("errors", []) if e]
    if errs:
        e = errs[0]
        msg = e.get("error") or e.get("description") or e if isinstance(e, dict) else e
        raise SlurmError(cmd, f"{cmd}: error: {msg}")
