"""Shared by the tests/hostile/test_admission_*.py modules: the example site's policies, the generated Lua run by
every installed Lua (5.1 as Debian's 22.05 links, 5.3 as the 25.11 build), and one comparison of both sides."""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "policy"))

from policy_luarun import LUAS, job_desc, run_lua  # noqa: E402

from slurmtools.policy import PolicyContext, evaluate, load_policies  # noqa: E402
from slurmtools.policy.engine import load_fabric_for  # noqa: E402
from slurmtools.render.job_submit import render_job_submit  # noqa: E402
from slurmtools.site import load_site  # noqa: E402

# under CI a missing interpreter is a set-up failure, not a skip
needs_lua = pytest.mark.usefixtures("require_lua")  # a missing Lua fails, never skips


@lru_cache(maxsize=1)
def example():
    site = load_site(None)
    fabric = load_fabric_for(site)
    return site, fabric, load_policies(site, fabric)


def python_decision(req):
    site, fabric, policies = example()
    return evaluate(req, policies, PolicyContext(site=site, fabric=fabric))


def lua_results(descs: list[dict], tmp: Path, site=None) -> dict[str, list[dict]]:
    """Each installed Lua's answers to the job_desc tables (see policy_luarun.DRIVER)."""
    s, fabric, _ = example()
    text = render_job_submit(site or s, fabric).text
    out = {}
    for lua in LUAS:
        d = tmp / Path(lua).name
        d.mkdir(exist_ok=True)
        out[Path(lua).name] = run_lua(text, descs, d, lua=lua)
    return out


def same_on_both_sides(reqs, tmp: Path) -> list:
    """Python's decisions for `reqs`, after asserting that every Lua gives the same ones, message for message."""
    got = lua_results([job_desc(r) for r in reqs], tmp)
    decisions = [python_decision(r) for r in reqs]
    for name, results in got.items():
        for r, d, lua in zip(reqs, decisions, results):
            want = (-1, d.message) if d.action == "deny" else (0, "")
            assert (lua["rc"], lua["user"]) == want, (name, r, d, lua)
    return decisions


@pytest.fixture
def enforcing(lab):
    """The lab with this checkout's rendering of the example site's policies; the lab's own file is restored after
    (tests/integration/labtools.install_lua gives each write a new mtime, so slurmctld reloads it)."""
    from labtools import install_lua

    site, fabric, _ = example()
    path = lab.dir / "etc" / "job_submit.lua"
    saved = path.read_text()
    install_lua(lab, render_job_submit(site, fabric).text)
    yield
    install_lua(lab, saved)


def lab_submit(lab, args: str, script: str, user: str = "labuser", check: bool = False):
    """`sbatch -H --parsable` of `script` (written to a fresh file readable by `user`) with the shell-quoted `args`,
    as `user`; the CompletedProcess (stdout: the job id when admitted)."""
    from labtools import job_script

    sp = job_script(lab, "admission", script)
    return lab.sh(f"sbatch -H --parsable -o /dev/null {args} {sp}", user=user, check=check)
