"""Similar issues from the in-process index (db/neighbours.py) are the rows and order of the SQL query
(array_cosine_similarity over the stored vectors), on a real labeled database."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from retriage.classifier import current_model_name
from retriage.db.neighbours import NeighbourIndex
from retriage.db.queries import issue_vector, similar_to_vector
from retriage.db.store import connect

pytestmark = pytest.mark.slow  # builds a labeled database with the CLI first


def same(a: list[dict], b: list[dict]) -> bool:
    return len(a) == len(b) and all(
        {k: x[k] for k in x if k != "score"} == {k: y[k] for k in y if k != "score"} and abs(x["score"] - y["score"]) < 1e-5
        for x, y in zip(a, b))


def test_index_answers_like_the_sql_query(labeled_db):
    con = connect(str(labeled_db.path), read_only=True)
    model = current_model_name()
    ix = NeighbourIndex()
    rng = np.random.default_rng(1)
    for _ in range(5):
        v = rng.standard_normal(384).astype(np.float32)
        assert same(ix.search(con, v, model, limit=5), similar_to_vector(con, v, model, limit=5))
    repo, number = labeled_db.records[0]["repo"], labeled_db.records[0]["number"]
    from retriage.taxonomy import canonical_repo

    repo = canonical_repo(repo)
    v = issue_vector(con, repo, number, model)
    got = ix.search(con, v, model, limit=3, exclude=(repo, number))
    assert same(got, similar_to_vector(con, v, model, limit=3, exclude=(repo, number)))
    assert (repo, number) not in {(x["repo"], x["number"]) for x in got}
    assert ix.search(con, v, model, limit=0) == [] and ix.search(con, v, "another-model") == []
    assert labeled_db.pr not in {(x["repo"], x["number"]) for x in ix.search(con, v, model, limit=500)}


def test_index_reads_again_when_vectors_are_added(labeled_db, tmp_path):
    path = tmp_path / "copy.duckdb"
    shutil.copy(labeled_db.path, path)
    con = connect(str(path))
    model = current_model_name()
    ix = NeighbourIndex()
    (repo, number), = con.execute(
        "SELECT repo, number FROM issue_embeddings WHERE model = ? ORDER BY repo, number LIMIT 1", [model]).fetchall()
    v = issue_vector(con, repo, number, model)
    assert ix.search(con, v, model, limit=1)[0]["number"] == number
    con.execute("DELETE FROM issue_embeddings WHERE repo = ? AND number = ?", [repo, number])
    assert ix.search(con, v, model, limit=1)[0]["number"] != number  # the count changed: read again
    assert same(ix.search(con, v, model), similar_to_vector(con, v, model))
    other = connect(str(labeled_db.path), read_only=True)  # the same index, asked through another database
    assert ix.search(other, v, model, limit=1)[0]["number"] == number
    assert same(ix.search(other, v, model), similar_to_vector(other, v, model))


def test_triage_with_and_without_the_index_lists_the_same_issues(labeled_db):
    from pathlib import Path

    from retriage.triage.classify import Triage

    con = connect(str(labeled_db.path), read_only=True)
    traces = sorted((Path(__file__).resolve().parent / "data" / "traces").glob("*.txt"))[:6]
    held, asked = Triage(), Triage(index=False)
    for t in traces:
        a, b = held.run(t.read_bytes(), con=con), asked.run(t.read_bytes(), con=con)
        assert len(a.similar) <= 5 and a.similar == b.similar, t.name  # (a floor: may be fewer than 5)


def alike(got: list[dict], want: list[dict]) -> bool:
    """The same issues in the same order with the same details; the scores equal to 1e-4 (DuckDB's
    array_cosine_similarity and numpy's dot product differ in the last float32 bits, which the rounding to four
    places can show)."""
    scores = ("score", "cosine")
    return len(got) == len(want) and all(
        {k: v for k, v in g.items() if k not in scores} == {k: v for k, v in w.items() if k not in scores}
        and all(abs(g[k] - w[k]) <= 1.01e-4 for k in scores)
        for g, w in zip(got, want))


def test_a_long_lived_process_gives_the_same_similar_issues_and_sees_writes(labeled_db, tmp_path):
    """Similar issues through a NeighbourIndex equal those DuckDB computes; through a writable connection a
    changed prediction shows at once (the shown details are read with each question)."""
    from retriage.db.similar import similar_issues

    path = tmp_path / "copy.duckdb"
    shutil.copy(labeled_db.path, path)
    model = current_model_name()
    ro = connect(str(path), read_only=True)
    ix = NeighbourIndex()
    (repo, number), = ro.execute(
        "SELECT repo, number FROM issue_embeddings WHERE model = ? ORDER BY repo, number LIMIT 1", [model]).fetchall()
    v = issue_vector(ro, repo, number, model)
    fresh = similar_issues(ro, v, model, limit=5, floor=0.0)
    assert fresh and alike(similar_issues(ro, v, model, limit=5, index=ix, floor=0.0), fresh)
    assert alike(similar_issues(ro, v, model, limit=5, index=ix, floor=0.0), fresh)  # asked again
    ro.close()

    rw = connect(str(path))
    first = (fresh[0]["repo"], fresh[0]["number"])
    assert alike(similar_issues(rw, v, model, limit=5, index=ix, floor=0.0), fresh)  # the same file below
    rw.execute("DELETE FROM gold_labels WHERE repo = ? AND number = ?", list(first))
    rw.execute("UPDATE predictions SET known_fixes = ['nccl_debug'] WHERE repo = ? AND number = ?", list(first))
    again = similar_issues(rw, v, model, limit=5, index=ix, floor=0.0)
    assert (again[0]["repo"], again[0]["number"]) == first and again[0]["known_fix"] == "nccl_debug"
    assert again[0]["fix_source"] == "model"
