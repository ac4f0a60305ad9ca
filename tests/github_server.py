"""A GitHub REST API server for tests and the benchmark: real HTTP on 127.0.0.1, standard library only.

It serves the records of `../shared/corpus/*.jsonl.gz` the way api.github.com does:

  GET /repos/O/R                      the repository
  GET /repos/O/R/issues               state, sort, direction, since, per_page; cursor `after` links; page=N
  GET /repos/O/R/issues/N             one issue or pull request
  GET /repos/O/R/issues/N/comments    the comments of one issue
  GET /repos/O/R/issues/N/events      the events of one issue: labeled/unlabeled (derived from its labels, plus
                                      `label_issue`/`unlabel_issue` and label changes by `edit_issue`), closed;
                                      per_page, page links. Event ids grow with their time, as on GitHub.
  GET /repos/O/R/issues/events        every issue's (and pull request's) events, newest first, each with its
                                      `issue`; per_page, `after` cursor links (page=N with page_links)
  GET /repos/O/R/issues/comments      all comments of the repository: since, sort, direction, per_page
  GET /repos/O/R/issues/comments/ID   one comment
  GET /rate_limit

with weak ETags and 304 on If-None-Match, `x-ratelimit-*` headers, Bad credentials for a wrong token, and
GitHub's quirks that a client must get right: `since` of 1970-01-01 answers an empty list, `page=N` beyond
`page_cap` answers 422 (cursor links keep working), per_page is capped.

The corpus has neither `updated_at` nor comment texts, so both are derived deterministically from each record
(a hash of repo and number): comments spread between creation and closing, some edited, a "triage sweep" that
gives a group of issues the same `updated_at` (ties across page boundaries), and about one record in six turned
into a pull request whose body says which issue it fixes (`expected_links()` is the truth for those).

Tests change the data between runs (`edit_issue`, `add_issue`, `add_comment`, `edit_comment`, `label_issue`,
`unlabel_issue`; every change
moves a server clock that starts after the newest record) or during one (`after_request(n, fn)` calls fn once
the n-th request is answered), read the request log (`log`), and inject faults (`inject`): a primary rate limit
(403, remaining 0, reset a moment ahead), a secondary one (403), 429 with retry-after (seconds or an HTTP date),
502, a connection reset, a truncated JSON body, a body shorter than its Content-Length, an answer trickled a
byte every `interval` seconds, a `next` link back to the page itself (loop), a `next` link that is a new URL every
time but serves the same page again (drift: a listing that never ends and never repeats a URL), the rate-limit
headers sent twice ("4000, 0") and a `next` link whose path holds the token the client sent (echo_token).

`page_links=True` makes `next` links page offsets (`page=N`, as api.github.com gives for issue listings), which
shift when an item listed earlier is edited; by default they are `after` cursors, which do not.

Run `python tests/github_server.py --latency 0.003` to serve the whole corpus; it prints the base URL, then a JSON
line with the number of issues and comments per repository.

What the bot (`retriage comment --post --label`) needs, besides:

  GET    /user                              the token's user (the bot, a "Bot" account)
  GET    /repos/O/R/labels                  the repository's labels: every label on its issues, plus `set_labels`
  GET    /repos/O/R/issues/N/timeline       cross-referenced events: each pull request whose body mentions #N
  POST   /repos/O/R/issues/N/comments       {"body"} -> 201, a comment by the bot
  PATCH  /repos/O/R/issues/comments/ID      {"body"} -> 200
  DELETE /repos/O/R/issues/comments/ID      -> 204
  POST   /repos/O/R/issues/N/labels         {"labels": [...]} -> 200; like GitHub, a missing label is created
  PATCH  /repos/O/R/issues/N                {"state", "locked", ...} -> 200 (recorded: the bot must never send it)

Writes need the token (401 otherwise); a comment body over 65,536 characters answers 422 as GitHub does. Every
write is recorded in `writes` (method, path, JSON body, status) for tests to assert. `put_issue` adds an issue
with a given number, to a repository the corpus does not have if need be (TensorRT-LLM records).
"""

from __future__ import annotations

import argparse
import base64
import bisect
import functools
import gzip
import hashlib
import io
import itertools
import json
import math
import re
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
if not CORPUS.is_dir():  # no ../shared beside the checkout: the identical copy bundled in the package
    CORPUS = Path(__file__).resolve().parents[1] / "retriage" / "data" / "snapshot"
CORPUS_FILES = {"vllm-project/vllm": "vllm", "sgl-project/sglang": "sglang", "ggml-org/llama.cpp": "llama_cpp"}
FORMER_NAMES = {"ggml-org/llama.cpp": "ggerganov/llama.cpp"}
EPOCH0 = "1970-01-01T00:00:00Z"
FAULT_KINDS = ("ratelimit", "secondary", "429", "502", "reset", "truncated", "short_read", "trickle", "loop",
               "drift", "dup_header", "echo_token", "forbidden_echo")
_PHRASES = (
    "Thanks for the report, I can reproduce this.", "Which version are you running?",
    "Still happens on the latest main.", "Could you share the full stack trace?",
    "This looks like a duplicate of an older issue.", "A fix is in progress.",
    "Setting a smaller batch size works around it for me.", "Closing as resolved, please reopen if needed.",
)
_FIX_WORDS = ("Fixes", "closes", "Resolves", "fixed", "Close")


def _h(*parts) -> int:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big")


def _iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(value: str) -> datetime:
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


@functools.lru_cache(maxsize=None)
def _corpus_records(path: Path) -> tuple[dict, ...]:
    """The records of one corpus file, by number (read once per process; RepoData never changes them)."""
    with gzip.open(path, "rt") as f:
        records = [json.loads(line) for line in f if line.strip()]
    return tuple(sorted(records, key=lambda r: int(r["number"])))


@dataclass
class Fault:
    kind: str
    path: str = ""          # only requests whose path contains this
    skip: int = 0           # let this many matching requests through first
    times: int = 1          # then fail this many
    reset_in: float = 1.5   # ratelimit: seconds until x-ratelimit-reset
    retry_after: int | str = 1  # 429: seconds, or an HTTP date
    interval: float = 2.0   # trickle: seconds between the bytes of the answer
    echo: str = "plain"     # forbidden_echo: the Authorization header as sent, "base64" or "upper"


