"""Which items to fetch and in what order: incremental, resumable listings of issues and comments.

Per repository and resource (`issues`, which include pull requests, and `comments`) one listing in ascending
`updated_at` from the cursor, the highest `updated_at` stored, sent as `since` in UTC. Each page is written in
one transaction together with the new cursor, so a run killed at any instant loses nothing acknowledged, and the
next run resumes at the cursor (sent a second early, see SINCE_OVERLAP); items at the cursor are fetched again
but, writes being upserts, never stored twice. Link `next` URLs are followed as given, never twice in a pass.

`next` links may be page offsets (api.github.com's are, for issue listings): an item edited during a pass moves
to the end and the items after its old place slide back, possibly onto a page already fetched. The edited item
shows up again later with a newer `updated_at`; then the listing is run again with `since` from its old time,
and the stored cursor stays there until that is done. A stopped pass leaves the time it started from in
sync_state.etag (`unverified since ...`), so the next run also compares what it lists with what was stored.

A pass that ends on a page that is not full, with no such edit, stores that page's URL and ETag
("ETAG\nURL" in sync_state.etag). The next run asks for that page with If-None-Match: an edit moves an item to
the end of the listing and a new item is added there, either of which changes that page, so a 304 (which GitHub
does not count) means nothing changed, and the comments listing is skipped too, as a new comment would have
moved its issue. A full last page is confirmed by one request from the cursor.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable
from urllib.parse import parse_qsl, urlencode, urlsplit

import duckdb

from retriage.db import writes
from retriage.db.records import RecordError, comment_row, issue_row
from retriage.db.store import transaction
from retriage.core.errors import UsageError
from retriage.miner.client import GitHubClient, GitHubError, RequestBudgetExhausted
from retriage.miner.label_sync import sync_label_events
from retriage.miner.links import store_pr_links
from retriage.taxonomy import canonical_repo, engine_by_alias, engines

COMPLETE, PARTIAL = "complete", "partial"
MAX_PASSES = 4  # passes over a listing per run: one, plus one to confirm or re-list after edits, and spares
# Pages of one listing in one run (sync_repos' max_pages, `mine --max-pages`): 2,000 pages are 200,000 items and
# 40% of an hour's authenticated rate limit, so an incremental run never gets near it, while a server whose `next`
# links never end (a new URL each time, so never a repeated page) stops here, not after hours. A larger first sync
# stops here too, everything listed stored, and the next run continues from the cursor (or raise --max-pages).
MAX_PAGES = 2_000
_UNSEEN = object()
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
    label_events: ResourceResult = field(default_factory=ResourceResult)  # miner/label_sync.py
    pull_requests: int = 0       # pull requests among the issues fetched beyond the cursor
    links: int = 0               # fix links found in their bodies
    requests: int = 0
    error: str | None = None
    fatal: bool = False          # the error would hit every repository (bad credentials, a long rate limit)
    retryable: bool = False      # a later run may well succeed (server errors, rate limits)
    stopped_before: str | None = None  # stopped: the rate limit left unwaited, no request being left
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
    key: str = "number"  # what tells two items apart


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
                   _rows(comment_row, "comment"), writes.upsert_comments, key="id")


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
        writes.save_sync_state(con, repo, listing.name, cursor, etag, COMPLETE if settled else PARTIAL)
    res.fetched += len(rows)
    res.new += counts["new"]
    res.updated += counts["updated"]
    res.pages += 1
    res.cursor = cursor
    return links


def _page_key(url: str) -> tuple:
    """A page's identity: its path and query, whatever host prefix or parameter order the link used."""
    parts = urlsplit(url)
    return parts.path, tuple(sorted(parse_qsl(parts.query)))


def _listing_start(listing: Listing, repo: str, client: GitHubClient, since: datetime | None,
                   exact: bool) -> str:
    params = {**listing.params, "per_page": client.per_page}
    if since is not None and since >= EPOCH:
        params["since"] = iso_utc(since if exact else since - SINCE_OVERLAP)
    return f"{listing.path.format(repo=repo)}?{urlencode(params)}"


UNVERIFIED = "unverified since "  # sync_state.etag of a listing stopped before its pass could check for edits
BEGINNING = datetime.min


