"""`retriage review`: the issues a correction would teach most, confirmed or corrected with one key (the command
over retriage.review)."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from retriage.cli.options import Db, Engine, Json, Model, Since, print_json


def review(
    since: Optional[str] = Since,
    engine: List[str] = Engine,
    limit: int = typer.Option(10, "--limit", "-L", help="At most this many issues (1 to 1000)."),
    by: Optional[str] = typer.Option(None, "--by", help="Who reviews (default $USER, else git config user.name)."),
    model: Optional[str] = Model,
    db: Optional[str] = Db,
    as_json: bool = Json,
):
    """The issues a correction would teach most (unsure, unlike every labeled issue, new words shared by
    several), each with its prediction. On a terminal: y confirms, c corrects, s skips, q quits; confirmations
    and corrections are recorded as `relabel` records them and count at once in the nearest-label votes.
    Without --since: the newest 30 days the database holds."""
    import os

    from retriage.classifier import current_model_version
    from retriage.classifier.model import IssueClassifier
    from retriage.core.errors import UserError
    from retriage.db.store import Database
    from retriage.review import build_queue, run_session, since_day

    day = since_day(since)
    classifier = IssueClassifier.load(model)
    if not os.path.exists(db or os.environ.get("RETRIAGE_DB") or "retriage.duckdb"):
        raise UserError(f"no database at {db or os.environ.get('RETRIAGE_DB') or 'retriage.duckdb'}: run "
                        "`retriage demo`, `retriage mine` or `retriage import` first")
    from retriage.bot.label_events import apply_label_events

    database = Database(db)
    apply_label_events(database, model_version=classifier.version)  # maintainers' labels since the bot's comment
    with database.reading() as con:
        items = build_queue(con, classifier, day, engine, limit)
    if as_json:
        print_json(items)
        return
    if not items:
        raise UserError("nothing to review: no labeled issue without a correction in that window "
                        "(run `retriage label`, or widen --since)")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        for n, it in enumerate(items, 1):
            typer.echo(f"{n:>3}. {it['ref']:<22} {it['re_class']:<5} {it['re_confidence']:.2f} "
                       f"{it['component']:<13} {it['why']}  {(it['title'] or '')[:60]}")
        return

    def choose(what: str, choices: list[str], default: str) -> str:
        return typer.prompt(f"    {what}", default=default, type=typer.Choice(choices), show_choices=True)

    done = run_session(database, items, lambda: typer.getchar(), choose, typer.echo, by,
                       current_model_version(model))
    typer.echo(f"{done.confirmed} confirmed, {done.corrected} corrected, {done.skipped} skipped"
               + (" (quit)" if done.quit else "") + "; they count at once in the votes; `retriage label "
               "--changed` re-labels the issues near them")
