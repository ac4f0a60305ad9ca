"""`retriage mine`: placeholder until the miner lands (issue 3)."""

from typing import List, Optional

import typer

from retriage.errors import UserError


def mine(
    repos: Optional[List[str]] = typer.Argument(None, help="OWNER/NAME or vllm, sglang, llama.cpp, trtllm."),
    db: Optional[str] = typer.Option(None, "--db", envvar="RETRIAGE_DB", help="DuckDB file."),
):
    """Sync issues, pull requests and comments from GitHub into the database (incremental, resumable)."""
    raise UserError("mine is not implemented yet")
