"""Training, in scikit-learn's shape: settings in the constructor, `fit(X, y)` returns the estimator, what it
learned ends in an underscore. X is `Issues` (each labeled issue's views, dense features, engine and blocked
fold), y its labels (`labels_of`).

- `ClassifierFit` fits one IssueClassifier with given settings (each head's C, TF-IDF weight and blend, the
  nearest labeled issues' votes, the fix and abstain thresholds: `model_settings` reads them from a model).
- `Trainer` is `retriage train`: a fit on the training side (the held-out model, scored on the dev split, saved
  in `held_out/`) and one on every label, with the shipped model's settings unless it searches them.
- The search (`--search`, `search_settings`) chooses them on four blocked folds (the dev split and three older
  stretches of each repository: dataset.fold_numbers). One fold loop, scikit-learn's cross_validate (`per_fold`),
  fits an estimator on each fold's other issues and measures it on the fold's; a rule over the folds' measures
  then chooses: each head's setting (`choose_head`), the fix head's (`fix_fold_scores`), the votes'
  (`choose_nearest_labels`), both thresholds from one calibrated model per fold (`choose_thresholds`).
- `train` reads and embeds the labeled set, runs the Trainer, saves the model and its held-out fit, and distils
  the fast head of `retriage classify` from them (classifier/distill.py).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import duckdb
import numpy as np
from sklearn.base import BaseEstimator

from retriage.classifier import EMBEDDING_MODEL
from retriage.classifier.dataset import Example, fold_numbers, load_gold, split, training_examples
from retriage.classifier.embed import DIM
from retriage.classifier.embedding_cache import embed_views
from retriage.classifier.features import VIEW_FIELDS, Tfidf, Views, dense_features, views
from retriage.classifier.head import LinearHead, softmax
from retriage.classifier.metrics import counted_detection, detection, macro_f1, score
from retriage.classifier.model import HELD_OUT, META, IssueClassifier, engine_fix, shipped_model_dir
from retriage.classifier.nearest_labels import SETTING_KEYS as NEAREST_KEYS
from retriage.classifier.nearest_labels import NearestLabels, representation, views_of_dense, votes
from retriage.core.errors import UserError
from retriage.core.paths import models_dir
from retriage.taxonomy import LABELS_DIR, component_ids, fix_tag_ids, re_class_ids

# ---- what `retriage train --search` tries ----------------------------------------------------------------------------
# the heads' regularisation strengths; with Newton-CG (an exact optimum) the folds chose 1 for the RE and component
# heads, so 0.5 is in the grid to show 1 is not the grid's edge
C_GRID = (0.5, 1.0, 2.0, 4.0, 8.0)
SPARSE_WEIGHTS = (1.0, 2.0)
# (regularisation strength, weight) of the TF-IDF-only model added to each head's logits; (0, 0): none
LEXICAL_BLENDS = ((0.0, 0.0), (3.0, 0.3), (3.0, 0.6), (10.0, 0.3), (10.0, 0.6))
# weights on the odds of `none` tried for the RE head: the issues users mine now hold more resource bugs than the
# corpus-era labels do
NONE_WEIGHTS = (1.0, 0.8, 0.65, 0.5)
MIN_PRECISION = 0.80  # the resource-bug detection precision the weight on `none` (mean over the folds) and the abstain
# threshold (every fold's, unsure set aside) must keep
# the abstain thresholds tried (0: never abstain): the lowest, the best recall, at which every fold's resource-bug
# detection precision, counted as the weekly report and the bot count it, is MIN_PRECISION or more
ABSTAIN_THRESHOLDS = (0.0,) + tuple(round(0.30 + 0.01 * i, 2) for i in range(61))
FIX_THRESHOLD = 0.5  # the fix head's threshold when the settings name none
FIX_THRESHOLDS = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
FIX_MIN_RECALL = 0.80  # the known-fix recall (mean over the folds) the fix threshold must keep
# the nearest labeled issues' votes (classifier/nearest_labels.py): how many, how sharply similarity weighs, how much
# a vote is divided by its class's frequency, and how much of the answer they make (0: none)
NEAREST_K = (5, 10, 20)
NEAREST_TEMPERATURES = (0.05, 0.1)
NEAREST_BALANCES = (0.5, 1.0)
NEAREST_WEIGHTS = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6)

TARGETS = ("re_class", "component", "known_fix")  # y's columns, a head each
CLASSES = {"re_class": re_class_ids, "component": component_ids, "known_fix": fix_tag_ids}
HEAD_KEYS = {"re_class": ("C", "sparse_weight", "lexical_C", "lexical_blend", "none_weight"),
             "component": ("C", "sparse_weight", "lexical_C", "lexical_blend"),
             "known_fix": ("C", "sparse_weight", "threshold")}


# ---- X and y -------------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class Issues:
    """X: per issue its views (text, rules, keywords), dense features (the view embeddings first:
    nearest_labels.views_of_dense), engine and blocked fold (0: the dev split; None: no folds)."""

    views: list[Views]
    dense: np.ndarray
    engines: list[str]
    fold: np.ndarray | None = None

    @classmethod
    def of(cls, examples: list[Example], v: list[Views], dense: np.ndarray, fold=None) -> "Issues":
        return cls(list(v), dense, [e.engine for e in examples], None if fold is None else np.asarray(fold))

    def __len__(self) -> int:
        return len(self.views)

    @property
    def shape(self) -> tuple[int, int]:  # what scikit-learn counts the rows by
        return self.dense.shape

    def __getitem__(self, rows) -> "Issues":  # indices or a mask; scikit-learn asks for X[rows, ...]
        rows = np.arange(len(self))[rows[0] if isinstance(rows, tuple) else rows]
        return Issues([self.views[i] for i in rows], self.dense[rows], [self.engines[i] for i in rows],
                      None if self.fold is None else self.fold[rows])

    @property
    def lexical(self) -> list[str]:
        return [x.lexical for x in self.views]

    @property
    def embeddings(self) -> list[np.ndarray]:
        return views_of_dense(self.dense)

    def folds(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(fitted on, scored on) rows of each blocked fold: scikit-learn's PredefinedSplit of `fold`."""
        from sklearn.model_selection import PredefinedSplit

        return [] if self.fold is None else [(a, b) for a, b in PredefinedSplit(self.fold).split() if len(a)]


