"""The label events of a repository's issues from GET /repos/O/R/issues/events (every issue event of the
repository, newest first), labeled and unlabeled events of issues (not pull requests) kept (db/label_events.py).

A run reads pages from the newest down to the first page that reaches an event id at or below `through`, the
id up to which every event is stored, or to the end (a first run; bounded by max_pages). Event ids grow with
time, so that page holds the last new event. Each page's events are stored in one transaction with the state
(sync_state, resource `label_events`, JSON in its etag column):

  through   every event with an id at or below it is stored (null: none yet)
  top, next a stopped walk stored the events from `top` down to the page before `next` (the gap below is open)
  etag      the ETag of the newest page, kept when a walk from it finished: no new event costs one 304
  issues    the issues listing's cursor when the last walk finished: a label change moves an issue's
            `updated_at`, so while the issues listing answers 304 and this cursor is unchanged, no request is made

A stopped or killed run therefore never moves `through` past events it did not store: the next run first reads
the gap from `next` down to `through` (page-number links shift as events arrive: pages are read again, never
skipped), then from the newest down to `top`. A stored `next` the server no longer serves (GitHub caps page
numbers) is dropped and the walk from the newest goes down to `through` instead.
"""

from __future__ import annotations

import json
from typing import Callable

import duckdb

from retriage.db import label_events, writes
from retriage.db.records import RecordError, parse_time
from retriage.db.store import transaction
from retriage.miner.client import GitHubClient, GitHubError

RESOURCE = "label_events"
MAX_PAGES = 2_000  # as miner/sync.py's listings (--max-pages)


def load(con: duckdb.DuckDBPyConnection, repo: str) -> dict:
    """The stored state: {"through", "top", "next", "etag"}; all None without one (or in an older form)."""
    row = con.execute("SELECT etag FROM sync_state WHERE repo = ? AND resource = ?", [repo, RESOURCE]).fetchone()
    try:
        state = json.loads(row[0]) if row and row[0] else {}
    except ValueError:
        state = {}
    if not isinstance(state, dict):
        state = {}
    return {k: state.get(k) for k in ("through", "top", "next", "etag", "issues")}


def _issues_cursor(con: duckdb.DuckDBPyConnection, repo: str) -> str | None:
    row = con.execute("SELECT cursor_updated_at FROM sync_state WHERE repo = ? AND resource = 'issues'",
                      [repo]).fetchone()
    return row[0].isoformat() if row and row[0] else None


def _finished(con: duckdb.DuckDBPyConnection, repo: str) -> bool:
    row = con.execute("SELECT last_status FROM sync_state WHERE repo = ? AND resource = ?",
                      [repo, RESOURCE]).fetchone()
    return bool(row) and row[0] == "complete"


def _save(con, repo: str, state: dict | None, when, status: str) -> None:
    """The state (None: as stored), the time of the newest event stored through it (None: as stored) and the
    status, in the caller's transaction."""
    row = con.execute("SELECT cursor_updated_at, etag FROM sync_state WHERE repo = ? AND resource = ?",
                      [repo, RESOURCE]).fetchone() or (None, None)
    writes.save_sync_state(con, repo, RESOURCE, when or row[0], row[1] if state is None else json.dumps(state),
                           status[:300])


def _rows(repo: str, events: list) -> list[dict]:
    """The label events of issues among a page of repository events."""
    rows = []
    for ev in events:
        issue = ev.get("issue") if isinstance(ev, dict) else None
        number = issue.get("number") if isinstance(issue, dict) else None
        if isinstance(number, int) and not isinstance(number, bool) and "pull_request" not in issue:
            rows += label_events.event_rows(repo, number, [ev])
    return rows


def _ids(events: list) -> list[int]:
    return [ev["id"] for ev in events if isinstance(ev, dict) and isinstance(ev.get("id"), int)
            and not isinstance(ev.get("id"), bool)]


def _newest_time(events: list):
    for ev in events:
        try:
            when = parse_time(ev.get("created_at"), "created_at") if isinstance(ev, dict) else None
        except RecordError:
            when = None
        if when is not None:
            return when
    return None


def sync_label_events(con: duckdb.DuckDBPyConnection, client: GitHubClient, repo: str, res,
                      on_page: Callable[[], None], max_pages: int | None = None,
                      issues_unchanged: bool = False) -> None:
    """Bring the repository's label events up to date; `res` (a sync.ResourceResult) counts them.
    `issues_unchanged`: the issues listing answered 304 in this run."""
    state = load(con, repo)
    if issues_unchanged and state["next"] is None and state["issues"] is not None \
            and state["issues"] == _issues_cursor(con, repo) and _finished(con, repo):
        res.skipped = res.complete = True
        return
    newest = f"/repos/{repo}/issues/events?per_page={client.per_page}"
    budget = {"pages": 0, "max": max_pages or MAX_PAGES, "seen": set()}
    try:
        if state["next"]:  # the gap a stopped run left, down to `through`
            try:
                _walk(con, client, repo, state, state["next"], res, on_page, budget, from_newest=False)
            except GitHubError as e:
                if e.status not in (404, 410, 422):
                    raise
                state.update(top=None, next=None, etag=None)  # page gone: from the newest down to `through`
        _walk(con, client, repo, state, newest, res, on_page, budget, from_newest=True)
        res.complete = True
    except GitHubError as e:
        with transaction(con):
            _save(con, repo, None, None, f"failed: {client.redact(str(e))}")
        raise


def _walk(con, client: GitHubClient, repo: str, state: dict, url: str, res, on_page, budget: dict,
          from_newest: bool) -> None:
    """Pages from `url` down to an event id at or below state["through"] (or the end), each stored with the
    state it leaves; `state` is updated in place."""
    floor = state["through"]
    etag = state["etag"] if from_newest and floor is not None else None
    top, first_etag, top_time = (None, None, None) if from_newest else (state["top"], None, None)
    while True:
        if url in budget["seen"]:
            raise GitHubError(f"label events stopped: the server's next link repeats a page already fetched "
                              f"({client.redact(url)})")
        if budget["pages"] >= budget["max"]:
            raise GitHubError(f"label events stopped after {budget['max']:,} pages in one run (page cap, "
                              "--max-pages)", kind="unavailable")
        budget["seen"].add(url)
        page = client.get(url, None, etag)
        budget["pages"] += 1
        res.pages += 1
        if page.status == 304:
            res.not_modified = True
            state["issues"] = _issues_cursor(con, repo)
            with transaction(con):
                _save(con, repo, state, None, "complete")
            on_page()
            return
        if not isinstance(page.data, list):
            raise GitHubError(f"expected a list from /repos/{repo}/issues/events, got {type(page.data).__name__}")
        ids = _ids(page.data)
        if from_newest and top is None and ids:
            top, first_etag, top_time = max(ids), page.etag, _newest_time(page.data)
        reached = page.next_url is None or (floor is not None and any(i <= floor for i in ids))
        rows = [r for r in _rows(repo, page.data) if floor is None or r["event_id"] > floor]
        if reached:
            through = max((t for t in (top, floor) if t is not None), default=None)
            state.update(through=through, top=None, next=None, issues=_issues_cursor(con, repo),
                         etag=(first_etag if top is not None else page.etag) if from_newest else None)
        else:
            state.update(top=top, next=page.next_url, etag=None)
        with transaction(con):
            new = label_events.upsert(con, rows)
            _save(con, repo, state, top_time, "complete" if reached else "partial")
        res.fetched += len(rows)
        res.new += new
        res.cursor = top_time or res.cursor
        on_page()
        if reached:
            return
        url, etag = page.next_url, None
