"""GitHub REST issue and comment objects -> rows of the store.

Accepts the API's shape (labels as objects, `user.login`, a `pull_request` key, `repository_url`) and the
corpus shape (labels as names, a `repo` field). Raises RecordError with a short reason on a wrong shape.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from retriage.taxonomy import canonical_repo

_URL_REPO_RE = re.compile(r"github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull)/(\d+)")
_API_REPO_RE = re.compile(r"/repos/([\w.-]+/[\w.-]+?)(?:/|$)")

# The columns of the issues and comments tables (db/migrations), with their DuckDB types: stated once here.
ISSUE_TYPES = {
    "repo": "TEXT", "number": "INTEGER", "title": "TEXT", "body": "TEXT", "state": "TEXT", "labels": "TEXT[]",
    "author": "TEXT", "author_association": "TEXT", "created_at": "TIMESTAMP", "updated_at": "TIMESTAMP",
    "closed_at": "TIMESTAMP", "comments": "INTEGER", "is_pull_request": "BOOLEAN", "html_url": "TEXT",
}
COMMENT_TYPES = {
    "repo": "TEXT", "issue_number": "INTEGER", "id": "BIGINT", "author": "TEXT", "body": "TEXT",
    "created_at": "TIMESTAMP", "updated_at": "TIMESTAMP", "html_url": "TEXT",
}
ISSUE_COLUMNS = tuple(ISSUE_TYPES)
COMMENT_COLUMNS = tuple(COMMENT_TYPES)


INT_MAX = 2**31 - 1  # the store's INTEGER columns (issue numbers, comment counts)
BIGINT_MAX = 2**63 - 1


class RecordError(ValueError):
    pass


def parse_time(value: Any, field: str) -> datetime | None:
    """ISO-8601 (with Z or an offset) -> naive UTC datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise RecordError(f"{field} is not an ISO-8601 time: {value[:40]!r}") from None
    else:
        raise RecordError(f"{field} is not a time: {type(value).__name__}")
    if dt.tzinfo is not None:
        try:
            dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
        except OverflowError:
            raise RecordError(f"{field} lies outside the years 1-9999 in UTC: {str(value)[:40]!r}") from None
    return dt


def repo_of(obj: dict) -> str | None:
    repo = obj.get("repo")
    if isinstance(repo, str) and "/" in repo:
        return canonical_repo(text_field(repo, "repo"))
    for key in ("html_url", "url"):
        m = _URL_REPO_RE.search(str(obj.get(key) or ""))
        if m:
            return canonical_repo(m.group(1))
    for key in ("repository_url", "url"):
        m = _API_REPO_RE.search(str(obj.get(key) or ""))
        if m:
            return canonical_repo(m.group(1))
    return None


def _label_names(labels: Any) -> list[str]:
    if labels is None:
        return []
    if not isinstance(labels, list):
        raise RecordError("labels is not a list")
    out = []
    for lab in labels:
        if isinstance(lab, str):
            out.append(text_field(lab, "a label"))
        elif isinstance(lab, dict) and isinstance(lab.get("name"), str):
            out.append(text_field(lab["name"], "a label"))
        else:
            raise RecordError("a label is neither a name nor an object with a name")
    return out


def _login(user: Any) -> str | None:
    if isinstance(user, dict):
        return text_field(user.get("login"), "user.login")
    if isinstance(user, str):
        return text_field(user, "user")
    if user is not None:
        raise RecordError(f"user/author is neither a login nor an object with a login: {str(user)[:40]!r}")
    return None


def _int(value: Any, field: str, required: bool = False, low: int = 0, high: int = INT_MAX) -> int | None:
    """An integer from low to high, from a JSON number or a string of ASCII digits (never "²" or "٣")."""
    if value is None:
        if required:
            raise RecordError(f"missing {field}")
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        value = int(value)
    elif isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"{field} is not an integer: {str(value)[:40]!r}")
    if not low <= value <= high:
        shown = str(value) if value.bit_length() < 128 else f"a {len(str(abs(value)))}-digit number"
        raise RecordError(f"{field} must be from {low} to {high:,}, got {shown}")
    return value


def issue_number(value: Any, field: str = "number") -> int:
    """An issue or pull-request number: 1 to 2**31-1 (GitHub's numbers are far below)."""
    return _int(value, field, required=True, low=1)


