"""`retriage list` in-process (Typer's CliRunner) over a real DuckDB file: real corpus issues, predictions
written through the store, every filter checked against the rows it must keep."""

from __future__ import annotations

import csv
import gzip
import io
import json
from datetime import date, datetime, timedelta

import pytest
from typer.testing import CliRunner

from conftest import corpus_file
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
    records = []
    for name in ("vllm.jsonl.gz", "sglang.jsonl.gz", "llama_cpp.jsonl.gz"):
        with gzip.open(corpus_file(name), "rt", encoding="utf-8") as f:
            records += [json.loads(line) for _, line in zip(range(40), f)]
    path = folder / "slice.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
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
    r = run(db, "--engine", "sglang", "--limit", "3")
    assert r.exit_code == 0 and "sglang#" in r.stdout and "3 issues" in r.stdout


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
