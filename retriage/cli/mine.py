"""`retriage mine`: options in, one call to `sync.sync_repos`, Rich progress while it runs, a summary after.

Heavy imports (PyGithub, DuckDB, Rich) happen inside the command, so `retriage --help` stays fast.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone
from typing import List, Optional

import typer

from retriage.cli.options import Db, Json, number_in_range, print_json
from retriage.core.console import console
from retriage.core.errors import UsageError, UserError
from retriage.miner.defaults import DEFAULT_BASE_URL, TOKEN_VARS

NO_TOKEN_NOTE = (f"note: no {' or '.join(TOKEN_VARS)} set: mining unauthenticated, which GitHub limits to "
                 f"60 requests an hour")


MAX_REQUEST_GAP = 60.0  # seconds: a longer gap between requests is a typo (1e9 slept for ever, silently)
MAX_WAIT_LIMIT = 86400.0  # --max-wait at most a day: GitHub's primary limits reset within the hour
LOG_EVERY_REQUESTS, LOG_EVERY_SECONDS = 25, 10.0  # without a terminal: a progress line every 25 requests or 10 s

MARKS = {"complete": "[green]✓[/]", "unchanged": "[green]✓[/]", "failed": "[red]✗[/]", "stopped": "[yellow]■[/]",
         "skipped": "[dim]-[/]"}


class MineView:
    """Rich progress on stderr, one line per repository: items stored, requests, rate limit left, waits. Without
    a terminal (cron, CI) the live display is not shown, so each wait is one log line, and so is the progress of
    the repository being synced every 25 requests or 10 s."""

    def __init__(self, repos: list[str], client):
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn

        self.console = Console(stderr=True)
        self.client = client
        self.progress = Progress(SpinnerColumn(finished_text=" "), TextColumn("{task.fields[mark]}"),
                                 TextColumn("[bold]{task.description:<19}"), TextColumn("{task.fields[detail]}"),
                                 console=self.console)
        self.tasks = {repo: self.progress.add_task(repo, total=1, start=False, detail="waiting", mark=" ")
                      for repo in repos}
        self.current = None        # the RepoResult being synced
        self.requests_seen = 0     # client.requests when it last reported
        self.in_wait = False       # a wait is being counted down
        self.logged = (0, time.monotonic())  # client.requests and the time of the last progress log line

    def __enter__(self) -> "MineView":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def _rate(self) -> str:
        c = self.client
        return f"{c.rate_remaining:,} rate left" if c.rate_remaining is not None else "rate ?"

    def _line(self, result, extra_requests: int = 0) -> str:
        saved = result.issues.new + result.issues.updated
        comments = result.comments.new + result.comments.updated
        line = (f"{saved:,} issues/PRs, {comments:,} comments, {result.requests + extra_requests:,} req, "
                f"{self._rate()}")
        if result.status in ("failed", "stopped", "skipped"):
            line += f", [{'red' if result.status == 'failed' else 'yellow'}]{result.status}[/]"
        return line

    def update(self, result) -> None:
        task = self.tasks[result.repo]
        if result.status == "running" and self.current is not result:
            self.progress.start_task(task)
            self.current = result
        if result.status not in ("running", "pending"):
            self.progress.update(task, completed=1, mark=MARKS.get(result.status, " "))
            self.progress.stop_task(task)
        self.requests_seen = self.client.requests
        self.progress.update(task, detail=self._line(result))
        self._log(result)

    def _log(self, result) -> None:
        """Without a terminal: a progress line every LOG_EVERY_REQUESTS requests or LOG_EVERY_SECONDS."""
        if self.console.is_terminal or result.status != "running":
            return
        requests, now = self.client.requests, time.monotonic()
        if requests - self.logged[0] < LOG_EVERY_REQUESTS and now - self.logged[1] < LOG_EVERY_SECONDS:
            return
        self.logged = (requests, now)
        self.console.print(f"retriage mine: {result.repo}: {self._line(result)}", markup=False, highlight=False,
                           soft_wrap=True)

    def waiting(self, seconds_left: float, reason: str) -> None:
        """A countdown on the current repository's line (the client calls this every tick of a wait)."""
        if seconds_left > 0 and not self.in_wait and not self.console.is_terminal:
            where = f"{self.current.repo}: " if self.current is not None else ""
            self.console.print(f"retriage mine: {where}waiting {seconds_left:.0f} s: {reason}", markup=False,
                               highlight=False, soft_wrap=True)
        self.in_wait = seconds_left > 0
        if self.current is None:
            return
        detail = self._line(self.current, self.client.requests - self.requests_seen)
        if seconds_left > 0:
            detail += f", [yellow]waiting {seconds_left:.0f} s: {reason}[/]"
        self.progress.update(self.tasks[self.current.repo], detail=detail)


def _summary(results, client, since_ignored: bool) -> dict:
    return {
        "base_url": client.base_url,
        "authenticated": client.authenticated,
        "requests": client.requests,
        "rate_limit": {"remaining": client.rate_remaining, "limit": client.rate_limit,
                       "reset": datetime.fromtimestamp(client.rate_reset, timezone.utc).isoformat()
                       if client.rate_reset else None},
        "stopped": any(r.status == "stopped" for r in results),
        "since_ignored": since_ignored,
        "repos": [r.as_dict() for r in results],
    }


