"""The fast path of `retriage classify`: static MiniLM features stand in for the three MiniLM views, and the
full model runs only when the fast answer lies close to a decision boundary.

The full model's logits are a lexical part (keyword and rule signals, TF-IDF, bias), cheap to compute exactly,
plus an embedding part, `view embeddings @ weights`, which costs three MiniLM passes. The fast head is
distilled from the full model, never fitted to labels: a ridge regression learns that embedding part (five
RE-class and six component logits) from static features — the idf-weighted static MiniLM average of each view
(classifier/static_embed.py) and a bag of word pieces of the prepared text and of the key lines — over the
training split and the unlabeled snapshot issues, never the dev split. A second ridge map estimates the MiniLM
vector of the first view, used to look up similar issues; a third estimates the issue's vote vector (the
normalised sum of its three unit view vectors, classifier/nearest_labels.py), so that the fast answer, like the
full model's, takes the nearest labeled issues' votes (found with the estimate).

The gate: the fast answer stands when its two most likely RE classes are at least `re_margin` apart (calibrated
probabilities) and its two most likely components at least `component_margin`; otherwise the caller runs the
full model. Both margins are the smallest that reach the agreement targets below on the dev split: issues the
model was not trained on. (Out-of-fold answers on the training data would not do: the model fits its own
training issues so well that fast and full answers part there far less often than on new issues.) Two
numbers keep that choice honest: the margins chosen on one half of dev and measured on the other, and the
real traces of tests/data/traces, which no step of training or gating sees (bench/classify).

Stored beside the model as `fast.npz` (arrays, loaded with allow_pickle=False) and `fast.json`, which names the
model version it was distilled from: a fast head never serves another model.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retriage.classifier.features import VIEW_FIELDS, Views
from retriage.classifier.static_embed import TABLE_VERSION, StaticMiniLM

FAST_WEIGHTS = "fast.npz"
FAST_META = "fast.json"
FORMAT = 3  # bump when what the arrays mean changes (2: bag weights stored for unscaled bags; 3: the vote vector)
BOW_VIEWS = ("full", "keys")  # views whose word pieces also enter as a bag
ALPHA = 1.0  # ridge strength for the logits (features are unit-length blocks)
BOW_WEIGHT = 0.5  # bag-of-word-pieces block against the static averages
SIM_ALPHA = 0.3  # ridge strength for the MiniLM-vector estimate
VOTE_ALPHA = 0.3  # ridge strength for the vote-vector estimate
RE_AGREEMENT = 0.99  # out-of-fold share of RE classes equal to the full model's, fallbacks counted as equal
COMPONENT_AGREEMENT = 0.95
MARGIN_GRID = tuple(np.round(np.arange(0.0, 0.81, 0.02), 2))


@dataclass
class FastHead:
    idf: np.ndarray  # (vocab,) word-piece weights, for the averages and the bags
    w_static: np.ndarray  # (views * dim, k): k = RE classes + components
    w_bow: np.ndarray  # (len(BOW_VIEWS) * vocab, k), for unscaled bags
    bias: np.ndarray  # (k,)
    w_sim: np.ndarray  # (views * dim, dim): estimate of the first view's MiniLM vector
    b_sim: np.ndarray  # (dim,)
    w_vote: np.ndarray  # (views * dim, dim): estimate of the vote vector (nearest_labels.representation)
    b_vote: np.ndarray  # (dim,)
    n_re: int  # the first n_re outputs are RE-class logits, the rest component logits
    re_margin: float = 0.0
    component_margin: float = 0.0
    meta: dict = field(default_factory=dict)

    # ---- features ---------------------------------------------------------------------------------------
    @staticmethod
    def view_ids(static: StaticMiniLM, v: list[Views]) -> dict[str, list]:
        """Word-piece ids of every view of every issue (one tokenizer call)."""
        flat = static.token_ids([getattr(x, f) for f in VIEW_FIELDS for x in v])
        n = len(v)
        return {f: flat[k * n : (k + 1) * n] for k, f in enumerate(VIEW_FIELDS)}

    def static_features(self, static: StaticMiniLM, v: list[Views],
                        ids: dict[str, list] | None = None) -> tuple[np.ndarray, dict[str, list]]:
        """(idf-weighted static averages of every view side by side, word-piece ids per view)."""
        ids = ids if ids is not None else self.view_ids(static, v)
        return np.hstack([static.pool(ids[f], self.idf) for f in VIEW_FIELDS]), ids

    def _bag(self, ids: np.ndarray, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """Sublinear tf-idf over one text's word pieces, unit length, times `scale`: (indices, values)."""
        if len(ids) == 0:
            return ids, np.zeros(0, dtype=np.float32)
        u, c = np.unique(ids, return_counts=True)
        vals = (1.0 + np.log(c)) * self.idf[u]
        return u, (vals / max(float(np.linalg.norm(vals)), 1e-12) * scale).astype(np.float32)

    def design_matrix(self, static_avgs: np.ndarray, ids: dict[str, list]):
        """The ridge inputs as one sparse matrix [averages | BOW_WEIGHT x bag of each BOW_VIEWS view] (for
        fitting; the fitted bag weights are stored times BOW_WEIGHT, so prediction reads unscaled bags)."""
        from scipy.sparse import csr_matrix, hstack

        vocab = len(self.idf)
        blocks = [csr_matrix(static_avgs)]
        for f in BOW_VIEWS:
            rows, cols, vals = [], [], []
            for i, x in enumerate(ids[f]):
                u, w = self._bag(x, BOW_WEIGHT)
                rows.append(np.full(len(u), i))
                cols.append(u)
                vals.append(w)
            blocks.append(csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                     shape=(len(static_avgs), vocab)))
        return hstack(blocks).tocsr()

    # ---- prediction -------------------------------------------------------------------------------------
    def embedding_logits(self, static_avgs: np.ndarray, ids: dict[str, list]) -> tuple[np.ndarray, np.ndarray]:
        """The estimated embedding part of each head's logits."""
        z = static_avgs @ self.w_static + self.bias
        vocab = len(self.idf)
        for b, f in enumerate(BOW_VIEWS):
            for i, x in enumerate(ids[f]):
                u, w = self._bag(x)
                if len(u):
                    z[i] += w @ self.w_bow[b * vocab + u]
        return z[:, : self.n_re], z[:, self.n_re :]

    def first_view_vector(self, static_avgs: np.ndarray) -> np.ndarray:
        """Estimated MiniLM vector of the first view (unit length), for similar issues."""
        e = static_avgs @ self.w_sim + self.b_sim
        return (e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)).astype(np.float32)

    def vote_vector(self, static_avgs: np.ndarray) -> np.ndarray:
        """Estimated vote vector of each issue (not normalised: the nearest labels normalise it)."""
        return (static_avgs @ self.w_vote + self.b_vote).astype(np.float32)

    def probabilities(self, model, z_re: np.ndarray, z_comp: np.ndarray, static_avgs: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
        """The fast answer's calibrated probabilities from its logits: `model`'s, with the nearest labeled issues'
        votes found by the estimated vote vector."""
        return model.probabilities(z_re, z_comp, self.vote_embeddings(static_avgs))

    def vote_embeddings(self, static_avgs: np.ndarray) -> list[np.ndarray]:
        """What `IssueClassifier.probabilities` and `.predictions` take as the issues' embeddings for the votes."""
        return [self.vote_vector(static_avgs)]

    def confident(self, p_re: np.ndarray, p_comp: np.ndarray) -> np.ndarray:
        """Which fast answers stand (True) and which need the full model."""
        return (margins(p_re) >= self.re_margin) & (margins(p_comp) >= self.component_margin)

    # ---- persistence ------------------------------------------------------------------------------------
    def save(self, folder: Path) -> None:
        folder = Path(folder)
        tmp = folder / (FAST_WEIGHTS + ".tmp.npz")
        np.savez(tmp, idf=self.idf, w_static=self.w_static, w_bow=self.w_bow, bias=self.bias, w_sim=self.w_sim,
                 b_sim=self.b_sim, w_vote=self.w_vote, b_vote=self.b_vote)
        meta = dict(self.meta, n_re=self.n_re, re_margin=self.re_margin, component_margin=self.component_margin,
                    static_table_version=TABLE_VERSION, format=FORMAT, weights_sha256=_sha256(tmp))
        (folder / (FAST_META + ".tmp")).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        tmp.replace(folder / FAST_WEIGHTS)
        (folder / (FAST_META + ".tmp")).replace(folder / FAST_META)
        self.meta = meta

    @classmethod
    def load(cls, folder: Path, model_version: str | None) -> tuple[FastHead | None, str]:
        """(the fast head, "") or (None, why not) when it is missing or belongs to another model."""
        folder = Path(folder)
        if not (folder / FAST_WEIGHTS).is_file() or not (folder / FAST_META).is_file():
            return None, "no fast head beside the model (run `retriage train --fast-only`)"
        try:
            meta = json.loads((folder / FAST_META).read_text())
            if meta.get("format") != FORMAT:  # before the arrays: another format names other arrays
                return None, ("the fast head was written by another version of retriage "
                              "(run `retriage train --fast-only`)")
            with np.load(folder / FAST_WEIGHTS, allow_pickle=False) as a:
                arrays = {k: a[k] for k in a.files}
            head = cls(arrays["idf"], arrays["w_static"], arrays["w_bow"], arrays["bias"], arrays["w_sim"],
                       arrays["b_sim"], arrays["w_vote"], arrays["b_vote"], int(meta["n_re"]),
                       float(meta["re_margin"]), float(meta["component_margin"]), meta)
            problem = head._problem(meta.get("weights_sha256"), _sha256(folder / FAST_WEIGHTS))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, zipfile.BadZipFile) as e:
            return None, f"the fast head in {folder} is unreadable ({type(e).__name__}): run `retriage train --fast-only`"
        if problem:
            return None, f"the fast head in {folder} is damaged ({problem}): run `retriage train --fast-only`"
        if meta.get("teacher_model_version") != model_version:
            return None, (f"the fast head was distilled from model {meta.get('teacher_model_version')}, "
                          f"not {model_version} (run `retriage train --fast-only`)")
        if meta.get("static_table_version") != TABLE_VERSION:
            return None, "the fast head was distilled from another static table (run `retriage train --fast-only`)"
        return head, ""


    def _problem(self, recorded_sha256, sha256: str) -> str:
        """What is wrong with the loaded arrays ("" when nothing): checksum, shapes, dtypes, finiteness."""
        if recorded_sha256 != sha256:
            return "checksum differs from the one recorded in fast.json" if recorded_sha256 else \
                "no checksum recorded in fast.json"
        vocab, dim = len(self.idf), self.b_sim.shape[0] if self.b_sim.ndim == 1 else -1
        k = self.bias.shape[0] if self.bias.ndim == 1 else -1
        width = self.w_static.shape[0]  # the static vectors of every view side by side
        want = {"idf": (vocab,), "w_static": (width, k), "w_bow": (len(BOW_VIEWS) * vocab, k), "bias": (k,),
                "w_sim": (width, dim), "b_sim": (dim,), "w_vote": (width, dim), "b_vote": (dim,)}
        for name, shape in want.items():
            a = getattr(self, name)
            if a.shape != shape or a.dtype.kind != "f":
                return f"{name} has shape {a.shape} and dtype {a.dtype}, not {shape}"
            if not np.isfinite(a).all():
                return f"{name} holds NaN or infinite values"
        if not 0 < self.n_re < k or vocab == 0 or width % len(VIEW_FIELDS):
            return f"n_re {self.n_re} does not fit {k} outputs"
        return ""


def _sha256(path: Path) -> str:
    import hashlib

    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def margins(p: np.ndarray) -> np.ndarray:
    """Difference between the two largest probabilities of each row."""
    top = np.sort(p, axis=1)
    return top[:, -1] - top[:, -2]


def idf_weights(ids_lists: list[np.ndarray], vocab: int) -> np.ndarray:
    df = np.zeros(vocab, dtype=np.float64)
    for ids in ids_lists:
        df[np.unique(ids)] += 1
    return (np.log((len(ids_lists) + 1) / (df + 1)) + 1).astype(np.float32)


def choose_margin(margin: np.ndarray, agree: np.ndarray, target: float) -> float:
    """The smallest margin whose gate keeps the share of answers equal to the full model's at `target` or more
    (an answer below the margin goes to the full model, so it counts as equal)."""
    for m in MARGIN_GRID:
        if np.mean(agree | (margin < m)) >= target:
            return float(m)
    return float(MARGIN_GRID[-1])
