"""One issue on demand, for `show` and `comment`: fetched from GitHub into the database (the issue, its comments
and the pull requests that reference it: miner/one_issue.py), then labeled with the shipped model.

Offline, or with a host that does not answer, it fails with one line within about 3 s (a 1.5 s bound on the name
lookup and on the connection, no repeats); `show` then falls back to the team's labeled record of the issue if
there is one. `--offline` / `--no-fetch` (or RETRIAGE_OFFLINE=1) forbid fetching.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from retriage.core.errors import UserError
from retriage.core.refs import format_ref
from retriage.db import queries
from retriage.db.store import connect, default_path
from retriage.miner.defaults import DEFAULT_BASE_URL

if TYPE_CHECKING:  # the model, PyGithub and the labeled set load only when needed: an offline failure is quick
    from retriage.classifier.model import IssueClassifier
    from retriage.miner.one_issue import FetchedIssue

OFFLINE_HINT = "; offline? --offline uses only what the database holds"


def label_one(con: duckdb.DuckDBPyConnection, repo: str, number: int, model: IssueClassifier | None = None,
              again: bool = False) -> None:
    """Label one stored issue with the model (numpy MiniLM: no torch import for one issue), unless it has a
    prediction of this model already and `again` is false."""
    from retriage.classifier.embed import get_embedder
    from retriage.classifier.label import label_database
    from retriage.classifier.model import IssueClassifier

    from retriage.classifier.nearest_labels import with_corrections

    model = with_corrections(model or IssueClassifier.load(), con)  # corrections vote at once (issue 40)
    if again or queries.latest_prediction(con, repo, number, model.version) is None:
        label_database(con, model, embedder=get_embedder("numpy"), keys=[(repo, number)])


def fetch_and_label(con: duckdb.DuckDBPyConnection, repo: str, number: int, base_url: str = DEFAULT_BASE_URL,
                    token: str | None = None, model: IssueClassifier | None = None) -> FetchedIssue:
    """Fetch the issue into `con` (writable) and label it when it is new or changed (or has no prediction)."""
    from retriage.miner.client import GitHubError
    from retriage.miner.one_issue import fetch_issue, quick_client

    ref = format_ref(repo, number)
    try:
        client = quick_client(base_url, token)
        try:
            fetched = fetch_issue(con, client, repo, number)
        finally:
            client.close()
    except GitHubError as e:
        hint = OFFLINE_HINT if e.kind in ("unavailable", "unreachable") else ""
        raise UserError(f"cannot fetch {ref} from {base_url}: {e}{hint}") from None
    if not fetched.is_pull_request:
        label_one(con, fetched.repo, number, model, again=fetched.changed)
    return fetched


def fetch_if_missing(db: str | None, repo: str, number: int, base_url: str = DEFAULT_BASE_URL,
                     token: str | None = None) -> FetchedIssue | None:
    """For `show`: fetch the issue when the database does not hold it (creating the database if need be). When
    the fetch fails and the team's labeled set knows the issue, None: `show` shows that record instead."""
    path = Path(db or default_path())
    existed = path.exists()
    if existed:
        con = connect(path, read_only=True)
        try:
            if queries.get_issue(con, repo, number) is not None:
                return None
        finally:
            con.close()
    con = None
    try:
        _check_reachable(repo, number, base_url)  # before the database is created, and PyGithub imported
        con = connect(path)
        return fetch_and_label(con, repo, number, base_url, token)
    except UserError as e:
        if con is not None:
            con.close()
        if not existed:  # no database left behind by a fetch that failed
            for f in (path, path.with_name(path.name + ".wal")):
                f.unlink(missing_ok=True)
        if _team_knows(repo, number):
            return None
        raise UserError(f"{format_ref(repo, number)} is not in the database; {e}") from None
    finally:
        if con is not None:
            con.close()


def _check_reachable(repo: str, number: int, base_url: str) -> None:
    from retriage.miner.client import GitHubError
    from retriage.miner.reach import check_reachable

    try:
        check_reachable(base_url)
    except GitHubError as e:
        raise UserError(f"cannot fetch {format_ref(repo, number)} from {base_url}: {e}{OFFLINE_HINT}") from None


def _team_knows(repo: str, number: int) -> bool:
    """Whether the team's labeled set has the issue (its keys only: quicker than reading the records whole)."""
    from retriage.classifier.dataset import label_files, read_labels
    from retriage.taxonomy import canonical_repo

    return any(canonical_repo(r["repo"]) == repo and int(r["number"]) == number
               for f in label_files() for r in read_labels(f))
