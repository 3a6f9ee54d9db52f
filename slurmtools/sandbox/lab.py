"""The sandbox's I/O: bring up a lab shaped like one site, feed it the trace in accelerated time, wait for the
queue to drain, read sacct, and stop every daemon on the way out (Ctrl-C, SIGTERM and a hang-up included).

No policy here: what to submit and how times scale come from `submission` and `timescale`; what the outcome
means is `outcome`'s. The lab itself is `scripts/slurm-lab` (the checkout's real Slurm on loopback), given the
sandbox's site file, its own folder and ports, and the tightened scheduler clocks.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import struct
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from slurmtools.errors import SlurmtoolsError
from slurmtools.sandbox import sitecopy, submission
from slurmtools.sandbox.clocks import Clock
from slurmtools.sandbox.trace import SACCT_OPTIONS, Trace, unsettled
from slurmtools.slurm.commands import parse_sacct

REPO = Path(__file__).resolve().parents[2]
#: pending reasons that no amount of waiting clears (the job can never start on this site)
NEVER = ("QOSMax", "AssocMax", "PartitionConfig", "PartitionTimeLimit", "PartitionNodeLimit", "ReqNodeNotAvail",
         "InvalidAccount", "InvalidQOS", "AccountNotAllowed", "QOSNotAllowed", "BadConstraints", "Resources")


def _replay_env(env) -> dict:
    """The admin's environment as the sandbox's Slurm commands get it: without what changes what they print
    (`slurm.commands.command_env`), and without sbatch's SBATCH_* defaults, which would add the admin's own
    partition, account or limits to every replayed job."""
    from slurmtools.slurm.commands import command_env

    return {k: v for k, v in command_env(env).items() if not k.startswith("SBATCH_")}


class SandboxError(SlurmtoolsError):
    """The sandbox could not be brought up or fed; the message names the step and where its log is."""

    exit_code = 3


@dataclass
class ReplayRun:
    """What one replay through one site produced, for `outcome`."""

    label: str
    site_source: str
    scale: Clock
    first_submit: float                      # the trace's first recorded submission (real epoch)
    t0: float                                # when the sandbox's clock started (sandbox epoch)
    submitted: dict[str, float] = field(default_factory=dict)   # trace key -> sandbox submit time
    job_ids: dict[str, str] = field(default_factory=dict)       # trace key -> Slurm job id ("12", "12_3")
    refused: dict[str, str] = field(default_factory=dict)       # trace key -> why sbatch refused it
    never_started: dict[str, str] = field(default_factory=dict)  # trace key -> the pending reason it was cancelled for
    work_done: dict[str, bool] = field(default_factory=dict)   # trace key -> its program saved all of its work
    sacct_text: str = ""
    nodes: int = 0
    gpus: int = 0
    release: str = ""
    wall_s: float = 0.0
    clock_origin: float | None = None   # where Slurm's fast clock equalled the wall clock (faketime), else None


class _Stop(Exception):
    pass


def _raise_stop(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


#: signals that end a replay the way Ctrl-C does: SIGTERM (kill, a batch system) and SIGHUP (the admin's terminal or
#: SSH session closed under a long replay), whose default would end the process without stopping the sandbox's daemons.
#: One that the replay was started with ignored (`nohup` ignores SIGHUP) stays ignored.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class SandboxLab:
    """One lab shaped like a site. Use as a context manager: the daemons stop on leaving it, whatever happened."""

    def __init__(self, workdir: Path, site_file: Path, overrides: Path, release: str, port_offset: int,
                 clock_env: dict[str, str] | None = None):
        self.workdir, self.site_file, self.overrides = workdir, site_file, overrides
        self.release, self.port_offset, self.clock_env = release, port_offset, dict(clock_env or {})
        self.clock_origin: float | None = None
        self.lab_dir = workdir / "lab"
        self.log = workdir / "lab-up.log"
        self.env = _replay_env(os.environ)

    def _lab_env(self) -> dict:
        env = _replay_env(os.environ)
        env.update(SLURMTOOLS_SITE=str(self.site_file), SLURMTOOLS_LAB_DIR=str(self.lab_dir),
                   SLURMTOOLS_LAB_PORT_OFFSET=str(self.port_offset), SLURMTOOLS_LAB_SLURM=self.release,
                   SLURMTOOLS_LAB_CONF_OVERRIDES=str(self.overrides))
        env.pop("SLURMTOOLS_LAB_REUSE", None)
        env.pop("SLURMTOOLS_LAB_FAKETIME", None)
        env.update(self.clock_env)
        return env

    def __enter__(self) -> "SandboxLab":
        self._old_handlers = {}
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                self._old_handlers[signum] = signal.signal(signum, _raise_stop)
        if os.geteuid() != 0:
            raise SandboxError("sandbox: needs root (it starts slurmctld, slurmd and creates the sandbox's users)")
        script = REPO / "scripts" / "slurm-lab"
        if not script.exists():
            raise SandboxError(f"sandbox: {script} not found: the sandbox runs from a slurmtools checkout")
        try:
            with open(self.log, "w") as fh:
                r = subprocess.run([str(script), "up", "--slurm", self.release], env=self._lab_env(), stdout=fh,
                                   stderr=subprocess.STDOUT, timeout=900)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        if r.returncode != 0:
            tail = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()][-1:]
            self.__exit__(None, None, None)
            raise SandboxError(f"sandbox: the lab did not come up ({tail[0] if tail else 'no output'}); "
                               f"log: {self.log}")
        out = subprocess.run([str(script), "env"], env=self._lab_env(), capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.removeprefix("export ").partition("=")
            if k == "PATH":
                v = v.replace("$PATH", os.environ.get("PATH", ""))
            self.env[k] = v
        try:
            self.clock_origin = _clock_origin(self.lab_dir / "faketime.env") if self.clock_env else None
        except SandboxError:
            self.__exit__(None, None, None)   # the lab is up: stop it before saying why it cannot be used
            raise
        return self

    def __exit__(self, *exc) -> None:
        """Stop the lab. A second Ctrl-C (or any stop signal) while it stops is ignored, and `slurm-lab down` runs in
        a session of its own, out of reach of the terminal's signals: interrupted, it would leave daemons behind."""
        script = REPO / "scripts" / "slurm-lab"
        held = {signum: signal.signal(signum, signal.SIG_IGN) for signum in (signal.SIGINT, *STOP_SIGNALS)}
        try:
            subprocess.run([str(script), "down"], env=self._lab_env(), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120, start_new_session=True)
        finally:
            before = getattr(self, "_old_handlers", {})
            for signum, now in held.items():
                old = before.get(signum, now)
                signal.signal(signum, old if old is not None else signal.SIG_DFL)

    def run(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, **kw)


