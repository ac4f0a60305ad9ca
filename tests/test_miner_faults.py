"""Faults injected into the real HTTP server: each is survived, or the run fails with one clear line and the
cursor where the last stored page left it."""

import re
import time

import pytest

from retriage.db.store import connect
from retriage.miner import sync

pytestmark = pytest.mark.slow  # a local GitHub server or a labeled database per file: the full tier only

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
    assert state.status.startswith("failed: ") and state.etag.startswith(sync.UNVERIFIED)
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
    assert "more than the 5 s limit; run again then (or raise --max-wait)" in results[0].error
    assert re.search(r"\(until \d\d:\d\d UTC\)", results[0].error)  # when to come back
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


def test_a_trickling_answer_is_cut_at_the_deadline_and_retried(tmp_path, server, miner_client,
                                                               assert_store_matches):
    """One byte every 0.3 s never trips a read timeout (silence between bytes); the total deadline cuts it."""
    from retriage.miner.client import RetryPolicy

    server.inject("trickle", path="/issues/comments", skip=1, interval=0.3)
    policy = RetryPolicy(attempts=4, backoff_base=0.01, backoff_cap=0.05, tick=0.05, max_wait=5.0,
                         read_timeout=1, deadline=1.5)
    con = connect(tmp_path / "m.duckdb")
    started = time.monotonic()
    (result,), waits = run(con, miner_client(server, token=TOKEN, policy=policy))
    assert result.status == "complete", result.error
    assert time.monotonic() - started < 10
    assert any(r.startswith("no complete answer from /repos/sgl-project/sglang/issues/comments within 1.5 s")
               for _, r in waits), waits
    faulty = next(i for i, e in enumerate(server.log) if e["fault"] == "trickle")
    assert server.log[faulty + 1]["t"] - server.log[faulty]["t"] < 2.5  # cut at the deadline, not later
    assert_store_matches(con, server, REPO)


def test_a_next_link_back_to_the_same_page_ends_the_listing_in_one_line(tmp_path, server, miner_client):
    server.inject("loop", path="/issues", times=1000)
    con = connect(tmp_path / "m.duckdb")
    (result,), _ = run(con, miner_client(server, token=TOKEN))
    assert result.status == "failed"
    assert result.error.startswith("issues listing stopped: the server's next link repeats a page already "
                                   "fetched (/repos/sgl-project/sglang/issues")
    assert "\n" not in result.error
    assert len([e for e in server.log if e["path"].endswith("/issues")]) == 1  # never asked twice
    assert_prefix_stored(con, server, "issues")
    assert con.execute("SELECT count(*) FROM issues").fetchone()[0] == 20


def test_a_page_cap_ends_a_listing_in_one_line_and_the_next_run_continues(tmp_path, server, miner_client,
                                                                         assert_store_matches, monkeypatch):
    monkeypatch.setattr(sync, "MAX_PAGES", 2)
    con = connect(tmp_path / "m.duckdb")
    (result,), _ = run(con, miner_client(server, token=TOKEN))
    assert result.status == "failed" and result.retryable
    assert result.error == "issues listing stopped after 2 pages in one run (page cap, --max-pages)"
    assert con.execute("SELECT count(*) FROM issues").fetchone()[0] == 40
    monkeypatch.setattr(sync, "MAX_PAGES", 1000)
    (result,), _ = run(con, miner_client(server, token=TOKEN))
    assert result.status == "complete"
    assert_store_matches(con, server, REPO)


