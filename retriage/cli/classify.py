"""`retriage classify [FILE|-]`: the command over retriage.triage.classify."""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

from retriage.cli.options import Json, print_json
from retriage.core.console import console
from retriage.core.errors import UserError


def _open_in_background(path: str):
    """Open the database in a thread while the model runs (importing DuckDB costs a few hundred ms);
    returns a function that waits for it. Similar issues are a bonus: a busy or foreign file yields None."""
    import threading

    box: dict = {}

    def work():
        from retriage.db.store import connect

        try:
            box["con"] = connect(path, read_only=True)
        except Exception:  # noqa: BLE001 - any failure only drops the similar-issues section
            box["con"] = None

    t = threading.Thread(target=work, daemon=True)
    t.start()

    def get():
        t.join()
        return box.get("con")

    return get


def classify(
    file: Optional[str] = typer.Argument(None, help="Log or stack trace file; '-' or nothing reads standard input."),
    engine: Optional[str] = typer.Option(None, "--engine", "-e", help="vllm, sglang, llama.cpp or trtllm (default: detected)."),
    db: Optional[str] = typer.Option(None, "--db", envvar="RETRIAGE_DB",
                                     help="Database for similar issues (default ./retriage.duckdb if it exists)."),
    similar: int = typer.Option(5, help="How many similar past issues to show (0: none)."),
    as_json: bool = Json,
    exact: bool = typer.Option(False, "--exact", help="Always run the full MiniLM model (about 0.3 s more; by "
                               "default a fast path answers when it is clearly on one side of the model's "
                               "decision, the model itself otherwise)."),
):
    """What is this log, and what do I do? Class, component, this engine's fix steps and similar issues."""
    from retriage.triage.logtext import read_head_tail

    if not 0 <= similar <= 100:
        raise UserError(f"--similar must be from 0 to 100, not {similar}", exit_code=2)
    if engine is not None:
        from retriage.taxonomy import engine_by_alias, engines

        if engine_by_alias(engine) is None:
            raise UserError(f"--engine must be one of {', '.join(e.id for e in engines())}, not {engine[:40]!r}",
                            exit_code=2)
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
    from retriage.triage.classify import Triage

    path = db or "retriage.duckdb"
    con = _open_in_background(path) if similar > 0 and os.path.exists(path) else None
    # one question per process: ask the database for similar issues rather than loading all their vectors
    try:
        result = Triage(fast=not exact, index=False).run(data, engine=engine, con=con, similar=similar)
    finally:
        if con is not None:
            con()  # let the background open finish: exiting while DuckDB loads aborts the process (exit 134)
    if as_json:
        print_json(result.to_json())
    else:
        from retriage.triage.render import triage_panel

        console().print(triage_panel(result))
