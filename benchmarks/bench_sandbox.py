"""Sandbox time acceleration, measured (issue 14): one recorded history replayed through the example site at 1x
and at several speed-ups on the real Slurm lab; per-job start times compared with the 1x replay's.

    sudo .venv/bin/python benchmarks/bench_sandbox.py [--slurm 22.05|25.11] [--speedups 5,10,30,60] [--jobs 60]
                                                      [--minutes 12] [--median-run 5] [--clock scaled|faketime]

The history is `slurmtools sandbox example-trace`'s mix (seeded), with runs of minutes (median --median-run) so
that the 1x replay takes about --minutes x 1.5. What limits accuracy is how long a scaled job runs compared with
Slurm's fixed latencies (launch, the scheduler's one-second clocks), so the result is stated both as the speed-up
and as the scaled median run time it leaves: a history whose jobs run 12x longer holds the same accuracy at a 12x
larger speed-up. Goal: median start error under 2% of the replayed span, and the preemptions in the same order.
Since two 1x replays of one history do not make the same preemptions either, `--floor N` replays 1x N more times
and `--phases 7,13` replays 1x with the first submission that many seconds later (slurmctld's periodic passes
then fall elsewhere in the history); each speed-up is also judged against that spread: starts within 2%, no
reordering of the preemptions it shares with the first 1x replay, a preemption count some 1x replay made, and no
more differing preempted jobs than a 1x replay shows. `--clock faketime` makes the speed-ups with libfaketime
instead of scaling (`slurmtools/sandbox/clocks.py`). Prints a table and the largest speed-up (and smallest scaled
median run) that met each, then each replay's report figures (preemptions, GPU-hours lost, utilisation, each
tier's median and p90 wait) against the range of the 1x replays. Lab folders
under <repo>/.sandbox-bench, port offset 7200; about 30 minutes on 2 cores, plus the 1x span per --floor.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slurmtools.sandbox import outcome as oc  # noqa: E402
from slurmtools.sandbox.example_trace import generate  # noqa: E402
from slurmtools.sandbox.lab import replay  # noqa: E402
from slurmtools.sandbox.submission import Checkpointing  # noqa: E402
from slurmtools.sandbox.clocks import CLOCKS, check  # noqa: E402
from slurmtools.sandbox.trace import load_trace  # noqa: E402
from slurmtools.site import load_site  # noqa: E402
from slurmtools.slurm.commands import parse_sacct  # noqa: E402
from slurmtools.slurm.releases import release_for  # noqa: E402

GOAL_PCT = 2.0


def preemption_order(res: oc.ReplayResult) -> list[str]:
    """Preempted jobs in the order of their first start (the runs' own order is what sacct keeps)."""
    return [j.key for j in sorted((j for j in res.jobs if j.preemptions), key=lambda j: (j.start or 0, j.key))]


def compare(ref: oc.ReplayResult, res: oc.ReplayResult) -> dict:
    rs = {j.key: j.start for j in ref.jobs if j.start is not None}
    errs = [abs(j.start - rs[j.key]) for j in res.jobs if j.start is not None and j.key in rs]
    span = ref.span_h * 3600
    a, b = preemption_order(ref), preemption_order(res)
    common = [k for k in a if k in b]
    pos = {k: i for i, k in enumerate(b)}
    swapped = sum(1 for i in range(len(common)) for k in range(i + 1, len(common))
                  if pos[common[i]] > pos[common[k]])
    return {"jobs": len(errs), "median_err_s": statistics.median(errs) if errs else None,
            "p90_err_s": statistics.quantiles(errs, n=10)[-1] if len(errs) > 1 else None,
            "median_err_pct": 100 * statistics.median(errs) / span if errs and span else None,
            "preempted_ref": len(a), "preempted": len(b), "same_preempted": set(a) == set(b),
            "preempted_diff": len(set(a) ^ set(b)), "swapped_pairs": swapped, "preempted_jobs": b}


def report_figures(res: oc.ReplayResult) -> dict[str, float]:
    """The figures an admin reads in the sandbox's report: preemptions, GPU-hours lost to them, utilisation, and
    each tier's median and p90 wait (hours)."""
    o = res.overall
    out = {"preemptions": float(o.preemptions), "GPU-h lost": o.gpu_hours_lost, "utilisation": o.utilisation or 0.0}
    for t in sorted(res.by_tier, key=lambda t: t.group):
        out[f"{t.group} median h"] = t.wait_median_h or 0.0
        out[f"{t.group} p90 h"] = t.wait_p90_h or 0.0
    return out


def print_report_figures(runs: dict, ones: list[str]) -> None:
    """Each replay's report figures; an accelerated replay's figure outside the range of the 1x replays (`ones`)
    is starred, with how far outside, as a share of the first 1x replay's value."""
    figs = {label: report_figures(res) for label, (_, res) in runs.items()}
    names = list(figs["x1"])
    lo = {n: min(figs[k][n] for k in ones) for n in names}
    hi = {n: max(figs[k][n] for k in ones) for n in names}
    print(f"\nThe report's figures (hours are real hours; * outside the range of the {len(ones)} 1x replay(s), "
          f"with the distance to it as % of x1's value):")
    print(f"{'figure':>22} " + " ".join(f"{k:>15}" for k in figs))
    outside = total = 0
    for n in names:
        cells = []
        for label, f in figs.items():
            v = f[n]
            cell = f"{v:.3f}" if v < 100 else f"{v:.0f}"
            if label not in ones:
                total += 1
                off = max(lo[n] - v, v - hi[n], 0.0)
                if off > 1e-9:
                    outside += 1
                    cell += f"*{100 * off / figs['x1'][n]:.0f}%" if figs["x1"][n] else "*"
            cells.append(f"{cell:>15}")
        print(f"{n:>22} " + " ".join(cells))
    print(f"accelerated replays' figures outside the 1x range: {outside} of {total}; 1x range over {', '.join(ones)}")


def _saved(d: Path, scale):
    """A replay's bookkeeping as `lab.replay` kept it (replay.json, sacct.txt)."""
    import json

    from slurmtools.sandbox.lab import ReplayRun

    k = json.loads((d / "replay.json").read_text())
    k.pop("scale", None)
    return ReplayRun(scale=scale, sacct_text=(d / "sacct.txt").read_text(), **k)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slurm", default="22.05")
    ap.add_argument("--speedups", default="5,10,30,60")
    ap.add_argument("--jobs", type=int, default=60)
    ap.add_argument("--minutes", type=float, default=12.0)
    ap.add_argument("--median-run", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--clock", default="scaled", choices=list(CLOCKS),
                    help="How the speed-ups are made (the 1x replays are the same either way); with faketime the "
                         "accelerated replays are labelled x5-faketime, ..., so both kinds can be kept side by side; "
                         "--speedups 1 --clock faketime replays on libfaketime at real speed (x1-faketime): what the "
                         "fast clock's mechanics alone change, against the plain 1x replay")
    ap.add_argument("--floor", type=int, nargs="?", const=1, default=0,
                    help="Replay at 1x this many more times (folders x1-again, x1-again2, ...) and compare each with "
                         "the first: the scheduler's own run-to-run spread, against which the preemption goal is "
                         "judged")
    ap.add_argument("--phases", default="", help="Also replay 1x with the first submission this many seconds later "
                                                 "after the lab is up (e.g. 7,13; folders x1-phase7, ...): slurmctld's "
                                                 "periodic passes (backfill every 30 s) then fall elsewhere in the "
                                                 "history, and these replays count in the 1x spread")
    ap.add_argument("--within-second", type=int, default=0, metavar="N",
                    help="Also replay 1x N more times with each job submitted at a random point of its recorded "
                         "second (sacct keeps whole seconds): the spread the history itself leaves open")
    ap.add_argument("--port-offset", type=int, default=7200, help="The sandbox labs' port offset (two runs side "
                                                                       "by side need two)")
    ap.add_argument("--dir", default=str(REPO / ".sandbox-bench"), help="Where the replays are kept (and read "
                                                                         "from with --saved)")
    ap.add_argument("--only", default=None, help="With --saved: replay only these labels now (e.g. x1-again), "
                                                 "read the others from the kept replays")
    ap.add_argument("--saved", action="store_true", help="Compare the replays kept in .sandbox-bench by the last "
                                                          "run (its replay.json and sacct.txt) instead of replaying")
    a = ap.parse_args()
    site_path = REPO / "site_configs/example/site.toml"
    site = load_site(site_path)
    raw = tomllib.loads(site_path.read_text())
    work = Path(a.dir).resolve()   # the lab runs its daemons from inside it
    work.mkdir(exist_ok=True)
    tfile = work / "history.txt"
    if not a.saved:
        tfile.write_text(generate(site, a.jobs, a.minutes / 60, seed=a.seed, load=1.6, run_median_min=a.median_run))
    trace = load_trace(str(tfile))
    release = release_for(a.slurm)
    limits = [j.limit_s for j in trace.jobs]
    runs = {}
    phases = [float(p) for p in a.phases.split(",") if p.strip()]
    # (label, speed-up, clock): the 1x references on the wall clock; --speedups on --clock, 1 included (on faketime
    # that is libfaketime's own mechanics at rate 1, against the plain 1x replay)
    plan = [("x1", 1.0, "scaled")] + [(f"x1-again{i + 1 if i else ''}", 1.0, "scaled") for i in range(a.floor)] + \
        [(f"x1-phase{p:g}", 1.0, "scaled") for p in phases] + \
        [(f"x1-second{i + 1}", 1.0, "scaled") for i in range(a.within_second)] + \
        [(f"x{float(x):g}" + ("" if a.clock == "scaled" else f"-{a.clock}"), float(x), a.clock)
         for x in a.speedups.split(",") if x.strip()]
    if len({label for label, _, _ in plan}) < len(plan):
        ap.error("--speedups: 1 on the scaled clock is the x1 reference itself")
    only = set(a.only.split(",")) if a.only else None
    for label, s, clock in plan:
        scale = check(clock, s, limits, site)
        t0 = time.time()
        if a.saved and (only is None or label not in only):
            run = _saved(work / label, scale)
        else:
            lead_in = 1.0 + (float(label.removeprefix("x1-phase")) if label.startswith("x1-phase") else 0.0)
            seed = int(label.removeprefix("x1-second")) if label.startswith("x1-second") else None
            # the 1x replays meet slurmctld's fair-share passes where the fast clock's accelerated ones do
            run = replay(trace, site, raw, work / label, scale, release, a.port_offset, Checkpointing(), label,
                         lead_in_s=lead_in, within_second_seed=seed,
                         align_to_priority_pass=True if a.clock == "faketime" else None)
        res = oc.outcome(trace, run, parse_sacct(run.sacct_text, label))
        runs[label] = (s, res)
        print(f"replayed {label} in {time.time() - t0:.0f} s: {res.overall.finished}/{res.overall.jobs} finished, "
              f"{res.overall.preemptions} preemptions, span {res.span_h * 60:.1f} min", flush=True)
    ref = runs["x1"][1]
    med_run = statistics.median(j.run_s for j in trace.jobs)
    print(f"\nSlurm {a.slurm}, {len(trace.jobs)} jobs, history median run {med_run / 60:.1f} min, 1x span "
          f"{ref.span_h * 60:.1f} min, {ref.overall.preemptions} preemptions at 1x")
    again = [label for label in runs if label.startswith(("x1-again", "x1-phase", "x1-second"))]
    spread = [compare(ref, runs[label][1]) for label in again]
    floor_pct = max((c["median_err_pct"] or 0 for c in spread), default=None)
    floor_diff = max((c["preempted_diff"] for c in spread), default=None)
    counts = [len(preemption_order(ref))] + [c["preempted"] for c in spread]   # preemptions per 1x replay
    print(f"{'replay':>9} {'scaled median run s':>20} {'median err s':>13} {'p90 err s':>10} {'median err %':>13} "
          f"{'preempted (1x)':>15} {'differ':>7} {'swapped':>8} {'goal':>5} {'in 1x spread':>13}  preempted jobs")
    print(f"{'x1':>9} {med_run:>20.1f} {'':>13} {'':>10} {'':>13} {len(preemption_order(ref)):>6} {'':>8} {'':>7} "
          f"{'':>8} {'':>5} {'':>13}  {' '.join(preemption_order(ref)) or '-'}")
    best = best_spread = None
    for label, (s, res) in runs.items():
        if label == "x1":
            continue
        c = compare(ref, res)
        # the goal as the issue writes it: starts within 2% of the span at the median, and the same preemptions in
        # the same order (a preemption that does not happen at all is a change of the scheduler's decisions too)
        ok = (c["median_err_pct"] is not None and c["median_err_pct"] < GOAL_PCT and c["swapped_pairs"] == 0
              and c["same_preempted"])
        # judged against the scheduler's own run-to-run spread (the 1x replays among themselves): starts within 2%,
        # no reordering of the preemptions both made, as many preemptions as some 1x replay made, and no more
        # differing preempted jobs than a 1x replay shows
        in_spread = (floor_diff is not None and c["median_err_pct"] is not None and c["median_err_pct"] < GOAL_PCT
                     and c["swapped_pairs"] == 0 and min(counts) <= c["preempted"] <= max(counts)
                     and c["preempted_diff"] <= floor_diff)
        if ok and s > 1:
            best, best_label = s, label
        if in_spread and s > 1:
            best_spread, spread_label = s, label
        print(f"{label:>9} {med_run / s:>20.1f} {c['median_err_s'] or 0:>13.1f} {c['p90_err_s'] or 0:>10.1f} "
              f"{c['median_err_pct'] or 0:>13.2f} {c['preempted']:>6} ({c['preempted_ref']:>3}) "
              f"{c['preempted_diff']:>7} {c['swapped_pairs']:>8} {'met' if ok else 'no':>5} "
              f"{'-' if floor_diff is None or s == 1 else ('yes' if in_spread else 'no'):>13}  "
              f"{' '.join(c['preempted_jobs']) or '-'}")
    print_report_figures(runs, ["x1", *again])
    if floor_pct is not None:
        print(f"\n1x against 1x ({len(again)} more replay(s)): median start error up to {floor_pct:.2f}% of the span, "
              f"{min(counts)}-{max(counts)} preemptions, up to {floor_diff} preempted job(s) differing")
    if best:
        print(f"largest speed-up meeting the goal as written: {best:g}x (scaled median run {med_run / best:.0f} s); "
              f"ratio to goal: median error {compare(ref, runs[best_label][1])['median_err_pct']:.2f}% / {GOAL_PCT}%")
    else:
        print("no speed-up met the goal as written (same preempted jobs in the same order)")
    if best_spread:
        print(f"largest speed-up within the 1x spread: {best_spread:g}x (scaled median run "
              f"{med_run / best_spread:.0f} s); median error "
              f"{compare(ref, runs[spread_label][1])['median_err_pct']:.2f}% / {GOAL_PCT}%")
    elif floor_diff is not None:
        print("no speed-up stayed within the 1x spread")
    return 0 if (best or best_spread) else 1


if __name__ == "__main__":
    sys.exit(main())
