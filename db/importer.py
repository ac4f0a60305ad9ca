"""`retriage import`: read GitHub issue objects from files and upsert them in one transaction.

Formats: a JSON array, JSON lines, a single object, a search-API answer ({"items": [...]}), and `.gz` of any of
them. Every file is read and checked before anything is written: bad input leaves the database as it was.
Files stream in (never held whole): memory holds the records and one record's text, at most MAX_RECORD characters
(a gzip of gigabytes of blank space or of one endless line is refused after that many).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import duckdb

from retriage.db import writes
from retriage.db.records import RecordError, gh_comment_rows, issue_row
from retriage.db.store import connect, default_path, transaction
from retriage.core.errors import UsageError
from retriage.core.textfile import CHUNK, text_chunks


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


MAX_RECORD = 64 << 20  # characters: the longest JSON line, array item or single-object file, and the most
#                        blank space between two records; input beyond it is refused before memory grows
_NOT_SPACE = re.compile(r"\S")  # what str.strip() keeps
_NOT_JSON_SPACE = re.compile(r"[^ \t\n\r]")
_DECODER = json.JSONDecoder()
_TOKEN = 64  # a JSON error this close to the end of the buffer may be a token cut by it (`tr`, `-`, `\u12`)


def _blank_error(path: Path, line: int) -> UsageError:
    return UsageError(f"{path}:{line}: more than {MAX_RECORD:,} characters of blank space: not issue records")


def _start(path: Path, chunks: Iterator[str]) -> tuple[int, str | None, Iterator[str]]:
    """(line, first character, the text from it on) after the leading blank space; (line, None, ...) when the
    input is blank. Blank space is counted, never kept."""
    line, blank = 1, 0
    for text in chunks:
        m = _NOT_SPACE.search(text)
        stop = m.start() if m else len(text)
        line += text.count("\n", 0, stop)
        blank += stop
        if blank > MAX_RECORD:
            raise _blank_error(path, line)
        if m:
            return line, text[stop], itertools.chain([text[stop:]], chunks)
    return line, None, iter(())


def _lines(path: Path, chunks: Iterator[str], line: int) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line that is not blank, without its leading blank space; blank lines are
    skipped a chunk at a time. A line, or a run of blank space, longer than MAX_RECORD is refused as soon as it
    is: memory holds one line and one chunk, whatever the input decompresses to."""
    parts: list[str] = []
    size = blank = 0
    for text in chunks:
        start, end = 0, len(text)
        while start < end:
            if not parts:  # at the start of a line: skip blank space (blank lines too)
                m = _NOT_SPACE.search(text, start)
                stop = m.start() if m else end
                line += text.count("\n", start, stop)
                blank += stop - start
                if blank > MAX_RECORD:
                    raise _blank_error(path, line)
                if m is None:
                    break
                start = stop
            nl = text.find("\n", start)
            if nl < 0:
                size += end - start
                if size > MAX_RECORD:
                    raise UsageError(f"{path}:{line}: a line longer than {MAX_RECORD:,} characters: "
                                     "not an issue record")
                parts.append(text[start:])
                break
            if size + nl - start > MAX_RECORD:
                raise UsageError(f"{path}:{line}: a line longer than {MAX_RECORD:,} characters: not an issue record")
            yield line, "".join(parts) + text[start:nl] if parts else text[start:nl]
            parts, size, blank = [], 0, 0
            line += 1
            start = nl + 1
    if parts:
        yield line, "".join(parts)


