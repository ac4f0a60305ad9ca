"""The cascade of `retriage label --fast` (classifier/cascade.py), on real snapshot issues in a real DuckDB file:
the fast head where its gate is open, the full model (numpy MiniLM, in worker processes) where it is closed."""

from __future__ import annotations

import numpy as np
import pytest

from retriage.classifier import EMBEDDING_MODEL
from retriage.classifier.cascade import label_cascade
from retriage.classifier.embed import get_embedder, text_hash
from retriage.classifier.features import VIEW_FIELDS, views
from retriage.classifier.label import label_database, pending
from retriage.classifier.model import IssueClassifier
from retriage.core.bundled import snapshot_files
from retriage.db.importer import import_files
from retriage.db.store import connect

pytestmark = pytest.mark.slow  # the real model (numpy MiniLM) and worker processes

N = 24


def snapshot_db(path, n=N, keys: list[tuple[str, int]] | None = None):
    """The snapshot's first `n` issues (by repo and number), or the issues `keys`, in a new DuckDB file."""
    con = connect(path)
    import_files(con, snapshot_files())
    if keys is None:
        con.execute("DELETE FROM issues WHERE is_pull_request OR (repo, number) NOT IN "
                    "(SELECT (repo, number) FROM issues WHERE NOT is_pull_request ORDER BY repo, number LIMIT ?)", [n])
    else:
        con.execute("CREATE TEMP TABLE keep (repo VARCHAR, number BIGINT)")
        con.executemany("INSERT INTO keep VALUES (?, ?)", [list(k) for k in keys])
        con.execute("DELETE FROM issues WHERE is_pull_request OR (repo, number) NOT IN "
                    "(SELECT (repo, number) FROM keep)")
    return con


def both_tiers(folder, model: IssueClassifier, n: int = N, closed: int = 6) -> list[tuple[str, int]]:
    """`n` snapshot issues of which `closed` close the fast head's gate (the full model answers them) and the
    rest open it, the first of each kind by repo and number: a cascade run on them takes both tiers whatever
    share of issues the shipped gate lets through."""
    from retriage.classifier.cascade import Reader

    con = snapshot_db(folder / "pick.duckdb", n=1500)  # the RE gate closes on a few issues in a hundred
    todo = pending(con, model.version)
    con.close()
    gate = Reader(model.folder).read(todo).gate
    shut = [(r, k) for (r, k, _, _), g in zip(todo, gate) if not g][:closed]
    shown = [(r, k) for (r, k, _, _), g in zip(todo, gate) if g][: n - len(shut)]
    assert len(shut) == closed and len(shown) == n - closed, "too few issues of one kind among the first 1500"
    return sorted(shut + shown)


def stored(con) -> dict:
    rows = con.execute("""SELECT p.repo, p.number, p.re_class, p.confidence, p.component, p.known_fixes,
                                 ie.text_hash, e.vector, i.title, i.body
                          FROM predictions p JOIN issues i USING (repo, number)
                          LEFT JOIN issue_embeddings ie USING (repo, number)
                          LEFT JOIN embeddings e ON e.text_hash = ie.text_hash AND e.model = ie.model""").fetchall()
    return {(r[0], r[1]): r[2:] for r in rows}


@pytest.fixture(scope="module")
def labeled(tmp_path_factory):
    """The same issues labeled by the cascade (two workers, small tasks) and by the full model (numpy MiniLM)."""
    folder = tmp_path_factory.mktemp("cascade")
    model = IssueClassifier.load()
    keys = both_tiers(folder, model)
    fast_con = snapshot_db(folder / "fast.duckdb", keys=keys)
    exact_con = snapshot_db(folder / "exact.duckdb", keys=keys)
    stats = label_cascade(fast_con, model, pending(fast_con, model.version), workers=2, task=5)
    label_database(exact_con, model, embedder=get_embedder("numpy"))
    return stats, stored(fast_con), stored(exact_con), fast_con


