"""Pausing Python's cyclic garbage collector around bulk builds, in a module of its own so that light code
(the planner's cluster view, on every `slurmtools plan`) can use it without importing the topology graph."""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector while a large fabric or cluster view is read, built or exported
    (also usable as a decorator). Those steps allocate hundreds of thousands of tuples, dicts and records that form
    no cycles, and every automatic collection in between would walk them (and the records already held) again:
    on a 4k-host dump that is about 40% of the run, on a 16k-host cluster view about 15%. Restores the collector
    only if it was on (nesting and callers that disabled it are safe)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
