"""The Rich consoles every layer prints through (stdout for results, stderr for progress and notes)."""

from __future__ import annotations



def console(stderr: bool = False):
    """A rich.console.Console (Rich is imported here, on first use: a cold `retriage classify --json` never
    needs it)."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)
