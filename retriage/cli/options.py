"""What every command shares: the --db and --json options, one way to print JSON, consoles, a progress bar."""

from __future__ import annotations

import json
import sys
from datetime import date, datetime

import typer

from retriage.core.console import console

Db = typer.Option(None, "--db", envvar="RETRIAGE_DB", help="DuckDB file (default ./retriage.duckdb).")
Json = typer.Option(False, "--json", help="Print the result as JSON.")


def jsonable(obj):
    """Datetimes -> ISO strings, recursively (DuckDB rows carry them)."""
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj.isoformat() if isinstance(obj, (datetime, date)) else obj


def print_json(obj) -> None:
    """The one JSON style of the CLI: indented, UTF-8 as is, datetimes as ISO strings."""
    sys.stdout.write(json.dumps(jsonable(obj), indent=2, ensure_ascii=False) + "\n")


def progress(total: int | None, description: str, unit: str | None = None):
    """A transient progress bar on stderr and the function that advances it; with `unit`, also the rate
    ("12.3 issues/s") beside the time remaining."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    columns = ["[progress.description]{task.description}", BarColumn(), MofNCompleteColumn()]
    if unit:
        columns.append(_rate_column(unit))
    prog = Progress(*columns, TimeRemainingColumn(), transient=True, console=console(stderr=True))
    task = prog.add_task(description, total=total)
    return prog, (lambda n: prog.advance(task, n))


def _rate_column(unit: str):
    """Items per second so far (rich's own speed estimate over its recent samples)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:,.1f} {unit}/s", style="progress.data.speed")

    return RateColumn()
