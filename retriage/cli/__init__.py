"""The `retriage` command: a thin Typer layer over the library, the top layer of the package.

Each command parses options, calls one library function and renders its result (Rich for people, --json for
scripts). Heavy imports happen inside the commands, so `retriage --help` stays fast. main() maps every outcome
to the exit codes documented in the README (retriage.core.errors): usage errors Click finds and the
commands' own checks of option values both exit 2, with one `retriage: error: ...` line.
"""

from __future__ import annotations

import errno
import os
import sys

import typer

from retriage.cli import classify, comment, completion, data, labels, mine, model, report, review, search
from retriage.core.streams import ReaderGone
from retriage.core.errors import FAILED, INTERNAL, INTERRUPTED, OK, USAGE, UserError

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
    "predict": model.predict, "eval": model.eval_cmd, "relabel": labels.relabel, "review": review.review,
    "classify": classify.classify,
    "comment": comment.comment, "completion": completion.completion,
}
for _name, _command in COMMANDS.items():
    app.command(_name, context_settings=getattr(_command, "context_settings", None))(_command)


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
    _say(f"{PROG}: error: {_one_line(e.format_message())} (see `{where} --help`)\n")
    return USAGE


def _bad_argument() -> str | None:
    """A message for the first command-line argument that is not valid UTF-8 (Python keeps such bytes as lone
    surrogates, which no later step could print or store)."""
    for i, arg in enumerate(sys.argv[1:], 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            return f"argument {i} is not valid UTF-8: {shown}"
    return None


def _install_streams() -> None:
    """Standard output and error through the redaction step (retriage.core.streams); a closed one made a
    stream whose writes fail with one line."""
    from retriage.core.streams import ClosedStream, RedactingStream

    sys.stdout = RedactingStream(sys.stdout if sys.stdout is not None else ClosedStream("standard output"))
    sys.stderr = RedactingStream(sys.stderr if sys.stderr is not None else ClosedStream("standard error"))


def _say(text: str) -> None:
    """One line on standard error, if it can still be written."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _silence_stdout() -> None:
    """Drop what standard output still holds and point it at /dev/null, so that Python's own flush at exit
    does not fail a second time."""
    discard = getattr(sys.stdout, "discard", None)
    if discard:
        discard()
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _reader_gone() -> int:
    """The reader of standard output went away (`| head`): quiet, exit 0, as Unix tools do."""
    _silence_stdout()
    return OK


_WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EBADF, errno.EIO, errno.EFBIG)


def _os_error(e: OSError) -> int:
    """A full disk, a closed standard output or a file the system refused: one line, exit 1."""
    what = _one_line(e.strerror or e)
    if e.errno in _WRITE_ERRORS:
        _say(f"{PROG}: error: cannot write {e.filename or 'standard output'}: {what}\n")
        _silence_stdout()
    else:
        _say(f"{PROG}: error: {e.filename + ': ' if e.filename else ''}{what}\n")
    return FAILED


def _run() -> int:
    bad = _bad_argument()
    if bad:
        _say(f"{PROG}: error: {bad}\n")
        return USAGE
    try:
        code = app(prog_name=PROG, standalone_mode=False)
        code = code if isinstance(code, int) else OK  # an int is typer.Exit's code; Typer turns Ctrl-C into 130
        if code == INTERRUPTED:
            _say(f"{PROG}: interrupted\n")
        sys.stdout.flush()
        return code
    except UserError as e:
        _say(f"{PROG}: error: {_one_line(e)}\n")
        return e.exit_code
    except click_exceptions.UsageError as e:
        return _usage_error(e)
    except click_exceptions.ClickException as e:  # e.g. a file Click cannot open
        _say(f"{PROG}: error: {_one_line(e.format_message())}\n")
        return e.exit_code
    except (KeyboardInterrupt, typer.Abort, getattr(click_exceptions, "Abort", typer.Abort)):
        _say(f"{PROG}: interrupted\n")
        return INTERRUPTED
    except (BrokenPipeError, ReaderGone):
        return _reader_gone()
    except OSError as e:  # a full disk, a closed standard output, an unreadable file: one line
        if os.environ.get("RETRIAGE_DEBUG"):
            raise
        return _os_error(e)
    except Exception as e:  # last resort: one line, never a traceback (RETRIAGE_DEBUG=1 shows it)
        if os.environ.get("RETRIAGE_DEBUG"):
            raise
        first = str(e).splitlines()[0] if str(e) else ""
        _say(f"{PROG}: internal error: {type(e).__name__}: {first}\n")
        return INTERNAL


def main() -> None:
    _install_streams()
    code = _run()
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ReaderGone):
        code = _reader_gone()
    except OSError as e:
        code = _os_error(e) if code == OK else code
        _silence_stdout()
    sys.exit(code)