class RepoData:
    """The records of one repository in API shape, with derived updated_at, comments and pull requests."""

    def __init__(self, full_name: str, records: list[dict], api: str, repo_index: int):
        self.full_name = full_name
        self.api = api
        self.issues: dict[int, dict] = {}
        self.comments: dict[int, dict] = {}
        self.links: set[tuple[str, int, str, int]] = set()
        self.label_log: dict[int, list[dict]] = {}  # events added by label_issue / unlabel_issue / edit_issue
        self.first_labels: dict[int, list[str]] = {}  # the labels of each record as read: its first events
        records = sorted(records, key=lambda r: int(r["number"]))
        numbers = [int(r["number"]) for r in records]
        pr_numbers = {n for i, n in enumerate(numbers) if i >= 3 and _h(full_name, n, "pr") % 6 == 0}
        plain = [n for n in numbers if n not in pr_numbers]
        pending_comments = []
        for r in records:
            issue, comments = self._derive(r, pr_numbers, plain)
            self.issues[issue["number"]] = issue
            self.first_labels[issue["number"]] = [lab["name"] for lab in issue["labels"]]
            pending_comments.extend(comments)
        pending_comments.sort(key=lambda c: (c["created_at"], c["_issue"], c["_k"]))
        for i, c in enumerate(pending_comments):  # ids grow with creation time, as on GitHub
            cid = (repo_index + 1) * 10**9 + i + 1
            number = c.pop("_issue")
            c.pop("_k")
            c.update(self._comment_urls(number, cid))
            self.comments[cid] = c

    def _comment_urls(self, number: int, cid: int) -> dict:
        return {
            "id": cid, "node_id": f"IC_{cid}",
            "url": f"{self.api}/repos/{self.full_name}/issues/comments/{cid}",
            "html_url": f"https://github.com/{self.full_name}/issues/{number}#issuecomment-{cid}",
            "issue_url": f"{self.api}/repos/{self.full_name}/issues/{number}",
        }

    def _derive(self, r: dict, pr_numbers: set[int], plain: list[int]) -> tuple[dict, list[dict]]:
        repo, number = self.full_name, int(r["number"])
        h = _h(repo, number)
        created = _parse(r["created_at"])
        closed = _parse(r["closed_at"]) if r.get("closed_at") else None
        n_comments = int(r.get("comments") or 0)
        span = max((closed - created) if closed else timedelta(days=14), timedelta(hours=1))
        comments, last = [], created
        for k in range(n_comments):
            c_created = created + span * (k + 1) / (n_comments + 1) + timedelta(seconds=_h(repo, number, k) % 600)
            c_updated = c_created + timedelta(seconds=_h(repo, number, k, "e") % 86400) \
                if _h(repo, number, k, "edited") % 10 == 0 else c_created
            last = max(last, c_updated)
            comments.append({
                "_issue": number, "_k": k,
                "user": self._user(_h(repo, number, k, "u")),
                "created_at": _iso(c_created), "updated_at": _iso(c_updated),
                "author_association": "CONTRIBUTOR" if k % 3 else "MEMBER",
                "body": f"{_PHRASES[_h(repo, number, k, 'p') % len(_PHRASES)]} (comment {k + 1} of "
                        f"{n_comments} on #{number})",
            })
        updated = max(closed or created, last) + timedelta(seconds=h % 7200)
        sweep = datetime(2025, 3, 3, 12, 0, 0, tzinfo=timezone.utc)  # a bulk relabel: many equal updated_at
        if h % 23 == 0 and created < sweep and updated < sweep:
            updated = sweep
        labels = r.get("labels") or []
        issue = {
            "url": f"{self.api}/repos/{repo}/issues/{number}",
            "repository_url": f"{self.api}/repos/{repo}",
            "comments_url": f"{self.api}/repos/{repo}/issues/{number}/comments",
            "html_url": f"https://github.com/{repo}/issues/{number}",
            "id": 5 * 10**8 + _h(repo, number, "id") % 10**8, "node_id": f"I_{h % 10**10}",
            "number": number, "title": r.get("title"),
            "user": self._user(h),
            "labels": [{"id": _h(repo, lab) % 10**9, "name": lab, "color": "ededed", "default": False}
                       for lab in labels],
            "state": r.get("state"), "locked": False, "assignee": None, "assignees": [],
            "comments": n_comments, "created_at": _iso(created), "updated_at": _iso(updated),
            "closed_at": _iso(closed) if closed else None,
            "author_association": r.get("author_association"),
            "reactions": r.get("reactions") if isinstance(r.get("reactions"), dict) else None,
            "body": r.get("body"),
        }
        if number in pr_numbers:
            earlier = [n for n in plain if n < number]
            self._make_pull_request(issue, earlier)
        return issue, comments

    def events(self, issue: dict) -> list[dict]:
        """The issue's events: one `labeled` per label its record carries (a bot or a maintainer), for one issue in
        four a `needs-triage` label added at creation and removed an hour later, `closed` if closed, then the log
        (label changes since)."""
        repo, number, created = self.full_name, issue["number"], _parse(issue["created_at"])

        def event(kind: str, at: datetime, actor: dict, label: str | None, k: int) -> dict:
            ev = {"id": _event_id(at, _h(repo, number, kind, label, k)), "event": kind, "actor": actor,
                  "created_at": _iso(at)}
            return {**ev, "label": {"name": label, "color": "ededed"}} if label else ev
        out = []
        if _h(repo, number, "triage") % 4 == 0:
            out += [event("labeled", created, {"login": "triage-bot[bot]", "type": "Bot"}, "needs-triage", 0),
                    event("unlabeled", created + timedelta(hours=1), self._user(_h(repo, "m")), "needs-triage", 1)]
        for k, name in enumerate(self.first_labels.get(number, ())):
            at = created + timedelta(seconds=60 + _h(repo, number, name) % 3600)
            out.append(event("labeled", at, self._user(_h(repo, "m", k % 2)), name, k + 2))
        if issue.get("closed_at"):
            out.append(event("closed", _parse(issue["closed_at"]), self._user(_h(repo, "m")), None, 99))
        return out + self.label_log.get(number, [])

    def all_events(self) -> list[dict]:
        """Every event of every issue and pull request, each with the `issue` it belongs to (as GitHub gives
        them from /repos/O/R/issues/events)."""
        out = []
        for issue in self.issues.values():
            about = {k: issue[k] for k in ("url", "html_url", "number", "title", "state") if k in issue}
            if "pull_request" in issue:
                about["pull_request"] = {"url": issue["pull_request"]["url"]}
            out += [{**e, "issue": about} for e in self.events(issue)]
        return out

    def log_label(self, number: int, name: str, action: str, actor: str, now: str) -> dict:
        """A label event of `actor` at `now` in the log (label_issue, edit_issue)."""
        seq = sum(map(len, self.label_log.values()))
        event = {"id": _event_id(_parse(now), seq), "event": action, "label": {"name": name, "color": "ededed"},
                 "actor": {"login": actor, "type": "User"}, "created_at": now}
        self.label_log.setdefault(number, []).append(event)
        return event

    def _make_pull_request(self, issue: dict, candidates: list[int]) -> None:
        """Turn a record into a pull request whose body references an earlier issue in one of GitHub's forms."""
        repo, number = self.full_name, issue["number"]
        target = candidates[_h(repo, number, "target") % len(candidates)]
        word = _FIX_WORDS[_h(repo, number, "w") % len(_FIX_WORDS)]
        variant = _h(repo, number, "variant") % 6
        if variant == 0:
            body, fixes = f"{word} #{target}\n\nAdds a guard for the failing case.", [target]
        elif variant == 1:
            body, fixes = f"{word} {FORMER_NAMES.get(repo, repo)}#{target}", [target]
        elif variant == 2:
            body, fixes = f"{word}: https://github.com/{repo}/issues/{target}\n", [target]
        elif variant == 3:
            other = candidates[_h(repo, number, "second") % len(candidates)]
            body, fixes = f"This PR {word.lower()} #{target} and resolves #{other}.", [target, other]
        elif variant == 4:
            body, fixes = f"Refactor only. Related to #{target}, see also #{target}#discussion.", []
        else:
            body, fixes = f"Improve docs (mentions issue {target} without a reference).", []
        issue["body"] = body
        issue["html_url"] = f"https://github.com/{repo}/pull/{number}"
        issue["pull_request"] = {
            "url": f"{self.api}/repos/{repo}/pulls/{number}",
            "html_url": f"https://github.com/{repo}/pull/{number}",
            "diff_url": f"https://github.com/{repo}/pull/{number}.diff",
            "patch_url": f"https://github.com/{repo}/pull/{number}.patch",
            "merged_at": issue["closed_at"],
        }
        self.links |= {(repo, number, repo, n) for n in fixes}

    @staticmethod
    def _user(h: int) -> dict:
        login = f"user{h % 4000}"
        return {"login": login, "id": 10**6 + h % 4000, "type": "User",
                "html_url": f"https://github.com/{login}"}

    def repo_object(self) -> dict:
        owner, name = self.full_name.split("/")
        return {
            "id": _h(self.full_name) % 10**9, "name": name, "full_name": self.full_name,
            "owner": {"login": owner, "type": "Organization"}, "private": False,
            "html_url": f"https://github.com/{self.full_name}", "url": f"{self.api}/repos/{self.full_name}",
            "has_issues": True,
            "open_issues_count": sum(1 for i in self.issues.values() if i["state"] == "open"),
        }


