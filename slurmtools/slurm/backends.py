"""Which backend talks to Slurm: a registry of the implementations and the choice between them.

`auto` (the default) takes pyslurm when it is installed and built for the running Slurm, else Slurm's commands;
`--backend commands|pyslurm` (or SLURMTOOLS_BACKEND) forces one, and a forced pyslurm that cannot work is refused
in one line saying why. Whether pyslurm can work is asked in a child process: libslurm ends the whole process
(`fatal: Could not establish a configuration source`) when it finds no Slurm configuration, and a pyslurm built for
another release would talk a protocol the controller refuses. The answer is cached per pyslurm build and Slurm
configuration, so the probe costs one child process per change, not per command.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Mapping

from slurmtools.slurm.backend import Backend

#: name -> (module, class); a new backend is one more line here and one module beside the others
BACKENDS: dict[str, tuple[str, str]] = {
    "commands": ("slurmtools.slurm.commands", "CommandBackend"),
    "pyslurm": ("slurmtools.slurm.pyslurm_backend", "PyslurmBackend"),
}

def force(name: str) -> bool:
    """`--backend NAME` for this process (read back by `get_backend`); False, and nothing set, when NAME is neither
    auto nor a backend named above."""
    if name not in ("auto", *BACKENDS):
        return False
    os.environ["SLURMTOOLS_BACKEND"] = name
    return True


_PROBE = """
import json, sys
try:
    import pyslurm
    nodes = pyslurm.Nodes.load()
    slurmd = sorted({n.slurm_version for n in nodes.values() if getattr(n, "slurm_version", None)})
    print(json.dumps({"pyslurm": str(pyslurm.__version__), "slurmd": slurmd}))
except Exception as exc:
    print(json.dumps({"error": f"{exc.__class__.__name__}: {exc}"}))
"""


def _cache_file(env: Mapping[str, str]) -> Path:
    from slurmtools.cache_dir import user_cache_dir

    return user_cache_dir(env) / "backend-probe.json"


def _probe_key(origin: str, env: Mapping[str, str]) -> str:
    conf = env.get("SLURM_CONF", "/etc/slurm/slurm.conf")
    parts = [sys.executable, origin, conf]
    for f in (origin, conf):
        try:
            parts.append(str(os.stat(f).st_mtime_ns))
        except OSError:
            parts.append("-")
    import hashlib  # here: only the auto choice needs it (a forced backend skips its cost)

    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def pyslurm_usable(env: Mapping[str, str] | None = None, use_cache: bool = True) -> tuple[bool, str]:
    """(usable, why not). Never imports pyslurm in this process."""
    import importlib.util

    env = dict(os.environ if env is None else env)
    spec = importlib.util.find_spec("pyslurm")
    if spec is None or spec.origin is None:
        return False, "pyslurm is not installed (pip install 'slurmtools[pyslurm]' on a Slurm 25.11 system)"
    key = _probe_key(spec.origin, env)
    cache = _cache_file(env)
    if use_cache:
        try:
            hit = json.loads(cache.read_text()).get(key)
            if hit is not None:
                return bool(hit[0]), str(hit[1])
        except (OSError, ValueError, AttributeError):
            pass
    ok, why = _probe(env)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        try:
            table = json.loads(cache.read_text())
        except (OSError, ValueError):
            table = {}
        table[key] = [ok, why]
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(table))
        tmp.replace(cache)
    except OSError:
        pass  # a read-only home only costs the probe next time
    return ok, why


def _probe(env: Mapping[str, str]) -> tuple[bool, str]:
    from slurmtools.slurm.commands import CommandBackend

    try:
        p = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=dict(env), timeout=60)
    except subprocess.TimeoutExpired:
        return False, "pyslurm did not answer within 60 s"
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        said = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        return False, f"pyslurm cannot reach this Slurm ({said})"
    got = json.loads(lines[-1])
    if "error" in got:
        return False, f"pyslurm cannot read this Slurm ({got['error']})"
    try:
        running = ".".join(str(x) for x in CommandBackend(env=env).version()[:2])
    except Exception as exc:  # noqa: BLE001 - any failure means: cannot confirm the match
        return False, f"cannot read the running Slurm's version ({exc})"
    built = ".".join(got["pyslurm"].split(".")[:2])
    if built != running:
        return False, f"pyslurm {got['pyslurm']} is built for Slurm {built}, this Slurm is {running}"
    return True, ""


def get_backend(prefer: str | None = None, env: Mapping[str, str] | None = None) -> Backend:
    """The backend named by `prefer`, else SLURMTOOLS_BACKEND, else auto."""
    from slurmtools.errors import SlurmUnavailable

    choice = prefer or (env or os.environ).get("SLURMTOOLS_BACKEND") or "auto"
    if choice not in ("auto", *BACKENDS):
        raise SlurmUnavailable("--backend", f"--backend: expected auto, {', '.join(BACKENDS)}; got {choice!r}")
    if choice in ("auto", "pyslurm"):
        ok, why = pyslurm_usable(env)
        if ok:
            return _make("pyslurm", env)
        if choice == "pyslurm":
            raise SlurmUnavailable("pyslurm", f"--backend pyslurm: {why}")
        choice = "commands"
    return _make(choice, env)


def _make(name: str, env: Mapping[str, str] | None) -> Backend:
    module, cls = BACKENDS[name]
    return getattr(importlib.import_module(module), cls)(env=env)
