"""Rows of an input (a sacct dump, the epilog's records) that the report skipped, and the share it tolerates.

A nightly report over weeks of history must not die of one torn or absurd row: each bad row is skipped, listed
with its line and reason, counted in every output, and the report fails only when more than `max_bad_share` of
an input's rows are bad (then something is wrong with the input as a whole, not with a row).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: the share of an input's rows that may be bad before the report fails (site `[reports] max_bad_share`,
#: `--max-bad-share`)
DEFAULT_MAX_SHARE = 0.01
#: the file in the output folder listing every bad row
FILE_NAME = "bad_rows.csv"


@dataclass(frozen=True)
class BadRow:
    """One skipped row: where it was (`line` is 1-based, the header being line 1; None when unknown), why, and
    its text as read (bytes that are not UTF-8 shown as U+FFFD)."""

    source: str
    line: int | None
    reason: str
    text: str


@dataclass
class BadRows:
    """The bad rows of one input, and how many rows it had in all (bad ones included)."""

    source: str
    what: str  # "rows" (sacct lines) or "records" (epilog files)
    total: int = 0
    rows: list[BadRow] = field(default_factory=list)

    @property
    def share(self) -> float:
        return len(self.rows) / self.total if self.total else 0.0

    def summary(self) -> str:
        """`3 of 1,200 rows of dump.txt were bad and skipped (0.25%)`, for notes and error lines."""
        return (f"{len(self.rows):,} of {self.total:,} {self.what} of {self.source} were bad and skipped "
                f"({self.share * 100:.2f}%)")


class TooManyBadRows(Exception):
    """More than the tolerated share of an input's rows are bad (the CLI turns it into one line, exit 1)."""


def check_share(inputs: list[BadRows], max_share: float, option: str) -> None:
    """Raise TooManyBadRows naming the first input whose bad share is above `max_share`; `option` says where the
    limit was set (e.g. `--max-bad-share 0.01`)."""
    for b in inputs:
        if b.rows and b.share > max_share:
            raise TooManyBadRows(f"{b.summary()}, more than {option} allows ({max_share * 100:g}%)")
