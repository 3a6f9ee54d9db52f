"""How many nodes one machine can emulate for the capacity sandbox (issue 14): the Slurm lab (one slurmd per node on
loopback, as scripts/slurm-lab runs it) brought up with the example site's node type at growing node counts.

    sudo .venv/bin/python benchmarks/bench_sandbox_nodes.py [--nodes 16,64,128,256] [--slurm 22.05|25.11]
                                                            [--jobs 200] [--sleep 5] [--idle-s 20] [--factor F]

Per node count: the time from `slurm-lab up` to every node idle, the memory of the slurmd processes and of
slurmctld (RSS summed, and PSS, which counts shared pages once), the daemons' CPU while idle (share of one core over
--idle-s seconds), and a scheduling probe: --jobs one-GPU jobs of --sleep seconds submitted one sbatch at a time as
labuser; how long until all started and all ended, and how late each start was against a perfect FIFO scheduler on
the same GPUs with the same submit and run times (the lateness the sandbox adds to every replayed start).
Goal: a node count is usable when every node is idle within --up-goal seconds, idle CPU stays under --cpu-goal % of
one core, and the probe's median start lateness stays under --late-goal seconds. Stops growing at the first count
that misses the goal or does not come up. The lab folder is --dir (default /tmp/lab-nodes), port offset 5000; the
lab is always stopped, also on failure or Ctrl-C. With --factor F each node count is a real site brought up as its
scaled model (slurmtools.sandbox.scaling: 1 emulated node per F real ones, F x their GPUs); the probe's ideal is
then the real site's GPUs, which the model keeps.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slurmtools.sandbox.sitecopy import dumps  # noqa: E402

LAB_SCRIPT = REPO / "scripts" / "slurm-lab"
CLK = os.sysconf("SC_CLK_TCK")
PER_LEAF = 16


def make_site(n: int, out: Path) -> Path:
    """The example site with `n` nodes of its node type, 16 per leaf under one spine; returns the site file."""
    out.mkdir(parents=True, exist_ok=True)
    site = tomllib.loads((REPO / "site_configs/example/site.toml").read_text())
    fabric = tomllib.loads((REPO / "topology/example/fabric.toml").read_text())
    w = max(2, len(str(n)))
    node_type = next(iter(fabric["node_types"]))
    leaves = []
    for i, first in enumerate(range(1, n + 1, PER_LEAF), start=1):
        last = min(n, first + PER_LEAF - 1)
        leaves.append({"name": f"leaf{i}", "hosts": f"gpu[{first:0{w}d}-{last:0{w}d}]", "node_type": node_type})
    fabric["leaves"] = leaves
    fabric["spines"] = [{"name": "spine1", "leaves": [lf["name"] for lf in leaves], "uplinks_per_leaf": PER_LEAF}]
    (out / "fabric.toml").write_text(dumps(fabric))
    site["site"]["fabric"] = "fabric.toml"
    site["partitions"]["gpu"]["nodes"] = f"gpu[{1:0{w}d}-{n:0{w}d}]"
    (out / "site.toml").write_text(dumps(site))
    return out / "site.toml"


def pids(lab: Path) -> tuple[list[int], int | None]:
    def read(f: Path) -> int | None:
        try:
            return int(f.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
    d = [p for p in (read(f) for f in sorted((lab / "run").glob("slurmd-*.pid"))) if p]
    return d, read(lab / "run" / "slurmctld.pid")


def mem_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in kB."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def cpu_ticks(pid: int) -> int:
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])   # utime, stime
    except (OSError, IndexError, ValueError):
        return 0


def job_processes() -> tuple[int, float]:
    """(slurmstepd processes, PSS MB of them and of labuser's processes): what running jobs cost on the machine,
    whichever lab they belong to (the probe subtracts what ran before it)."""
    import pwd

    uid = str(pwd.getpwnam("labuser").pw_uid)
    steps, kb = 0, 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            st = (d / "status").read_text()
        except OSError:
            continue
        name = st.split("\n", 1)[0].split()[-1]
        owner = next((ln.split()[1] for ln in st.splitlines() if ln.startswith("Uid:")), "")
        if name == "slurmstepd" or owner == uid:
            steps += name == "slurmstepd"
            kb += mem_kb(int(d.name))[1]
    return steps, kb / 1024


def sh(cmd: list[str], env: dict, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, **kw)


def all_idle(env: dict, n: int) -> bool:
    p = sh(["sinfo", "-h", "-N", "-o", "%T"], env)
    states = p.stdout.split()
    return p.returncode == 0 and len(states) == n and all(s == "idle" for s in states)


def ideal_starts(jobs: list[tuple[float, float]], gpus: int) -> list[float]:
    """FIFO on `gpus` one-GPU slots: each (submit, run) job starts at its submission or when a slot frees."""
    ends: list[float] = []
    out = []
    for submit, run in jobs:
        ends.sort()
        start = submit if len(ends) < gpus else max(submit, ends.pop(0))
        ends.append(start + run)
        out.append(start)
    return out


def probe(env: dict, lab: Path, n_jobs: int, sleep_s: int, gpus: int, timeout: float) -> dict:
    script = lab / "probe.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH --signal=B:USR1@60\nsleep {sleep_s}\n")
    script.chmod(0o755)
    # the time limit leaves the warning signal (60 s before it) well after the job's end: bash dies of USR1
    limit_min = sleep_s // 60 + 3
    base = job_processes()   # other labs on the machine run slurmstepd and labuser's jobs too
    ids, t0 = [], time.time()
    for i in range(n_jobs):
        p = sh(["runuser", "-u", "labuser", "--", "env", f"SLURM_CONF={env['SLURM_CONF']}", f"PATH={env['PATH']}",
                "sbatch", "--parsable", f"--job-name=probe{i}", "-p", "gpu", "--qos=scavenger", "-A", "nlp",
                "--gres=gpu:h100:1", "-t", str(limit_min), "-o", "/dev/null", "--chdir=/tmp", str(script)], env)
        if p.returncode != 0:
            raise RuntimeError(f"sbatch refused probe job {i}: {p.stderr.strip()}")
        ids.append(p.stdout.strip().split(";")[0])
    submit_s = time.time() - t0
    end = time.time() + timeout
    peak = (0, 0.0)
    while sh(["squeue", "-h", "-u", "labuser", "-o", "%i"], env).stdout.strip():
        if time.time() > end:
            raise RuntimeError(f"probe jobs still queued after {timeout:.0f} s")
        now = job_processes()
        peak = max(peak, now)
        time.sleep(1)
    rows: dict[str, tuple] = {}
    env2 = dict(env, SLURM_TIME_FORMAT="%s")
    while time.time() < end:   # slurmdbd may lag behind the controller
        p = sh(["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", "JobID,Submit,Start,End,State"], env2)
        rows = {}
        for line in p.stdout.splitlines():
            f = line.split("|")
            if len(f) == 5 and f[1].isdigit() and f[2].isdigit() and f[3].isdigit():
                rows[f[0]] = (int(f[1]), int(f[2]), int(f[3]), f[4])
        if len(rows) == len(ids):
            break
        time.sleep(1)
    jobs = sorted(rows.values())
    first = jobs[0][0]
    ideal = ideal_starts([(s, e - st) for s, st, e, _ in jobs], gpus)
    late = sorted(st - i for (_, st, _, _), i in zip(jobs, ideal))
    return {"submit_s": submit_s, "peak_stepds": peak[0] - base[0],
            "peak_jobs_pss_mb": peak[1] - base[1], "jobs": len(jobs),
            "completed": sum(1 for j in jobs if j[3] == "COMPLETED"),
            "all_started_s": max(j[1] for j in jobs) - first, "all_ended_s": max(j[2] for j in jobs) - first,
            "ideal_ended_s": max(i + (e - st) for (_, st, e, _), i in zip(jobs, ideal)) - first,
            "late_med_s": statistics.median(late), "late_p90_s": late[int(0.9 * (len(late) - 1))],
            "late_max_s": late[-1]}


def scaled(site_file: Path, factor: int, out: Path) -> tuple[Path, int, str]:
    """The scaled model of the site at 1:factor (slurmtools.sandbox.scaling): its site file, nodes, statement."""
    from slurmtools.sandbox import scaling
    from slurmtools.site import load_site
    from slurmtools.topology.sitefile import load_fabric

    site = load_site(site_file)
    model = scaling.scale_site(site, tomllib.loads(site_file.read_text()), load_fabric(site.fabric_path), factor)
    out.mkdir(parents=True, exist_ok=True)
    (out / "site.toml").write_text(dumps(model.site_doc))
    (out / "fabric.toml").write_text(dumps(model.fabric_doc))
    return out / "site.toml", model.emulated_nodes, model.statement


def measure(n: int, a, work: Path) -> dict:
    site = make_site(n, work / f"site-{n}")
    gpus = n * 8
    r: dict = {"nodes": n}
    if a.factor > 1:
        site, n, statement = scaled(site, a.factor, work / f"site-{n}-1to{a.factor}")
        r.update(real_nodes=r["nodes"], nodes=n)
        print(statement, flush=True)
    lab = Path(a.dir)
    env = dict(os.environ, SLURMTOOLS_SITE=str(site), SLURMTOOLS_LAB_DIR=str(lab),
               SLURMTOOLS_LAB_PORT_OFFSET=str(a.port_offset), SLURMTOOLS_LAB_SLURM=a.slurm)
    try:
        t0 = time.time()
        p = sh([str(LAB_SCRIPT), "up", "--slurm", a.slurm], env)
        if p.returncode != 0 and "every node to be idle" not in p.stderr:
            r["error"] = (p.stderr.strip().splitlines() or ["slurm-lab up failed"])[0]
            return r
        envl = dict(env)
        for line in sh([str(LAB_SCRIPT), "env"], env).stdout.splitlines():
            m = re.match(r"export (\w+)=(.*)", line)
            if m:
                envl[m.group(1)] = m.group(2).replace("$PATH", env["PATH"])
        # slurm-lab waits 60 s for idle nodes; a larger lab may need longer: keep waiting here, up to --up-timeout
        while not all_idle(envl, n):
            if time.time() - t0 > a.up_timeout:
                r["error"] = f"not every node idle after {a.up_timeout} s"
                return r
            time.sleep(0.5)
        r["up_s"] = time.time() - t0
        time.sleep(3)
        d, c = pids(lab)
        r["slurmd_procs"] = len(d)
        mem = [mem_kb(x) for x in d]
        r["slurmd_rss_mb"] = sum(m[0] for m in mem) / 1024
        r["slurmd_pss_mb"] = sum(m[1] for m in mem) / 1024
        r["ctld_rss_mb"] = mem_kb(c)[0] / 1024 if c else 0
        everyone = d + ([c] if c else [])
        t1, c1 = time.time(), {x: cpu_ticks(x) for x in everyone}
        time.sleep(a.idle_s)
        dt = time.time() - t1
        c2 = {x: cpu_ticks(x) for x in everyone}
        r["idle_cpu_slurmd_pct"] = 100 * sum(c2[x] - c1[x] for x in d) / CLK / dt
        r["idle_cpu_ctld_pct"] = 100 * (c2[c] - c1[c]) / CLK / dt if c else 0
        with open("/proc/loadavg") as fh:
            r["load1"] = float(fh.read().split()[0])
        r.update(probe(envl, lab, a.jobs, a.sleep, gpus, a.probe_timeout))
        r["load1_after"] = float(Path("/proc/loadavg").read_text().split()[0])
        return r
    except (RuntimeError, IndexError, ValueError) as exc:
        r["error"] = str(exc)
        return r
    finally:
        sh([str(LAB_SCRIPT), "down"], env)


def ok(r: dict, a) -> bool:
    return ("error" not in r and r["up_s"] <= a.up_goal and r["idle_cpu_slurmd_pct"] + r["idle_cpu_ctld_pct"]
            <= a.cpu_goal and r["late_med_s"] <= a.late_goal and r["completed"] == r["jobs"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="16,64,128,256")
    ap.add_argument("--slurm", default="22.05", choices=("22.05", "25.11"))
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--sleep", type=int, default=5)
    ap.add_argument("--idle-s", type=float, default=20.0)
    ap.add_argument("--dir", default="/tmp/lab-nodes")
    ap.add_argument("--port-offset", type=int, default=5000)
    ap.add_argument("--up-timeout", type=float, default=300.0)
    ap.add_argument("--probe-timeout", type=float, default=300.0)
    ap.add_argument("--up-goal", type=float, default=120.0)
    ap.add_argument("--cpu-goal", type=float, default=25.0)
    ap.add_argument("--late-goal", type=float, default=2.0)
    ap.add_argument("--factor", type=int, default=1, help="bring up the scaled model of each node count at 1:F "
                                                          "(slurmtools.sandbox.scaling) instead of the site itself")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_sandbox_nodes: needs root (it starts a Slurm lab)", file=sys.stderr)
        return 2
    work = Path(a.dir + "-sites")
    shutil.rmtree(work, ignore_errors=True)
    results = []
    for n in [int(x) for x in a.nodes.split(",") if x.strip()]:
        r = measure(n, a, work)
        results.append(r)
        print(r, flush=True)
        if not ok(r, a):
            break
    cores = os.cpu_count()
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    print(f"\nSlurm {a.slurm}, {cores} cores, {mem_gb:.0f} GiB; probe: {a.jobs} one-GPU jobs of {a.sleep} s"
          + (f"; scaled models at 1:{a.factor} (nodes: emulated)" if a.factor > 1 else ""))
    print(f"{'nodes':>6} {'up s':>6} {'slurmd RSS MB':>14} {'PSS MB':>8} {'ctld MB':>8} {'idle CPU %':>11} "
          f"{'started s':>10} {'ended s':>8} {'ideal s':>8} {'late med/p90/max s':>19} {'jobs PSS MB':>12} {'goal':>5}")
    best = None
    for r in results:
        if "error" in r:
            print(f"{r['nodes']:>6} failed: {r['error']}")
            continue
        met = ok(r, a)
        best = r["nodes"] if met else best
        label = f"{r['nodes']}/{r['real_nodes']}" if "real_nodes" in r else str(r["nodes"])
        print(f"{label:>6} {r['up_s']:>6.0f} {r['slurmd_rss_mb']:>14.0f} {r['slurmd_pss_mb']:>8.0f} "
              f"{r['ctld_rss_mb']:>8.0f} {r['idle_cpu_slurmd_pct'] + r['idle_cpu_ctld_pct']:>11.1f} "
              f"{r['all_started_s']:>10} {r['all_ended_s']:>8} {r['ideal_ended_s']:>8} "
              f"{r['late_med_s']:>7}/{r['late_p90_s']}/{r['late_max_s']:<7} {r['peak_jobs_pss_mb']:>12.0f} "
              f"{'met' if met else 'no':>5}")
    if best:
        r = next(x for x in results if x["nodes"] == best)
        print(f"\nlargest node count meeting the goal: {best}; ratio to goal: up {r['up_s']:.0f}/{a.up_goal:.0f} s, "
              f"idle CPU {r['idle_cpu_slurmd_pct'] + r['idle_cpu_ctld_pct']:.1f}/{a.cpu_goal:.0f} %, median "
              f"start lateness {r['late_med_s']}/{a.late_goal:.0f} s")
    else:
        print("\nno node count met the goal")
    return 0 if best else 1


if __name__ == "__main__":
    sys.exit(main())
