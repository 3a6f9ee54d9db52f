"""Which sbatch options pyslurm 25.11.2 carries to the controller as sbatch would, and how.

Pure. `JobSubmitDescription.load_sbatch_options` reads `#SBATCH` lines only from a file, cuts every value at a `#`,
drops options it does not know without a word, breaks on `--switches` (a NameError in 25.11.2) and has no
`gpus_per_node`. So slurmtools reads the options itself, by sbatch's rules (directives before the first command,
the command line last), and hands pyslurm only options in `CARRIED`: each one checked in the 25.11 lab to give the
controller the same job as sbatch (`tests/integration/test_backends_lab.py`). Anything else raises `NotCarried`
naming the option; the backend then submits that job with sbatch, so nothing a user asked for is lost.
"""

from __future__ import annotations

import shlex
import signal
from dataclasses import dataclass
from typing import Callable, Sequence


class NotCarried(Exception):
    """An option (or form) pyslurm would not pass on as sbatch does; the message names it."""


@dataclass(frozen=True)
class Carried:
    short: str | None  # "J" for -J
    attr: str  # JobSubmitDescription attribute
    #: value -> attribute value; None for a flag, whose attribute value is `flag`
    convert: Callable[[str], object] | None = str
    flag: object = None


def _gpus_per_node(v: str) -> str:
    # sbatch puts --gpus-per-node=[type:]N into tres_per_node as gres/gpu:[type:]N, the same field as --gres
    return f"gpu:{v}"


def _int(v: str) -> int:
    if not v.isdigit():
        raise NotCarried(f"a value {v!r} that is not a whole number")
    return int(v)


def _minutes(v: str) -> object:
    # pyslurm 25.11.2 hands a plain number through as text, which its C layer refuses ("an integer is required")
    return int(v) if v.isdigit() else v


def _gres_flags(v: str) -> str:
    if v not in ("enforce-binding", "disable-binding"):
        raise NotCarried(f"--gres-flags={v}")
    return v


def _open_mode(v: str) -> str:
    if v not in ("append", "truncate"):
        raise NotCarried(f"--open-mode={v}")
    return v


def _signal(v: str) -> dict:
    """sbatch's `--signal=[{R|B}:]SIG[@TIME]` as the dict pyslurm sends unchanged (its own reading of the string
    form wants `SIGUSR1`, and breaks on the time)."""
    flags, _, rest = v.rpartition(":")
    sig, at, when = rest.partition("@")
    if flags.upper().strip("RB") or not sig or (at and not when.isdigit()):
        raise NotCarried(f"--signal={v}")
    name = sig.upper()
    try:
        num = int(sig) if sig.isdigit() else signal.Signals[name if name.startswith("SIG") else "SIG" + name].value
    except KeyError:
        raise NotCarried(f"--signal={v} (unknown signal)") from None
    out = {"signal": num, "time": int(when) if at else 60}
    if "B" in flags.upper():
        out["batch_only"] = True
    if "R" in flags.upper():
        out["allow_reservation_overlap"] = True
    return out


def _gres(v: str) -> str:
    # pyslurm needs a count on every item (`gpu:h100:2`); `gpu` alone means 1 to sbatch
    items = []
    for item in v.split(","):
        parts = item.split(":")
        if parts[-1].isdigit() and len(parts) >= 2:
            items.append(item)
        else:
            raise NotCarried(f"--gres={v} (an item without a count)")
    return ",".join(items)


