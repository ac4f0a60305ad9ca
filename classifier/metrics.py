"""Evaluation: macro-F1, per-class precision/recall, confusion matrices, and the baselines the model must
beat (majority class, keyword rules, TF-IDF + logistic regression). No I/O here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retriage.classifier.features import keyword_patterns
from retriage.core.folded import fold
from retriage.taxonomy import component_ids, re_class_ids


@dataclass
class Scores:
    labels: list[str]
    macro_f1: float
    accuracy: float
    per_class: dict  # label -> {precision, recall, f1, support}
    confusion: list[list[int]]  # rows: true label, columns: predicted label (order of `labels`)

    def to_dict(self) -> dict:
        return {"macro_f1": self.macro_f1, "accuracy": self.accuracy, "labels": self.labels,
                "per_class": self.per_class, "confusion": self.confusion}


def score(y_true: list[str], y_pred: list[str], labels: list[str]) -> Scores:
    """Macro-F1 over the labels that occur in y_true or y_pred (scikit-learn's convention and figures, in
    numpy: `eval` need not import scikit-learn to score remembered answers)."""
    seen = set(y_true) | set(y_pred)
    present = [c for c in labels if c in seen]
    index = {c: i for i, c in enumerate(present)}
    k = len(present)
    pairs = [(index[t], index[p]) for t, p in zip(y_true, y_pred) if t in index and p in index]
    cm = np.zeros((k, k), dtype=np.int64)
    for t, p in pairs:
        cm[t, p] += 1
    tp, support, predicted = np.diag(cm), cm.sum(1), cm.sum(0)
    precision = np.divide(tp, predicted, out=np.zeros(k), where=predicted > 0)
    recall = np.divide(tp, support, out=np.zeros(k), where=support > 0)
    f1 = np.divide(2 * tp, support + predicted, out=np.zeros(k), where=(support + predicted) > 0)
    per = {c: {"precision": round(float(precision[i]), 3), "recall": round(float(recall[i]), 3),
               "f1": round(float(f1[i]), 3), "support": int(support[i])} for i, c in enumerate(present)}
    accuracy = sum(t == p for t, p in zip(y_true, y_pred)) / len(y_true) if y_true else 0.0
    return Scores(present, round(float(f1.mean()) if k else 0.0, 4), round(float(accuracy), 4), per, cm.tolist())


# ---- baselines ------------------------------------------------------------------------------------------
def majority(train_y: list[str], n: int) -> list[str]:
    values, counts = np.unique(np.array(train_y), return_counts=True)
    return [str(values[counts.argmax()])] * n


def keyword_rules(texts: list[str], target: str) -> list[str]:
    """RE class: the first class (in the guide's tie-break order) with a keyword hit, else none.
    Component: the component with most keyword hits, else other."""
    pats = keyword_patterns()
    texts = [fold(t) for t in texts]
    out = []
    if target == "re_class":
        order = ["RE.2", "RE.3", "RE.4", "RE.1"]
        for t in texts:
            hit = next((c for c in order if any(p.search(t) for s, n, p in pats if s == "re_class" and n == c)), "none")
            out.append(hit)
    else:
        comps = component_ids()
        for t in texts:
            counts = {c: sum(1 for s, n, p in pats if s == "component" and n == c and p.search(t)) for c in comps}
            best = max(counts, key=counts.get)
            out.append(best if counts[best] else "other")
    return out


def tfidf_matrices(train_texts: list[str], test_texts: list[str]) -> tuple:
    """The published baseline's features: word 1-2 gram sublinear TF-IDF fitted on `train_texts`, for both sides
    (one fit serves every target of a split)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=50000)
    return vec.fit_transform(train_texts), vec.transform(test_texts)


def tfidf_logreg(train_texts: list[str], train_y: list[str], test_texts: list[str], matrices: tuple | None = None,
                 solver: str = "newton-cg") -> list[str]:
    """The published baseline's recipe: word 1-2 gram TF-IDF, class-weighted logistic regression (solved by
    Newton-CG: several times faster here than lbfgs, and nearer the optimum; bench/eval). `matrices`:
    tfidf_matrices(train_texts, test_texts), when the caller has them already."""
    from sklearn.linear_model import LogisticRegression

    X, X_test = matrices if matrices is not None else tfidf_matrices(train_texts, test_texts)
    m = LogisticRegression(C=10.0, class_weight="balanced", max_iter=2000, solver=solver).fit(X, train_y)
    return list(m.predict(X_test))


