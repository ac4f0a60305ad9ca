"""`retriage import`: read GitHub issue objects from files and upsert them in one transaction.

Formats: a JSON array, JSON lines, a single object, a search-API answer ({"items": [...]}), and `.gz` of any of
them. Every file is read and checked before anything is written: bad input leaves the database as it was.
"""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import duckdb

from retriage.db import writes
from retriage.db.records import RecordError, gh_comment_rows, issue_row
from retriage.db.store import transaction
from retriage.core.errors import UsageError


@dataclass
class ImportResult:
    files: int = 0
    records: int = 0
    counts: dict = field(default_factory=lambda: {"new": 0, "updated": 0, "unchanged": 0})
    by_repo: dict = field(default_factory=dict)


def _read_text(path: Path) -> str:
    """The file's text (gzip or not); `-` is standard input."""
    try:
        raw = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder, not a file") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as e:
            raise UsageError(f"{path}: broken or truncated gzip data ({e})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text (byte {e.start})") from None


def iter_objects(path: Path) -> Iterator[tuple[str, object]]:
    """(where, object) for each record in a file; `where` is 'line N' or 'item N'."""
    text = _read_text(path)
    stripped = text.lstrip()
    if not stripped:
        raise UsageError(f"{path}: empty file")
    if stripped[0] == "[":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise UsageError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
        for i, obj in enumerate(data, 1):
            yield f"item {i}", obj
        return
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            if n == 1 and stripped[0] == "{":
                try:  # one pretty-printed object
                    obj = json.loads(text)
                except json.JSONDecodeError:
                    raise UsageError(f"{path}:{n}: not valid JSON: {e.msg}") from None
                if isinstance(obj, dict) and isinstance(obj.get("items"), list):
                    for i, item in enumerate(obj["items"], 1):
                        yield f"item {i}", item
                else:
                    yield "line 1", obj
                return
            raise UsageError(f"{path}:{n}: not valid JSON: {e.msg}") from None
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
    rows = read_rows(paths, comments)
    result = ImportResult(files=len(paths), records=len(rows))
    with transaction(con):
        result.counts = writes.upsert_issues(con, rows)
        writes.upsert_comments(con, comments)
    for r in rows:
        result.by_repo[r["repo"]] = result.by_repo.get(r["repo"], 0) + 1
    return result
