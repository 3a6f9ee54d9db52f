"""Render job_submit.lua from the site: the policies' `params` as Lua tables plus one generic evaluator
(`slurmtools/policy/job_submit.lua.j2`) that mirrors the Python checks, with the same message templates.

Pure: returns text. Plugin policies without a Lua twin are left out and named in the header (CLI-only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurmtools.site.model import Site
    from slurmtools.topology.sitefile import Fabric

TEMPLATE = Path(__file__).resolve().parent.parent / "policy" / "job_submit.lua.j2"


def lua_literal(obj, indent: int = 0) -> str:
    """A Lua expression for JSON-like data. Strings use decimal escapes for anything unusual, so no site
    name can break out of its string; None becomes nil (the key is then absent, as the evaluator expects)."""
    pad = "  " * (indent + 1)
    end = "  " * indent
    if obj is None:
        return "nil"
    if isinstance(obj, bool):
        return "true" if obj else "false"
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"cannot render {obj!r} for Lua")
        return repr(obj)
    if isinstance(obj, str):
        return _lua_str(obj)
    if isinstance(obj, (list, tuple)):
        if not obj:
            return "{}"
        return "{\n" + "".join(f"{pad}{lua_literal(v, indent + 1)},\n" for v in obj) + end + "}"
    if isinstance(obj, dict):
        items = [(k, v) for k, v in obj.items() if v is not None]
        if not items:
            return "{}"
        return "{\n" + "".join(f"{pad}[{_lua_str(str(k))}] = {lua_literal(v, indent + 1)},\n"
                               for k, v in items) + end + "}"
    raise TypeError(f"cannot render {type(obj).__name__} for Lua")


def _lua_str(s: str) -> str:
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c.isascii() and (c.isalnum() or c in " -_.,:;/@#()[]{}=+*!?'<>|~^&$%"):
            out.append(c)
        else:
            out.append("\\%03d" % b)
    return '"' + "".join(out) + '"'


@dataclass(frozen=True)
class RenderedJobSubmit:
    text: str
    #: plugin policies enforced by the CLI only (they have no Lua twin)
    cli_only: tuple[str, ...]


def render_job_submit(site: "Site", fabric: "Fabric | None" = None, usage_file: str | None = None,
                      audit_log: str | None = None, usage_ttl: int = 60, enforce: bool = True) -> RenderedJobSubmit:
    """`enforce=False` renders shadow mode: every decision is logged and audited, no job is refused or changed."""
    import jinja2

    from slurmtools.policy.base import load_policies, partition_shapes, tier_node_limits
    from slurmtools.policy.builtin import MESSAGES, SIGNAL_NUMBERS
    from slurmtools.policy.fingerprint import policy_hash
    from slurmtools.policy.directives import SBATCH_ALIASES, SBATCH_LONG, SBATCH_SHORT
    from slurmtools.policy.request import ABSURD, COUNT_SUFFIX

    policies = load_policies(site, fabric)
    rules = [{"kind": p.name, "params": p.params} for p in policies if p.lua]
    cli_only = tuple(p.name for p in policies if not p.lua)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    tmpl = env.from_string(TEMPLATE.read_text())
    text = tmpl.render(
        policy_hash=_lua_str(policy_hash(site, fabric)),
        site_name=_comment(site.name), site_source=_comment(str(site.source)), site_name_lua=_lua_str(site.name),
        rules=lua_literal(rules), messages=lua_literal(MESSAGES), signal_numbers=lua_literal(SIGNAL_NUMBERS),
        usage_file=lua_literal(usage_file), audit_log=lua_literal(audit_log), usage_ttl=int(usage_ttl),
        enforce="true" if enforce else "false", fail_mode=_lua_str(site.policy.fail_mode),
        sbatch_long=lua_literal(SBATCH_LONG), sbatch_long_order=lua_literal(list(SBATCH_LONG)),
        sbatch_short=lua_literal(SBATCH_SHORT), sbatch_aliases=lua_literal(SBATCH_ALIASES), absurd=int(ABSURD),
        count_suffix=lua_literal(COUNT_SUFFIX), partition_shapes=lua_literal(partition_shapes(site, fabric)),
        default_partition=_lua_str(site.default_partition.name), tier_nodes=lua_literal(tier_node_limits(site)),
        default_qos=_lua_str(site.default_tier),
    )
    if cli_only:
        note = "-- CLI-only policies (no Lua twin, not enforced here): " + _comment(", ".join(cli_only)) + "\n"
        text = note + text
    return RenderedJobSubmit(text=text, cli_only=cli_only)


def _comment(s: str) -> str:
    return s.replace("\n", " ").replace("\r", " ")
