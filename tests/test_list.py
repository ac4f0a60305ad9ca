"""`retriage list` in-process (Typer's CliRunner) over a real DuckDB file: real corpus issues, predictions
written through the store, every filter checked against the rows it must keep."""

from __future__ import annotations

import csv
import io
import json
from datetime import date, datetime, timedelta

import pytest
from typer.testing import CliRunner

from conftest import corpus_slice
from retriage.cli import app
from retriage.core.days import parse_day
from retriage.core.errors import UserError
from retriage.db import writes
from retriage.db.importer import import_files
from retriage.db.store import connect, transaction

MODEL = "m-listtest0001"
CLASSES = ["RE.1", "RE.2", "RE.3", "RE.4", "none"]
COMPONENTS = ["model_loader", "operators", "engine_setup", "scheduler", "frontend", "other"]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("list")
    path, records = corpus_slice(folder, lambda i: i < 40)
    dbfile = folder / "list.duckdb"
    con = connect(dbfile)
    import_files(con, [path])
    issues = con.execute("SELECT repo, number FROM issues WHERE NOT is_pull_request ORDER BY repo, number").fetchall()
    now = datetime(2026, 1, 1)
    rows = [(repo, number, CLASSES[i % 5], COMPONENTS[i % 6], 0.5 + (i % 50) / 100, 0.8, i % 7 == 0,
             ["oom_four_step"] if i % 5 == 0 else [], MODEL, now) for i, (repo, number) in enumerate(issues)]
    with transaction(con):
        writes.save_predictions(con, rows)
    con.close()
    return dbfile


def run(db, *args):
    r = CliRunner().invoke(app, ["list", "--db", str(db), *args])
    return r


@pytest.fixture(autouse=True)
def model_version(monkeypatch):
    import retriage.classifier as clf

    monkeypatch.setattr(clf, "current_model_version", lambda folder=None: MODEL)


