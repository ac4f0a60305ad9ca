"""The labeled issues nearest an issue, as a second opinion beside the heads.

Each labeled issue the model was fitted on is kept as one unit vector — the sum of its three unit MiniLM view
vectors, normalised — with its RE class and component. An issue's k nearest of them (cosine) vote for their
labels, each vote weighted by exp(similarity / temperature) and divided by its class's frequency raised to
`balance` (so the many `none` issues do not outvote every small class); the votes, normalised, are mixed into
the heads' calibrated probabilities with `weight`. The heads are linear in the embeddings; the votes follow the
local shape of the labeled set (an error string met in a handful of labeled issues), which a linear map smooths
away. `retriage train` chooses the settings on the same blocked folds as the heads'
(classifier/settings_search.py).

Corrections count at once: `with_corrections` appends the issues corrected or confirmed in a database (`relabel`,
`review`, maintainers' labels) to the model's neighbours, their vectors from the embedding cache, so `label`,
`review` and `show` of a fetched issue vote with them on the next command; `train` folds them in later.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retriage.classifier.embed import DIM
from retriage.classifier.features import VIEW_FIELDS

SETTING_KEYS = ("k", "temperature", "balance", "weight")


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-9)


def representation(embeddings: list[np.ndarray]) -> np.ndarray:
    """One unit vector per issue from its view embeddings (VIEW_FIELDS order): the normalised sum of the unit
    view vectors."""
    return _unit(sum(_unit(e) for e in embeddings))


def views_of_dense(dense: np.ndarray) -> list[np.ndarray]:
    """The view embeddings inside dense features (features.dense_features puts them first, VIEW_FIELDS order)."""
    return [dense[:, i * DIM:(i + 1) * DIM] for i in range(len(VIEW_FIELDS))]


def votes(similarity: np.ndarray, labels: np.ndarray, n_classes: int, k: int, temperature: float,
          balance: float) -> np.ndarray:
    """Each row's normalised votes over `n_classes` from its k most similar columns (`labels`: each column's
    class index)."""
    k = max(1, min(int(k), similarity.shape[1]))
    idx = np.argpartition(-similarity, k - 1, axis=1)[:, :k]
    near = np.take_along_axis(similarity, idx, 1)
    freq = np.bincount(labels, minlength=n_classes).clip(1).astype(np.float64)
    y = labels[idx]
    w = np.exp((near - near.max(1, keepdims=True)) / temperature) / freq[y] ** balance
    out = np.zeros((similarity.shape[0], n_classes))
    for c in range(n_classes):
        out[:, c] = (w * (y == c)).sum(1)
    return out / out.sum(1, keepdims=True).clip(1e-12)


@dataclass
class NearestLabels:
    vectors: np.ndarray  # (n, DIM) unit vectors of the labeled issues (float16 values, held as float32)
    re_labels: np.ndarray  # (n,) index into the RE head's classes
    component_labels: np.ndarray  # (n,) index into the component head's classes
    n_re: int
    n_component: int
    k: int
    temperature: float
    balance: float
    weight: float

    @classmethod
    def fit(cls, embeddings: list[np.ndarray], re_labels: list[str], components: list[str],
            re_classes: list[str], component_classes: list[str], settings: dict) -> "NearestLabels":
        ri = {c: i for i, c in enumerate(re_classes)}
        ci = {c: i for i, c in enumerate(component_classes)}
        return cls(representation(embeddings).astype(np.float16), np.array([ri[y] for y in re_labels], np.int16),
                   np.array([ci[y] for y in components], np.int16), len(re_classes), len(component_classes),
                   **{k: settings[k] for k in SETTING_KEYS})

    def __post_init__(self):
        # stored as float16; held as float32 (the float16 values exactly), converted once: converting them on
        # every call cost about 2 ms of a single issue's 2.3 ms of votes
        self.vectors = np.asarray(self.vectors, dtype=np.float16).astype(np.float32)

    @property
    def settings(self) -> dict:
        return {k: getattr(self, k) for k in SETTING_KEYS}

    def votes(self, embeddings: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The neighbours' votes (RE class, component) for issues given their view embeddings."""
        s = representation(embeddings) @ self.vectors.T
        return (votes(s, self.re_labels.astype(np.int64), self.n_re, self.k, self.temperature, self.balance),
                votes(s, self.component_labels.astype(np.int64), self.n_component, self.k, self.temperature,
                      self.balance))

    def nearest(self, embeddings: list[np.ndarray]) -> np.ndarray:
        """Each issue's cosine similarity to its nearest labeled issue (how unlike everything labeled it is)."""
        if not len(self.vectors):
            return np.zeros(len(embeddings[0]), dtype=np.float32)
        return (representation(embeddings) @ self.vectors.T).max(1)

    def extended(self, vectors: np.ndarray, re_labels: np.ndarray, component_labels: np.ndarray
                 ) -> "NearestLabels":
        """These neighbours with more labeled issues after them (unit vectors and label indices): recorded
        corrections and confirmations vote at once, without a retrain."""
        if not len(vectors):
            return self
        return NearestLabels(np.vstack([self.vectors, np.asarray(vectors, np.float32)]),
                             np.concatenate([self.re_labels, np.asarray(re_labels, np.int16)]),
                             np.concatenate([self.component_labels, np.asarray(component_labels, np.int16)]),
                             self.n_re, self.n_component, self.k, self.temperature, self.balance, self.weight)

    def mix(self, p_re: np.ndarray, p_comp: np.ndarray, embeddings: list[np.ndarray]
            ) -> tuple[np.ndarray, np.ndarray]:
        """The heads' probabilities with the neighbours' votes mixed in."""
        if self.weight <= 0 or not len(p_re):
            return p_re, p_comp
        v_re, v_comp = self.votes(embeddings)
        w = self.weight
        return (1 - w) * p_re + w * v_re, (1 - w) * p_comp + w * v_comp

    # ---- persistence (arrays in the model's weights.npz, settings in its meta.json) -------------------------
    def to_arrays(self, prefix: str = "nearest") -> dict[str, np.ndarray]:
        return {f"{prefix}_vectors": self.vectors.astype(np.float16), f"{prefix}_re": self.re_labels,
                f"{prefix}_component": self.component_labels}

    @classmethod
    def from_arrays(cls, arrays: dict, settings: dict, n_re: int, n_component: int,
                    prefix: str = "nearest") -> "NearestLabels":
        vectors = arrays[f"{prefix}_vectors"]
        re_labels, comp_labels = arrays[f"{prefix}_re"], arrays[f"{prefix}_component"]
        if vectors.ndim != 2 or vectors.shape[1] != DIM or not (len(vectors) == len(re_labels) == len(comp_labels)):
            raise ValueError(f"neighbour arrays of shapes {vectors.shape}, {re_labels.shape}, {comp_labels.shape}")
        if len(re_labels) and (re_labels.max() >= n_re or comp_labels.max() >= n_component or
                               min(re_labels.min(), comp_labels.min()) < 0):
            raise ValueError("neighbour labels outside the heads' classes")
        return cls(vectors, re_labels, comp_labels, n_re, n_component,
                   int(settings["k"]), float(settings["temperature"]), float(settings["balance"]),
                   float(settings["weight"]))