def _stored_etag(stored: str | None) -> tuple[str | None, str | None, datetime | None]:
    """sync_state.etag -> (etag, url, unverified): "ETAG\nURL" (the page the ETag belongs to), a bare ETAG (of
    the listing from the cursor), or UNVERIFIED + the time the stopped pass started from."""
    if stored and stored.startswith(UNVERIFIED):
        when = stored[len(UNVERIFIED):]
        return None, None, BEGINNING if when == "-" else datetime.fromisoformat(when)
    etag, _, url = (stored or "").partition("\n")
    return etag or None, url or None, None


def _unverified(since: datetime | None) -> str:
    return UNVERIFIED + ("-" if since is None or since == BEGINNING else since.isoformat())


def _stored_times(con: duckdb.DuckDBPyConnection, listing: Listing, repo: str, keys: list) -> dict:
    """key -> updated_at as stored, for the given keys."""
    if not keys:
        return {}
    rows = con.execute(f"SELECT {listing.key}, updated_at FROM {listing.name} WHERE repo = ? AND "
                       f"{listing.key} IN (SELECT unnest(?))", [repo, keys]).fetchall()
    return dict(rows)


def sync_listing(con: duckdb.DuckDBPyConnection, client: GitHubClient, repo: str, listing: Listing,
                 since: datetime | None, res: ResourceResult, on_page: Callable[[int, int], None],
                 max_pages: int | None = None) -> None:
    """Bring one resource of one repository up to date, page by page; `on_page(pull_requests, links)`.

    A pass follows the `next` links from its start to the last page. Links may be page offsets: an item edited
    while the pass runs moves to the end, and the items after its old place slide back by one, possibly onto a
    page already fetched. Such an item is seen twice in the run with two `updated_at`s; the pass is then listed
    again from the older one (the slid items come after it), and until then the stored cursor stays there, so
    a stop in between loses nothing either. A pass whose last page is not full, with no such edit, has seen
    everything: that page's URL and ETag are stored, and the next run asks for that page alone (304: nothing
    changed, since any change lands on or before it). A full last page is confirmed by one request from the
    cursor."""
    state = load_state(con, repo, listing.name)
    known = state.cursor is not None
    cursor = state.cursor if known else since
    etag, url, unverified = _stored_etag(state.etag) if known else (None, None, None)
    resumed_at = cursor   # items stored by a stopped pass lie between `unverified` and this
    if etag and url is None:  # a bare ETag belongs to the listing from the cursor
        url = _listing_start(listing, repo, client, cursor, exact=False)
    url = url or _listing_start(listing, repo, client, cursor, exact=not known)
    seen: dict = {}       # key -> updated_at of every item listed in this run
    largest = 0           # the longest page seen: the server's page size, if it caps per_page
    pages, max_pages = 0, max_pages or MAX_PAGES
    reach = cursor        # how far the current pass has listed: what a stop here can resume from
    start = cursor - SINCE_OVERLAP if cursor is not None and cursor > BEGINNING + SINCE_OVERLAP else BEGINNING
    pending = start if unverified is None else min(unverified, start)  # where unchecked listing began
    try:
        for _ in range(MAX_PASSES):
            recheck: datetime | None = None  # the oldest place an item left while this pass listed
            fetched: set[tuple] = set()
            while True:
                key = _page_key(url)
                if key in fetched:
                    raise GitHubError(f"{listing.name} listing stopped: the server's next link repeats a page "
                                      f"already fetched ({client.redact(key[0])})")
                if pages >= max_pages:
                    raise GitHubError(f"{listing.name} listing stopped after {max_pages:,} pages in one run (page "
                                      f"cap, --max-pages)", kind="unavailable")
                fetched.add(key)
                try:
                    page = client.get(url, None, etag)
                except GitHubError as e:
                    if etag is None or e.status not in (404, 410, 422):
                        raise
                    etag, url = None, _listing_start(listing, repo, client, cursor, exact=False)
                    continue  # the stored page is gone (GitHub caps page numbers): list from the cursor
                pages += 1
                if page.status == 304:
                    res.not_modified = True
                    with transaction(con):
                        writes.save_sync_state(con, repo, listing.name, cursor, state.etag, COMPLETE)
                    res.complete, res.cursor = True, cursor
                    return
                etag = None
                if not isinstance(page.data, list):
                    raise GitHubError(f"expected a list from {listing.path.format(repo=repo)}, "
                                      f"got {type(page.data).__name__}")
                rows = listing.rows(page.data, repo)
                stored = _stored_times(con, listing, repo, [r[listing.key] for r in rows]) \
                    if unverified is not None else {}
                fresh = []
                for r in rows:
                    before = seen.get(r[listing.key], _UNSEEN)
                    old = stored.get(r[listing.key])
                    if before is _UNSEEN and old is not None and unverified <= old <= resumed_at:
                        before = old  # stored by a pass that stopped before it could see this edit
                    if before is _UNSEEN or before != r["updated_at"]:
                        fresh.append(r)
                    if before is not _UNSEEN and before is not None and before != r["updated_at"]:
                        recheck = before if recheck is None else min(recheck, before)
                    seen[r[listing.key]] = r["updated_at"]
                newest = max((r["updated_at"] for r in rows if r["updated_at"] is not None), default=None)
                cursor = max((c for c in (cursor, newest) if c is not None), default=None)
                reach = max((c for c in (reach, newest) if c is not None), default=None)
                largest = max(largest, len(rows))
                last = page.next_url is None
                # full: as long as asked for, or (servers may cap per_page) as long as the longest page of several
                full = len(rows) >= client.per_page or (pages > 1 and len(rows) >= largest > 0)
                settled = last and recheck is None and not full
                here = client.redact(url)
                stored_etag = (f"{page.etag}\n{here}" if page.etag and here == url else None) if settled \
                    else _unverified(pending)
                durable = reach if recheck is None or reach is None else min(reach, recheck)
                links = _store_page(con, repo, listing, rows, durable, settled, stored_etag, res)
                on_page(sum(1 for r in fresh if r.get("is_pull_request")), links)
                if last:
                    break
                url = page.next_url
            if settled:
                break
            # an edit slid items back (list again from where it left), or the last page was full (confirm)
            reach = recheck if recheck is not None else cursor
            pending = min(pending, reach - SINCE_OVERLAP if reach is not None else BEGINNING)
            url = _listing_start(listing, repo, client, reach, exact=False)
        else:  # items kept changing while we listed them: all is stored up to the cursor; resume from there
            _set_status(con, repo, listing.name, COMPLETE)
        res.complete = True
    except GitHubError as e:
        _set_status(con, repo, listing.name, f"failed: {client.redact(str(e))}")
        raise