def _event_id(at: datetime, h: int) -> int:
    """An event id that grows with the event's time (GitHub's do): the second, then a few spare digits."""
    return int(at.timestamp()) * 1000 + h % 1000


def _sort_key(sort_field: str):
    return lambda o: (o[sort_field], o.get("number") or o["id"])


def _listing(items: list[dict], keys: list[tuple], match, descending: bool, params: dict, per_page: int,
             page_cap: int) -> tuple[list[dict] | None, tuple | None, int | None]:
    """One page of `items` (sorted; `keys` are their sort keys) that `match` accepts, after an opaque cursor
    (`after`) or by page number. -> (the page, or None past page_cap; the key of its last item if more follow;
    the number of pages, counted for page-number requests only)."""
    after = params.get("after")
    pages = None
    if after:
        mark = tuple(json.loads(base64.urlsafe_b64decode(after.encode()).decode()))
        start = next((i for i, k in enumerate(keys) if k < mark), len(keys)) if descending \
            else bisect.bisect_right(keys, mark)
        skip = 0
    else:
        page = int(params.get("page") or 1)
        if page > page_cap:
            return None, None, None
        start, skip = 0, (page - 1) * per_page
        pages = max(1, math.ceil(sum(1 for o in items if match(o)) / per_page))
    found = (i for i in range(start, len(items)) if match(items[i]))
    positions = list(itertools.islice(found, skip, skip + per_page + 1))
    more = len(positions) > per_page
    positions = positions[:per_page]
    return [items[i] for i in positions], (keys[positions[-1]] if more else None), pages