def _clock_origin(path: Path) -> float:
    """FAKETIME_ORIGIN from the file `slurm-lab up` writes for a lab on a fast clock."""
    try:
        values = dict(ln.split("=", 1) for ln in path.read_text().splitlines() if "=" in ln)
        return float(values["FAKETIME_ORIGIN"])
    except (OSError, KeyError, ValueError) as exc:
        raise SandboxError(f"sandbox: {path}: no FAKETIME_ORIGIN ({exc}); the lab's fast clock cannot be read "
                           f"back") from None


#: The sandbox runs no prolog or epilog. Its GPUs are files, so the hooks' checks and records mean nothing there,
#: while their real run time (a Python process at every start and end) costs N times more of the sandbox's time at
#: speed-up N: the epilog holds a node for it after each job. Measured (docs/sandbox.md): at 60x on the fast clock the
#: replays with the hooks kept 2-3 of the 1x replay's 7 preempted jobs, those without them 5-7.
NO_HOOKS = {"Prolog": "", "Epilog": ""}


def prepare(workdir: Path, site, raw_doc: dict, trace: Trace, scale: Clock, release, model=None
            ) -> tuple[Path, Path, dict]:
    """Write the sandbox's site file and scheduler overrides into `workdir`; (site file, overrides, user names).
    `model` (`scaling.SiteScale`): the site as 1 emulated node per F real ones, its fabric written beside."""
    workdir.mkdir(parents=True, exist_ok=True)
    names = sitecopy.sandbox_users(j.user for j in trace.jobs)
    if model is not None:
        (workdir / "fabric.toml").write_text(sitecopy.dumps(model.fabric_doc))
        doc = scale.site_doc(model.site_doc, None)
    else:
        doc = scale.site_doc(raw_doc, str(site.fabric_path) if site.fabric_path else None)
    doc = sitecopy.with_trace_users(doc, ((j.user, j.account) for j in trace.jobs), names)
    site_file = workdir / "site.toml"
    site_file.write_text(sitecopy.dumps(doc))
    max_limit = max((j.limit_s or 0) for j in trace.jobs)
    conf = scale.slurm_conf(requeue_delay_param=getattr(release, "requeue_delay", None), max_limit_s=max_limit)
    conf.update(NO_HOOKS)
    lines = [f"{k}={v}" for k, v in conf.items() if not k.startswith("_")]
    if "_cred_expire" in conf:
        lines.append(f"AuthInfo=socket=$LAB/munge/munge.socket,cred_expire={conf['_cred_expire']}")
    overrides = workdir / "slurm-overrides.conf"
    overrides.write_text("\n".join(lines) + "\n")
    return site_file, overrides, names