def labels_of(examples: list[Example]) -> np.ndarray:
    """y: a record per issue, a column per target (`y["re_class"]`)."""
    return np.array([tuple(getattr(e, t) for t in TARGETS) for e in examples], dtype=[(t, object) for t in TARGETS])


# ---- one model -----------------------------------------------------------------------------------------------------
def head_for(h: dict, calibrate: bool = True) -> LinearHead:
    """An unfitted head with the settings `h` ({"C", "sparse_weight"}, optionally "lexical_C" and "lexical_blend")."""
    return LinearHead(C=h["C"], sparse_weight=h["sparse_weight"], calibrate=calibrate,
                      lexical_C=h.get("lexical_C") or 1.0, lexical_blend=h.get("lexical_blend", 0.0))


class ClassifierFit(BaseEstimator):
    """One IssueClassifier (`model_`) fitted with the given settings: each head's (head_for; the RE head's
    "none_weight", the fix head's "threshold"; None: no such head), the nearest labeled issues' votes (None or
    weight 0: the heads alone) and the abstain threshold."""

    def __init__(self, re_class: dict | None = None, component: dict | None = None, known_fix: dict | None = None,
                 nearest_labels: dict | None = None, abstain_threshold: float = 0.0, calibrate: bool = True):
        self.re_class, self.component, self.known_fix = re_class, component, known_fix
        self.nearest_labels, self.abstain_threshold, self.calibrate = nearest_labels, abstain_threshold, calibrate

    def fit(self, X: Issues, y: np.ndarray) -> "ClassifierFit":
        tfidf = Tfidf().fit(X.lexical)
        sparse = tfidf.transform(X.lexical)
        heads = {t: head_for(h, self.calibrate).fit(X.dense, sparse, list(y[t]), CLASSES[t]()).scale_prior(
            "none", h.get("none_weight", 1.0)) for t in TARGETS if (h := getattr(self, t)) is not None}
        nearest = None
        if (self.nearest_labels or {}).get("weight", 0) > 0:
            nearest = NearestLabels.fit(X.embeddings, list(y["re_class"]), list(y["component"]),
                                        heads["re_class"].classes_, heads["component"].classes_, self.nearest_labels)
        self.model_ = IssueClassifier(tfidf, heads.get("re_class"), heads.get("component"), self.abstain_threshold,
                                      fix_head=heads.get("known_fix"), nearest_labels=nearest,
                                      fix_threshold=(self.known_fix or {}).get("threshold", FIX_THRESHOLD))
        return self

    def predict(self, X: Issues) -> list:
        return self.model_.predict(X.views, X.embeddings)


