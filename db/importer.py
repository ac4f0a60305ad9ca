"""`retriage import`: read GitHub issue objects from files and upsert them in one transaction.

Formats: a JSON array, JSON lines, a single object, a search-API answer ({"items": [...]}), and `.gz` of any of
them. Every file is read and checked before anything is written: bad input leaves the database as it was.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import duckdb

from retriage.db import writes
from retriage.db.records import RecordError, gh_comment_rows, issue_row
from retriage.db.store import connect, default_path, transaction
from retriage.core.errors import UsageError
from retriage.core.textfile import read_text


@dataclass
class ImportResult:
    files: int = 0
    records: int = 0
    counts: dict = field(default_factory=lambda: {"new": 0, "updated": 0, "unchanged": 0})
    by_repo: dict = field(default_factory=dict)


def _loads(text: str, path: Path, line: int):
    """json.loads whose every failure is a one-line UsageError at FILE:LINE."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}:{line + e.lineno - 1}: not valid JSON: {e.msg}") from None
    except RecursionError:
        raise UsageError(f"{path}:{line}: JSON nested too deeply") from None
    except ValueError as e:  # an integer of more than 4,300 digits
        raise UsageError(f"{path}:{line}: not usable JSON: {str(e).split(';')[0]}") from None


def iter_objects(path: Path) -> Iterator[tuple[str, object]]:
    """(where, object) for each record in a file; `where` is 'line N' or 'item N'."""
    text = read_text(path)
    stripped = text.lstrip()
    if not stripped:
        raise UsageError(f"{path}: empty file")
    if stripped[0] == "[":
        data = _loads(text, path, 1)
        for i, obj in enumerate(data, 1):
            yield f"item {i}", obj
        return
    lines = text.split("\n")  # not splitlines(): U+2028 and friends are allowed inside JSON strings
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = _loads(line, path, n)
        except UsageError:
            if n == 1 and stripped[0] == "{":
                obj = _loads(text, path, 1)  # one pretty-printed object
                if isinstance(obj, dict) and isinstance(obj.get("items"), list):
                    for i, item in enumerate(obj["items"], 1):
                        yield f"item {i}", item
                else:
                    yield "line 1", obj
                return
            raise
        if isinstance(obj, dict) and isinstance(obj.get("items"), list) and "number" not in obj:
            for i, item in enumerate(obj["items"], 1):
                yield f"line {n} item {i}", item
        else:
            yield f"line {n}", obj


def read_rows(paths: list[Path], comments: list[dict] | None = None) -> list[dict]:
    """The issue rows of the files (any shape `iter_objects` reads); a bad record is a one-line FILE:N error.
    `comments`: a list that receives the comments gh's JSON inlines."""
    rows = []
    if [str(p) for p in paths].count("-") > 1:
        raise UsageError("standard input (-) can be read only once")
    for path in paths:
        for where, obj in iter_objects(path):
            try:
                rows.append(issue_row(obj))
                if comments is not None:
                    comments += gh_comment_rows(obj, rows[-1]["repo"], rows[-1]["number"])
            except RecordError as e:
                raise UsageError(f"{path}:{where.removeprefix('line ')}: {e}") from None
    return rows


def import_files(con: duckdb.DuckDBPyConnection, paths: list[str | Path]) -> ImportResult:
    """Read and check all files, then upsert everything in one transaction."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise UsageError("no files given")
    comments: list[dict] = []
    return _store(con, paths, read_rows(paths, comments), comments)


def _store(con: duckdb.DuckDBPyConnection, paths: list[Path], rows: list[dict], comments: list[dict]) -> ImportResult:
    result = ImportResult(files=len(paths), records=len(rows))
    with transaction(con):
        result.counts = writes.upsert_issues(con, rows)
        writes.upsert_comments(con, comments)
    for r in rows:
        result.by_repo[r["repo"]] = result.by_repo.get(r["repo"], 0) + 1
    return result


def import_into(db: str | os.PathLike | None, paths: list[str | Path]) -> ImportResult:
    """`retriage import`: read and check every file before the database is opened, then upsert; a database
    file this call created is removed again when anything fails (no half-made database is left behind)."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise UsageError("no files given")
    comments: list[dict] = []
    rows = read_rows(paths, comments)
    path = str(db or default_path())
    created = [p for p in (path, path + ".wal") if path != ":memory:" and not os.path.lexists(p)]
    con = None
    try:
        con = connect(path)
        return _store(con, paths, rows, comments)
    except BaseException:
        if con is not None:
            con.close()
            con = None
        for p in created:
            if os.path.lexists(p):
                os.unlink(p)
        raise
    finally:
        if con is not None:
            con.close()
