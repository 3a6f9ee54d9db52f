"""sacct dumps whose delimiter also appears inside values (`sacct -p --delimiter=,`: `,` in TRES lists, hostlists
and job names), as ratios measured side by side in one run.

The same generated jobs (`slurmtools.reports.synth`, steps and TRES included) are written twice: as `sacct -P`
writes them (`|`, read by the columnar fast path) and with `,` as the delimiter (every line with a TRES list holds
extra pieces, so `Splitter` puts it back together). Measured:
1. `read_sacct` of each dump: the comma dump against the `-P` dump, and whether both give the same jobs;
2. the comma dump's lines through `Splitter.split`, which searches each sequence of piece classes once, against a
   search of every line on its own (`Splitter._search`, what every line cost before), on the same lines.

Prints ratios; asserts nothing.
    python benchmarks/bench_sacct_delimiters.py              # 20,000 jobs (about 60,000 lines, a minute)
    python benchmarks/bench_sacct_delimiters.py --jobs 200000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slurmtools.errors import ParseError  # noqa: E402
from slurmtools.reports import synth  # noqa: E402
from slurmtools.reports.sacct import read_sacct  # noqa: E402
from slurmtools.slurm.parsable import Splitter, read_header  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=20_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-delim-") as tmp:
        pipe, comma = Path(tmp) / "P.txt", Path(tmp) / "comma.txt"
        synth.write(pipe, args.jobs, datetime(2026, 10, 1), 7, seed=3, nodes=max(16, args.jobs // 7 // 60),
                    first_id=1000, account_names=["vision", "nlp", "students"])
        lines = pipe.read_text().splitlines()
        comma.write_text("".join(ln.replace("|", ",") + "\n" for ln in lines))
        print(f"[delimiters] {args.jobs:,} jobs, {len(lines) - 1:,} lines")

        t = time.perf_counter()
        fast = read_sacct(pipe)
        t_pipe = time.perf_counter() - t
        t = time.perf_counter()
        slow = read_sacct(comma)
        t_comma = time.perf_counter() - t
        same = fast.jobs.reset_index(drop=True).equals(slow.jobs.reset_index(drop=True))
        r = t_comma / t_pipe
        print(f"  read_sacct: -P {t_pipe:.2f} s, --delimiter=, {t_comma:.2f} s -> ratio {r:.1f}; same jobs: {same}")

        rows = comma.read_text().splitlines()
        header = read_header(rows[0], str(comma))
        n = len(header.names)
        split = [ln for ln in rows[1:] if len(ln.split(",")) != n]  # the lines that need putting back together
        s = Splitter(header, str(comma))
        t = time.perf_counter()
        kept = [_split(s, ln) for ln in split]
        t_kept = time.perf_counter() - t
        alone = Splitter(header, str(comma))
        t = time.perf_counter()
        each = [alone._search(alone.pieces(ln)) for ln in split]
        t_each = time.perf_counter() - t
        # the same answer: one split and the same one, or refused (none, or more than one) by both
        agree = all((e[0] if len(e) == 1 else None) == k for e, k in zip(each, kept))
        print(f"  {len(split):,} lines holding ','; Splitter.split {t_kept:.2f} s ({t_kept / len(split) * 1e6:.0f} us "
              f"a line, {len(s._found):,} sequences searched) against a search of each line "
              f"{t_each:.2f} s ({t_each / len(split) * 1e6:.0f} us): {t_each / t_kept:.1f}x faster; "
              f"same splits: {agree} ({sum(k is None for k in kept):,} lines refused by both: they split in more than "
              f"one way)")


def _split(s: Splitter, line: str) -> list[str] | None:
    try:
        return s.split(line, None)
    except ParseError:
        return None


if __name__ == "__main__":
    main()
