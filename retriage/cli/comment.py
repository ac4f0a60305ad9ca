"""`retriage comment REF`: the bot's triage comment for one issue; printed, or posted with --post."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from retriage.cli.options import BaseUrl, Db, Json, Offline, print_json


def comment(
    ref: str = typer.Argument(..., help="The issue: vllm#123, owner/name#N, an issue URL, or a bare number of "
                              "the repository in GITHUB_REPOSITORY (GitHub Actions)."),
    post: bool = typer.Option(False, "--post", help="Create the one retriage comment on the issue, or update it "
                              "(or delete it when nothing is left to say). Needs GH_TOKEN or GITHUB_TOKEN."),
    label: bool = typer.Option(False, "--label", help="Add the labels taxonomy/bot.toml maps a confident class "
                               "to, if the repository has them (with --post; without it, only show them)."),
    base_url: str = BaseUrl,
    offline: bool = Offline,
    config: Optional[Path] = typer.Option(None, "--config", help="Bot settings over taxonomy/bot.toml "
                                          "(thresholds, label mapping)."),
    as_json: bool = Json,
    db: Optional[str] = Db,
):
    """Triage one issue as a Markdown comment: class, component, this engine's fix, evidence, similar issues.

    The issue is fetched from GitHub (stored and labeled) unless --offline. Without --post nothing is written to
    GitHub. Advice only: it never closes or locks an issue.
    """
    from retriage.bot.config import load_config
    from retriage.bot.run import comment_on_issue
    from retriage.miner.client import token_from_env

    run = comment_on_issue(db, ref, post=post, label=label, base_url=base_url, fetch=not offline,
                           config=load_config(config), token=token_from_env())
    if as_json:
        print_json(run.to_json())
        return
    if run.markdown:
        sys.stdout.write(run.markdown)
    else:
        sys.stderr.write(f"{run.ref}: nothing above the bot's thresholds: no comment\n")
    p = run.published
    if p is not None:
        where = f" {p.url}" if p.url else ""
        extra = f" ({p.duplicates_removed} duplicate(s) removed)" if p.duplicates_removed else ""
        sys.stderr.write(f"{run.ref}: comment {p.action}{where}{extra}\n")
    if run.labels is not None:
        lab = run.labels
        if not lab.wanted:
            sys.stderr.write(f"{run.ref}: no labels (class not confident enough, or none mapped)\n")
        elif lab.sent:
            sys.stderr.write(f"{run.ref}: labels added: {', '.join(lab.to_add)}\n")
        else:
            have = ", ".join(lab.to_add) or "none"
            sys.stderr.write(f"{run.ref}: labels mapped: {', '.join(lab.wanted)}; would add: {have}\n")
