"""`retriage relabel`: correct an issue's label (the command over retriage.corrections)."""

from __future__ import annotations

from enum import Enum
from typing import Optional

import typer

from retriage import taxonomy
from retriage.cli.options import Db, Json, Model, print_json

ReClass = Enum("ReClass", {c: c for c in taxonomy.re_class_ids()}, type=str)
Component = Enum("Component", {c: c for c in taxonomy.component_ids()}, type=str)
FixTag = Enum("FixTag", {c: c for c in taxonomy.fix_tag_ids()}, type=str)


def relabel(
    ref: str = typer.Argument(..., help="vllm#7472, llama.cpp#3825, owner/name#N or an issue URL."),
    re_class: Optional[ReClass] = typer.Option(None, "--class", help="The right RE class."),
    component: Optional[Component] = typer.Option(None, "--component", help="The right component."),
    fix: Optional[FixTag] = typer.Option(None, "--fix", help="The right known-fix tag (none: no known fix)."),
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

    row = record(Database(db), ref, re_class and re_class.value, component and component.value,
                 fix and fix.value, reason, by, current_model_version(model))
    if as_json:
        print_json(row)
        return
    was = f" (was {row['was']})" if row["was"] else ""
    typer.echo(f"{row['ref']}: {row['re_class']} / {row['component']} / fix {row['known_fix']}, corrected by "
               f"{row['corrected_by']}{was}")