class GitHubServer:
    """Serve corpus records over HTTP on 127.0.0.1 with GitHub's listing, caching and rate-limit behaviour."""

    def __init__(self, repos: list[str] | None = None, limit_per_repo: int | None = None,
                 token: str | None = None, max_per_page: int = 100, page_cap: int = 100,
                 latency: float = 0.0, rate_limit: int = 5000, anonymous_rate_limit: int = 60,
                 since_inclusive: bool = True, corpus: Path = CORPUS, page_links: bool = False):
        self.token = token
        self.page_links = page_links
        self._hooks: list[tuple[int, object]] = []
        self._answered = 0
        self.max_per_page = max_per_page
        self.page_cap = page_cap
        self.latency = latency
        self.rate_limit = rate_limit
        self.anonymous_rate_limit = anonymous_rate_limit
        self.since_inclusive = since_inclusive  # GitHub documents `since` as "updated after": test both readings
        self._lock = threading.RLock()
        self._faults: list[Fault] = []
        self._drift = itertools.count(1)  # the drift fault's ever-new `next` links
        self._version = 0  # moves with every change; the listing-order cache follows it
        self._sort_cache: dict[tuple, tuple] = {}
        self._events_cache: dict[str, tuple] = {}
        self._used = {True: 0, False: 0}
        self._window_reset = int(time.time()) + 3600
        self.log: list[dict] = []
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.github = self  # type: ignore[attr-defined]
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._thread: threading.Thread | None = None
        self.data: dict[str, RepoData] = {}
        for i, full_name in enumerate(repos or list(CORPUS_FILES)):
            records = _corpus_records(corpus / f"{CORPUS_FILES[full_name]}.jsonl.gz")
            if limit_per_repo:
                records = records[:limit_per_repo]
            self.data[full_name] = RepoData(full_name, records, self.base_url, i)
        newest = max((o["updated_at"] for d in self.data.values() for o in [*d.issues.values(),
                      *d.comments.values()]), default="2025-01-01T00:00:00Z")
        self._clock = _parse(newest) + timedelta(days=1)
        self._init_writes()

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> "GitHubServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> "GitHubServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- what the server holds ---------------------------------------------------------------------------------
    def issues(self, repo: str) -> list[dict]:
        with self._lock:
            return [dict(o) for o in self.data[repo].issues.values()]

    def comments(self, repo: str) -> list[dict]:
        with self._lock:
            return [dict(o) for o in self.data[repo].comments.values()]

    def expected_links(self, repo: str) -> set[tuple[str, int, str, int]]:
        """(repo, pr_number, issue_repo, issue_number) for every fix reference the server wrote into a PR."""
        with self._lock:
            return set(self.data[repo].links)

    def after_request(self, n: int, fn) -> None:
        """Call fn() once the n-th request from now has been answered (to change data in the middle of a sync)."""
        with self._lock:
            self._hooks.append((self._answered + n, fn))

    def _answered_one(self) -> None:
        with self._lock:
            self._answered += 1
            due = [fn for n, fn in self._hooks if n == self._answered]
            self._hooks = [(n, fn) for n, fn in self._hooks if n > self._answered]
        for fn in due:
            fn()

    def clear_log(self) -> None:
        with self._lock:
            self.log.clear()

    # -- changes between runs ----------------------------------------------------------------------------------
    def tick(self) -> str:
        with self._lock:
            self._version += 1
            self._clock += timedelta(seconds=61)
            return _iso(self._clock)

    def edit_issue(self, repo: str, number: int, **fields) -> dict:
        with self._lock:
            issue = self.data[repo].issues[number]
            now = self.tick()
            self._log_label_changes(repo, number, fields, now)
            issue.update(fields)
            issue["updated_at"] = now
            if fields.get("state") == "closed":
                issue["closed_at"] = issue["updated_at"]
            return dict(issue)

    def edit_issues(self, repo: str, numbers, **fields) -> str:
        """Edit many issues in one second (a bulk relabel): they all get the same updated_at, which is returned."""
        with self._lock:
            now = self.tick()
            for number in numbers:
                self._log_label_changes(repo, number, fields, now)
                self.data[repo].issues[number].update(fields, updated_at=now)
            return now

    def _log_label_changes(self, repo: str, number: int, fields: dict, now: str) -> None:
        """An edit that sets `labels` adds and removes labels as a maintainer would: events at `now`."""
        if "labels" not in fields:
            return
        d = self.data[repo]
        old = {lab["name"] for lab in d.issues[number]["labels"]}
        new = {lab["name"] for lab in fields["labels"]}
        for name in sorted(new - old):
            d.log_label(number, name, "labeled", "maintainer", now)
        for name in sorted(old - new):
            d.log_label(number, name, "unlabeled", "maintainer", now)

    def add_issue(self, repo: str, title: str, body: str = "", fixes: int | None = None) -> dict:
        """A new issue, or with `fixes` a new pull request saying `Fixes #fixes`."""
        with self._lock:
            d = self.data[repo]
            number = max(d.issues) + 1
            now = self.tick()
            record = {"number": number, "title": title, "body": body, "labels": [], "state": "open",
                      "created_at": now, "closed_at": None, "comments": 0, "author_association": "NONE"}
            issue, _ = d._derive(record, set(), [])
            issue["created_at"] = issue["updated_at"] = now
            if fixes is not None:
                d._make_pull_request(issue, [fixes])
                issue["body"] = f"Fixes #{fixes}"
                d.links = {x for x in d.links if x[1] != number} | {(repo, number, repo, fixes)}
            d.issues[number] = issue
            return dict(issue)

    def add_comment(self, repo: str, number: int, body: str, user: dict | None = None) -> dict:
        """A new comment (by `user`, else a derived one); like GitHub, it moves the issue's updated_at too."""
        with self._lock:
            d = self.data[repo]
            cid = max(d.comments, default=(list(self.data).index(repo) + 1) * 10**9) + 1
            now = self.tick()
            comment = {"user": dict(user) if user else RepoData._user(cid), "created_at": now, "updated_at": now,
                       "author_association": "NONE", "body": body, **d._comment_urls(number, cid)}
            d.comments[cid] = comment
            issue = d.issues[number]
            issue["comments"] += 1
            issue["updated_at"] = now
            return dict(comment)

    def edit_comment(self, repo: str, cid: int, body: str) -> dict:
        with self._lock:
            comment = self.data[repo].comments[cid]
            comment["body"] = body
            comment["updated_at"] = self.tick()
            return dict(comment)

    def label_issue(self, repo: str, number: int, name: str, actor: str = "maintainer",
                    action: str = "labeled") -> dict:
        """Add (or with action="unlabeled" remove) a label as `actor`: an event, and the issue's updated_at moves."""
        with self._lock:
            d = self.data[repo]
            issue = d.issues[number]
            now = self.tick()
            event = d.log_label(number, name, action, actor, now)
            kept = [lab for lab in issue["labels"] if lab["name"] != name]
            issue["labels"] = kept + ([{"id": _h(repo, name) % 10**9, "name": name, "color": "ededed",
                                        "default": False}] if action == "labeled" else [])
            issue["updated_at"] = now
            return dict(event)

    def unlabel_issue(self, repo: str, number: int, name: str, actor: str = "maintainer") -> dict:
        return self.label_issue(repo, number, name, actor, action="unlabeled")

    def label_events(self, repo: str) -> list[tuple[int, int, str, str, str | None, str]]:
        """(number, event_id, label, action, actor, created_at) of every label event of the repository's issues."""
        with self._lock:
            d = self.data[repo]
            return sorted((i["number"], e["id"], e["label"]["name"], e["event"], e["actor"]["login"], e["created_at"])
                          for i in d.issues.values() if "pull_request" not in i
                          for e in d.events(i) if e["event"] in ("labeled", "unlabeled"))

    # -- faults ------------------------------------------------------------------------------------------------
    def inject(self, kind: str, path: str = "", skip: int = 0, times: int = 1, **kw) -> Fault:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {FAULT_KINDS}")
        fault = Fault(kind, path, skip, times, **kw)
        with self._lock:
            self._faults.append(fault)
        return fault

    def _take_fault(self, path: str) -> Fault | None:
        with self._lock:
            for f in self._faults:
                if f.path in path and f.times > 0:
                    if f.skip > 0:
                        f.skip -= 1
                        continue
                    f.times -= 1
                    return f
        return None

    # -- rate limit --------------------------------------------------------------------------------------------
    def _rate_headers(self, authed: bool, count: bool) -> dict[str, str]:
        with self._lock:
            now = time.time()
            if now >= self._window_reset:
                self._window_reset = int(now) + 3600
                self._used = {True: 0, False: 0}
            if count:
                self._used[authed] += 1
            limit = self.rate_limit if authed else self.anonymous_rate_limit
            used = self._used[authed]
            return {"x-ratelimit-limit": str(limit), "x-ratelimit-remaining": str(max(0, limit - used)),
                    "x-ratelimit-reset": str(self._window_reset), "x-ratelimit-used": str(used),
                    "x-ratelimit-resource": "core"}

    # -- routing -----------------------------------------------------------------------------------------------
    def route(self, path: str, params: dict) -> tuple[int, object, dict[str, str]]:
        """-> (status, JSON body, extra headers) for a GET."""
        parts = [p for p in path.split("/") if p]
        if parts == ["rate_limit"]:
            return 200, {"resources": {"core": {}}}, {}
        if parts == ["user"]:
            return 200, dict(self.bot_user), {}
        if len(parts) < 3 or parts[0] != "repos":
            return 404, {"message": "Not Found"}, {}
        full = f"{parts[1]}/{parts[2]}"
        for name, former in FORMER_NAMES.items():
            if full.lower() == former.lower() and name in self.data:
                return 301, {"message": "Moved Permanently"}, {
                    "location": f"{self.base_url}/repos/{name}{path.split(full, 1)[1]}"}
        d = next((v for k, v in self.data.items() if k.lower() == full.lower()), None)
        if d is None:
            return 404, {"message": "Not Found"}, {}
        rest = parts[3:]
        with self._lock:
            if not rest:
                return 200, d.repo_object(), {}
            if rest == ["issues"]:
                return self._list_issues(d, path, params)
            if rest == ["issues", "comments"]:
                return self._list_comments(d.comments.values(), path, params)
            if rest == ["issues", "events"]:
                return self._page(path, self._all_events(d), lambda o: True, "id", params, path, "desc")
            if len(rest) == 3 and rest[:2] == ["issues", "comments"] and rest[2].isdigit():
                c = d.comments.get(int(rest[2]))
                return (200, c, {}) if c else (404, {"message": "Not Found"}, {})
            if len(rest) >= 2 and rest[0] == "issues" and rest[1].isdigit():
                issue = d.issues.get(int(rest[1]))
                if issue is None:
                    return 404, {"message": "Not Found"}, {}
                if len(rest) == 2:
                    return 200, issue, {}
                if rest[2:] == ["comments"]:
                    mine = [c for c in d.comments.values() if c["issue_url"] == issue["url"]]
                    return self._list_comments(mine, path, params)
                if rest[2:] == ["events"]:
                    return self._page(path, d.events(issue), lambda o: True, "created_at", params, path, "asc")
            return self._route_bot_reads(d, rest, path, params)

    def _all_events(self, d: RepoData) -> list[dict]:
        """d.all_events(), made again only after a change on the server."""
        hit = self._events_cache.get(d.full_name)
        if hit is None or hit[0] != self._version:
            hit = self._events_cache[d.full_name] = (self._version, d.all_events())
        return hit[1]

    def _per_page(self, params: dict) -> int:
        return max(1, min(int(params.get("per_page") or 30), 100, self.max_per_page))

    def _since(self, params: dict) -> str | None:
        since = params.get("since")
        return _iso(_parse(since)) if since else None

    def _after(self, obj: dict, since: str | None) -> bool:
        if since is None:
            return True
        return obj["updated_at"] >= since if self.since_inclusive else obj["updated_at"] > since

    def _sorted(self, name: str, objects, sort_field: str, descending: bool) -> tuple[list[dict], list[tuple]]:
        """Objects in listing order with their keys, cached until the next change on the server."""
        cache_key = (name, sort_field, descending)
        hit = self._sort_cache.get(cache_key)
        if hit is None or hit[0] != self._version:
            key = _sort_key(sort_field)
            items = sorted(objects, key=key, reverse=descending)
            hit = self._sort_cache[cache_key] = (self._version, items, [key(o) for o in items])
        return hit[1], hit[2]

    def _page(self, name, objects, match, sort_field, params, path, direction) -> tuple[int, object, dict]:
        descending = params.get("direction", direction) == "desc"
        per_page = self._per_page(params)
        items, keys = self._sorted(name, objects, sort_field, descending)
        chunk, last_key, pages = _listing(items, keys, match, descending, params, per_page, self.page_cap)
        if chunk is None:
            return 422, {"message": "Pagination with the page parameter is not supported for large datasets, "
                                    "please use cursor based pagination (after/before)"}, {}
        base = {k: v for k, v in params.items() if k not in ("page", "after")}
        links = []
        if last_key is not None and self.page_links and "after" not in params:
            page = int(params.get("page") or 1)
            links.append(f'<{self.base_url}{path}?{urlencode({**base, "page": page + 1})}>; rel="next"')
        elif last_key is not None:
            cursor = base64.urlsafe_b64encode(json.dumps(list(last_key)).encode()).decode()
            links.append(f'<{self.base_url}{path}?{urlencode({**base, "after": cursor})}>; rel="next"')
            if pages is not None and pages <= self.page_cap:
                links.append(f'<{self.base_url}{path}?{urlencode({**base, "page": pages})}>; rel="last"')
        return 200, chunk, ({"link": ", ".join(links)} if links else {})

    def _list_issues(self, d: RepoData, path: str, params: dict):
        state = params.get("state", "open")
        sort_field = {"created": "created_at", "updated": "updated_at", "comments": "comments"}.get(
            params.get("sort", "created"))
        if state not in ("open", "closed", "all") or sort_field is None:
            return 422, {"message": "Validation Failed"}, {}
        since = self._since(params)
        if since == EPOCH0:  # GitHub's quirk: the epoch as `since` lists nothing
            return 200, [], {}

        def match(o):
            return (state == "all" or o["state"] == state) and self._after(o, since)
        return self._page(path, d.issues.values(), match, sort_field, params, path, direction="desc")

    def _list_comments(self, objects, path: str, params: dict):
        sort_field = {"created": "created_at", "updated": "updated_at"}.get(params.get("sort", "created"))
        if sort_field is None:
            return 422, {"message": "Validation Failed"}, {}
        since = self._since(params)

        def match(c):
            return self._after(c, since)
        return self._page(path, objects, match, sort_field, params, path, direction="asc")

    # -- the bot's side: labels, timeline, writes (retriage comment --post --label) ----------------------------
    BOT_USER = {"login": "retriage-bot[bot]", "id": 41898282, "type": "Bot",
                "html_url": "https://github.com/apps/retriage-bot"}
    MAX_COMMENT = 65536  # GitHub: "body is too long (maximum is 65536 characters)"

    def _init_writes(self) -> None:
        self.writes: list[dict] = []            # every POST/PATCH/DELETE: method, path, body, status
        self.bot_user = dict(self.BOT_USER)     # whom the token belongs to
        self._extra_labels: dict[str, set[str]] = {}

    def set_labels(self, repo: str, names: list[str]) -> None:
        """Labels the repository has besides those on its issues."""
        with self._lock:
            self._extra_labels.setdefault(repo, set()).update(names)
            self._version += 1

    def repo_labels(self, repo: str) -> list[str]:
        with self._lock:
            return sorted(lab["name"] for lab in self._label_objects(self.data[repo]))

    def bot_comments(self, repo: str, number: int) -> list[dict]:
        """The comments the bot's token wrote on one issue, oldest first."""
        with self._lock:
            d = self.data[repo]
            url = d.issues[number]["url"]
            return [dict(c) for c in sorted(d.comments.values(), key=lambda c: c["id"])
                    if c["issue_url"] == url and c["user"]["login"] == self.bot_user["login"]]

    def put_issue(self, repo: str, record: dict) -> dict:
        """An issue with the record's own number (corpus shape: number, title, body, labels, state, created_at,
        closed_at), in a repository added for it if the server does not hold one yet."""
        with self._lock:
            if repo not in self.data:
                self.data[repo] = RepoData(repo, [], self.base_url, len(self.data))
            d = self.data[repo]
            now = self.tick()
            full = {"labels": [], "state": "open", "created_at": now, "closed_at": None, "comments": 0,
                    "author_association": "NONE", **record}
            issue, comments = d._derive(full, set(), [])
            d.issues[issue["number"]] = issue
            d.first_labels[issue["number"]] = [lab["name"] for lab in issue["labels"]]
            for c in comments:
                cid = max(d.comments, default=(list(self.data).index(repo) + 1) * 10**9) + 1
                del c["_issue"], c["_k"]
                c.update(d._comment_urls(issue["number"], cid))
                d.comments[cid] = c
            return dict(issue)

    def _label_objects(self, d: RepoData) -> list[dict]:
        names: dict[str, str] = {}
        for issue in d.issues.values():
            for lab in issue["labels"]:
                names.setdefault(lab["name"].lower(), lab["name"])
        for name in self._extra_labels.get(d.full_name, ()):
            names.setdefault(name.lower(), name)
        return [{"id": _h(d.full_name, name) % 10**9, "name": name, "color": "ededed", "default": False,
                 "url": f"{self.api_root(d)}/labels/{name}"} for name in sorted(names.values())]

    def api_root(self, d: RepoData) -> str:
        return f"{self.base_url}/repos/{d.full_name}"

    def _route_bot_reads(self, d: RepoData, rest: list[str], path: str, params: dict):
        """GETs beyond the miner's: the repository's labels and an issue's timeline."""
        if rest == ["labels"]:
            return self._page(path, self._label_objects(d), lambda o: True, "name", params, path, direction="asc")
        if len(rest) == 3 and rest[0] == "issues" and rest[1].isdigit() and rest[2] == "timeline":
            issue = d.issues.get(int(rest[1]))
            if issue is None:
                return 404, {"message": "Not Found"}, {}
            n = issue["number"]
            mention = re.compile(rf"(?<![\w/])(?:[\w.-]+/[\w.-]+)?#{n}(?![\d\w])|/issues/{n}(?!\d)")
            events = [{"id": 7 * 10**9 + pr["number"], "event": "cross-referenced", "created_at": pr["created_at"],
                       "updated_at": pr["created_at"], "actor": pr["user"],
                       "source": {"type": "issue", "issue": pr}}
                      for pr in d.issues.values()
                      if "pull_request" in pr and pr["number"] != n and mention.search(pr.get("body") or "")]
            return self._page(path, events, lambda o: True, "created_at", params, path, direction="asc")
        return 404, {"message": "Not Found"}, {}

    def route_write(self, method: str, path: str, payload, authed: bool) -> tuple[int, object]:
        """-> (status, JSON body) for a POST, PATCH or DELETE; recorded in `writes`."""
        status, body = self._write(method, path, payload, authed)
        with self._lock:
            self.writes.append({"method": method, "path": path, "body": payload, "status": status})
        return status, body

    def _write(self, method: str, path: str, payload, authed: bool) -> tuple[int, object]:
        if not authed:
            return 401, {"message": "Requires authentication"}
        parts = [p for p in path.split("/") if p]
        if len(parts) < 5 or parts[0] != "repos" or parts[3] != "issues":
            return 404, {"message": "Not Found"}
        d = next((v for k, v in self.data.items() if k.lower() == f"{parts[1]}/{parts[2]}".lower()), None)
        if d is None:
            return 404, {"message": "Not Found"}
        rest = parts[4:]
        payload = payload if isinstance(payload, dict) else {"labels": payload} if isinstance(payload, list) else {}
        with self._lock:
            if rest[0] == "comments" and len(rest) == 2 and rest[1].isdigit():
                comment = d.comments.get(int(rest[1]))
                if comment is None:
                    return 404, {"message": "Not Found"}
                if method == "DELETE":
                    del d.comments[comment["id"]]
                    issue = d.issues[int(comment["issue_url"].rsplit("/", 1)[1])]
                    issue["comments"] -= 1
                    issue["updated_at"] = self.tick()
                    return 204, None
                if method == "PATCH":
                    problem = self._comment_body_problem(payload)
                    if problem:
                        return 422, {"message": problem}
                    return 200, self.edit_comment(d.full_name, comment["id"], payload["body"])
                return 404, {"message": "Not Found"}
            if not rest[0].isdigit() or int(rest[0]) not in d.issues:
                return 404, {"message": "Not Found"}
            number = int(rest[0])
            if rest[1:] == ["comments"] and method == "POST":
                problem = self._comment_body_problem(payload)
                if problem:
                    return 422, {"message": problem}
                return 201, self.add_comment(d.full_name, number, payload["body"], user=self.bot_user)
            if rest[1:] == ["labels"] and method == "POST":
                names = payload.get("labels")
                if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
                    return 422, {"message": "Validation Failed: labels must be a list of names"}
                existing = {lab["name"].lower(): lab for lab in self._label_objects(d)}
                issue = d.issues[number]
                have = {lab["name"].lower() for lab in issue["labels"]}
                for name in names:  # like GitHub: a label the repository lacks is created
                    lab = existing.get(name.lower())
                    if lab is None:
                        self._extra_labels.setdefault(d.full_name, set()).add(name)
                        lab = {"id": _h(d.full_name, name) % 10**9, "name": name, "color": "ededed",
                               "default": False}
                    if lab["name"].lower() not in have:
                        issue["labels"].append({k: lab[k] for k in ("id", "name", "color", "default")})
                        have.add(lab["name"].lower())
                issue["updated_at"] = self.tick()
                return 200, [dict(lab) for lab in issue["labels"]]
            if not rest[1:] and method == "PATCH":  # close, lock, retitle: answered, and recorded
                return 200, self.edit_issue(d.full_name, number, **{k: v for k, v in payload.items()
                                                                    if k in ("state", "locked", "title", "body")})
        return 404, {"message": "Not Found"}

    def _comment_body_problem(self, payload: dict) -> str | None:
        body = payload.get("body")
        if not isinstance(body, str) or not body:
            return "Validation Failed: body is missing"
        if len(body) > self.MAX_COMMENT:
            return f"Validation Failed: body is too long (maximum is {self.MAX_COMMENT} characters)"
        return None


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionError, socket.timeout)):  # clients killed on purpose
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "github-test-server"

    def setup(self):
        super().setup()  # headers and body go out in two writes: without this, Nagle + delayed ACK add ~40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format, *args):  # quiet
        pass

    def do_GET(self):
        gh: GitHubServer = self.server.github  # type: ignore[attr-defined]
        url = urlsplit(self.path)
        params = {k: v[-1] for k, v in parse_qs(url.query).items()}
        entry = {"t": time.time(), "method": "GET", "path": url.path, "params": params,
                 "auth": "authorization" in {k.lower() for k in self.headers},
                 "if_none_match": self.headers.get("If-None-Match"), "status": None, "fault": None,
                 "items": None}
        with gh._lock:
            gh.log.append(entry)
        if gh.latency:
            time.sleep(gh.latency)
        auth = self.headers.get("Authorization")
        authed = auth is not None
        if auth is not None and (gh.token is None or auth.split(" ", 1)[-1] != gh.token):
            return self._send(entry, 401, {"message": "Bad credentials"}, gh._rate_headers(False, True))
        fault = gh._take_fault(url.path)
        if fault:
            entry["fault"] = fault.kind
            if self._fault(entry, gh, fault, authed):
                return
        rate = gh._rate_headers(authed, count=False)
        if rate["x-ratelimit-remaining"] == "0":
            return self._send(entry, 403, {"message": "API rate limit exceeded for 127.0.0.1."}, rate)
        try:
            status, body, extra = gh.route(url.path, params)
        except (ValueError, KeyError) as e:
            status, body, extra = 422, {"message": f"Validation Failed: {e}"}, {}
        payload = json.dumps(body).encode()
        etag = 'W/"' + hashlib.sha1(payload).hexdigest() + '"'
        if status == 200 and self._matches(etag):
            return self._send(entry, 304, None, {**gh._rate_headers(authed, count=False), "etag": etag})
        if status == 200 and isinstance(body, list):
            entry["items"] = [o.get("number") or o.get("id") for o in body]
        headers = {**gh._rate_headers(authed, count=True), **extra}
        if status == 200:
            headers["etag"] = etag
        twist = getattr(self, "_twist", None)
        self._twist = None
        if twist == "loop" and status == 200:  # the next page is this page, again
            headers["link"] = f'<{gh.base_url}{self.path}>; rel="next"'
        elif twist == "drift" and status == 200:  # this page again, under a URL never given before
            query = urlencode({**params, "drift": next(gh._drift)})
            headers["link"] = f'<{gh.base_url}{url.path}?{query}>; rel="next"'
        elif twist == "echo_token" and status == 200:  # a next link that puts the client's token in a path
            headers["link"] = f'<{gh.base_url}/repos/{auth.split(" ", 1)[-1]}/x/issues?page=2>; rel="next"'
        elif twist == "dup_header":
            self._duplicate = {"x-ratelimit-remaining": "0"}
        self._send(entry, status, payload, headers)

    def _matches(self, etag: str) -> bool:
        sent = self.headers.get("If-None-Match")
        if not sent:
            return False
        strip = lambda t: t.strip().removeprefix("W/")  # noqa: E731 (weak comparison, as GitHub does)
        return any(strip(t) == strip(etag) or t.strip() == "*" for t in sent.split(","))

    def _fault(self, entry: dict, gh: GitHubServer, fault: Fault, authed: bool) -> bool:
        """Answer with the fault; False if it only changes how the normal answer is delivered."""
        rate = gh._rate_headers(authed, count=True)
        if fault.kind == "ratelimit":
            entry["reset"] = math.ceil(time.time() + fault.reset_in)
            rate.update({"x-ratelimit-remaining": "0", "x-ratelimit-used": rate["x-ratelimit-limit"],
                         "x-ratelimit-reset": str(entry["reset"])})
            self._send(entry, 403, {"message": "API rate limit exceeded for user ID 1.",
                                    "documentation_url": "https://docs.github.com/rest/rate-limit"}, rate)
        elif fault.kind == "secondary":
            self._send(entry, 403, {"message": "You have exceeded a secondary rate limit. Please wait a few "
                                               "minutes before you try again."}, rate)
        elif fault.kind == "forbidden_echo":  # a 403 whose message quotes the Authorization header, far in
            sent = self.headers.get("Authorization") or ""
            shown = {"plain": sent, "upper": sent.upper(),
                     "base64": base64.b64encode(sent.encode()).decode()}[fault.echo]
            self._send(entry, 403, {"message": "Forbidden " + "y" * 102 + " " + shown}, rate)
        elif fault.kind == "429":
            self._send(entry, 429, {"message": "You have exceeded a secondary rate limit."},
                       {**rate, "retry-after": str(fault.retry_after)})
        elif fault.kind == "502":
            self._send(entry, 502, b"<html><body><h1>502 Bad Gateway</h1></body></html>",
                       {"content-type": "text/html"})
        elif fault.kind == "reset":
            entry["status"] = "reset"
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
        elif fault.kind == "trickle":
            self._trickle = fault.interval
            return False
        elif fault.kind in ("loop", "drift", "echo_token", "dup_header"):
            self._twist = fault.kind
            return False
        else:  # truncated / short_read: the normal answer, cut
            self._cut = fault.kind
            return False
        return True

    def _send(self, entry: dict, status: int, body, headers: dict[str, str]) -> None:
        try:
            self._send_answer(entry, status, body, headers)
        finally:
            self.server.github._answered_one()  # type: ignore[attr-defined]

    def _send_answer(self, entry: dict, status: int, body, headers: dict[str, str]) -> None:
        payload = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        entry["status"] = status
        trickle = getattr(self, "_trickle", None)
        self._trickle = None
        if trickle:  # the whole answer, status line first, is written here, then sent one byte at a time
            real, self.wfile = self.wfile, io.BytesIO()
        cut = getattr(self, "_cut", None)
        self._cut = None
        length = len(payload)
        if cut and status == 200:
            payload = payload[: len(payload) // 2]
            length = len(payload) if cut == "truncated" else length
        self.send_response(status)
        if status != 304:
            self.send_header("content-type", headers.pop("content-type", "application/json; charset=utf-8"))
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("content-length", str(length if status != 304 else 0))
        if cut == "short_read" and status == 200:
            self.send_header("connection", "close")
            self.close_connection = True
        for k, v in (getattr(self, "_duplicate", None) or {}).items():  # the same header a second time
            self.send_header(k, v)
        self._duplicate = None
        self.end_headers()
        if status != 304:
            self.wfile.write(payload)
        if trickle:
            answer, self.wfile = self.wfile.getvalue(), real
            self.close_connection = True
            for i in range(len(answer)):
                self.wfile.write(answer[i:i + 1])
                self.wfile.flush()
                time.sleep(trickle)

    # -- writes (the bot's comments and labels) ----------------------------------------------------------------
    def do_POST(self):
        self._write_request("POST")

    def do_PATCH(self):
        self._write_request("PATCH")

    def do_DELETE(self):
        self._write_request("DELETE")

    def _write_request(self, method: str) -> None:
        gh: GitHubServer = self.server.github  # type: ignore[attr-defined]
        url = urlsplit(self.path)
        entry = {"t": time.time(), "method": method, "path": url.path, "params": {},
                 "auth": "authorization" in {k.lower() for k in self.headers}, "if_none_match": None,
                 "status": None, "fault": None, "items": None}
        with gh._lock:
            gh.log.append(entry)
        if gh.latency:
            time.sleep(gh.latency)
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            payload = json.loads(raw) if raw else None
        except ValueError:
            return self._send(entry, 400, {"message": "Problems parsing JSON"}, {})
        auth = self.headers.get("Authorization")
        if auth is not None and (gh.token is None or auth.split(" ", 1)[-1] != gh.token):
            return self._send(entry, 401, {"message": "Bad credentials"}, gh._rate_headers(False, True))
        fault = gh._take_fault(url.path)
        if fault:
            entry["fault"] = fault.kind
            if self._fault(entry, gh, fault, auth is not None):
                return
        status, body = gh.route_write(method, url.path, payload, auth is not None)
        self._send(entry, status, body, gh._rate_headers(auth is not None, count=True))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Serve the corpus as the GitHub REST API on 127.0.0.1.")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    ap.add_argument("--token", default=None, help="the token to accept (default: none, anonymous only)")
    ap.add_argument("--rate-limit", type=int, default=5000)
    ap.add_argument("--anonymous-rate-limit", type=int, default=60)
    ap.add_argument("--limit-per-repo", type=int, default=None)
    args = ap.parse_args(argv)
    server = GitHubServer(token=args.token, latency=args.latency, rate_limit=args.rate_limit,
                          anonymous_rate_limit=args.anonymous_rate_limit, limit_per_repo=args.limit_per_repo)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(server.base_url)
    print(json.dumps({repo: {"issues": len(d.issues), "comments": len(d.comments), "events": len(d.all_events())}
                      for repo, d in server.data.items()}), flush=True)
    try:
        server._httpd.serve_forever(poll_interval=0.05)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server._httpd.server_close()


if __name__ == "__main__":
    main()
