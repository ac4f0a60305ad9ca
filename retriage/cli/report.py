"""`retriage report`: options in, one library call, one output format out.

`--weekly` (the default): the weekly distribution of RE classes or components. `--components`: each engine's
component shares over a period, beside the shares a study published. `--releases`: RE classes per engine release.
Without --format or --json, a terminal gets Rich tables; a pipe or a file gets tab-separated rows (gh's convention).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from retriage import taxonomy
from retriage.cli.options import Db, Model
from retriage.core.console import console
from retriage.core.errors import UsageError, UserError
from retriage.core.output import atomic_output, is_stdout, output_target, write_text_atomic


class By(str, Enum):
    re_class = "re_class"
    component = "component"


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    html = "html"
    png = "png"


def _write_text(text: str, output: Optional[Path]) -> None:
    if output is None or is_stdout(output):
        typer.echo(text, nl=False)
        return
    write_text_atomic(output, text)
    typer.echo(f"wrote {output}", err=True)


def _check_output(output: Path) -> None:
    """A file --format html/png can be written to (not standard output, not a folder, FIFO or device)."""
    if is_stdout(output):
        raise UsageError("--format html and png write a file: give --output FILE, not '-'")
    output_target(output)


def _write_table(renderables, output: Optional[Path]) -> None:
    """Rich tables: `renderables(width)` gives them for a width (80 to a file)."""
    from rich.console import Console, Group

    if output is None or is_stdout(output):
        out = console()
        out.print(Group(*renderables(out.width)))
        return
    with atomic_output(output) as f:
        Console(file=f, width=120, no_color=True, highlight=False).print(Group(*renderables(120)))
    typer.echo(f"wrote {output}", err=True)


def _format(fmt: Optional["Format"], as_json: bool, output: Optional[Path]) -> str:
    """json, the --format given, table on a terminal, else tsv (a pipe or a file: one row per line, tab-separated,
    full values)."""
    if as_json:
        return "json"
    if fmt is not None:
        return fmt.value
    return "table" if (output is None or is_stdout(output)) and console().is_terminal else "tsv"


def _write_weekly(con, rep, fmt: str, output: Optional[Path]) -> None:
    """The weekly report in one format, to stdout or `output` (charts: to a file, by default in this folder)."""
    from retriage.report import chart as charts
    from retriage.report import render

    if fmt == "json":
        _write_text(render.to_json(rep), output)
    elif fmt in ("csv", "tsv"):
        _write_text(render.to_csv(rep, "," if fmt == "csv" else "\t"), output)
        _say_sample(rep.sample)
    elif fmt == "png":
        path = output or Path(f"retriage-weekly-{rep.by}.png")
        _check_output(path)
        with atomic_output(path, binary=True) as f:
            charts.save(charts.weekly_chart(rep), f, "png")
        typer.echo(f"wrote chart {path.expanduser().resolve()}")
    elif fmt == "html":
        from retriage.report.html import cell_issues, report_html

        path = output or Path(f"retriage-weekly-{rep.by}.html")
        _check_output(path)
        write_text_atomic(path, report_html(rep, cell_issues(con, rep)))
        typer.echo(f"wrote report {path.expanduser().resolve()}")
    else:
        _write_table(lambda width: render.report_renderables(rep, width), output)


def _say_sample(note: str | None) -> None:
    """Rows carry data only: that the database is a sample is said once, on standard error."""
    if note:
        typer.echo(f"retriage: note: {note}", err=True)


def _write_components(rep, fmt: str, output: Optional[Path]) -> None:
    from retriage.report import chart as charts
    from retriage.report import render

    if fmt == "json":
        _write_text(render.to_json_text(render.components_dict(rep)), output)
    elif fmt in ("csv", "tsv"):
        _write_text(render.delimited(*render.components_rows(rep), "," if fmt == "csv" else "\t"), output)
    elif fmt in ("png", "html"):
        path = output or Path(f"retriage-components.{fmt}")
        _check_output(path)
        with atomic_output(path, binary=fmt == "png") as f:
            charts.save(charts.component_chart(rep), f, fmt)
        typer.echo(f"wrote chart {path.expanduser().resolve()}")
    else:
        _write_table(lambda width: render.components_tables(rep), output)


def _write_releases(con, rep, fmt: str, output: Optional[Path]) -> None:
    from retriage.report import chart as charts
    from retriage.report import release_render as view
    from retriage.report.render import delimited, to_json_text
    from retriage.report.weekly import sample_note

    if fmt == "json":
        _write_text(to_json_text(view.to_dict(rep)), output)
    elif fmt in ("csv", "tsv"):
        _write_text(delimited(view.header(rep), view.rows(rep), "," if fmt == "csv" else "\t"), output)
        _say_sample(sample_note(con))
    elif fmt in ("png", "html"):
        path = output or Path(f"retriage-releases.{fmt}")
        _check_output(path)
        chart = view.chart(rep)
        if fmt == "html":
            write_text_atomic(path, view.html(rep, chart.to_html(inline=True)))
        else:
            with atomic_output(path, binary=True) as f:
                charts.save(chart, f, "png")
        typer.echo(f"wrote {'report' if fmt == 'html' else 'chart'} {path.expanduser().resolve()}")
    else:
        sample = sample_note(con)
        _write_table(lambda width: view.tables(rep, sample, width), output)


def report(
    weekly: bool = typer.Option(False, "--weekly", help="Weekly distribution (the default)."),
    components: bool = typer.Option(False, "--components", help="Each engine's component shares over the "
                                    "period, beside the shares published by arXiv 2506.09713."),
    releases: bool = typer.Option(False, "--releases", help="Per engine and release: RE classes with 95 % "
                                  "intervals beside the earlier releases; flags a release clearly above them."),
    engine: Optional[List[str]] = typer.Option(
        None, "--engine", "-e", help=f"Only this engine ({', '.join(e.id for e in taxonomy.engines())}); "
        "repeatable. Default: every issue in the database."),
    since: Optional[str] = typer.Option(None, help="First day, YYYY-MM-DD or 12w/30d/6m back (inclusive, UTC)."),
    until: Optional[str] = typer.Option(None, help="Last day, YYYY-MM-DD or 12w/30d/6m back (inclusive, UTC)."),
    by: By = typer.Option(By.re_class, case_sensitive=False, help="Columns of the weekly report."),
    include_prs: bool = typer.Option(False, "--include-prs", help="Count pull requests too."),
    per_engine: bool = typer.Option(False, "--per-engine", help="One table per engine instead of all together."),
    weeks: Optional[int] = typer.Option(None, help="Only the last N weeks of the range (default 12 without "
                                        "--since)."),
    all_weeks: bool = typer.Option(False, "--all", help="Every week of the range (no 12-week default)."),
    fmt: Optional[Format] = typer.Option(None, "--format", "-f", case_sensitive=False,
                                         help="html = page with chart, tables and issue links; png = the chart. "
                                         "Default: a table on a terminal, tab-separated rows to a pipe or file."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (same as --format json)."),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Write here instead of stdout; html/png default to "
        "./retriage-weekly-<by>.<format> (./retriage-components.<format>)."),
    model_version: Optional[str] = typer.Option(
        None, "--model-version", envvar="RETRIAGE_MODEL_VERSION",
        help="Count this model version's predictions (default: the model of --model, else the shipped one)."),
    model: Optional[str] = Model,
    db: Optional[str] = Db,
):
    """Weekly distribution of RE classes (or components) per ISO week of issue creation, or --components.

    Rows are ISO weeks (Monday start, UTC), with zeros for weeks without issues; never a week before the first
    or after the last selected issue, whatever --since/--until say; the last 12 unless --since, --weeks or --all. Columns the RE classes (or components), `unsure` when the classifier abstained and
    `unlabeled` for issues the model has not labeled. A week with fewer than 7 days of data is marked
    (partial) and not compared: "Δ last full week" is the last full week against the mean of the 4 before.
    Ends with the newest issues of each resource class, linked.
    """
    from retriage.db.store import connect
    from retriage.report import render
    from retriage.report.weekly import CURRENT_MODEL, MAX_WEEKS, weekly_report

    fmt_name = _format(fmt, as_json, output)
    if weekly + components + releases > 1:
        raise UsageError("give one of --weekly, --components and --releases")
    if weeks is not None and not 1 <= weeks <= MAX_WEEKS:
        raise UsageError(f"--weeks must be from 1 to {MAX_WEEKS:,}, not {weeks}")
    if weeks is not None and all_weeks:
        raise UsageError("give --weeks N or --all, not both")
    if output is not None and not is_stdout(output):
        output_target(output)  # a bad --output fails before the query
    if model_version is None and model:
        from retriage.classifier import current_model_version

        model_version = current_model_version(model)
    version = model_version or CURRENT_MODEL
    if releases:
        from retriage.report.releases import release_report

        if per_engine or by is not By.re_class or weeks is not None or all_weeks or since or until:
            raise UsageError("--releases takes --engine, --include-prs, --model-version and an output format")
        con = connect(db, read_only=True)
        rep = release_report(con, engines=engine, model_version=version, include_prs=include_prs)
        if rep.issues == 0:
            raise UserError("no issue of this selection has an engine version (table issue_versions): versions "
                            "are read from issue bodies when issues are mined or imported")
        _write_releases(con, rep, fmt_name, output)
        return
    if components:
        from retriage.report.components import component_shares

        if per_engine or by is not By.re_class or weeks is not None or all_weeks:
            raise UsageError("--components takes --engine, --since, --until, --include-prs and an output format")
        con = connect(db, read_only=True)
        rep = component_shares(con, engines=engine, since=since, until=until, model_version=version,
                               include_prs=include_prs)
        message = render.components_message(rep)
        if message:
            raise UserError(message)
        _write_components(rep, fmt_name, output)
        return
    last_weeks = weeks if weeks is not None else None if all_weeks or since else render.DEFAULT_WEEKS
    con = connect(db, read_only=True)
    rep = weekly_report(con, engines=engine, since=since, until=until, by=by.value, include_prs=include_prs,
                        model_version=version, per_engine=per_engine, last_weeks=last_weeks)
    message = render.no_labels_message(rep)
    if message:
        raise UserError(message)
    _write_weekly(con, rep, fmt_name, output)