class _Buffer:
    """The unread text of a stream, for parsing a JSON array item by item: holds one item and a chunk."""

    def __init__(self, path: Path, chunks: Iterator[str], line: int):
        self.path, self.chunks, self.line = path, chunks, line
        self.buf, self.pos, self.eof = "", 0, False

    def fill(self, want: int) -> bool:
        """Read until `want` unread characters are held (or the input ends); False when nothing more came."""
        parts, have = [self.buf[self.pos:] if self.pos else self.buf], len(self.buf) - self.pos
        for text in self.chunks:
            parts.append(text)
            have += len(text)
            if have >= want:
                break
        else:
            self.eof = True
        grew = len(parts) > 1
        self.buf, self.pos = "".join(parts), 0
        return grew

    def advance(self, to: int) -> None:
        self.line += self.buf.count("\n", self.pos, to)
        self.pos = to

    def next_char(self) -> str | None:
        """The next character that is not JSON blank space (None at the end); the blank space is dropped."""
        blank = 0
        while True:
            m = _NOT_JSON_SPACE.search(self.buf, self.pos)
            if m:
                self.advance(m.start())
                return m.group()
            blank += len(self.buf) - self.pos
            self.advance(len(self.buf))
            if blank > MAX_RECORD:
                raise _blank_error(self.path, self.line)
            if not self.fill(1):
                return None

    def error(self, at: int, msg: str) -> UsageError:
        return UsageError(f"{self.path}:{self.line + self.buf.count(chr(10), self.pos, at)}: not valid JSON: {msg}")

    def value(self, item: int):
        """Decode the JSON value at the current position, reading more (doubling) until it is whole."""
        while True:
            held = len(self.buf) - self.pos
            try:
                obj, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                cut = not self.eof and (e.msg.startswith("Unterminated string") or e.pos >= len(self.buf) - _TOKEN)
                if not cut:
                    raise self.error(e.pos, e.msg) from None
            except RecursionError:
                raise UsageError(f"{self.path}:{self.line}: JSON nested too deeply") from None
            except ValueError as e:  # an integer of more than 4,300 digits
                raise UsageError(f"{self.path}:{self.line}: not usable JSON: {str(e).split(';')[0]}") from None
            else:
                if end < len(self.buf) - _TOKEN or self.eof:  # a number near the buffer's end may be cut
                    self.advance(end)
                    return obj
            if held > MAX_RECORD:
                raise UsageError(f"{self.path}:{self.line}: item {item} is longer than {MAX_RECORD:,} characters: "
                                 "not an issue record")
            self.fill(min(max(2 * held, CHUNK), MAX_RECORD + 1))


def _array_items(path: Path, chunks: Iterator[str], line: int) -> Iterator[tuple[str, object]]:
    """The items of a JSON array, decoded one at a time as the text streams in."""
    b = _Buffer(path, chunks, line)
    b.fill(1)
    b.advance(b.pos + 1)  # the "["
    n = 0
    while True:
        c = b.next_char()
        if n == 0 and c == "]":
            b.advance(b.pos + 1)
            break
        if c is None:
            raise b.error(b.pos, "Expecting value")
        n += 1
        yield f"item {n}", b.value(n)
        c = b.next_char()
        if c == "]":
            b.advance(b.pos + 1)
            break
        if c != ",":
            raise b.error(b.pos, "Expecting ',' delimiter")
        b.advance(b.pos + 1)
    if b.next_char() is not None:
        raise b.error(b.pos, "Extra data")


def _document(first: tuple[int, str], rest: Iterator[tuple[int, str]], too_long: UsageError) -> str:
    """The text of a single (pretty-printed) JSON value from its lines, blank lines kept as newlines (so errors
    name the file's line); `too_long` is raised beyond MAX_RECORD characters."""
    parts, size, last = [first[1]], len(first[1]), first[0]
    for n, text in rest:
        parts += ["\n" * (n - last), text]
        size += n - last + len(text)
        last = n
        if size > MAX_RECORD:
            raise too_long
    return "".join(parts)


def iter_objects(path: Path) -> Iterator[tuple[str, object]]:
    """(where, object) for each record in a file; `where` is 'line N' or 'item N'.

    The input streams in (never held whole): a JSON array is decoded item by item, JSON lines line by line, and a
    single pretty-printed object is read whole up to MAX_RECORD characters. Blank space is skipped without being
    kept, and a record or a run of blank space longer than MAX_RECORD is refused as soon as it is: a gzip of
    gigabytes of spaces (or of one endless line) ends after MAX_RECORD characters, in a few tens of megabytes."""
    line, first, chunks = _start(path, text_chunks(path))
    if first is None:
        raise UsageError(f"{path}: empty file")
    if first == "[":
        yield from _array_items(path, chunks, line)
        return
    lines = _lines(path, chunks, line)
    for k, (n, text) in enumerate(lines):
        try:
            obj = _loads(text, path, n)
        except UsageError as e:
            if k == 0 and first == "{":  # one pretty-printed object; past MAX_RECORD, the first line's error
                obj = _loads(_document((n, text), lines, e), path, n)
                if isinstance(obj, dict) and isinstance(obj.get("items"), list):
                    for i, item in enumerate(obj["items"], 1):
                        yield f"item {i}", item
                else:
                    yield f"line {n}", obj
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
