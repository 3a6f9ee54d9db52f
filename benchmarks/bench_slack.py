"""What following the cluster's slack costs a training process, measured side by side in one run (ratios):

1. importing `slurmtools.slack` + `slurmtools.slack_loop` in a fresh interpreter, against importing
   `slurmtools.checkpoint` (goal: at most 1.2x) and `python -c pass`;
2. `SlackLoop.step()` between boundaries, per step, against `Checkpointer.should_stop()` (goal: at most 3x);
3. one poll of the cached file (read, find the signal, score, hysteresis) against a bare `json.load` of the same
   file (goal: at most 3x), for a site of 16 partitions x 3 tiers.

    python benchmarks/bench_slack.py [--rounds 30]

Needs no Slurm: the cached file is written by the library itself.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def spawn(code: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(REPO))
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()

    # 1. imports, interleaved so machine noise hits all alike
    codes = {"python -c pass": "pass", "import slurmtools.checkpoint": "import slurmtools.checkpoint",
             "import slurmtools.slack, slack_loop": "import slurmtools.slack, slurmtools.slack_loop"}
    times: dict[str, list[float]] = {k: [] for k in codes}
    for _ in range(a.rounds):
        for k, c in codes.items():
            times[k].append(spawn(c))
    med = {k: statistics.median(v) for k, v in times.items()}
    print("imports (median of fresh interpreters):")
    for k, v in med.items():
        print(f"  {k:40} {v * 1000:7.1f} ms")
    ratio = med["import slurmtools.slack, slack_loop"] / med["import slurmtools.checkpoint"]
    print(f"  RATIO slack+slack_loop / checkpoint: {ratio:.2f}x (goal <= 1.2x); "
          f"/ python -c pass: {med['import slurmtools.slack, slack_loop'] / med['python -c pass']:.2f}x")

    from slurmtools.checkpoint import Checkpointer
    from slurmtools.slack import Slack, SlackSettings, SlackSignal, cache_document, write_cache
    from slurmtools.slack_loop import SlackLoop

    with tempfile.TemporaryDirectory() as td:
        cache = Path(td) / "slack.json"
        now = time.time()
        sigs = [SlackSignal(partition=f"p{i}", tier=t, idle_gpus=64, total_gpus=128, demand_ahead=8,
                            preemptor_demand=8, exposed_lower_gpus=0, exposed_same_gpus=16, preempt_chance=0.0,
                            taken_at=now) for i in range(16) for t in ("production", "standard", "scavenger")]
        write_cache(cache, cache_document(sigs, SlackSettings(poll_interval=1), now, default_partition="p7",
                                          default_tier="scavenger"))

        # 2. per-step cost between boundaries
        ck = Checkpointer(Path(td) / "ck", install=False)
        loop = SlackLoop(Slack(source="cache", cache=cache), every=10**9, path=Path(td) / "w.json")
        loop.step(0)
        n = 200_000
        per = {"Checkpointer.should_stop()": [], "SlackLoop.step()": []}
        for _ in range(5):
            t = time.perf_counter()
            for _s in range(1, n):
                ck.should_stop()
            per["Checkpointer.should_stop()"].append((time.perf_counter() - t) / n)
            t = time.perf_counter()
            for s in range(1, n):
                loop.step(s)
            per["SlackLoop.step()"].append((time.perf_counter() - t) / n)
        pm = {k: statistics.median(v) for k, v in per.items()}
        print("per training step, between boundaries:")
        for k, v in pm.items():
            print(f"  {k:40} {v * 1e9:7.0f} ns")
        print(f"  RATIO SlackLoop.step / should_stop: {pm['SlackLoop.step()'] / pm['Checkpointer.should_stop()']:.2f}x "
              "(goal <= 3x)")

        # 3. one poll of the cached file
        sl = Slack(partition="p7", tier="scavenger", source="cache", cache=cache)
        polls, loads = [], []
        for _ in range(a.rounds * 10):
            t = time.perf_counter()
            with open(cache, "rb") as f:
                json.load(f)
            loads.append(time.perf_counter() - t)
            t = time.perf_counter()
            sl.poll(force=True)
            polls.append(time.perf_counter() - t)
        assert sl.last.signal is not None and sl.last.signal.partition == "p7"
        p, ld = statistics.median(polls), statistics.median(loads)
        print("one poll of the cached file (48 signals):")
        print(f"  {'json.load of the file':40} {ld * 1e6:7.0f} us")
        print(f"  {'Slack.poll()':40} {p * 1e6:7.0f} us")
        print(f"  RATIO poll / json.load: {p / ld:.2f}x (goal <= 3x)")


if __name__ == "__main__":
    main()
