"""sbatch submissions per second with the generated job_submit.lua against a pass-through one (goal >= 0.9).

Needs the Slurm lab up (scripts/slurm-lab up; SLURMTOOLS_LAB_DIR picks a private one) and root. Both variants
run side by side in one run, in alternating order per round; jobs are submitted held by labuser and cancelled
after each block. The lab's own job_submit.lua is restored at the end.

    python benchmarks/bench_policy.py [--jobs 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PASS = """-- pass-through (benchmark baseline)
function slurm_job_submit(job_desc, part_list, submit_uid) return slurm.SUCCESS end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid) return slurm.SUCCESS end
"""
SCRIPT = "#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsleep 1\n"


def install(path: Path, text: str) -> None:
    old = int(path.stat().st_mtime) if path.exists() else 0
    tmp = path.with_suffix(".bench")
    tmp.write_text(text)
    os.replace(tmp, path)
    t = max(int(time.time()), old + 1)
    os.utime(path, (t, t))


def block(env: dict, work: Path, n: int, args: list[str]) -> float:
    """Submit n held jobs as labuser in one shell; return submissions per second. Cancels them after."""
    cmd = " ".join(shlex.quote(a) for a in ["sbatch", "-H", "--parsable", "-o", "/dev/null", *args, str(work / "job.sh")])
    loop = f"for i in $(seq {n}); do {cmd} || exit 1; done"
    argv = ["runuser", "-u", "labuser", "--", "env", f"SLURM_CONF={env['SLURM_CONF']}", "bash", "-c", loop]
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(work))
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"bench_policy: sbatch failed: {p.stderr.strip()}")
    ids = [x.split(";")[0] for x in p.stdout.split()]
    subprocess.run(["scancel", *ids], env=env, check=True)
    return n / dt


LUA_LOOP = """
slurm = { SUCCESS = 0, ERROR = -1, log_user = function() end, log_info = function() end, log_error = function() end }
assert(loadfile(arg[1]))()
local jd = { account = "vision", qos = "standard", tres_per_node = "gres:gpu:h100:8", min_nodes = 1,
  num_tasks = 4294967294, cpus_per_task = 8, time_limit = 60, ntasks_per_node = 65534,
  script = "#!/bin/bash\\n#SBATCH --signal=B:USR1@300\\nsleep 1\\n" }
local n = tonumber(arg[2])
local t0 = os.clock()
for i = 1, n do jd.partition = nil; assert(slurm_job_submit(jd, {}, 1000) == 0) end
io.write(string.format("%.3f", (os.clock() - t0) / n * 1e6))
"""


def lua_cost_us(text: str, work: Path) -> float | None:
    """CPU time of one evaluation of the generated script under lua5.1, or None without an interpreter."""
    import shutil

    lua = shutil.which("lua5.1")
    if lua is None:
        return None
    (work / "bench.lua").write_text(text)
    (work / "loop.lua").write_text(LUA_LOOP)
    p = subprocess.run([lua, str(work / "loop.lua"), str(work / "bench.lua"), "20000"], capture_output=True, text=True)
    return float(p.stdout) if p.returncode == 0 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=200, help="submissions per block")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from slurmtools.policy.engine import load_fabric_for
    from slurmtools.render.job_submit import render_job_submit
    from slurmtools.site import load_site

    lab = Path(os.environ.get("SLURMTOOLS_LAB_DIR", REPO / ".lab"))
    env = dict(os.environ, SLURM_CONF=str(lab / "etc" / "slurm.conf"))
    env["PATH"] = env.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
    if subprocess.run(["scontrol", "ping"], env=env, capture_output=True).returncode != 0:
        sys.exit(f"bench_policy: no Slurm lab answers at {env['SLURM_CONF']} (scripts/slurm-lab up)")
    site = load_site(None)
    lua = render_job_submit(site, load_fabric_for(site), usage_file=str(lab / "etc" / "slurmtools_usage.lua"),
                            audit_log=str(lab / "log" / "bench_audit.jsonl")).text
    path = lab / "etc" / "job_submit.lua"
    saved = path.read_text() if path.exists() else None
    work = lab / "jobs" / "bench-policy"
    work.mkdir(parents=True, exist_ok=True)
    os.chmod(work, 0o1777)
    (work / "job.sh").write_text(SCRIPT)
    os.chmod(work / "job.sh", 0o644)
    args = ["-A", "vision", "-q", "standard", "--gres=gpu:h100:8", "-N", "1", "-c", "8", "-t", "60"]
    rates: dict[str, list[float]] = {"none": [], "generated": []}
    try:
        for r in range(a.rounds):
            order = ["none", "generated"] if r % 2 == 0 else ["generated", "none"]
            for which in order:
                install(path, PASS if which == "none" else lua)
                block(env, work, 10, args)  # warm-up: slurmctld (re)loads the script on the first call
                rates[which].append(block(env, work, a.jobs, args))
    finally:
        if saved is not None:
            install(path, saved)
    none, gen = statistics.median(rates["none"]), statistics.median(rates["generated"])
    per_call = lua_cost_us(lua, work)
    print(f"sbatch submissions/s, {a.jobs} per block, {a.rounds} rounds (median):")
    print(f"  pass-through job_submit.lua : {none:8.1f}   rounds {', '.join(f'{x:.1f}' for x in rates['none'])}")
    print(f"  generated job_submit.lua    : {gen:8.1f}   rounds {', '.join(f'{x:.1f}' for x in rates['generated'])}")
    paired = [g / n for g, n in zip(rates["generated"], rates["none"])]
    print(f"  ratio generated/pass-through: {gen / none:.3f} of medians; per round "
          f"{', '.join(f'{x:.2f}' for x in paired)} (median {statistics.median(paired):.3f})   (goal >= 0.9)")
    if per_call is not None:
        print(f"  the evaluator alone (lua5.1, outside Slurm): {per_call:.1f} us per job = "
              f"{per_call / (1e6 / none) * 100:.2f}% of one pass-through submission")


if __name__ == "__main__":
    main()