def _install_program(workdir: Path, leads) -> tuple[dict, Path]:
    """The job program as batch scripts: one per warning-signal lead (None: no signal line)."""
    src = Path(__file__).with_name("job_program.py").read_text()
    progs = {}
    for lead in sorted(set(leads), key=lambda v: -1 if v is None else v):
        prog = workdir / (f"job_program-{lead}.py" if lead is not None else "job_program.py")
        sig = f"#SBATCH --signal=B:URG@{lead}\n" if lead is not None else ""
        prog.write_text("#!/usr/bin/python3 -I\n" + sig + src)
        prog.chmod(0o755)
        progs[lead] = prog
    state = workdir / "state"
    if state.exists():
        shutil.rmtree(state)   # a previous replay's saved progress must not count as this one's work
    state.mkdir()
    state.chmod(0o1777)
    workdir.chmod(0o755)
    return progs, state


def feed_and_wait(lab: SandboxLab, trace: Trace, subs: list, names: dict[str, str], scale: Clock,
                  ckpt: submission.Checkpointing, run: ReplayRun, progress=None, lead_in_s: float = 1.0,
                  align_to_priority_pass: bool | None = None) -> None:
    """Submit each submission at its scaled time as its sandbox user, wait for the queue to drain, cancel jobs
    that can never start (naming their reason), and read sacct. `progress(line)` redraws a status line.
    `lead_in_s`: where the first submission falls in slurmctld's own periodic passes (which the accuracy benchmark
    varies): with `align_to_priority_pass` (by default the clock's `ALIGNS_TO_PRIORITY_PASS`), that many recorded
    seconds after one of its fair-share passes (`Speedup.first_submission`), otherwise wall seconds from now."""
    progs, state = _install_program(lab.workdir, (s.signal_lead for s in subs))
    first = trace.first_submit
    align = scale.ALIGNS_TO_PRIORITY_PASS if align_to_priority_pass is None else align_to_priority_pass
    if align:
        run.t0 = scale.first_submission(time.time() + 0.5, lead_in_s, _first_priority_pass(lab, scale))
    else:
        run.t0 = time.time() + lead_in_s
    every, save = scale.sandbox_s(ckpt.every_s), scale.sandbox_s(ckpt.save_s)
    # on the fast clock the program counts its run from Slurm's start of it, not its own (job_program.py)
    clock = [f"{lab.clock_origin:.6f}:{scale.speedup:g}"] if lab.clock_origin is not None else []
    users = {}
    for s in subs:
        u = names[s.user]
        if u not in users:
            try:
                pw = pwd.getpwnam(u)
            except KeyError:
                raise SandboxError(f"sandbox: user {u} (for {s.user}) was not created by the lab") from None
            users[u] = (pw.pw_uid, pw.pw_gid)
    total = sum(len(s.keys) for s in subs)
    for n, s in enumerate(subs):
        due = run.t0 + scale.sandbox_s(s.at - first)
        delay = due - time.time()
        if delay > 0:
            time.sleep(delay)
        uid, gid = users[names[s.user]]
        if s.tasks:
            table = state / f"{s.keys[0].split('_')[0]}.tasks"
            table.write_text("".join(f"{t} {w:.3f}\n" for t, w in zip(s.tasks, s.work_s)))
            (state / s.keys[0].split("_")[0]).mkdir(exist_ok=True, mode=0o777)
            os.chmod(state / s.keys[0].split("_")[0], 0o1777)
            args = [f"@{table}", f"{every:.3f}", f"{save:.3f}", str(state / s.keys[0].split('_')[0])]
        else:
            args = [f"{s.work_s[0]:.3f}", f"{every:.3f}", f"{save:.3f}", str(state / s.keys[0])]
        r = subprocess.run(["sbatch", "--parsable", *s.argv, str(progs[s.signal_lead]), *args, *clock], env=lab.env, capture_output=True,
                           text=True, user=uid, group=gid, extra_groups=[], cwd="/tmp")
        when = time.time()
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or ["sbatch failed"])[-1].removeprefix("sbatch: error: ")
            for k in s.keys:
                run.refused[k] = why
        else:
            jid = r.stdout.strip().split(";")[0]
            for k, t in zip(s.keys, s.tasks or (None,) * len(s.keys)):
                run.job_ids[k] = jid if t is None else f"{jid}_{t}"
                run.submitted[k] = when
        if progress:
            progress(f"{run.label}: {_bar(n + 1, len(subs))} submitted {n + 1} of {len(subs)}, "
                     f"{len(run.refused)} refused")
    _drain(lab, run, scale, trace, progress)
    run.sacct_text = _accounting(lab, run)
    run.work_done = _work_done(state, subs)


