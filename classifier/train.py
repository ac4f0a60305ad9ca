"""Training: labeled set -> embeddings (cached) -> features -> two heads -> abstain threshold -> saved model.

The dev split (classifier/dataset.py) never trains anything: it picks the regularisation strength and the
abstain threshold and reports the figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import duckdb
import numpy as np

from retriage.classifier import EMBEDDING_MODEL
from retriage.classifier.dataset import Example, load_gold, split
from retriage.classifier.embed import SentenceTransformerEmbedder
from retriage.classifier.embedding_cache import embed_cached
from retriage.classifier.evaluate import Scores, score
from retriage.classifier.features import VIEW_FIELDS, Tfidf, Views, dense_features, views
from retriage.classifier.head import LinearHead
from retriage.classifier.model import IssueClassifier, shipped_model_dir
from retriage.taxonomy import LABELS_DIR, component_ids, re_class_ids

C_GRID = (2.0, 4.0, 8.0)
MIN_COVERAGE = 0.85  # the abstain threshold may set aside at most 15 % of dev issues as `unsure`


@dataclass
class TrainResult:
    model: IssueClassifier
    version: str
    dev: dict  # target -> Scores
    coverage: float
    n_train: int
    n_dev: int


def embed_views(con: duckdb.DuckDBPyConnection | None, v: list[Views], progress: Callable[[int], None] | None = None,
                get_embedder: Callable[[], object] | None = None) -> list[np.ndarray]:
    """One embedding matrix per view (VIEW_FIELDS order), through the cache."""
    cache: dict = {}

    def embedder():
        if "e" not in cache:
            cache["e"] = (get_embedder or SentenceTransformerEmbedder)()
        return cache["e"]

    return [embed_cached(con, [getattr(x, f) for x in v], EMBEDDING_MODEL, embedder, progress) for f in VIEW_FIELDS]


def _heads(dense, sparse, y_re, y_comp, c_re, c_comp) -> tuple[LinearHead, LinearHead]:
    return (LinearHead.fit(dense, sparse, y_re, re_class_ids(), C=c_re),
            LinearHead.fit(dense, sparse, y_comp, component_ids(), C=c_comp))


def _macro_f1(head: LinearHead, dense, sparse_rows, gold: list[str]) -> float:
    z = head.logits(dense, sparse_rows)
    return score(gold, [head.classes[i] for i in z.argmax(1)], head.classes).macro_f1


def choose_threshold(confidences: np.ndarray, correct: np.ndarray, min_coverage: float = MIN_COVERAGE) -> float:
    """The confidence below which to abstain: the threshold with the best accuracy on the kept issues among
    those that keep at least `min_coverage` of them."""
    best_t, best_acc = 0.0, correct.mean() if len(correct) else 0.0
    for t in np.unique(confidences):
        keep = confidences >= t
        if keep.mean() < min_coverage:
            break
        acc = correct[keep].mean()
        if acc > best_acc + 1e-9:
            best_t, best_acc = float(t), acc
    return best_t


def train(con: duckdb.DuckDBPyConnection | None, labels_dir: Path = LABELS_DIR, out_dir: Path | None = None,
          progress: Callable[[int], None] | None = None, get_embedder=None) -> TrainResult:
    examples = load_gold(labels_dir)
    tr, dv = split(examples)
    tr_v = [views(e.title, e.body) for e in tr]
    dv_v = [views(e.title, e.body) for e in dv]
    tr_emb = embed_views(con, tr_v, progress, get_embedder)
    dv_emb = embed_views(con, dv_v, progress, get_embedder)
    tfidf = Tfidf().fit([x.lexical for x in tr_v])
    dense_tr = dense_features(tr_emb, [x.lexical for x in tr_v])
    sparse_tr = tfidf.transform([x.lexical for x in tr_v])
    dense_dv = dense_features(dv_emb, [x.lexical for x in dv_v])
    sparse_dv = [tfidf.transform_one(x.lexical) for x in dv_v]
    y_re = [e.re_class for e in tr]
    y_comp = [e.component for e in tr]

    # regularisation strength per head, chosen on dev
    best: dict[str, tuple[float, float]] = {}
    for c in C_GRID:
        re_head, comp_head = _heads(dense_tr, sparse_tr, y_re, y_comp, c, c)
        f_re = _macro_f1(re_head, dense_dv, sparse_dv, [e.re_class for e in dv])
        f_co = _macro_f1(comp_head, dense_dv, sparse_dv, [e.component for e in dv])
        if f_re > best.get("re", (-1, 0))[0]:
            best["re"] = (f_re, c)
        if f_co > best.get("co", (-1, 0))[0]:
            best["co"] = (f_co, c)
    model = IssueClassifier(tfidf, *_heads(dense_tr, sparse_tr, y_re, y_comp, best["re"][1], best["co"][1]),
                            threshold=0.0)
    preds = model.predict(dv_v, dv_emb)
    conf = np.array([p.re_confidence for p in preds])
    correct = np.array([p.re_class == e.re_class for p, e in zip(preds, dv)])
    model.threshold = choose_threshold(conf, correct)
    for p in preds:
        p.abstained = p.re_confidence < model.threshold
    dev = evaluate_predictions(dv, preds)
    coverage = float(np.mean([not p.abstained for p in preds])) if preds else 0.0
    model.meta = {
        "embedding_model": EMBEDDING_MODEL,
        "trained_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "n_train": len(tr), "n_dev": len(dv),
        "C": {"re_class": best["re"][1], "component": best["co"][1]},
        "dev": {"re_class_macro_f1": dev["re_class"].macro_f1, "component_macro_f1": dev["component"].macro_f1,
                "coverage": round(coverage, 4)},
    }
    version = model.save(out_dir or shipped_model_dir())
    return TrainResult(model, version, dev, coverage, len(tr), len(dv))


def evaluate_predictions(gold: list[Example], preds) -> dict[str, Scores]:
    return {
        "re_class": score([e.re_class for e in gold], [p.re_class for p in preds], re_class_ids()),
        "component": score([e.component for e in gold], [p.component for p in preds], component_ids()),
    }
