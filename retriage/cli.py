"""The `retriage` command: a thin Typer layer over the library. Each command parses options, calls one
library function and renders its result (Rich for people, --json for scripts)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from retriage.errors import UserError

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    help="Mine LLM inference-engine issue trackers into DuckDB, classify resource bugs (RETAIN RE.1-RE.4), "
    "attach known fixes, and triage pasted stack traces.",
)

DbOption = typer.Option(None, "--db", envvar="RETRIAGE_DB", help="DuckDB file (default ./retriage.duckdb).")


def _print_json(obj) -> None:
    from retriage.db.queries import jsonable

    sys.stdout.write(json.dumps(jsonable(obj), indent=2, ensure_ascii=False) + "\n")


@app.command("import")
def import_cmd(
    files: List[Path] = typer.Argument(..., help="JSON array, JSON lines or .gz files of GitHub issue objects."),
    db: Optional[str] = DbOption,
    as_json: bool = typer.Option(False, "--json", help="Print the counts as JSON."),
):
    """Load GitHub issue objects (API or corpus shape) into the database, all or nothing."""
    from retriage.db.importer import import_files
    from retriage.db.store import connect

    con = connect(db)
    result = import_files(con, files)
    out = {"files": result.files, "records": result.records, **result.counts, "by_repo": result.by_repo}
    if as_json:
        _print_json(out)
    else:
        c = result.counts
        typer.echo(f"imported {result.records} records from {result.files} file(s): "
                   f"{c['new']} new, {c['updated']} updated, {c['unchanged']} unchanged")


@app.command()
def show(
    ref: str = typer.Argument(..., help="vllm#7472, sglang#123, llama.cpp#3825, trtllm#1458, owner/name#N or a URL."),
    db: Optional[str] = DbOption,
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
    similar: int = typer.Option(5, help="How many similar issues to list."),
):
    """Everything known about one issue: record, predicted class and component, known fixes, similar issues."""
    from retriage.db.store import connect
    from retriage.lookup import lookup
    from retriage.render import console, issue_panel

    con = connect(db, read_only=True)
    info = lookup(con, ref, similar=similar)
    if as_json:
        _print_json(info)
    else:
        console().print(issue_panel(info))


@app.command()
def stats(db: Optional[str] = DbOption, as_json: bool = typer.Option(False, "--json", help="Print as JSON.")):
    """Issues per repository, date range and share labeled by the current model."""
    from retriage.classifier import current_model_version
    from retriage.db import queries
    from retriage.db.store import connect
    from retriage.render import console, stats_table

    con = connect(db, read_only=True)
    s = queries.stats(con, current_model_version())
    if as_json:
        _print_json(s)
    else:
        console().print(stats_table(s))


@app.command()
def demo(
    db: Optional[str] = DbOption,
    example: str = typer.Option("llama.cpp#3825", help="Issue to show as a lookup example."),
):
    """Build the database from the bundled snapshot (no network, no token) and show what retriage knows."""
    from retriage.demo import run_demo

    run_demo(db, example)


from retriage.miner.command import mine as _mine  # noqa: E402  (light: heavy imports happen inside)

app.command("mine")(_mine)

from retriage.report.command import report as _report  # noqa: E402

app.command("report")(_report)

from retriage.classifier import commands as _clf  # noqa: E402

app.command("train")(_clf.train)
app.command("label")(_clf.label)
app.command("predict")(_clf.predict)
app.command("eval")(_clf.eval_cmd)

from retriage.triage.command import classify as _classify  # noqa: E402

app.command("classify")(_classify)


def main() -> None:
    try:
        app()
    except UserError as e:
        sys.stderr.write(f"retriage: error: {e}\n")
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("retriage: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as e:  # last resort: one line, never a traceback (RETRIAGE_DEBUG=1 shows it)
        if os.environ.get("RETRIAGE_DEBUG"):
            raise
        first = str(e).splitlines()[0] if str(e) else ""
        sys.stderr.write(f"retriage: internal error: {type(e).__name__}: {first}\n")
        sys.exit(70)


if __name__ == "__main__":
    main()
