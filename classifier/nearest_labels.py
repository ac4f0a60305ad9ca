"""The labeled issues nearest an issue, as a second opinion beside the heads.

Each labeled issue the model was fitted on is kept as one unit vector — the sum of its three unit MiniLM view
vectors, normalised — with its RE class and component. An issue's k nearest of them (cosine) vote for their
labels, each vote weighted by exp(similarity / temperature) and divided by its class's frequency raised to
`balance` (so the many `none` issues do not outvote every small class); the votes, normalised, are mixed into
the heads' calibrated probabilities with `weight`. The heads are linear in the embeddings; the votes follow the
local shape of the labeled set (an error string met in a handful of labeled issues), which a linear map smooths
away. `retriage train` chooses the settings on the same blocked folds as the heads' (train._search_nearest_labels).
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
