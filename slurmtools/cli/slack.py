"""`slurmtools slack`: the cluster's slack for the caller's partition and tier, as a mode; `--refresh --out PATH`
writes the cached file that training code inside jobs reads. Also the sizing of `slurmtools submit --fill-slack`.

Heavy imports happen inside the functions only.
"""

from __future__ import annotations

from typing import Optional

import typer

from slurmtools.cli.common import JsonOpt, SiteOpt, fail, print_json


def register(app: typer.Typer) -> None:
    app.command("slack")(slack)


def slack(partition: Optional[str] = typer.Option(None, "--partition", help="Partition (default: "
                                                  "$SLURM_JOB_PARTITION, else the site's default)"),
          tier: Optional[str] = typer.Option(None, "--tier", help="Tier (QoS) (default: $SLURM_JOB_QOS, else the "
                                                                  "site's default tier)"),
          source: str = typer.Option("auto", "--source", help="auto (Slurm when its commands are here, else the "
                                                              "cached file), slurm, or cache"),
          cache: Optional[str] = typer.Option(None, "--cache", help="The cached file to read (default: "
                                              "$SLURMTOOLS_SLACK_CACHE, else the site's [slack] cache_file)"),
          state: Optional[str] = typer.Option(None, "--state", help="Keep the hysteresis across calls in this JSON "
                                                                    "file (a cron job's mode); without it each call "
                                                                    "is a first observation"),
          refresh: bool = typer.Option(False, "--refresh", help="Ask Slurm for every partition and tier and write "
                                                                "the cached file (atomically) to --out"),
          out: Optional[str] = typer.Option(None, "--out", help="With --refresh: where to write (default: the "
                                                                "site's [slack] cache_file)"),
          force: bool = typer.Option(False, "--force", help="With --refresh: poll even when the file is younger "
                                                            "than the site's poll_interval"),
          site_path: Optional[str] = SiteOpt, json_out: bool = JsonOpt) -> None:
    """The slack signal (idle GPUs, pending demand ahead, preemption chance, price window) and its mode."""
    from slurmtools.cli.common import load_site

    if source not in ("auto", "slurm", "cache"):
        fail(f"--source: expected auto, slurm or cache, got {source!r}")
    if out is not None and not refresh:
        fail("--out: only with --refresh (the cached file is written by a refresh)")
    site = load_site(site_path)
    if refresh:
        _refresh(site, out or site.slack.cache_file, force, json_out)
        return
    import os

    part = partition or os.environ.get("SLURM_JOB_PARTITION") or site.default_partition.name
    tr = tier or os.environ.get("SLURM_JOB_QOS") or site.default_tier
    if part not in site.partitions:
        fail(f"--partition: unknown partition {part!r} (known: {', '.join(site.partitions)})")
    if tr not in site.tiers:
        fail(f"--tier: unknown tier {tr!r} (known: {', '.join(site.tiers)})")
    from slurmtools.slack import Slack

    prev, polled_at = _load_state(state) if state else (None, None)
    s = Slack(partition=part, tier=tr, source=source, cache=cache, settings=site.slack, site=site, state=prev)
    import time

    if prev is not None and polled_at is not None and time.time() - polled_at < site.slack.poll_interval:
        d = {"mode": prev.mode, "score": prev.last_score, "window": None, "source": s.source,
             "note": f"last poll {time.time() - polled_at:.0f}s ago, under poll_interval "
                     f"{site.slack.poll_interval}s: not polled", "signal": None, "state": prev.to_dict(),
             "settings": site.slack.to_dict()}
    else:
        s.poll(force=True)
        d = s.describe()
        if state:
            _save_state(state, s.state, time.time())
    if d["signal"] is None and prev is None:  # nothing known: a script must not take the default mode for a reading
        fail(f"no slack signal for partition {part}, tier {tr}: {d['note']}", code=4)
    d = {"partition": part, "tier": tr, **d}
    if json_out:
        print_json(d)
        return
    typer.echo(_text(d, site))


def _text(d: dict, site) -> str:
    score = "unknown" if d["score"] is None else f"{d['score']:.2f}"
    lines = [f"slack for partition {d['partition']}, tier {d['tier']}: mode {d['mode']} (score {score})"]
    g = d["signal"]
    if g:
        pre = site.tiers[d["tier"]].preempted_by
        lines.append(f"  idle GPUs {g['idle_gpus']} of {g['total_gpus']}; pending demand ahead (tiers of this "
                     f"priority or higher) {g['demand_ahead']} GPUs")
        if pre:
            lines.append(f"  preemption chance {g['preempt_chance']:.2f}: preemptors ({', '.join(pre)}) ask for "
                         f"{g['preemptor_demand']} GPUs; {g['idle_gpus']} idle, {g['exposed_lower_gpus']} held by "
                         f"lower tiers they take first, {g['exposed_same_gpus']} by this tier")
        else:
            lines.append(f"  preemption chance 0: tier {d['tier']} is never preempted")
    lines.append(f"  price window: {d['window'] or 'none open'}")
    lines.append(f"  source: {d['note']}")
    lines.append(f"  hysteresis: {d['state']['reason']}")
    return "\n".join(lines)


