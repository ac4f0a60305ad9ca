"""The `retriage` command: a thin Typer layer over the library, the top layer of the package.

Each command parses options, calls one library function and renders its result (Rich for people, --json for
scripts). Heavy imports happen inside the commands, so `retriage --help` stays fast.
"""

from __future__ import annotations

import os
import sys

import typer

from retriage.cli import classify, data, mine, model, report, search
from retriage.core.errors import UserError

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    help="Mine LLM inference-engine issue trackers into DuckDB, classify resource bugs (RETAIN RE.1-RE.4), "
    "attach known fixes, and triage pasted stack traces.",
)

def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"retriage {version('retriage')}")
        except PackageNotFoundError:
            typer.echo("retriage (not installed)")
        raise typer.Exit()


@app.callback()
def _options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")) -> None:
    """Mine LLM inference-engine issue trackers into DuckDB, classify resource bugs (RETAIN RE.1-RE.4), attach
    known fixes, and triage pasted stack traces."""


COMMANDS = {  # name -> function, in the order `--help` lists them
    "import": data.import_cmd, "show": data.show, "stats": data.stats, "list": data.list_cmd,
    "search": search.search, "demo": data.demo,
    "mine": mine.mine, "report": report.report, "train": model.train, "label": model.label,
    "predict": model.predict, "eval": model.eval_cmd, "classify": classify.classify,
}
for _name, _command in COMMANDS.items():
    app.command(_name)(_command)


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
