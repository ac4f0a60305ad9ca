"""Property tests (Hypothesis) of the importer (db/importer.py, db/records.py) and the log parser
(triage/logtext.py): random and hostile records and logs raise nothing but UserError, whatever the checks
let through is stored by DuckDB, and valid records come back from the store as they went in."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retriage.core.errors import UserError
from retriage.db import writes
from retriage.db.importer import read_rows
from retriage.db.store import connect, transaction
from retriage.triage import logtext

_QUIET = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=_QUIET)
DB_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=_QUIET)  # each example writes DuckDB

# Text as JSON can carry it: any code point, lone surrogates included.
any_text = st.text(st.characters(codec=None, categories=None), max_size=40) | st.sampled_from(
    ["\ud800", "a\udfffb", "²", "٣", "１２", "9" * 30, "", " 5", "0001-01-01T00:00:00+14:00",
     "9999-12-31T23:59:59-14:00", "2025-01-01T00:00:00Z", "open", "closed", "vllm-project/vllm"])
numbers = st.integers(min_value=-(2**70), max_value=2**70) | st.sampled_from(
    [0, 1, 2**31 - 1, 2**31, 1099511627776, -1]) | st.floats(allow_nan=True, allow_infinity=True)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4), max_leaves=12)
FIELDS = ["repo", "number", "title", "body", "state", "labels", "user", "author", "author_association",
          "created_at", "updated_at", "closed_at", "comments", "html_url", "repository_url", "pull_request", "items"]
hostile_records = st.fixed_dictionaries({}, optional={f: json_values for f in FIELDS}) | json_values
base = {"repo": "vllm-project/vllm", "number": 7}
near_valid = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=4).map(lambda d: {**base, **d})


@pytest.fixture(scope="module")
def con():
    c = connect(":memory:")
    yield c
    c.close()


def _write(tmp_path, records, as_array: bool):
    """The records as a JSON array or as JSON lines (json.dumps writes lone surrogates as \\ud800 escapes)."""
    path = tmp_path / ("in.json" if as_array else "in.jsonl")
    text = json.dumps(records) if as_array else "\n".join(json.dumps(r) for r in records)
    path.write_text(text, encoding="utf-8")
    return path


def _import_checked(con, tmp_path, records, as_array):
    """read_rows raises only UserError; every row it returns is accepted by DuckDB (rolled back after)."""
    path = _write(tmp_path, records, as_array)
    try:
        rows = read_rows([path])
    except UserError as e:
        assert "\n" not in str(e) and str(path) in str(e)
        return None
    con.execute("BEGIN TRANSACTION")
    try:
        writes.upsert_issues(con, rows)
    finally:
        con.execute("ROLLBACK")
    return rows


@DB_SETTINGS
@given(records=st.lists(hostile_records, min_size=1, max_size=4), as_array=st.booleans())
def test_random_records_are_stored_or_refused_in_one_line(con, tmp_path, records, as_array):
    _import_checked(con, tmp_path, records, as_array)


@DB_SETTINGS
@given(records=st.lists(near_valid, min_size=1, max_size=4), as_array=st.booleans())
def test_nearly_valid_records_are_stored_or_refused_in_one_line(con, tmp_path, records, as_array):
    _import_checked(con, tmp_path, records, as_array)


@SETTINGS
@given(data=st.binary(max_size=300))
def test_random_bytes_as_an_import_file(con, tmp_path, data):
    path = tmp_path / "in.jsonl"
    path.write_bytes(data)
    try:
        read_rows([path])
    except UserError as e:
        assert "\n" not in str(e)


# Valid records: the store gives back what went in.
clean_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
times = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 1, 1),
                     timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=14)),
                                                timezone(timedelta(hours=-14)), timezone(timedelta(minutes=330))]))
valid = st.fixed_dictionaries({
    "repo": st.sampled_from(["vllm-project/vllm", "sgl-project/sglang", "ggml-org/llama.cpp", "someone/else"]),
    "number": st.integers(1, 2**31 - 1) | st.integers(1, 2**31 - 1).map(str),
    "title": clean_text | st.none(), "body": clean_text | st.none(), "state": st.sampled_from(["open", "closed"]),
    "labels": st.lists(clean_text, max_size=3), "author": clean_text | st.none(),
    "created_at": times, "updated_at": times, "comments": st.integers(0, 2**31 - 1),
})


@DB_SETTINGS
@given(records=st.lists(valid, min_size=1, max_size=5, unique_by=lambda r: (r["repo"], int(r["number"]))))
def test_valid_records_round_trip(con, tmp_path, records):
    src = [dict(r, created_at=r["created_at"].isoformat(), updated_at=r["updated_at"].isoformat()) for r in records]
    rows = read_rows([_write(tmp_path, src, as_array=False)])
    con.execute("BEGIN TRANSACTION")
    try:
        writes.upsert_issues(con, rows)
        for r in records:
            got = con.execute("SELECT title, body, state, labels, author, created_at, updated_at, comments "
                              "FROM issues WHERE repo = ? AND number = ?", [r["repo"], int(r["number"])]).fetchone()
            utc = [t.astimezone(timezone.utc).replace(tzinfo=None) for t in (r["created_at"], r["updated_at"])]
            assert got == (r["title"], r["body"], r["state"], r["labels"], r["author"], *utc, r["comments"])
    finally:
        con.execute("ROLLBACK")


# The log parser.
log_lines = st.lists(st.sampled_from([
    "Traceback (most recent call last):", '  File "/x/vllm/engine.py", line 12, in run',
    "torch.OutOfMemoryError: CUDA out of memory.", "\x1b[31mERROR\x1b[0m 01-02 03:04:05 [core.py:1] failed",
    "(VllmWorker rank=0 pid=123) ERROR boom", "RuntimeError: Engine core initialization failed.", "", "\r",
    "\x00\x01\x02", "\ufffd\ufffd", "é" * 50, "\ud800",
]) | st.text(max_size=80), max_size=30)


@SETTINGS
@given(lines=log_lines, crlf=st.booleans())
def test_random_logs_parse_or_are_refused(lines, crlf):
    text = ("\r\n" if crlf else "\n").join(lines)
    for data in (text.encode("utf-8", "surrogatepass"), text):
        try:
            log = logtext.parse(data)
        except UserError as e:
            assert e.exit_code == 2 and "\n" not in str(e)
            continue
        assert log.lines and all(line.strip() for line in log.lines)
        assert log.exception_line is None or 0 <= log.exception_line < len(log.lines)
        assert log.last_error_line is None or 0 <= log.last_error_line < len(log.lines)


@SETTINGS
@given(data=st.binary(max_size=2000), repeat=st.integers(1, 400))
def test_random_bytes_streams_are_cut_to_head_and_tail_or_refused(data, repeat):
    blob = data * repeat
    try:
        got = logtext.read_head_tail(io.BytesIO(blob))
        log = logtext.parse(got)
    except UserError as e:
        assert e.exit_code == 2
        return
    kept = got.data if isinstance(got, logtext.HeadTail) else got
    assert len(kept) <= logtext.MAX_BYTES + len(logtext.CUT)
    assert log.lines
