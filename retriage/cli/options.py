"""What every command shares: the --db and --json options, one way to print JSON, consoles, a progress bar."""

from __future__ import annotations

import json
import sys
from datetime import date, datetime

import typer

from retriage.core.console import console

Db = typer.Option(None, "--db", envvar="RETRIAGE_DB", help="DuckDB file (default ./retriage.duckdb).")
Json = typer.Option(False, "--json", help="Print the result as JSON.")
Web = typer.Option(False, "--web", help="Open the issue (the first result) in the web browser.")

# the filters of `list` and `search`
Engine = typer.Option([], "--engine", "-e", help="vllm, sglang, llama.cpp or trtllm; repeatable.")
Class = typer.Option(None, "--class", help="RE.1, RE.2, RE.3, RE.4 or none.")
Component = typer.Option(None, help="model_loader, operators, engine_setup, scheduler, frontend or other.")
Fix = typer.Option(None, help="A known-fix tag (ipc_host, oom_four_step, ...).")
State = typer.Option(None, help="open or closed.")
Since = typer.Option(None, help="Created on or after: YYYY-MM-DD, or 30d, 12w, 6m back.")
Until = typer.Option(None, help="Created on or before (inclusive day), same forms.")
Unsure = typer.Option(None, "--unsure/--sure", help="Only issues the model abstained on (or only confident ones).")
Limit = typer.Option(20, "--limit", "-L", help="At most this many issues.")
Format = typer.Option("table", "--format", help="table, json, ndjson or csv.")
FORMATS = ("table", "json", "ndjson", "csv")


def output_format(fmt: str, as_json: bool) -> str:
    fmt = "json" if as_json else fmt
    if fmt not in FORMATS:
        from retriage.core.errors import UserError

        raise UserError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}", exit_code=2)
    return fmt


def open_web(url: str | None) -> None:
    """Open `url` in the user's browser (`BROWSER` is honoured, as by gh); a one-line error when none opens."""
    import webbrowser

    from retriage.core.errors import UserError

    if not url:
        raise UserError("nothing to open: no issue found", exit_code=1)
    sys.stderr.write(f"Opening {url} in your browser.\n")
    try:
        opened = webbrowser.open(url)
    except webbrowser.Error:
        opened = False
    if not opened:
        raise UserError(f"could not open a web browser for {url}", exit_code=1)


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


def progress(total: int | None, description: str):
    """A transient progress bar on stderr and the function that advances it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    prog = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn(), transient=True, console=console(stderr=True))
    task = prog.add_task(description, total=total)
    return prog, (lambda n: prog.advance(task, n))
