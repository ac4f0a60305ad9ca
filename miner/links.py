"""Pull requests that say they fix an issue: GitHub's closing keywords in a PR body.

`fixes #12`, `Closes: owner/name#12`, `resolved https://github.com/owner/name/issues/12` (close, closes, closed,
fix, fixes, fixed, resolve, resolves, resolved; any case; one keyword per reference, as GitHub reads them).
A mention without a keyword ("see #12") is not a fix.
"""

from __future__ import annotations

import re

import duckdb

from retriage.db import writes
from retriage.taxonomy import canonical_repo

_KEYWORD = r"(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)"
_NAME = r"[\w.-]+/[\w.-]+"
_FIX_RE = re.compile(
    rf"(?<![\w/-]){_KEYWORD}:?\s+(?:"
    rf"https?://(?:www\.)?github\.com/(?P<url_repo>{_NAME})/issues/(?P<url_num>\d+)(?!\d)"
    rf"|(?P<ref_repo>{_NAME})?#(?P<ref_num>\d+)(?![\w#-])"
    rf")",
    re.IGNORECASE,
)


def fixed_issues(body: str | None, repo: str) -> list[tuple[str, int]]:
    """(issue_repo, number) for each issue the text says it fixes, in order, without repeats."""
    out: list[tuple[str, int]] = []
    for m in _FIX_RE.finditer(body or ""):
        other = m.group("url_repo") or m.group("ref_repo")
        ref = (canonical_repo(other) if other else repo, int(m.group("url_num") or m.group("ref_num")))
        if ref not in out:
            out.append(ref)
    return out


def pr_links(rows: list[dict]) -> list[tuple[str, int, str, int]]:
    """(repo, pr_number, issue_repo, issue_number) for the pull requests among issue rows."""
    links = []
    for row in rows:
        if row["is_pull_request"]:
            for issue_repo, number in fixed_issues(row["body"], row["repo"]):
                if (issue_repo, number) != (row["repo"], row["number"]):
                    links.append((row["repo"], row["number"], issue_repo, number))
    return links


def store_pr_links(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> int:
    """Replace the links of the pull requests among `rows` (a PR body may have been edited), inside the caller's
    transaction with the page they came from. Returns how many links are new."""
    prs: dict[str, list[int]] = {}
    for row in rows:
        if row["is_pull_request"]:
            prs.setdefault(row["repo"], []).append(row["number"])
    return writes.replace_pr_links(con, prs, pr_links(rows))