def _first_priority_pass(lab: SandboxLab, scale: Clock) -> float:
    """When slurmctld's fair-share pass first ran, as wall time: slurmctld writes its state file
    `priority_last_decay_ran` after every pass (the last pass, then the first, as 64-bit big-endian times on its own
    clock), and runs the next ones every PriorityCalcPeriod from the first."""
    path = lab.lab_dir / "state" / "priority_last_decay_ran"
    try:
        _last, first = struct.unpack(">qq", path.read_bytes()[:16])
    except (OSError, struct.error) as exc:
        raise SandboxError(f"sandbox: {path}: cannot read when slurmctld's fair-share pass ran ({exc})") from None
    wall = scale.wall_time(float(first), lab.clock_origin)
    if not abs(wall - time.time()) < 3600:
        raise SandboxError(f"sandbox: {path}: its first fair-share pass ({first}) is not within the hour the lab has "
                           f"been up; the file is not the one slurmctld writes")
    return wall


def _work_done(state: Path, subs: list) -> dict[str, bool]:
    """Which jobs' programs saved all of their work: the job's own word on whether it finished, which Slurm's state
    does not always give (22.05 ends a preempted job that completes after its grace deadline TIMEOUT)."""
    done = {}
    for s in subs:
        for i, (k, w) in enumerate(zip(s.keys, s.work_s)):
            f = state / (f"{s.keys[0].split('_')[0]}/{s.tasks[i]}" if s.tasks else k)
            try:
                done[k] = float(f.read_text().strip()) >= w - 1e-3
            except (OSError, ValueError):
                done[k] = False
    return done


def _accounting(lab: SandboxLab, run: ReplayRun, wait_s: float = 90.0) -> str:
    """sacct of the replay, once every submitted job's rows are whole (`trace.unsettled`); after `wait_s` what it
    holds then (the outcome counts a job without a whole run as unfinished, naming why)."""
    def stamp(wall: float) -> str:    # on Slurm's clock, which the fast clock keeps ahead of the wall clock
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(run.scale.slurm_time(wall, run.clock_origin)))

    wanted = set(run.job_ids.values())
    deadline = time.time() + wait_s
    while True:
        r = lab.run(["sacct", "-a", *SACCT_OPTIONS, "-S", stamp(run.t0 - 3600), "-E", stamp(time.time() + 3600)])
        if r.returncode != 0:
            raise SandboxError(f"sandbox: sacct failed: {r.stderr.strip()[:200]}")
        if not unsettled(parse_sacct(r.stdout, "the sandbox's sacct"), wanted) or time.time() > deadline:
            return r.stdout
        time.sleep(2)


def _bar(done: int, total: int, width: int = 24) -> str:
    k = int(width * done / total) if total else width
    return "[" + "#" * k + "." * (width - k) + "]"


#: pending reasons that clear without any job ending: a requeued job's BeginTime, a job not yet evaluated
_CLEARS_BY_ITSELF = frozenset({"BeginTime", "None"})
#: how long (real s) nothing may move before the jobs left count as never startable: long enough for a loaded
#: machine's nodes to finish their jobs' clean-up and slurmctld's next pass
STUCK_S = 30.0