def fit_classifier(examples: list[Example], v: list[Views], embeddings: list[np.ndarray], hyperparameters: dict,
                   calibrate: bool = True) -> IssueClassifier:
    """The model fitted on labeled issues with a model's meta["hyperparameters"] (no abstain threshold)."""
    fit = ClassifierFit(**{k: hyperparameters.get(k) for k in (*TARGETS, "nearest_labels")}, calibrate=calibrate)
    return fit.fit(Issues.of(examples, v, dense_features(embeddings, v)), labels_of(examples)).model_


def model_settings(meta: dict) -> dict:
    """ClassifierFit's settings as a model's meta.json records them (its "hyperparameters", the fix and abstain
    thresholds); a ValueError names what they lack."""
    hp, out = meta.get("hyperparameters") or {}, {}
    for target, keys in HEAD_KEYS.items():
        h = hp.get(target) or {}
        if "C" not in h or "sparse_weight" not in h:
            raise ValueError(f"the model's settings lack the {target} head's C or sparse_weight")
        out[target] = {k: h[k] for k in keys if k in h}
    out["known_fix"].setdefault("threshold", meta.get("fix_threshold", FIX_THRESHOLD))
    n = hp.get("nearest_labels") or meta.get("nearest_labels") or {"weight": 0.0}
    if n.get("weight", 0) > 0 and any(k not in n for k in NEAREST_KEYS):
        raise ValueError(f"the model's nearest-label settings lack {', '.join(k for k in NEAREST_KEYS if k not in n)}")
    return {**out, "nearest_labels": {k: n[k] for k in NEAREST_KEYS if k in n},
            "abstain_threshold": float(meta.get("threshold", 0.0))}


def settings_of(model_folder: Path | None = None) -> dict:
    """The settings of the model in `model_folder` (default: the shipped one), which train uses without --search."""
    folder = Path(model_folder) if model_folder else shipped_model_dir()
    try:
        return model_settings(json.loads((folder / META).read_text()))
    except (OSError, ValueError) as e:
        raise UserError(f"no settings to train with in {folder}: {e}") from None


# ---- the search (`retriage train --search`) --------------------------------------------------------------------------
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


def none_weight_scores(z: np.ndarray, classes: list[str], gold: list[str]) -> np.ndarray:
    """Per weight on the odds of `none` (NONE_WEIGHTS), from the logits `z` of issues labeled `gold`: resource-bug
    detection precision and recall, and the RE classes' macro-F1."""
    out = []
    for w in NONE_WEIGHTS:
        shift = np.array([np.log(w) if k == "none" else 0.0 for k in classes])
        pred = [classes[i] for i in (z + shift).argmax(1)]
        d = detection(gold, pred)
        out.append((d["precision"], d["recall"], macro_f1(gold, pred, re_class_ids())))
    return np.array(out)


def choose_none_weight(per: np.ndarray) -> float:
    """The weight on the odds of `none` with the best mean resource-bug recall (none_weight_scores per fold) among
    those that keep the mean precision at MIN_PRECISION and the mean macro-F1 within 0.01 of the unweighted head's."""
    p, r, f = np.mean(per, axis=0).T
    kept = [i for i in range(len(NONE_WEIGHTS)) if p[i] >= MIN_PRECISION and f[i] >= f[0] - 0.01] or [0]
    return NONE_WEIGHTS[max(kept, key=lambda i: (r[i], NONE_WEIGHTS[i]))]


def choose_head(X: Issues, y: np.ndarray, folds, target: str) -> dict:
    """The head's (C, TF-IDF weight, TF-IDF-only C, blend) with the best mean macro-F1 over the folds (ties: the
    first in grid order, which holds the smaller C); for the RE head, then its weight on the odds of `none`."""
    grid = tuple((c, sw, lc, blend) for sw in SPARSE_WEIGHTS for c in C_GRID for lc, blend in LEXICAL_BLENDS)

    def measure(fitted: HeadGrid, X_fold: Issues, y_fold: np.ndarray) -> np.ndarray:
        gold = list(y_fold[target])
        return np.array([np.r_[score(gold, [cl[i] for i in z.argmax(1)], cl).macro_f1,
                               none_weight_scores(z, cl, gold).ravel() if target == "re_class" else []]
                         for z, cl in fitted.logits(X_fold)])

    per = per_fold(HeadGrid(target, grid), measure, X, y, folds)  # (folds, settings, measures)
    mean_f1 = fold_mean(per[:, :, 0])
    best = max(range(len(grid)), key=lambda i: round(float(mean_f1[i]), 9))  # max keeps the first of equal ones
    chosen = dict(zip(("C", "sparse_weight", "lexical_C", "lexical_blend"), grid[best]))
    if target == "re_class":
        chosen["none_weight"] = choose_none_weight(per[:, best, 1:].reshape(len(per), len(NONE_WEIGHTS), 3))
    return chosen


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


