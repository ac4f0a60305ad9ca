"""The one colour table of every report chart (report/palette.toml): a category has the same colour in the
RE-class chart, the component chart and the component-share view."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Sequence

PALETTE_FILE = Path(__file__).resolve().parent / "palette.toml"


@lru_cache(maxsize=None)
def _palette() -> tuple[dict[str, str], tuple[str, ...]]:
    with open(PALETTE_FILE, "rb") as f:
        data = tomllib.load(f)
    return dict(data["colors"]), tuple(data["fallback"]["colors"])


def colors(categories: Sequence[str]) -> list[str]:
    """The colour of each category, in order: from the palette, else the fallback colours in turn."""
    table, fallback = _palette()
    out, i = [], 0
    for c in categories:
        if c in table:
            out.append(table[c])
        else:
            out.append(fallback[i % len(fallback)])
            i += 1
    return out


def color(category: str) -> str:
    return colors([category])[0]
