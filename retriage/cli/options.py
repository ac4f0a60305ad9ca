"""What every command shares: the --db and --json options, one way to print JSON, consoles, a progress bar."""

from __future__ import annotations

import sys
from datetime import date, datetime

import typer

from retriage import taxonomy
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
Web = typer.Option(False, "--web", help="Open the issue (the first result) in the web browser.")

# the filters of `list` and `search`
Engine = typer.Option([], "--engine", "-e", help=f"{one_of(e.id for e in taxonomy.engines())}; repeatable.")
Class = typer.Option(None, "--class", help=f"{one_of(taxonomy.re_class_ids())}.")
Component = typer.Option(None, help=f"{one_of(taxonomy.component_ids())}.")
Fix = typer.Option(None, help=f"A known-fix tag: {one_of(taxonomy.fix_tag_ids())}.")
State = typer.Option(None, help="open or closed.")
Since = typer.Option(None, help="Created on or after: YYYY-MM-DD, or 30d, 12w, 6m back.")
Until = typer.Option(None, help="Created on or before (inclusive day), same forms.")
Unsure = typer.Option(None, "--unsure/--sure", help="Only issues the model abstained on (or only confident ones).")
Limit = typer.Option(20, "--limit", "-L", help="At most this many issues.")
Format = typer.Option(None, "--format", help="table, tsv, json, ndjson or csv (default: table on a terminal, "
                      "tsv otherwise: a header, then one row per line, tab-separated, values whole).")
FORMATS = ("table", "tsv", "json", "ndjson", "csv")


def output_format(fmt: str | None, as_json: bool) -> str:
    """The format asked for; without one, a table on a terminal and plain rows (tsv) otherwise, as gh does."""
    from retriage.core.console import stdout_is_terminal

    fmt = "json" if as_json else fmt
    if fmt is None:
        return "table" if stdout_is_terminal() else "tsv"
    if fmt not in FORMATS:
        from retriage.core.errors import UserError

        raise UserError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}", exit_code=2)
    return fmt


def number_in_range(option: str, value: float | None, low: float, high: float, unit: str = "") -> float | None:
    """A number option's value, refused (UsageError: one line, exit 2) unless finite and from `low` to `high`.
    Click's ranges let nan through (it compares false with both ends), and "inf", "nan" and "1e9" all parse as
    floats; None (an option not given) passes."""
    import math

    from retriage.core.errors import UsageError

    if value is None:
        return None
    if not math.isfinite(value) or not low <= value <= high:
        unit = f" {unit}" if unit else ""
        raise UsageError(f"{option} must be a number from {low:g} to {high:g}{unit}, not {value:g}")
    return value


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
    """The one JSON style of the CLI: indented, UTF-8 as is, datetimes as ISO strings, never NaN (null)."""
    sys.stdout.write(dumps(jsonable(obj), indent=2, ensure_ascii=False) + "\n")


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
