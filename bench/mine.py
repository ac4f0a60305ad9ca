"""Benchmark the miner: sync the whole corpus through the local GitHub server (tests/github_server.py, its own
process, a few ms of added latency per request), then sync again with nothing changed.

Prints issues, comments, requests, requests per issue, wall seconds, the bound for a first sync (per
repository ⌈issues/100⌉ + ⌈comments/100⌉ + ⌈label events/100⌉ + at most one more each) and how far under or
over it the requests were,
the request count of the unchanged second sync, and the seconds_between_requests used (0, as `retriage mine`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_server(latency: float, token: str) -> tuple[subprocess.Popen, str, dict]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "github_server.py"), "--latency", str(latency),
                             "--token", token], stdout=subprocess.PIPE, text=True)
    base_url = proc.stdout.readline().strip()
    served = json.loads(proc.stdout.readline())
    if not base_url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise SystemExit(f"the test server did not start (said {base_url!r})")
    return proc, base_url, served


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.003, help="seconds the server adds to each request")
    ap.add_argument("--gap", type=float, default=0.0, help="PyGithub seconds_between_requests")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)

    from retriage.db.store import connect
    from retriage.miner.client import GitHubClient
    from retriage.miner.sync import sync_repos

    token = "ghp_bench" + secrets.token_hex(16)
    server, base_url, served = start_server(args.latency, token)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            con = connect(Path(tmp) / "bench.duckdb")
            repos = list(served)
            client = GitHubClient(base_url, token=token, seconds_between_requests=args.gap)
            started = time.perf_counter()
            results = sync_repos(con, client, repos)
            wall = time.perf_counter() - started
            failed = [f"{r.repo}: {r.error}" for r in results if r.status != "complete"]
            if failed:
                raise SystemExit("sync failed: " + "; ".join(failed))
            issues, prs = con.execute("SELECT count(*), count(*) FILTER (WHERE is_pull_request) FROM issues"
                                      ).fetchone()
            comments = con.execute("SELECT count(*) FROM comments").fetchone()[0]
            links = con.execute("SELECT count(*) FROM issue_links").fetchone()[0]
            want_issues = sum(v["issues"] for v in served.values())
            want_comments = sum(v["comments"] for v in served.values())
            if (issues, comments) != (want_issues, want_comments):
                raise SystemExit(f"stored {issues} issues and {comments} comments, served {want_issues} and "
                                 f"{want_comments}")
            again = GitHubClient(base_url, token=token, seconds_between_requests=args.gap)
            started = time.perf_counter()
            second = sync_repos(con, again, repos)
            wall2 = time.perf_counter() - started
            con.close()
    finally:
        server.terminate()
        server.wait(timeout=10)

    # label events: the repository-wide listing, 100 a page, newest first (miner/label_sync.py)
    events = sum(v["events"] for v in served.values())  # every issue event served (stored: labeled/unlabeled)
    floor = math.ceil(issues / 100) + math.ceil(comments / 100) + math.ceil(events / 100)
    bound = sum(math.ceil(v["issues"] / 100) + math.ceil(v["comments"] / 100) + math.ceil(v["events"] / 100) + 2
                for v in served.values())
    figures = {
        "repositories": len(repos),
        "issues": issues, "pull_requests": prs, "comments": comments, "fix_links": links,
        "requests": client.requests,
        "requests_per_issue": round(client.requests / issues, 4),
        "wall_seconds": round(wall, 2),
        "target": f"⌈{issues}/100⌉ + ⌈{comments}/100⌉ + ⌈{events}/100⌉ issue-event pages = {floor}, plus a handful",
        "requests_over_floor": client.requests - floor,
        "bound": bound,
        "within_bound": client.requests <= bound,
        "second_sync_requests": again.requests,
        "second_sync_statuses": sorted({r.status for r in second}),
        "second_sync_seconds": round(wall2, 2),
        "latency_per_request_s": args.latency,
        "seconds_between_requests": args.gap,
    }
    if args.json:
        print(json.dumps(figures, indent=2, ensure_ascii=False))
    else:
        print(f"repositories               {len(repos)} ({', '.join(repos)})")
        print(f"issues (incl. PRs)         {issues:,} ({prs:,} pull requests, {links:,} fix links)")
        print(f"comments                   {comments:,}")
        print(f"requests                   {client.requests:,}")
        print(f"requests per issue         {figures['requests_per_issue']}")
        print(f"wall seconds               {figures['wall_seconds']}")
        print(f"target                     {figures['target']} (used {figures['requests_over_floor']} over)")
        print(f"bound                      {bound} (per repository ⌈issues/100⌉ + ⌈comments/100⌉ + 1, + issues): "
              f"{client.requests} requests, {'within' if figures['within_bound'] else 'OVER'}")
        print(f"second, unchanged sync     {again.requests} requests ({len(repos)} repositories, "
              f"{'/'.join(figures['second_sync_statuses'])}, {figures['second_sync_seconds']} s)")
        print(f"latency added per request  {args.latency * 1000:.0f} ms")
        print(f"seconds_between_requests   {args.gap}")
    return figures


if __name__ == "__main__":
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    main()