def sync_repo(con: duckdb.DuckDBPyConnection, client: GitHubClient, repo: str, since: datetime | None = None,
              comments: bool = True, on_progress: Callable[[RepoResult], None] | None = None,
              result: RepoResult | None = None, max_pages: int | None = None) -> RepoResult:
    """Issues and pull requests, comments, then the label events of the issues (miner/label_sync.py), of
    one repository. Never raises GitHubError: the result says.
    `max_pages`: pages of each listing in this run (default MAX_PAGES)."""
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
        sync_listing(con, client, repo, ISSUES, since, result.issues, progress, max_pages)
        if not comments:
            result.comments.skipped = True
        elif result.issues.not_modified and load_state(con, repo, "comments").status == COMPLETE:
            result.comments.skipped = True
        else:
            sync_listing(con, client, repo, COMMENTS, since, result.comments, progress, max_pages)
        sync_label_events(con, client, repo, result.label_events, progress, max_pages, result.issues.not_modified)
        quiet = result.issues.not_modified and (result.comments.skipped or result.comments.not_modified) \
            and (result.label_events.skipped or result.label_events.not_modified)
        result.status = "unchanged" if quiet else "complete"
    except RequestBudgetExhausted as e:
        result.status, result.stopped_before = "stopped", e.waiting
    except GitHubError as e:
        result.status, result.error = "failed", client.redact(str(e))
        result.fatal, result.retryable = e.affects_all, e.retryable
    finally:
        progress()
    return result


def sync_repos(con: duckdb.DuckDBPyConnection, client: GitHubClient, repos: list[str],
               since: datetime | None = None, comments: bool = True,
               on_progress: Callable[[RepoResult], None] | None = None,
               max_pages: int | None = None) -> list[RepoResult]:
    """Each repository in turn. --max-requests, bad credentials or a long rate limit skip the ones left.
    `max_pages`: pages of each listing in this run (default MAX_PAGES)."""
    results = [RepoResult(repo) for repo in repos]
    for i, result in enumerate(results):
        sync_repo(con, client, result.repo, since, comments, on_progress, result, max_pages)
        if result.status == "stopped" or result.fatal:
            for rest in results[i + 1:]:
                rest.status = "skipped"
                if on_progress:
                    on_progress(rest)
            break
    return results
