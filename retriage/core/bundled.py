"""Where the package's bundled data lives: the demo snapshot of real issues (retriage/data/snapshot)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def snapshot_folder() -> Path:
    return Path(str(resources.files("retriage").joinpath("data", "snapshot")))


def snapshot_files() -> list[Path]:
    """The snapshot's issue files (gzipped JSON lines, one per engine), in name order."""
    return sorted(p for p in snapshot_folder().iterdir() if p.name.endswith(".jsonl.gz"))
