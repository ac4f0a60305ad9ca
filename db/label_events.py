"""Label events of issues (labeled / unlabeled, as GitHub's issue events API gives them) -> table label_events.

Rows are keyed by (repo, number, event_id): storing the same events again changes nothing. Events of other kinds
(closed, assigned, ...) and malformed ones are skipped; a token-shaped string in a name is masked. Readers: `label_history(con, repo, number)`.
"""

from __future__ import annotations

from typing import Any

import duckdb

from retriage.core.secrets import redact
from retriage.db.records import RecordError, parse_time

ACTIONS = ("labeled", "unlabeled")
COLUMNS = ("repo", "number", "event_id", "label", "action", "actor", "created_at")
TYPES = ("TEXT", "INTEGER", "BIGINT", "TEXT", "TEXT", "TEXT", "TIMESTAMP")


def event_rows(repo: str, number: int, events: list[Any]) -> list[dict]:
    """The label events among an issue's events, as label_events rows."""
    rows = []
    for ev in events:
        if not isinstance(ev, dict) or ev.get("event") not in ACTIONS:
            continue
        label, event_id = ev.get("label"), ev.get("id")
        name = label.get("name") if isinstance(label, dict) else None
        if not isinstance(name, str) or not name or isinstance(event_id, bool) or not isinstance(event_id, int):
            continue
        try:
            created = parse_time(ev.get("created_at"), "created_at")
        except RecordError:
            continue
        actor = ev.get("actor").get("login") if isinstance(ev.get("actor"), dict) else None
        if created is not None:
            rows.append({"repo": repo, "number": number, "event_id": event_id, "label": redact(name),
                         "action": ev["event"], "actor": redact(actor) if isinstance(actor, str) else None,
                         "created_at": created})
    return rows


def upsert(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> int:
    """Store rows inside the caller's transaction; returns how many were new."""
    if not rows:
        return 0
    before = 0
    for repo in {r["repo"] for r in rows}:
        keys = sorted({(r["number"], r["event_id"]) for r in rows if r["repo"] == repo})
        before += con.execute("SELECT count(*) FROM label_events JOIN (SELECT unnest(?) AS number, unnest(?) AS "
                              "event_id) USING (number, event_id) WHERE repo = ?",
                              [[k[0] for k in keys], [k[1] for k in keys], repo]).fetchone()[0]
    unique = list({(r["repo"], r["number"], r["event_id"]): r for r in rows}.values())
    select = ", ".join(f"unnest(${i + 1}::{t}[]) AS {c}" for i, (c, t) in enumerate(zip(COLUMNS, TYPES)))
    con.execute(f"INSERT OR REPLACE INTO label_events ({', '.join(COLUMNS)}) SELECT {select}",
                [[r[c] for r in unique] for c in COLUMNS])  # column-wise, one statement: executemany is slow
    return len(unique) - before


def label_history(con: duckdb.DuckDBPyConnection, repo: str, number: int) -> list[dict]:
    """An issue's stored label events, oldest first."""
    cur = con.execute(f"SELECT {', '.join(COLUMNS)} FROM label_events WHERE repo = ? AND number = ? "
                      "ORDER BY created_at, event_id", [repo, number])
    return [dict(zip(COLUMNS, row)) for row in cur.fetchall()]
