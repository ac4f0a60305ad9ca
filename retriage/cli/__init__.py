"""The `retriage` command: a thin Typer layer over the library, the top layer of the package.

Each command parses options, calls one library function and renders its result (Rich for people, --json for
scripts). Heavy imports happen inside the commands, so `retriage --help` stays fast.
"""

from __future__ import annotations

import os
import sys

import typer

from retriage.cli import classify, data, mine, model, report
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
    "import": data.import_cmd, "show": data.show, "stats": data.stats, "list": data.list_cmd, "demo": data.demo,
    "mine": mine.mine, "report": report.report, "train": model.train, "label": model.label,
    "predict": model.predict, "eval": model.eval_cmd, "classify": classify.classify,
}
for _name, _command in COMMANDS.items():
    app.command(_name)(_command)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _click_exceptions():
    """Typer 0.29 ships its own copy of Click; older ones use Click itself."""
    try:
        from typer._click import exceptions as exc
        from typer.exceptions import Abort
    except ImportError:  # pragma: no cover - older Typer
        from click import exceptions as exc
        from click.exceptions import Abort
    return exc, Abort


def main() -> None:
    click, Abort = _click_exceptions()
    try:
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except UserError as e:
        sys.stderr.write(f"retriage: error: {_one_line(e)}\n")
        sys.exit(e.exit_code)
    except click.NoArgsIsHelpError as e:
        e.show()
        sys.exit(e.exit_code)
    except click.UsageError as e:  # a bad option or argument: one line naming it, not Click's usage box
        hint = f" (see `retriage {e.ctx.info_name} --help`)" if e.ctx and e.ctx.parent else ""
        sys.stderr.write(f"retriage: error: {_one_line(e.format_message())}{hint}\n")
        sys.exit(2)
    except click.ClickException as e:
        sys.stderr.write(f"retriage: error: {_one_line(e.format_message())}\n")
        sys.exit(e.exit_code or 1)
    except (KeyboardInterrupt, Abort) as e:
        if isinstance(e, Abort) and not isinstance(e.__context__, KeyboardInterrupt):
            if os.environ.get("RETRIAGE_DEBUG"):
                raise
            sys.stderr.write("retriage: internal error: end of input where more was expected\n")
            sys.exit(70)
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
