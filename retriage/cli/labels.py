"""`retriage relabel`: correct an issue's label (the command over retriage.corrections)."""

from __future__ import annotations

from typing import Optional

import typer

from retriage import taxonomy
from retriage.cli.options import Db, Json, Model, one_of, print_json


def relabel(
    ref: str = typer.Argument(..., help="vllm#7472, llama.cpp#3825, owner/name#N or an issue URL."),
    re_class: Optional[str] = typer.Option(None, "--class", help=f"The right RE class: "
                                           f"{one_of(taxonomy.re_class_ids())}."),
    component: Optional[str] = typer.Option(None, "--component", help=f"The right component: "
                                            f"{one_of(taxonomy.component_ids())}."),
    fix: Optional[str] = typer.Option(None, "--fix", help=f"The right known-fix tag: "
                                      f"{one_of(taxonomy.fix_tag_ids())} (none: no known fix)."),
    reason: str = typer.Option(..., "--reason", help="Why: what in the issue shows it."),
    by: Optional[str] = typer.Option(None, "--by", help="Who corrects (default $USER, else git config user.name)."),
    model: Optional[str] = Model,
    db: Optional[str] = Db,
    as_json: bool = Json,
):
    """Record a correction of an issue's label (who, when, why). `show` and `list` show it instead of the
    prediction, marked as corrected; `train` learns it. Options not given keep the label shown now."""
    from retriage.classifier import current_model_version
    from retriage.corrections import relabel as record
    from retriage.db.store import Database

    row = record(Database(db), ref, re_class, component, fix, reason, by, current_model_version(model))
    if as_json:
        print_json(row)
        return
    was = f" (was {row['was']})" if row["was"] else ""
    typer.echo(f"{row['ref']}: {row['re_class']} / {row['component']} / fix {row['known_fix']}, corrected by "
               f"{row['corrected_by']}{was}")