# ---- retriage train ----------------------------------------------------------------------------------------------
class Trainer(BaseEstimator):
    """`retriage train`: the held-out model (`held_out_`) fitted on the training side (the issues of folds other
    than 0) and scored on the dev split (`dev_`: target -> Scores, `coverage_`); with `refit`, the model (`model_`)
    fitted with the same settings on every issue. `settings`: ClassifierFit's (model_settings); `search`: choose
    them on the blocked folds instead (search_settings). `log` is told each phase."""

    def __init__(self, settings: dict | None = None, search: bool = False, refit: bool = True,
                 log: Callable[[str], None] | None = None):
        self.settings, self.search, self.refit, self.log = settings, search, refit, log

    def fit(self, X: Issues, y: np.ndarray) -> "Trainer":
        log = self.log or (lambda s: None)
        if self.search:
            settings = search_settings(X, y, X.folds(), log)
        elif self.settings is None:
            raise ValueError("Trainer needs settings, or search=True")
        else:
            settings = dict(self.settings)
        abstain_folds = settings.pop("abstain_folds", None)
        fit_settings = {k: settings[k] for k in ("re_class", "component", "known_fix", "nearest_labels",
                                                 "abstain_threshold")}
        dev = np.zeros(len(X), bool) if X.fold is None else X.fold == 0
        refit = self.refit and dev.any()
        log(f"fitting the held-out model on {int((~dev).sum()):,} issues"
            + (f" and the model on all {len(X):,}, side by side" if refit else ""))
        with ThreadPoolExecutor(2) as pool:  # two fits that share nothing, most of whose work releases the GIL
            fits = [pool.submit(lambda rows: ClassifierFit(**fit_settings).fit(X[rows], y[rows]).model_, rows)
                    for rows in ([~dev, slice(None)] if refit else [~dev])]
            held_out, model = fits[0].result(), fits[-1].result()
        log(f"scoring the held-out model on the {int(dev.sum()):,} issues of the dev split")
        preds = held_out.predict(X[dev].views, X[dev].embeddings) if dev.any() else []
        for p in preds:
            p.abstained = p.re_confidence < held_out.threshold
        self.dev_ = {t: score(list(y[dev][t]), [getattr(p, t) for p in preds], CLASSES[t]())
                     for t in ("re_class", "component")}
        self.coverage_ = float(np.mean([not p.abstained for p in preds])) if preds else 0.0
        held_out.meta = {
            "embedding_model": EMBEDDING_MODEL,
            "trained_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "n_train": int((~dev).sum()), "n_dev": int(dev.sum()),
            "hyperparameters": {k: fit_settings[k] for k in TARGETS + ("nearest_labels",)},
            "settings_searched": bool(self.search),
            "dev": {"re_class_macro_f1": self.dev_["re_class"].macro_f1,
                    "component_macro_f1": self.dev_["component"].macro_f1, "coverage": round(self.coverage_, 4)},
            **({"abstain_folds": abstain_folds} if abstain_folds else {}),
        }
        if refit:  # the same settings and thresholds on every labeled issue, dev included
            model.meta = {**held_out.meta, "n_train": len(X), "refit_on_dev": True}
        self.held_out_, self.model_, self.settings_ = held_out, model, fit_settings
        return self


@dataclass
class TrainResult:
    model: IssueClassifier
    version: str
    dev: dict  # target -> Scores
    coverage: float
    n_train: int
    n_dev: int
    fast: object = None  # distill.Agreement of the fast path with this model on the dev split
    n_corrections: int = 0  # corrections (`retriage relabel`) among the labels


