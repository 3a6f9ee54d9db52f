"""Writing CSV files that are safe to open in a spreadsheet: the one way slurmtools writes CSV.

Job names, users and accounts are chosen by users and go into the report's tables. A spreadsheet (Excel,
LibreOffice, Google Sheets) reads a cell that starts with `=`, `+`, `-`, `@`, a TAB or a CR as a formula, so a job
named `=HYPERLINK(...)` or `=cmd|' /C calc'!A0` would run when an admin opens the file. As OWASP advises, such a
text cell is written with a leading `'`, which the spreadsheet shows as text. Lines end with CRLF (RFC 4180),
which makes the csv module quote every cell holding a CR or an LF: a spreadsheet takes a bare CR inside a cell
for the end of a row, and the next "row" would start with whatever the name holds after it (with LF line ends
the module quotes only LF). Only text is touched: a value of a number column (a negative number too) is written
as the number it is.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

#: what a cell may not start with (OWASP's CSV injection list)
TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def neutral(value):
    """`value` as a cell: text starting with a formula trigger gets a leading `'`; anything else is unchanged."""
    if isinstance(value, str) and value[:1] in TRIGGERS:
        return "'" + value
    return value


def _safe_labels(labels: pd.Index) -> pd.Index:
    if isinstance(labels, pd.MultiIndex):
        return pd.MultiIndex.from_tuples([tuple(neutral(v) for v in t) for t in labels],
                                         names=[neutral(n) for n in labels.names])
    if labels.dtype == object or isinstance(labels.dtype, (pd.CategoricalDtype, pd.StringDtype)):
        return pd.Index([neutral(v) for v in labels], name=neutral(labels.name), dtype=object)
    return labels.rename(neutral(labels.name))


def safe_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of `df` whose text cells, column names and index labels are neutralised; number columns as they
    are. Text columns are short (report tables), so a pass over their cells is cheap."""
    out = df.copy()
    for i in range(df.shape[1]):
        col = df.iloc[:, i]
        if isinstance(col.dtype, pd.CategoricalDtype) or col.dtype == object or isinstance(col.dtype,
                                                                                             pd.StringDtype):
            out.isetitem(i, col.astype(object).map(neutral))
    out.columns = _safe_labels(pd.Index(df.columns))
    out.index = _safe_labels(df.index)
    return out


def write_csv(df: pd.DataFrame, path: str | Path, *, index: bool = False) -> Path:
    """Write `df` to `path` with every text cell neutralised (see the module docstring)."""
    safe_frame(df).to_csv(path, index=index, lineterminator="\r\n")
    return Path(path)
