"""Rendering plans into sbatch scripts through Jinja2 templates found on a search path.

Search order: each folder in $SLURMTOOLS_TEMPLATE_PATH (os.pathsep-separated), then `job_templates/` beside the
site file, then the bundled `job_templates/`. A template's first line is a Jinja comment holding its metadata as
JSON: `{#- slurmtools: {"description": "...", "tasks": "per-node", "multi_node": true, "array": false} -#}`.

Safety: every user-supplied string reaches the script through `sh` (shell quoting; line breaks and other
control characters become $'\\n' escapes, so no value can start a new line), and a finalize hook refuses any
rendered value that still holds a line break, so a site template that forgets `|sh` fails loudly instead of
letting a value add an #SBATCH line.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from slurmtools.errors import ConfigError
from slurmtools.planner.plan import Plan, TemplateShape

SUFFIX = ".sbatch.j2"
_META = re.compile(r"^\{#-?\s*slurmtools:\s*(\{.*\})\s*-?#\}")


@dataclass(frozen=True)
class TemplateInfo:
    name: str
    path: Path
    description: str
    shape: TemplateShape
    origin: str  # "env", "site" or "bundled"


def search_path(site_source: Path | None = None) -> list[tuple[Path, str]]:
    from slurmtools.resources import bundled

    out: list[tuple[Path, str]] = []
    for d in os.environ.get("SLURMTOOLS_TEMPLATE_PATH", "").split(os.pathsep):
        if d.strip():
            out.append((Path(d).expanduser(), "env"))
    if site_source is not None:
        out.append((Path(site_source).resolve().parent / "job_templates", "site"))
    try:
        out.append((bundled("job_templates"), "bundled"))
    except FileNotFoundError:
        pass
    return out


def read_info(path: Path, origin: str) -> TemplateInfo | None:
    """Metadata of one template file; None for helper files (no metadata or "abstract": true)."""
    try:
        first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), "", f"cannot read template: {exc}") from None
    m = _META.match(first)
    if not m:
        return None
    try:
        meta = json.loads(m.group(1))
    except json.JSONDecodeError as exc:
        raise ConfigError(str(path), "line 1", f"template metadata is not valid JSON: {exc.msg}") from None
    if not isinstance(meta, dict) or meta.get("abstract"):
        return None
    tasks = meta.get("tasks", "per-node")
    if tasks not in ("per-node", "per-gpu"):
        raise ConfigError(str(path), "line 1: tasks", f'expected "per-node" or "per-gpu", got {tasks!r}')
    name = path.name[: -len(SUFFIX)]
    shape = TemplateShape(name=name, tasks=tasks, multi_node=bool(meta.get("multi_node", True)),
                          array=bool(meta.get("array", False)))
    return TemplateInfo(name, path, str(meta.get("description", "")), shape, origin)


def list_templates(site_source: Path | None = None) -> list[TemplateInfo]:
    """Every template on the search path; an earlier folder's template hides a later one of the same name."""
    seen: dict[str, TemplateInfo] = {}
    for d, origin in search_path(site_source):
        if not d.is_dir():
            if origin == "env":  # a folder someone named: skipping it would plan with another template silently
                why = "not a folder" if os.path.lexists(d) else "no such folder"
                raise ConfigError("$SLURMTOOLS_TEMPLATE_PATH", "", f"{d}: {why}")
            continue
        for p in sorted(d.glob("*" + SUFFIX)):
            info = read_info(p, origin)
            if info and info.name not in seen:
                seen[info.name] = info
    return sorted(seen.values(), key=lambda t: t.name)


def find_template(name: str, site_source: Path | None = None,
                  where: tuple[str, str] = ("request", "--template")) -> TemplateInfo:
    """The template called `name` on the search path; `where` names what gave the name (the option or argument)
    in the error."""
    templates = list_templates(site_source)
    for t in templates:
        if t.name == name:
            return t
    known = ", ".join(t.name for t in templates)
    path = " (a template is named, not a path)" if "/" in name or name.startswith(".") else ""
    raise ConfigError(*where, f"unknown template {name!r}{path} (known: {known})")


def default_template(gpus: int | None, nodes: int | None, per_node: int, sweep: bool) -> str:
    """The template that fits a job's shape when none is named."""
    if sweep:
        return "array"
    multi = (nodes or 1) > 1 or (gpus or 0) > per_node
    return "torchrun" if multi else "python"


def sh(value: object) -> str:
    """Quote one word for bash. Control characters (newline, CR, tab, ...) become $'...' escapes, so the
    quoted word is always a single line."""
    s = str(value)
    if "\0" in s:
        raise ConfigError("request", "value", "a NUL character cannot be passed to a program")
    if s.isprintable():
        return shlex.quote(s)
    out = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == "'":
            out.append("\\'")
        elif ch.isprintable():
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8"))
    return "$'" + "".join(out) + "'"


