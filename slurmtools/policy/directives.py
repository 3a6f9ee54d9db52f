"""How sbatch reads its options: the option table as data, and two small readers that the generated
job_submit.lua mirrors line by line (`slurmtools/policy/job_submit.lua.j2`: script_words, getopt).

Facts from Slurm's source (25.11.7 src/sbatch/opt.c and src/common/slurm_opt.c; checked on 22.05 in the lab):
directives are the lines that *begin* with `#SBATCH` or `#SLURM` (column 0, that case), read until the first line
holding a command (its first non-blank character is not `#`); a directive's text is cut into words (blanks
separate, quotes group, a backslash keeps the next character, an unquoted `#` ends the line, a word may not begin
with `:`); the words of all lines form one argument list that getopt_long reads in "+" mode (the first word that
is not an option ends it, and sbatch then refuses the script). So an option's value can be the next word
(`--comment --signal=...` is a comment), a long option may be shortened to any unambiguous prefix (`--sig=USR1`),
and short options bundle (`-vJname`). Lines after a `#SBATCH hetjob` separator belong to the next component of a
heterogeneous job and do not count for the first.
"""

from __future__ import annotations

#: sbatch's long options (Slurm 25.11): 0 = no value, 1 = value required, 2 = value optional (`--opt=value` only)
SBATCH_LONG = {"account": 1, "acctg-freq": 1, "array": 1, "autocomplete": 1, "batch": 1, "begin": 1, "bb": 1, "bbf":
    1, "cluster-constraint": 1, "chdir": 1, "cluster": 1, "clusters": 1, "comment": 1, "consolidate-segments": 0,
    "container": 1, "container-id": 1, "context": 1, "contiguous": 0, "constraint": 1, "core-spec": 1,
    "cores-per-socket": 1, "cpu-freq": 1, "cpus-per-gpu": 1, "cpus-per-task": 1, "deadline": 1, "delay-boot": 1,
    "dependency": 1, "distribution": 1, "error": 1, "exclude": 1, "exclusive": 2, "export": 1, "export-file": 1,
    "external": 0, "extra": 1, "extra-node-info": 1, "get-user-env": 0, "gid": 1, "gpu-bind": 1, "gpu-freq": 1,
    "gpus": 1, "gpus-per-node": 1, "gpus-per-socket": 1, "gpus-per-task": 1, "gres": 1, "gres-flags": 1, "help": 0,
    "hint": 1, "hold": 0, "ignore-pbs": 0, "input": 1, "job-name": 1, "kill-on-invalid-dep": 1, "licenses": 1,
    "mail-type": 1, "mail-user": 1, "mcs-label": 1, "mem": 1, "mem-bind": 1, "mem-per-cpu": 1, "mem-per-gpu": 1,
    "mincpus": 1, "network": 1, "nice": 2, "no-kill": 2, "no-requeue": 0, "nodefile": 1, "nodelist": 1, "nodes": 1,
    "ntasks": 1, "ntasks-per-core": 1, "ntasks-per-gpu": 1, "ntasks-per-node": 1, "ntasks-per-socket": 1,
    "ntasks-per-tres": 1, "oom-kill-step": 2, "open-mode": 1, "output": 1, "overcommit": 0, "oversubscribe": 0,
    "parsable": 0, "partition": 1, "prefer": 1, "priority": 1, "profile": 1, "propagate": 2, "qos": 1, "quiet": 0,
    "reboot": 0, "requeue": 2, "resources": 1, "reservation": 1, "resv-ports": 2, "segment": 1, "signal": 1,
    "sockets-per-node": 1, "spread-job": 0, "spread-segments": 0, "stepmgr": 0, "switches": 1, "tasks-per-node": 1,
    "test-only": 0, "thread-spec": 1, "threads-per-core": 1, "time": 1, "time-min": 1, "tmp": 1, "tres-bind": 1,
    "tres-per-task": 1, "uid": 1, "use-min-nodes": 0, "verbose": 0, "version": 0, "usage": 0, "wait": 0,
    "wait-all-nodes": 1, "wckey": 1, "wrap": 1}
