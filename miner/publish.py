"""The bot's writes to one issue, and nothing else: its one comment and labels the repository already has.

- Its comment is the one that starts with the hidden marker and was written by the token's own account (GET
  /user; a GitHub Actions token cannot read /user, and its comments come from a Bot account, so then: a Bot
  author). A marker in someone else's comment is ignored. A run creates the comment (POST), updates it when its
  text changed (PATCH), deletes it when there is nothing left to say (DELETE); duplicates left by two runs at
  once are deleted, so one remains.
- Labels: only names the repository has (GET /repos/O/R/labels, compared case-insensitively, sent with the
  repository's spelling); GitHub would create any other name.
Never a close, a lock, an assignment or an edit of anyone else's text. Writes go through GitHubClient.send, which
never repeats a write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from retriage.miner.client import GitHubClient, GitHubError
from retriage.miner.one_issue import all_pages


@dataclass
class Published:
    action: str                       # created | updated | unchanged | deleted | none
    comment_id: int | None = None
    url: str | None = None
    duplicates_removed: int = 0


@dataclass
class Labeled:
    wanted: list[str] = field(default_factory=list)     # from the mapping
    existing: list[str] = field(default_factory=list)   # of those, the ones the repository has (its spelling)
    to_add: list[str] = field(default_factory=list)     # of those, the ones the issue does not carry yet
    sent: bool = False                                  # to_add was sent to GitHub


def own_login(client: GitHubClient) -> str | None:
    try:
        user = client.get("/user").data
    except GitHubError as e:
        if e.status in (403, 404):
            return None
        raise
    return user.get("login") if isinstance(user, dict) else None


def own_comments(client: GitHubClient, repo: str, number: int, marker: str, login: str | None) -> list[dict]:
    """The bot's comments on the issue, oldest first."""
    comments, _ = all_pages(client, f"/repos/{repo}/issues/{number}/comments")

    def ours(c: dict) -> bool:
        user = c.get("user") or {}
        author = user.get("login") == login if login else user.get("type") == "Bot"
        return author and isinstance(c.get("body"), str) and c["body"].startswith(marker)

    return sorted((c for c in comments if isinstance(c, dict) and ours(c)), key=lambda c: c.get("id") or 0)


def publish_comment(client: GitHubClient, repo: str, number: int, body: str | None, marker: str) -> Published:
    """Make the issue carry exactly one comment of the bot, with `body` (None: no comment)."""
    if body is not None and not body.startswith(marker):
        raise ValueError("the comment must start with the marker")
    mine = own_comments(client, repo, number, marker, own_login(client))
    keep = mine[:1] if body is not None else []
    for c in mine[len(keep):]:
        client.send("DELETE", f"/repos/{repo}/issues/comments/{c['id']}")
    if body is None:
        return Published("deleted" if mine else "none")
    removed = len(mine) - len(keep)
    if not keep:
        c = client.send("POST", f"/repos/{repo}/issues/{number}/comments", {"body": body}) or {}
        return Published("created", c.get("id"), c.get("html_url"))
    first = keep[0]
    if first.get("body") == body:
        return Published("unchanged", first["id"], first.get("html_url"), removed)
    c = client.send("PATCH", f"/repos/{repo}/issues/comments/{first['id']}", {"body": body}) or {}
    return Published("updated", first["id"], c.get("html_url") or first.get("html_url"), removed)


def existing_labels(client: GitHubClient, repo: str) -> dict[str, str]:
    """The repository's labels: lowercased name -> its spelling."""
    labels, _ = all_pages(client, f"/repos/{repo}/labels")
    return {lab["name"].lower(): lab["name"] for lab in labels if isinstance(lab, dict) and isinstance(lab.get("name"), str)}


def add_labels(client: GitHubClient, repo: str, number: int, wanted: list[str], current: list[str],
               apply: bool) -> Labeled:
    """Of `wanted`, the labels the repository has and the issue lacks; sent only when `apply`."""
    have = existing_labels(client, repo) if wanted else {}
    existing = list(dict.fromkeys(have[w.lower()] for w in wanted if w.lower() in have))
    on_issue = {x.lower() for x in current}
    to_add = [name for name in existing if name.lower() not in on_issue]
    if apply and to_add:
        client.send("POST", f"/repos/{repo}/issues/{number}/labels", {"labels": to_add})
    return Labeled(list(wanted), existing, to_add, apply and bool(to_add))
