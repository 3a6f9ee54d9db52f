"""Error types shared by every layer.

Every error a user can cause carries one line that names the file, field or option at fault; the CLI prints
that line and exits non-zero instead of showing a traceback.
"""

from __future__ import annotations


def one_line(text: str) -> str:
    """`text` with every character that would break or hide the line escaped (`\\n`, `\\x85`, `\\u2028`, other
    control characters): a hostile name inside an error message must not forge or split the line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


#: the most characters of one quoted piece of input an error message shows, and of a run without blanks in a
#: reader's message (a key or cell quoted bare): `short_quotes`, `short_input`
QUOTE_CHARS = 80
BARE_CHARS = 200
#: the longest a reader's message may be after those cuts: past it, its middle is left out
MESSAGE_CHARS = 600


def _cut(piece: str, most: int) -> str:
    """`piece` cut to `most` characters with its length said; a piece cut once is not cut again."""
    return f"{piece[:most - 3]}... ({len(piece):,} characters)"


def short_quotes(text: str) -> str:
    """`text` with every quoted piece longer than QUOTE_CHARS cut to its start and its length. Messages quote what
    they found (`found 'NV18000...'`); a 200,000-character cell made a 200,000-character error line. Every
    slurmtools error applies it as it is shown (`SlurmtoolsError.__str__`), so no message grows with its input.
    Every quoted piece is matched, short ones too, so that a closing quote never opens the next one."""
    if len(text) <= 2 * QUOTE_CHARS:
        return text
    import re

    def cut(m: "re.Match[str]") -> str:
        q, inner = m.group(1), m.group(2)
        if len(inner) <= QUOTE_CHARS:
            return m.group(0)
        shortened = _cut(inner, QUOTE_CHARS)
        return f"{q}{shortened[:QUOTE_CHARS]}{q}{shortened[QUOTE_CHARS:]}"

    # a quote opens after a non-word character and closes before one: prose's apostrophes (the site's) do neither
    return re.sub(r"(?<!\w)(['\"])((?:(?!\1).)*)\1(?!\w)", cut, text)


def short_input(text: str) -> str:
    """`short_quotes`, and a run without blanks longer than BARE_CHARS cut too: what a reader's message says of
    the input it names bare (a JSON key path of 200,000 letters). Only for the message, never the file's name."""
    text = short_quotes(text)
    if len(text) <= BARE_CHARS:
        return text
    import re

    # a colon or comma that ends the run stays (`key...: unknown key`)
    # a colon or comma that ends the run stays (`key...: unknown key`); a run is matched from its start only
    text = re.sub(r"(?<!\S)(\S{%d,}?)([:;,]?)(?=\s|$)" % (BARE_CHARS + 1),
                  lambda m: _cut(m.group(1), BARE_CHARS) + m.group(2), text)
    if len(text) <= MESSAGE_CHARS:
        return text
    # what is left long is input named bare with blanks in it (a YAML key of 200,000 words): its start says where,
    # its end what is wrong
    head, tail = MESSAGE_CHARS // 2, MESSAGE_CHARS // 3
    return f"{text[:head]} ... ({len(text) - head - tail:,} characters left out) ... {text[-tail:]}"


def shown(value: object) -> str:
    """A value for a one-line message: its repr, cut short (a file or a caller may hand over anything)."""
    try:
        r = repr(value)
    except ValueError:  # an int of more digits than Python converts
        return "a number too long to show"
    return r if len(r) <= 40 else r[:37] + "..."


def unknown_key(key: str, known: list[str]) -> str:
    """What to say about a key a file format does not know: a typo must not pass silently, so name the nearest
    known key and all of them (`unknown key (did you mean nodes?; keys here: switch, children, nodes)`)."""
    import difflib

    near = difflib.get_close_matches(key, known, n=1)
    did = f"did you mean {near[0]}?; " if near else ""
    return f"unknown key ({did}keys here: {', '.join(known) or 'none'})"


#: the most digits a whole number of any file we read may have (`whole_number`)
MOST_DIGITS = 100


def whole_number(text: str, signed: bool = False) -> int:
    """`text` as an int when it is plain ASCII digits (after one `-` where `signed`); else ValueError.

    Why not int() alone: it also reads `٣`, `1_0`, `+7` and blank-padded text, which none of the tools behind the
    files we read writes, so a garbled field would pass as another number; `str.isdigit()` passes `²`, which int()
    then refuses far from any message naming the field; and past 4300 digits int() refuses with a ValueError of
    its own. No field we read needs 100 digits."""
    digits = text[1:] if signed and text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > MOST_DIGITS:
        raise ValueError(f"not a whole number: {text[:40]!r}")
    return int(text)


class SlurmtoolsError(Exception):
    """Base class: an error with a one-line, user-facing message."""

    exit_code = 1

    def __str__(self) -> str:
        return short_quotes(super().__str__())


class OptionError(SlurmtoolsError):
    """A command-line option is wrong; the message names it."""

    exit_code = 2


class ConfigError(SlurmtoolsError):
    """A site, fabric or template file is invalid. The message starts with `file: dotted.key: ...`."""

    exit_code = 2

    def __init__(self, source: str, key: str, message: str):
        self.source = source
        self.key = key
        self.detail = message
        where = f"{source}: {short_input(key)}: " if key else f"{source}: "
        super().__init__(where + short_input(message))


class ParseError(SlurmtoolsError):
    """A discovery dump (nvidia-smi, ibnetdiscover, topology.conf, sacct) could not be read faithfully. Its text is
    one line wherever it is shown, not only through the CLI: a key or name quoted from the file may hold a line
    break (a JSON or YAML key with `\u2028`), escaped here as `one_line` does."""

    exit_code = 2

    def __init__(self, source: str, line: int | None, message: str, column: int | None = None):
        self.source = source
        self.line = line
        self.column = column
        where = source
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        super().__init__(one_line(f"{where}: {short_input(message)}"))


class SlurmError(SlurmtoolsError):
    """A Slurm command failed; the message carries Slurm's own words (`sbatch: error: ...`)."""

    exit_code = 3

    def __init__(self, command: str, message: str, returncode: int | None = None):
        self.command = command
        self.returncode = returncode
        super().__init__(message)


class SlurmUnavailable(SlurmError):
    """No Slurm is reachable (commands missing, or slurmctld not answering)."""

    exit_code = 4