def text_field(value: Any, field: str) -> str | None:
    """A string the store can hold: not another JSON type, and no lone UTF-16 surrogate ("\\ud800")."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecordError(f"{field} is not text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise RecordError(f"{field} holds a lone surrogate ({value[e.start]!r} at character {e.start}), "
                          "which is not text") from None
    return value


def issue_row(obj: Any, default_repo: str | None = None) -> dict:
    """One issue or pull request object -> a row dict with ISSUE_COLUMNS."""
    if not isinstance(obj, dict):
        raise RecordError(f"expected an issue object, got {type(obj).__name__}")
    number = issue_number(obj.get("number"))
    repo = repo_of(obj) or default_repo
    if not repo:
        raise RecordError("cannot tell the repository (no repo, html_url or repository_url)")
    comments = obj.get("comments")
    if isinstance(comments, list):  # some dumps inline the comment objects
        comments = len(comments)
    state = text_field(obj.get("state"), "state")
    if state in ("OPEN", "CLOSED", "MERGED"):  # gh's `issue view --json` / `issue list --json` spelling
        state = "closed" if state == "MERGED" else state.lower()
    if state is not None and state not in ("open", "closed"):
        raise RecordError(f"state must be open or closed, got {state[:20]!r}")
    html_url = (text_field(obj.get("html_url"), "html_url") or _gh_url(obj)
                or f"https://github.com/{repo}/issues/{number}")
    return {
        "repo": repo,
        "number": number,
        "title": text_field(obj.get("title"), "title"),
        "body": text_field(obj.get("body"), "body"),
        "state": state,
        "labels": _label_names(obj.get("labels")),
        "author": _login(obj.get("user")) or _login(obj.get("author")),
        "author_association": text_field(obj.get("author_association"), "author_association"),
        "created_at": parse_time(obj.get("created_at", obj.get("createdAt")), "created_at"),
        "updated_at": parse_time(obj.get("updated_at", obj.get("updatedAt")), "updated_at"),
        "closed_at": parse_time(obj.get("closed_at", obj.get("closedAt")), "closed_at"),
        "comments": _int(comments, "comments"),
        "is_pull_request": bool(obj.get("pull_request")) or "/pull/" in html_url,
        "html_url": html_url,
    }


def _gh_url(obj: dict) -> str | None:
    """gh's `url` is the issue's web address (the API's `url` is not)."""
    url = obj.get("url")
    return url if isinstance(url, str) and url.startswith("https://github.com/") else None


_GH_COMMENT_RE = re.compile(r"#issuecomment-(\d+)$")


def gh_comment_rows(obj: dict, repo: str, number: int) -> list[dict]:
    """The comments gh's `issue view --json comments` inlines ({body, author {login}, createdAt, url}); their id
    is in the url (#issuecomment-ID). Comments of other shapes are only counted."""
    out = []
    for c in obj.get("comments") if isinstance(obj.get("comments"), list) else []:
        m = _GH_COMMENT_RE.search(str(c.get("url") or "")) if isinstance(c, dict) else None
        if m:
            out.append({"repo": repo, "issue_number": number, "id": _int(m.group(1), "comment id", required=True, high=BIGINT_MAX),
                        "author": _login(c.get("author")) or _login(c.get("user")),
                        "body": text_field(c.get("body"), "comment body"),
                        "created_at": parse_time(c.get("createdAt", c.get("created_at")), "comment createdAt"),
                        "updated_at": parse_time(c.get("updatedAt", c.get("updated_at")), "comment updatedAt"),
                        "html_url": c["url"]})
    return out


def comment_row(obj: Any, repo: str) -> dict:
    """One issue comment object (from /repos/O/R/issues/comments) -> a row dict with COMMENT_COLUMNS."""
    if not isinstance(obj, dict):
        raise RecordError(f"expected a comment object, got {type(obj).__name__}")
    cid = _int(obj.get("id"), "id", required=True, high=BIGINT_MAX)
    issue_url = str(obj.get("issue_url") or "")
    m = re.search(r"/issues/(\d+)$", issue_url)
    if m:
        issue_number = int(m.group(1))
    else:
        issue_number = _int(obj.get("issue_number"), "issue_number", required=True, low=1)
    return {
        "repo": repo,
        "issue_number": issue_number,
        "id": cid,
        "author": _login(obj.get("user")),
        "body": text_field(obj.get("body"), "body"),
        "created_at": parse_time(obj.get("created_at"), "created_at"),
        "updated_at": parse_time(obj.get("updated_at"), "updated_at"),
        "html_url": text_field(obj.get("html_url"), "html_url"),
    }
