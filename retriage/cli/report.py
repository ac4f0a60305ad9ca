"""`retriage report --weekly`: options in, one library call, one output format out."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from retriage import taxonomy
from retriage.cli.options import Db
from retriage.core.console import console
from retriage.core.errors import UserError
from retriage.core.output import atomic_output, is_stdout, output_target, write_text_atomic


def _check_choice(value: str, choices: tuple[str, ...], option: str) -> str:
    v = value.strip().lower()
    if v not in choices:
        raise UserError(f"{option} must be one of {', '.join(choices)}, not {value!r}")
    return v


def _write_text(text: str, output: Optional[Path]) -> None:
    if output is None or is_stdout(output):
        typer.echo(text, nl=False)
        return
    write_text_atomic(output, text)
    typer.echo(f"wrote {output}", err=True)


def _write(rep, fmt: str, output: Optional[Path]) -> None:
    """The report in one format, to stdout or `output` (charts: to a file, by default in this folder)."""
    from retriage.report import render

    if fmt == "json":
        _write_text(render.to_json(rep), output)
    elif fmt == "csv":
        _write_text(render.to_csv(rep), output)
    elif fmt in render.CHART_FORMATS:
        path = output or Path(f"retriage-weekly-{rep.by}.{fmt}")
        if is_stdout(path):
            raise UserError(f"--format {fmt} writes a file: give --output FILE, not '-'")
        target = output_target(path)
        with atomic_output(path, binary=fmt == "png") as f:
            render.save_chart(rep, f, fmt)
        typer.echo(f"wrote chart {target}")
    elif output is not None and not is_stdout(output):
        from rich.console import Console

        with atomic_output(output) as f:
            render.print_report(rep, Console(file=f, width=120, no_color=True, highlight=False))
        typer.echo(f"wrote {output}", err=True)
    else:
        render.print_report(rep, console())


def report(
    weekly: bool = typer.Option(True, "--weekly", help="Weekly distribution (the only period so far)."),
    engine: Optional[List[str]] = typer.Option(
        None, "--engine", "-e", help=f"Only this engine ({', '.join(e.id for e in taxonomy.engines())}); "
        "repeatable. Default: every issue in the database."),
    since: Optional[str] = typer.Option(None, help="First day, YYYY-MM-DD (inclusive, UTC)."),
    until: Optional[str] = typer.Option(None, help="Last day, YYYY-MM-DD (inclusive, UTC)."),
    by: str = typer.Option("re_class", help="Columns: re_class or component."),
    include_prs: bool = typer.Option(False, "--include-prs", help="Count pull requests too."),
    per_engine: bool = typer.Option(False, "--per-engine", help="One table per engine instead of all together."),
    weeks: Optional[int] = typer.Option(None, help="Only the last N weeks of the range."),
    fmt: str = typer.Option("table", "--format", "-f", help="table, csv, json, html or png (chart)."),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Write here instead of stdout; html/png default to "
        "./retriage-weekly-<by>.<format>."),
    model_version: Optional[str] = typer.Option(
        None, "--model-version", envvar="RETRIAGE_MODEL_VERSION",
        help="Count this model version's predictions (default: the shipped model)."),
    db: Optional[str] = Db,
):
    """Weekly distribution of RE classes (or components) per ISO week of issue creation.

    Rows are ISO weeks (Monday start, UTC), with zeros for weeks without issues; columns the RE classes (or
    components), `unsure` when the classifier abstained and `unlabeled` for issues the model has not labeled.
    Ends with totals, the last week against the mean of the 4 weeks before, and the newest issues of each class.
    """
    from retriage.db.store import connect
    from retriage.report import render
    from retriage.report.weekly import BY_VALUES, CURRENT_MODEL, MAX_WEEKS, weekly_report

    by = _check_choice(by, BY_VALUES, "--by")
    fmt = _check_choice(fmt, render.FORMATS, "--format")
    if weeks is not None and not 1 <= weeks <= MAX_WEEKS:
        raise UserError(f"--weeks must be from 1 to {MAX_WEEKS:,}, not {weeks}")
    if output is not None and not is_stdout(output):
        output_target(output)  # a bad --output fails before the query
    con = connect(db, read_only=True)
    rep = weekly_report(con, engines=engine, since=since, until=until, by=by, include_prs=include_prs,
                        model_version=model_version or CURRENT_MODEL, per_engine=per_engine, last_weeks=weeks)
    message = render.no_labels_message(rep)
    if message:
        raise UserError(message)

    _write(rep, fmt, output)