def sh_words(text: object) -> str:
    """A command line given as one string (a launcher such as "python3 fake_torchrun.py"), split like the
    shell would and re-quoted word by word."""
    try:
        words = shlex.split(str(text))
    except ValueError as exc:
        raise ConfigError("request", "--var", f"cannot split {text!r} into words: {exc}") from None
    return " ".join(sh(w) for w in words)


class Trusted(str):
    """Multi-line text written by slurmtools itself (the checkpoint wiring), allowed through the finalize hook."""


def _finalize(value: object) -> object:
    if isinstance(value, str) and not isinstance(value, Trusted) and ("\n" in value or "\r" in value):
        raise ConfigError("template", "", "a value with a line break reached the script unquoted "
                                          "(use the |sh filter in the template)")
    return "" if value is None else value


def environment(dirs: Sequence[Path]):
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader([str(d) for d in dirs]), autoescape=False,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True,
                             lstrip_blocks=True, finalize=_finalize)
    env.filters["sh"] = sh
    env.filters["shwords"] = sh_words
    env.filters["nwords"] = lambda text: len(shlex.split(str(text)))
    return env


def checkpoint_wiring() -> str:
    """The checkpoint-on-signal bash wiring from `slurmtools.checkpoint`, inlined so the job needs no install."""
    try:
        from slurmtools.checkpoint import wiring_path

        return wiring_path().read_text(encoding="utf-8").rstrip("\n")
    except (ImportError, OSError):
        from slurmtools.resources import bundled

        return (bundled("job_templates") / "_checkpoint_wiring.sh").read_text(encoding="utf-8").rstrip("\n")


def launcher_guard(plan: Plan) -> str:
    """Shell code a launcher template puts before `exec LAUNCHER` in each task: `trap "" USR1; ` when the warning
    signal is one that ends a process by default (USR1, USR2), else nothing.

    Why: srun passes USR1/USR2 to every process of the step, the launcher too, and torchrun (so accelerate and
    deepspeed) has no handler for them: measured in the lab, USR1 killed torchrun and the job ended FAILED. An
    ignored signal stays ignored across exec, so the launcher lives on; a training process that handles it
    (slurmtools.checkpoint) installs its own handler over the inherited "ignore"."""
    from slurmtools.warning_signals import KILLS_BY_DEFAULT

    sig = plan.checkpoint_signal
    return f'trap "" {sig}; ' if plan.preemptible and sig in KILLS_BY_DEFAULT else ""


def render(plan: Plan, info: TemplateInfo, site_source: Path | None = None) -> str:
    """The sbatch script for `plan` from template `info`."""
    import jinja2

    if not plan.request.command:
        raise ConfigError("request", "command", "give the command to run after --, e.g. -- python train.py")
    dirs = [d for d, _ in search_path(site_source) if d.is_dir()]
    if info.path.parent not in dirs:
        dirs.insert(0, info.path.parent)
    env = environment(dirs)
    ctx = {
        "plan": plan,
        "directives": [d.text for d in plan.directives],
        "env": list(plan.env),
        "cmd": " ".join(sh(w) for w in plan.request.command),
        "vars": plan.request.vars,
        "sweep": [" ".join(sh(a) for a in args) for args in plan.request.sweep],
        "wiring": Trusted(checkpoint_wiring()) if plan.preemptible else "",
        "explanation": [f"{d.text}: {d.why}" for d in plan.directives],
        "run": lambda line: f"slurmtools_run {line}" if plan.preemptible else line,
        "guard": launcher_guard(plan),
    }
    try:
        # load from the template's own folder first so a same-named template earlier on the path cannot shadow it
        tmpl = env.get_template(info.path.name)
        text = tmpl.render(**ctx)
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(str(exc.filename or info.path), f"line {exc.lineno}", exc.message or "syntax error") from None
    except jinja2.UndefinedError as exc:
        raise ConfigError(str(info.path), "", f"template uses an undefined value: {exc.message}") from None
    check_script(text, plan)
    return text


def check_script(text: str, plan: Plan) -> None:
    """Belt and braces: the #SBATCH lines of the script must be exactly the plan's directives."""
    want = ["#SBATCH " + d.text for d in plan.directives]
    got = [ln for ln in text.splitlines() if ln.lstrip().startswith("#SBATCH")]
    if got != want:
        extra = [g for g in got if g not in want]
        raise ConfigError("template", "", f"rendered #SBATCH lines differ from the plan: {extra or got}")


def directive_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.lstrip().startswith("#SBATCH")]


def names(infos: Iterable[TemplateInfo]) -> list[str]:
    return [i.name for i in infos]
