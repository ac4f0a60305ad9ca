"""`retriage report`: placeholder until the weekly report lands (issue 6)."""

from typing import Optional

import typer

from retriage.errors import UserError


def report(
    weekly: bool = typer.Option(True, "--weekly", help="Weekly distribution (the only period so far)."),
    db: Optional[str] = typer.Option(None, "--db", envvar="RETRIAGE_DB", help="DuckDB file."),
):
    """Weekly distribution of RE classes (or components) per engine."""
    raise UserError("report is not implemented yet")
