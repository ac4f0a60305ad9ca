"""The main job on the embedded default: a local DuckDB file built from the bundled snapshot."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from retriage.db import queries
from retriage.db.importer import import_files
from retriage.db.store import connect
from retriage.render import console, issue_panel, stats_table


def snapshot_files() -> list[Path]:
    folder = resources.files("retriage").joinpath("data", "snapshot")
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".jsonl.gz"))


def run_demo(db: str | None, example: str) -> None:
    from retriage.lookup import lookup

    out = console()
    con = connect(db)
    result = import_files(con, snapshot_files())
    c = result.counts
    out.print(f"[bold]snapshot[/]: {result.records} issues from {result.files} files "
              f"({c['new']} new, {c['updated']} updated, {c['unchanged']} unchanged)")
    out.print(stats_table(queries.stats(con)))
    out.print(issue_panel(lookup(con, example)))
