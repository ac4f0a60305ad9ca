"""Label events (labeled / unlabeled) of the issues `mine` stores, read from the repository-wide events endpoint of
the real local GitHub server (miner/label_sync.py), and the one request beyond PyGithub's object API
(miner/client.raw_request)."""

import json

import pytest

from retriage.db.label_events import label_history
from retriage.db.store import connect
from retriage.miner import label_sync, sync
from retriage.miner.client import RequestBudgetExhausted, raw_request

pytestmark = pytest.mark.slow  # a local GitHub server or a labeled database per file: the full tier only

REPO = "vllm-project/vllm"
TOKEN = "ghp_labeltoken0123456789abcdefABCDEF0123"
EVENTS = f"/repos/{REPO}/issues/events"


@pytest.fixture
def server(github_server):
    return github_server(repos=[REPO], limit_per_repo=40, token=TOKEN, max_per_page=5)


def stored(con):
    return sorted(con.execute("SELECT number, event_id, label, action, actor, strftime(created_at, "
                              "'%Y-%m-%dT%H:%M:%SZ') FROM label_events WHERE repo = ?", [REPO]).fetchall())


def events_asked(server):
    """(status, items) of each events request; per-issue events requests are never made."""
    assert not [e for e in server.log if e["path"].endswith("/events") and e["path"] != EVENTS]
    return [(e["status"], e["items"]) for e in server.log if e["path"] == EVENTS]