def _drain(lab: SandboxLab, run: ReplayRun, scale: Clock, trace: Trace, progress) -> None:
    """Wait until no replayed job is pending or running. Jobs pending for a reason that never clears, while
    nothing runs and nothing waits for its begin time, are cancelled and recorded with that reason."""
    stuck_since = None
    while True:
        r = lab.run(["squeue", "-h", "-a", "-r", "-o", "%i|%T|%r"])
        rows = [ln.split("|") for ln in r.stdout.splitlines() if ln.count("|") == 2]
        running = sum(1 for _, st, _ in rows if st in ("RUNNING", "COMPLETING", "CONFIGURING"))
        # stuck: everything left is pending for a reason time alone does not clear (a requeued job waits for its
        # BeginTime; a job slurmctld has not looked at yet says None)
        moving = any(st != "PENDING" or why in _CLEARS_BY_ITSELF for _, st, why in rows)
        if progress:
            total = len(run.job_ids)
            progress(f"{run.label}: {_bar(total - len(rows), total)} {len(rows)} jobs left ({running} running)")
        if not rows:
            return
        if not moving:
            stuck_since = stuck_since or time.time()
            if time.time() - stuck_since > max(STUCK_S, scale.sandbox_s(60)):
                for jid, st, why in rows:
                    key = next((k for k, v in run.job_ids.items() if v == jid), None)
                    if key is not None:
                        run.never_started[key] = why
                lab.run(["scancel", *[jid for jid, _, _ in rows]])
                time.sleep(2)
                return
        else:
            stuck_since = None
        time.sleep(1.0)


def replay(trace: Trace, site, raw_doc: dict, workdir: Path, scale: Clock, release, port_offset: int,
           ckpt: submission.Checkpointing, label: str, progress=None, shapes: dict | None = None, model=None,
           lead_in_s: float = 1.0, within_second_seed: int | None = None,
           align_to_priority_pass: bool | None = None) -> ReplayRun:
    """Replay `trace` through a sandbox shaped like `site` (its raw TOML `raw_doc`); stop it afterwards. `shapes`:
    jobs' shape options other than the recorded ones (`sandbox.planned`); `model`: the scaled model to run
    instead of the site itself (`scaling`), whose jobs it cannot express count as refused; `within_second_seed`:
    move each submission within its recorded second (`submission.within_second`); `align_to_priority_pass`: as
    `feed_and_wait` takes it."""
    workdir = Path(workdir).resolve()   # sbatch runs as the sandbox's users from /tmp: a relative path names nothing
    refused = {}
    if model is not None:
        from slurmtools.sandbox.scaling import ScaleRefused, scale_job

        jobs = []
        for j in trace.jobs:
            try:
                jobs.append(scale_job(j, model))
            except ScaleRefused as exc:
                refused[j.key] = f"scaled model: {exc}"
        trace = Trace(tuple(jobs), trace.source, trace.notes)
    site_file, overrides, names = prepare(workdir, site, raw_doc, trace, scale, release, model)
    subs = submission.build(trace.jobs, scale, site, shapes)
    if within_second_seed is not None:
        subs = submission.within_second(subs, within_second_seed)
    run = ReplayRun(label=label, site_source=str(site.source), scale=scale, first_submit=trace.first_submit,
                    t0=0.0, release=release.name, refused=refused)
    from slurmtools.sandbox.shape import capacity

    run.nodes, run.gpus = capacity(site)
    started = time.time()
    with SandboxLab(workdir, site_file, overrides, release.name, port_offset, scale.lab_env()) as lab:
        run.clock_origin = lab.clock_origin
        feed_and_wait(lab, trace, subs, names, scale, ckpt, run, progress, lead_in_s, align_to_priority_pass)
    run.wall_s = time.time() - started
    _keep(workdir, run)
    return run


def _keep(workdir: Path, run: ReplayRun) -> None:
    """The replay's bookkeeping and the sandbox's sacct, kept beside its logs for a look afterwards."""
    import json
    from dataclasses import asdict

    (workdir / "sacct.txt").write_text(run.sacct_text)
    d = asdict(run)
    d.pop("sacct_text")
    (workdir / "replay.json").write_text(json.dumps(d, indent=1, default=str))