def _summary_table(results):
    from rich import box
    from rich.table import Table

    t = Table(title="retriage mine", title_justify="left", box=box.SIMPLE_HEAD, caption="new · updated",
              caption_justify="left")
    for col in ("repository", "status", "issues+PRs", "comments", "links", "requests"):
        t.add_column(col, justify="left" if col in ("repository", "status") else "right", no_wrap=True)
    for r in results:
        c = r.comments
        comments = "skipped" if c.skipped else "-" if not (c.pages or c.not_modified) else \
            f"{c.new:,} · {c.updated:,}"
        t.add_row(r.repo, r.status, f"{r.issues.new:,} · {r.issues.updated:,}", comments, f"{r.links:,}",
                  f"{r.requests:,}")
    return t


def _fetched_any(results) -> bool:
    return any(r.issues.pages or r.comments.pages or r.issues.not_modified for r in results)


def _print_summary(results, client, summary: dict, max_requests: int | None) -> None:
    out = console()
    out.print(_summary_table(results))
    rate = summary["rate_limit"]
    line = f"{client.requests:,} request{'' if client.requests == 1 else 's'} in {summary['seconds']:.1f} s"
    if rate["remaining"] is not None:
        line += f" · rate limit {rate['remaining']:,}/{rate['limit']:,} left"
    out.print(line)
    if summary["since_ignored"]:
        out.print("--since applies to a first sync only: repositories with a cursor continued from it")
    if summary["stopped"] and _fetched_any(results):
        out.print(f"stopped at --max-requests {max_requests}: everything fetched is stored; run again to continue"
                  + "".join(f" ({r.stopped_before})" for r in results if r.stopped_before), markup=False,
                  soft_wrap=True)


def mine(
    repos: Optional[List[str]] = typer.Argument(
        None, metavar="REPOS", help="OWNER/NAME or vllm, sglang, llama.cpp, trtllm (default: all four)."),
    since: Optional[str] = typer.Option(
        None, "--since", help="First sync of a repository only: start at this date (YYYY-MM-DD, UTC)."),
    base_url: str = typer.Option(
        DEFAULT_BASE_URL, "--base-url", help="API root: GitHub Enterprise (https://HOST/api/v3) or a local server."),
    no_comments: bool = typer.Option(False, "--no-comments", help="Issues and pull requests only."),
    max_requests: Optional[int] = typer.Option(
        None, "--max-requests", min=1, help="Stop cleanly after N requests; the next run continues from there. "
        "No rate limit is waited out when no request is left to make after it."),
    max_wait: float = typer.Option(
        300.0, "--max-wait", metavar="SECONDS",
        help=f"Longest wait for a rate limit, 0 to {MAX_WAIT_LIMIT:.0f} s; a longer one stops the run at once, "
        "saying when to run again (the next run continues from there)."),
    max_pages: Optional[int] = typer.Option(
        None, "--max-pages", min=1, help="Pages of one listing in one run (default 2,000: 200,000 items); a server "
        "whose next links never end stops there, and a larger first sync continues on the next run."),
    request_gap: float = typer.Option(
        0.0, "--request-gap", metavar="SECONDS", help=f"Seconds between requests, 0 to {MAX_REQUEST_GAP:.0f} "
        "(default none: requests are serial, and rate limits are waited out)."),
    as_json: bool = Json,
    db: Optional[str] = Db,
):
    """Sync issues, pull requests and comments from GitHub into the database: incremental and resumable.

    Token from GH_TOKEN, else GITHUB_TOKEN (as gh). An interrupted run loses nothing; an unchanged repository costs one request.
    """
    number_in_range("--request-gap", request_gap, 0, MAX_REQUEST_GAP, "seconds")
    number_in_range("--max-wait", max_wait, 0, MAX_WAIT_LIMIT, "seconds")
    from retriage.db.store import Database
    from retriage.miner.client import GitHubClient, GitHubError, RetryPolicy, token_from_env
    from retriage.miner.sync import load_state, parse_since, resolve_repos, sync_repos

    repo_list = resolve_repos(repos)
    since_dt = parse_since(since)
    token = token_from_env()
    con = Database(db)  # held only for each page's transaction: readers get in between
    if token is None:
        sys.stderr.write(NO_TOKEN_NOTE + "\n")
    try:
        client = GitHubClient(base_url, token, policy=RetryPolicy(max_wait=max_wait),
                              seconds_between_requests=request_gap, max_requests=max_requests)
    except GitHubError as e:  # a bad --base-url
        raise UsageError(str(e)) from None
    since_ignored = since_dt is not None and any(load_state(con, r, "issues").cursor for r in repo_list)
    started = time.monotonic()
    with MineView(repo_list, client) as view:
        client.on_wait = view.waiting
        results = sync_repos(con, client, repo_list, since_dt, comments=not no_comments, on_progress=view.update,
                             max_pages=max_pages)
    client.close()
    summary = _summary(results, client, since_ignored)
    summary["seconds"] = round(time.monotonic() - started, 2)
    print_json(summary) if as_json else _print_summary(results, client, summary, max_requests)
    failed = [r for r in results if r.status == "failed"]
    if failed:
        resume = " (cursor kept: run again to resume)" if any(r.retryable for r in failed) else ""
        raise UserError("; ".join(f"{r.repo}: {r.error}" for r in failed) + resume)
    if summary["stopped"] and not _fetched_any(results):
        raise UserError(f"stopped at --max-requests {max_requests} before any page was fetched: nothing stored"
                        + "".join(f"; {r.stopped_before}" for r in results if r.stopped_before))
