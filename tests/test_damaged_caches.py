"""Damaged caches and rows: a fast head that is empty, short, rewritten or not the file that was built turns the
fast path off with a reason (a damaged static model: tests/test_static_embed.py); NaN/inf vectors are refused on
write and skipped (embedded again) on read, so that no JSON answer holds NaN and no prediction is NaN."""

from __future__ import annotations

import json
import math
import shutil
from datetime import datetime

import numpy as np
import pytest

from retriage.classifier.fast_path import FAST_META, FAST_WEIGHTS, FastHead
from retriage.classifier.model import IssueClassifier, shipped_model_dir
from retriage.db import writes
from retriage.db.neighbours import NeighbourIndex
from retriage.db.queries import similar_to_vector
from retriage.db.similar import similar_issues
from retriage.db.store import connect, transaction

MODEL = "all-MiniLM-L6-v2"


def _copy_model(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(shipped_model_dir(), folder)
    return folder


@pytest.mark.parametrize("kind", ["empty", "truncated", "nan-weights-rewritten", "wrong-shape-rewritten",
                                  "checksum-removed", "bytes-changed", "meta-not-an-object",
                                  "older-format"])
def test_a_damaged_fast_head_is_refused_with_a_reason(kind, tmp_path):
    version = IssueClassifier.load().version
    folder = _copy_model(tmp_path)
    head, why = FastHead.load(folder, version)
    assert head is not None, why
    npz, meta = folder / FAST_WEIGHTS, folder / FAST_META
    if kind == "empty":
        npz.write_bytes(b"")
    elif kind == "truncated":
        npz.write_bytes(npz.read_bytes()[:100_000])
    elif kind in ("nan-weights-rewritten", "wrong-shape-rewritten"):  # written through save(): checksum right
        if kind == "nan-weights-rewritten":
            head.w_static = head.w_static.copy()
            head.w_static[0, 0] = np.nan
        else:
            head.w_bow = head.w_bow[:-5]
        head.save(folder)
    elif kind == "checksum-removed":
        m = json.loads(meta.read_text())
        del m["weights_sha256"]
        meta.write_text(json.dumps(m))
    elif kind == "bytes-changed":
        data = bytearray(npz.read_bytes())
        data[len(data) // 2] ^= 0xFF
        npz.write_bytes(bytes(data))
    elif kind == "meta-not-an-object":
        meta.write_text("[1, 2]")
    elif kind == "older-format":  # a fast head of format 2 has no vote-vector arrays
        m = json.loads(meta.read_text())
        m["format"] = 2
        meta.write_text(json.dumps(m))
    head, why = FastHead.load(folder, version)
    assert head is None and why and "\n" not in why
    if kind == "older-format":
        assert "another version of retriage" in why


def test_the_shipped_fast_head_carries_its_checksum():
    import hashlib

    meta = json.loads((shipped_model_dir() / FAST_META).read_text())
    assert meta["weights_sha256"] == hashlib.sha256((shipped_model_dir() / FAST_WEIGHTS).read_bytes()).hexdigest()


# ---- NaN and infinite vectors in the embeddings table ------------------------------------------------------


@pytest.fixture
def vector_db(tmp_path):
    """Four issues with stored vectors; #3's vector holds NaN and #4's infinity (written past the store's
    checks, as damage would be)."""
    con = connect(tmp_path / "v.duckdb")
    rng = np.random.default_rng(1)
    rows = [{"repo": "vllm-project/vllm", "number": n, "title": f"issue {n}", "body": "b", "state": "open",
             "labels": [], "author": "a", "author_association": None, "created_at": datetime(2025, 1, n),
             "updated_at": datetime(2025, 1, n), "closed_at": None, "comments": 0, "is_pull_request": False,
             "html_url": f"https://github.com/vllm-project/vllm/issues/{n}"} for n in (1, 2, 3, 4)]
    vecs = {f"h{n}": rng.standard_normal(384).astype(np.float32) for n in (1, 2)}
    with transaction(con):
        writes.upsert_issues(con, rows)
        writes.save_embeddings(con, vecs, MODEL)
        for n, value in ((3, math.nan), (4, math.inf)):
            con.execute("INSERT INTO embeddings (text_hash, model, vector) VALUES (?, ?, ?::FLOAT[384])",
                        [f"h{n}", MODEL, [value] + [0.5] * 383])
        writes.save_issue_embeddings(con, [("vllm-project/vllm", n, MODEL, f"h{n}") for n in (1, 2, 3, 4)])
    yield con, vecs
    con.close()


def test_non_finite_vectors_are_refused_on_write(vector_db):
    con, _ = vector_db
    before = con.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    for bad in (np.full(384, np.nan, dtype=np.float32), np.r_[np.ones(383), np.inf].astype(np.float32),
                np.ones(10, dtype=np.float32)):
        with pytest.raises(ValueError):
            writes.save_embeddings(con, {"good": np.ones(384, dtype=np.float32), "bad": bad}, MODEL)
    assert con.execute("SELECT count(*) FROM embeddings").fetchone()[0] == before


def test_non_finite_confidences_are_refused_on_write(vector_db):
    con, _ = vector_db
    row = ("vllm-project/vllm", 1, "RE.1", "other", math.nan, 0.5, False, [], "m-x", datetime(2026, 1, 1))
    with pytest.raises(ValueError):
        writes.save_predictions(con, [row])
    assert con.execute("SELECT count(*) FROM predictions").fetchone()[0] == 0


def test_similar_issues_skip_non_finite_vectors(vector_db):
    con, vecs = vector_db
    q = vecs["h1"] + 0.1
    via_sql = similar_to_vector(con, q, MODEL, limit=10)
    via_index = NeighbourIndex().search(con, q, MODEL, limit=10)
    assert [r["number"] for r in via_sql] == [r["number"] for r in via_index] == [1, 2]
    assert all(math.isfinite(r["score"]) for r in via_sql + via_index)
    assert similar_to_vector(con, np.full(384, np.nan), MODEL) == []
    for index in (None, NeighbourIndex()):  # what show and classify list, either way the cosines are computed
        assert [r["number"] for r in similar_issues(con, q, MODEL, limit=10, index=index, floor=-1.0)] == [1, 2]
        assert similar_issues(con, np.full(384, np.nan), MODEL, index=index, floor=-1.0) == []


def test_the_cache_leaves_out_broken_vectors_so_they_are_embedded_again(vector_db):
    from retriage.classifier.embedding_cache import lookup

    con, vecs = vector_db
    broken: list[str] = []
    got = lookup(con, ["h1", "h2", "h3", "h4"], MODEL, broken)
    assert set(got) == {"h1", "h2"} and sorted(broken) == ["h3", "h4"]
    assert np.array_equal(got["h1"], vecs["h1"])


@pytest.mark.slow  # the real (numpy) MiniLM embeds the broken texts again
def test_embed_cached_replaces_broken_vectors(vector_db):
    from retriage.classifier.embed import get_embedder, text_hash
    from retriage.classifier.embedding_cache import embed_cached

    con, _ = vector_db
    embedder = get_embedder("numpy")
    texts = ["CUDA out of memory", "NCCL error"]
    with transaction(con):
        for t in texts:
            con.execute("INSERT INTO embeddings (text_hash, model, vector) VALUES (?, ?, ?::FLOAT[384])",
                        [text_hash(t), embedder.name, [math.nan] * 384])
    with transaction(con):
        out = embed_cached(con, texts, embedder)
    assert np.isfinite(out).all() and np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-3)
    stored = con.execute("SELECT vector FROM embeddings WHERE model = ? AND list_contains(?::TEXT[], text_hash)",
                         [embedder.name, [text_hash(t) for t in texts]]).fetchall()
    assert len(stored) == 2 and all(np.isfinite(np.asarray(v)).all() for (v,) in stored)
