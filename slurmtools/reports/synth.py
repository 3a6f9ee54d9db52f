"""Realistic synthetic `sacct --parsable2 -D` dumps, for the benchmark and for tests that need volume.

Shapes follow what GPU clusters show: many 1-GPU jobs and few large ones, log-normal run times and waits that
grow with job size and shrink with tier priority, a weekly rhythm in submissions, a few percent of failures,
cancellations, timeouts and preemptions (a preempted run is followed by its rerun under the same JobIDRaw, as
`sacct -D` lists them), `.batch` and `.extern` steps, optionally job arrays (tasks `123_4` with their own
JobIDRaw, as sacct prints them), and a sprinkling of hostile job names. Deterministic for a given seed. `write_year` writes a dump too big
to hold in memory (a year of a 20,000-GPU site) in slices.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

HEADER = ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Eligible|Start|End|"
          "NodeList|NNodes|AllocTRES|ReqTRES|TRESUsageInAve|Cluster")

_TIERS = np.array(["production", "standard", "scavenger"])
_SIZES = np.array([1, 1, 1, 1, 2, 2, 4, 4, 8, 8, 16, 32])
_NAMES = np.array(["train", "eval", "bert-ft", "resnet50", "llm-pretrain", "sweep", "notebook", "infer",
                   "<script>alert(1)</script>", "data&prep"])


def generate(n_jobs: int, start: datetime, days: float, *, seed: int = 0, nodes: int = 128, gpus_per_node: int = 8,
             gpu_type: str = "h100", users: int = 200, accounts: int = 20, first_id: int = 1000,
             steps: bool = True, cluster: str = "lab", node_fmt: str = "gpu{:03d}", load: float = 0.7,
             account_names: list[str] | None = None, arrays: float = 0.0, now: datetime | None = None,
             header: bool = True) -> str:
    """The text of a dump with `n_jobs` jobs submitted over `days` days from `start`.

    Run times are scaled so the jobs fill about `load` of the nodes' GPU-hours (real clusters run 50-90% full).
    `arrays`: the share of jobs that are tasks of job arrays (in arrays of 8); `now`: when the dump is taken (runs
    still going then read RUNNING with End Unknown; default: the end of the span)."""
    rng = np.random.default_rng(seed)
    n = n_jobs
    t0 = np.datetime64(start, "s").astype(np.int64)
    span = int(days * 86400)
    submit = t0 + np.sort(rng.integers(0, span, n))
    # weekly rhythm: drop 40% of weekend submissions onto the following Monday
    dow = ((submit // 86400) + 3) % 7  # 1970-01-01 was a Thursday (3)
    weekend = (dow >= 5) & (rng.random(n) < 0.4)
    submit = np.where(weekend, submit + (7 - dow) * 86400, submit)
    tier_i = rng.choice(3, n, p=[0.2, 0.6, 0.2])
    size = _SIZES[rng.integers(0, len(_SIZES), n)]
    wait = (rng.lognormal(4.5, 1.6, n) * (1 + np.log2(size)) * np.array([0.3, 1.0, 3.0])[tier_i]).astype(np.int64)
    run = np.clip(rng.lognormal(7.5, 1.5, n), 10, 2 * 86400)
    scale = min(1.0, load * nodes * gpus_per_node * days * 86400 / float((run * size).sum()))
    run = np.clip(run * scale, 10, None).astype(np.int64)
    st = submit + wait
    en = st + run
    u = rng.integers(0, users, n)
    acct = u % accounts
    r = rng.random(n)
    state = np.select([r < 0.70, r < 0.80, r < 0.87, r < 0.92, r < 0.96], ["COMPLETED", "FAILED", "CANCELLED",
                      "TIMEOUT", "PREEMPTED"], "COMPLETED").astype(object)
    state[(tier_i == 0) & (state == "PREEMPTED")] = "COMPLETED"
    now = np.datetime64(now, "s").astype(np.int64) if now is not None else t0 + span
    running = en > now
    state[running] = "RUNNING"
    exit_code = np.where(state == "FAILED", "1:0", np.where(state == "CANCELLED", "0:15", "0:0"))
    nn = np.maximum(1, size // gpus_per_node)
    node_i = rng.integers(0, max(1, nodes - 4), n)
    node_i = node_i % np.maximum(1, nodes - nn + 1) + 1
    names = np.array([node_fmt.format(i) for i in range(nodes + 2)])
    from slurmtools.hostlist import compress

    nodelist = names[node_i].astype(object)
    combos = {}
    for i in np.flatnonzero(nn > 1):
        key = (int(node_i[i]), int(nn[i]))
        if key not in combos:
            combos[key] = compress([names[min(k, nodes)] for k in range(key[0], key[0] + key[1])])
        nodelist[i] = combos[key]
    ids = first_id + np.arange(n)
    cpu = size * 12
    tres = [f"billing={c},cpu={c},gres/gpu:{gpu_type}={g},gres/gpu={g},mem={g * 100}G,node={k}"
            for c, g, k in zip(cpu.tolist(), size.tolist(), nn.tolist())]
    req = [f"billing={c},cpu={c},gres/gpu:{gpu_type}={g},gres/gpu={g},mem={g * 100}G,node={k}"
           for c, g, k in zip(cpu.tolist(), size.tolist(), nn.tolist())]
    util = rng.beta(2, 1.2, n) * 100

    def fmt(sec):
        return pd.to_datetime(sec, unit="s").strftime("%Y-%m-%dT%H:%M:%S").to_numpy()

    name = _NAMES[rng.integers(0, len(_NAMES), n)]
    user = np.char.add("u", u.astype(str))
    account = (np.array(account_names)[u % len(account_names)] if account_names
               else np.char.add("acct", acct.astype(str)))
    qos = _TIERS[tier_i]
    sub_s, st_s, en_s = fmt(submit), fmt(st), fmt(en)
    en_s = np.where(running, "Unknown", en_s)
    ids_s = ids.astype(str)
    job_s = ids_s
    if arrays > 0:
        # array tasks: JobID names the array's first task and the task index, JobIDRaw stays the task's own id
        member = rng.random(n // 8 + 1)[np.arange(n) // 8] < arrays
        parent = ids - (np.arange(n) % 8)
        job_s = np.where(member, np.char.add(np.char.add(parent.astype(str), "_"), (ids - parent).astype(str)),
                         ids_s)
    base = pd.DataFrame({
        "JobID": job_s, "JobIDRaw": ids_s, "JobName": name, "User": user, "Account": account, "Partition": "gpu",
        "QOS": qos, "State": state, "ExitCode": exit_code, "Submit": sub_s, "Eligible": sub_s, "Start": st_s,
        "End": en_s, "NodeList": nodelist, "NNodes": nn, "AllocTRES": tres, "ReqTRES": req, "TRESUsageInAve": "",
        "Cluster": cluster})
    frames = [base]
    pre = state == "PREEMPTED"
    if pre.any():
        # the rerun of each preempted job: same ids, eligible after Slurm's ~120 s requeue hold
        re_st = en[pre] + 120 + rng.integers(0, 600, pre.sum())
        re_en = re_st + run[pre]
        rerun = base[pre].copy()
        rerun["State"] = np.where(re_en > now, "RUNNING", "COMPLETED")
        rerun["Submit"] = rerun["Eligible"] = fmt(en[pre] + 120)
        rerun["Start"], rerun["End"] = fmt(re_st), np.where(re_en > now, "Unknown", fmt(re_en))
        frames.append(rerun)
    if steps:
        batch = base.copy()
        batch["JobID"], batch["JobIDRaw"] = np.char.add(job_s, ".batch"), np.char.add(ids_s, ".batch")
        batch["JobName"] = "batch"
        batch["User"] = batch["QOS"] = batch["Partition"] = ""
        # the batch step holds its host's share of the job (one node), and Slurm's gres/gpuutil is the batch
        # task's SM use summed over those GPUs: `util` percent of each
        g1 = np.minimum(size, gpus_per_node)
        batch["AllocTRES"] = [f"cpu={c},gres/gpu:{gpu_type}={g},gres/gpu={g},mem={g * 100}G,node=1"
                              for c, g in zip((g1 * 12).tolist(), g1.tolist())]
        batch["TRESUsageInAve"] = [f"cpu=00:01:00,gres/gpumem={int(x * 800)}M,gres/gpuutil={x * g:.0f},mem=2G"
                                   for x, g in zip(util.tolist(), g1.tolist())]
        ext = base.copy()
        ext["JobID"], ext["JobIDRaw"] = np.char.add(job_s, ".extern"), np.char.add(ids_s, ".extern")
        ext["JobName"] = "extern"
        ext["User"] = ext["QOS"] = ext["Partition"] = ""
        frames += [batch, ext]
    out = pd.concat(frames, ignore_index=True)
    buf = out.to_csv(sep="|", index=False, header=header, lineterminator="\n", quoting=3, escapechar=None)
    return buf


def write(path: str | Path, n_jobs: int, start: datetime, days: float, **kw) -> Path:
    p = Path(path)
    p.write_text(generate(n_jobs, start, days, **kw))
    return p


def write_year(path: str | Path, n_jobs: int, start: datetime, days: float, *, slice_jobs: int = 250_000,
               progress=None, **kw) -> Path:
    """A dump too big for memory, written in slices of `slice_jobs` jobs, each over its share of the days, with
    ids running on and one `now` (the end of the whole span) for all. `progress(done_jobs, n_jobs)` per slice."""
    from datetime import timedelta

    p = Path(path)
    tmp = p.with_name(p.name + ".part")
    seed = kw.pop("seed", 0)
    first_id = kw.pop("first_id", 1000)
    now = start + timedelta(days=days)
    slices = max(1, -(-n_jobs // slice_jobs))
    with tmp.open("w") as fh:
        for i in range(slices):
            k = n_jobs * (i + 1) // slices - n_jobs * i // slices
            s0 = start + timedelta(days=days * i / slices)
            fh.write(generate(k, s0, days / slices, seed=seed + i, first_id=first_id + n_jobs * i // slices,
                              now=now, header=i == 0, **kw))
            if progress is not None:
                progress(n_jobs * (i + 1) // slices, n_jobs)
    tmp.replace(p)
    return p