@dataclass
class LabeledSplit:
    """The labeled set cut into training and dev issues, with their views and view embeddings."""

    examples: list[Example]
    train: list[Example]
    dev: list[Example]
    train_views: list[Views]
    dev_views: list[Views]
    train_embeddings: list[np.ndarray]
    dev_embeddings: list[np.ndarray]

    def issues(self) -> tuple[Issues, np.ndarray]:
        """X (the training side, then the dev split, with their blocked folds) and y."""
        every = self.train + self.dev
        dense = np.vstack([dense_features(self.train_embeddings, self.train_views),
                           dense_features(self.dev_embeddings, self.dev_views)])
        return Issues.of(every, self.train_views + self.dev_views, dense, fold_numbers(every)), labels_of(every)


def labeled_split(con, labels_dir: Path, progress=None, embedder=None, examples: list[Example] | None = None,
                  log: Callable[[str], None] = lambda s: None) -> LabeledSplit:
    """The dev split of the labeled set (`examples`, else `labels_dir`'s), embedded through the cache."""
    examples = load_gold(labels_dir) if examples is None else examples
    tr, dv = split(examples)
    log(f"preparing the texts of {len(examples):,} labeled issues")
    tr_v, dv_v = [views(e.title, e.body) for e in tr], [views(e.title, e.body) for e in dv]
    log(f"embedding {len(examples):,} labeled issues (through the embedding cache)")
    emb, n = embed_views(con, tr_v + dv_v, progress, embedder), len(tr)
    return LabeledSplit(examples, tr, dv, tr_v, dv_v, [e[:n] for e in emb], [e[n:] for e in emb])


def train(con: duckdb.DuckDBPyConnection | None, labels_dir: Path = LABELS_DIR, out_dir: Path | None = None,
          progress: Callable[[int], None] | None = None, embedder=None, unlabeled: list[Views] | None = None,
          extra_labels=(), corrections: bool = True, refit: bool = True, settings: dict | None = None,
          search: bool = False, log: Callable[[str], None] | None = None) -> TrainResult:
    """Fit the model (Trainer) on the labeled set and save it with its held-out fit and its fast head.
    `settings`: ClassifierFit's (model_settings; default: the shipped model's); `search`: choose them on the
    blocked folds instead. `unlabeled`: extra issues for distilling the fast head (default: the snapshot issues
    nobody labeled, whose shipped vectors are then loaded into the embedding cache first). `log` is told each
    phase. `out_dir` None: the user data folder (core.paths.models_dir()/<version>), never the installed package."""
    log = log or (lambda s: None)
    examples, n_corrections = training_examples(con, labels_dir, extra_labels, corrections)
    log(f"read {len(examples):,} labeled issues ({n_corrections:,} corrections among them)")
    if unlabeled is None and con is not None:  # the snapshot's shipped vectors spare embedding its issues again
        from retriage.classifier.snapshot_cache import load_into

        log("loading the shipped embedding cache into the database's")
        load_into(con)
    data = labeled_split(con, labels_dir, progress, embedder, examples, log)
    X, y = data.issues()
    if settings is None and not search:
        settings = settings_of()
    trainer = Trainer(settings, search, refit, log).fit(X, y)
    model, held_out = trainer.model_, trainer.held_out_
    held_out.meta["corrections"] = model.meta["corrections"] = n_corrections
    log("saving the model" + (" and its held-out fit" if model is not held_out else ""))
    if out_dir is None:  # the user data folder, under the model's version (known once it is saved)
        staging = Path(tempfile.mkdtemp(prefix=".training-", dir=_ensure(models_dir())))
        try:
            version = _save(model, held_out, staging)
            fast = distill_fast_head(con, model, data, staging, progress, embedder, unlabeled, held_out, log)
            out_dir = staging.parent / version
            if out_dir.exists():
                shutil.rmtree(out_dir)
            staging.rename(out_dir)
        finally:
            if staging.exists():
                shutil.rmtree(staging)
        model.folder = out_dir
    else:
        out_dir = Path(out_dir)
        version = _save(model, held_out, out_dir)
        fast = distill_fast_head(con, model, data, out_dir, progress, embedder, unlabeled, held_out, log)
    return TrainResult(model, version, trainer.dev_, trainer.coverage_, model.meta["n_train"], len(data.dev), fast,
                       n_corrections)


