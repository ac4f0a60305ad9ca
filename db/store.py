"""Opening the DuckDB file, migrating it, and writing to it in transactions."""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Iterator

import duckdb

from retriage.core.errors import UserError

DEFAULT_DB = "retriage.duckdb"


def default_path() -> str:
    return os.environ.get("RETRIAGE_DB") or DEFAULT_DB


def _migrations() -> list[tuple[int, str, str]]:
    out = []
    for entry in resources.files("retriage.db").joinpath("migrations").iterdir():
        m = re.match(r"(\d+)_.*\.sql$", entry.name)
        if m:
            out.append((int(m.group(1)), entry.name, entry.read_text()))
    return sorted(out)


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchone()
    if not row[0]:
        return 0
    return con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply every migration newer than the database, each in its own transaction. Returns the version."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT, applied_at TIMESTAMP)"
    )
    current = schema_version(con)
    for version, name, sql in _migrations():
        if version <= current:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(sql)
            con.execute("INSERT INTO schema_version VALUES (?, ?, now()::TIMESTAMP)", [version, name])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        current = version
    return current


def connect(path: str | os.PathLike | None = None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open (creating and migrating if needed) the database. A clear UserError if another process holds it."""
    path = str(path or default_path())
    if read_only and not Path(path).exists():
        raise UserError(f"no database at {path}: run `retriage demo` or `retriage import FILE` first")
    if path != ":memory:":
        parent = Path(path).expanduser().resolve().parent
        if not parent.exists():
            raise UserError(f"cannot create database {path}: folder {parent} does not exist")
    try:
        con = duckdb.connect(path, read_only=read_only)
    except duckdb.IOException as e:
        msg = str(e)
        if "lock" in msg.lower():
            raise UserError(f"database {path} is in use by another retriage process; try again when it ends") from None
        raise UserError(f"cannot open database {path}: {msg.splitlines()[0]}") from None
    except duckdb.Error as e:
        raise UserError(f"cannot open database {path}: {str(e).splitlines()[0]}") from None
    if not read_only:
        migrate(con)
    elif schema_version(con) == 0:
        con.close()
        raise UserError(f"{path} is not a retriage database")
    return con


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN ... COMMIT, or ROLLBACK on any exception (including KeyboardInterrupt)."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
