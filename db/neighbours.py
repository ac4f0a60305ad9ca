"""The cosines of similar issues (db/similar.py) for a process that asks many times (a `Triage` object held by a
notebook or a service; the `classify` command asks DuckDB once instead).

The issues' stored vectors (`issue_embeddings` joined with `embeddings`), with the few fields shown beside a
similar issue, are read from DuckDB once per connection and model into numpy; each question is then one
matrix-vector product (well under a millisecond for the snapshot's 3,600 issues, where
`array_cosine_similarity` over the join takes 15-30 ms). Through a read-only connection nothing can change
(DuckDB lets no process write a file that another has open), so that is all; through a writable one each
question also counts the stored vectors, and they are read again when the count changes (`retriage label`
adds them). A vector or title replaced in place through a writable connection is seen by a new index.
"""

from __future__ import annotations

import weakref

import numpy as np

_LOAD = """
    SELECT ie.repo, ie.number, i.title, i.state, i.labels, i.html_url, g.known_fix, e.vector
    FROM issue_embeddings ie
    JOIN embeddings e ON e.text_hash = ie.text_hash AND e.model = ie.model
    JOIN issues i ON i.repo = ie.repo AND i.number = ie.number
    LEFT JOIN gold_labels g ON g.repo = i.repo AND g.number = i.number
    WHERE ie.model = $model AND NOT i.is_pull_request
    ORDER BY ie.repo, ie.number"""
_FIELDS = ("repo", "number", "title", "state", "labels", "html_url", "known_fix")


class NeighbourIndex:
    """Nearest stored issues by cosine similarity; the same rows and order as db.queries.similar_to_vector."""

    def __init__(self) -> None:
        self._con = None  # weak reference to the connection the vectors were read through
        self._model: str | None = None
        self._count_seen = -1
        self._read_only = False
        self._keys: list[tuple[str, int]] = []
        self._columns: dict = {}
        self._matrix = np.zeros((0, 0), dtype=np.float32)

    def _count(self, con, model: str) -> int:
        return con.execute("SELECT count(*) FROM issue_embeddings WHERE model = ?", [model]).fetchone()[0]

    def _load(self, con, model: str) -> None:
        cols = con.execute(_LOAD, {"model": model}).fetchnumpy()  # numpy columns: far faster than Python rows
        if len(cols["repo"]):  # a stored vector holding NaN or infinity is left out
            m = np.stack(cols["vector"]).astype(np.float32)
            ok = np.isfinite(m).all(axis=1)
            if not ok.all():
                cols = {f: cols[f][ok] for f in (*_FIELDS, "vector")}
                m = m[ok]
        self._columns = {f: cols[f] for f in _FIELDS}
        self._keys = list(zip(cols["repo"].tolist(), cols["number"].tolist()))
        if self._keys:
            self._matrix = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
        else:
            self._matrix = np.zeros((0, 0), dtype=np.float32)

    def _refresh(self, con, model: str) -> None:
        """Read the vectors unless those held are current for this connection and model."""
        same = self._con is not None and self._con() is con and self._model == model
        if same and self._read_only:
            return  # a read-only connection sees no writes
        if not same:
            self._read_only = con.execute("SELECT current_setting('access_mode')").fetchone()[0] == "read_only"
        count = self._count(con, model)
        if same and count == self._count_seen:
            return
        self._load(con, model)
        self._con, self._model, self._count_seen = weakref.ref(con), model, count

    def search(self, con, vector: np.ndarray, model: str, limit: int = 5,
               exclude: tuple[str, int] | None = None) -> list[dict]:
        """Up to `limit` issues, most similar first: repo, number, title, state, labels, html_url, score,
        known_fix (the team's, when the issue was labeled)."""
        if limit <= 0:
            return []
        self._refresh(con, model)
        if not self._keys:
            return []
        v = np.asarray(vector, dtype=np.float32)
        scores = self._matrix @ (v / max(float(np.linalg.norm(v)), 1e-12))
        k = min(len(scores), limit + 1)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.lexsort((top, -scores[top]))]  # by score, ties in stored order
        return [dict(self._row(i), score=float(scores[i])) for i in top if self._keys[i] != exclude][:limit]

    def _row(self, i: int) -> dict:
        out = {}
        for f, col in self._columns.items():
            value = col[i]
            if value is np.ma.masked:
                value = None
            elif isinstance(value, np.ndarray):
                value = value.tolist()
            elif isinstance(value, np.generic):
                value = value.item()
            out[f] = value
        return out
