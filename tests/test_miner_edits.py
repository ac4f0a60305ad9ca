"""Issues edited while a sync lists them, against the real HTTP server with page-offset `next` links (as
api.github.com gives for issue listings): nothing is lost, a stop at any point loses nothing either, and the
ETag shortcut works again after a bulk edit of more than a page of issues in one second."""

import pytest

from retriage.db.store import connect
from retriage.miner import sync

pytestmark = pytest.mark.slow  # a local GitHub server or a labeled database per file: the full tier only

REPO = "vllm-project/vllm"
TOKEN = "ghp_editsToken0123456789abcdefABCDEF0123"
PER_PAGE = 50


@pytest.fixture
def server(github_server):
    return github_server(repos=[REPO], limit_per_repo=600, token=TOKEN, max_per_page=PER_PAGE, page_links=True)


def issue_listing(server):
    return [e for e in server.log if e["path"] == f"/repos/{REPO}/issues"]


def edit_first_page_after(server, n, count=10):
    """After the n-th request, edit `count` issues the first request listed (they move to the end)."""
    def edit():
        first = issue_listing(server)[0]["items"]
        for number in first[:count]:
            server.edit_issue(REPO, number, title=f"edited during the sync: {number}")
    server.after_request(n, edit)


def sync_issues(con, client):
    return sync.sync_repos(con, client, [REPO], comments=False)[0]


def test_issues_edited_during_a_sync_are_all_stored_and_the_next_run_is_truly_unchanged(
        tmp_path, server, miner_client, assert_store_matches):
    edit_first_page_after(server, 2)
    con = connect(tmp_path / "m.duckdb")
    result = sync_issues(con, miner_client(server, token=TOKEN))
    assert result.status == "complete", result.error
    assert_store_matches(con, server, REPO, comments=False)  # the ten that slid back onto page 1 are there
    pages = -(-len(server.issues(REPO)) // PER_PAGE)
    assert len(issue_listing(server)) > pages  # listed again from where the edited issues were
    relisted = issue_listing(server)[pages]["params"]
    assert relisted.get("since") and "page" not in relisted  # by `since`, not by offset

    server.clear_log()
    again = sync_issues(con, miner_client(server, token=TOKEN))
    assert again.status == "unchanged" and again.requests == 1
    server.edit_issue(REPO, min(o["number"] for o in server.issues(REPO)), title="after the sync")
    assert sync_issues(con, miner_client(server, token=TOKEN)).status == "complete"
    assert_store_matches(con, server, REPO, comments=False)


def test_the_old_way_loses_issues_on_this_server(tmp_path, server, miner_client):
    """The fault the first test guards against is real here: following the offset links alone (what a walk
    without the re-listing does) misses the issues that slid back."""
    edit_first_page_after(server, 2)
    client = miner_client(server, token=TOKEN)
    listed, url = set(), f"/repos/{REPO}/issues"
    params = {"state": "all", "sort": "updated", "direction": "asc", "per_page": 100}
    while url:
        page = client.get(url, params)
        listed |= {o["number"] for o in page.data}
        url, params = page.next_url, None
    assert len({o["number"] for o in server.issues(REPO)} - listed) == 10


@pytest.mark.parametrize("stop_after", [3, 12, 13, 14])
def test_a_stop_after_an_edit_loses_nothing(tmp_path, server, miner_client, assert_store_matches, stop_after):
    """Stopped (--max-requests) before, at and after the pass that noticed the edits; the next run completes."""
    edit_first_page_after(server, 2)
    con = connect(tmp_path / "m.duckdb")
    first = sync_issues(con, miner_client(server, token=TOKEN, max_requests=stop_after))
    assert first.status in ("stopped", "complete")
    result = sync_issues(con, miner_client(server, token=TOKEN))
    assert result.status in ("complete", "unchanged"), result.error
    assert_store_matches(con, server, REPO, comments=False)


@pytest.mark.parametrize("page_links", [True, False])
def test_etag_shortcut_recovers_after_a_burst_of_edits_in_one_second(tmp_path, github_server, miner_client,
                                                                   assert_store_matches, page_links):
    server = github_server(repos=[REPO], limit_per_repo=400, token=TOKEN, page_links=page_links)
    con = connect(tmp_path / "m.duckdb")
    assert sync_issues(con, miner_client(server, token=TOKEN)).status == "complete"
    numbers = sorted(o["number"] for o in server.issues(REPO))[:130]
    server.edit_issues(REPO, numbers, labels=[{"name": "triaged"}])  # 130 issues, the same updated_at
    assert sync_issues(con, miner_client(server, token=TOKEN)).status == "complete"
    assert_store_matches(con, server, REPO, comments=False)
    for _ in range(2):
        server.clear_log()
        result = sync_issues(con, miner_client(server, token=TOKEN))
        assert (result.status, result.requests) == ("unchanged", 1)
        assert [e["status"] for e in server.log] == [304]
