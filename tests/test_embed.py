"""The two ways to run all-MiniLM-L6-v2: sentence-transformers (reference) and the numpy port used by classify.

Both run once, in one child process with HF_HUB_OFFLINE=1, an empty Hugging Face cache folder and a proxy that
refuses every connection: if either tried to download anything it would fail or leave files behind.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, corpus_file
from retriage.classifier.embed import DIM, MAX_TOKENS, map_safetensors, model_path

TRACES = Path(__file__).resolve().parent / "data" / "traces"

pytestmark = pytest.mark.slow  # fresh interpreters, the real model or a training run: the full tier only

CHILD = r"""
import json, sys, numpy as np
from retriage.classifier.embed import NumpyMiniLM, SentenceTransformerEmbedder
texts = json.load(open(sys.argv[1]))
ref = SentenceTransformerEmbedder().encode(texts)
port = NumpyMiniLM().encode(texts)
np.savez(sys.argv[2], ref=ref, port=port)
"""


def real_texts() -> list[str]:
    """Ten real texts: an empty one, titles, a log line, non-ASCII prose, a trace, and long bodies (>256 tokens)."""
    from retriage.core.textprep import prepare

    records = {}
    with gzip.open(corpus_file("vllm.jsonl.gz"), "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            records[r["number"]] = r
    with gzip.open(corpus_file("sglang.jsonl.gz"), "rt", encoding="utf-8") as f:
        cjk = next(r for r in map(json.loads, f) if any("\u4e00" <= ch <= "\u9fff" for ch in (r["body"] or "")))
    first = records[min(records)]
    nccl = records[4383]
    return [
        "",
        first["title"],
        nccl["title"],
        (TRACES / "vllm_cuda_oom_1.txt").read_text().splitlines()[1],
        (cjk["body"] or "")[:600],
        (TRACES / "llamacpp_cuda_buffer_1.txt").read_text(),
        (TRACES / "sglang_nccl_watchdog_1.txt").read_text(),
        prepare(nccl["title"], nccl["body"]),
        nccl["body"],
        (TRACES / "trtllm_oom_runtime_buffers.txt").read_text(),
    ]


@pytest.fixture(scope="module")
def vectors(tmp_path_factory):
    folder = tmp_path_factory.mktemp("embed")
    texts = real_texts()
    (folder / "texts.json").write_text(json.dumps(texts))
    hf_home = folder / "hf_home"
    hf_home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(hf_home), SENTENCE_TRANSFORMERS_HOME=str(hf_home / "st"),
               HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9", NO_PROXY="")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(folder / "texts.json"), str(folder / "v.npz")],
                          capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=600)
    assert proc.returncode == 0, proc.stderr
    with np.load(folder / "v.npz", allow_pickle=False) as v:
        return texts, v["ref"], v["port"], hf_home


def test_texts_cover_empty_and_long_inputs(vectors):
    from tokenizers import Tokenizer

    texts = vectors[0]
    tok = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    lengths = [len(e.ids) for e in tok.encode_batch(texts)]
    assert texts[0] == "" and len(texts) == 10
    assert sum(n > MAX_TOKENS for n in lengths) >= 2, lengths


def test_numpy_port_agrees_with_sentence_transformers(vectors):
    texts, ref, port, _ = vectors
    assert ref.shape == port.shape == (len(texts), DIM)
    assert ref.dtype == port.dtype == np.float32
    cosine = np.sum(ref * port, axis=1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(port, axis=1))
    print("\ncosine numpy port vs sentence-transformers:", np.round(cosine, 5).tolist())
    assert cosine.min() > 0.999


def test_vectors_are_unit_norm(vectors):
    _, ref, port, _ = vectors
    assert np.allclose(np.linalg.norm(ref, axis=1), 1.0, atol=1e-4)
    assert np.allclose(np.linalg.norm(port, axis=1), 1.0, atol=1e-4)


def test_distinct_texts_get_distinct_vectors(vectors):
    texts, _, port, _ = vectors
    sims = port @ port.T
    off_diagonal = sims[~np.eye(len(texts), dtype=bool)]
    assert off_diagonal.max() < 0.999


def test_nothing_was_downloaded(vectors):
    hf_home = vectors[3]
    written = [p for p in hf_home.rglob("*") if p.is_file()]
    assert written == [], written
    assert (model_path() / "model.safetensors").is_file() and (model_path() / "tokenizer.json").is_file()


def test_map_safetensors_reads_what_the_safetensors_library_reads():
    from safetensors.numpy import load_file

    path = model_path() / "model.safetensors"
    mine, ref = map_safetensors(path), load_file(str(path))
    assert set(mine) == set(ref)
    for name, arr in ref.items():
        assert mine[name].dtype == arr.dtype and mine[name].shape == arr.shape, name
        assert np.array_equal(mine[name], arr), name