def test_class_and_engine_filters_with_a_limit(db):
    r = run(db, "--class", "RE.3", "--engine", "vllm", "--limit", "5", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert 0 < len(rows) <= 5
    assert all(x["re_class"] == "RE.3" and x["repo"] == "vllm-project/vllm" for x in rows)
    for key in ("repo", "number", "title", "state", "created_at", "re_class", "component", "known_fixes", "html_url"):
        assert key in rows[0]
    assert [x["created_at"] for x in rows] == sorted((x["created_at"] for x in rows), reverse=True)


def test_every_filter_keeps_exactly_its_rows(db):
    everything = json.loads(run(db, "--limit", "1000", "--json").stdout)
    assert len(everything) > 60
    mid = sorted(x["created_at"] for x in everything)[len(everything) // 2][:10]
    day_after = (date.fromisoformat(mid) + timedelta(days=1)).isoformat()
    cases = {
        ("--component", "scheduler"): lambda x: x["component"] == "scheduler",
        ("--fix", "oom_four_step"): lambda x: "oom_four_step" in x["known_fixes"],
        ("--state", "closed"): lambda x: x["state"] == "closed",
        ("--unsure",): lambda x: x["abstained"],
        ("--sure",): lambda x: not x["abstained"],
        ("--since", mid): lambda x: x["created_at"] >= mid,
        ("--until", mid): lambda x: x["created_at"] < day_after,
    }
    for args, keep in cases.items():
        got = json.loads(run(db, *args, "--limit", "1000", "--json").stdout)
        want = [x for x in everything if keep(x)]
        assert sorted((x["repo"], x["number"]) for x in got) == sorted((x["repo"], x["number"]) for x in want), args
        assert got, args


def test_csv_and_ndjson_carry_the_same_rows(db):
    js = json.loads(run(db, "--limit", "7", "--json").stdout)
    nd = [json.loads(line) for line in run(db, "--limit", "7", "--format", "ndjson").stdout.splitlines()]
    rows = list(csv.DictReader(io.StringIO(run(db, "--limit", "7", "--format", "csv").stdout)))
    assert [x["number"] for x in js] == [x["number"] for x in nd] == [int(x["number"]) for x in rows]
    assert [x["known_fixes"] for x in nd] == [x["known_fixes"] for x in js]


def test_table_lists_references(db):
    r = run(db, "--engine", "sglang", "--limit", "3", "--format", "table")
    assert r.exit_code == 0 and "sglang#" in r.stdout and "3 issues" in r.stdout


def test_off_a_terminal_rows_are_plain_tab_separated_and_whole(db):
    """A pipe (Typer's runner is not a terminal) gets gh's plain rows: a header, one issue a line, values whole."""
    js = json.loads(run(db, "--limit", "12", "--json").stdout)
    lines = run(db, "--limit", "12").stdout.splitlines()
    header, rows = lines[0].split("\t"), [x.split("\t") for x in lines[1:]]
    assert header == ["issue", "state", "created", "class", "conf", "component", "fixes", "title", "url"]
    assert len(rows) == len(js) and all(len(r) == len(header) for r in rows)
    for row, want in zip(rows, js):
        cell = dict(zip(header, row))
        assert cell["title"] == " ".join((want["title"] or "").split())
        assert cell["url"] == want["html_url"] and cell["component"] == want["component"]
        assert cell["fixes"].replace("?", "") == (",".join(want["known_fixes"]) or "-")


@pytest.mark.parametrize("columns", [80, 200])
def test_the_table_shows_every_title_wrapped_and_every_reference_whole(db, columns):
    js = json.loads(run(db, "--limit", "12", "--json").stdout)
    r = CliRunner().invoke(app, ["list", "--db", str(db), "--limit", "12", "--format", "table"],
                           env={"COLUMNS": str(columns)})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(len(x) for x in lines) <= columns and "…" not in r.stdout
    words = r.stdout.split()
    for want in js:
        assert any(w.endswith(f"#{want['number']}") for w in words), want["number"]  # the reference, whole
        for word in (want["title"] or "").split():
            if len(word) < columns // 4:  # (a longer word is folded across lines, not cut)
                assert word in r.stdout, (columns, word)


@pytest.mark.parametrize("args, message", [
    (("--class", "RE.9"), "--class must be one of"),
    (("--engine", "tgi"), "--engine must be one of"),
    (("--since", "yesterday"), "--since must be a day"),
    (("--since", "9999-12-31"), "outside the years"),
    (("--since", "2025-02-01", "--until", "2025-01-01"), "is after"),
    (("--limit", "0"), "--limit must be between"),
    (("--format", "xml"), "--format must be one of"),
])
def test_bad_options_are_one_line_usage_errors(db, args, message):
    r = run(db, *args)
    assert r.exit_code != 0
    assert isinstance(r.exception, UserError) and message in str(r.exception) and r.exception.exit_code == 2


def test_relative_days_count_back_from_today():
    today = date(2026, 12, 1)
    assert parse_day("30d", "--since", today) == today - timedelta(days=30)
    assert parse_day("12w", "--since", today) == today - timedelta(weeks=12)
    assert parse_day("2025-01-31", "--since", today) == date(2025, 1, 31)
    assert parse_day("", "--since", today) is None


def test_version_filter_composes_with_the_others(db):
    con = connect(db, read_only=True)
    unknown = set(con.execute("SELECT repo, number FROM issue_versions WHERE version = 'unknown' "
                              "AND repo = 'vllm-project/vllm'").fetchall())
    con.close()
    r = run(db, "--version", "unknown", "--engine", "vllm", "--limit", "5", "--format", "json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert 0 < len(rows) <= 5 and {(x["repo"], x["number"]) for x in rows} <= unknown
    r = run(db, "--version", "0.8..b9")
    assert isinstance(r.exception, UserError) and r.exception.exit_code == 2
