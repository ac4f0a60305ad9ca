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
        return Path(os.environ["RETRIAGE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "retriage"