SBATCH_SHORT = {"A": "account", "a": "array", "b": "begin", "D": "chdir", "M": "clusters", "C": "constraint", "S":
    "core-spec", "c": "cpus-per-task", "d": "dependency", "m": "distribution", "e": "error", "x": "exclude", "B":
    "extra-node-info", "G": "gpus", "h": "help", "H": "hold", "i": "input", "J": "job-name", "L": "licenses", "k":
    "no-kill", "F": "nodefile", "w": "nodelist", "N": "nodes", "n": "ntasks", "o": "output", "O": "overcommit", "s":
    "oversubscribe", "p": "partition", "q": "qos", "Q": "quiet", "t": "time", "v": "verbose", "V": "version", "W":
    "wait"}

#: where Slurm 22.05.8's sbatch differs from SBATCH_LONG (probed: tests/data/slurm/sbatch-22.05.8-options.tsv): the
#: option's kind there, None where 22.05 has no such option. The directives of a 22.05 script are read with 25.11's
#: table all the same, because no difference can make us see a `--signal` that sbatch 22.05 does not set:
#: - an option 22.05 lacks (None) makes sbatch 22.05 refuse the whole script, so no job exists to admit;
#: - `power` (22.05 only) is unknown to us: we find no signal and refuse a script 22.05 would take (strict side);
#: - `requeue` (no value in 22.05, optional in 25.11) and `get-user-env` (optional in 22.05, none in 25.11) differ
#:   only in `--opt=value`, which never takes the next word: 22.05 refuses `--requeue=x` (no job), we refuse
#:   `--get-user-env=x` (strict side); without `=` both read the same words;
#: - a long option's prefix resolves to the same option in both or is unknown/ambiguous in one of them (checked by
#:   tests/hostile/test_admission_sbatch_2205.py over every prefix), and the short options are the same
#:   (22.05's `--usage` shows `-r n`, which its getopt refuses as an invalid option).
SBATCH_22_05 = {"autocomplete": None, "consolidate-segments": None, "container-id": None, "external": None,
                "get-user-env": 2, "oom-kill-step": None, "power": 1, "requeue": 0, "resources": None,
                "resv-ports": None, "segment": None, "spread-segments": None, "stepmgr": None, "tres-bind": None,
                "tres-per-task": None}

#: long options that are one option under two names (the same getopt `val`, so a prefix of both is no ambiguity)
SBATCH_ALIASES = {"tasks-per-node": "ntasks-per-node"}
#: what separates the components of a heterogeneous job in a script (case-insensitive, then a blank or the end)
HET_SEPARATORS = ("hetjob", "packjob")
_BLANK = " \t\n\v\f\r"  # C isspace() in the C locale


class DirectiveError(ValueError):
    """What sbatch refuses in a script's directives or an option list; one line."""


def canonical(name: str) -> str:
    return SBATCH_ALIASES.get(name, name)


def script_words(script: str) -> list[str]:
    """The words of the first component's directives, in order, as sbatch's get_argument cuts them."""
    words: list[str] = []
    for lineno, line in enumerate(script.split("\n"), 1):
        if line.startswith("#SBATCH"):
            rest = line[7:]
        elif line.startswith("#SLURM"):
            rest = line[6:]
        else:
            body = line.lstrip(_BLANK)
            if body and not body.startswith("#"):
                break  # the first command ends the directives
            continue
        if _het_separator(rest.lstrip(_BLANK), 0):
            break  # the next component's directives
        words.extend(_line_words(rest, lineno))
    return words


def _het_separator(text: str, i: int) -> int:
    """Length of a `hetjob`/`packjob` word at text[i] (any ASCII case, then a blank or the end), else 0."""
    low = "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text[i:i + 7])
    for sep in HET_SEPARATORS:
        end = i + len(sep)
        if low.startswith(sep) and (end == len(text) or text[end] in _BLANK):
            return len(sep)
    return 0


