"""`retriage mine` killed with SIGKILL at random points, in a subprocess, then resumed: after every kill the store
holds a prefix of each listing with its cursor; after the resume, exactly the server's items, each once."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from retriage.db.store import connect
from retriage.miner import sync

import pytest  # noqa: E402

pytestmark = pytest.mark.slow  # fresh interpreters, the real model or a training run: the full tier only

REPO = "vllm-project/vllm"
TOKEN = "ghp_killtoken000000000011111111112222222222"
RETRIAGE = str(Path(sys.executable).with_name("retriage"))
SEED = 20250729


def assert_prefixes(con, server):
    """Stored = the first N items of each ascending listing, and each cursor = the newest stored item."""
    for resource, key in (("issues", "number"), ("comments", "id")):
        items = sorted(getattr(server, resource)(REPO), key=lambda o: (o["updated_at"], o[key]))
        stored = {r[0] for r in con.execute(f"SELECT {key} FROM {resource}").fetchall()}
        assert stored == {o[key] for o in items[:len(stored)]}, f"{resource}: a gap in what is stored"
        cursor = sync.load_state(con, REPO, resource).cursor
        if stored:
            assert sync.iso_utc(cursor) == items[len(stored) - 1]["updated_at"]


def test_sigkill_at_random_points_then_resume(tmp_path, github_server, miner_client, assert_store_matches):
    server = github_server(repos=[REPO], limit_per_repo=100, token=TOKEN, max_per_page=20, latency=0.003)
    reference = connect(tmp_path / "reference.duckdb")
    total = sync.sync_repos(reference, miner_client(server, token=TOKEN), [REPO])[0].requests
    reference.close()
    assert total > 25

    env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "RETRIAGE_DB")}
    env.update(GITHUB_TOKEN=TOKEN, NO_PROXY="127.0.0.1,localhost")
    rng = random.Random(SEED)
    killed_mid_run = 0
    for trial in range(4):
        db = tmp_path / f"trial{trial}.duckdb"
        for _ in range(2):  # two kills per trial, the second one into a resumed run
            start = len(server.log)
            proc = subprocess.Popen([RETRIAGE, "mine", REPO, "--base-url", server.base_url, "--db", str(db),
                                     "--request-gap", "0"], env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            after = rng.randint(1, total - 2)
            deadline = time.monotonic() + 30
            while len(server.log) - start < after and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(rng.uniform(0, 0.02))  # land anywhere: in a request, a transaction, a commit
            if proc.poll() is None:
                killed_mid_run += 1
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            con = connect(db)
            assert_prefixes(con, server)
            con.close()
        con = connect(db)
        result = sync.sync_repos(con, miner_client(server, token=TOKEN), [REPO])[0]
        assert result.status in ("complete", "unchanged"), result.error  # unchanged: killed after its last commit
        assert_store_matches(con, server, REPO)
        con.close()
    assert killed_mid_run >= 6  # the kills really interrupted running syncs
