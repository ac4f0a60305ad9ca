"""Which items to fetch and in what order: incremental, resumable listings of issues and comments.

Per repository and resource (`issues`, which include pull requests, and `comments`) one listing in ascending
`updated_at` from the cursor, the highest `updated_at` stored, sent as `since` in UTC. Each page is written in
one transaction together with the new cursor, so a run killed at any instant loses nothing acknowledged, and the
next run resumes at the cursor (sent a second early, see SINCE_OVERLAP); items at the cursor are fetched again
but, writes being upserts, never stored twice. Link `next` URLs are followed as given.

When a pass over the listing moved the cursor, one more request from the new cursor (normally one short page)
confirms that nothing changed meanwhile, and its ETag is stored: invariant, a stored etag belongs to the listing
from the stored cursor. The next run sends it as If-None-Match; an unchanged repository answers one 304 (which
GitHub does not count) and its comments listing is skipped, as any new comment would have moved an issue.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable

import duckdb

from retriage.db import writes
from retriage.db.records import RecordError, comment_row, issue_row
from retriage.db.store import transaction
from retriage.core.errors import UsageError
from retriage.miner.client import GitHubClient, GitHubError, RequestBudgetExhausted
from retriage.miner.links import store_pr_links
from retriage.taxonomy import canonical_repo, engine_by_alias, engines

COMPLETE, PARTIAL = "complete", "partial"
MAX_PASSES = 3  # passes over a listing per run: one, plus one to confirm (and a spare if items kept changing)
EPOCH = datetime(1970, 1, 2)  # GitHub answers `since` at the epoch with an empty list: never send one
# A stored cursor is sent a second early: whether GitHub's `since` is inclusive or not, items that share the
# cursor's second but came after the last stored page are listed again (and re-stored items are upserts).
SINCE_OVERLAP = timedelta(seconds=1)


@dataclass
class ResourceResult:
    fetched: int = 0
    new: int = 0
    updated: int = 0
    pages: int = 0
    not_modified: bool = False   # the first request answered 304
    skipped: bool = False        # not asked for (--no-comments, or nothing can have changed)
    complete: bool = False
    cursor: datetime | None = None


@dataclass
class RepoResult:
    repo: str
    status: str = "pending"      # complete | unchanged | stopped | failed | skipped
    issues: ResourceResult = field(default_factory=ResourceResult)
    comments: ResourceResult = field(default_factory=ResourceResult)
    pull_requests: int = 0       # pull requests among the issues fetched beyond the cursor
    links: int = 0               # fix links found in their bodies
    requests: int = 0
    error: str | None = None
    fatal: bool = False          # the error would hit every repository (bad credentials, a long rate limit)
    retryable: bool = False      # a later run may well succeed (server errors, rate limits)
    since_ignored: bool = False  # --since given, but the repository already has a cursor

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Listing:
    name: str
    path: str
    params: dict
    rows: Callable[[list, str], list[dict]]
    upsert: Callable[[duckdb.DuckDBPyConnection, list[dict]], dict]
    after_page: Callable[[duckdb.DuckDBPyConnection, list[dict]], int] | None = None


@dataclass(frozen=True)
class SyncState:
    cursor: datetime | None
    etag: str | None
    status: str | None


def _rows(convert: Callable[[dict, str], dict], what: str) -> Callable[[list, str], list[dict]]:
    def rows(items: list, repo: str) -> list[dict]:
        out = []
        for obj in items:
            try:
                row = convert(obj, repo)
            except RecordError as e:
                raise GitHubError(f"unexpected {what} object from GitHub: {e}") from None
            row["repo"] = repo
            out.append(row)
        return out
    return rows


ISSUES = Listing("issues", "/repos/{repo}/issues", {"state": "all", "sort": "updated", "direction": "asc"},
                 _rows(lambda obj, repo: issue_row(obj, default_repo=repo), "issue"), writes.upsert_issues,
                 store_pr_links)
COMMENTS = Listing("comments", "/repos/{repo}/issues/comments", {"sort": "updated", "direction": "asc"},
                   _rows(comment_row, "comment"), writes.upsert_comments)


def resolve_repos(names: list[str] | None) -> list[str]:
    """Engine aliases (vllm, sglang, llama.cpp, trtllm) or owner/name -> canonical owner/name; none -> all four."""
    if not names:
        return [e.repo for e in engines()]
    out: list[str] = []
    for name in names:
        engine = engine_by_alias(name)
        if engine:
            repo = engine.repo
        elif re.fullmatch(r"[\w.-]+/[\w.-]+", name.strip()):
            repo = canonical_repo(name.strip())
        else:
            known = ", ".join(e.id for e in engines())
            raise UsageError(f"unknown repository {name!r}: use OWNER/NAME or one of {known}")
        if repo not in out:
            out.append(repo)
    return out


def parse_since(text: str | None) -> datetime | None:
    """`2024-05-01` or an ISO time (UTC unless it says otherwise) -> naive UTC datetime."""
    if not text:
        return None
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since {text!r} is not a date: use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ") from None
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt


def iso_utc(dt: datetime) -> str:
    """The form GitHub expects for `since`, from a naive-UTC or aware datetime (never local time with a Z)."""
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def load_state(con: duckdb.DuckDBPyConnection, repo: str, resource: str) -> SyncState:
    row = con.execute("SELECT cursor_updated_at, etag, last_status FROM sync_state WHERE repo = ? AND resource = ?",
                      [repo, resource]).fetchone()
    return SyncState(*row) if row else SyncState(None, None, None)


def _set_status(con: duckdb.DuckDBPyConnection, repo: str, resource: str, status: str) -> None:
    state = load_state(con, repo, resource)
    with transaction(con):
        writes.save_sync_state(con, repo, resource, state.cursor, state.etag, status[:300])


def _store_page(con: duckdb.DuckDBPyConnection, repo: str, listing: Listing, rows: list[dict],
                cursor: datetime | None, settled: bool, etag: str | None, res: ResourceResult) -> int:
    """The page's rows, its fix links and the cursor it reaches, in one transaction. Returns new links."""
    with transaction(con):
        counts = listing.upsert(con, rows)
        links = listing.after_page(con, rows) if listing.after_page else 0
        writes.save_sync_state(con, repo, listing.name, cursor, etag if settled else None,
                               COMPLETE if settled else PARTIAL)
    res.fetched += len(rows)
    res.new += counts["new"]
    res.updated += counts["updated"]
    res.pages += 1
    res.cursor = cursor
    return links