def labels_for(target: str) -> list[str]:
    return re_class_ids() if target == "re_class" else component_ids()


# ---- generalisation figures ---------------------------------------------------------------------------
def macro_f1(y_true: list[str], y_pred: list[str], labels: list[str]) -> float:
    return score(y_true, y_pred, labels).macro_f1


def bootstrap_interval(y_true: list[str], y_pred: list[str], labels: list[str], rounds: int = 1000,
                       seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the macro-F1 (issues resampled with replacement; per round, the
    macro-F1 over the labels present in that resample, as `score` computes it)."""
    if not y_true:
        return (0.0, 0.0)
    index = {c: i for i, c in enumerate(labels)}
    k = len(labels)
    t = np.array([index[y] for y in y_true])
    p = np.array([index[y] for y in y_pred])
    rng = np.random.default_rng(seed)
    i = rng.integers(0, len(t), (rounds, len(t)))  # the same draws as one call per round
    codes = (t[i] * k + p[i]) + (np.arange(rounds) * k * k)[:, None]
    cm = np.bincount(codes.ravel(), minlength=rounds * k * k).reshape(rounds, k, k)
    tp, support, predicted = np.einsum("rii->ri", cm), cm.sum(2), cm.sum(1)
    present = (support + predicted) > 0
    f1 = np.divide(2 * tp, support + predicted, out=np.zeros((rounds, k)), where=present)
    stats = (f1 * present).sum(1) / present.sum(1)
    lo, hi = np.quantile(stats, [(1 - level) / 2, 1 - (1 - level) / 2])
    return (round(float(lo), 4), round(float(hi), 4))


def detection(y_true: list[str], y_pred: list[str], negative: str = "none") -> dict:
    """Resource-bug detection: any RE class against `none`, as precision, recall and counts."""
    t = np.array([y != negative for y in y_true])
    p = np.array([y != negative for y in y_pred])
    tp = int((t & p).sum())
    return {"precision": round(tp / p.sum(), 4) if p.sum() else 0.0,
            "recall": round(tp / t.sum(), 4) if t.sum() else 0.0,
            "flagged": int(p.sum()), "positives": int(t.sum())}


def counted_detection(y_true: list[str], y_pred: list[str], unsure: list[bool], negative: str = "none") -> dict:
    """Resource-bug detection as the weekly report and the bot count it: an issue is flagged when its RE class is
    not `negative` and the model did not abstain (`unsure`), so precision is over the flagged issues and recall
    over every resource bug, unsure ones included; "unsure" is how many were set aside."""
    kept = np.array([not u for u in unsure], dtype=bool)
    t = np.array([y != negative for y in y_true], dtype=bool)
    p = np.array([y != negative for y in y_pred], dtype=bool) & kept
    tp = int((t & p).sum())
    return {"precision": round(tp / p.sum(), 4) if p.sum() else 0.0,
            "recall": round(tp / t.sum(), 4) if t.sum() else 0.0,
            "flagged": int(p.sum()), "positives": int(t.sum()), "unsure": int((~kept).sum())}


def fix_recall(gold: list[str], predicted: list[list[str]], negative: str = "none") -> dict:
    """Share of the issues whose label names a known fix that get that fix among the predicted ones ("recall",
    over "n" such issues), and, over all issues, the share of the fix tags shown that are the label's
    ("precision", over "shown" tags)."""
    pairs = [(g, p) for g, p in zip(gold, predicted) if g != negative]
    hit = sum(g in p for g, p in pairs)
    shown = sum(len(set(p) - {negative}) for p in predicted)  # a right tag shown is one of the hits
    return {"recall": round(hit / len(pairs), 4) if pairs else None, "n": len(pairs),
            "precision": round(hit / shown, 4) if shown else None, "shown": shown}
