"""Commands over the stored issues: import, show, stats, demo."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from retriage.cli.options import (BaseUrl, Class, Component, Db, Engine, Fix, Format, Json, Limit, Model, Offline,
                                  Since, State, Unsure, Until, Web, open_web, output_format, print_json)
from retriage.core.console import console


def import_cmd(
    files: List[Path] = typer.Argument(..., help="JSON array, JSON lines or .gz files of GitHub issue objects "
                                       "(API shape, or gh's `issue view/list --json`); - reads standard input."),
    db: Optional[str] = Db,
    as_json: bool = Json,
):
    """Load GitHub issue objects (API or corpus shape) into the database, all or nothing."""
    from retriage.db.importer import import_into

    result = import_into(db, files)
    if as_json:
        print_json({"files": result.files, "records": result.records, **result.counts, "by_repo": result.by_repo})
        return
    c = result.counts
    typer.echo(f"imported {result.records} records from {result.files} file(s): "
               f"{c['new']} new, {c['updated']} updated, {c['unchanged']} unchanged")


def show(
    ref: str = typer.Argument(..., help="vllm#7472, sglang#123, llama.cpp#3825, trtllm#1458, owner/name#N or a URL."),
    db: Optional[str] = Db,
    as_json: bool = Json,
    similar: int = typer.Option(5, help="How many similar issues to list."),
    offline: bool = Offline,
    base_url: str = BaseUrl,
    model: Optional[str] = Model,
    web: bool = typer.Option(False, "--web", help="Open the issue in the web browser."),
):
    """Everything known about one issue: record, predicted class and component, known fixes, similar issues.

    An issue missing from the database is fetched from GitHub (with its comments and linked PRs), stored and
    labeled first, unless --offline."""
    from retriage.db.store import connect
    from retriage.lookup import lookup
    from retriage.render import issue_panel

    if not offline and not web:
        from retriage.core.refs import parse_ref
        from retriage.fetch import fetch_if_missing
        from retriage.miner.client import token_from_env

        fetch_if_missing(db, *parse_ref(ref), base_url=base_url, token=token_from_env())
    info = lookup(connect(db, read_only=True), ref, similar=0 if web else similar, model=model)
    if web:
        open_web(info["issue"].get("html_url"))
        return
    from retriage.core.console import stdout_is_terminal

    if as_json:
        print_json(info)
    elif stdout_is_terminal():
        console().print(issue_panel(info))
    else:
        from retriage.render import issue_plain

        sys.stdout.write(issue_plain(info))


def stats(db: Optional[str] = Db, as_json: bool = Json, model: Optional[str] = Model):
    """Issues per repository, date range and share labeled by the current model."""
    from retriage.classifier import current_model_version
    from retriage.db import queries
    from retriage.db.store import connect
    from retriage.core.console import stdout_is_terminal, write_plain
    from retriage.render import stats_plain, stats_table

    s = queries.stats(connect(db, read_only=True), current_model_version(model))
    if as_json:
        print_json(s)
    elif stdout_is_terminal():
        console().print(stats_table(s))
    else:
        write_plain(*stats_plain(s))


def demo(
    db: Optional[str] = Db,
    example: str = typer.Option("llama.cpp#3825", help="Issue to show as a lookup example."),
):
    """Build the database from the bundled snapshot (no network, no token) and show what retriage knows."""
    from retriage.demo import run_demo

    run_demo(db, example)


VersionFilter = typer.Option(None, "--version", help="The engine version reported: a release (0.26), a version "
                             "(0.26.0, b5432), main, unknown, or a range LO..HI (0.8..0.9, b7600..b7700).")


def list_cmd(
    engine: List[str] = Engine, re_class: Optional[str] = Class, component: Optional[str] = Component,
    fix: Optional[str] = Fix, state: Optional[str] = State, since: Optional[str] = Since,
    until: Optional[str] = Until, unsure: Optional[bool] = Unsure, version: Optional[str] = VersionFilter,
    sort: str = typer.Option("created", help="created (newest first), updated, oldest, confidence or number."),
    limit: int = Limit, fmt: Optional[str] = Format,
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    model: Optional[str] = Model,
    web: bool = Web,
    db: Optional[str] = Db,
):
    """Stored issues with the current model's class, component and known fixes, filtered and sorted."""
    from retriage.classifier import current_model_version
    from retriage.db.store import connect
    from retriage.lister import ListFilter, list_issues

    fmt = output_format(fmt, as_json)
    f = ListFilter(tuple(engine), re_class, component, fix, state, since, until, unsure, sort, limit, version)
    rows = list_issues(connect(db, read_only=True), f, current_model_version(model))
    if web:
        open_web(rows[0]["html_url"] if rows else None)
        return
    print_rows(rows, fmt)


def print_rows(rows: list[dict], fmt: str, columns=None) -> None:
    """Issue rows (of `list` or `search`) as a table, plain tab-separated rows, JSON, JSON lines or CSV."""
    from retriage.render import issues_plain, issues_table, write_rows

    if fmt == "table":
        out = console()
        out.print(issues_table(rows, out.width))
    elif fmt == "tsv":
        from retriage.core.console import write_plain

        write_plain(*issues_plain(rows))
    elif fmt == "json":
        print_json(rows)
    elif columns:
        write_rows(rows, fmt, columns)
    else:
        write_rows(rows, fmt)