CARRIED: dict[str, Carried] = {
    "account": Carried("A", "account"),
    "job-name": Carried("J", "name"),
    "partition": Carried("p", "partitions"),
    "qos": Carried("q", "qos"),
    "time": Carried("t", "time_limit", _minutes),
    "nodes": Carried("N", "nodes"),
    "ntasks": Carried("n", "ntasks", _int),
    "cpus-per-gpu": Carried(None, "cpus_per_gpu", _int),
    "gres": Carried(None, "gres_per_node", _gres),
    "gpus-per-node": Carried(None, "gres_per_node", _gpus_per_node),
    "gpus": Carried("G", "gpus"),
    "gres-flags": Carried(None, "gres_binding", _gres_flags),
    "nodelist": Carried("w", "required_nodes"),
    "exclude": Carried("x", "excluded_nodes"),
    "output": Carried("o", "standard_output"),
    "error": Carried("e", "standard_error"),
    "chdir": Carried("D", "working_directory"),
    "open-mode": Carried(None, "log_files_open_mode", _open_mode),
    "requeue": Carried(None, "is_requeueable", None, True),
    "no-requeue": Carried(None, "is_requeueable", None, False),
    "hold": Carried("H", "priority", None, 0),
    "exclusive": Carried(None, "resource_sharing", None, "no"),
    "signal": Carried(None, "signal", _signal),
    "comment": Carried(None, "comment"),
    "mem": Carried(None, "memory_per_node"),
    "mem-per-cpu": Carried(None, "memory_per_cpu"),
    "constraint": Carried("C", "constraints"),
    "array": Carried("a", "array"),
    "dependency": Carried("d", "dependencies"),
    "segment": Carried(None, "segment_size", _int),
}
_SHORT = {c.short: name for name, c in CARRIED.items() if c.short}


def directive_words(script: str) -> list[str]:
    """The words of the script's directives, by sbatch's own rules (25.11's opt.c): a line that starts with
    `#SBATCH` (or the old `#SLURM`) at its first character; other lines whose first non-blank is `#`, and blank
    lines, are skipped; any other line ends the directives. Quotes group, a backslash escapes, and an unquoted `#`
    ends the line. (The policy layer reads scripts as job_submit.lua does, which is its own contract.)"""
    words: list[str] = []
    for i, line in enumerate(script.splitlines()):
        if line.startswith("#SBATCH"):
            body = line[len("#SBATCH"):]
        elif line.startswith("#SLURM"):
            body = line[len("#SLURM"):]
        elif line.lstrip()[:1] in ("", "#"):
            continue
        else:
            break
        try:
            lexer = shlex.shlex(body, posix=True, punctuation_chars=False)
            lexer.whitespace_split = True
            lexer.commenters = "#"
            words += list(lexer)
        except ValueError as exc:
            raise NotCarried(f"#SBATCH line {i + 1} ({exc})") from None
    return words


def parse_words(words: Sequence[str]) -> list[tuple[str, str | None]]:
    """(long option name, value or None) in order; NotCarried at the first option not in CARRIED."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--") and len(w) > 2:
            name, eq, val = w[2:].partition("=")
            value: str | None = val if eq else None
        elif w.startswith("-") and len(w) >= 2 and w != "--":
            if w[1] not in _SHORT:
                raise NotCarried(w)
            name, value = _SHORT[w[1]], (w[2:] or None)
        else:
            # a script path or its arguments: sbatch's own business
            raise NotCarried(f"the argument {w!r}")
        spec = CARRIED.get(name)
        if spec is None:
            raise NotCarried(f"--{name}")
        if spec.convert is None:
            if value is not None:
                raise NotCarried(f"--{name}={value}")
        elif value is None:
            if i + 1 >= len(words):
                raise NotCarried(f"--{name} without a value")
            i += 1
            value = words[i]
        out.append((name, value))
        i += 1
    return out


def submit_kwargs(script: str, options: Sequence[str]) -> dict[str, object]:
    """JobSubmitDescription keyword arguments for `script` submitted with `options` (which win over the script's
    directives, as on sbatch's command line). NotCarried names what pyslurm would not pass on faithfully."""
    kwargs: dict[str, object] = {}
    for name, value in parse_words(directive_words(script)) + parse_words(list(options)):
        spec = CARRIED[name]
        if spec.convert is not None and not value:
            raise NotCarried(f"--{name} with an empty value")
        kwargs[spec.attr] = spec.flag if spec.convert is None else spec.convert(value or "")
    # what sbatch fills in itself (measured against 25.11.7's sbatch): the name of a script read from standard
    # input, and one task per node when no task count is given (pyslurm would ask for one task in all)
    kwargs.setdefault("name", "sbatch")
    nodes = str(kwargs.get("nodes", ""))
    if "ntasks" not in kwargs and nodes:
        low = nodes.split("-", 1)[0]
        kwargs["ntasks"] = _int(low)
    elif int(kwargs.get("ntasks", 1)) > 1 and not nodes:
        # pyslurm fixes such a job to exactly one node; sbatch lets the controller spread the tasks
        raise NotCarried("--ntasks without --nodes")
    return kwargs
