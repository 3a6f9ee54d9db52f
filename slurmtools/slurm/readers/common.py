"""Value helpers shared by the JSON readers: timestamps and numbers in every form Slurm has written them."""

from __future__ import annotations

from datetime import datetime, timezone

from slurmtools.errors import SlurmError


def ts(value) -> datetime | None:
    """Epoch seconds (JSON) or ISO text (sacct) -> aware datetime; 0/Unknown/None/unset -> None. ValueError for
    what Slurm does not print (`2026-02-30`, a negative or fractional epoch, true), never None: an unreadable time is
    not an unset one. A text time a datetime cannot hold in this time zone is OverflowError (`parse_sacct` names
    it)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if (not number and value in (None, "", "Unknown", "None", "N/A")) or (number and value == 0):
        return None
    if isinstance(value, dict):  # data_parser: {"set": .., "infinite": .., "number": ..}
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
        if value is None or (type(value) in (int, float) and value == 0):
            return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if (isinstance(value, float) and not value.is_integer()) or value < 0:   # nan, inf, fractions
            raise ValueError(f"not a time (seconds since 1970): {value!r}")
        try:
            return datetime.fromtimestamp(int(value), tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"not a time a date can show (seconds since 1970): {value!r}") from None
    if not isinstance(value, str):
        raise ValueError(f"not a time: {value!r}"[:80])
    try:
        return datetime.fromisoformat(value).astimezone(timezone.utc)
    except ValueError:
        raise ValueError(f"not a date-time like 2026-11-02T08:00:00: {value[:40]!r}") from None


def num(value) -> int | None:
    """A count or limit; None when unset or infinite. ValueError for what Slurm does not print (`٣`, `-1`, `3.5`,
    true, text): never read as another number or as unset."""
    from slurmtools.errors import whole_number

    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if value in (None, "", "UNLIMITED", "Partition_Limit", "NOT_SET") and type(value) is not bool:
        return None
    if type(value) is int and value >= 0:
        return value
    if type(value) is float and value >= 0 and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return whole_number(value)
        except ValueError:
            pass
    raise ValueError(f"not a count: {value!r}"[:80])


def count(record: dict, key: str) -> int:
    """A count Slurm prints in every record of its kind (a node's cpus, memory): ValueError naming the field when
    it is absent, null, unset or not a count; never read as 0."""
    value = record.get(key)
    if value is None:
        raise ValueError(f"no {key}")
    try:
        got = num(value)
    except ValueError as exc:
        raise ValueError(f"{key}: {exc}") from None
    if got is None:
        raise ValueError(f"{key}: unset ({str(value)[:40]})")
    return got


def text(record: dict, key: str) -> str:
    """A name Slurm prints in every record of its kind (a node's name): ValueError when absent, null or empty."""
    value = record.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"no {key}")
    return value


def check_shape(cmd: str, data, key: str, release) -> None:
    """The JSON holds the `key` list, written by the parser `release`'s reader reads (`meta.plugin.data_parser`,
    where Slurm names it): a command of another release (a client installed beside the controller's, a PATH that
    finds another build) writes another shape, which the reader would read into nonsense (a state word split into
    letters). ParseError in one line naming both."""
    from slurmtools.errors import ParseError

    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        held = ", ".join(map(str, list(data)[:6])) if isinstance(data, dict) else type(data).__name__
        raise ParseError(cmd, None, f"no {key!r} list in its JSON output (it holds: {held})")
    meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
    plugin = meta.get("plugin") if isinstance(meta.get("plugin"), dict) else {}
    written = str(plugin.get("data_parser") or "").rpartition("/")[2]
    expected = release.json_parser or "v0.0.38"
    if written and written != expected:
        raise ParseError(cmd, None, f"its JSON was written by data_parser {written}, and Slurm {release.name} (as "
                                    f"sinfo --version says) is read as {expected}: the commands on PATH are of "
                                    "another Slurm release than the one found")


def check_errors(cmd: str, data: dict) -> None:
    """Slurm reports some failures inside the JSON (`errors: [...]`) with exit code 0."""
    errs = [e for e in data.get("errors", []) if e]
    if errs:
        e = errs[0]
        msg = e.get("error") or e.get("description") or e if isinstance(e, dict) else e
        raise SlurmError(cmd, f"{cmd}: error: {msg}")


def job_gpus(j: dict, tres) -> tuple[int, dict[str, int]]:
    """A job's GPUs (total, by type): its TRES (allocated, else requested) where they count GPUs. A site whose
    AccountingStorageTRES leaves gres/gpu out has none there (Slurm's default), so then what the job holds on its
    nodes (`gres_detail`, one entry per node: `gpu:h100:1(IDX:0)`) or asked for (`tres_per_job`, `tres_per_node` x
    its nodes, `tres_per_task` x its tasks: `gres/gpu:h100:1`); (0, {}) when it names no GPU anywhere. ValueError
    for a per-task request without a task count: its GPUs would be a guess."""
    from slurmtools.slurm.tres import parse_gres

    if tres.gpus:
        return tres.gpus, dict(tres.gpus_by_type)

    def add(into: dict[str, int], by_type: dict[str, int], times: int = 1) -> None:
        for t, n in by_type.items():
            if n:
                into[t] = into.get(t, 0) + n * times

    held: dict[str, int] = {}
    for per_node in j.get("gres_detail") or []:
        add(held, {(g.type or "untyped"): max(g.count, len(g.indexes))
                   for g in parse_gres(str(per_node)) if g.name == "gpu"})
    if not held:
        add(held, _gpus_asked(j.get("tres_per_job")))
    if not held:
        add(held, _gpus_asked(j.get("tres_per_node")), num(j.get("node_count")) or 1)
    if not held and _gpus_asked(j.get("tres_per_task")):
        tasks = num(j.get("tasks"))
        if not tasks:
            raise ValueError(f"tres_per_task {j.get('tres_per_task')!r} with no task count: its GPUs are not known")
        add(held, _gpus_asked(j["tres_per_task"]), tasks)
    return sum(held.values()), held


def _gpus_asked(text) -> dict[str, int]:
    """GPUs by type in a `tres_per_*` string, which lists every TRES asked that way (`cpu=4` for
    --cpus-per-task, `gres/gpu:h100:1`, `gres/gpu=2`, 22.05's `gres:gpu:2`): the GPU entries only."""
    import re

    from slurmtools.slurm.tres import gpus_in, parse_tres

    out: dict[str, int] = {}
    for item in str(text or "").split(","):
        item = item.strip()
        name = re.split(r"[:=]", item, maxsplit=1)[0]
        if name not in ("gres/gpu", "gpu") and not item.startswith("gres:gpu"):
            continue
        got = parse_tres(item).gpus_by_type if "=" in item else gpus_in(item)
        for t, n in got.items():
            out[t] = out.get(t, 0) + n
    return out
