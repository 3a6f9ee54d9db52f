"""The `slurmtools` entry point: answers `--help` and `--version` from prebuilt text, everything else through typer.

Why: importing typer costs about 5x a bare Python start-up, and typer builds a pydantic adapter for every option
of the command it shows, so `slurmtools plan --help` took about 15x. The text served here is typer's own output,
captured by `python -m slurmtools.cli.helpgen` into `_help_texts.py`, and served only while it is provably the
same: the sources that built it (every slurmtools module loaded while the app was built, typer's version, the
Python release) hash to the key stored with it, the terminal is at least as wide as the capture's, the program
name is one captured, and no variable that changes typer's output is set. Anything else goes to typer, so a stale
or missing capture costs speed, never truth. `tests/unit/test_cli_imports.py` compares every capture with typer.

Commands in `DIRECT` are run the same way when typer would only parse their line: their body lives in a typer-free
module, and `direct` reads the command line with the grammar typer declared for them (captured beside the help,
under the same key). A line it does not read exactly as click would (an unknown, repeated or abbreviated option, a
value that looks like an option, an extra word) goes to typer, so typer still gives every usage error.

Standard library only, and little of it: this module runs before anything else on every command.
"""

import os
import sys

#: the width the captures were made at; click wraps help at min(terminal columns, 80) - 2
CAPTURE_COLUMNS = 80
#: variables that change what typer or click print (rich mode, forced widths and colours): any set -> typer
_TYPER_ENV = ("TYPER_USE_RICH", "TERMINAL_WIDTH", "FORCE_COLOR", "PY_COLORS", "NO_COLOR", "GITHUB_ACTIONS",
              "_TYPER_FORCE_DISABLE_TERMINAL", "_TYPER_STANDARD_TRACEBACK", "TYPER_STANDARD_TRACEBACK")


#: commands whose body runs without typer: "group command" -> (module, function taking the options by name)
DIRECT = {"cluster show": ("slurmtools.cli.cluster_show", "show"), "plan": ("slurmtools.cli.plan_cmd", "plan")}


def run() -> None:
    """Serve a prebuilt answer when one is valid, run a direct command when its line is read exactly, else run the
    typer app."""
    args = sys.argv[1:]
    text = prebuilt(args)
    if text is not None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    call = direct(args)
    if call is not None and call[1].get("backend") is not None:
        from slurmtools.slurm.backends import force

        if not force(call[1]["backend"]):
            call = None  # typer names the bad value
    if call is None:
        from slurmtools.cli.main import run as full

        full()
        return
    path, _, options = call
    import importlib

    module, func = DIRECT[path]
    guarded(lambda: getattr(importlib.import_module(module), func)(**options))


def guarded(body) -> None:
    """Run a command: a slurmtools error ends it in one line on stderr and its exit code, Ctrl-C in 130, a closed
    pipe on stdout quietly in 1 (as click ends typer's commands)."""
    from slurmtools.errors import SlurmtoolsError, one_line

    try:
        body()
    except SlurmtoolsError as exc:
        sys.stdout.flush()
        sys.stderr.write(f"slurmtools: error: {one_line(str(exc))}\n")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("slurmtools: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        # the reader went away (`| head`): no traceback, and none at exit when Python flushes stdout again; exit 1
        # without a word, as click does for the commands typer runs
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)


def direct(args: list[str]) -> tuple[str, dict, dict] | None:
    """("group command", root options, the command's options with typer's defaults) when `args` names a command
    in `DIRECT` and every word is read as click would read it with the captured grammar; else None."""
    if os.environ.get("SLURMTOOLS_DIRECT") == "0" or any(k in os.environ for k in _TYPER_ENV):
        return None
    try:
        from slurmtools.cli import _help_texts as h
    except ImportError:
        return None
    grammar = getattr(h, "GRAMMAR", {})
    root: dict = {}
    i = _options(args, 0, grammar.get("", {}), root, stop_at_word=True)
    if i is None:
        return None
    path = next((p for p in DIRECT if p in grammar and args[i:i + len(p.split())] == p.split()), None)
    if path is None:
        return None
    given: dict = {}
    if _options(args, i + len(path.split()), grammar[path], given, stop_at_word=False) != len(args):
        return None
    if source_key(h.SOURCES) != h.KEY:
        return None
    options = {dest: default for dest, _, default in grammar[path].values()}
    options.update(given)
    return path, root, options


