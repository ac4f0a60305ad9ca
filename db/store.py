"""Opening the DuckDB file, migrating it, and writing to it in transactions.

DuckDB lets one process write a file or several read it, never both at once. So writers (`label`, `mine`,
`import`, `train`'s embedding cache) work through a `Database`, which holds the file only for each chunk's
transaction, and every open waits while another process holds the file, with one note, instead of failing."""

from __future__ import annotations

import os
import random
import re
import sys
import time
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Callable, Iterator

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


READ_WAIT = 20.0  # seconds a reader waits for a writer's transaction to end (RETRIAGE_DB_WAIT overrides)
WRITE_WAIT = 300.0  # seconds a writer waits for readers and other writers


def _wait_limit(default: float) -> float:
    try:
        return float(os.environ.get("RETRIAGE_DB_WAIT", default))
    except ValueError:
        value = os.environ["RETRIAGE_DB_WAIT"]
        raise UserError(f"RETRIAGE_DB_WAIT must be a number of seconds, not {value!r}") from None


def _note(text: str) -> None:
    sys.stderr.write(f"retriage: {text}\n")
    sys.stderr.flush()


def _is_lock_error(e: duckdb.Error) -> bool:
    """Another process holds the file. DuckDB says so with "Conflicting lock is held in ..."; any other error
    that mentions a lock (a lock refused for lack of permission, on a read-only file system) is not a wait."""
    return isinstance(e, duckdb.IOException) and "conflicting lock" in str(e).lower()


def _open_error(path: str, e: duckdb.Error) -> str:
    """One line that tells permission, damage and the rest apart by DuckDB's error, not by a word in it."""
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    low = text.lower()
    if "permission denied" in low or "operation not permitted" in low:
        return f"cannot open database {path}: permission denied (check the file's and its folder's permissions)"
    if "read-only file system" in low:
        return f"cannot open database {path} for writing: the file system is read-only"
    if (isinstance(e, duckdb.SerializationException) or "not a valid duckdb database" in low
            or "could not read enough bytes" in low or "checksum" in low or "corrupt" in low):
        return f"cannot open database {path}: the file is damaged or not a DuckDB database ({text})"
    return f"cannot open database {path}: {text}"


def _open(path: str, read_only: bool, wait: float | None, note: Callable[[str], None] | None):
    """duckdb.connect, retried while another process holds the file (DuckDB allows one writer or many readers
    per file); one note when it starts waiting; a UserError when the wait is over."""
    limit = _wait_limit(READ_WAIT if read_only else WRITE_WAIT) if wait is None else wait
    deadline = time.monotonic() + limit
    pause, noted = 0.01, False
    while True:
        try:
            return duckdb.connect(path, read_only=read_only)
        except duckdb.Error as e:
            if not _is_lock_error(e):
                raise
            if time.monotonic() >= deadline:
                raise UserError(f"database {path} is in use by another retriage process (waited {limit:g} s); "
                                "try again when it ends") from None
            if not noted and limit > 0:
                (note or _note)(f"database {path} is busy (another retriage process has it open); "
                                f"waiting up to {limit:g} s")
                noted = True
            time.sleep(pause * (0.5 + random.random()))
            pause = min(pause * 1.5, 0.05 if read_only else 0.2)


def connect(path: str | os.PathLike | None = None, read_only: bool = False, wait: float | None = None,
            note: Callable[[str], None] | None = None) -> duckdb.DuckDBPyConnection:
    """Open (creating and migrating if needed) the database. While another process holds the file, wait up to
    `wait` seconds (default READ_WAIT for readers, WRITE_WAIT for writers) with one note on stderr (or to
    `note`), then a clear UserError."""
    path = str(path or default_path())
    if read_only and not Path(path).exists():
        raise UserError(f"no database at {path}: run `retriage demo` or `retriage import FILE` first")
    if path != ":memory:":
        parent = Path(path).expanduser().resolve().parent
        if not parent.exists():
            raise UserError(f"cannot create database {path}: folder {parent} does not exist")
    if path != ":memory:" and Path(path).exists() and not os.access(path, os.R_OK if read_only
                                                                     else os.R_OK | os.W_OK):
        raise UserError(f"cannot open database {path}: permission denied (check the file's permissions)")
    try:
        con = _open(path, read_only, wait, note)
    except duckdb.Error as e:
        raise UserError(_open_error(path, e)) from None
    if not read_only:
        migrate(con)
    elif schema_version(con) == 0:
        con.close()
        raise UserError(f"{path} is not a retriage database")
    return con


class _Rows:
    """The materialised answer of one statement run on a connection that is already closed again."""

    def __init__(self, cur):
        self.description = cur.description
        self._rows = cur.fetchall() if cur.description else []

    def fetchall(self) -> list[tuple]:
        rows, self._rows = self._rows, []
        return rows

    def fetchone(self):
        return self._rows.pop(0) if self._rows else None


_READS = ("SELECT", "WITH", "DESCRIBE", "SHOW", "PRAGMA", "FROM")


class Database:
    """A database file that a writer holds only for each transaction, so that readers (and other writers) get
    in between: `transaction(db)` opens the file (waiting while another process holds it), and COMMIT closes
    it; a statement outside a transaction opens the file for that statement alone (read-only for a query).
    Pass it wherever a connection is expected: `execute`, `executemany` and `transaction` behave alike."""

    def __init__(self, path: str | os.PathLike | None = None, wait: float | None = None,
                 note: Callable[[str], None] | None = None):
        self.path = str(path or default_path())
        self.wait, self._noted = wait, False
        self._outer_note = note or _note
        self._con: duckdb.DuckDBPyConnection | None = None
        connect(self.path, wait=wait, note=self.note).close()  # create and migrate once

    def note(self, text: str) -> None:
        """The waiting note, once per run rather than once per transaction."""
        if not self._noted:
            self._noted = True
            self._outer_note(text)

    def open(self, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        """A connection of one's own (the caller closes it)."""
        return connect(self.path, read_only=read_only, wait=self.wait, note=self.note)

    @contextmanager
    def reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection for a group of queries, closed at the end."""
        if self._con is not None:
            yield self._con
            return
        con = self.open(read_only=True)
        try:
            yield con
        finally:
            con.close()

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        if self._con is not None:  # nested: part of the open transaction
            yield self._con
            return
        con = self.open()
        self._con = con
        try:
            with transaction(con):
                yield con
        finally:
            self._con = None
            con.close()

    def _run(self, method: str, sql: str, params):
        if self._con is not None:
            getattr(self._con, method)(sql, params) if params is not None else getattr(self._con, method)(sql)
            return self._con
        read = method == "execute" and sql.lstrip().split(None, 1)[0].upper() in _READS
        con = self.open(read_only=read)
        try:
            cur = getattr(con, method)(sql, params) if params is not None else getattr(con, method)(sql)
            return _Rows(cur)
        finally:
            con.close()

    def execute(self, sql: str, params=None):
        return self._run("execute", sql, params)

    def executemany(self, sql: str, params=None):
        return self._run("executemany", sql, params)

    def close(self) -> None:
        """Nothing is held between transactions."""


@contextmanager
def transaction(con) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN ... COMMIT, or ROLLBACK on any exception (including KeyboardInterrupt). On a `Database`, the file
    is opened for the transaction and closed after it."""
    if isinstance(con, Database):
        with con._transaction() as c:
            yield c
        return
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
