"""Label events (labeled / unlabeled) of the issues `mine` stores, from the real local GitHub server, and the one
request beyond PyGithub's object API (miner/client.raw_request)."""

import pytest

from retriage.db.label_events import label_history
from retriage.db.store import connect
from retriage.miner import sync
from retriage.miner.client import raw_request

REPO = "vllm-project/vllm"
TOKEN = "ghp_labeltoken0123456789abcdefABCDEF0123"


@pytest.fixture
def server(github_server):
    return github_server(repos=[REPO], limit_per_repo=40, token=TOKEN, max_per_page=5)


def stored(con):
    return sorted(con.execute("SELECT number, event_id, label, action, actor, strftime(created_at, "
                              "'%Y-%m-%dT%H:%M:%SZ') FROM label_events WHERE repo = ?", [REPO]).fetchall())


def events_asked(server):
    return sorted(int(e["path"].split("/")[5]) for e in server.log if e["path"].endswith("/events"))


def test_label_events_are_stored_once_and_a_rerun_asks_for_none(tmp_path, server, miner_client):
    con = connect(tmp_path / "m.duckdb")
    (first,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert first.status == "complete"
    want = server.label_events(REPO)
    assert stored(con) == want
    assert {w[3] for w in want} == {"labeled", "unlabeled"}  # the served data has both kinds
    plain = sorted(o["number"] for o in server.issues(REPO) if "pull_request" not in o)
    assert events_asked(server) == plain  # each issue once, never a pull request
    assert first.label_events.new == len(want) and first.label_events.pages == len(plain)

    server.clear_log()
    (again,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert again.status == "unchanged" and again.requests == 1 and not events_asked(server)
    assert stored(con) == want


def test_only_changed_issues_are_asked_and_an_unlabel_after_a_label_is_kept(tmp_path, server, miner_client):
    con = connect(tmp_path / "m.duckdb")
    sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    plain = sorted(o["number"] for o in server.issues(REPO) if "pull_request" not in o)
    target, other = plain[3], plain[7]
    server.label_issue(REPO, target, "bug", actor="alice")
    server.unlabel_issue(REPO, target, "bug", actor="bob")
    server.add_comment(REPO, other, "still happens")  # a change that is not a label
    server.clear_log()
    (result,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert result.status == "complete"
    assert events_asked(server) == sorted([target, other])
    assert stored(con) == server.label_events(REPO)
    last_two = [(e["label"], e["action"], e["actor"]) for e in label_history(con, REPO, target)][-2:]
    assert last_two == [("bug", "labeled", "alice"), ("bug", "unlabeled", "bob")]
    assert result.label_events.new == 2


def test_events_are_followed_across_pages_and_a_stop_resumes_at_the_next_issue(tmp_path, server, miner_client):
    con = connect(tmp_path / "m.duckdb")
    sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    plain = sorted(o["number"] for o in server.issues(REPO) if "pull_request" not in o)
    busy, later = plain[0], plain[1]
    for k in range(7):
        server.label_issue(REPO, busy, f"area-{k}", actor=f"m{k}")
    server.label_issue(REPO, later, "new-label-after-sync")
    server.clear_log()
    d = server.data[REPO]
    pages_of_busy = -(-len(d.events(d.issues[busy])) // 5)  # every event of the issue, label events or not
    assert pages_of_busy >= 2
    listings = 2  # one page of issues (both edited issues fit on it), one of comments
    (stopped,) = sync.sync_repos(con, miner_client(server, token=TOKEN, max_requests=listings + pages_of_busy),
                                 [REPO])
    assert stopped.status == "stopped"
    got = {(n, label) for n, _, label, *_ in stored(con)}
    assert {(busy, f"area-{k}") for k in range(7)} <= got and (later, "new-label-after-sync") not in got
    server.clear_log()
    (done,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert done.status == "complete" and events_asked(server) == [later]
    assert stored(con) == server.label_events(REPO)


def test_raw_request_contract(server, miner_client):
    """PyGithub's Requester.requestJson as miner/client.raw_request uses it: (status, lowercased headers, text),
    a 304 on If-None-Match, an error status returned rather than raised. Fails if PyGithub changes under it."""
    client = miner_client(server, token=TOKEN)
    status, headers, body = raw_request(client.gh, "GET", f"/repos/{REPO}/issues", {"per_page": 5, "state": "all"},
                                        {"Accept": "application/vnd.github+json"})
    assert status == 200 and body.startswith("[") and headers["etag"] and "link" in headers
    again = raw_request(client.gh, "GET", f"/repos/{REPO}/issues", {"per_page": 5, "state": "all"},
                        {"If-None-Match": headers["etag"]})
    assert again[0] == 304
    missing = raw_request(client.gh, "GET", f"/repos/{REPO}/issues/999999", None, {})
    assert missing[0] == 404 and "Not Found" in missing[2]
    assert all(e["auth"] for e in server.log)
