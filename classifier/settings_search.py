"""`retriage train --search`: the settings ClassifierFit (classifier/train.py) is given, chosen on four blocked folds
(the dev split and three older stretches of each repository: dataset.fold_numbers). One fold loop, scikit-learn's
cross_validate (`per_fold`), fits an estimator on each fold's other issues and measures it on the fold's; a rule
over the folds' measures then chooses: each head's setting (`choose_head`), the fix head's (`fix_fold_scores`), the
votes' (`choose_nearest_labels`), both thresholds from one calibrated model per fold (`choose_thresholds`).
A train without --search never imports this module.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from sklearn.base import BaseEstimator

from retriage.classifier.dataset import Example
from retriage.classifier.features import Tfidf, Views
from retriage.classifier.head import LinearHead, softmax
from retriage.classifier.metrics import counted_detection, detection, macro_f1, score
from retriage.classifier.model import engine_fix
from retriage.classifier.nearest_labels import SETTING_KEYS as NEAREST_KEYS
from retriage.classifier.nearest_labels import representation, votes
from retriage.classifier.train import CLASSES, ClassifierFit, Issues, labels_of
from retriage.core.errors import UserError
from retriage.taxonomy import component_ids, re_class_ids

# ---- what `retriage train --search` tries ----------------------------------------------------------------------------
# the heads' regularisation strengths; with Newton-CG (an exact optimum) the folds chose 1 for the RE and component
# heads, so 0.5 is in the grid to show 1 is not the grid's edge
C_GRID = (0.5, 1.0, 2.0, 4.0, 8.0)
SPARSE_WEIGHTS = (1.0, 2.0)
# (regularisation strength, weight) of the TF-IDF-only model added to each head's logits; (0, 0): none
LEXICAL_BLENDS = ((0.0, 0.0), (3.0, 0.3), (3.0, 0.6), (10.0, 0.3), (10.0, 0.6))
MIN_PRECISION = 0.80  # the resource-bug detection precision the votes (mean over the folds) and the abstain threshold
# (every fold's, unsure set aside) must keep
# the abstain thresholds tried (0: never abstain): the lowest, the best recall, at which every fold's resource-bug
# detection precision, counted as the weekly report and the bot count it, is MIN_PRECISION or more
ABSTAIN_THRESHOLDS = (0.0,) + tuple(round(0.30 + 0.01 * i, 2) for i in range(61))
FIX_THRESHOLDS = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
FIX_MIN_RECALL = 0.80  # the known-fix recall (mean over the folds) the fix threshold must keep
# the nearest labeled issues' votes (classifier/nearest_labels.py): how many, how sharply similarity weighs, how much
# a vote is divided by its class's frequency, and how much of the answer they make (0: none)
NEAREST_K = (5, 10, 20)
NEAREST_TEMPERATURES = (0.05, 0.1)
NEAREST_BALANCES = (0.5, 1.0)
NEAREST_WEIGHTS = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6)


def per_fold(estimator: BaseEstimator, measure: Callable, X: Issues, y: np.ndarray, folds) -> np.ndarray:
    """What `measure(fitted, X_fold, y_fold)` (an array) says on each fold's issues of `estimator` fitted on the
    fold's other issues, shape (folds, *the measure's): scikit-learn's cross_validate over `folds` ((fitted on,
    scored on) rows, or a splitter), the search's one fold loop."""
    from sklearn.model_selection import cross_validate

    shape: list[int] = []

    def scorer(fitted, X_fold, y_fold) -> dict:  # cross_validate keeps named numbers: the array's, by position
        m = np.asarray(measure(fitted, X_fold, y_fold), dtype=np.float64)
        shape[:] = m.shape
        return {str(i): x for i, x in enumerate(m.ravel())}

    scores = cross_validate(estimator, X, y, cv=folds, scoring=scorer, error_score="raise")
    flat = np.stack([scores[f"test_{i}"] for i in range(int(np.prod(shape)))], axis=1)
    return flat.reshape(len(flat), *shape)


def fold_mean(per: np.ndarray) -> np.ndarray:
    return (per / len(per)).sum(axis=0)  # a fold at a time, as the choices were always summed


