"""Shared fixtures: real DuckDB files in temporary folders, the real corpus, the CLI run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_CORPUS = ROOT.parent / "shared" / "corpus"
SNAPSHOT = ROOT / "retriage" / "data" / "snapshot"


def corpus_file(name: str) -> Path:
    """A corpus file from ../shared/corpus, or the identical copy bundled in the package."""
    p = SHARED_CORPUS / name
    return p if p.exists() else SNAPSHOT / name


def run_cli(*args: str, db: Path | None = None, input: str | bytes | None = None, env: dict | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `retriage ARGS` in a fresh process, as a user would."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("RETRIAGE_DB",)}
    full_env["HF_HUB_OFFLINE"] = "1"
    if env:
        full_env.update(env)
    cmd = [sys.executable, "-m", "retriage.cli", *args]
    if db is not None:
        cmd += ["--db", str(db)]
    text = not isinstance(input, bytes)
    return subprocess.run(cmd, input=input, capture_output=True, text=text, env=full_env, timeout=timeout,
                          cwd=str(ROOT))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "test.duckdb"


# ---- miner (issue 3): a local GitHub REST server and a check that the store holds exactly what it serves ----
from datetime import datetime as _miner_datetime, timezone as _miner_timezone

import pytest as _miner_pytest


@_miner_pytest.fixture
def github_server():
    """Factory: github_server(**options) -> a started tests/github_server.GitHubServer, stopped after the test."""
    from github_server import GitHubServer

    servers = []

    def make(**options):
        server = GitHubServer(**options).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@_miner_pytest.fixture
def no_token_env(monkeypatch):
    """No GITHUB_TOKEN/GH_TOKEN from the machine, and no proxy between the miner and 127.0.0.1."""
    for var in ("GITHUB_TOKEN", "GH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return monkeypatch


def _miner_time(value):
    if value is None:
        return None
    return _miner_datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(_miner_timezone.utc) \
        .replace(tzinfo=None)


def served_state(server, repo):
    """What the server holds, in the store's terms (written here, not with the project's own converters)."""
    issues = {o["number"]: (o["title"], o["body"], o["state"], sorted(lab["name"] for lab in o["labels"]),
                            o["user"]["login"], _miner_time(o["created_at"]), _miner_time(o["updated_at"]),
                            _miner_time(o["closed_at"]), o["comments"], "pull_request" in o, o["html_url"])
              for o in server.issues(repo)}
    comments = {c["id"]: (int(c["issue_url"].rsplit("/", 1)[1]), c["body"], c["user"]["login"],
                          _miner_time(c["created_at"]), _miner_time(c["updated_at"]))
                for c in server.comments(repo)}
    return issues, comments, server.expected_links(repo)


def stored_state(con, repo):
    issues = {r[0]: (r[1], r[2], r[3], sorted(r[4] or []), *r[5:]) for r in con.execute(
        "SELECT number, title, body, state, labels, author, created_at, updated_at, closed_at, comments, "
        "is_pull_request, html_url FROM issues WHERE repo = ?", [repo]).fetchall()}
    comments = {r[0]: tuple(r[1:]) for r in con.execute(
        "SELECT id, issue_number, body, author, created_at, updated_at FROM comments WHERE repo = ?",
        [repo]).fetchall()}
    links = set(con.execute("SELECT repo, pr_number, issue_repo, issue_number FROM issue_links WHERE repo = ?",
                            [repo]).fetchall())
    return issues, comments, links


@_miner_pytest.fixture
def assert_store_matches():
    """assert_store_matches(con, server, repo): issues, PRs, comments and fix links exactly as served, once each."""
    def check(con, server, repo, comments=True):
        want_issues, want_comments, want_links = served_state(server, repo)
        got_issues, got_comments, got_links = stored_state(con, repo)
        assert set(got_issues) == set(want_issues), "issue numbers differ"
        for number, row in want_issues.items():
            assert got_issues[number] == row, f"{repo}#{number} differs"
        total, distinct = con.execute("SELECT count(*), count(DISTINCT number) FROM issues WHERE repo = ?",
                                      [repo]).fetchone()
        assert total == distinct == len(want_issues)
        if comments:
            assert got_comments == want_comments
            total, distinct = con.execute("SELECT count(*), count(DISTINCT id) FROM comments WHERE repo = ?",
                                          [repo]).fetchone()
            assert total == distinct == len(want_comments)
        assert got_links == want_links
    return check


@_miner_pytest.fixture
def miner_client(no_token_env):
    """Factory: miner_client(server, token=..., **options) -> a GitHubClient with waits short enough for tests."""
    from retriage.miner.client import GitHubClient, RetryPolicy

    clients = []

    def make(server, token=None, policy=None, **options):
        policy = policy or RetryPolicy(attempts=4, backoff_base=0.01, backoff_cap=0.05, secondary_wait=0.05,
                                       reset_margin=0.05, tick=0.05, max_wait=5.0)
        client = GitHubClient(server.base_url, token=token, policy=policy, seconds_between_requests=0, **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
