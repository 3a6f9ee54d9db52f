"""What the seeded input fuzzers share (`test_*_fuzz.py`): the garbage a token is replaced by, the bytes that are
not UTF-8, the edits of whole lines every text format gets, and the bounds a read runs under. Each fuzzer keeps
the edits of its own format (JSON values, TOML types, sacct fields, gres.conf keys) beside its samples."""

from __future__ import annotations

import random
import resource
import signal
from contextlib import contextmanager

#: what replaces a token: empty, out of range, signed, not a number, digits of other scripts, letters, blanks and
#: control characters, the formats' own punctuation, and a very long word
GARBAGE = ("", "99999999999999999999", "-1", "-0", "+7", "1_0", "0x1f", "1e999", "NaN", "nan", "inf", "٣", "²",
           "Ω", "é", "\t", "\x00", "\x0b", "\x85", "\u2028", '"', "'", "[", "]", "<", ">", "&", "#", "=", ":", ",",
           "-", "\\", "{}", "*", "x" * 5000, "9" * 400)
#: bytes that are not UTF-8: a lone continuation byte, a cut sequence, an encoded surrogate
BAD_UTF8 = (b"\xff", b"\x80", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80")
#: the edits `line_edit` makes
LINE_EDITS = ("cut-bytes", "cut-lines", "drop-line", "double-line", "indent", "swap-lines")


def line_edit(op: str, data: bytes, lines: list[bytes], rng: random.Random) -> tuple[bytes, str] | None:
    """`data` cut short, or a line of it dropped, doubled, indented (or unindented) or swapped with another, and the
    edit's description; None when `op` is no such edit or `data` is too short for it."""
    if op == "cut-bytes" and data:
        at = rng.randrange(len(data))
        return data[:at], f"cut at byte {at}"
    if op == "cut-lines" and lines:
        k = rng.randrange(len(lines))
        return b"".join(lines[:k]), f"cut after line {k}"
    if op in ("drop-line", "double-line", "indent") and lines:
        k = rng.randrange(len(lines))
        if op == "drop-line":
            new = lines[:k] + lines[k + 1:]
        elif op == "double-line":
            new = lines[:k + 1] + lines[k:]
        else:
            new = lines[:k] + [lines[k].lstrip(b" \t") if lines[k][:1] in b" \t" else b"  " + lines[k]] + lines[k + 1:]
        return b"".join(new), f"{op} {k + 1}"
    if op == "swap-lines" and len(lines) > 1:
        a, b = sorted(rng.sample(range(len(lines)), 2))
        lines = list(lines)
        lines[a], lines[b] = lines[b], lines[a]
        return b"".join(lines), f"swap lines {a + 1} and {b + 1}"
    return None


class Hang(Exception):
    pass


@contextmanager
def bounded(seconds: int, memory: int):
    """Run the body with an alarm after `seconds` and `memory` more bytes of address space than the process has
    now: a hang or a runaway allocation fails the case (Hang, MemoryError) instead of stalling the machine."""
    def alarm(_signum, _frame):
        raise Hang(f"no answer in {seconds} s")

    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    limits = resource.getrlimit(resource.RLIMIT_AS)
    cap = used + memory if limits[1] == resource.RLIM_INFINITY else min(used + memory, limits[1])
    old = signal.signal(signal.SIGALRM, alarm)
    resource.setrlimit(resource.RLIMIT_AS, (cap, limits[1]))
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        resource.setrlimit(resource.RLIMIT_AS, limits)
        signal.signal(signal.SIGALRM, old)