def _options(args: list[str], i: int, grammar: dict, out: dict, stop_at_word: bool) -> int | None:
    """Read options from args[i:] into out (dest -> value); the index of the first word that is not one (only
    where `stop_at_word`), or None at anything click might read otherwise. A command's positional words (grammar
    key "--") are the words not starting with "-", and every word after "--", as click reads them."""
    words = grammar.get("--")
    while i < len(args):
        word = args[i]
        if not word.startswith("-"):
            if stop_at_word:
                return i
            if words is None:
                return None
            out.setdefault(words[0], []).append(word)
            i += 1
            continue
        if word == "--":
            if stop_at_word or words is None:
                return None
            if i + 1 < len(args):      # nothing after it: no words at all, as typer passes them (None)
                out.setdefault(words[0], []).extend(args[i + 1:])
            return len(args)
        if not word.startswith("--"):
            return None
        name, eq, value = word.partition("=")
        spec = grammar.get(name)
        if spec is None or name == "--":
            return None
        dest, kind, _ = spec
        if kind != "list" and dest in out:
            return None
        if kind == "flag":
            if eq:
                return None
            out[dest] = True
            i += 1
            continue
        if not eq:
            i += 1
            if i == len(args):
                return None
            value = args[i]
        if not value or value.startswith("-"):
            return None
        if kind == "int":
            if not (value.isascii() and value.isdigit()):
                return None
            out[dest] = int(value)
        elif kind == "list":
            out.setdefault(dest, []).append(value)
        else:
            out[dest] = value
        i += 1
    return None if stop_at_word else i


def prebuilt(args: list[str]) -> str | None:
    """The captured output for `args`, or None when it may differ from what typer would print now."""
    if not args or (args[-1] != "--help" and args != ["--version"]):
        return None
    if os.environ.get("SLURMTOOLS_PREBUILT_HELP") == "0" or any(k in os.environ for k in _TYPER_ENV):
        return None
    if _columns() < CAPTURE_COLUMNS:
        return None
    try:
        from slurmtools.cli import _help_texts as h
    except ImportError:
        return None
    texts = h.TEXTS.get(program_name())
    if texts is None:
        return None
    text = texts.get(" ".join(args))
    if text is None or not _ascii_or_utf8(text):
        return None
    if source_key(h.SOURCES) != h.KEY:
        return None
    return text


def program_name() -> str:
    """What click shows after `Usage:` (its `_detect_program_name`): the script's file name, or `python -m pkg`."""
    main = sys.modules.get("__main__")
    path = sys.argv[0] if sys.argv else ""
    pkg = getattr(main, "__package__", None)
    if pkg in (None, ""):
        return os.path.basename(path)
    name = os.path.splitext(os.path.basename(path))[0]
    mod = pkg if name == "__main__" else f"{pkg}.{name}"
    return f"python -m {mod.lstrip('.')}"


def source_key(sources: tuple[str, ...]) -> str:
    """A checksum of the files the captures were built from (slurmtools modules by path under the package's
    parent folder, `typer` by its `__init__.py` found on sys.path) and of the Python release; "" if one is
    missing, which never equals a stored key."""
    import zlib

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    crc = zlib.crc32(("%d.%d" % sys.version_info[:2]).encode())
    for rel in sources:
        path = _typer_init() if rel == "typer" else os.path.join(root, rel)
        try:
            with open(path or "", "rb") as f:
                data = f.read()
        except OSError:
            return ""
        crc = zlib.crc32(rel.encode() + b"\0" + data, crc)
    return "%08x" % crc


def _typer_init() -> str | None:
    """typer's `__init__.py` (it holds typer's version), found as the import system would: first on sys.path."""
    for p in sys.path:
        f = os.path.join(p or ".", "typer", "__init__.py")
        if os.path.isfile(f):
            return f
    return None


def _columns() -> int:
    """Terminal columns as click reads them (shutil.get_terminal_size: $COLUMNS, else stdout's, else 80)."""
    try:
        cols = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        cols = 0
    if cols <= 0:
        try:
            cols = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            cols = 0
    return cols if cols > 0 else 80


def _ascii_or_utf8(text: str) -> bool:
    """Non-ASCII text only to a UTF-8 stdout (typer would write it with the stream's own error handling)."""
    return text.isascii() or (getattr(sys.stdout, "encoding", "") or "").lower().replace("-", "") == "utf8"
