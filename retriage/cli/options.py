"""What every command shares: the --db and --json options, one way to print JSON, consoles, a progress bar."""

from __future__ import annotations

import sys
from datetime import date, datetime

import typer

from retriage.core.console import console
from retriage.miner.defaults import DEFAULT_BASE_URL
from retriage.core.output import dumps

Db = typer.Option(None, "--db", envvar="RETRIAGE_DB", help="DuckDB file (default ./retriage.duckdb).")
Json = typer.Option(False, "--json", help="Print the result as JSON.")
Offline = typer.Option(False, "--offline", "--no-fetch", envvar="RETRIAGE_OFFLINE",
                       help="Never ask GitHub for an issue: use only what the database holds.")
BaseUrl = typer.Option(DEFAULT_BASE_URL, "--base-url",
                       help="API root: GitHub Enterprise (https://HOST/api/v3) or a local server.")
Model = typer.Option(None, "--model", envvar="RETRIAGE_MODEL", help="Model folder (from `retriage train`; "
                     "default: the shipped model).")


def one_of(ids) -> str:
    """Choices for a --help text, from the taxonomy (so that the help lists what the check accepts)."""
    ids = list(ids)
    return ", ".join(ids[:-1]) + f" or {ids[-1]}" if len(ids) > 1 else "".join(ids)


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