def sync_listing(con: duckdb.DuckDBPyConnection, client: GitHubClient, repo: str, listing: Listing,
                 since: datetime | None, res: ResourceResult, on_page: Callable[[int, int], None]) -> None:
    """Bring one resource of one repository up to date, page by page; `on_page(pull_requests, links)`."""
    state = load_state(con, repo, listing.name)
    cursor = state.cursor if state.cursor is not None else since
    etag = state.etag if state.cursor is not None else None
    exact = cursor if state.cursor is None else None  # a --since of the user's is sent as given
    try:
        for _ in range(MAX_PASSES):
            pass_since = cursor
            params = {**listing.params, "per_page": client.per_page}
            if pass_since is not None and pass_since >= EPOCH:
                params["since"] = iso_utc(pass_since if pass_since == exact else pass_since - SINCE_OVERLAP)
            url: str | None = listing.path.format(repo=repo)
            first = True
            settled = False
            while url is not None:
                page = client.get(url, params if first else None, etag if first else None)
                if page.status == 304:
                    res.not_modified = True
                    with transaction(con):
                        writes.save_sync_state(con, repo, listing.name, cursor, etag, COMPLETE)
                    res.complete, res.cursor = True, cursor
                    return
                if not isinstance(page.data, list):
                    raise GitHubError(f"expected a list from {listing.path.format(repo=repo)}, "
                                      f"got {type(page.data).__name__}")
                rows = listing.rows(page.data, repo)
                newest = max((r["updated_at"] for r in rows if r["updated_at"] is not None), default=None)
                new_cursor = max((c for c in (cursor, newest) if c is not None), default=None)
                # one page, no newer item than the pass started from: all is fetched, and the ETag is the one
                # a request from this cursor will be compared against next run
                settled = first and page.next_url is None and new_cursor == pass_since
                links = _store_page(con, repo, listing, rows, new_cursor, settled, page.etag, res)
                cursor = new_cursor
                url, first, etag = page.next_url, False, None
                beyond = [r for r in rows if pass_since is None or (r["updated_at"] or pass_since) > pass_since]
                on_page(sum(1 for r in beyond if r.get("is_pull_request")), links)
            if settled:
                break
        else:  # items kept changing while we listed them: all is stored up to the cursor; resume from there
            _set_status(con, repo, listing.name, COMPLETE)
        res.complete = True
    except GitHubError as e:
        _set_status(con, repo, listing.name, f"failed: {e}")
        raise


def sync_repo(con: duckdb.DuckDBPyConnection, client: GitHubClient, repo: str, since: datetime | None = None,
              comments: bool = True, on_progress: Callable[[RepoResult], None] | None = None,
              result: RepoResult | None = None) -> RepoResult:
    """Issues and pull requests, then comments, of one repository. Never raises GitHubError: the result says."""
    result = result or RepoResult(repo)
    start = client.requests

    def progress(prs: int = 0, links: int = 0) -> None:
        result.pull_requests += prs
        result.links += links
        result.requests = client.requests - start
        if on_progress:
            on_progress(result)

    result.status = "running"
    result.since_ignored = since is not None and load_state(con, repo, "issues").cursor is not None
    progress()
    try:
        sync_listing(con, client, repo, ISSUES, since, result.issues, progress)
        if not comments:
            result.comments.skipped = True
        elif result.issues.not_modified and load_state(con, repo, "comments").status == COMPLETE:
            result.comments.skipped = True
        else:
            sync_listing(con, client, repo, COMMENTS, since, result.comments, progress)
        quiet = result.issues.not_modified and (result.comments.skipped or result.comments.not_modified)
        result.status = "unchanged" if quiet else "complete"
    except RequestBudgetExhausted:
        result.status = "stopped"
    except GitHubError as e:
        result.status, result.error = "failed", str(e)
        result.fatal, result.retryable = e.affects_all, e.retryable
    finally:
        progress()
    return result


def sync_repos(con: duckdb.DuckDBPyConnection, client: GitHubClient, repos: list[str],
               since: datetime | None = None, comments: bool = True,
               on_progress: Callable[[RepoResult], None] | None = None) -> list[RepoResult]:
    """Each repository in turn. --max-requests, bad credentials or a long rate limit skip the ones left."""
    results = [RepoResult(repo) for repo in repos]
    for i, result in enumerate(results):
        sync_repo(con, client, result.repo, since, comments, on_progress, result)
        if result.status == "stopped" or result.fatal:
            for rest in results[i + 1:]:
                rest.status = "skipped"
                if on_progress:
                    on_progress(rest)
            break
    return results
