"""Shared fixtures: real DuckDB files in temporary folders, the real corpus, the CLI run as a user runs it."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_CORPUS = ROOT.parent / "shared" / "corpus"
SNAPSHOT = ROOT / "retriage" / "data" / "snapshot"


def corpus_file(name: str) -> Path:
    """A corpus file from ../shared/corpus, or the identical copy bundled in the package."""
    p = SHARED_CORPUS / name
    return p if p.exists() else SNAPSHOT / name


def corpus_slice(folder: Path, keep) -> tuple[Path, list[dict]]:
    """A JSON-lines file of the corpus records whose line index `keep(i)` accepts, from each of the three engines."""
    records = []
    for name in ("vllm.jsonl.gz", "sglang.jsonl.gz", "llama_cpp.jsonl.gz"):
        with gzip.open(corpus_file(name), "rt", encoding="utf-8") as f:
            records += [json.loads(line) for i, line in enumerate(f) if keep(i)]
    path = folder / "slice.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path, records


def run_cli(*args: str, db: Path | None = None, input: str | bytes | None = None, env: dict | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `retriage ARGS` in a fresh process, as a user would."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("RETRIAGE_DB",)}
    full_env["HF_HUB_OFFLINE"] = "1"
    full_env["RETRIAGE_OFFLINE"] = "1"  # `show` never asks api.github.com from a test (RETRIAGE_OFFLINE=0 to fetch)
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




@pytest.fixture
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
    for server in servers:  # whatever a test did, no write it sent to GitHub carries its token, whole or in part
        token = getattr(server, "token", None) or ""
        sent = json.dumps([w.get("body") for w in server.writes]).lower()
        pieces = [token[i:i + 12].lower() for i in range(max(0, len(token) - 11))]
        assert not any(p in sent for p in pieces), "a write to the server carried the token"


@pytest.fixture
def no_token_env(monkeypatch):
    """No GITHUB_TOKEN/GH_TOKEN from the machine, and no proxy between the miner and 127.0.0.1."""
    for var in ("GITHUB_TOKEN", "GH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return monkeypatch


def _utc(value):
    if value is None:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(timezone.utc) \
        .replace(tzinfo=None)


def served_state(server, repo):
    """What the server holds, in the store's terms (written here, not with the project's own converters)."""
    issues = {o["number"]: (o["title"], o["body"], o["state"], sorted(lab["name"] for lab in o["labels"]),
                            o["user"]["login"], _utc(o["created_at"]), _utc(o["updated_at"]),
                            _utc(o["closed_at"]), o["comments"], "pull_request" in o, o["html_url"])
              for o in server.issues(repo)}
    comments = {c["id"]: (int(c["issue_url"].rsplit("/", 1)[1]), c["body"], c["user"]["login"],
                          _utc(c["created_at"]), _utc(c["updated_at"]))
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


@pytest.fixture
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


@pytest.fixture
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


# A small real database, labeled once per session (classifier and triage tests).


def _corpus_records(per_repo: int, max_body: int) -> list[dict]:
    """The first `per_repo` issues of each corpus file whose body is at most `max_body` characters."""
    out = []
    for name in ("vllm.jsonl.gz", "sglang.jsonl.gz", "llama_cpp.jsonl.gz"):
        n = 0
        with gzip.open(corpus_file(name), "rt", encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if len(r["body"] or "") <= max_body:
                    out.append(r)
                    n += 1
                    if n >= per_repo:
                        break
    return out



def _shortest_unsure(n: int):
    """The `n` shortest snapshot issues whose class the shipped model gives below its abstain threshold by a
    margin (0.05: more than the numpy port and sentence-transformers ever differ), read with the package's shipped
    vectors (nothing is embedded). Few are: the snapshot's issues are mostly plain `none`, and on the labeled ones
    the model's nearest labeled issue is the issue itself (a handful of the 3,631)."""
    from retriage.classifier.dataset import Example, snapshot_index
    from retriage.classifier.evaluation import cached_embedder
    from retriage.classifier.features import views
    from retriage.classifier.model import IssueClassifier

    model = IssueClassifier.load()
    pool = sorted(((k, r) for k, r in snapshot_index().items() if not r.get("pull_request")),
                  key=lambda kr: (len(kr[1].get("body") or ""), kr[0]))
    v = [views(r.get("title"), r.get("body")) for _, r in pool]
    preds = model.predict(v, cached_embedder(None)(v))
    return [Example(k[0], k[1], r.get("html_url", ""), r.get("title") or "", r.get("body") or "", "none", "other",
                    "none") for (k, r), p in zip(pool, preds) if p.re_confidence < model.threshold - 0.05][:n]


@pytest.fixture(scope="session")
def labeled_db(tmp_path_factory):
    """A DuckDB holding a slice of real corpus issues, labeled by `retriage label --exact` (sentence-transformers).

    The slice: 35 short issues per engine, the six shortest issues the team labeled with a known fix, the three
    shortest snapshot issues the shipped model abstains on (short issues rarely leave it unsure, and the predict
    contract needs some), and one real issue re-shaped as a GitHub API pull request (the corpus holds none) that must stay
    unlabeled."""
    from retriage.classifier.dataset import load_gold, snapshot_index
    from retriage.taxonomy import canonical_repo

    folder = tmp_path_factory.mktemp("labeled")
    records = _corpus_records(per_repo=35, max_body=500)
    keys = {(canonical_repo(r["repo"]), r["number"]) for r in records}
    snap = snapshot_index()
    team = sorted((e for e in load_gold() if e.source == "corpus" and e.known_fix != "none"),
                  key=lambda e: (len(e.body), e.repo, e.number))[:6]
    for e in team + _shortest_unsure(3):
        if (e.repo, e.number) not in keys and (e.repo, e.number) in snap:
            records.append(snap[(e.repo, e.number)])
            keys.add((e.repo, e.number))
    donor = next(r for r in _corpus_records(per_repo=45, max_body=500)
                 if (canonical_repo(r["repo"]), r["number"]) not in keys)
    pr = dict(donor, html_url=donor["html_url"].replace("/issues/", "/pull/"),
              pull_request={"url": donor["html_url"].replace("github.com/", "api.github.com/repos/")
                            .replace("/issues/", "/pulls/")})
    records.append(pr)
    slice_file = folder / "slice.jsonl"
    slice_file.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    db = folder / "labeled.duckdb"
    proc = run_cli("import", str(slice_file), db=db)
    assert proc.returncode == 0, proc.stderr
    started = time.perf_counter()
    proc = run_cli("label", "--exact", "--json", db=db)  # the full model: predict is compared with it
    seconds = time.perf_counter() - started
    assert proc.returncode == 0, proc.stderr
    return SimpleNamespace(path=db, records=records, pr=(canonical_repo(pr["repo"]), pr["number"]),
                         team=[(e.repo, e.number, e.known_fix) for e in team],
                         first_run=json.loads(proc.stdout), first_run_stderr=proc.stderr, seconds=seconds)