def pages_of_all_events(server):
    return -(-len(server.data[REPO].all_events()) // 5)


def test_label_events_are_stored_once_and_a_rerun_asks_for_none(tmp_path, server, miner_client):
    con = connect(tmp_path / "m.duckdb")
    (first,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert first.status == "complete"
    want = server.label_events(REPO)
    assert stored(con) == want
    assert {w[3] for w in want} == {"labeled", "unlabeled"}  # the served data has both kinds
    on_prs = [e for e in server.data[REPO].all_events() if "pull_request" in e["issue"]
              and e["event"] == "labeled"]
    assert on_prs and not {e["id"] for e in on_prs} & {w[1] for w in want}  # pull requests' events: not kept
    asked = events_asked(server)
    assert len(asked) == pages_of_all_events(server) > 5  # every page once, back to the first event
    assert first.label_events.new == len(want) and first.label_events.complete

    server.clear_log()
    (again,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert again.status == "unchanged" and again.requests == 1  # the issues' stored page: 304
    assert events_asked(server) == [] and again.label_events.skipped
    assert stored(con) == want

    plain = sorted(o["number"] for o in server.issues(REPO) if "pull_request" not in o)
    server.add_comment(REPO, plain[0], "any news?")  # the issue changes, its labels do not
    server.clear_log()
    (commented,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert commented.status == "complete" and [status for status, _ in events_asked(server)] == [304]
    server.clear_log()
    (quiet,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert quiet.status == "unchanged" and events_asked(server) == []


def test_an_unlabel_after_a_label_is_kept_from_one_page(tmp_path, server, miner_client):
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
    assert [status for status, _ in events_asked(server)] == [200]  # the newest page reaches a stored event
    assert stored(con) == server.label_events(REPO)
    last_two = [(e["label"], e["action"], e["actor"]) for e in label_history(con, REPO, target)][-2:]
    assert last_two == [("bug", "labeled", "alice"), ("bug", "unlabeled", "bob")]
    assert result.label_events.new == 2


def test_a_run_killed_after_the_issues_listing_still_reads_the_events_next_time(tmp_path, server, miner_client):
    con = connect(tmp_path / "m.duckdb")
    sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    plain = sorted(o["number"] for o in server.issues(REPO) if "pull_request" not in o)
    server.label_issue(REPO, plain[4], "needs-repro", actor="carol")
    listed = sync.ResourceResult()  # a run that stored the issues listing and was killed before the events
    sync.sync_listing(con, miner_client(server, token=TOKEN), REPO, sync.ISSUES, None, listed, lambda *a: None)
    assert listed.complete and listed.fetched
    server.clear_log()
    (result,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert result.issues.not_modified and not result.label_events.skipped
    assert result.label_events.new == 1 and stored(con) == server.label_events(REPO)


def test_new_events_across_pages_are_all_read(tmp_path, server, miner_client):
    con = connect(tmp_path / "m.duckdb")
    sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    plain = sorted(o["number"] for o in server.issues(REPO) if "pull_request" not in o)
    for k in range(7):
        server.label_issue(REPO, plain[0], f"area-{k}", actor=f"m{k}")
    server.label_issue(REPO, plain[1], "new-label-after-sync")
    removed = [lab["name"] for lab in server.data[REPO].issues[plain[2]]["labels"]]
    server.edit_issue(REPO, plain[2], labels=[{"name": "triaged"}])  # labels set by an edit are events too
    new = 7 + 1 + 1 + len(removed)
    server.clear_log()
    (result,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert result.status == "complete" and result.label_events.new == new
    assert len(events_asked(server)) == new // 5 + 1 >= 2  # 5 a page, to the first page with a stored event
    assert stored(con) == server.label_events(REPO)
    assert ("triaged", "labeled", "maintainer") in [(e["label"], e["action"], e["actor"])
                                                    for e in label_history(con, REPO, plain[2])]


def test_a_stopped_first_run_resumes_where_it_stopped_and_loses_nothing(tmp_path, server, miner_client):
    total = pages_of_all_events(server)
    sync.sync_repos(connect(tmp_path / "probe.duckdb"), miner_client(server, token=TOKEN), [REPO])
    listings = sum(1 for e in server.log if e["path"] != EVENTS)  # what a first run asks before the events
    server.clear_log()
    con = connect(tmp_path / "m.duckdb")
    (stopped,) = sync.sync_repos(con, miner_client(server, token=TOKEN, max_requests=listings + 8), [REPO])
    assert stopped.status == "stopped" and len(events_asked(server)) == 8 < total - 6
    state = label_sync.load(con, REPO)
    assert state["through"] is None and state["next"] and state["top"]  # no cursor yet: nothing older is skipped
    assert 0 < len(stored(con)) < len(server.label_events(REPO))
    plain = sorted(o["number"] for o in server.issues(REPO) if "pull_request" not in o)
    server.label_issue(REPO, plain[5], "arrived-while-stopped")  # newer than the stopped walk's top
    with pytest.raises(RequestBudgetExhausted):  # stopped again, inside the gap
        label_sync.sync_label_events(con, miner_client(server, token=TOKEN, max_requests=5), REPO,
                                     sync.ResourceResult(), lambda: None)
    server.clear_log()
    (done,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert done.status == "complete"
    assert stored(con) == server.label_events(REPO)
    # the gap's remaining pages, then the newest page, which reaches the stopped walk's top
    assert len(events_asked(server)) == total - 8 - 5 + 1
    state = label_sync.load(con, REPO)
    assert state["next"] is None and state["through"] == max(e["id"] for e in server.data[REPO].all_events())
    server.clear_log()
    (quiet,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert quiet.status == "unchanged" and quiet.requests == 1 and events_asked(server) == []


def test_a_stored_page_the_server_no_longer_serves_is_read_again_from_the_newest(tmp_path, github_server,
                                                                               miner_client):
    server = github_server(repos=[REPO], limit_per_repo=40, token=TOKEN, max_per_page=5, page_links=True,
                           page_cap=1000)
    con = connect(tmp_path / "m.duckdb")
    (first,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert first.status == "complete" and stored(con) == server.label_events(REPO)
    through = label_sync.load(con, REPO)["through"]
    con.execute("DELETE FROM label_events WHERE event_id > (SELECT min(event_id) FROM label_events)")
    gone = {"through": None, "top": through, "next": f"{server.base_url}{EVENTS}?per_page=100&page=1001",
            "etag": None}
    con.execute("UPDATE sync_state SET etag = ? WHERE repo = ? AND resource = 'label_events'",
                [json.dumps(gone), REPO])
    server.clear_log()
    (again,) = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])
    assert again.status == "complete" and stored(con) == server.label_events(REPO)
    assert [s for s, _ in events_asked(server)][0] == 422


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
