"""Where slurmtools keeps what it may compute again: $XDG_CACHE_HOME/slurmtools, else ~/.cache/slurmtools (the
user's own; /tmp/.cache/slurmtools for a user without a home). Nothing kept there is trusted beyond the key it was
stored under, and a folder that cannot be written only costs the work again."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping


def user_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or "/tmp", ".cache")
    return Path(base) / "slurmtools"
