"""One issue on demand: the issue, its comments and the pull requests that reference it, in one issue's worth of
requests, stored in one transaction.

Requests: GET /repos/O/R/issues/N, then its comments and its timeline (100 a page each). The timeline's
`cross-referenced` events carry each referencing pull request whole, body included: those pull requests are
stored, and the ones whose body says "fixes #N" are linked to the issue (`issue_links`, as `mine` links every PR).
A server without the timeline (404) costs the links only.

Quick by design, for a command a person is waiting on (`show`, `comment`): the host checked first (miner/reach.py:
name and connection within 1.5 s each), a connect timeout of 1.5 s, no repeat after a connection error, rate
limits waited only briefly. The
token rules are the miner's (miner/client.py): GH_TOKEN, then GITHUB_TOKEN, never in a message.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from retriage.db import writes
from retriage.db.records import RecordError, comment_row, issue_row
from retriage.db.store import transaction
from retriage.miner.client import GitHubClient, GitHubError, RetryPolicy
from retriage.miner.links import fixed_issues, store_pr_links
from retriage.miner.reach import CONNECT_TIMEOUT, check_reachable

READ_TIMEOUT = 30
QUICK_POLICY = RetryPolicy(attempts=1, rate_limit_waits=2, secondary_wait=5.0, max_wait=60.0,
                           connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT)
MAX_PAGES = 10  # per listing: 1,000 comments or timeline events


@dataclass
class FetchedIssue:
    repo: str
    number: int
    is_new: bool              # not in the database before
    changed: bool             # new, or its title, body, state or labels changed
    is_pull_request: bool
    comments: int
    pull_requests: int        # pull requests that reference it (stored too)
    links: int                # of which say they fix it
    requests: int


def quick_client(base_url: str, token: str | None) -> GitHubClient:
    """A client for one issue's requests; a GitHubError (kind "unavailable") at once if the host is unreachable."""
    check_reachable(base_url, CONNECT_TIMEOUT)
    return GitHubClient(base_url, token, policy=QUICK_POLICY, seconds_between_requests=0)


def all_pages(client: GitHubClient, path: str) -> tuple[list, bool]:
    """Every item of a paginated listing, up to MAX_PAGES pages; (items, complete)."""
    items: list = []
    page = client.get(path, {"per_page": client.per_page})
    for _ in range(MAX_PAGES):
        if not isinstance(page.data, list):
            raise GitHubError(f"expected a list from {path}, got {type(page.data).__name__}")
        items += page.data
        if page.next_url is None:
            return items, True
        page = client.get(page.next_url)
    return items, False


def _referencing_prs(events: list) -> list[dict]:
    out = []
    for ev in events:
        source = ev.get("source") if isinstance(ev, dict) and ev.get("event") == "cross-referenced" else None
        pr = source.get("issue") if isinstance(source, dict) else None
        if isinstance(pr, dict) and pr.get("pull_request"):
            try:
                out.append(issue_row(pr))
            except RecordError:
                continue  # a malformed event costs that pull request only
    return out


def fetch_issue(con: duckdb.DuckDBPyConnection, client: GitHubClient, repo: str, number: int) -> FetchedIssue:
    """Fetch one issue with its comments and referencing pull requests and store them, in one transaction."""
    start = client.requests
    where = f"{repo}#{number}"
    try:
        page = client.get(f"/repos/{repo}/issues/{number}")
    except GitHubError as e:
        if e.status == 404:
            raise GitHubError(f"{where}: no such issue on {client.base_url} (or no access)", 404) from None
        raise
    try:
        row = issue_row(page.data, default_repo=repo)
    except RecordError as e:
        raise GitHubError(f"unexpected issue object for {where}: {e}") from None
    repo = row["repo"]  # a renamed repository answers under its new name
    comments, complete = all_pages(client, f"/repos/{repo}/issues/{number}/comments")
    try:
        events, _ = all_pages(client, f"/repos/{repo}/issues/{number}/timeline")
    except GitHubError as e:
        if e.status not in (404, 410):
            raise
        events = []
    try:
        comment_rows = [comment_row(c, repo) for c in comments]
    except RecordError as e:
        raise GitHubError(f"unexpected comment object for {where}: {e}") from None
    pr_rows = [r for r in _referencing_prs(events) if (r["repo"], r["number"]) != (repo, number)]
    with transaction(con):
        counts = writes.upsert_issues(con, [row])
        writes.upsert_issues(con, pr_rows)
        writes.upsert_comments(con, comment_rows)
        if complete:
            writes.delete_issue_comments_except(con, repo, number, [r["id"] for r in comment_rows])
        store_pr_links(con, pr_rows)
    linked = sum(1 for r in pr_rows if (repo, number) in fixed_issues(r["body"], r["repo"]))
    return FetchedIssue(repo, number, counts["new"] == 1, counts["unchanged"] == 0, row["is_pull_request"],
                        len(comment_rows), len(pr_rows), linked, client.requests - start)
