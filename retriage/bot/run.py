"""`retriage comment`: triage one issue and say it on the issue, once.

The issue is fetched from GitHub (unless forbidden: then it must be in the database), stored and labeled
(retriage/fetch.py); its verdict is rendered (comment.py). Without `post` nothing is written to GitHub. With
`post` the bot's one comment is created, updated or deleted (miner/publish.py); with `label` too, the labels the
mapping gives for a confident class are added if the repository has them (without `post`: only shown).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from retriage.bot.comment import render_comment, states_class
from retriage.bot.config import BotConfig, load_config
from retriage.bot.verdict import Verdict, issue_verdict
from retriage.classifier.model import IssueClassifier
from retriage.core.errors import UserError
from retriage.core.secrets import redact
from retriage.core.secrets import register as register_secret
from retriage.core.refs import format_ref, parse_ref
from retriage.db import queries
from retriage.db.store import connect
from retriage.fetch import fetch_and_label, label_one
from retriage.miner.client import GitHubError
from retriage.miner.defaults import DEFAULT_BASE_URL
from retriage.miner.one_issue import FetchedIssue, quick_client
from retriage.miner.publish import Labeled, Published, add_labels, publish_comment


@dataclass
class CommentRun:
    ref: str
    markdown: str | None            # None: nothing above the thresholds (a posted comment is then deleted)
    verdict: Verdict
    fetched: FetchedIssue | None = None
    published: Published | None = None
    labels: Labeled | None = None

    def to_json(self) -> dict:
        r, d = self.verdict.result, self.verdict.decision
        return {"ref": self.ref, "markdown": self.markdown,
                "re_class": r.re_class, "re_confidence": r.re_confidence, "component": r.component,
                "component_confidence": r.component_confidence, "fixes": [f["tag"] for f in r.fixes],
                "abstained": r.abstained, "known_fixes": d.known_fixes if d else None,
                "made_by": d.made_by if d else None, "note": d.note if d else None,
                "fetched": asdict(self.fetched) if self.fetched else None,
                "published": asdict(self.published) if self.published else None,
                "labels": asdict(self.labels) if self.labels else None}


def wanted_labels(v: Verdict, cfg: BotConfig) -> list[str]:
    r = v.result
    if states_class(v, cfg) and r.re_confidence >= cfg.label_confidence:
        return cfg.labels_for(r.engine, r.re_class)
    return []


def _redact(text: str | None, token: str | None) -> str | None:
    register_secret(token)
    return redact(text)


def issue_ref(ref: str, env: dict | None = None) -> tuple[str, int]:
    """REF as `parse_ref` reads it, or a bare issue number of the repository in GITHUB_REPOSITORY (as in a
    GitHub Actions run)."""
    import os

    env = os.environ if env is None else env
    text = ref.strip().lstrip("#")
    if text.isdigit():
        repo = (env.get("GITHUB_REPOSITORY") or "").strip()
        if not repo:
            raise UserError(f"{ref!r} is a bare number: give owner/name#{text}, or set GITHUB_REPOSITORY", exit_code=2)
        return parse_ref(f"{repo}#{text}")
    return parse_ref(ref)


def comment_on_issue(db: str | None, ref: str, post: bool = False, label: bool = False,
                     base_url: str = DEFAULT_BASE_URL, fetch: bool = True, config: BotConfig | None = None,
                     token: str | None = None) -> CommentRun:
    cfg = config or load_config()
    repo, number = issue_ref(ref)
    if post and not fetch:
        raise UserError("--post writes to GitHub: it cannot be combined with --offline", exit_code=2)
    if post and token is None:
        raise UserError("--post needs a token allowed to write issues in GH_TOKEN or GITHUB_TOKEN", exit_code=2)
    model = IssueClassifier.load()
    con = connect(db)
    try:
        fetched = fetch_and_label(con, repo, number, base_url, token, model) if fetch else None
        repo = fetched.repo if fetched else repo
        issue = queries.get_issue(con, repo, number)
        if issue is None:
            raise UserError(f"{format_ref(repo, number)} is not in the database (and --offline forbids fetching it)")
        if issue["is_pull_request"]:
            raise UserError(f"{format_ref(repo, number)} is a pull request: the bot comments on issues")
        label_one(con, repo, number, model)
        verdict = issue_verdict(con, repo, number, model)
    finally:
        con.close()
    run = CommentRun(format_ref(repo, number), _redact(render_comment(verdict, cfg), token), verdict, fetched)
    if not post and not (label and fetch):
        if label:
            run.labels = Labeled(wanted_labels(verdict, cfg))
        return run
    try:
        client = quick_client(base_url, token)
        try:
            if post:
                run.published = publish_comment(client, repo, number, run.markdown, cfg.marker)
            if label:
                run.labels = add_labels(client, repo, number, wanted_labels(verdict, cfg), verdict.labels, post)
        finally:
            client.close()
    except GitHubError as e:
        raise UserError(f"cannot write to {run.ref} on {base_url}: {e}") from None
    return run
