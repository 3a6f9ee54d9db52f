"""From the logical CPU ids local to each GPU to Slurm's core ids (gres.conf `Cores=`).

Slurm wants logical *core* indexes (hwloc's `Core L#`), while NVML, `nvidia-smi topo -m` and NCCL XML give
logical *CPU* ids. The two are the same only when the thread layout is known: without SMT every CPU is a core; with
x86 SMT, Linux numbers the second thread of core c as c + (number of cores), which shows in the affinity lists as
two equal ranges a-b,a+S-b+S with one S for the whole node (`48-63,176-191` on a 128-core node). Anything else
(a single range from a node that may have SMT, POWER's adjacent threads) does not say which CPUs share a core, so
the cores stay unknown unless the admin states threads per core. Pure.
"""

from __future__ import annotations

from typing import Iterable, Sequence

#: Logical CPU (and NUMA node) ids read from a file stay below this. Linux is built for at most 8192 CPUs; an id
#: past any kernel's is a garbled field, and a range up to it (`0-99999999999`) would fill the memory.
CPU_ID_LIMIT = 1 << 16


def _ranges(ids: Sequence[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i in sorted(ids):
        if out and i == out[-1][1] + 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def sibling_offset(cpu_sets: Iterable[Sequence[int]]) -> int | None:
    """The x86 SMT sibling offset S when every set is [a..b] + [a+S..b+S] with one S, and the first halves of
    all sets lie below S (they are the cores' first threads); else None."""
    offsets = set()
    firsts: list[tuple[int, int]] = []
    for cpus in cpu_sets:
        r = _ranges(cpus)
        if len(r) != 2 or r[0][1] - r[0][0] != r[1][1] - r[1][0]:
            return None
        offsets.add(r[1][0] - r[0][0])
        firsts.append(r[0])
    if len(offsets) != 1:
        return None
    s = offsets.pop()
    return s if all(b < s for _, b in firsts) else None


def cores_of(cpu_sets: Sequence[Sequence[int]], threads_per_core: int | None = None) -> list[tuple[int, ...]] | None:
    """Slurm core ids for each CPU set of one node (in the same order), or None when the layout is unknown.

    `threads_per_core` is the admin's statement (`--threads-per-core`); 1 makes every CPU a core, 2 needs the
    x86 sibling pattern to find which CPUs are first threads. Without it, only the sibling pattern counts."""
    sets = [tuple(sorted(c)) for c in cpu_sets]
    if not any(sets):
        return None
    if threads_per_core == 1:
        return sets
    s = sibling_offset([c for c in sets if c])
    if s is None or threads_per_core not in (None, 2):
        return None
    return [tuple(i for i in c if i < s) for c in sets]


def _restricted(cpus) -> bool:
    """Two CPU groups of different NUMA nodes sharing CPU ids: no machine's NUMA nodes do, a cpuset's view does."""
    return any(a.numa is not None and b.numa is not None and a.numa != b.numa and set(a.cpus) & set(b.cpus)
               for i, a in enumerate(cpus) for b in cpus[i + 1:])


def fill_cores(topology, host: str, threads_per_core: int | None = None) -> None:
    """Give the CPU groups of `host` their Slurm core ids where the layout shows them (see `cores_of`); otherwise
    record `cores` (and, when the CPU lists are not every GPU's whole local set, `local_cpus`) as unknown."""
    from dataclasses import replace

    from slurmtools.topology.queries import local_cpus

    if not topology.gpus(host):
        return
    cpus = [c for c in topology.devices(host, "cpu") if c.cpus]
    if not all(local_cpus(topology, host).values()) or _restricted(cpus):
        # some GPU near no listed CPU, or two NUMA nodes listing the same CPUs: the capture saw the CPUs of a
        # cpuset (`nvidia-smi topo -m` inside a Slurm job lists only the job's), not the NUMA nodes' whole sets,
        # so no CPU list of it is a GPU's local CPUs and no core ids are numbered from them
        topology.mark_unknown(host, "local_cpus", "cores")
        return
    if not cpus or any(c.cores for c in cpus):
        return   # nothing to number, or the source stated the cores
    cores = cores_of([c.cpus for c in cpus], threads_per_core)
    if cores is None:
        topology.mark_unknown(host, "cores")
        return
    for c, ids in zip(cpus, cores):
        topology.g.nodes[c.vid]["v"] = replace(c, cores=ids)
    topology._cache.clear()
