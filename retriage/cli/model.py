"""Commands of the classifier: train, label, predict, eval."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from retriage.cli.options import Db, Json, print_json
from retriage.cli.options import progress as _progress
from retriage.core.console import console as _console


def train(
    db: Optional[str] = Db,
    labels: Path = typer.Option(None, help="Folder of labeled *.jsonl files (default: the package's taxonomy/labels)."),
    output: Path = typer.Option(None, help="Where to write the model (default: the package's classifier/model)."),
    as_json: bool = Json,
    fast_only: bool = typer.Option(False, "--fast-only", help="Keep the model's heads; only distil the fast head "
                                   "of `retriage classify` again (from the model in --output or the package)."),
):
    """Fit the classifier from the labeled set and print its dev-split metrics (and the fast path's agreement)."""
    from retriage.classifier.train import refresh_fast_head
    from retriage.classifier.train import train as run_train
    from retriage.db.store import connect
    from retriage.taxonomy import LABELS_DIR

    con = connect(db)
    prog, advance = _progress(None, "embedding issues")
    with prog:
        if fast_only:
            model, fast = refresh_fast_head(con, labels or LABELS_DIR, output, progress=advance)
        else:
            result = run_train(con, labels or LABELS_DIR, output, progress=advance)
            model, fast = result.model, result.fast
    out = {"model_version": model.version, "fast_path": fast.to_dict() if fast else None}
    if not fast_only:
        out.update({"n_train": result.n_train, "n_dev": result.n_dev, "coverage": round(result.coverage, 4),
                    "dev": {k: v.to_dict() for k, v in result.dev.items()}})
    if as_json:
        print_json(out)
        return
    from retriage.classifier.render import scores_table

    c = _console()
    if not fast_only:
        c.print(f"model [bold]{result.version}[/] trained on {result.n_train} issues, evaluated on {result.n_dev} "
                f"dev issues (abstains below confidence {result.model.threshold:.2f}; coverage {result.coverage:.0%})")
        for target, s in result.dev.items():
            c.print(scores_table(target, {"model": s}))
    if fast:
        c.print(f"fast path of `retriage classify` for model {model.version}, on {fast.n} dev issues: answers "
                f"{fast.fast_share:.0%} alone; same RE class as the model {fast.re_agreement:.1%} "
                f"(fast head alone {fast.re_agreement_fast_only:.1%}), same component {fast.component_agreement:.1%}")


def label(
    db: Optional[str] = Db,
    as_json: bool = Json,
    fast: bool = typer.Option(True, "--fast/--exact", help="--fast (default): the fast head answers where its "
                              "gate is open, the full model elsewhere; --exact: the full model on every issue."),
    workers: int = typer.Option(0, "--workers", min=0, max=64, help="Worker processes of --fast (0: one per core, "
                                "at most 2)."),
):
    """Label every issue in the database that has no prediction from the current model."""
    from retriage.classifier.label import label_database
    from retriage.db.store import connect

    con = connect(db)
    holder: dict = {}

    def on_total(n):
        holder["prog"], holder["advance"] = _progress(n, "labeling issues", unit="issues")
        holder["prog"].start()

    try:
        result = label_database(con, progress=lambda n: holder["advance"](n), on_total=on_total, fast=fast,
                                workers=workers or None)
    finally:
        if "prog" in holder:
            holder["prog"].stop()
    out = {"labeled": result.labeled, "already_labeled": result.already, "model_version": result.model_version}
    if result.note:
        typer.echo(f"note: {result.note}", err=True)
    if as_json:
        print_json(out)
    else:
        typer.echo(f"labeled {result.labeled} issues with model {result.model_version} "
                   f"({result.already} already had a prediction from it"
                   + (f"; {result.fast} answered by the fast path)" if fast and not result.note else ")"))


def predict(
    input: Path = typer.Option(..., "--input", "-i", help="JSON lines of issue objects (corpus or GitHub API shape)."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write one JSON prediction per line."),
):
    """Batch prediction with a stable contract: one output line per input issue (see README, "predict")."""
    from retriage.classifier.predict import predict_file

    n = predict_file(input, output)
    typer.echo(f"wrote {n} predictions to {output}", err=True)


def eval_cmd(
    gold: Optional[Path] = typer.Option(None, "--gold", help="Labeled JSON lines (repo, number, re_class, component; "
                                        "title/body or text, else taken from the database or snapshot). "
                                        "Default: the dev split of the team's labeled set."),
    db: Optional[str] = Db,
    as_json: bool = Json,
    dev_only: bool = typer.Option(False, "--dev-only", help="Only the dev split (skip the future and new-engine "
                                  "splits, which refit the model on each split's training side)."),
):
    """Macro-F1, per-class precision/recall and confusion matrices, beside the baselines, on the dev split and
    on the splits that measure generalisation: future (trained before 2025-08-01) and new engine (TensorRT-LLM)."""
    from retriage.classifier.evaluation import run_eval

    status = _console(stderr=True).status("evaluating")
    with status:
        report = run_eval(gold, db, generalisation=not dev_only, step=lambda what: status.update(what))
    if as_json:
        print_json(report.to_dict())
        return
    from retriage.classifier.render import eval_report

    eval_report(_console(), report)
