"""Where retriage keeps files of its own outside the checkout."""

from __future__ import annotations

import os
from pathlib import Path


def models_dir() -> Path:
    """Where `retriage train` puts models by default: the user data folder (platformdirs), `models/` in it
    (on Linux ~/.local/share/retriage/models, or under $XDG_DATA_HOME); never the installed package."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("retriage")) / "models"


def cache_dir() -> Path:
    """`RETRIAGE_CACHE_DIR`, else `$XDG_CACHE_HOME/retriage`, else `~/.cache/retriage` (not created here)."""
    if os.environ.get("RETRIAGE_CACHE_DIR"):
        path = Path(os.environ["RETRIAGE_CACHE_DIR"])
        where = "RETRIAGE_CACHE_DIR"
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path, where = Path(base) / "retriage", "the cache folder"
    if path.exists() and not path.is_dir():
        from retriage.core.errors import UsageError

        raise UsageError(f"{where} {path} is not a folder: point RETRIAGE_CACHE_DIR at a folder")
    return path
