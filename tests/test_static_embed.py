"""The static encoder of the fast path (classifier/static_embed.py): model2vec's distillation of the packaged
MiniLM, shipped in model2vec's format; how texts are read and how a damaged copy is refused."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from retriage.classifier.embed import MAX_TOKENS
from retriage.classifier.static_embed import STATIC_DIR, StaticMiniLM, check_table

TEXTS = ["", "RuntimeError: CUDA error: out of memory",
         "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
         "NCCL error: unhandled system error, NCCL version 2.21.5", "ü 日本 [UNK] " * 400]


@pytest.fixture(scope="module")
def static():
    return StaticMiniLM()


def test_texts_are_read_as_model2vec_reads_them(static):
    from model2vec import StaticModel

    m = StaticModel.from_pretrained(STATIC_DIR, max_length=MAX_TOKENS - 2)
    assert static.table.shape == m.embedding.shape and m.config["model_type"] == "model2vec"
    assert [list(x) for x in static.token_ids(TEXTS)] == m.tokenize(TEXTS)
    assert np.allclose(static.encode(TEXTS), m.encode(TEXTS).astype(np.float32), atol=1e-3)


def test_unit_length_empty_truncated_and_weighted(static):
    v = static.encode(TEXTS)
    assert not v[0].any()
    assert np.allclose(np.linalg.norm(v[1:], axis=1), 1.0, atol=1e-5)
    assert float(v[1] @ v[2]) > float(v[1] @ v[3])  # two CUDA OOM lines are closer than an OOM and an NCCL error
    ids = static.token_ids(["error " * 1000])[0]
    assert len(ids) == MAX_TOKENS - 2
    weights = np.ones(static.table.shape[0], dtype=np.float32)
    assert np.allclose(static.encode(TEXTS[1:3], weights), static.encode(TEXTS[1:3]), atol=1e-6)


@pytest.mark.parametrize("kind", ["missing", "empty", "short", "garbage", "tokenizer-of-another-size",
                                  "not-model2vec"])
def test_a_damaged_static_model_is_refused_with_one_line(kind, tmp_path):
    folder = tmp_path / "static"
    shutil.copytree(STATIC_DIR, folder)
    weights = folder / "model.safetensors"
    if kind == "missing":
        weights.unlink()
    elif kind == "empty":
        weights.write_bytes(b"")
    elif kind == "short":
        weights.write_bytes(weights.read_bytes()[:5_000_000])
    elif kind == "garbage":
        weights.write_bytes(b"\x00garbage" * 1000)
    elif kind == "tokenizer-of-another-size":
        from safetensors.numpy import save_file

        save_file({"embeddings": np.zeros((100, 256), dtype=np.float16)}, str(weights))
    elif kind == "not-model2vec":
        (folder / "config.json").write_text('{"model_type": "bert"}')
    table, why = check_table(folder)
    assert table is None and str(folder) in why and "\n" not in why
    assert ("missing" if kind == "missing" else "damaged") in why


def test_distilling_without_the_distill_extra_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "retriage.classifier.static_embed", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120, check=False)
    try:
        import skeletoken  # noqa: F401 - with the extra installed this would distil for minutes
        pytest.skip("model2vec[distill] is installed")
    except ImportError:
        pass
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("static_embed: error: model2vec's distill extra")