def _line_words(text: str, lineno: int) -> list[str]:
    out: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _BLANK:
            i += 1
        if i >= n:
            return out
        sep = _het_separator(text, i)
        if sep:  # get_argument blanks a separator word wherever it stands
            i += sep
            continue
        if text[i] == ":":
            raise DirectiveError(f"#SBATCH line {lineno}: a word may not begin with ':' (sbatch refuses it)")
        word: list[str] = []
        quote = ""
        started = False
        while i < n and (quote or text[i] not in _BLANK):
            c = text[i]
            if c == "\\":
                i += 1
                if i < n and (quote or text[i] not in _BLANK):
                    word.append(text[i])
                    started = True
                    i += 1
                elif i < n and text[i] == " ":
                    word.append(" ")
                    started = True
                    i += 1
                continue
            if quote:
                if c == quote:
                    quote = ""
                    i += 1
                    continue
            elif c in "\"'":
                quote = c
                i += 1
                continue
            elif c == "#":
                if started:
                    out.append("".join(word))
                return out
            word.append(c)
            started = True
            i += 1
        if quote:
            raise DirectiveError(f"#SBATCH line {lineno}: unmatched {quote} (sbatch refuses the script)")
        if not started:
            return out
        out.append("".join(word))


def getopt(words: list[str]) -> tuple[list[tuple[str, str | None, str]], list[str]]:
    """(long option name, value or None, the option as written) in order, and the words after the options (glibc
    getopt_long in "+" mode)."""
    out: list[tuple[str, str | None, str]] = []
    i, n = 0, len(words)
    while i < n:
        w = words[i]
        if w == "--":
            return out, words[i + 1:]
        if not w.startswith("-") or w == "-":
            return out, words[i:]
        if w.startswith("--"):
            name, eq, val = w[2:].partition("=")
            full = _long_name(name, w)
            kind = SBATCH_LONG[full]
            value: str | None = None
            if eq:
                if kind == 0:
                    raise DirectiveError(f"--{name}: takes no value")
                value = val
            elif kind == 1:
                if i + 1 >= n:
                    raise DirectiveError(f"--{name}: needs a value")
                i += 1
                value = words[i]
            out.append((canonical(full), value, "--" + name))
        else:
            j = 1
            while j < len(w):
                c = w[j]
                full = SBATCH_SHORT.get(c)
                if full is None:
                    raise DirectiveError(f"-{c}: unknown sbatch option")
                kind = SBATCH_LONG[full]
                if kind == 0:
                    out.append((full, None, "-" + c))
                    j += 1
                    continue
                value = w[j + 1:] or None
                if value is None and kind == 1:
                    if i + 1 >= n:
                        raise DirectiveError(f"-{c}: needs a value")
                    i += 1
                    value = words[i]
                out.append((full, value, "-" + c))
                break
        i += 1
    return out, []


def _long_name(name: str, word: str) -> str:
    if name in SBATCH_LONG:
        return name
    hits = [k for k in SBATCH_LONG if k.startswith(name)]
    if not hits:
        raise DirectiveError(f"--{name}: unknown sbatch option")
    if len({(SBATCH_LONG[k], canonical(k)) for k in hits}) > 1:
        raise DirectiveError(f"--{name}: ambiguous sbatch option (--" + ", --".join(hits) + ")")
    return hits[0]


def script_options(script: str) -> list[tuple[str, str | None, str]]:
    """The options sbatch takes from a script's directives; DirectiveError where sbatch refuses the script."""
    opts, rest = getopt(script_words(script))
    if rest:
        raise DirectiveError(f"#SBATCH {rest[0]!r}: not an option (sbatch refuses the script: Invalid directive)")
    return opts


def script_signal_value(script: str) -> str | None:
    """The value of the last --signal among the script's directives; None without one, or when sbatch would refuse
    the directives (a job whose script sbatch did not read has no signal from it)."""
    try:
        opts = script_options(script)
    except DirectiveError:
        return None
    found = None
    for name, value, _ in opts:
        if name == "signal":
            found = value
    return found
