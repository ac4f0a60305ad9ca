"""Readers never fail because a writer runs: real processes on real DuckDB files.

A writer (`label`, `mine`, `import`) holds the file only for each chunk's transaction (db.store.Database);
readers (`show`, `stats`, `report`, `list`) open it read-only and wait, with one note, while a transaction runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from retriage.core.errors import UserError
from retriage.db import store
from retriage.db.store import Database, transaction

HOLD = ("import sys, time, duckdb\n"
        "con = duckdb.connect(sys.argv[1])\n"
        "print('holding', flush=True)\n"
        "time.sleep(float(sys.argv[2]))\n"
        "con.close()\n")


def _hold(path: Path, seconds: float) -> subprocess.Popen:
    """Another process holding the file read-write for `seconds` (as a writer's transaction does)."""
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "holding"
    return p


@contextmanager
def _held_db(tmp_path: Path, seconds: float):
    """A new retriage database that another process holds read-write (killed at the end)."""
    path = tmp_path / "w.duckdb"
    _new_db(path)
    holder = _hold(path, seconds)
    try:
        yield path
    finally:
        holder.kill()
        holder.wait()


def _new_db(path: Path) -> None:
    with transaction(Database(path)) as con:
        con.execute("INSERT INTO gold_labels VALUES ('o/r', 1, 'RE.1', 'operators', 'none', 'x', 't')")


@pytest.mark.slow
def test_reader_waits_for_a_writer_and_says_so(tmp_path):
    path = tmp_path / "w.duckdb"
    _new_db(path)
    holder = _hold(path, 1.5)
    notes: list[str] = []
    started = time.monotonic()
    con = store.connect(path, read_only=True, note=notes.append)
    waited = time.monotonic() - started
    assert con.execute("SELECT count(*) FROM gold_labels").fetchone()[0] == 1
    con.close()
    holder.wait(timeout=30)
    assert waited >= 0.5, "it could only open once the writer let go"
    assert len(notes) == 1 and "busy" in notes[0]


@pytest.mark.slow
def test_reader_gives_up_after_its_wait_with_one_line(tmp_path):
    with _held_db(tmp_path, 10) as path:
        with pytest.raises(UserError, match="in use by another retriage process"):
            store.connect(path, read_only=True, wait=0.5, note=lambda _: None)


@pytest.mark.slow
def test_a_database_is_free_between_transactions(tmp_path):
    """Between two transactions of a Database another process opens the file; during one it cannot."""
    path = tmp_path / "w.duckdb"
    db = Database(path)
    probe = [sys.executable, "-c", "import sys, duckdb; duckdb.connect(sys.argv[1], read_only=True).close()",
             str(path)]
    with transaction(db) as con:
        con.execute("INSERT INTO gold_labels VALUES ('o/r', 1, 'RE.1', 'operators', 'none', 'x', 't')")
        assert subprocess.run(probe, capture_output=True).returncode != 0
    assert subprocess.run(probe, capture_output=True).returncode == 0
    # a query outside a transaction opens the file for itself alone
    assert db.execute("SELECT count(*) FROM gold_labels").fetchone() == (1,)
    assert subprocess.run(probe, capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def labeled_db(tmp_path_factory):
    """The bundled snapshot imported and labeled by the shipped model (its embeddings from the package)."""
    from retriage.classifier.label import label_database
    from retriage.classifier.snapshot_cache import load_into
    from retriage.core.bundled import snapshot_files
    from retriage.db.importer import import_files

    path = tmp_path_factory.mktemp("conc") / "labeled.duckdb"
    db = Database(path)
    import_files(db, snapshot_files())
    with transaction(db) as con:
        load_into(con)
    label_database(db)
    return path


@pytest.mark.slow
def test_show_stats_report_answer_while_label_runs(labeled_db, tmp_path):
    db = tmp_path / "copy.duckdb"
    shutil.copyfile(labeled_db, db)
    model = tmp_path / "model"  # the shipped model under another version: `label` has every issue to do
    from retriage.classifier import shipped_model_dir

    shutil.copytree(shipped_model_dir(), model)
    meta = json.loads((model / "meta.json").read_text())
    meta["model_version"] = "m-concurrency1"
    (model / "meta.json").write_text(json.dumps(meta))
    env = {k: v for k, v in os.environ.items() if k != "RETRIAGE_DB"}
    label = subprocess.Popen([sys.executable, "-m", "retriage.cli", "label", "--model", str(model), "--db", str(db),
                              "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT),
                             env=env)
    try:
        time.sleep(6)  # it loads the model and starts its chunks (3,631 issues: it runs well beyond the readers)
        answered = []
        for args in (("show", "llama.cpp#3825", "--json"), ("stats", "--json"),
                     ("report", "--weekly", "--format", "json"), ("list", "--limit", "3", "--json")):
            r = run_cli(*args, db=db, timeout=120)
            assert r.returncode == 0, (args, r.stderr)
            assert "internal error" not in r.stderr and "Traceback" not in r.stderr
            json.loads(r.stdout)
            answered.append((args[0], label.poll() is None))
        assert all(running for _, running in answered[:3]), f"label ended too soon to prove anything: {answered}"
    finally:
        out, err = label.communicate(timeout=600)
    assert label.returncode == 0, err
    assert json.loads(out)["labeled"] == 3631
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM predictions WHERE model_version = 'm-concurrency1'").fetchone()[0] == 3631
    con.close()


@pytest.mark.slow
def test_show_answers_while_mine_runs(labeled_db, tmp_path, github_server, no_token_env):
    db = tmp_path / "copy.duckdb"
    shutil.copyfile(labeled_db, db)
    server = github_server(latency=0.003, token="ghp_concurrency")
    env = {"GH_TOKEN": "ghp_concurrency", "NO_PROXY": "127.0.0.1,localhost"}
    cmd = [sys.executable, "-m", "retriage.cli", "mine", "sglang", "--base-url",  # one repository: writes enough
           server.base_url, "--request-gap", "0", "--db", str(db)]
    mine = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT),
                            env={**os.environ, **env})
    try:
        shows = 0
        while mine.poll() is None and shows < 6:
            r = run_cli("show", "llama.cpp#3825", "--json", db=db, timeout=120)
            assert r.returncode == 0, r.stderr
            assert json.loads(r.stdout)["issue"]["number"] == 3825
            shows += 1
        assert shows >= 1
    finally:
        out, err = mine.communicate(timeout=600)
    assert mine.returncode == 0, err


@pytest.mark.slow
def test_classify_says_when_similar_issues_were_skipped(tmp_path):
    with _held_db(tmp_path, 30) as path:
        r = run_cli("classify", "--json", "--similar", "5", db=path,
                    input="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["similar"] == []
    assert any(n.startswith("similar issues skipped: database") and "in use" in n for n in out["notes"]), out["notes"]


@pytest.mark.slow
def test_predict_reads_and_writes_dashes(tmp_path):
    issue = {"repo": "vllm-project/vllm", "number": 1, "title": "CUDA out of memory at startup",
             "body": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}
    r = run_cli("predict", "-i", "-", "-o", "-", input=json.dumps(issue) + "\n")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["number"] == 1
    assert json.loads(lines[0])["re_class"] in ("RE.1", "RE.2", "RE.3", "RE.4", "none")
    assert "standard output" in r.stderr
