"""The store: migrations, upserts, transactions and locking, on real DuckDB files."""

from __future__ import annotations

import os
import subprocess
import time
import sys

import duckdb
import pytest

from retriage.db import store, writes
from retriage.db.importer import import_files
from retriage.db.records import issue_row
from retriage.core.errors import UserError
from conftest import corpus_file


def test_migrate_creates_documented_tables_and_is_idempotent(db_path):
    con = store.connect(db_path)
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    for t in ("issues", "comments", "predictions", "sync_state", "schema_version", "issue_links", "embeddings"):
        assert t in tables
    v1 = store.schema_version(con)
    assert v1 >= 1
    con.close()
    con = store.connect(db_path)
    assert store.schema_version(con) == v1
    assert con.execute("SELECT count(*) FROM schema_version").fetchone()[0] == v1


def test_issue_columns_match_the_documented_schema(db_path):
    con = store.connect(db_path)
    cols = {r[0]: r[1] for r in con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'issues'").fetchall()}
    assert cols["labels"] == "VARCHAR[]"
    assert cols["created_at"] == "TIMESTAMP"
    assert cols["is_pull_request"] == "BOOLEAN"
    assert {"repo", "number", "title", "body", "state", "author", "author_association", "updated_at",
            "closed_at", "comments", "html_url"} <= set(cols)


def test_upsert_counts_new_updated_unchanged(db_path):
    con = store.connect(db_path)
    a = issue_row({"repo": "vllm-project/vllm", "number": 1, "title": "a", "state": "open"})
    b = issue_row({"repo": "vllm-project/vllm", "number": 2, "title": "b", "state": "open"})
    with store.transaction(con):
        assert writes.upsert_issues(con, [a, b]) == {"new": 2, "updated": 0, "unchanged": 0}
    b2 = dict(b, title="b changed")
    with store.transaction(con):
        assert writes.upsert_issues(con, [a, b2]) == {"new": 0, "updated": 1, "unchanged": 1}
    assert con.execute("SELECT title FROM issues WHERE number = 2").fetchone()[0] == "b changed"
    assert con.execute("SELECT count(*) FROM issues").fetchone()[0] == 2


def test_failed_transaction_leaves_database_unchanged(db_path):
    con = store.connect(db_path)
    import_files(con, [corpus_file("sglang.jsonl.gz")])
    before = con.execute("SELECT count(*), max(title) FROM issues").fetchone()
    row = issue_row({"repo": "sgl-project/sglang", "number": 999999, "title": "new"})
    with pytest.raises(RuntimeError):
        with store.transaction(con):
            writes.upsert_issues(con, [row])
            raise RuntimeError("crash in the middle")
    assert con.execute("SELECT count(*), max(title) FROM issues").fetchone() == before


def test_second_writer_waits_then_gets_a_clear_error(db_path):
    con = store.connect(db_path)
    con.execute("SELECT 1").fetchone()
    code = ("import sys\nfrom retriage.db import store\nfrom retriage.core.errors import UserError\n"
            f"try:\n    store.connect({str(db_path)!r})\nexcept UserError as e:\n    print(e); sys.exit(3)\n")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "RETRIAGE_DB_WAIT": "1.5"})
    assert proc.returncode == 3, proc.stderr
    assert time.monotonic() - started >= 1.5, "it waited before giving up"
    assert "in use by another" in proc.stdout and "waited 1.5 s" in proc.stdout
    assert proc.stderr.count("is busy") == 1, proc.stderr  # one note, not one per try
    con.close()


def test_read_only_open_of_missing_database_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no database"):
        store.connect(tmp_path / "missing.duckdb", read_only=True)


def test_not_a_retriage_database(tmp_path):
    p = tmp_path / "other.duckdb"
    duckdb.connect(str(p)).execute("CREATE TABLE x (a INT)").close()
    with pytest.raises(UserError, match="not a retriage database"):
        store.connect(p, read_only=True)
