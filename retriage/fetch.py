"""One issue on demand, for `show` and `comment`: fetched from GitHub into the database (the issue, its comments
and the pull requests that reference it: miner/one_issue.py), then labeled with the shipped model.

Offline, or with a host that does not answer, it fails with one line within about 3 s (a 1.5 s bound on the name
lookup and on the connection, no repeats). `--offline` / `--no-fetch` (or RETRIAGE_OFFLINE=1) forbid it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from retriage.classifier.model import IssueClassifier
from retriage.core.errors import UserError
from retriage.core.refs import format_ref
from retriage.db import queries
from retriage.db.store import connect, default_path
from retriage.lookup import team_labeled
from retriage.miner.client import GitHubError
from retriage.miner.defaults import DEFAULT_BASE_URL
from retriage.miner.one_issue import FetchedIssue, fetch_issue, quick_client


def label_one(con: duckdb.DuckDBPyConnection, repo: str, number: int, model: IssueClassifier | None = None,
              again: bool = False) -> None:
    """Label one stored issue with the model (numpy MiniLM: no torch import for one issue), unless it has a
    prediction of this model already and `again` is false."""
    from retriage.classifier.embed import get_embedder
    from retriage.classifier.label import label_database

    model = model or IssueClassifier.load()
    if again or queries.latest_prediction(con, repo, number, model.version) is None:
        label_database(con, model, embedder=get_embedder("numpy"), keys=[(repo, number)])


def fetch_and_label(con: duckdb.DuckDBPyConnection, repo: str, number: int, base_url: str = DEFAULT_BASE_URL,
                    token: str | None = None, model: IssueClassifier | None = None) -> FetchedIssue:
    """Fetch the issue into `con` (writable) and label it when it is new or changed (or has no prediction)."""
    ref = format_ref(repo, number)
    try:
        client = quick_client(base_url, token)
        try:
            fetched = fetch_issue(con, client, repo, number)
        finally:
            client.close()
    except GitHubError as e:
        hint = "; offline? --offline uses only what the database holds" if e.kind == "unavailable" else ""
        raise UserError(f"cannot fetch {ref} from {base_url}: {e}{hint}") from None
    if not fetched.is_pull_request:
        label_one(con, fetched.repo, number, model, again=fetched.changed)
    return fetched


def fetch_if_missing(db: str | None, repo: str, number: int, base_url: str = DEFAULT_BASE_URL,
                     token: str | None = None) -> FetchedIssue | None:
    """For `show`: fetch the issue when it is neither in the database nor in the team's labeled set (which
    `show` can show without the network). Creates the database if there is none. None: nothing fetched."""
    path = db or default_path()
    if Path(path).exists():
        con = connect(path, read_only=True)
        try:
            if queries.get_issue(con, repo, number) is not None:
                return None
        finally:
            con.close()
    if team_labeled(repo, number) is not None:
        return None
    con = connect(path)
    try:
        return fetch_and_label(con, repo, number, base_url, token)
    finally:
        con.close()
