"""`retriage mine` end to end: the installed console script, as a subprocess, against the local GitHub server."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

pytestmark = pytest.mark.slow  # fresh interpreters, the real model or a training run: the full tier only

RETRIAGE = str(Path(sys.executable).with_name("retriage"))
VLLM, SGLANG = "vllm-project/vllm", "sgl-project/sglang"
TOKEN = "ghp_cliToken5551234567890abcdefghijKLMNOP"


def retriage(*args, token=TOKEN, var="GITHUB_TOKEN", timeout=120):
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "RETRIAGE_DB")}
    env.update(NO_PROXY="127.0.0.1,localhost", TZ="Asia/Kolkata", COLUMNS="120")
    if token:
        env[var] = token
    return subprocess.run([RETRIAGE, *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout)


def assert_token_nowhere(token, db, *runs):
    for run in runs:
        assert token not in run.stdout and token not in run.stderr
    con = duckdb.connect(str(db), read_only=True)
    tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
    assert {"issues", "comments", "issue_links", "sync_state"} <= set(tables)
    for table in tables:
        columns = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]
        for column in columns:
            hits = con.execute(f'SELECT count(*) FROM {table} WHERE CAST("{column}" AS VARCHAR) LIKE ?',
                               [f"%{token}%"]).fetchone()[0]
            assert hits == 0, f"token found in {table}.{column}"
    con.close()
    assert token.encode() not in Path(db).read_bytes()


@pytest.fixture
def server(github_server):
    return github_server(repos=[VLLM, SGLANG], limit_per_repo=60, token=TOKEN, max_per_page=30)


def test_mine_end_to_end(tmp_path, server, assert_store_matches):
    db = tmp_path / "cli.duckdb"
    first = retriage("mine", "vllm", "sglang", "--base-url", server.base_url, "--db", db, "--request-gap", "0")
    assert first.returncode == 0, first.stderr
    assert "retriage mine" in first.stdout and "complete" in first.stdout
    assert "vllm-project/vllm" in first.stdout and "rate limit" in first.stdout
    assert "issues/PRs" in first.stderr  # the progress lines
    assert "GITHUB_TOKEN" not in first.stderr  # a token was there: no note

    second = retriage("mine", "vllm", "sglang", "--base-url", server.base_url, "--db", db, "--json")
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout)
    assert [(r["repo"], r["status"], r["requests"]) for r in summary["repos"]] == [
        (VLLM, "unchanged", 1), (SGLANG, "unchanged", 1)]
    assert summary["requests"] == 2 and summary["authenticated"] is True
    assert summary["rate_limit"]["limit"] == 5000

    con = duckdb.connect(str(db), read_only=True)
    for repo in (VLLM, SGLANG):
        assert_store_matches(con, server, repo)
    pr, issue = con.execute("SELECT pr_number, issue_number FROM issue_links WHERE repo = ? AND issue_repo = ? "
                            "ORDER BY 1 LIMIT 1", [VLLM, VLLM]).fetchone()
    con.close()
    shown = retriage("show", f"vllm#{issue}", "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert "fixed by PR" in shown.stdout and f"#{pr}" in shown.stdout
    shown = json.loads(retriage("show", f"vllm#{issue}", "--db", db, "--json").stdout)
    assert pr in shown["links"]["fixed_by"]
    assert_token_nowhere(TOKEN, db, first, second)


def test_gh_token_is_used_and_no_token_is_said_once(tmp_path, server):
    run = retriage("mine", "sglang", "--no-comments", "--base-url", server.base_url, "--db", tmp_path / "a.duckdb",
                   "--request-gap", "0", var="GH_TOKEN")
    assert run.returncode == 0, run.stderr
    assert all(e["auth"] for e in server.log)
    assert not any(e["path"].endswith("/comments") for e in server.log)
    assert_token_nowhere(TOKEN, tmp_path / "a.duckdb", run)

    server.anonymous_rate_limit = 200  # two listings and the pages of label events (miner/label_sync.py)
    run = retriage("mine", "sglang", "vllm", "--base-url", server.base_url, "--db", tmp_path / "b.duckdb",
                   "--request-gap", "0", "--no-comments", token=None)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("no GH_TOKEN or GITHUB_TOKEN set") == 1
    assert "/200 left" in run.stdout  # the anonymous rate limit, as the server tells it


def test_failures_are_one_line_and_never_show_the_token(tmp_path, server):
    db = tmp_path / "f.duckdb"
    wrong = "ghp_WrongToken99999999999999999999999999"
    run = retriage("mine", "sglang", "vllm", "--base-url", server.base_url, "--db", db, token=wrong)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last == (f"retriage: error: {SGLANG}: 401 Bad credentials: GitHub rejected the token in "
                    "GH_TOKEN/GITHUB_TOKEN")
    assert "skipped" in run.stdout
    assert_token_nowhere(wrong, db, run)

    run = retriage("mine", "nobody/nothing", "--base-url", server.base_url, "--db", db)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == ("retriage: error: nobody/nothing: 404 not found: "
                                                   "/repos/nobody/nothing/issues (no such repository, or no access)")
    for args, message in [
        (["mine", "sglang", "--since", "last week"], "--since 'last week' is not a date"),
        (["mine", "sglang", "--base-url", "ftp://example.invalid"], "--base-url must be an http(s) URL"),
        (["mine", "what?"], "unknown repository 'what?'"),
    ]:
        run = retriage(*args, "--db", db)
        assert run.returncode == 2 and run.stderr.count("\n") == 1  # a bad option value: usage, exit 2
        assert message in run.stderr and "Traceback" not in run.stderr


def test_max_requests_stops_cleanly(tmp_path, server, assert_store_matches):
    db = tmp_path / "m.duckdb"
    run = retriage("mine", "vllm", "--base-url", server.base_url, "--db", db, "--request-gap", "0",
                   "--max-requests", "3", "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["stopped"] and summary["requests"] == 3 and summary["repos"][0]["status"] == "stopped"
    run = retriage("mine", "vllm", "--base-url", server.base_url, "--db", db, "--request-gap", "0")
    assert run.returncode == 0, run.stderr
    con = duckdb.connect(str(db), read_only=True)
    assert_store_matches(con, server, VLLM)
    con.close()


def test_unreachable_host_fails_fast_in_one_line_without_a_tick(tmp_path):
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    run = retriage("mine", "--base-url", f"http://127.0.0.1:{port}", "--db", tmp_path / "o.duckdb",
                   "--max-requests", "2")
    assert time.monotonic() - started < 5
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        f"retriage: error: {VLLM}: cannot reach http://127.0.0.1:{port} (connection refused): check the network "
        f"or --base-url (cursor kept: run again to resume)")
    assert "✓" not in run.stderr and "✓" not in run.stdout
    assert run.stdout.count("skipped") == 3


def test_max_requests_that_fetched_nothing_exits_non_zero(tmp_path, server):
    server.inject("502", path="/issues", times=5)
    run = retriage("mine", "vllm", "--base-url", server.base_url, "--db", tmp_path / "n.duckdb",
                   "--max-requests", "1")
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        "retriage: error: stopped at --max-requests 1 before any page was fetched: nothing stored")
    assert "everything fetched is stored" not in run.stdout


def test_waits_are_logged_when_stderr_is_not_a_terminal(tmp_path, server):
    server.inject("429", path="/issues", skip=1, retry_after=1)
    run = retriage("mine", "vllm", "--no-comments", "--base-url", server.base_url, "--db", tmp_path / "w.duckdb")
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.startswith("retriage mine: ") and " req, " not in line]
    assert lines == [f"retriage mine: {VLLM}: waiting 1 s: 429: asked to retry after 1 s"]  # progress lines aside


UNTIL = r"\d\d:\d\d UTC"  # when to come back


def test_a_rate_limit_longer_than_max_wait_stops_at_once_and_says_when(tmp_path, server, assert_store_matches):
    """A reset an hour ahead is not waited for (the default --max-wait is 300 s), nor one 20 s ahead with
    --max-wait 2: one line saying when to come back, exit 1, the cursor kept; the next run resumes."""
    db = tmp_path / "w.duckdb"
    server.inject("ratelimit", path="/issues", skip=1, reset_in=3600)
    started = time.monotonic()
    run = retriage("mine", "vllm", "sglang", "--base-url", server.base_url, "--db", db, timeout=30)
    assert time.monotonic() - started < 10
    assert run.returncode == 1
    assert re.fullmatch(rf"retriage: error: {VLLM}: rate limit exhausted: GitHub asks to wait 360\d s \(until "
                        rf"{UNTIL}\), more than the 300 s limit; run again then \(or raise --max-wait\) \(cursor "
                        rf"kept: run again to resume\)", run.stderr.strip().splitlines()[-1]), run.stderr
    assert "skipped" in run.stdout  # sglang: the same limit would refuse it

    server.inject("ratelimit", path="/issues", reset_in=20)
    started = time.monotonic()
    run = retriage("mine", "vllm", "--base-url", server.base_url, "--db", db, "--max-wait", "2", timeout=30)
    assert time.monotonic() - started < 10
    assert run.returncode == 1
    assert "more than the 2 s limit; run again then (or raise --max-wait)" in run.stderr.strip().splitlines()[-1]

    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM issues").fetchone()[0] == 30  # the page before the limit
    cursor, status = con.execute("SELECT cursor_updated_at, last_status FROM sync_state WHERE repo = ? AND "
                                 "resource = 'issues'", [VLLM]).fetchone()
    con.close()
    assert cursor is not None and status.startswith("failed: rate limit exhausted")
    run = retriage("mine", "vllm", "sglang", "--base-url", server.base_url, "--db", db, "--max-wait", "5")
    assert run.returncode == 0, run.stderr
    con = duckdb.connect(str(db), read_only=True)
    for repo in (VLLM, SGLANG):
        assert_store_matches(con, server, repo)
    con.close()


def test_max_requests_does_not_wait_for_a_rate_limit_it_has_no_request_left_for(tmp_path, server,
                                                                                assert_store_matches):
    """A 60 s reset is within --max-wait, but with --max-requests spent no request could follow it: the run
    stops at once and says when GitHub takes requests again."""
    db = tmp_path / "b.duckdb"
    server.inject("ratelimit", path="/issues", reset_in=60)
    started = time.monotonic()
    run = retriage("mine", "vllm", "--base-url", server.base_url, "--db", db, "--max-requests", "1", timeout=30)
    assert time.monotonic() - started < 10
    assert run.returncode == 1
    assert re.fullmatch(rf"retriage: error: stopped at --max-requests 1 before any page was fetched: nothing "
                        rf"stored; rate limit exhausted, until {UNTIL}", run.stderr.strip().splitlines()[-1])

    server.inject("ratelimit", path="/issues", skip=2, reset_in=60)  # the third request: the last one allowed
    started = time.monotonic()
    run = retriage("mine", "vllm", "--base-url", server.base_url, "--db", db, "--max-requests", "3", timeout=30)
    assert time.monotonic() - started < 10
    assert run.returncode == 0, run.stderr
    assert re.search(rf"stopped at --max-requests 3: everything fetched is stored; run again to continue \(rate "
                     rf"limit exhausted, until {UNTIL}\)", run.stdout), run.stdout
    assert [e["status"] for e in server.log[-3:]] == [200, 200, 403]

    run = retriage("mine", "vllm", "--base-url", server.base_url, "--db", db)
    assert run.returncode == 0, run.stderr
    con = duckdb.connect(str(db), read_only=True)
    assert_store_matches(con, server, VLLM)
    con.close()


def test_an_ever_changing_next_link_stops_at_max_pages_with_progress_lines(tmp_path, server):
    """A `next` link that is a new URL every time never repeats a page: --max-pages ends the listing with one
    line, and without a terminal the run logs its progress on the way (every 25 requests or 10 s)."""
    server.inject("drift", path="/issues", times=100_000)
    run = retriage("mine", "vllm", "--no-comments", "--base-url", server.base_url, "--db", tmp_path / "d.duckdb",
                   "--max-pages", "30", timeout=60)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        f"retriage: error: {VLLM}: issues listing stopped after 30 pages in one run (page cap, --max-pages) "
        f"(cursor kept: run again to resume)")
    assert len([e for e in server.log if e["path"].endswith("/issues")]) == 30
    progress = [line for line in run.stderr.splitlines() if line.startswith(f"retriage mine: {VLLM}: ")]
    assert progress, run.stderr
    assert all(re.fullmatch(r"retriage mine: \S+: [\d,]+ issues/PRs, [\d,]+ comments, [\d,]+ req, [\d,]+ rate "
                            r"left", line) for line in progress), progress


@pytest.mark.parametrize("args, message", [
    (["--request-gap", "nan"], "--request-gap must be a number from 0 to 60 seconds, not nan"),
    (["--request-gap", "inf"], "--request-gap must be a number from 0 to 60 seconds, not inf"),
    (["--request-gap", "1e9"], "--request-gap must be a number from 0 to 60 seconds, not 1e+09"),
    (["--request-gap", "-1"], "--request-gap must be a number from 0 to 60 seconds, not -1"),
    (["--max-wait", "nan"], "--max-wait must be a number from 0 to 86400 seconds, not nan"),
    (["--max-wait", "-inf"], "--max-wait must be a number from 0 to 86400 seconds, not -inf"),
    (["--max-wait", "1e6"], "--max-wait must be a number from 0 to 86400 seconds, not 1e+06"),
    (["--max-wait", "-5"], "--max-wait must be a number from 0 to 86400 seconds, not -5"),
    (["--max-pages", "0"], "Invalid value for '--max-pages': 0 is not in the range x>=1"),
    (["--max-pages", "1e3"], "Invalid value for '--max-pages': '1e3' is not a valid int"),
    (["--max-requests", "0"], "Invalid value for '--max-requests': 0 is not in the range x>=1"),
    (["--max-requests", "nan"], "Invalid value for '--max-requests': 'nan' is not a valid int"),
])
def test_absurd_or_non_finite_numbers_are_usage_errors(tmp_path, server, args, message):
    """Refused before anything is opened or asked: one line, exit 2 (nan and inf were internal errors, exit 70;
    a gap of 1e9 s slept silently)."""
    db = tmp_path / "v.duckdb"
    started = time.monotonic()
    run = retriage("mine", "vllm", "--base-url", server.base_url, "--db", db, *args, timeout=30)
    assert time.monotonic() - started < 10
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("retriage: error: ") and message in lines[0], run.stderr
    assert not server.log and not db.exists()
