"""The main job on the embedded default: a local DuckDB file built from the bundled snapshot, labeled by the
shipped model, then a lookup and the weekly report. No network, no token."""

from __future__ import annotations


from retriage.db import queries, writes
from retriage.db.importer import import_files
from retriage.db.store import Database, transaction
from retriage.core.bundled import snapshot_files
from retriage.core.console import console
from retriage.render import issue_panel, stats_table


def load_team_labels(con) -> int:
    """The team's labels (taxonomy/labels) into gold_labels, for lookups and comparisons in SQL."""
    from retriage.classifier.dataset import load_gold

    labels = [{"repo": e.repo, "number": e.number, "re_class": e.re_class, "component": e.component,
               "known_fix": e.known_fix, "reason": e.reason, "labeler": e.labeler} for e in load_gold()]
    with transaction(con):
        return writes.save_gold_labels(con, labels)


def run_demo(db: str | None, example: str) -> None:
    from retriage.classifier import current_model_version
    from retriage.classifier.label import label_database
    from retriage.lookup import lookup
    from retriage.report import print_weekly

    out = console()
    con = Database(db)  # held only for each transaction: `show` and `stats` answer while the demo labels
    result = import_files(con, snapshot_files())
    c = result.counts
    out.print(f"[bold]1. snapshot[/]: {result.records} issues from {result.files} files "
              f"({c['new']} new, {c['updated']} updated, {c['unchanged']} unchanged)")
    n = load_team_labels(con)
    out.print(f"[bold]2. team labels[/]: {n} hand-labeled issues loaded into gold_labels")
    from retriage.classifier.snapshot_cache import load_into

    with transaction(con):
        cached = load_into(con)
    if cached:
        out.print(f"   embedding cache: {cached} MiniLM vectors of the snapshot's texts loaded from the package")

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=out, transient=True) as prog:
        task = prog.add_task("3. labeling issues", total=None)
        res = label_database(con, progress=lambda k: prog.advance(task, k),
                             on_total=lambda t: prog.update(task, total=t))
    out.print(f"[bold]3. labeled[/] {res.labeled} issues with model {res.model_version} "
              f"({res.already} were already labeled by it)")
    from retriage.db.lexical import ensure_all

    with con.reading() as reader:
        for cost in ensure_all(reader):
            out.print(f"   {cost['kind']} index: {cost['issues']} issues in {cost['seconds']} s "
                      f"({cost['tokenised']} tokenised, {cost['reused']} reused)")
        out.print(stats_table(queries.stats(reader, current_model_version())))
        out.print(f"[bold]4. lookup[/]: retriage show {example}")
        out.print(issue_panel(lookup(reader, example)))
        out.print("[bold]5. weekly RE-category report[/] (last 12 weeks of the snapshot)")
        print_weekly(reader, out, weeks=12)
