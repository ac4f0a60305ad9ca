"""What every command shares: the --db and --json options, one way to print JSON, consoles, a progress bar."""

from __future__ import annotations

import sys
from datetime import date, datetime

import typer

from retriage.core.console import console
from retriage.core.output import dumps

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
    """The one JSON style of the CLI: indented, UTF-8 as is, datetimes as ISO strings, never NaN (null)."""
    sys.stdout.write(dumps(jsonable(obj), indent=2, ensure_ascii=False) + "\n")


def progress(total: int | None, description: str):
    """A transient progress bar on stderr and the function that advances it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    prog = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn(), transient=True, console=console(stderr=True))
    task = prog.add_task(description, total=total)
    return prog, (lambda n: prog.advance(task, n))
