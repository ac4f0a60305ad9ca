"""`retriage completion SHELL`: print the shell completion script (also `retriage --show-completion` for the
current shell, `retriage --install-completion` to install it)."""

from __future__ import annotations

from enum import Enum

import typer

PROG = "retriage"  # main() runs the app under this name, so the completion variable is _RETRIAGE_COMPLETE

class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"
    powershell = "powershell"


def completion(shell: Shell = typer.Argument(..., case_sensitive=False, help="The shell to complete in.")):
    """Print the completion script for SHELL, e.g. `eval "$(retriage completion bash)"` in ~/.bashrc.

    zsh: `retriage completion zsh > ~/.zfunc/_retriage`; fish: `retriage completion fish >
    ~/.config/fish/completions/retriage.fish`. It completes commands, options and their choices.
    """
    from typer.completion import get_completion_script  # Typer's own scripts, the ones --show-completion prints

    typer.echo(get_completion_script(prog_name=PROG, complete_var=f"_{PROG.upper()}_COMPLETE", shell=shell.value))
