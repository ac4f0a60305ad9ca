"""Commands of the classifier: train, label, predict, eval."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from retriage.cli.options import Db, Json, Model, print_json
from retriage.cli.options import progress as _progress
from retriage.core.console import console as _console


def train(
    db: Optional[str] = Db,
    labels: Path = typer.Option(None, help="Folder (or one file) of labeled *.jsonl (default: the package's "
                                "taxonomy/labels)."),
    extra_labels: List[Path] = typer.Option([], "--extra-labels", help="More labeled JSON lines, over --labels "
                                             "(same fields; records of issues outside the corpus need title and "
                                             "body); repeatable."),
    corrections: bool = typer.Option(True, "--corrections/--no-corrections", help="Learn the corrections "
                                     "recorded with `retriage relabel` in --db (over the labels)."),
    output: Path = typer.Option(None, "--output", "-o", help="Model folder to write (default: the user data "
                                "folder, e.g. ~/.local/share/retriage/models/<version>)."),
    model: Optional[str] = Model,
    as_json: bool = Json,
    fast_only: bool = typer.Option(False, "--fast-only", help="Keep the model's heads; only distil the fast head "
                                   "of `retriage classify` again (of the model in --output, else --model)."),
    refit: bool = typer.Option(True, "--refit/--no-refit", help="After choosing the settings and the "
                               "fix and abstain thresholds (on four blocked folds) and scoring the dev split (with a "
                               "fit that never saw it, saved in held_out/), fit the model on every label, the dev "
                               "split included."),
    keep_settings: bool = typer.Option(False, "--keep-settings", help="Use the heads' settings of --model "
                                       "(default: the shipped model), and those of its nearest labeled issues' "
                                       "votes, instead of searching them on the folds (a model without votes gets "
                                       "them searched); the fix and abstain thresholds are still chosen on "
                                       "the folds. For a "
                                       "few added labels: faster, and the settings do not move with one more "
                                       "example."),
):
    """Fit the classifier from the labeled set (and corrections) and print its dev-split metrics (those of its fit
    without the dev split) and the fast path's agreement. The model goes to the user data folder, never into the
    installed package: use it with `--model DIR` or RETRIAGE_MODEL=DIR."""
    from retriage.classifier.train import refresh_fast_head
    from retriage.classifier.train import train as run_train
    from retriage.db.store import Database
    from retriage.taxonomy import LABELS_DIR

    settings = None
    if keep_settings and not fast_only:
        from retriage.classifier.model import IssueClassifier
        from retriage.classifier.train import kept_settings
        from retriage.core.errors import UserError

        try:
            settings = kept_settings(IssueClassifier.load(model).meta.get("hyperparameters", {}))
        except ValueError as e:
            raise UserError(f"--keep-settings: {e}") from None
    con = Database(db)  # the embedding cache, held only while a chunk of vectors is written
    prog, advance = _progress(None, "embedding issues")
    with prog:
        if fast_only:
            trained, fast = refresh_fast_head(con, labels or LABELS_DIR, output or model, progress=advance)
        else:
            result = run_train(con, labels or LABELS_DIR, output, progress=advance, extra_labels=extra_labels,
                               corrections=corrections, refit=refit, settings=settings)
            trained, fast = result.model, result.fast
    out = {"model_version": trained.version, "model_dir": str(trained.folder),
           "fast_path": fast.to_dict() if fast else None}
    if not fast_only:
        out.update({"n_train": result.n_train, "n_dev": result.n_dev, "coverage": round(result.coverage, 4),
                    "corrections": result.n_corrections, "dev": {k: v.to_dict() for k, v in result.dev.items()}})
    if as_json:
        print_json(out)
        return
    from retriage.classifier.render import scores_table

    c = _console()
    if not fast_only:
        refit = result.model.meta.get("refit_on_dev")
        c.print(f"model [bold]{result.version}[/] trained on {result.n_train} issues ({result.n_corrections} "
                f"corrections among the labels{', the dev split included' if refit else ''}); "
                + ("its fit without the dev split, " if refit else "")
                + f"evaluated on {result.n_dev} dev issues (abstains below confidence "
                f"{result.model.threshold:.2f}; coverage {result.coverage:.0%})")
        for target, s in result.dev.items():
            c.print(scores_table(target, {"model": s}))
        n = result.model.meta.get("hyperparameters", {}).get("nearest_labels") or {}
        c.print(f"nearest labeled issues' votes: weight {n.get('weight', 0):g}" + (
            f" ({n['k']} nearest, temperature {n['temperature']:g}, balance {n['balance']:g})"
            if n.get("weight") else " (the heads alone)"))
    if fast:
        judged = " (its gate chosen with the fit without the dev split)" if trained.meta.get("refit_on_dev") else ""
        c.print(f"fast path of `retriage classify` for model {trained.version}{judged}, on {fast.n} dev issues: "
                f"answers {fast.fast_share:.0%} alone; same RE class as the model {fast.re_agreement:.1%} "
                f"(fast head alone {fast.re_agreement_fast_only:.1%}), same component {fast.component_agreement:.1%}")
    c.print(f"model folder {trained.folder}: use it with `--model {trained.folder}` or "
            f"`export RETRIAGE_MODEL={trained.folder}`")


def label(
    db: Optional[str] = Db,
    as_json: bool = Json,
    model: Optional[str] = Model,
    fast: bool = typer.Option(True, "--fast/--exact", help="--fast (default): the fast head answers where its "
                              "gate is open, the full model elsewhere; --exact: the full model on every issue."),
    workers: int = typer.Option(0, "--workers", min=0, max=64, help="Worker processes of --fast (0: one per core, "
                                "at most 2)."),
):
    """Label every issue in the database that has no prediction from the current model."""
    from retriage.classifier.label import label_database
    from retriage.classifier.model import IssueClassifier
    from retriage.db.store import Database

    classifier = IssueClassifier.load(model)
    con = Database(db)  # held only for each chunk's transaction: show, stats and report answer meanwhile
    holder: dict = {}

    def on_total(n):
        holder["prog"], holder["advance"] = _progress(n, "labeling issues", unit="issues")
        holder["prog"].start()

    try:
        result = label_database(con, classifier, progress=lambda n: holder["advance"](n), on_total=on_total,
                                fast=fast, workers=workers or None)
    finally:
        if "prog" in holder:
            holder["prog"].stop()
    from retriage.db.lexical import ensure_all

    built = ensure_all(con)  # the search and similar-issue indexes, for the issues as they are now
    out = {"labeled": result.labeled, "already_labeled": result.already, "model_version": result.model_version,
           "indexes_built": built}
    if result.note:
        typer.echo(f"note: {result.note}", err=True)
    if as_json:
        print_json(out)
    else:
        typer.echo(f"labeled {result.labeled} issues with model {result.model_version} "
                   f"({result.already} already had a prediction from it"
                   + (f"; {result.fast} answered by the fast path)" if fast and not result.note else ")"))


def predict(
    input: Path = typer.Option(..., "--input", "-i", help="JSON lines of issue objects (corpus, GitHub API or gh "
                               "shape); - reads standard input."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write one JSON prediction per line ('-': "
                                "standard output; a symlink is written through)."),
    model: Optional[str] = Model,
):
    """Batch prediction with a stable contract: one output line per input issue (see docs/cli.md, "predict")."""
    from retriage.classifier.model import IssueClassifier
    from retriage.classifier.predict import predict_file

    n = predict_file(input, output, IssueClassifier.load(model))
    typer.echo(f"wrote {n} predictions to {'standard output' if str(output) == '-' else output}", err=True)


def eval_cmd(
    gold: Optional[Path] = typer.Option(None, "--gold", help="Labeled JSON lines (repo, number, re_class, component; "
                                        "title/body or text, else taken from the database or snapshot). "
                                        "Default: the dev split of the team's labeled set."),
    db: Optional[str] = Db,
    as_json: bool = Json,
    dev_only: bool = typer.Option(False, "--dev-only", help="Only the dev split (skip the future and new-engine "
                                  "splits, which refit the model on each split's training side, and the holdout set)."),
    model: Optional[str] = Model,
    markdown: Optional[Path] = typer.Option(None, "--markdown", metavar="PATH", help="Also write the tables as "
                                            "Markdown to PATH, whole or not at all ('-': standard output, "
                                            "instead of the tables). `make figures` writes docs/evaluation.md."),
):
    """Macro-F1, per-class precision/recall and confusion matrices, beside the baselines, on the dev split and
    on the sets that measure generalisation: future (trained before 2025-08-01), new engine (TensorRT-LLM) and
    holdout (taxonomy/holdout/, issues no fit has read: the model is scored as it is, so a model trained with
    them as --extra-labels reads optimistic there)."""
    from retriage.classifier.evaluation import run_eval
    from retriage.core.errors import UsageError
    from retriage.core.output import is_stdout, output_target, write_text_atomic
    from retriage.taxonomy import HOLDOUT_DIR

    if markdown is not None:  # a bad PATH fails now, not after minutes of work
        if is_stdout(markdown) and as_json:
            raise UsageError("--markdown - and --json both write to standard output: give --markdown a file")
        if not is_stdout(markdown):
            output_target(markdown)
    # the dev split (or --gold), then each generalisation split, then the holdout set
    stages = 1 if dev_only or gold is not None else 3 + any(HOLDOUT_DIR.glob("*.jsonl"))
    bar, advance = _progress(stages, "evaluating")
    task = bar.task_ids[0]
    with bar:
        report = run_eval(gold, db, generalisation=not dev_only,
                          step=lambda what: bar.update(task, description=what), advance=lambda: advance(1),
                          model_dir=model)
    if markdown is not None:
        from retriage.classifier.evaluation import markdown as to_markdown

        write_text_atomic(markdown, to_markdown(report) + "\n")
        if is_stdout(markdown):
            return
        typer.echo(f"wrote {markdown}", err=True)
    if as_json:
        print_json(report.to_dict())
        return
    from retriage.classifier.render import eval_report

    eval_report(_console(), report)
