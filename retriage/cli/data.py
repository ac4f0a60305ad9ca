"""Commands over the stored issues: import, show, stats, demo."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from retriage.cli.options import Db, Json, print_json
from retriage.core.console import console


def import_cmd(
    files: List[Path] = typer.Argument(..., help="JSON array, JSON lines or .gz files of GitHub issue objects."),
    db: Optional[str] = Db,
    as_json: bool = Json,
):
    """Load GitHub issue objects (API or corpus shape) into the database, all or nothing."""
    from retriage.db.importer import import_files
    from retriage.db.store import connect

    result = import_files(connect(db), files)
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
):
    """Everything known about one issue: record, predicted class and component, known fixes, similar issues."""
    from retriage.db.store import connect
    from retriage.lookup import lookup
    from retriage.render import issue_panel

    info = lookup(connect(db, read_only=True), ref, similar=similar)
    print_json(info) if as_json else console().print(issue_panel(info))


def stats(db: Optional[str] = Db, as_json: bool = Json):
    """Issues per repository, date range and share labeled by the current model."""
    from retriage.classifier import current_model_version
    from retriage.db import queries
    from retriage.db.store import connect
    from retriage.render import stats_table

    s = queries.stats(connect(db, read_only=True), current_model_version())
    print_json(s) if as_json else console().print(stats_table(s))


def demo(
    db: Optional[str] = Db,
    example: str = typer.Option("llama.cpp#3825", help="Issue to show as a lookup example."),
):
    """Build the database from the bundled snapshot (no network, no token) and show what retriage knows."""
    from retriage.demo import run_demo

    run_demo(db, example)
