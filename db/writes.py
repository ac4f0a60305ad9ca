"""Upserts, one function per saved entity. None opens a transaction: callers wrap them in
`store.transaction(con)` so that a page of issues and the miner's cursor, or a whole import, commit together."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Iterable, Sequence

import duckdb
import numpy as np

from retriage.core.secrets import redact

from retriage.db.records import COMMENT_COLUMNS, COMMENT_TYPES, ISSUE_COLUMNS, ISSUE_TYPES

PREDICTION_COLUMNS = ("repo", "number", "re_class", "component", "confidence", "component_confidence",
                      "abstained", "known_fixes", "model_version", "labeled_at")
PROVENANCE_COLUMNS = ("repo", "number", "model_version", "labeled_at", "made_by", "note")  # prediction_provenance
VECTOR_DIM = 384  # the embeddings table's FLOAT[384] (db/migrations/001_init.sql)

def _stage(con: duckdb.DuckDBPyConnection, name: str, columns: Sequence[str], types: dict, rows: list[dict]) -> None:
    """Load rows into a temporary table column-wise (one statement, no per-row round trips)."""
    con.execute(f"DROP TABLE IF EXISTS {name}")
    select = ", ".join(f"unnest(${i + 1}::{types[c]}[]) AS {c}" for i, c in enumerate(columns))
    params = [[r[c] for r in rows] for c in columns]
    con.execute(f"CREATE TEMP TABLE {name} AS SELECT {select}", params)


def _dedupe(rows: Iterable[dict], key: tuple[str, ...]) -> list[dict]:
    last: dict[tuple, dict] = {}
    for r in rows:
        last[tuple(r[k] for k in key)] = r
    return list(last.values())


def _upsert(con, table: str, stage: str, columns: Sequence[str], types: dict, key: tuple[str, ...],
            rows: list[dict]) -> dict[str, int]:
    rows = _dedupe(rows, key)
    if not rows:
        return {"new": 0, "updated": 0, "unchanged": 0}
    _stage(con, stage, columns, types, rows)
    on = " AND ".join(f"t.{k} = s.{k}" for k in key)
    same = " AND ".join(f"t.{c} IS NOT DISTINCT FROM s.{c}" for c in columns)
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {stage}_changed AS
            SELECT s.*, t.{key[0]} IS NULL AS is_new FROM {stage} s LEFT JOIN {table} t ON {on}
            WHERE t.{key[0]} IS NULL OR NOT ({same})"""
    )
    new, changed = con.execute(f"SELECT count(*) FILTER (WHERE is_new), count(*) FROM {stage}_changed").fetchone()
    unchanged = len(rows) - changed
    keys = ", ".join(key)
    con.execute(f"DELETE FROM {table} WHERE ({keys}) IN (SELECT ({keys}) FROM {stage}_changed WHERE NOT is_new)")
    con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(columns)} FROM {stage}_changed")
    con.execute(f"DROP TABLE {stage}")
    con.execute(f"DROP TABLE {stage}_changed")
    return {"new": new, "updated": len(rows) - new - unchanged, "unchanged": unchanged}


def _masked(rows: list[dict], fields=("title", "body")) -> list[dict]:
    """Rows with secrets masked in their text (a token a reporter pasted, or ours echoed back): no secret is
    stored, whatever the source (retriage.core.secrets)."""
    out = []
    for r in rows:
        changed = {f: redact(r[f]) for f in fields if isinstance(r.get(f), str)}
        out.append({**r, **changed} if any(changed[f] is not r[f] for f in changed) else r)
    return out


