"""Faults injected into the real HTTP server: each is survived, or the run fails with one clear line and the
cursor where the last stored page left it."""

import time

import pytest

from retriage.db.store import connect
from retriage.miner import sync

REPO, OTHER = "sgl-project/sglang", "vllm-project/vllm"
TOKEN = "ghp_faulttoken9876543210zyxwvuZYXWVU4321"


@pytest.fixture
def server(github_server):
    return github_server(repos=[REPO, OTHER], limit_per_repo=50, token=TOKEN, max_per_page=20)


def run(con, client, repos=(REPO,)):
    waits = []
    client.on_wait = lambda left, reason: waits.append((round(left, 2), reason))
    return sync.sync_repos(con, client, list(repos)), waits


def assert_prefix_stored(con, server, resource):
    """What is stored is exactly the first N items in listing order, and the cursor is the newest of them."""
    key = "number" if resource == "issues" else "id"
    column = "number" if resource == "issues" else "id"
    items = sorted(getattr(server, resource)(REPO), key=lambda o: (o["updated_at"], o[key]))
    stored = {r[0] for r in con.execute(f"SELECT {column} FROM {resource} WHERE repo = ?", [REPO]).fetchall()}
    assert stored == {o[key] for o in items[:len(stored)]}
    state = sync.load_state(con, REPO, resource)
    assert sync.iso_utc(state.cursor) == items[len(stored) - 1]["updated_at"]
    return state


@pytest.mark.parametrize("kind, options, reason", [
    ("ratelimit", {"reset_in": 1.2}, "rate limit exhausted"),
    ("secondary", {}, "secondary rate limit"),
    ("429", {"retry_after": 1}, "429: asked to retry after 1 s"),
    ("502", {"times": 2}, "server error 502"),
    ("reset", {"times": 2}, "connection failed"),
    ("truncated", {}, "truncated or invalid JSON"),
    ("short_read", {}, "connection failed"),
])
def test_fault_is_survived(tmp_path, server, miner_client, assert_store_matches, kind, options, reason):
    server.inject(kind, path="/issues/comments", skip=2, **options)  # in the middle of the comments listing
    con = connect(tmp_path / "m.duckdb")
    (result,), waits = run(con, miner_client(server, token=TOKEN))
    assert result.status == "complete", result.error
    assert_store_matches(con, server, REPO)
    faulty = [i for i, e in enumerate(server.log) if e["fault"]]
    assert len(faulty) == options.get("times", 1)
    assert any(r.startswith(reason) for _, r in waits), waits
    after = server.log[faulty[-1] + 1]
    assert after["path"] == server.log[faulty[-1]]["path"]  # the same request, again
    if kind == "ratelimit":
        assert after["t"] >= server.log[faulty[0]]["reset"]  # waited for the reset, not less
    if kind == "429":
        assert after["t"] - server.log[faulty[0]]["t"] >= 1.0
    assert all(left <= 5.0 for left, _ in waits)  # bounded, and each countdown is reported


@pytest.mark.parametrize("kind, message", [
    ("502", "server error 502 at /repos/sgl-project/sglang/issues/comments; gave up after 4 attempts"),
    ("truncated", "truncated or invalid JSON from /repos/sgl-project/sglang/issues/comments; gave up after 4"),
    ("reset", "connection failed (ConnectionError); gave up after 4 attempts"),
])
def test_persistent_fault_fails_clearly_with_the_cursor_intact(tmp_path, server, miner_client,
                                                               assert_store_matches, kind, message):
    server.inject(kind, path="/issues/comments", skip=2, times=1000)
    con = connect(tmp_path / "m.duckdb")
    (result,), waits = run(con, miner_client(server, token=TOKEN))
    assert result.status == "failed" and result.retryable
    assert result.error.startswith(message) and "\n" not in result.error
    assert sync.load_state(con, REPO, "issues").status == "complete"
    state = assert_prefix_stored(con, server, "comments")
    assert state.status.startswith("failed: ") and state.etag is None
    assert con.execute("SELECT count(*) FROM comments").fetchone()[0] == 40  # the two pages before the fault
    server._faults.clear()
    server.clear_log()
    (result,), _ = run(con, miner_client(server, token=TOKEN))
    assert result.status == "complete"
    assert_store_matches(con, server, REPO)
    first_comments = next(e for e in server.log if e["path"].endswith("/issues/comments"))
    assert first_comments["params"]["since"] == sync.iso_utc(state.cursor - sync.SINCE_OVERLAP)  # resumed there


def test_rate_limit_reset_beyond_the_wait_cap_fails_at_once_and_skips_the_rest(tmp_path, server, miner_client):
    server.inject("ratelimit", path="/issues", skip=1, reset_in=3600)
    con = connect(tmp_path / "m.duckdb")
    started = time.monotonic()
    results, waits = run(con, miner_client(server, token=TOKEN), repos=(REPO, OTHER))
    assert time.monotonic() - started < 5
    assert [r.status for r in results] == ["failed", "skipped"]
    assert "rate limit exhausted: GitHub asks to wait" in results[0].error
    assert "more than the 5 s limit; run again then" in results[0].error
    assert_prefix_stored(con, server, "issues")
    assert con.execute("SELECT count(*) FROM issues").fetchone()[0] == 20


def test_secondary_limit_backs_off_exponentially(tmp_path, server, miner_client, assert_store_matches):
    server.inject("secondary", path="/issues", times=3)
    con = connect(tmp_path / "m.duckdb")
    (result,), waits = run(con, miner_client(server, token=TOKEN))
    assert result.status == "complete"
    firsts = [left for left, reason in waits if reason == "secondary rate limit" and left > 0]
    starts = [firsts[0]] + [b for a, b in zip(firsts, firsts[1:]) if b > a]  # the first tick of each wait
    assert [round(s, 2) for s in starts] == [0.05, 0.1, 0.2]
    assert_store_matches(con, server, REPO)


def test_bad_credentials_fail_without_showing_the_token(tmp_path, server, miner_client):
    con = connect(tmp_path / "m.duckdb")
    wrong = "ghp_wrongtoken00000000000000000000000000"
    results, _ = run(con, miner_client(server, token=wrong), repos=(REPO, OTHER))
    assert [r.status for r in results] == ["failed", "skipped"]
    assert results[0].error.startswith("401 Bad credentials")
    assert wrong not in results[0].error and not results[0].retryable
    assert con.execute("SELECT count(*) FROM issues").fetchone()[0] == 0


def test_unknown_repository_fails_alone(tmp_path, server, miner_client, assert_store_matches):
    con = connect(tmp_path / "m.duckdb")
    results, _ = run(con, miner_client(server, token=TOKEN), repos=("nobody/nothing", REPO))
    assert [r.status for r in results] == ["failed", "complete"]
    assert results[0].error == "404 not found: /repos/nobody/nothing/issues (no such repository, or no access)"
    assert_store_matches(con, server, REPO)