def _save(model: IssueClassifier, held_out: IssueClassifier, folder: Path) -> str:
    """`model` in `folder`, and beside it (when it is a refit on the dev split too) the held-out model, in
    `folder`/held_out, which the dev figures measure. Returns the model's version."""
    if model is not held_out:
        model.meta["held_out_version"] = held_out.save(Path(folder) / HELD_OUT)
    elif (Path(folder) / HELD_OUT).exists():  # a model fitted without the dev split is its own held-out model
        shutil.rmtree(Path(folder) / HELD_OUT)
    return model.save(folder)


def _ensure(folder: Path) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create the model folder {folder}: {e.strerror}") from None
    return folder


# ---- the fast head of `retriage classify` ------------------------------------------------------------------------
def refresh_fast_head(con: duckdb.DuckDBPyConnection | None, labels_dir: Path = LABELS_DIR,
                      model_dir: Path | None = None, progress: Callable[[int], None] | None = None,
                      embedder=None, unlabeled: list[Views] | None = None):
    """Distil the fast head again for the model already in `model_dir` (the heads stay as they are). The
    shipped model is rewritten only when `model_dir` names it."""
    if model_dir is None:
        raise UserError("give the model folder whose fast head to distil again (--output DIR or --model DIR)")
    model_dir = Path(model_dir)
    model = IssueClassifier.load(model_dir)
    if unlabeled is None and con is not None:
        from retriage.classifier.snapshot_cache import load_into

        load_into(con)
    data = labeled_split(con, labels_dir, progress, embedder)
    return model, distill_fast_head(con, model, data, model_dir, progress, embedder, unlabeled, model.held_out())


def distill_fast_head(con, model: IssueClassifier, data: LabeledSplit, out_dir: Path, progress=None,
                      embedder=None, unlabeled: list[Views] | None = None, gate_model: IssueClassifier | None = None,
                      log: Callable[[str], None] = lambda s: None):
    """Distil the fast head from `model` over its training split and unlabeled issues; save it in `out_dir`;
    return the classify path's agreement with the full model on the dev split. `gate_model`: the held-out fit of
    a model refitted on the dev split, whose margins on the dev split (which it never saw) become the gate."""
    from retriage.classifier.distill import agreement, answers, choose_gate, fit_fast_head, unlabeled_snapshot_views
    from retriage.classifier.static_embed import StaticMiniLM, ensure_table

    report_v: list[Views] = []  # unlabeled issues used neither for the maps nor the gate: the agreement on them
    if unlabeled is None:
        log("preparing the texts of the unlabeled snapshot issues")
        labeled = {e.key for e in data.examples}
        unlabeled, report_v = (unlabeled_snapshot_views(labeled, p) for p in ("fit", "report"))

    def embedded(v):
        return embed_views(con, v, progress, embedder) if v else [np.zeros((0, DIM), np.float32)] * len(VIEW_FIELDS)

    log(f"distilling the fast head on {len(data.train_views) + len(unlabeled):,} issues")
    un_emb, report_emb = embedded(unlabeled), embedded(report_v)
    static = StaticMiniLM(ensure_table())
    all_emb = [np.vstack([a, b]).astype(np.float32) for a, b in zip(data.train_embeddings, un_emb)]
    head = fit_fast_head(model, static, data.train_views + list(unlabeled), all_emb)
    check, result, held_out = {}, None, {}
    if data.dev_views:
        # the gate is chosen on issues the teacher never saw: for a model refitted on the dev split, on the
        # dev split with its held-out fit and a fast head distilled from that fit the same way (one at a time:
        # side by side, the two fits held 0.5 GB more)
        judge, judge_head = model, head
        if gate_model is not None and gate_model is not model:
            log("distilling the held-out fit's fast head, to choose the gate on the dev split")
            judge = gate_model
            judge_head = fit_fast_head(gate_model, static, data.train_views + list(unlabeled), all_emb)
        dev_answers = answers(judge, judge_head, static, data.dev_views, data.dev_embeddings)
        check = choose_gate(judge_head, dev_answers)
        result = agreement(judge_head, dev_answers, data.dev_embeddings[0])
        head.re_margin, head.component_margin = judge_head.re_margin, judge_head.component_margin
        if report_v:
            held_out = agreement(head, answers(model, head, static, report_v, report_emb), report_emb[0]).to_dict()
    head.meta.update(teacher_model_version=model.version, dev=result.to_dict() if result else {},
                     dev_two_fold=check, held_out=held_out)
    head.save(out_dir)
    return result