# ---- corrections as labeled neighbours ------------------------------------------------------------------------
@dataclass
class Corrected:
    """The corrections in force in a database, as labeled neighbours."""
    keys: list[tuple[str, int]]
    vectors: np.ndarray  # (n, DIM) representation of each corrected issue's views
    re_classes: list[str]
    components: list[str]
    at: list  # when each was recorded (datetime)


def corrected_neighbours(con, embedder=None) -> Corrected:
    """Every correction in force whose issue the database holds, with its vector: the three views' embeddings
    from the cache, the few missing embedded (numpy MiniLM) and cached where the connection may write."""
    import duckdb

    from retriage.classifier import EMBEDDING_MODEL
    from retriage.classifier.embed import get_embedder, text_hash
    from retriage.classifier.embedding_cache import lookup
    from retriage.classifier.features import views
    from retriage.db import queries, writes

    rows = [r for r in queries.corrections(con) if r.get("title") is not None]
    if not rows:
        return Corrected([], np.zeros((0, DIM), np.float32), [], [], [])
    docs = [views(r["title"], r["body"]) for r in rows]
    texts = [[getattr(d, f) for d in docs] for f in VIEW_FIELDS]
    have = lookup(con, [text_hash(t) for ts in texts for t in ts], EMBEDDING_MODEL)
    missing = list(dict.fromkeys(t for ts in texts for t in ts if text_hash(t) not in have))
    if missing:
        new = dict(zip((text_hash(t) for t in missing), (embedder or get_embedder("numpy")).encode(missing)))
        try:
            writes.save_embeddings(con, new, EMBEDDING_MODEL)
        except duckdb.Error:  # a read-only connection: the vectors serve this run only
            pass
        have.update(new)
    emb = [np.vstack([have[text_hash(t)] for t in ts]) for ts in texts]
    return Corrected([(r["repo"], int(r["number"])) for r in rows], representation(emb),
                     [r["re_class"] for r in rows], [r["component"] for r in rows], [r["corrected_at"] for r in rows])


def with_corrections(model, con, embedder=None):
    """The model (a shallow copy) whose neighbours' votes count the database's corrections and confirmations;
    the model itself where it has no neighbours or the database no corrections. `meta["corrections_voting"]` says
    how many were added."""
    import copy

    nl = model.nearest_labels
    if nl is None or nl.weight <= 0:
        return model
    c = corrected_neighbours(con, embedder)
    ri = {x: i for i, x in enumerate(model.re_head.classes_)}
    ci = {x: i for i, x in enumerate(model.component_head.classes_)}
    keep = [i for i in range(len(c.keys)) if c.re_classes[i] in ri and c.components[i] in ci]
    if not keep:
        return model
    out = copy.copy(model)
    out.nearest_labels = nl.extended(c.vectors[keep], np.array([ri[c.re_classes[i]] for i in keep]),
                                     np.array([ci[c.components[i]] for i in keep]))
    out.meta = dict(model.meta, corrections_voting=len(keep))
    return out