def test_a_next_link_that_is_new_every_time_stops_at_the_page_cap(tmp_path, server, miner_client,
                                                                  assert_store_matches):
    """A `next` link that never ends and never repeats a URL (the same page under a new name each time: no
    repeated page to catch) stops at the page cap in one line, the cursor where the stored page left it; the
    next run goes on from there."""
    assert sync.MAX_PAGES == 2_000  # the default: generous (200,000 items), not 20,000 pages (18 minutes)
    server.inject("drift", path="/issues", times=10_000)
    con = connect(tmp_path / "m.duckdb")
    client = miner_client(server, token=TOKEN)
    (result,) = sync.sync_repos(con, client, [REPO], max_pages=25)
    assert result.status == "failed" and result.retryable and not result.fatal
    assert result.error == "issues listing stopped after 25 pages in one run (page cap, --max-pages)"
    listed = [e for e in server.log if e["path"].endswith("/issues")]
    assert len(listed) == client.requests == 25
    assert len({tuple(sorted(e["params"].items())) for e in listed}) == 25  # never the same URL twice
    assert_prefix_stored(con, server, "issues")
    assert con.execute("SELECT count(*) FROM issues").fetchone()[0] == 20
    assert sync.load_state(con, REPO, "issues").status.startswith("failed: issues listing stopped after 25")
    server._faults.clear()
    (result,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert result.status == "complete", result.error
    assert_store_matches(con, server, REPO)


def test_no_rate_limit_is_waited_out_when_the_request_budget_is_spent(tmp_path, server, miner_client):
    """max_requests=2 and the second request is rate limited for 3 s: no request is left to make after the
    reset, so the run stops at once, not after the wait, with the first page stored and when to come back."""
    server.inject("ratelimit", path="/issues", skip=1, reset_in=3)
    con = connect(tmp_path / "m.duckdb")
    started = time.monotonic()
    results, waits = run(con, miner_client(server, token=TOKEN, max_requests=2), repos=(REPO, OTHER))
    assert time.monotonic() - started < 1.5 and not waits
    assert [r.status for r in results] == ["stopped", "skipped"]
    assert re.fullmatch(r"rate limit exhausted, until \d\d:\d\d UTC", results[0].stopped_before)
    assert len(server.log) == 2
    assert_prefix_stored(con, server, "issues")
    assert con.execute("SELECT count(*) FROM issues").fetchone()[0] == 20


def test_no_wait_for_the_reset_when_the_budget_is_spent_on_the_last_request_allowed(tmp_path, github_server,
                                                                                     miner_client):
    """The second (and last allowed) request leaves x-ratelimit-remaining 0 with the reset 3 s ahead: the run
    stops at once instead of waiting for the reset before finding that no request is left."""
    server = github_server(repos=[REPO], limit_per_repo=50, token=TOKEN, max_per_page=20, rate_limit=2)
    server._window_reset = int(time.time()) + 3
    con = connect(tmp_path / "m.duckdb")
    started = time.monotonic()
    (result,), waits = run(con, miner_client(server, token=TOKEN, max_requests=2))
    assert time.monotonic() - started < 1.5 and not waits
    assert result.status == "stopped"
    assert re.fullmatch(r"rate limit exhausted, until \d\d:\d\d UTC", result.stopped_before)
    assert [e["status"] for e in server.log] == [200, 200]
    assert con.execute("SELECT count(*) FROM issues").fetchone()[0] == 40


def test_an_unreachable_host_fails_at_once_for_every_repository(tmp_path, miner_client):
    import socket
    from types import SimpleNamespace

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    con = connect(tmp_path / "m.duckdb")
    started = time.monotonic()
    client = miner_client(SimpleNamespace(base_url=f"http://127.0.0.1:{port}"), token=TOKEN)
    results, waits = run(con, client, repos=(REPO, OTHER))
    assert time.monotonic() - started < 5
    assert [r.status for r in results] == ["failed", "skipped"]
    assert results[0].error == (f"cannot reach http://127.0.0.1:{port} (connection refused): check the network "
                                f"or --base-url")
    assert client.requests == 1 and not waits


def test_retry_after_as_an_http_date_is_waited_out(tmp_path, server, miner_client, assert_store_matches):
    from email.utils import formatdate

    server.inject("429", path="/issues", skip=1, retry_after=formatdate(time.time() + 2, usegmt=True))
    con = connect(tmp_path / "m.duckdb")
    (result,), waits = run(con, miner_client(server, token=TOKEN))
    assert result.status == "complete"
    reasons = {r for _, r in waits}
    assert any(r.startswith("429: asked to retry after") for r in reasons), reasons
    assert "secondary rate limit" not in reasons  # not read as a secondary limit of unknown length
    faulty = next(i for i, e in enumerate(server.log) if e["fault"])
    assert 0.5 <= server.log[faulty + 1]["t"] - server.log[faulty]["t"] < 4
    assert_store_matches(con, server, REPO)


def test_a_duplicated_rate_limit_header_is_tolerated(tmp_path, server, miner_client, assert_store_matches):
    server.inject("dup_header", path="/issues", times=3)
    con = connect(tmp_path / "m.duckdb")
    client = miner_client(server, token=TOKEN)
    (result,), waits = run(con, client)
    assert result.status == "complete", result.error
    assert not waits  # "4000, 0" is not read as exhausted
    assert client.rate_remaining is not None and client.rate_remaining > 0  # the good headers still count
    assert_store_matches(con, server, REPO)


def test_a_token_echoed_back_in_a_path_is_redacted_everywhere(tmp_path, server, miner_client):
    server.inject("echo_token", path="/issues")
    con = connect(tmp_path / "m.duckdb")
    (result,), waits = run(con, miner_client(server, token=TOKEN))
    assert result.status == "failed"
    assert any(TOKEN in e["path"] for e in server.log)  # the server did put it in a path we asked for
    assert result.error == "404 not found: /repos/***/x/issues (no such repository, or no access)"
    stored = [str(v) for row in con.execute("SELECT * FROM sync_state").fetchall() for v in row]
    assert stored and not any(TOKEN in v for v in stored)
    assert "404 not found: /repos/***/x/issues" in sync.load_state(con, REPO, "issues").status
