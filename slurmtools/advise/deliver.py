"""Sending `advise --notify` notices (I/O): a text file per user in a folder, or mail through the local
`sendmail` when the site says `[advise] mail = true`. Every failure is one line naming the user and the path."""

from __future__ import annotations

import os
import shutil
import subprocess
from email.message import EmailMessage
from pathlib import Path
from typing import Sequence

from slurmtools.advise.notify import Notice
from slurmtools.errors import ConfigError, SlurmtoolsError
from slurmtools.site.validate import USER


class DeliveryError(SlurmtoolsError):
    """A notice could not be written or mailed; the message names the user and the file or program."""

    exit_code = 1


def write_files(notes: Sequence[Notice], folder: str | Path) -> list[Path]:
    """`<folder>/<user>.txt` per notice (written whole, then renamed: a reader never sees half a notice)."""
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError("--out", "", f"{out}: cannot create the folder: {exc.strerror or exc}") from None
    paths = []
    for n in notes:
        p = out / f"{_safe_user(n.user)}.txt"
        tmp = p.with_name(f".{p.name}.tmp")
        try:
            tmp.write_text(f"Subject: {n.subject}\n\n{n.body}", encoding="utf-8")
            os.replace(tmp, p)
        except OSError as exc:
            raise DeliveryError(f"notice for {n.user}: cannot write {p}: {exc.strerror or exc}") from None
        paths.append(p)
    return paths


def sendmail_path() -> str | None:
    """The local sendmail: on PATH, else the usual /usr/sbin/sendmail."""
    return shutil.which("sendmail") or (
        "/usr/sbin/sendmail" if os.access("/usr/sbin/sendmail", os.X_OK) else None)


def mail(notes: Sequence[Notice], domain: str, sendmail: str | None = None) -> list[str]:
    """Each notice to `user@domain` (or the local `user` when domain is ""), through `sendmail -t -oi`."""
    prog = sendmail or sendmail_path()
    if prog is None:
        raise DeliveryError("advise --notify: [advise] mail = true but no sendmail was found (PATH, /usr/sbin); "
                            "install one or give --out DIR for files")
    sent = []
    for n in notes:
        to = f"{_safe_user(n.user)}@{domain}" if domain else _safe_user(n.user)
        msg = EmailMessage()
        msg["To"], msg["Subject"] = to, n.subject
        msg.set_content(n.body, cte="8bit")  # readable as sent; lines stay under 998
        try:
            p = subprocess.run([prog, "-t", "-oi"], input=msg.as_bytes(), capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DeliveryError(f"notice for {n.user}: {prog} failed: {exc}") from None
        if p.returncode != 0:
            why = (p.stderr or p.stdout).decode(errors="replace").strip().splitlines()
            raise DeliveryError(f"notice for {n.user}: {prog} exited {p.returncode}"
                                + (f": {why[0]}" if why else ""))
        sent.append(to)
    return sent


def _safe_user(user: str) -> str:
    """A user name fit for a file name and a mail address (sacct's names are, a hostile dump's may not be)."""
    if not USER.fullmatch(user):
        raise DeliveryError(f"advise --notify: {user!r} is not a user name; no notice written for it")
    return user
