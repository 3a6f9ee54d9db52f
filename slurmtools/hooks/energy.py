"""Each GPU's energy over one job run, from NVML's total energy counter (mJ since the driver loaded).

Why two reads: the counter is cumulative, so a run's energy is its value at the run's end (the epilog) less its
value at the run's start. The start value comes only from the prolog's start mark of that same run: where the
prolog did not run (Slurm 22.05 skips it on some quick restarts) or its mark is of another run, the energy is
recorded as unknown with the reason, never estimated. An end below the start means the counter was reset (driver
reload, GPU reset) between the two: unknown, never negative. A GPU without the counter (before Volta) answers
Not Supported: unknown.

Mark format: the prolog appends one token `e=<gpu>:<mJ>,<gpu>:<mJ>` to its start mark (`-` for a GPU it could not
read); marks without the token (older prologs, jobs without GPUs) read as "no energy at the start".
Sources: NVML (`read_nvml`) or, in the Slurm lab, the root-owned fault file (`read_fake`, `hooks.labfake`), whose
fake GPUs draw a fixed power. Standard library only: the hooks import it at every GPU job's start and end.
"""

from __future__ import annotations

from slurmtools.hooks.nvml import is_not_supported, job_handles

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

MARK_TOKEN = "e="
NOT_SUPPORTED = "the GPU has no energy counter (NVML: Not Supported)"


def read_nvml(nv: ModuleType, wanted: tuple[int, ...] | None) -> dict[int, int | str]:
    """GPU (Slurm's index: the device minor) -> counter in mJ, or why it could not be read; only `wanted` GPUs
    (None: all)."""
    out: dict[int, int | str] = {}
    for minor, h in job_handles(nv, wanted):
        try:
            out[minor] = int(nv.nvmlDeviceGetTotalEnergyConsumption(h))
        except nv.NVMLError as e:
            out[minor] = NOT_SUPPORTED if is_not_supported(nv, e) else f"NVML: {e}"
    return out


def read_fake(spec: dict, wanted: tuple[int, ...] | None, now: float) -> dict[int, int | str]:
    """The lab's fake GPUs: each draws `power_w` watts (per GPU in `faults`, else the node's), so its counter is
    power x now (mJ); `"energy": "unsupported"` in a GPU's faults makes it a GPU without the counter. A node whose
    entry states no power has no counter on any GPU."""
    from slurmtools.hooks import labfake

    out: dict[int, int | str] = {}
    count = int(spec.get("count", 8))
    for i in range(count) if wanted is None else [g for g in wanted if 0 <= g < count]:
        f = labfake.gpu_faults(spec, i)
        power = f.get("power_w", spec.get("power_w"))
        if f.get("energy") == "unsupported" or not isinstance(power, (int, float)) or isinstance(power, bool):
            out[i] = NOT_SUPPORTED
        else:
            out[i] = int(round(power * now * 1000))
    return out


def mark_token(counters: dict[int, int | str]) -> str:
    """`e=0:123,1:-` for the start mark ('-': not read); "" when there is no GPU to note."""
    if not counters:
        return ""
    return MARK_TOKEN + ",".join(f"{g}:{v if isinstance(v, int) else '-'}" for g, v in sorted(counters.items()))


def parse_mark(tokens: list[str]) -> dict[int, int | None] | None:
    """The counters of a start mark's tokens after "start restarts"; None when the mark has none (an older prolog,
    a job without GPUs) or it is unreadable."""
    for tok in tokens:
        if not tok.startswith(MARK_TOKEN):
            continue
        out: dict[int, int | None] = {}
        for part in tok[len(MARK_TOKEN):].split(","):
            g, sep, v = part.partition(":")
            if not sep or not (g.isascii() and g.isdigit()) or len(g) > 4:
                return None
            if v == "-":
                out[int(g)] = None
            elif v.isascii() and v.isdigit() and len(v) < 20:
                out[int(g)] = int(v)
            else:
                return None
        return out
    return None


def deltas(gpus: tuple[int, ...] | None, start: dict[int, int | None] | None, end: dict[int, int | str],
           no_start_why: str) -> tuple[list[dict], float | None, str | None]:
    """(per GPU {gpu, start_mj, end_mj, energy_j, why}, the run's total J or None, why the total is unknown).

    `start` None: the run's start counters are unknown, `no_start_why` says why (no prolog mark of this run).
    The total is known only when every GPU's energy is."""
    wanted = sorted(gpus) if gpus is not None else sorted(end)
    per: list[dict] = []
    reasons: list[str] = []
    for g in wanted:
        s = start.get(g) if start is not None else None
        e = end.get(g)
        row = {"gpu": g, "start_mj": s, "end_mj": e if isinstance(e, int) else None, "energy_j": None, "why": None}
        if start is None:
            why = no_start_why
        elif g not in start:
            why = "the prolog's mark has no counter for this GPU"
        elif s is None:
            why = "the prolog could not read the counter"
        elif isinstance(e, str):
            why = e
        elif e is None:
            why = "GPU not visible to NVML at the run's end"
        elif e < s:
            why = "the counter went backwards (reset between the run's start and end)"
        else:
            why = None
            row["energy_j"] = (e - s) / 1000.0
        row["why"] = why
        if why and why not in reasons:
            reasons.append(why)
        per.append(row)
    if not per:
        return per, None, "no GPU read"
    if reasons:
        return per, None, "; ".join(reasons)
    return per, sum(r["end_mj"] - r["start_mj"] for r in per) / 1000.0, None
