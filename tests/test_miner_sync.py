"""The miner against a real HTTP GitHub server on 127.0.0.1: full sync, incremental runs, 304s, pagination."""

from datetime import datetime, timedelta, timezone

import pytest

from retriage.db.store import connect
from retriage.miner import sync
from retriage.miner.links import fixed_issues

VLLM, SGLANG = "vllm-project/vllm", "sgl-project/sglang"
TOKEN = "ghp_testtoken0123456789abcdefABCDEF0123"


def listing_requests(server, resource):
    suffix = "/issues" if resource == "issues" else "/issues/comments"
    return [e for e in server.log if e["path"].endswith(suffix)]


@pytest.fixture
def small(github_server):
    """Two repositories, 80 records each, 25 per page: several pages of issues and many of comments."""
    return github_server(repos=[VLLM, SGLANG], limit_per_repo=80, token=TOKEN, max_per_page=25)


def test_full_sync_stores_exactly_what_is_served(tmp_path, small, miner_client, assert_store_matches):
    con = connect(tmp_path / "m.duckdb")
    client = miner_client(small, token=TOKEN)
    results = sync.sync_repos(con, client, [VLLM, SGLANG])
    assert [r.status for r in results] == ["complete", "complete"]
    for repo in (VLLM, SGLANG):
        assert_store_matches(con, small, repo)
    prs = con.execute("SELECT count(*) FROM issues WHERE is_pull_request").fetchone()[0]
    assert 0 < prs < con.execute("SELECT count(*) FROM issues").fetchone()[0]
    assert con.execute("SELECT count(*) FROM issue_links").fetchone()[0] > 10
    # one request per page of each listing, plus one confirming request per listing; the label events come from
    # the repository's events, newest first (miner/label_sync.py), never one issue at a time
    pages = sum(-(-len(small.issues(r)) // 25) + -(-len(small.comments(r)) // 25) for r in (VLLM, SGLANG))
    event_pages = sum(-(-len(small.data[r].all_events()) // 25) for r in (VLLM, SGLANG))
    events = [e for e in small.log if e["path"].endswith("/issues/events")]
    assert len(events) == event_pages
    assert not [e for e in small.log if "/issues/" in e["path"] and e["path"].split("/")[5].isdigit()]
    assert client.requests == len(small.log) <= pages + 4 + event_pages
    # every listing asks for everything, in ascending update order, 100 a page, and follows Link as given
    for e in (e for e in small.log if e not in events):
        assert e["params"]["sort"] == "updated" and e["params"]["direction"] == "asc"
        assert e["params"]["per_page"] == "100"
        assert e["auth"]
    assert all(e["params"]["state"] == "all" for e in listing_requests(small, "issues"))
    assert any("after" in e["params"] for e in small.log)
    # cursors: the highest updated_at stored, per resource
    for repo in (VLLM, SGLANG):
        state = sync.load_state(con, repo, "issues")
        assert sync.iso_utc(state.cursor) == max(o["updated_at"] for o in small.issues(repo))
        assert state.status == "complete" and state.etag


def test_second_run_fetches_only_the_edits_and_an_unchanged_repo_costs_one_304(
        tmp_path, small, miner_client, assert_store_matches):
    con = connect(tmp_path / "m.duckdb")
    sync.sync_repos(con, miner_client(small, token=TOKEN), [VLLM])
    before = sync.load_state(con, VLLM, "issues").cursor
    comments_before = sync.load_state(con, VLLM, "comments").cursor
    plain = sorted(o["number"] for o in small.issues(VLLM) if "pull_request" not in o)
    quiet_comment = min(c["id"] for c in small.comments(VLLM))

    small.edit_issue(VLLM, plain[3], title="Edited title")
    small.edit_issue(VLLM, plain[10], state="closed", labels=[{"name": "bug"}])
    new_comment = small.add_comment(VLLM, plain[20], "A new comment after the first sync.")
    small.edit_comment(VLLM, quiet_comment, "An edited comment.")
    new_pr = small.add_issue(VLLM, "Fix the crash", fixes=plain[3])
    small.clear_log()

    result = sync.sync_repos(con, miner_client(small, token=TOKEN), [VLLM])[0]
    assert result.status == "complete"
    assert_store_matches(con, small, VLLM)
    assert con.execute("SELECT count(*) FROM issue_links WHERE pr_number = ? AND issue_number = ?",
                       [new_pr["number"], plain[3]]).fetchone()[0] == 1

    def served(resource):
        return {i for e in listing_requests(small, resource) for i in e["items"] or []}

    def stored_before(objects, key, cursor):  # listed again: the stored last page, asked for with its ETag
        return {o[key] for o in objects if o["updated_at"] <= sync.iso_utc(cursor)}

    assert served("issues") - stored_before(small.issues(VLLM), "number", before) == {
        plain[3], plain[10], plain[20], new_pr["number"]}
    assert served("comments") - stored_before(small.comments(VLLM), "id", comments_before) == {
        new_comment["id"], quiet_comment}
    assert len(served("issues")) <= 25 + 4 and len(served("comments")) <= 25 + 2
    events = [e for e in small.log if e["path"].endswith("/events")]
    assert [e["path"] for e in events] == [f"/repos/{VLLM}/issues/events"]  # the newest page reaches a stored one
    assert len(small.log) - len(events) <= 4  # the stored last page of each listing, and at most one more
    first = listing_requests(small, "issues")[0]
    assert first["if_none_match"] and "after" in first["params"]

    # nothing changed since: one conditional request, answered 304, and neither the comments listing nor the
    # events are asked (a label change would have moved its issue)
    small.clear_log()
    result = sync.sync_repos(con, miner_client(small, token=TOKEN), [VLLM])[0]
    assert result.status == "unchanged" and result.requests == 1
    assert [(e["path"], e["status"]) for e in small.log] == [(f"/repos/{VLLM}/issues", 304)]
    assert_store_matches(con, small, VLLM)


def test_pr_body_edit_replaces_its_links(tmp_path, small, miner_client):
    con = connect(tmp_path / "m.duckdb")
    sync.sync_repos(con, miner_client(small, token=TOKEN), [VLLM], comments=False)
    pr, issue_repo, issue = next(iter(sorted((p, r, n) for _, p, r, n in small.expected_links(VLLM))))
    small.edit_issue(VLLM, pr, body="Nothing to fix here (see #1 for context).")
    small.data[VLLM].links = {x for x in small.data[VLLM].links if x[1] != pr}
    sync.sync_repos(con, miner_client(small, token=TOKEN), [VLLM], comments=False)
    assert con.execute("SELECT count(*) FROM issue_links WHERE pr_number = ?", [pr]).fetchone()[0] == 0
    assert set(con.execute("SELECT * EXCLUDE (kind) FROM issue_links").fetchall()) == small.expected_links(VLLM)


def test_cursor_links_are_followed_past_the_page_number_limit(tmp_path, github_server, miner_client,
                                                             assert_store_matches):
    server = github_server(repos=[SGLANG], limit_per_repo=100, token=TOKEN, max_per_page=10, page_cap=2)
    con = connect(tmp_path / "m.duckdb")
    result = sync.sync_repos(con, miner_client(server, token=TOKEN), [SGLANG])[0]
    assert result.status == "complete", result.error
    assert result.issues.pages >= 10
    assert all(e["status"] == 200 for e in server.log)
    assert not any("page" in e["params"] for e in server.log)
    assert_store_matches(con, server, SGLANG)


@pytest.mark.parametrize("since_inclusive", [True, False])
def test_ties_on_updated_at_across_pages_are_all_stored(tmp_path, github_server, miner_client,
                                                        assert_store_matches, since_inclusive):
    """The corpus has a bulk relabel: a dozen issues with the same updated_at. Stop after a page that ends inside
    that tie, so the stored cursor is the tie's time with tied issues still unfetched; the next run gets them,
    whether the server reads `since` as "at or after" or as "strictly after"."""
    repo, per_page = "ggml-org/llama.cpp", 5
    server = github_server(repos=[repo], limit_per_repo=150, token=TOKEN, max_per_page=per_page,
                           since_inclusive=since_inclusive)
    order = sorted(server.issues(repo), key=lambda o: (o["updated_at"], o["number"]))
    tied = [i for i, o in enumerate(order) if o["updated_at"] == "2025-03-03T12:00:00Z"]
    assert len(tied) > per_page
    pages = next(k for k in range(1, 100) if tied[0] <= k * per_page - 1 < tied[-1])  # ends inside the tie
    con = connect(tmp_path / "m.duckdb")
    first = sync.sync_repos(con, miner_client(server, token=TOKEN, max_requests=pages), [repo], comments=False)
    assert first[0].status == "stopped"
    assert sync.iso_utc(sync.load_state(con, repo, "issues").cursor) == "2025-03-03T12:00:00Z"
    assert con.execute("SELECT count(*) FROM issues").fetchone()[0] == pages * per_page < tied[-1] + 1
    assert sync.sync_repos(con, miner_client(server, token=TOKEN), [repo], comments=False)[0].status == "complete"
    assert_store_matches(con, server, repo, comments=False)


def test_max_requests_stops_cleanly_and_the_next_run_continues(tmp_path, small, miner_client,
                                                               assert_store_matches):
    con = connect(tmp_path / "m.duckdb")
    client = miner_client(small, token=TOKEN, max_requests=3)
    results = sync.sync_repos(con, client, [VLLM, SGLANG])
    assert [r.status for r in results] == ["stopped", "skipped"]
    assert len(small.log) == client.requests == 3
    stored = con.execute("SELECT count(*) FROM issues").fetchone()[0]
    assert stored == 75  # three pages of 25, each committed with its cursor
    assert sync.load_state(con, VLLM, "issues").status == "partial"
    results = sync.sync_repos(con, miner_client(small, token=TOKEN), [VLLM, SGLANG])
    assert [r.status for r in results] == ["complete", "complete"]
    for repo in (VLLM, SGLANG):
        assert_store_matches(con, small, repo)


def test_since_is_utc_never_the_epoch_and_only_for_a_first_sync(tmp_path, small, miner_client, monkeypatch):
    monkeypatch.setenv("TZ", "America/Los_Angeles")
    con = connect(tmp_path / "m.duckdb")
    since = datetime(2024, 6, 1, 9, 30, tzinfo=timezone(timedelta(hours=2)))  # 07:30 UTC
    sync.sync_repos(con, miner_client(small, token=TOKEN), [VLLM], since=sync.parse_since(since.isoformat()))
    first = listing_requests(small, "issues")[0]
    assert first["params"]["since"] == "2024-06-01T07:30:00Z"
    stored = [r[0] for r in con.execute("SELECT updated_at FROM issues").fetchall()]
    assert stored and min(stored) >= datetime(2024, 6, 1, 7, 30)
    assert len(stored) == sum(1 for o in small.issues(VLLM) if o["updated_at"] >= "2024-06-01T07:30:00Z")
    small.clear_log()
    result = sync.sync_repos(con, miner_client(small, token=TOKEN), [VLLM], since=datetime(2020, 1, 1))[0]
    assert result.since_ignored and result.status == "unchanged"

    con2 = connect(tmp_path / "epoch.duckdb")
    small.clear_log()
    sync.sync_repos(con2, miner_client(small, token=TOKEN), [VLLM], since=sync.parse_since("1970-01-01"))
    assert "since" not in listing_requests(small, "issues")[0]["params"]
    assert con2.execute("SELECT count(*) FROM issues").fetchone()[0] == len(small.issues(VLLM))
    for e in small.log:
        assert not e["params"].get("since", "2").startswith("1970")


def test_unauthenticated_run_works(tmp_path, small, miner_client, assert_store_matches):
    small.anonymous_rate_limit = 500
    con = connect(tmp_path / "m.duckdb")
    client = miner_client(small)
    assert sync.sync_repos(con, client, [SGLANG])[0].status == "complete"
    assert not any(e["auth"] for e in small.log)
    assert client.rate_limit == 500
    assert_store_matches(con, small, SGLANG)


def test_repository_names_and_aliases():
    assert sync.resolve_repos(None) == ["vllm-project/vllm", "sgl-project/sglang", "ggml-org/llama.cpp",
                                        "NVIDIA/TensorRT-LLM"]
    assert sync.resolve_repos(["trtllm", "ggerganov/llama.cpp", "llama.cpp", "a/b"]) == [
        "NVIDIA/TensorRT-LLM", "ggml-org/llama.cpp", "a/b"]
    with pytest.raises(Exception, match="unknown repository"):
        sync.resolve_repos(["nonsense"])


@pytest.mark.parametrize("body, expected", [
    ("Fixes #12", [("o/r", 12)]),
    ("closes: #3. Also resolved #4", [("o/r", 3), ("o/r", 4)]),
    ("FIXED other/repo#7", [("other/repo", 7)]),
    ("Resolves https://github.com/o/r/issues/9#issuecomment-1", [("o/r", 9)]),
    ("close ggerganov/llama.cpp#5", [("ggml-org/llama.cpp", 5)]),
    ("see #12, related to #13, prefix#14, suffixes #15", []),
    ("fixes #12abc and fix #1 and fixes #1", [("o/r", 1)]),
    ("", []),
    (None, []),
])
def test_fix_references(body, expected):
    assert fixed_issues(body, "o/r") == expected


def test_token_order_is_ghs():
    from retriage.miner.client import token_from_env

    assert token_from_env({"GH_TOKEN": "a", "GITHUB_TOKEN": "b"}) == "a"
    assert token_from_env({"GH_TOKEN": " ", "GITHUB_TOKEN": "b"}) == "b"
    assert token_from_env({}) is None