class HeadGrid(BaseEstimator):
    """An uncalibrated head for `target` per setting of `grid` ((C, TF-IDF weight, TF-IDF-only C, blend)): each
    (C, weight) head and each TF-IDF-only model is fitted once, and a blend's logits are the head's plus the blend
    times the TF-IDF-only model's (LinearHead folds the same sum into its weights)."""

    def __init__(self, target: str = "re_class", grid: tuple = ()):
        self.target, self.grid = target, grid

    def fit(self, X: Issues, y: np.ndarray) -> "HeadGrid":
        self.tfidf_ = Tfidf().fit(X.lexical)
        sparse, yt, classes = self.tfidf_.transform(X.lexical), list(y[self.target]), CLASSES[self.target]()
        no_dense = np.zeros((len(X), 0), np.float32)
        self.lexical_ = {lc: LinearHead(C=lc, calibrate=False).fit(no_dense, sparse, yt, classes)
                         for lc in sorted({lc for _, _, lc, blend in self.grid if blend > 0})}
        self.heads_ = {(c, sw): LinearHead(C=c, sparse_weight=sw, calibrate=False).fit(X.dense, sparse, yt, classes)
                       for c, sw in dict.fromkeys((c, sw) for c, sw, _, _ in self.grid)}  # each once, in grid order
        return self

    def logits(self, X: Issues) -> list[tuple[np.ndarray, list[str]]]:
        """Per setting (grid order) the logits on `X` and their classes."""
        rows = [self.tfidf_.transform_one(t) for t in X.lexical]
        lexical = {lc: m.logits(np.zeros((len(X), 0), np.float32), rows) for lc, m in self.lexical_.items()}
        heads = {k: h.logits(X.dense, rows) for k, h in self.heads_.items()}
        return [(heads[(c, sw)] + blend * lexical[lc] if blend > 0 else heads[(c, sw)], self.heads_[(c, sw)].classes_)
                for c, sw, lc, blend in self.grid]


def choose_head(X: Issues, y: np.ndarray, folds, target: str) -> dict:
    """The head's (C, TF-IDF weight, TF-IDF-only C, blend) with the best mean macro-F1 over the folds (ties: the
    first in grid order, which holds the smaller C)."""
    grid = tuple((c, sw, lc, blend) for sw in SPARSE_WEIGHTS for c in C_GRID for lc, blend in LEXICAL_BLENDS)

    def measure(fitted: HeadGrid, X_fold: Issues, y_fold: np.ndarray) -> np.ndarray:
        gold = list(y_fold[target])
        return [score(gold, [cl[i] for i in z.argmax(1)], cl).macro_f1 for z, cl in fitted.logits(X_fold)]

    mean_f1 = fold_mean(per_fold(HeadGrid(target, grid), measure, X, y, folds))  # per setting
    best = max(range(len(grid)), key=lambda i: round(float(mean_f1[i]), 9))  # max keeps the first of equal ones
    return dict(zip(("C", "sparse_weight", "lexical_C", "lexical_blend"), grid[best]))


def fix_counts(want: list[set], got: list[set]) -> tuple[float, float]:
    """(F1, recall) of the known-fix tags shown (`got`) against the labels' (`want`), per issue."""
    tp = sum(len(g & w) for g, w in zip(got, want))
    fp = sum(len(g - w) for g, w in zip(got, want))
    fn = sum(len(w - g) for g, w in zip(got, want))
    return 2 * tp / max(2 * tp + fp + fn, 1), tp / max(tp + fn, 1)


def fix_fold_scores(X: Issues, y: np.ndarray, folds) -> dict[tuple[float, float], np.ndarray]:
    """The fix head's (C, TF-IDF weight) -> [mean F1, mean recall] over the folds of the known fixes shown: the
    rules' tags and the uncalibrated head's likeliest answer in the issue's engine's terms (no threshold yet)."""
    grid = tuple((c, sw, 0.0, 0.0) for sw in SPARSE_WEIGHTS for c in C_GRID)

    def measure(fitted: HeadGrid, X_fold: Issues, y_fold: np.ndarray) -> list:
        want = [{t} - {"none"} for t in y_fold["known_fix"]]
        rules = [v.fixes(engine) for v, engine in zip(X_fold.views, X_fold.engines)]
        return [fix_counts(want, [set(r) | ({engine_fix(dict(zip(cl, row)), engine)[0]} - {"none"})
                                  for r, row, engine in zip(rules, softmax(z), X_fold.engines)])
                for z, cl in fitted.logits(X_fold)]

    totals = fold_mean(per_fold(HeadGrid("known_fix", grid), measure, X, y, folds))
    return {(c, sw): t for (c, sw, _, _), t in zip(grid, totals)}


