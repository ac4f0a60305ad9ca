"""The bundled embedding cache: the MiniLM vectors of every view of every snapshot issue and of every labeled
issue from outside the snapshot (the holdout set's too: they are the encoder's output, nothing is fitted on
them), shipped beside the snapshot (float16) so that `retriage demo` labels it in about a minute, and
`retriage train` / `retriage eval` run, without embedding ~15,000 texts on the CPU first.

It is only a cache: entries are keyed by the hash of the prepared text and the model name, like the database's
`embeddings` table. Text that changed since the cache was built (other text preparation, other data) misses it
and is embedded as usual. Rebuild after changing text preparation:

    .venv/bin/python -m retriage.classifier.snapshot_cache [DB]   # DB: reuse that database's embedding cache
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import duckdb
import numpy as np

from retriage.classifier import EMBEDDING_MODEL
from retriage.classifier.embed import text_hash
from retriage.classifier.embedding_cache import lookup
from retriage.core.bundled import snapshot_folder
from retriage.db import writes
from retriage.classifier.dataset import load_gold
from retriage.classifier.features import VIEW_FIELDS, views
from retriage.taxonomy import HOLDOUT_DIR


def cache_path() -> Path:
    return snapshot_folder() / f"embeddings-{EMBEDDING_MODEL}.npz"


def snapshot_texts() -> list[str]:
    from retriage.core.bundled import snapshot_files

    texts: dict[str, None] = {}
    for f in snapshot_files():
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                if r.get("pull_request"):
                    continue
                v = views(r.get("title"), r.get("body"))
                for name in VIEW_FIELDS:
                    texts.setdefault(getattr(v, name), None)
    for e in [*load_gold(), *load_gold(HOLDOUT_DIR)]:
        if e.source != "corpus":
            v = views(e.title, e.body)
            for name in VIEW_FIELDS:
                texts.setdefault(getattr(v, name), None)
    return list(texts)


def build(path: Path | None = None, con: duckdb.DuckDBPyConnection | None = None) -> int:
    """Embed every view of every snapshot issue (through `con`'s cache when given) and write the file."""
    from retriage.classifier.embed import get_embedder
    from retriage.classifier.embedding_cache import embed_cached

    texts = snapshot_texts()
    vectors = embed_cached(con, texts, get_embedder())
    path = Path(path or cache_path())
    tmp = path.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, hashes=np.array([text_hash(t) for t in texts]), vectors=vectors.astype(np.float16))
    tmp.replace(path)
    return len(texts)


def load_into(con: duckdb.DuckDBPyConnection, path: Path | None = None) -> int:
    """Add the shipped vectors to the database's cache (existing entries are kept). Returns how many were new."""
    path = Path(path or cache_path())
    if not path.is_file():
        return 0
    with np.load(path, allow_pickle=False) as a:
        hashes, vectors = list(a["hashes"]), a["vectors"].astype(np.float32)
    have = lookup(con, hashes, EMBEDDING_MODEL)
    new = {h: v for h, v in zip(hashes, vectors) if h not in have}
    writes.save_embeddings(con, new, EMBEDDING_MODEL)
    return len(new)


def shipped_vectors(path: Path | None = None) -> dict[str, np.ndarray]:
    """The shipped vectors by text hash (float32); empty when the file is missing or unreadable."""
    path = Path(path or cache_path())
    try:
        with np.load(path, allow_pickle=False) as a:
            hashes, vectors = a["hashes"], a["vectors"].astype(np.float32)
    except (OSError, ValueError, KeyError):
        return {}
    return {str(h): v for h, v in zip(hashes, vectors) if np.isfinite(v).all()}


def shipped_embedder(path: Path | None = None):
    """View embeddings (VIEW_FIELDS order) of a list of views from the shipped vectors held in memory; a text
    they lack is embedded (MiniLM, loaded only then) and kept for the rest of the process."""
    from retriage.classifier.embed import DIM, get_embedder

    have = shipped_vectors(path)

    def embed(v: list) -> list[np.ndarray]:
        out = []
        for name in VIEW_FIELDS:
            texts = [getattr(x, name) for x in v]
            hashes = [text_hash(t) for t in texts]
            missing = {h: t for h, t in zip(hashes, texts) if h not in have}
            if missing:
                vecs = get_embedder().encode(list(missing.values()))
                have.update(zip(missing, np.asarray(vecs, dtype=np.float32)))
            out.append(np.array([have[h] for h in hashes], dtype=np.float32).reshape(len(texts), DIM))
        return out

    return embed


if __name__ == "__main__":
    from retriage.db.store import connect

    con = connect(sys.argv[1] if len(sys.argv) > 1 else ":memory:")
    load_into(con)  # what the shipped file already holds is not embedded again
    n = build(con=con)
    sys.stdout.write(f"wrote {n} vectors to {cache_path()}\n")