def _load_state(path: str):
    import json

    from slurmtools.slack import ModeState, SlackError

    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read(1 << 20))
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as e:
        fail(f"--state: {path}: cannot read the saved mode state: {getattr(e, 'strerror', None) or e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("state"), dict):
        fail(f"--state: {path}: not a slack mode state (expected {{\"state\": {{...}}, \"polled_at\": ...}})")
    try:
        return ModeState.from_dict(doc["state"]), doc.get("polled_at")
    except (TypeError, SlackError) as e:
        fail(f"--state: {path}: {e}")


def _save_state(path: str, st, polled_at: float) -> None:
    import json

    from slurmtools.checkpoint import atomic_write

    body = json.dumps({"state": st.to_dict(), "polled_at": round(polled_at, 3)}).encode()
    try:
        atomic_write(path, lambda f: f.write(body), mode=0o644)
    except OSError as e:
        fail(f"--state: cannot write {path}: {e.strerror or e}")


def _refresh(site, out: str, force: bool, json_out: bool) -> None:
    import time

    from slurmtools.cli.common import backend
    from slurmtools.slack import SlackError, cache_document, measure_all, read_cache, write_cache

    age = None
    try:
        age = time.time() - read_cache(out)["taken_at"]
    except SlackError:
        pass  # missing or unreadable: write a fresh one
    if age is not None and 0 <= age < site.slack.poll_interval and not force:
        msg = f"{out} is {age:.0f}s old, under poll_interval {site.slack.poll_interval}s: Slurm not asked"
        if json_out:
            print_json({"written": None, "skipped": True, "reason": msg, "age_s": round(age, 1)})
        else:
            typer.echo(msg)
        return
    b = backend()
    signals, taken = measure_all(site, b)
    version = ""
    try:
        version = "{}.{:02d}.{}".format(*b.version())
    except Exception:  # the version is informative only; the signal stands without it
        pass
    doc = cache_document(signals, site.slack, taken, cluster=site.cluster_name, slurm=version,
                         default_partition=site.default_partition.name, default_tier=site.default_tier)
    path = write_cache(out, doc)
    if json_out:
        print_json({"written": str(path), "skipped": False, "taken_at": doc["taken_at"],
                    "signals": doc["signals"]})
        return
    typer.echo(f"wrote {len(signals)} signal(s) (every partition x tier) to {path}, taken {doc['taken_at_iso']}")


# ------------------------------------------------------------------------------------------------ --fill-slack


def check_fill_options(gpus_per_task: int, max_tasks: Optional[int], **given) -> None:
    """Refuse, before anything is asked of Slurm, the options --fill-slack decides itself (`given`: the submit
    options by name, None or empty when not given)."""
    for name in ("gpus", "nodes", "gpus_per_node", "sweep", "cpus", "ntasks"):
        if given.get(name):
            fail(f"--{name.replace('_', '-')}: not with --fill-slack (it sizes the array itself: --gpus-per-task, "
                 "--max-tasks)")
    if given.get("template") not in (None, "array"):
        fail(f"--template: --fill-slack submits the array template, not {given['template']!r}")
    if gpus_per_task < 1:
        fail(f"--gpus-per-task: expected at least 1, got {gpus_per_task}")
    if max_tasks is not None and max_tasks < 1:
        fail(f"--max-tasks: expected at least 1, got {max_tasks}")


def fill_slack_request(req, site, state, gpus_per_task: int, max_tasks: Optional[int]):
    """The array request `submit --fill-slack` makes: the lowest (scavenger) tier, or the preemptible tier named,
    one task of `gpus_per_task` GPUs per slot of idle GPUs left after the pending demand ahead. Returns the
    request (None when nothing fits) and the facts it rests on."""
    import time
    from dataclasses import replace

    from slurmtools.planner.plan import _partition
    from slurmtools.slack import fill_size, measure

    tier = site.tiers.get(req.tier) if req.tier else site.lowest_tier
    if tier is None:
        fail(f"--tier: unknown tier {req.tier!r} (known: {', '.join(site.tiers)})")
    if not tier.preemptible:
        fail(f"--tier: --fill-slack needs a preemptible tier so the filling jobs yield; {tier.name} is never "
             f"preempted (preemptible: {', '.join(t.name for t in site.tiers.values() if t.preemptible) or 'none'})")
    part = _partition(replace(req, tier=tier.name), site)
    nodes = state.backend.nodes()
    per_node = max((n.gpus for n in nodes if part.name in n.partitions), default=0)
    if gpus_per_task > per_node:
        fail(f"--gpus-per-task: {gpus_per_task} is more than a host of partition {part.name} has ({per_node})")
    sig = measure(nodes, state.jobs, site.tiers, part.name, tier.name, time.time())
    n = fill_size(sig, gpus_per_task, max_tasks)
    capped = max_tasks is not None and n == max_tasks
    facts = {"partition": part.name, "tier": tier.name, "idle_gpus": sig.idle_gpus, "demand_ahead": sig.demand_ahead,
             "gpus_per_task": gpus_per_task, "max_tasks": max_tasks, "array_size": n,
             "why": f"{sig.idle_gpus} idle GPU(s) on partition {part.name}, {sig.demand_ahead} asked for by pending "
                    f"jobs of tier {tier.name}'s priority or higher: {n} task(s) of {gpus_per_task} GPU(s)"
                    + (f" (capped by --max-tasks {max_tasks})" if capped else "")}
    if n == 0:
        return None, facts
    return replace(req, tier=tier.name, partition=part.name, template="array", gpus=gpus_per_task, nodes=1,
                   sweep=tuple(() for _ in range(n))), facts
