"""Embeddings keyed by (hash of the text, model name), kept in the database's `embeddings` table, so that a
retrain or a relabel never embeds the same text twice."""

from __future__ import annotations

from collections import Counter
from typing import Callable

import duckdb
import numpy as np

from retriage.classifier.embed import DIM, Embedder, get_embedder, text_hash
from retriage.classifier.features import VIEW_FIELDS, Views
from retriage.db import writes


def lookup(con: duckdb.DuckDBPyConnection, hashes: list[str], model: str,
           broken: list[str] | None = None) -> dict[str, np.ndarray]:
    """Cached vectors by hash; a stored vector holding NaN or infinity is left out (its hash is added to
    `broken`), so that it is embedded again."""
    if not hashes:
        return {}
    rows = con.execute(
        "SELECT text_hash, vector FROM embeddings WHERE model = ? AND text_hash IN (SELECT unnest(?::TEXT[]))",
        [model, list(set(hashes))],
    ).fetchall()
    out = {}
    for h, v in rows:
        a = np.asarray(v, dtype=np.float32)
        if a.shape == (DIM,) and np.isfinite(a).all():
            out[h] = a
        elif broken is not None:
            broken.append(h)
    return out


def embed_cached(con: duckdb.DuckDBPyConnection | None, texts: list[str], embedder: Embedder,
                 progress: Callable[[int], None] | None = None, chunk: int = 256) -> np.ndarray:
    """Vectors for `texts`, embedding only those not cached under `embedder.name` (in chunks, each stored as
    it is done)."""
    model = embedder.name
    hashes = [text_hash(t) for t in texts]
    occurrences = Counter(hashes)
    broken: list[str] = []
    have = lookup(con, hashes, model, broken) if con is not None else {}
    if broken:
        writes.delete_embeddings(con, broken, model)
    if progress:
        progress(sum(1 for h in hashes if h in have))
    missing: dict[str, str] = {}
    for h, t in zip(hashes, texts):
        if h not in have and h not in missing:
            missing[h] = t
    if missing:
        items = list(missing.items())
        for i in range(0, len(items), chunk):
            part = items[i : i + chunk]
            vecs = embedder.encode([t for _, t in part])
            new = {h: v for (h, _), v in zip(part, vecs)}
            if con is not None:
                writes.save_embeddings(con, new, model)
            have.update(new)
            if progress:
                progress(sum(occurrences[h] for h, _ in part))
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for i, h in enumerate(hashes):
        out[i] = have[h]
    return out


def embed_views(con: duckdb.DuckDBPyConnection | None, v: list[Views], progress: Callable[[int], None] | None = None,
                embedder: Embedder | None = None) -> list[np.ndarray]:
    """One embedding matrix per view (VIEW_FIELDS order), through the cache (default embedder:
    sentence-transformers, loaded only if something is not cached)."""
    embedder = embedder or get_embedder()
    return [embed_cached(con, [getattr(x, f) for x in v], embedder, progress) for f in VIEW_FIELDS]
