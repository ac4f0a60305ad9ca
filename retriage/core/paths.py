"""Where retriage keeps files of its own outside the checkout."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """`RETRIAGE_CACHE_DIR`, else `$XDG_CACHE_HOME/retriage`, else `~/.cache/retriage` (not created here)."""
    if os.environ.get("RETRIAGE_CACHE_DIR"):
        return Path(os.environ["RETRIAGE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "retriage"
