"""`retriage search QUERY`: the command over retriage.search."""

from __future__ import annotations

from typing import List, Optional

import typer

from retriage.cli.data import VersionFilter, print_rows
from retriage.cli.options import (Class, Component, Db, Engine, Fix, Format, Limit, Since, State, Unsure, Until,
                                  Web, open_web, output_format)


def search(
    query: str = typer.Argument(..., help='Words, an error line, a path or a flag: "/dev/shm", '
                                '"--gpu-memory-utilization", "CUDA_ERROR_OUT_OF_MEMORY", "server hangs".'),
    engine: List[str] = Engine, re_class: Optional[str] = Class, component: Optional[str] = Component,
    fix: Optional[str] = Fix, state: Optional[str] = State, since: Optional[str] = Since,
    until: Optional[str] = Until, unsure: Optional[bool] = Unsure, version: Optional[str] = VersionFilter,
    limit: int = Limit, fmt: Optional[str] = Format,
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    web: bool = Web,
    db: Optional[str] = Db,
):
    """Full-text search (BM25 over titles, bodies and comments, with the MiniLM embedding for meaning), ranked,
    with the filters of `list`."""
    from retriage.classifier import current_model_version
    from retriage.db.store import connect
    from retriage.lister import ListFilter
    from retriage.search import COLUMNS
    from retriage.search import search as run

    fmt = output_format(fmt, as_json)
    f = ListFilter(tuple(engine), re_class, component, fix, state, since, until, unsure, "created", limit, version)
    rows = run(connect(db, read_only=True), query, f, current_model_version())
    if web:
        open_web(rows[0]["html_url"] if rows else None)
        return
    print_rows(rows, fmt, COLUMNS)


# A query may start with dashes ("--gpu-memory-utilization", the help's own example): a word the command does not
# know as an option is read as the query, not refused (`--` before the query still works).
search.context_settings = {"ignore_unknown_options": True}
