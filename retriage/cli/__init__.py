"""The `retriage` command: a thin Typer layer over the library, the top layer of the package.

Each command parses options, calls one library function and renders its result (Rich for people, --json for
scripts). Heavy imports happen inside the commands, so `retriage --help` stays fast. main() maps every outcome
to the exit codes documented in the README (retriage.core.errors): usage errors Click finds and the
commands' own checks of option values both exit 2, with one `retriage: error: ...` line.
"""

from __future__ import annotations

import os
import sys

import typer

from retriage.cli import classify, comment, completion, data, labels, mine, model, report, search
from retriage.core.errors import INTERNAL, INTERRUPTED, OK, USAGE, UserError

PROG = "retriage"

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # --install-completion / --show-completion [bash|zsh|fish|powershell]
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
    "predict": model.predict, "eval": model.eval_cmd, "relabel": labels.relabel, "classify": classify.classify,
    "comment": comment.comment, "completion": completion.completion,
}
for _name, _command in COMMANDS.items():
    app.command(_name)(_command)


try:  # Typer >= 0.20 carries its own copy of Click; before, it uses Click itself
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover
    from click import exceptions as click_exceptions


def _one_line(text) -> str:
    return " ".join(str(text).split())


def _usage_error(e) -> int:
    """Click's usage errors (unknown option or command, a value Click rejects) as one line, exit 2."""
    if isinstance(e, getattr(click_exceptions, "NoArgsIsHelpError", ())):  # bare `retriage`: the help, exit 0
        typer.echo(e.ctx.get_help())
        return OK
    where = e.ctx.command_path if e.ctx is not None else PROG
    sys.stderr.write(f"{PROG}: error: {_one_line(e.format_message())} (see `{where} --help`)\n")
    return USAGE


def main() -> None:
    try:
        code = app(prog_name=PROG, standalone_mode=False)
        code = code if isinstance(code, int) else OK  # an int is typer.Exit's code; Typer turns Ctrl-C into 130
        if code == INTERRUPTED:
            sys.stderr.write(f"{PROG}: interrupted\n")
        sys.exit(code)
    except UserError as e:
        sys.stderr.write(f"{PROG}: error: {_one_line(e)}\n")
        sys.exit(e.exit_code)
    except click_exceptions.UsageError as e:
        sys.exit(_usage_error(e))
    except click_exceptions.ClickException as e:  # e.g. a file Click cannot open
        sys.stderr.write(f"{PROG}: error: {_one_line(e.format_message())}\n")
        sys.exit(e.exit_code)
    except (KeyboardInterrupt, typer.Abort, getattr(click_exceptions, "Abort", typer.Abort)):
        sys.stderr.write(f"{PROG}: interrupted\n")
        sys.exit(INTERRUPTED)
    except BrokenPipeError:
        sys.exit(OK)
    except Exception as e:  # last resort: one line, never a traceback (RETRIAGE_DEBUG=1 shows it)
        if os.environ.get("RETRIAGE_DEBUG"):
            raise
        first = str(e).splitlines()[0] if str(e) else ""
        sys.stderr.write(f"{PROG}: internal error: {type(e).__name__}: {first}\n")
        sys.exit(INTERNAL)
