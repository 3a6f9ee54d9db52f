"""What commands print, without typer (so the commands `launch.py` runs directly can share it)."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")
