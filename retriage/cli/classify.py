"""`retriage classify [FILE|-]`: the command over retriage.triage.classify."""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

from retriage.cli.options import Json, Model, print_json
from retriage.core.console import console
from retriage.core.errors import UserError

SIMILAR_WAIT = 3.0  # seconds classify waits for a writer before answering without similar issues


def _open_in_background(path: str):
    """Open the database in a thread while the model runs (importing DuckDB costs a few hundred ms);
    returns a function that waits for it, and a function saying why it failed. Similar issues are a bonus: a
    file busy for longer than a brief wait, or a foreign one, yields None, and the answer's notes say so."""
    import threading

    box: dict = {}

    def work():
        from retriage.db.store import connect

        try:
            box["con"] = connect(path, read_only=True, wait=SIMILAR_WAIT)
        except Exception as e:  # noqa: BLE001 - any failure only drops the similar-issues section
            box["con"], box["why"] = None, str(e).splitlines()[0] if str(e) else type(e).__name__

    t = threading.Thread(target=work, daemon=True)
    t.start()

    def get():
        t.join()
        return box.get("con")

    return get, lambda: box.get("why")


def classify(
    file: Optional[str] = typer.Argument(None, help="Log or stack trace file; '-' or nothing reads standard input."),
    engine: Optional[str] = typer.Option(None, "--engine", "-e", help="vllm, sglang, llama.cpp or trtllm (default: detected)."),
    db: Optional[str] = typer.Option(None, "--db", envvar="RETRIAGE_DB",
                                     help="Database for similar issues (default ./retriage.duckdb if it exists)."),
    similar: int = typer.Option(5, help="How many similar past issues to show (0: none)."),
    as_json: bool = Json,
    fmt: str = typer.Option("panel", "--format", help="panel (default), json (same as --json) or markdown (the "
                            "comment `retriage comment` would post, with the bot's thresholds)."),
    exact: bool = typer.Option(False, "--exact", help="Always run the full MiniLM model (about 0.3 s more; by "
                               "default a fast path answers when it is clearly on one side of the model's "
                               "decision, the model itself otherwise)."),
    model: Optional[str] = Model,
):
    """What is this log, and what do I do? Class, component, this engine's fix steps and similar issues."""
    from retriage.triage.logtext import read_head_tail

    if fmt not in ("panel", "json", "markdown"):
        raise UserError(f"--format must be one of panel, json, markdown, not {fmt!r}", exit_code=2)
    if not 0 <= similar <= 100:
        raise UserError(f"--similar must be from 0 to 100, not {similar}", exit_code=2)
    if engine is not None:
        from retriage.taxonomy import engine_by_alias, engines

        if engine_by_alias(engine) is None:
            raise UserError(f"--engine must be one of {', '.join(e.id for e in engines())}, not {engine[:40]!r}",
                            exit_code=2)
    if db is not None and similar > 0 and not os.path.isfile(db):  # asked for by name: say so, do no work
        raise UserError(f"--db {db}: no such database file (similar issues come from it; leave --db out, or "
                        "give --similar 0, to classify without them)", exit_code=2)
    if file in (None, "-"):
        if sys.stdin is None or sys.stdin.isatty():
            raise UserError("no input: give a file or pipe a log into `retriage classify`", exit_code=2)
        data = read_head_tail(sys.stdin.buffer)
    else:
        try:
            with open(file, "rb") as f:
                data = read_head_tail(f)
        except FileNotFoundError:
            raise UserError(f"{file}: no such file", exit_code=2) from None
        except OSError as e:
            raise UserError(f"{file}: cannot read: {e.strerror}", exit_code=2) from None
    if "numpy" not in sys.modules:
        # one BLAS thread per view: the views are embedded in parallel threads (faster on few cores)
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from retriage.classifier.model import IssueClassifier
    from retriage.triage.classify import Triage

    classifier = IssueClassifier.load(model)  # a missing or damaged --model folder: one line, before any work
    path = db or "retriage.duckdb"
    con, why = _open_in_background(path) if similar > 0 and os.path.exists(path) else (None, lambda: None)
    # one question per process: ask the database for similar issues rather than loading all their vectors
    try:
        result = Triage(classifier, fast=not exact, index=False).run(data, engine=engine, con=con, similar=similar)
        if similar > 0 and con is None:  # one line, so that a missing section is never a silent one (after the
            # input was read: bad input is one line of error and nothing else)
            sys.stderr.write(f"retriage: similar issues left out: no database at ./{path} (build one with "
                             "`retriage demo` or `retriage mine`, or give --db PATH)\n")
        if fmt == "markdown":
            return _print_markdown(result, con() if con is not None else None)
    finally:
        if con is not None:
            con()  # let the background open finish: exiting while DuckDB loads aborts the process (exit 134)
    if why():
        result.notes.append(f"similar issues skipped: {why()}")
    if as_json or fmt == "json":
        print_json(result.to_json())
    else:
        from retriage.triage.render import print_result

        print_result(console(), result)


def _print_markdown(result, con) -> None:
    """The bot's comment for the log (retriage/bot), or a note when nothing is above its thresholds."""
    from retriage.bot.comment import render_comment
    from retriage.bot.config import load_config
    from retriage.bot.verdict import log_verdict

    markdown = render_comment(log_verdict(result, con), load_config())
    if markdown is None:
        sys.stderr.write("nothing above the bot's thresholds (taxonomy/bot.toml): no comment; "
                         "`retriage classify` without --format shows everything\n")
    else:
        sys.stdout.write(markdown)
