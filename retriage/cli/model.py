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
    refit: bool = typer.Option(True, "--refit/--no-refit", help="After the fit without the dev split (scored "
                               "on it, saved in held_out/), fit the model on every label, the dev split included."),
    search: bool = typer.Option(False, "--search", help="Choose the settings (each head's C, TF-IDF weight and "
                                "blend, the nearest labeled issues' votes, the fix and abstain thresholds) on four "
                                "blocked folds instead of taking those of --model (default: the shipped model's). "
                                "About five times as long as a train without it."),
):
    """Fit the classifier from the labeled set (and corrections) with the settings of --model (default: the shipped
    model; --search chooses them again) and print its dev-split metrics (those of its fit without the dev split)
    and the fast path's agreement. The model goes to the user data folder, never into the installed package: use
    it with `--model DIR` or RETRIAGE_MODEL=DIR. Not on a terminal, each phase is one line on standard error."""
    from retriage.classifier.train import refresh_fast_head
    from retriage.classifier.train import train as run_train
    from retriage.db.store import Database
    from retriage.taxonomy import LABELS_DIR

    settings = None
    if not search and not fast_only:
        from retriage.classifier import model_dir
        from retriage.classifier.train import settings_of

        settings = settings_of(model_dir(model))
    con = Database(db)  # the embedding cache, held only while a chunk of vectors is written
    prog, advance = _progress(None, "embedding issues")
    phase = _phases(prog, "train")
    with prog:
        if fast_only:
            trained, fast = refresh_fast_head(con, labels or LABELS_DIR, output or model, progress=advance)
        else:
            result = run_train(con, labels or LABELS_DIR, output, progress=advance, extra_labels=extra_labels,
                               corrections=corrections, refit=refit, settings=settings, search=search, log=phase)
            trained, fast = result.model, result.fast
    phase("done")
    out = {"model_version": trained.version, "model_dir": str(trained.folder),
           "fast_path": fast.to_dict() if fast else None}
    if not fast_only:
        out.update({"n_train": result.n_train, "n_dev": result.n_dev, "coverage": round(result.coverage, 4),
                    "corrections": result.n_corrections, "dev": {k: v.to_dict() for k, v in result.dev.items()}})
    if as_json:
        print_json(out)
        return
    c = _console()
    lines = []  # plain text, each line whole: the console wraps at its width, and a pipe must get full lines
    if not fast_only:
        refit = result.model.meta.get("refit_on_dev")
        lines.append(f"model {result.version} trained on {result.n_train} issues ({result.n_corrections} corrections "
                     f"among the labels{', the dev split included' if refit else ''}); "
                     + ("its fit without the dev split, " if refit else "")
                     + f"evaluated on {result.n_dev} dev issues (abstains below confidence "
                     f"{result.model.threshold:.2f}; coverage {result.coverage:.0%})")
        if c.is_terminal:
            from retriage.classifier.render import scores_table

            c.print(lines.pop(), markup=False)
            for target, s in result.dev.items():
                c.print(scores_table(target, {"model": s}))
        else:  # one row per class, tab-separated, nothing cropped
            lines.append("target\tclass\tsupport\tF1\tprecision\trecall")
            for target, s in result.dev.items():
                lines += [f"{target}\t{k}\t{v['support']}\t{v['f1']:.2f}\t{v['precision']:.2f}\t{v['recall']:.2f}"
                          for k, v in s.per_class.items()] + [f"{target}\tmacro-F1\t\t{s.macro_f1:.3f}\t\t"]
        n = result.model.meta.get("hyperparameters", {}).get("nearest_labels") or {}
        lines.append(f"nearest labeled issues' votes: weight {n.get('weight', 0):g}" + (
            f" ({n['k']} nearest, temperature {n['temperature']:g}, balance {n['balance']:g})"
            if n.get("weight") else " (the heads alone)"))
    if fast:
        judged = " (its gate chosen with the fit without the dev split)" if trained.meta.get("refit_on_dev") else ""
        lines.append(f"fast path of `retriage classify` for model {trained.version}{judged}, on {fast.n} dev issues: "
                     f"answers {fast.fast_share:.0%} alone; same RE class as the model {fast.re_agreement:.1%} "
                     f"(fast head alone {fast.re_agreement_fast_only:.1%}), same component "
                     f"{fast.component_agreement:.1%}")
    lines.append(f"model folder {trained.folder}: use it with `--model {trained.folder}` or")
    lines.append(f"export RETRIAGE_MODEL={trained.folder}")
    for line in lines:
        if c.is_terminal:  # the terminal wraps a long line for the eye; the text keeps it whole
            c.print(line, soft_wrap=True, markup=False)
        else:
            typer.echo(line)


def _phases(prog, command: str):
    """What each phase is told to: on a terminal the progress display's description, else one line on standard
    error per phase, with the seconds since the start (`train: ... [12.3 s]`)."""
    import time

    started = time.monotonic()
    if prog.console.is_terminal:
        return lambda what: prog.update(prog.task_ids[0], description=what)
    prog.disable = True  # off a terminal the display draws nothing but a blank line as it stops
    return lambda what: typer.echo(f"{command}: {what} [{time.monotonic() - started:.1f} s]", err=True)


def label(
    db: Optional[str] = Db,
    as_json: bool = Json,
    model: Optional[str] = Model,
    fast: bool = typer.Option(True, "--fast/--exact", help="--fast (default): the fast head answers where its "
                              "gate is open, the full model elsewhere; --exact: the full model on every issue."),
    workers: int = typer.Option(0, "--workers", min=0, max=64, help="Worker processes of --fast (0: one per core, "
                                "at most 2)."),
    changed: bool = typer.Option(False, "--changed", help="Label again only the issues whose nearest labeled "
                                 "neighbours changed (corrections and confirmations recorded since their label)."),
):
    """Label every issue in the database that has no prediction from the current model."""
    from retriage.classifier.label import label_database
    from retriage.classifier.model import IssueClassifier
    from retriage.db.store import Database

    classifier = IssueClassifier.load(model)
    con = Database(db)  # held only for each chunk's transaction: show, stats and report answer meanwhile
    from retriage.classifier.nearest_labels import with_corrections
    from retriage.review import changed_issues

    if changed:
        from retriage.bot.label_events import apply_label_events

        apply_label_events(con, model_version=classifier.version)  # maintainers' labels since the bot's comment
    classifier = with_corrections(classifier, con)  # corrections vote as labeled neighbours (issue 40)
    keys = changed_issues(con, classifier) if changed else None
    holder: dict = {}

    def on_total(n):
        holder["prog"], holder["advance"] = _progress(n, "labeling issues", unit="issues")
        holder["prog"].start()

    try:
        result = label_database(con, classifier, progress=lambda n: holder["advance"](n), on_total=on_total,
                                fast=fast and not changed, workers=workers or None, keys=keys)
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
    step = _phases(bar, "eval")
    with bar:
        report = run_eval(gold, db, generalisation=not dev_only, step=step, advance=lambda: advance(1),
                          model_dir=model)
    step("done")
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
