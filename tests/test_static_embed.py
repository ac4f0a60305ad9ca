"""The static MiniLM table (classifier/static_embed.py): what its rows are, where it is kept, how texts are read."""

from __future__ import annotations

import numpy as np
import pytest

from retriage.classifier.embed import MAX_TOKENS, NumpyMiniLM
from retriage.classifier.static_embed import (CLS, SEP, StaticMiniLM, build_table, load_table, save_table,
                                              table_path)


@pytest.fixture(scope="module")
def minilm():
    return NumpyMiniLM()


@pytest.fixture(scope="module")
def table():
    t = load_table()
    assert t is not None, f"the static table is built by `make install`; missing: {table_path()}"
    return t


def test_rows_are_minilm_reading_each_word_piece_alone(minilm, table):
    rng = np.random.default_rng(0)
    ids = sorted(rng.choice(table.shape[0], 24, replace=False).tolist()) + [1012, 2019, 7221]  # '.', 'error', ...
    for t in ids:
        h = minilm.hidden_states(np.array([[CLS, t, SEP]]))[0, 1]
        assert np.allclose(table[t].astype(np.float32), h, atol=2e-2, rtol=1e-2), t
    assert table.shape == (minilm.word.shape[0], minilm.dim) and table.dtype == np.float16


def test_batched_forward_is_the_single_sequence_forward(minilm):
    """hidden_states (batched, used to build the table) and encode (one sequence, used by classify) agree."""
    ids = minilm.tok.encode("CUDA out of memory. Tried to allocate 2.00 GiB").ids
    batched = minilm.hidden_states(np.array([ids, ids]))
    v = batched[0].mean(0)
    v /= np.linalg.norm(v)
    assert np.allclose(batched[0], batched[1], atol=1e-5)  # BLAS may block the two rows differently
    assert float(v @ minilm.encode(["CUDA out of memory. Tried to allocate 2.00 GiB"])[0]) > 0.9999


def test_build_covers_the_vocabulary_in_batches(minilm):
    seen = []
    t = build_table(minilm, progress=seen.append, batch=32, rows=70)
    assert seen == [32, 32, 6] and t.shape == (70, minilm.dim)
    assert np.allclose(t[65], minilm.hidden_states(np.array([[CLS, 65, SEP]]))[0, 1], atol=1e-5)


def test_cache_location_round_trip_and_bad_files(tmp_path, monkeypatch, table):
    monkeypatch.setenv("RETRIAGE_CACHE_DIR", str(tmp_path / "cache"))
    path = table_path()
    assert path.parent == tmp_path / "cache" and path.name.startswith("static-all-MiniLM-L6-v2-")
    assert load_table() is None  # not built in this folder
    save_table(np.asarray(table[:100], dtype=np.float32), path)
    # no temporary file left behind; beside the table, its checksum
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, path.name + ".json"]
    got = load_table()
    assert got.shape == (100, 384) and got.dtype == np.float16 and np.array_equal(got, table[:100])
    path.write_bytes(b"not a table")
    assert load_table() is None
    np.save(path, np.zeros((3, 5), dtype=np.float16))
    assert load_table() is None


def test_static_texts_unit_length_empty_and_truncated(table):
    s = StaticMiniLM(table)
    v = s.encode(["", "RuntimeError: CUDA error: out of memory", "NCCL error: unhandled system error"])
    assert not v[0].any()
    assert np.allclose(np.linalg.norm(v[1:], axis=1), 1.0, atol=1e-5)
    assert float(v[1] @ v[2]) < 0.999
    ids = s.token_ids(["error " * 1000])[0]
    assert len(ids) == MAX_TOKENS - 2 and CLS not in ids and SEP not in ids
    weights = np.ones(table.shape[0], dtype=np.float32)
    assert np.allclose(s.encode(["out of memory"], weights), s.encode(["out of memory"]), atol=1e-6)


def test_build_command_with_an_unwritable_cache_is_one_line(tmp_path):
    import subprocess
    import sys

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    proc = subprocess.run([sys.executable, "-m", "retriage.classifier.static_embed"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "RETRIAGE_CACHE_DIR": str(blocker / "cache")}, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("static_embed: error: cannot write")