def test_every_issue_is_labeled_once(labeled):
    stats, fast, exact, _ = labeled
    assert len(fast) == len(exact) == N == stats.fast + stats.full
    assert stats.fast > 0 and stats.full > 0, stats  # both tiers ran on these issues


def test_closed_gate_answers_are_the_full_models(labeled):
    _, fast, exact, _ = labeled
    full = [k for k, r in fast.items() if r[4] == text_hash(views(r[6], r[7]).full)]
    assert full
    for k in full:  # the same embedder and heads: the same answer, the same known fixes and the same vector
        assert fast[k][:4] == exact[k][:4], k
        assert np.allclose(fast[k][5], exact[k][5], atol=1e-5)


def test_open_gate_answers_store_no_estimated_vector(labeled):
    """The fast head's estimates are never stored as embeddings: the `embeddings` table holds only MiniLM's
    vectors of the views of the issues the full model answered."""
    stats, fast, exact, con = labeled
    est = [k for k, r in fast.items() if r[4] is None]
    assert len(est) == stats.fast and all(fast[k][5] is None for k in est)
    exact_vectors = {h: np.asarray(v, dtype=np.float32) for h, v in con.execute(
        "SELECT text_hash, vector FROM embeddings").fetchall()}
    real = {text_hash(getattr(views(fast[k][6], fast[k][7]), f)) for k in fast if k not in est
            for f in VIEW_FIELDS}
    assert set(exact_vectors) == real
    same = np.mean([fast[k][0] == exact[k][0] for k in est])
    assert same >= 0.8, same


def test_second_run_labels_nothing(labeled):
    _, _, _, con = labeled
    model = IssueClassifier.load()
    before = con.execute("SELECT count(*) FROM predictions").fetchone()[0]
    res = label_database(con, model, fast=True)
    assert (res.labeled, res.already) == (0, N) and con.execute("SELECT count(*) FROM predictions").fetchone()[0] == before


def test_without_a_fast_head_the_full_model_labels_with_a_note(tmp_path):
    import shutil

    from retriage.classifier.model import shipped_model_dir

    shutil.copytree(shipped_model_dir(), tmp_path / "model", ignore=shutil.ignore_patterns("fast.*"))
    con = snapshot_db(tmp_path / "t.duckdb", n=3)
    res = label_database(con, IssueClassifier.load(tmp_path / "model"), fast=True, embedder=get_embedder("numpy"))
    assert res.labeled == 3 and res.fast == 0 and res.note.startswith("fast path off:")
    links = con.execute("SELECT count(*) FROM issue_embeddings WHERE model = ?", [EMBEDDING_MODEL]).fetchone()[0]
    assert links == 3


def test_the_held_out_part_took_no_part_in_distilling():
    """bench/label measures on the "report" part: the shipped fast head was fitted on the training split and the
    "fit" part only (the dev split chose its gate), and its held-out figures are on the "report" part."""
    import json

    from retriage.classifier.dataset import load_gold, split
    from retriage.classifier.distill import unlabeled_snapshot_issues
    from retriage.classifier.fast_path import FAST_META
    from retriage.classifier.model import shipped_model_dir

    gold = load_gold()
    train, _ = split(gold)
    labeled = {e.key for e in gold}
    fit = {k for k, _ in unlabeled_snapshot_issues(labeled, "fit")}
    report = {k for k, _ in unlabeled_snapshot_issues(labeled, "report")}
    assert report and fit and not fit & report and not report & labeled
    meta = json.loads((shipped_model_dir() / FAST_META).read_text())
    assert meta["n_distill"] == len(train) + len(fit)
    assert meta["held_out"]["n"] == len(report)
    assert meta["held_out"]["re_agreement"] >= 0.99


def test_cli_label_runs_the_cascade_by_default(tmp_path):
    from conftest import run_cli

    snapshot_db(tmp_path / "c.duckdb", n=4).close()
    proc = run_cli("label", db=tmp_path / "c.duckdb")
    assert proc.returncode == 0, proc.stderr
    assert "labeled 4 issues" in proc.stdout and "answered by the fast path" in proc.stdout
    assert "Traceback" not in proc.stderr
