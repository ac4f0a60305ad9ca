"""The label events of the issues a run stored: GET /repos/O/R/issues/N/events for each, labeled and unlabeled
events kept (db/label_events.py).

Which issues: those (not pull requests) stored with an `updated_at` past this resource's cursor in sync_state
(`label_events`: the updated_at of the last issue done, and "after #N" for ties), in that order. A label change
moves an issue's `updated_at`, so the issue listing stores it again and it comes past the cursor: only changed
issues are asked for, and the first run over a database asks for every issue once. Each issue's events are
stored in one transaction with the cursor, so a run killed or stopped here continues with the next issue, even
when the issue listing then answers 304 (the pending issues are found in the database, without a request).
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable

import duckdb

from retriage.db import label_events, writes
from retriage.db.store import transaction
from retriage.miner.client import GitHubClient, GitHubError
from retriage.miner.one_issue import all_pages

RESOURCE = "label_events"


def pending(con: duckdb.DuckDBPyConnection, repo: str) -> list[tuple[int, datetime]]:
    """(number, updated_at) of the issues whose label events are not stored yet, in the order to fetch them."""
    row = con.execute("SELECT cursor_updated_at, etag FROM sync_state WHERE repo = ? AND resource = ?",
                      [repo, RESOURCE]).fetchone()
    cursor, after = row if row else (None, None)
    number = int(after.removeprefix("after #")) if after and after.startswith("after #") else -1
    return con.execute("SELECT number, updated_at FROM issues WHERE repo = ? AND NOT is_pull_request AND "
                       "updated_at IS NOT NULL AND (?::TIMESTAMP IS NULL OR updated_at > ? OR "
                       "(updated_at = ? AND number > ?)) ORDER BY updated_at, number",
                       [repo, cursor, cursor, cursor, number]).fetchall()


def sync_label_events(con: duckdb.DuckDBPyConnection, client: GitHubClient, repo: str, res,
                      on_page: Callable[[], None]) -> None:
    """Fetch and store the label events of every pending issue; `res` (a sync.ResourceResult) counts them."""
    for number, updated in pending(con, repo):
        try:
            events, _ = all_pages(client, f"/repos/{repo}/issues/{number}/events")
        except GitHubError as e:
            if e.status not in (404, 410):  # gone since it was listed (deleted, transferred): nothing to keep
                raise
            events = []
        rows = label_events.event_rows(repo, number, events)
        with transaction(con):
            new = label_events.upsert(con, rows)
            writes.save_sync_state(con, repo, RESOURCE, updated, f"after #{number}", "complete")
        res.fetched += len(rows)
        res.new += new
        res.pages += 1
        res.cursor = updated
        on_page()
    res.complete = True
