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
import json
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


def _sidecar(path: Path) -> Path:
    """Beside the table: its SHA-256, shape and dtype, written when it is built and checked on every load."""
    return path.with_name(path.name + ".json")


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _write_sidecar(path: Path, table_shape: tuple, digest: str) -> None:
    side = _sidecar(path)
    tmp = side.with_name(f"{side.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"sha256": digest, "shape": list(table_shape), "dtype": "float16",
                               "table_version": TABLE_VERSION}) + "\n")
    os.replace(tmp, side)


def save_table(table: np.ndarray, path: Path) -> None:
    """Written to a temporary file and renamed: a reader never sees half a table. Non-finite rows are refused;
    the file's SHA-256 is recorded beside it (`<name>.json`) and checked whenever it is loaded."""
    table = np.asarray(table).astype(np.float16)
    if not np.isfinite(table).all():
        raise ValueError("the static embedding table holds NaN or infinite values")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.save(f, table)
    _write_sidecar(path, table.shape, _sha256(tmp))
    os.replace(tmp, path)


SPOT_ROWS = (1012, 2019, 7221, 15000)  # rows recomputed to vouch for a table built before checksums


def _spot_check(table: np.ndarray) -> bool:
    """Recompute a few rows with the numpy MiniLM (about a second): does the table hold MiniLM's readings?"""
    from retriage.classifier.embed import NumpyMiniLM

    ids = np.array([i for i in SPOT_ROWS if i < table.shape[0]] or [0])
    seq = np.stack([np.full_like(ids, CLS), ids, np.full_like(ids, SEP)], axis=1)
    want = NumpyMiniLM().hidden_states(seq)[:, 1]
    return bool(np.allclose(table[ids].astype(np.float32), want, atol=2e-2, rtol=1e-2))


def check_table(path: Path | None = None) -> tuple[np.ndarray | None, str]:
    """(the cached table memory-mapped read-only, "") or (None, why it cannot be used): missing, unreadable,
    of the wrong shape or dtype, or not the file that was built (SHA-256 recorded beside it). A table built
    before checksums were recorded is checked once (finite values, a few rows recomputed) and then gets one."""
    path = path or table_path()
    if not path.exists():
        return None, f"the static embedding table {path} is not built yet"
    try:
        table = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        return None, f"the static embedding table {path} is unreadable ({type(e).__name__})"
    if table.ndim != 2 or table.shape[1] != 384 or table.dtype != np.float16 or table.shape[0] == 0:
        return None, f"the static embedding table {path} has shape {table.shape} and dtype {table.dtype}"
    damaged = f"the static embedding table {path} is damaged"
    try:
        recorded = json.loads(_sidecar(path).read_text())
    except FileNotFoundError:
        recorded = None
    except (OSError, ValueError):
        return None, f"{damaged} (its checksum file is unreadable)"
    if recorded is None:
        if not np.isfinite(table).all() or not _spot_check(table):
            return None, f"{damaged} (its values are not MiniLM's)"
        try:
            _write_sidecar(path, table.shape, _sha256(path))
        except OSError:
            pass  # a read-only cache: checked again next time
        return table, ""
    if not isinstance(recorded, dict) or recorded.get("shape") != list(table.shape) \
            or recorded.get("sha256") != _sha256(path):
        return None, f"{damaged} (it is not the file that was built: checksum differs)"
    return table, ""


def load_table(path: Path | None = None) -> np.ndarray | None:
    """The cached table, memory-mapped (read-only), or None when it is missing or damaged (see check_table)."""
    return check_table(path)[0]


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