def best_fix_setting(totals: dict[tuple[float, float], np.ndarray]) -> tuple[float, float]:
    """The (C, TF-IDF weight) whose mean F1, rounded to two places, is the highest; among equal ones the best mean
    recall, since a missing fix is what the known-fix recall counts; the first in grid order when both tie."""
    return max(totals, key=lambda k: (round(float(totals[k][0]), 2), round(float(totals[k][1]), 9)))


class NearestGrid(BaseEstimator):
    """The RE and component heads fitted calibrated with the settings `heads`, beside the labeled issues whose
    votes (`scores`: for each setting of a grid of NEAREST_*) are mixed into the heads' answers."""

    def __init__(self, heads: dict | None = None):
        self.heads = heads

    def fit(self, X: Issues, y: np.ndarray) -> "NearestGrid":
        self.model_ = ClassifierFit(re_class=self.heads["re_class"], component=self.heads["component"]).fit(X, y).model_
        self.representation_ = representation(X.embeddings)
        self.re_ = np.array([self.model_.re_head.classes_.index(c) for c in y["re_class"]])
        self.component_ = np.array([self.model_.component_head.classes_.index(c) for c in y["component"]])
        return self

    def scores(self, X: Issues, y: np.ndarray, grid: list[tuple]) -> np.ndarray:
        """Per (k, temperature, balance, weight) of `grid`: the mean of the RE and component macro-F1, and the
        resource-bug detection precision."""
        m, (re_cl, comp_cl) = self.model_, (self.model_.re_head.classes_, self.model_.component_head.classes_)
        (lr, lc), (er, ec) = m.lexical_logits(X.views), m.embedding_logits(X.embeddings)
        p_re, p_comp = m.probabilities(lr + er, lc + ec)
        s = representation(X.embeddings) @ self.representation_.T
        gold_re, gold_comp = list(y["re_class"]), list(y["component"])
        voted, out = {}, []
        for k, t, b, w in grid:
            if (k, t, b) not in voted:
                voted[(k, t, b)] = (votes(s, self.re_, len(re_cl), k, t, b),
                                    votes(s, self.component_, len(comp_cl), k, t, b))
            v_re, v_comp = voted[(k, t, b)]
            pred_re = [re_cl[i] for i in ((1 - w) * p_re + w * v_re).argmax(1)]
            pred_comp = [comp_cl[i] for i in ((1 - w) * p_comp + w * v_comp).argmax(1)]
            f = (macro_f1(gold_re, pred_re, re_class_ids()) + macro_f1(gold_comp, pred_comp, component_ids())) / 2
            out.append((f, detection(gold_re, pred_re)["precision"]))
        return np.array(out)


def choose_nearest_labels(X: Issues, y: np.ndarray, folds, heads: dict) -> dict:
    """The votes' setting with the best mean RE and component macro-F1 over the folds among those that keep the
    mean resource-bug detection precision at MIN_PRECISION (weight 0, the heads alone, is one); the heads have the
    settings `heads`."""
    grid = [(k, t, b, w) for k in NEAREST_K for t in NEAREST_TEMPERATURES for b in NEAREST_BALANCES
            for w in NEAREST_WEIGHTS if w > 0] + [(NEAREST_K[0], NEAREST_TEMPERATURES[0], NEAREST_BALANCES[0], 0.0)]
    totals = fold_mean(per_fold(NearestGrid(heads), lambda m, X_, y_: m.scores(X_, y_, grid), X, y, folds))
    kept = [i for i in range(len(grid)) if totals[i, 1] >= MIN_PRECISION] or [len(grid) - 1]
    best = max(kept, key=lambda i: round(float(totals[i, 0]), 9))  # max keeps the first of equal ones
    return dict(zip(NEAREST_KEYS, grid[best]), folds_score=round(float(totals[best, 0]), 4))


def _search_nearest_labels(examples: list[Example], v: list[Views], dense: np.ndarray, folds, heads: dict) -> dict:
    """choose_nearest_labels of labeled examples (the form tests/test_nearest_labels.py calls)."""
    return choose_nearest_labels(Issues.of(examples, v, dense), labels_of(examples), folds, heads)


