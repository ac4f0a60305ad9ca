"""Benchmark readers while a writer runs: `retriage show` latency on a database that `retriage label` or
`retriage mine` (against the local GitHub server, tests/github_server.py) is writing at the same time.

Works on a copy of a labeled demo database (`--db`, default ./retriage.duckdb; never written). Prints, for no
writer, during `label` (the copy's predictions deleted first, so that it labels everything again) and during
`mine` (the whole corpus synced into the copy): how many `show` runs, how many failed (the target is none),
how many waited (printed the "busy" note), and the median, 90th percentile and slowest wall time of a run.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def retriage(*args: str) -> list[str]:
    return [sys.executable, "-m", "retriage.cli", *args]


def show_once(db: Path, ref: str) -> tuple[float, bool, bool]:
    """(seconds, succeeded, waited)"""
    started = time.perf_counter()
    p = subprocess.run(retriage("show", ref, "--db", str(db), "--json"), capture_output=True, text=True,
                       env=os.environ)
    ok = p.returncode == 0 and json.loads(p.stdout)["ref"] == ref
    return time.perf_counter() - started, ok, "busy" in p.stderr


def shows_while(db: Path, ref: str, writer: subprocess.Popen | None, n: int) -> dict:
    """`show` runs one after another while `writer` runs (or `n` runs without a writer)."""
    times, failed, waited = [], 0, 0
    while (writer is not None and writer.poll() is None) or (writer is None and len(times) < n):
        t, ok, w = show_once(db, ref)
        times.append(t)
        failed += not ok
        waited += w
    if writer is not None and writer.wait() != 0:
        raise SystemExit(f"the writer failed: {writer.stderr.read()[-500:] if writer.stderr else ''}")
    times.sort()
    return {"runs": len(times), "failed": failed, "waited": waited,
            "median_s": round(statistics.median(times), 3) if times else None,
            "p90_s": round(times[int(0.9 * (len(times) - 1))], 3) if times else None,
            "max_s": round(times[-1], 3) if times else None}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="retriage.duckdb", help="a labeled demo database (copied, never written)")
    ap.add_argument("--ref", default="llama.cpp#3825")
    ap.add_argument("--latency", type=float, default=0.003, help="seconds the GitHub server adds per request")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    import duckdb
    from mine import start_server

    figures: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "copy.duckdb"
        shutil.copyfile(args.db, db)
        figures["no writer"] = shows_while(db, args.ref, None, 5)

        con = duckdb.connect(str(db))
        con.execute("DELETE FROM predictions")
        con.close()
        started = time.perf_counter()
        label = subprocess.Popen(retriage("label", "--db", str(db)), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        figures["during label"] = shows_while(db, args.ref, label, 0)
        figures["during label"]["writer_seconds"] = round(time.perf_counter() - started, 1)

        token = "ghp_bench" + secrets.token_hex(16)
        server, base_url, served = start_server(args.latency, token)
        try:
            env = dict(os.environ, GH_TOKEN=token, NO_PROXY="127.0.0.1,localhost")
            started = time.perf_counter()
            mine = subprocess.Popen(retriage("mine", *served, "--base-url", base_url, "--request-gap", "0",
                                             "--db", str(db)),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
            figures["during mine"] = shows_while(db, args.ref, mine, 0)
            figures["during mine"]["writer_seconds"] = round(time.perf_counter() - started, 1)
        finally:
            server.terminate()
            server.wait(timeout=10)
    figures["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"`retriage show {args.ref}` (a fresh process each run), load average {figures['load_average']}")
        for what, f in figures.items():
            if what == "load_average":
                continue
            extra = f", writer ran {f['writer_seconds']} s" if "writer_seconds" in f else ""
            print(f"{what:13} {f['runs']:3} runs, {f['failed']} failed, {f['waited']} waited; median "
                  f"{f['median_s']} s, p90 {f['p90_s']} s, max {f['max_s']} s{extra}")
    return figures


if __name__ == "__main__":
    main()