def upsert_issues(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> dict[str, int]:
    """Insert or replace issue rows, and their engine versions (db/versions.py); returns counts of new, updated
    and unchanged rows."""
    from retriage.db import versions

    rows = _masked(rows)
    counts = _upsert(con, "issues", "_stage_issues", ISSUE_COLUMNS, ISSUE_TYPES, ("repo", "number"), rows)
    versions.store(con, rows)
    return counts


def upsert_comments(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> dict[str, int]:
    return _upsert(con, "comments", "_stage_comments", COMMENT_COLUMNS, COMMENT_TYPES, ("repo", "id"),
                   _masked(rows, ("body",)))


def save_links(con: duckdb.DuckDBPyConnection, links: list[tuple[str, int, str, int]]) -> None:
    """(repo, pr_number, issue_repo, issue_number) rows, kind 'fixes'."""
    if links:
        con.executemany(
            "INSERT OR IGNORE INTO issue_links (repo, pr_number, issue_repo, issue_number) VALUES (?, ?, ?, ?)",
            links,
        )


def save_sync_state(con, repo: str, resource: str, cursor: datetime | None, etag: str | None,
                    status: str) -> None:
    con.execute(
        """INSERT OR REPLACE INTO sync_state (repo, resource, cursor_updated_at, etag, last_run_at, last_status)
           VALUES (?, ?, ?, ?, now()::TIMESTAMP, ?)""",
        [repo, resource, cursor, etag, redact(status)],
    )


GOLD_COLUMNS = ("repo", "number", "re_class", "component", "known_fix", "reason", "labeler")


def save_gold_labels(con: duckdb.DuckDBPyConnection, labels: list[dict]) -> int:
    con.execute("DELETE FROM gold_labels")
    if labels:
        _insert_columns(con, "gold_labels", GOLD_COLUMNS, ("TEXT", "INTEGER") + ("TEXT",) * 5,
                        [tuple(g.get(c) for c in GOLD_COLUMNS) for g in labels])
    return len(labels)


PREDICTION_TYPES = ("TEXT", "INTEGER", "TEXT", "TEXT", "DOUBLE", "DOUBLE", "BOOLEAN", "TEXT[]", "TEXT", "TIMESTAMP")
PROVENANCE_TYPES = ("TEXT", "INTEGER", "TEXT", "TIMESTAMP", "TEXT", "TEXT")


def _insert_columns(con, table: str, columns: Sequence[str], types: Sequence[str], rows: list[tuple]) -> None:
    """INSERT OR REPLACE of many rows in one statement, column-wise (executemany costs ~20 ms a row: a chunk's
    transaction, during which readers wait, would last seconds)."""
    select = ", ".join(f"unnest(${i + 1}::{t}[]) AS {c}" for i, (c, t) in enumerate(zip(columns, types)))
    con.execute(f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) SELECT {select}",
                [[r[i] for r in rows] for i in range(len(columns))])


def save_predictions(con: duckdb.DuckDBPyConnection, rows: list[tuple]) -> None:
    """Rows in PREDICTION_COLUMNS order, each optionally followed by `made_by` and `note` (how it was made:
    classifier/decision.py's `prediction_row`), which go to `prediction_provenance` (NULL when not given); one
    prediction per issue and model version. A NaN or infinite confidence is refused (ValueError): it means the
    vectors behind it were broken."""
    for r in rows:
        if not (math.isfinite(r[4]) and math.isfinite(r[5])):
            raise ValueError(f"refusing to store a non-finite confidence for {r[0]}#{r[1]}")
    if rows:
        n = len(PREDICTION_COLUMNS)
        _insert_columns(con, "predictions", PREDICTION_COLUMNS, PREDICTION_TYPES, [tuple(r[:n]) for r in rows])
        _insert_columns(con, "prediction_provenance", PROVENANCE_COLUMNS, PROVENANCE_TYPES,
                        [(r[0], r[1], r[8], r[9], *(tuple(r[n:n + 2]) + (None, None))[:2]) for r in rows])


def save_issue_embeddings(con: duckdb.DuckDBPyConnection, rows: list[tuple[str, int, str, str]]) -> None:
    """(repo, number, model, text_hash): which cached vector is an issue's."""
    if rows:
        _insert_columns(con, "issue_embeddings", ("repo", "number", "model", "text_hash"),
                        ("TEXT", "INTEGER", "TEXT", "TEXT"), rows)


def save_embeddings(con: duckdb.DuckDBPyConnection, vectors: dict[str, np.ndarray], model: str) -> None:
    """Cache vectors by text hash and model (a hash already cached keeps its vector). A vector holding NaN or
    infinity is refused (ValueError): nothing is written."""
    if not vectors:
        return
    hashes = list(vectors)
    arrays = [np.asarray(vectors[h], dtype=np.float32) for h in hashes]
    bad = [h for h, a in zip(hashes, arrays) if a.shape != (VECTOR_DIM,) or not np.isfinite(a).all()]
    if bad:
        raise ValueError(f"refusing to cache {len(bad)} embedding(s) that are not {VECTOR_DIM} finite numbers")
    mat = [a.tolist() for a in arrays]
    con.execute(
        f"""INSERT OR IGNORE INTO embeddings (text_hash, model, vector)
            SELECT unnest($1::TEXT[]), $2, unnest($3::FLOAT[{VECTOR_DIM}][])""",
        [hashes, model, mat],
    )


def delete_embeddings(con: duckdb.DuckDBPyConnection, hashes: list[str], model: str) -> None:
    """Drop cached vectors (the broken ones, before they are embedded again)."""
    if hashes:
        con.execute("DELETE FROM embeddings WHERE model = ? AND list_contains(?::TEXT[], text_hash)", [model, hashes])


def replace_pr_links(con: duckdb.DuckDBPyConnection, prs: dict[str, list[int]],
                     links: list[tuple[str, int, str, int]]) -> int:
    """Replace the fix links of these pull requests (repo -> PR numbers) by `links`; returns how many are new."""
    before: set[tuple] = set()
    for repo, numbers in prs.items():
        where = "WHERE repo = ? AND list_contains(?::INTEGER[], pr_number)"
        before |= set(con.execute(f"SELECT repo, pr_number, issue_repo, issue_number FROM issue_links {where}",
                                  [repo, numbers]).fetchall())
        con.execute(f"DELETE FROM issue_links {where}", [repo, numbers])
    save_links(con, links)
    return len(set(links) - before)


def delete_issue_comments_except(con: duckdb.DuckDBPyConnection, repo: str, number: int, keep: list[int]) -> int:
    """Drop the stored comments of one issue that are not in `keep` (deleted on GitHub since); returns how many."""
    gone = con.execute("SELECT count(*) FROM comments WHERE repo = ? AND issue_number = ? "
                       "AND NOT list_contains(?::BIGINT[], id)", [repo, number, keep]).fetchone()[0]
    if gone:
        con.execute("DELETE FROM comments WHERE repo = ? AND issue_number = ? AND NOT list_contains(?::BIGINT[], id)",
                    [repo, number, keep])
    return gone


CORRECTION_COLUMNS = ("repo", "number", "re_class", "component", "known_fix", "reason", "corrected_by",
                      "corrected_at", "was")


def save_correction(con: duckdb.DuckDBPyConnection, row: dict) -> None:
    """One label correction (CORRECTION_COLUMNS); the newest per issue is the one in force."""
    con.execute(f"INSERT INTO corrections ({', '.join(CORRECTION_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(CORRECTION_COLUMNS))})", [redact(row[c]) for c in CORRECTION_COLUMNS])