def threshold_scores(X: Issues, y: np.ndarray, folds, settings: dict) -> tuple[np.ndarray, np.ndarray]:
    """Of the model with `settings` fitted on each fold's other issues, on the fold's: the known-fix recall per
    FIX_THRESHOLDS (the fixes shown: predict.fixes_for), shape (folds, thresholds), and the resource-bug detection
    precision and recall as the report and the bot count them (metrics.counted_detection, the issues under the
    threshold set aside as unsure) per ABSTAIN_THRESHOLDS, shape (folds, thresholds, 2)."""
    from retriage.classifier.predict import fixes_for

    def measure(fitted: ClassifierFit, X_fold: Issues, y_fold: np.ndarray) -> np.ndarray:
        preds, want, recalls = fitted.predict(X_fold), [{t} - {"none"} for t in y_fold["known_fix"]], []
        for t in FIX_THRESHOLDS:
            for p in preds:
                p.fix_threshold = t
            recalls.append(fix_counts(want, [set(fixes_for(v, e, p)) for v, e, p in zip(X_fold.views,
                                                                                         X_fold.engines, preds)])[1])
        gold, got = list(y_fold["re_class"]), [p.re_class for p in preds]
        counted = [counted_detection(gold, got, [p.re_confidence < t for p in preds]) for t in ABSTAIN_THRESHOLDS]
        return np.r_[recalls, [x for c in counted for x in (c["precision"], c["recall"])]]

    per = per_fold(ClassifierFit(**settings), measure, X, y, folds)
    return per[:, :len(FIX_THRESHOLDS)], per[:, len(FIX_THRESHOLDS):].reshape(len(per), -1, 2)


def highest_keeping_recall(recalls: dict[float, float], min_recall: float = FIX_MIN_RECALL) -> float:
    """The highest threshold whose known-fix recall is `min_recall` or more; the lowest threshold when none is."""
    kept = [t for t, r in recalls.items() if r >= min_recall]
    return max(kept) if kept else min(recalls)


def lowest_keeping_precision(per_fold: dict[float, list[dict]], min_precision: float = MIN_PRECISION) -> float:
    """The lowest abstain threshold (the most resource bugs counted) at which every fold's counted detection
    precision is `min_precision` or more; the highest threshold when none is; 0 (never abstain) without folds."""
    if not any(per_fold.values()):
        return 0.0
    kept = [t for t, folds in per_fold.items() if folds and all(f["precision"] >= min_precision for f in folds)]
    return min(kept) if kept else max(per_fold)


def choose_thresholds(X: Issues, y: np.ndarray, folds, settings: dict) -> tuple[float, float, dict]:
    """The fix threshold (the highest keeping the folds' mean known-fix recall), the abstain threshold (the lowest
    keeping every fold's counted precision) and the folds' counted precision and recall at it."""
    recalls, counted = threshold_scores(X, y, folds, settings)
    by_threshold = {t: [{"precision": f[i, 0], "recall": f[i, 1]} for f in counted]
                    for i, t in enumerate(ABSTAIN_THRESHOLDS)}
    abstain = lowest_keeping_precision(by_threshold)
    return (highest_keeping_recall(dict(zip(FIX_THRESHOLDS, fold_mean(recalls)))), abstain,
            {k: [float(f[k]) for f in by_threshold[abstain]] for k in ("precision", "recall")})


def search_settings(X: Issues, y: np.ndarray, folds, log: Callable[[str], None] = lambda s: None) -> dict:
    """ClassifierFit's settings chosen on the folds, and "abstain_folds" (the folds' figures at its threshold)."""
    if not folds:
        raise UserError("too few labeled issues to choose the settings on folds: train without --search")
    n, chosen = f"{len(folds)} folds", {}
    for target, name in (("re_class", "RE"), ("component", "component")):
        log(f"search: the {name} head ({len(C_GRID) * len(SPARSE_WEIGHTS) * len(LEXICAL_BLENDS)} settings, {n})")
        chosen[target] = choose_head(X, y, folds, target)
    log(f"search: the fix head ({len(C_GRID) * len(SPARSE_WEIGHTS)} settings, {n})")
    chosen["known_fix"] = dict(zip(("C", "sparse_weight"), best_fix_setting(fix_fold_scores(X, y, folds))))
    log(f"search: the nearest labeled issues' votes ({n})")
    chosen["nearest_labels"] = choose_nearest_labels(X, y, folds, chosen)
    log(f"search: the fix and abstain thresholds ({n})")
    chosen["known_fix"]["threshold"], abstain, at = choose_thresholds(X, y, folds, chosen)
    return {**chosen, "abstain_threshold": abstain, "abstain_folds": at}
