"""Static MiniLM: one vector per word piece, so a text's embedding is an average of table rows (microseconds).

Row t of the table is MiniLM's last-layer output at position 1 of the input `[CLS] t [SEP]`: each word piece
as MiniLM reads it alone. The table is derived from the packaged weights with the numpy port of MiniLM
(classifier/embed.py) — about half a minute on two cores — and kept as float16 in the user cache
(`RETRIAGE_CACHE_DIR`, else `$XDG_CACHE_HOME/retriage`, else `~/.cache/retriage`), named after a fingerprint
of the weights file so that other weights never read a stale table. `make install` builds it.

On its own a static average is a rough copy of the sentence embedding; classifier/fast_path.py learns how
to read it in the model's terms and decides when it can be trusted.

    .venv/bin/python -m retriage.classifier.static_embed          # build the table (if missing) and say where
"""

from __future__ import annotations

import hashlib
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from retriage.classifier.embed import MAX_TOKENS, MODEL_NAME, model_path
from retriage.core.paths import cache_dir

TABLE_VERSION = 1  # bump when the way rows are computed changes
CLS, SEP = 101, 102
BATCH = 512


@lru_cache(maxsize=4)
def weights_fingerprint(weights: Path) -> str:
    """Size, header and the first megabyte of the weights file (enough to tell two weight files apart)."""
    h = hashlib.sha256(f"v{TABLE_VERSION}:{weights.stat().st_size}:".encode())
    with open(weights, "rb") as f:
        h.update(f.read(1 << 20))
    return h.hexdigest()[:12]


def table_path(folder: Path | None = None) -> Path:
    weights = Path(folder or model_path()) / "model.safetensors"
    return cache_dir() / f"static-{MODEL_NAME}-{weights_fingerprint(weights)}.npy"


def build_table(minilm=None, progress: Callable[[int], None] | None = None, batch: int = BATCH,
                rows: int | None = None) -> np.ndarray:
    """The table (vocabulary size x 384, float32; only the first `rows` word pieces when given), computed with
    the numpy MiniLM."""
    from retriage.classifier.embed import NumpyMiniLM

    minilm = minilm or NumpyMiniLM()
    vocab = minilm.word.shape[0] if rows is None else min(rows, minilm.word.shape[0])
    out = np.empty((vocab, minilm.dim), dtype=np.float32)
    for start in range(0, vocab, batch):
        ids = np.arange(start, min(vocab, start + batch))
        seq = np.stack([np.full_like(ids, CLS), ids, np.full_like(ids, SEP)], axis=1)
        out[start : start + len(ids)] = minilm.hidden_states(seq)[:, 1]
        if progress:
            progress(len(ids))
    return out


def save_table(table: np.ndarray, path: Path) -> None:
    """Written to a temporary file and renamed: a reader never sees half a table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.save(f, table.astype(np.float16))
    os.replace(tmp, path)


def load_table(path: Path | None = None) -> np.ndarray | None:
    """The cached table, memory-mapped (read-only), or None when it was not built yet or is unreadable."""
    path = path or table_path()
    try:
        table = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return None
    if table.ndim != 2 or table.shape[1] != 384 or table.dtype != np.float16:
        return None
    return table


def ensure_table(progress: Callable[[int], None] | None = None) -> np.ndarray:
    """The table, built and cached first when missing."""
    table = load_table()
    if table is None:
        table_path().parent.mkdir(parents=True, exist_ok=True)  # fail before half a minute of work, not after
        save_table(build_table(progress=progress), table_path())
        table = load_table()
        if table is None:  # pragma: no cover - the cache folder is not writable
            raise OSError(f"could not write the static embedding table to {table_path()}")
    return table


class StaticMiniLM:
    """Text -> word pieces (as MiniLM would read them: at most MAX_TOKENS including [CLS]/[SEP]) -> average."""

    name = MODEL_NAME + "-static"

    def __init__(self, table: np.ndarray, folder: Path | None = None):
        from tokenizers import Tokenizer

        self.table = table
        self.tok = Tokenizer.from_file(str(Path(folder or model_path()) / "tokenizer.json"))
        self.tok.enable_truncation(MAX_TOKENS)
        self.tok.no_padding()

    def token_ids(self, texts: list[str]) -> list[np.ndarray]:
        """The word-piece ids of each text, without [CLS] and [SEP]."""
        return [np.asarray(e.ids[1:-1], dtype=np.int64) for e in self.tok.encode_batch(list(texts))]

    def pool(self, ids_list: list[np.ndarray], weights: np.ndarray | None = None) -> np.ndarray:
        """Unit-length (weighted) averages of the table rows of each id list; zeros for an empty one."""
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
    path = table_path()
    if load_table(path) is not None:
        print(f"static embedding table: {path} (already built)")
        return
    print(f"building the static embedding table (once, about half a minute) -> {path}", file=sys.stderr)
    try:
        ensure_table()
    except OSError as e:
        sys.exit(f"static_embed: error: cannot write {path}: {e.strerror or e} (set RETRIAGE_CACHE_DIR to a "
                 "writable folder)")
    print(f"static embedding table: {path}")


if __name__ == "__main__":
    main()
