"""Training: labeled set -> embeddings (cached) -> features -> two heads -> abstain threshold -> saved model.

Each head's regularisation strength, TF-IDF weight and blend are chosen by the mean macro-F1 over blocked folds
(the dev split and three stretches of the training side: classifier/dataset.py), then on the same folds the
settings of the nearest labeled issues' votes mixed into the heads' answers (classifier/nearest_labels.py);
the fix head's settings and threshold are chosen on the same folds by the known fixes it shows (its threshold:
the highest that keeps the folds' mean known-fix recall), and the abstain threshold too (the lowest that keeps every
fold's resource-bug detection precision, counted with unsure set aside); the held-out fit, on the training side
alone, never sees the dev split, which gives the dev figures. The shipped model is then
fitted with the same settings on every labeled issue. Last, the fast head of
`retriage classify` is distilled from the new model (classifier/distill.py) and saved beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import duckdb
import numpy as np

from retriage.classifier import EMBEDDING_MODEL
from retriage.classifier.dataset import Example, load_gold, split, validation_folds
from retriage.classifier.embed import DIM
from retriage.classifier.embedding_cache import embed_views
from retriage.classifier.metrics import Scores, score
from retriage.classifier.features import VIEW_FIELDS, Tfidf, Views, dense_features, views
from retriage.classifier.head import LinearHead, softmax
from retriage.classifier.model import HELD_OUT, IssueClassifier, Prediction, engine_fix
from retriage.classifier.nearest_labels import SETTING_KEYS as NEAREST_KEYS
from retriage.classifier.nearest_labels import NearestLabels, views_of_dense
from retriage.core.errors import UserError
from retriage.core.paths import models_dir
from retriage.taxonomy import LABELS_DIR, component_ids, fix_tag_ids, re_class_ids

# the heads' regularisation strengths tried; with Newton-CG (an exact optimum) the folds chose 1 for the RE and component
# heads, so 0.5 is in the grid to show 1 is not the grid's edge (it was not chosen: the same weights as without it)
C_GRID = (0.5, 1.0, 2.0, 4.0, 8.0)
SPARSE_WEIGHTS = (1.0, 2.0)
# (regularisation strength, weight) of the TF-IDF-only model added to each head's logits; (0, 0): none
LEXICAL_BLENDS = ((0.0, 0.0), (3.0, 0.3), (3.0, 0.6), (10.0, 0.3), (10.0, 0.6))
# weights on the odds of `none` tried for the RE head: the issues users mine now hold more resource bugs than the
# corpus-era labels do
NONE_WEIGHTS = (1.0, 0.8, 0.65, 0.5)
MIN_PRECISION = 0.80  # the resource-bug detection precision the weight on `none` (mean over the folds) and the abstain
# threshold (every fold's, unsure set aside) must keep
# the abstain thresholds tried (0: never abstain): train keeps the lowest, the best recall, at which every fold's
# resource-bug detection precision, counted as the weekly report and the bot count it, is MIN_PRECISION or more
ABSTAIN_THRESHOLDS = (0.0,) + tuple(round(0.30 + 0.01 * i, 2) for i in range(61))
FIX_THRESHOLD = 0.5  # the fix head's default confidence threshold (train chooses one on the folds)
FIX_THRESHOLDS = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # the ones train tries
FIX_MIN_RECALL = 0.80  # the known-fix recall (mean over the folds) the fix threshold must keep
# the nearest labeled issues' votes (classifier/nearest_labels.py): how many, how sharply similarity weighs, how much
# a vote is divided by its class's frequency, and how much of the answer they make (0: none)
NEAREST_K = (5, 10, 20)
NEAREST_TEMPERATURES = (0.05, 0.1)
NEAREST_BALANCES = (0.5, 1.0)
NEAREST_WEIGHTS = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6)


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


def correction_records(con) -> list[dict]:
    """The corrections in force in the database as label records (with the issue's text when the snapshot
    does not have it, so that an issue mined later can be learnt too)."""
    from retriage.classifier.dataset import snapshot_index
    from retriage.db.queries import corrections

    out = []
    for c in corrections(con):
        r = {"repo": c["repo"], "number": c["number"], "re_class": c["re_class"], "component": c["component"],
             "known_fix": c["known_fix"], "reason": c["reason"], "labeler": f"correction by {c['corrected_by']}"}
        if (c["repo"], c["number"]) not in snapshot_index() and c.get("title") is not None:
            r.update(title=c["title"], body=c["body"] or "", html_url=c["html_url"] or "", state=c["state"] or "",
                     created_at=str(c["created_at"] or "")[:10])
        out.append(r)
    return out


def training_examples(con, labels_dir: Path = LABELS_DIR, extra_labels=(), corrections: bool = True
                      ) -> tuple[list[Example], int]:
    """The labeled set: `labels_dir`, then the extra label files, then the database's corrections (each
    later source wins for an issue it names). Returns the examples and how many corrections were used."""
    from retriage.classifier.dataset import read_labels

    extra = [r for p in extra_labels for r in read_labels(p)]
    fixes = correction_records(con) if corrections and con is not None else []
    return load_gold(labels_dir, extra + fixes), len(fixes)


def _fold_logits(dense: np.ndarray, lexical: list[str], y: list[str], classes: list[str], train_rows: list[int],
                 val_rows: list[int]) -> dict[tuple, tuple[np.ndarray, list[str]]]:
    """The logits on `val_rows` (and their classes) of every setting (C, TF-IDF weight, lexical C, blend) of an
    uncalibrated head fitted on `train_rows` (rows of `dense`, `lexical`, `y`). The blended head's logits are the
    head's plus the blend times the TF-IDF-only model's (classifier/head.py), so each model is fitted once and
    the blends are sums."""
    tfidf = Tfidf().fit([lexical[i] for i in train_rows])
    sparse_tr = tfidf.transform([lexical[i] for i in train_rows])
    sparse_va = [tfidf.transform_one(lexical[i]) for i in val_rows]
    dense_tr, dense_va = dense[train_rows], dense[val_rows]
    y_tr = [y[i] for i in train_rows]
    empty_tr, empty_va = np.zeros((len(train_rows), 0), np.float32), np.zeros((len(val_rows), 0), np.float32)
    z_lex = {lex_c: LinearHead(C=lex_c, calibrate=False).fit(empty_tr, sparse_tr, y_tr, classes).logits(
        empty_va, sparse_va) for lex_c in sorted({lc for lc, blend in LEXICAL_BLENDS if blend > 0})}
    out = {}
    for sw in SPARSE_WEIGHTS:
        for c in C_GRID:
            head = LinearHead(C=c, sparse_weight=sw, calibrate=False).fit(dense_tr, sparse_tr, y_tr, classes)
            z_head = head.logits(dense_va, sparse_va)
            for lex_c, blend in LEXICAL_BLENDS:
                out[(c, sw, lex_c, blend)] = (z_head + blend * z_lex[lex_c] if blend > 0 else z_head, head.classes_)
    return out


def _choose_none_weight(folds: list[tuple[np.ndarray, list[str], list[str]]]) -> float:
    """The weight on the odds of `none` (NONE_WEIGHTS) with the best mean resource-bug recall over the folds
    among those that keep the mean detection precision at MIN_PRECISION or more and the mean macro-F1 within
    0.01 of the unweighted head's; 1.0 when none does. `folds`: (logits, their classes, gold) per fold."""
    from retriage.classifier.metrics import detection, macro_f1

    rows = []
    for w in NONE_WEIGHTS:
        p, r, f = [], [], []
        for z, classes, gold in folds:
            shift = np.array([np.log(w) if k == "none" else 0.0 for k in classes])
            pred = [classes[i] for i in (z + shift).argmax(1)]
            d = detection(gold, pred)
            p.append(d["precision"])
            r.append(d["recall"])
            f.append(macro_f1(gold, pred, re_class_ids()))
        rows.append((w, float(np.mean(p)), float(np.mean(r)), float(np.mean(f))))
    base_f1 = rows[0][3]
    kept = [row for row in rows if row[1] >= MIN_PRECISION and row[3] >= base_f1 - 0.01] or rows[:1]
    return max(kept, key=lambda row: (row[2], row[0]))[0]


def _search_folds(dense: np.ndarray, lexical: list[str], y: list[str], classes: list[str],
                  folds: list[tuple[list[int], list[int]]], none_weight: bool = False) -> dict:
    """The setting (C, TF-IDF weight, lexical C, blend) with the best mean macro-F1 over the folds (ties: the
    first in grid order, which holds the smaller C); with `none_weight`, also the weight on the odds of `none`
    chosen for it (`_choose_none_weight`)."""
    total: dict[tuple, float] = {}
    kept: list[dict] = []
    for train_rows, val_rows in folds:
        gold = [y[i] for i in val_rows]
        logits = _fold_logits(dense, lexical, y, classes, train_rows, val_rows)
        kept.append({k: (z, cl, gold) for k, (z, cl) in logits.items()})
        for setting, (z, cl) in logits.items():
            f = score(gold, [cl[i] for i in z.argmax(1)], cl).macro_f1
            total[setting] = total.get(setting, 0.0) + f / len(folds)
    best = max(total, key=lambda k: round(total[k], 9))  # max keeps the first of equal ones
    c, sw, lex_c, blend = best
    chosen = {"C": c, "sparse_weight": sw, "lexical_C": lex_c, "lexical_blend": blend}
    if none_weight:
        chosen["none_weight"] = _choose_none_weight([fold[best] for fold in kept])
    return chosen


def _fix_counts(want: list[set], got: list[set]) -> tuple[float, float]:
    """(F1, recall) of the known-fix tags shown (`got`) against the labels' (`want`), per issue."""
    tp = sum(len(g & w) for g, w in zip(got, want))
    fp = sum(len(g - w) for g, w in zip(got, want))
    fn = sum(len(w - g) for g, w in zip(got, want))
    return 2 * tp / max(2 * tp + fp + fn, 1), tp / max(tp + fn, 1)


def _search_fix(every: list[Example], every_v: list[Views], dense: np.ndarray,
                folds: list[tuple[list[int], list[int]]]) -> tuple[float, float]:
    """(C, sparse weight) of the fix head with the best mean F1, over the blocked folds, of the known fixes shown
    (the rules' tags and the head's likeliest answer, `none` included, together: no threshold yet), rounded to two
    places; ties go to the better mean recall, since a missing fix is what the known-fix recall counts
    (best_fix_setting over fix_fold_scores). The threshold on the probability that some fix applies, which decides
    what `retriage` shows, is chosen afterwards on the same folds (fold_fix_recalls)."""
    return best_fix_setting(fix_fold_scores(every, every_v, dense, folds))


def best_fix_setting(totals: dict[tuple[float, float], np.ndarray]) -> tuple[float, float]:
    """The (C, sparse weight) whose mean F1, rounded to two places, is the highest; among equal ones the best mean
    recall (`totals`: (C, sparse weight) -> [mean F1, mean recall]); the first in grid order when both tie."""
    return max(totals, key=lambda k: (round(float(totals[k][0]), 2), round(float(totals[k][1]), 9)))


def fix_fold_scores(every: list[Example], every_v: list[Views], dense: np.ndarray,
                    folds: list[tuple[list[int], list[int]]]) -> dict[tuple[float, float], np.ndarray]:
    """(C, sparse weight) -> [mean F1, mean recall] over the folds of the known fixes shown (the rules' tags and
    the uncalibrated head's likeliest answer in the issue's engine's terms, `none` left out): on each fold the
    head is fitted on the fold's other issues (rows of `every`, `every_v`, `dense`)."""
    y = [e.known_fix for e in every]
    totals: dict[tuple[float, float], np.ndarray] = {}
    for train_rows, val_rows in folds:
        tfidf = Tfidf().fit([every_v[i].lexical for i in train_rows])
        sparse_tr = tfidf.transform([every_v[i].lexical for i in train_rows])
        sparse_va = [tfidf.transform_one(every_v[i].lexical) for i in val_rows]
        rules = [every_v[i].fixes(every[i].engine) for i in val_rows]
        want = [{y[i]} - {"none"} for i in val_rows]
        for sw in SPARSE_WEIGHTS:
            for c in C_GRID:
                head = LinearHead(C=c, sparse_weight=sw, calibrate=False).fit(
                    dense[train_rows], sparse_tr, [y[i] for i in train_rows], fix_tag_ids())
                probs = softmax(head.logits(dense[val_rows], sparse_va))
                got = [set(r) | ({engine_fix(dict(zip(head.classes_, row)), every[i].engine)[0]} - {"none"})
                       for r, row, i in zip(rules, probs, val_rows)]
                totals[(c, sw)] = totals.get((c, sw), np.zeros(2)) + np.array(_fix_counts(want, got)) / len(folds)
    return totals


def head_for(h: dict, calibrate: bool = True) -> LinearHead:
    """An unfitted head with the hyperparameters `h` ({"C", "sparse_weight"}, optionally "lexical_C" and
    "lexical_blend": models trained before the blend have none)."""
    return LinearHead(C=h["C"], sparse_weight=h["sparse_weight"], calibrate=calibrate,
                      lexical_C=h.get("lexical_C") or 1.0, lexical_blend=h.get("lexical_blend", 0.0))


def fit_classifier(examples: list[Example], v: list[Views], embeddings: list[np.ndarray], hyperparameters: dict,
                   calibrate: bool = True, features=None) -> IssueClassifier:
    """Both heads fitted on labeled issues with the given hyperparameters ({target: {"C", "sparse_weight"}});
    no abstain threshold (0). `features`: (tfidf, dense, sparse) already computed for these issues."""
    if features is None:
        tfidf = Tfidf().fit([x.lexical for x in v])
        features = (tfidf, dense_features(embeddings, v), tfidf.transform([x.lexical for x in v]))
    tfidf, dense, sparse = features
    heads = {}
    for target, classes in (("re_class", re_class_ids()), ("component", component_ids()),
                            ("known_fix", fix_tag_ids())):
        h = hyperparameters.get(target)
        if h is not None:
            heads[target] = head_for(h, calibrate).fit(dense, sparse, [getattr(e, target) for e in examples],
                                                       classes).scale_prior("none", h.get("none_weight", 1.0))
    nearest_labels = None
    if (hyperparameters.get("nearest_labels") or {}).get("weight", 0) > 0:
        nearest_labels = NearestLabels.fit(embeddings if len(embeddings) else views_of_dense(dense),
                                           [e.re_class for e in examples], [e.component for e in examples],
                                           heads["re_class"].classes_, heads["component"].classes_,
                                           hyperparameters["nearest_labels"])
    return IssueClassifier(tfidf, heads["re_class"], heads["component"], threshold=0.0,
                           fix_head=heads.get("known_fix"),
                           fix_threshold=hyperparameters.get("known_fix", {}).get("threshold", FIX_THRESHOLD),
                           nearest_labels=nearest_labels)


def _search_nearest_labels(examples: list[Example], v: list[Views], dense: np.ndarray,
                           folds: list[tuple[list[int], list[int]]], heads: dict) -> dict:
    """The nearest labeled issues' vote settings (NEAREST_*) with the best mean over the folds of the RE and component
    macro-F1 together, among those that keep the mean resource-bug detection precision at MIN_PRECISION or more
    (weight 0, the heads alone, is one of them). Each fold's heads are fitted calibrated, with the settings
    `heads` ({"re_class", "component"}), on the fold's other issues; the votes come from those issues too."""
    from retriage.classifier.metrics import detection, macro_f1
    from retriage.classifier.nearest_labels import representation, votes

    re_ids, comp_ids = re_class_ids(), component_ids()
    grid = [(k, t, b, w) for k in NEAREST_K for t in NEAREST_TEMPERATURES for b in NEAREST_BALANCES
            for w in NEAREST_WEIGHTS if w > 0] + [(NEAREST_K[0], NEAREST_TEMPERATURES[0], NEAREST_BALANCES[0], 0.0)]
    totals = {g: [0.0, 0.0] for g in grid}  # mean (RE + component) / 2, mean detection precision
    rep = representation(views_of_dense(dense))
    for train_rows, val_rows in folds:
        tr = [examples[i] for i in train_rows]
        tfidf = Tfidf().fit([v[i].lexical for i in train_rows])
        m = fit_classifier(tr, [], [], {"re_class": heads["re_class"], "component": heads["component"]},
                           features=(tfidf, dense[train_rows], tfidf.transform([v[i].lexical for i in train_rows])))
        va_v, va_emb = [v[i] for i in val_rows], views_of_dense(dense[val_rows])
        lr, lc = m.lexical_logits(va_v)
        er, ec = m.embedding_logits(va_emb)
        p_re, p_comp = m.probabilities(lr + er, lc + ec)
        s = rep[val_rows] @ rep[train_rows].T
        y_re = np.array([m.re_head.classes_.index(e.re_class) for e in tr])
        y_comp = np.array([m.component_head.classes_.index(e.component) for e in tr])
        gold_re = [examples[i].re_class for i in val_rows]
        gold_comp = [examples[i].component for i in val_rows]
        for k in NEAREST_K:
            for t in NEAREST_TEMPERATURES:
                for b in NEAREST_BALANCES:
                    v_re = votes(s, y_re, len(m.re_head.classes_), k, t, b)
                    v_comp = votes(s, y_comp, len(m.component_head.classes_), k, t, b)
                    for w in NEAREST_WEIGHTS:
                        if (k, t, b, w) not in totals:
                            continue
                        pred_re = [m.re_head.classes_[i] for i in ((1 - w) * p_re + w * v_re).argmax(1)]
                        pred_comp = [m.component_head.classes_[i] for i in ((1 - w) * p_comp + w * v_comp).argmax(1)]
                        f = (macro_f1(gold_re, pred_re, re_ids) + macro_f1(gold_comp, pred_comp, comp_ids)) / 2
                        totals[(k, t, b, w)][0] += f / len(folds)
                        totals[(k, t, b, w)][1] += detection(gold_re, pred_re)["precision"] / len(folds)
    kept = [g for g in grid if totals[g][1] >= MIN_PRECISION] or grid[-1:]
    best = max(kept, key=lambda g: round(totals[g][0], 9))  # max keeps the first of equal ones
    return dict(zip(NEAREST_KEYS, best), folds_score=round(totals[best][0], 4))


def fold_fix_recalls(every: list[Example], every_v: list[Views], dense: np.ndarray,
                     folds: list[tuple[list[int], list[int]]], h: dict) -> dict[float, float]:
    """Known-fix recall per threshold (FIX_THRESHOLDS), the mean over the blocked folds: on each, the fix head
    with settings `h` is fitted calibrated, as the model's is, on the fold's other issues (rows of `every`,
    `every_v`, `dense`), and its issues get the fixes `show` and `label` give (the rules', then the head's tag
    when its probability that some known fix applies reaches the threshold: predict.fixes_for) over those whose
    label names a fix."""
    from retriage.classifier.predict import fixes_for

    y = [e.known_fix for e in every]
    recalls = {t: 0.0 for t in FIX_THRESHOLDS}
    for train_rows, val_rows in folds:
        tfidf = Tfidf().fit([every_v[i].lexical for i in train_rows])
        head = head_for(h).fit(dense[train_rows], tfidf.transform([every_v[i].lexical for i in train_rows]),
                               [y[i] for i in train_rows], fix_tag_ids())
        probs = head.predict_proba(dense[val_rows], [tfidf.transform_one(every_v[i].lexical) for i in val_rows])
        want = [{y[i]} - {"none"} for i in val_rows]
        # only the fix head's answer is read: the class fields are placeholders
        preds = [Prediction("none", 0.0, "other", 0.0, False, fix_probs=dict(zip(head.classes_, row)))
                 for row in probs]
        for t in FIX_THRESHOLDS:
            got = []
            for i, p in zip(val_rows, preds):
                p.fix_threshold = t
                got.append(set(fixes_for(every_v[i], every[i].engine, p)))
            recalls[t] += _fix_counts(want, got)[1] / len(folds)
    return recalls


def highest_keeping_recall(recalls: dict[float, float], min_recall: float = FIX_MIN_RECALL) -> float:
    """The highest threshold whose known-fix recall is `min_recall` or more; the lowest threshold when none is."""
    kept = [t for t, r in recalls.items() if r >= min_recall]
    return max(kept) if kept else min(recalls)


def fold_counted_detection(every: list[Example], every_v: list[Views], dense: np.ndarray,
                           folds: list[tuple[list[int], list[int]]], chosen: dict) -> dict[float, list[dict]]:
    """Resource-bug detection as the weekly report and the bot count it (metrics.counted_detection), per abstain
    threshold (ABSTAIN_THRESHOLDS), one per fold: on each, the RE and component heads and the nearest labeled
    issues' votes with the settings `chosen` are fitted calibrated, as the model's are, on the fold's other issues
    (rows of `every`, `every_v`, `dense`), and a fold issue is set aside as unsure when its RE confidence is under
    the threshold."""
    from retriage.classifier.metrics import counted_detection

    settings = {k: chosen[k] for k in ("re_class", "component", "nearest_labels") if k in chosen}
    out: dict[float, list[dict]] = {t: [] for t in ABSTAIN_THRESHOLDS}
    for train_rows, val_rows in folds:
        tfidf = Tfidf().fit([every_v[i].lexical for i in train_rows])
        m = fit_classifier([every[i] for i in train_rows], [], [], settings,
                           features=(tfidf, dense[train_rows],
                                     tfidf.transform([every_v[i].lexical for i in train_rows])))
        preds = m.predict([every_v[i] for i in val_rows], views_of_dense(dense[val_rows]))
        gold, got = [every[i].re_class for i in val_rows], [p.re_class for p in preds]
        for t in ABSTAIN_THRESHOLDS:
            out[t].append(counted_detection(gold, got, [p.re_confidence < t for p in preds]))
    return out


def lowest_keeping_precision(per_fold: dict[float, list[dict]], min_precision: float = MIN_PRECISION) -> float:
    """The lowest abstain threshold (the most resource bugs counted) at which every fold's counted detection
    precision is `min_precision` or more; the highest threshold when none is; 0 (never abstain) without folds."""
    if not any(per_fold.values()):
        return 0.0
    kept = [t for t, folds in per_fold.items() if folds and all(f["precision"] >= min_precision for f in folds)]
    return min(kept) if kept else max(per_fold)


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


def labeled_split(con, labels_dir: Path, progress=None, embedder=None, examples: list[Example] | None = None
                  ) -> LabeledSplit:
    """The dev split of the labeled set (`examples`, else `labels_dir`'s), embedded through the cache."""
    examples = load_gold(labels_dir) if examples is None else examples
    tr, dv = split(examples)
    tr_v = [views(e.title, e.body) for e in tr]
    dv_v = [views(e.title, e.body) for e in dv]
    return LabeledSplit(examples, tr, dv, tr_v, dv_v, embed_views(con, tr_v, progress, embedder),
                        embed_views(con, dv_v, progress, embedder))


SETTING_KEYS = {"re_class": ("C", "sparse_weight", "lexical_C", "lexical_blend", "none_weight"),
                "component": ("C", "sparse_weight", "lexical_C", "lexical_blend"),
                "known_fix": ("C", "sparse_weight")}


def kept_settings(hyperparameters: dict) -> dict:
    """The heads' settings of a model's meta["hyperparameters"], without the thresholds that training chooses
    again, and the settings of its nearest labeled issues' votes if it has them (else training chooses them); a ValueError names what a
    head lacks."""
    out = {}
    for head, keys in SETTING_KEYS.items():
        h = hyperparameters.get(head) or {}
        if "C" not in h or "sparse_weight" not in h:
            raise ValueError(f"the model's settings lack the {head} head's C or sparse_weight")
        out[head] = {k: h[k] for k in keys if k in h}
    n = hyperparameters.get("nearest_labels")
    if n:
        missing = [k for k in NEAREST_KEYS if k not in n]
        if missing:
            raise ValueError(f"the model's nearest-label settings lack {', '.join(missing)}")
        out["nearest_labels"] = {k: n[k] for k in NEAREST_KEYS}
    return out


def train(con: duckdb.DuckDBPyConnection | None, labels_dir: Path = LABELS_DIR, out_dir: Path | None = None,
          progress: Callable[[int], None] | None = None, embedder=None,
          unlabeled: list[Views] | None = None, extra_labels=(), corrections: bool = True,
          refit: bool = True, settings: dict | None = None) -> TrainResult:
    """The hyperparameters and the abstain and fix thresholds are chosen on four blocked folds; the dev figures
    come from a model fitted with them on the training side alone (the held-out model, saved in `held_out/` beside
    the model); with `refit`, the model
    itself is then fitted with the same settings on every labeled issue, the dev split included (the newest
    issues of each repository, which the issues users mine today resemble most).
    `unlabeled`: extra issues for distilling the fast head (default: the snapshot issues nobody labeled).
    `settings`: the heads' settings to use instead of searching them (a model's meta["hyperparameters"], e.g. to
    retrain with a few more labels; the abstain and fix thresholds are still chosen on the folds).
    `out_dir` None: the user data folder (core.paths.models_dir()/<version>), never the installed package."""
    examples, n_corrections = training_examples(con, labels_dir, extra_labels, corrections)
    data = labeled_split(con, labels_dir, progress, embedder, examples)
    tr, dv, tr_v, dv_v = data.train, data.dev, data.train_views, data.dev_views
    tr_emb, dv_emb = data.train_embeddings, data.dev_embeddings
    dense_dv = dense_features(dv_emb, dv_v)
    tfidf = Tfidf().fit([x.lexical for x in tr_v])
    dense_tr = dense_features(tr_emb, tr_v)
    sparse_tr = tfidf.transform([x.lexical for x in tr_v])

    # regularisation strength, TF-IDF weight and the TF-IDF-only model's blend per head, chosen by the mean
    # macro-F1 over blocked folds (the dev split and three stretches of the training side: dataset.validation_folds);
    # the fix head's on the same folds, by the known fixes it shows with the rules
    every = tr + dv
    row = {e.key: i for i, e in enumerate(every)}
    dense_every = np.vstack([dense_tr, dense_dv])
    lexical_every = [x.lexical for x in tr_v + dv_v]
    folds = [([row[e.key] for e in a], [row[e.key] for e in b]) for a, b in validation_folds(every)]
    if settings is not None:
        chosen = kept_settings(settings)
    else:
        chosen = {}
        for target, classes in (("re_class", re_class_ids()), ("component", component_ids())):
            chosen[target] = _search_folds(dense_every, lexical_every, [getattr(e, target) for e in every],
                                           classes, folds, none_weight=target == "re_class")
        c, sw = _search_fix(every, tr_v + dv_v, dense_every, folds)
        chosen["known_fix"] = {"C": c, "sparse_weight": sw}
    if "nearest_labels" not in chosen:  # on the same folds, with the heads' settings just chosen (or kept)
        chosen["nearest_labels"] = _search_nearest_labels(every, tr_v + dv_v, dense_every, folds, chosen)
    # the held-out model: fitted on the training side only; the thresholds and the dev figures are its
    held_out = fit_classifier(tr, tr_v, tr_emb, chosen, features=(tfidf, dense_tr, sparse_tr))
    # the fix threshold: the highest keeping the folds' mean known-fix recall at FIX_MIN_RECALL (on dev alone it
    # rested on ~80 issues with a fix, and dev is the fold most like the training side)
    fix_recalls = fold_fix_recalls(every, tr_v + dv_v, dense_every, folds, chosen["known_fix"])
    held_out.fix_threshold = chosen["known_fix"]["threshold"] = highest_keeping_recall(fix_recalls)
    # the abstain threshold: the lowest at which every fold's resource-bug detection precision, counted as the
    # report and the bot count it (unsure set aside), keeps MIN_PRECISION (on dev alone, chosen by accuracy, it
    # set aside a quarter of the issues filed after the corpus, and with them half the resource bugs)
    abstain = fold_counted_detection(every, tr_v + dv_v, dense_every, folds, chosen)
    held_out.threshold = lowest_keeping_precision(abstain)
    preds = held_out.predict(dv_v, dv_emb)
    for p in preds:
        p.abstained = p.re_confidence < held_out.threshold
    dev = evaluate_predictions(dv, preds)
    coverage = float(np.mean([not p.abstained for p in preds])) if preds else 0.0
    held_out.meta = {
        "embedding_model": EMBEDDING_MODEL,
        "trained_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "n_train": len(tr), "n_dev": len(dv),
        "hyperparameters": chosen,
        "dev": {"re_class_macro_f1": dev["re_class"].macro_f1, "component_macro_f1": dev["component"].macro_f1,
                "coverage": round(coverage, 4)},
        "abstain_folds": {k: [f[k] for f in abstain[held_out.threshold]] for k in ("precision", "recall")},
        "corrections": n_corrections,
    }
    model = held_out
    if refit and dv:  # then the same hyperparameters and thresholds on every labeled issue, dev included
        every_v = tr_v + dv_v
        tfidf_all = Tfidf().fit([x.lexical for x in every_v])  # the dense features (rules, keywords) are kept
        features = (tfidf_all, dense_every, tfidf_all.transform([x.lexical for x in every_v]))
        model = fit_classifier(tr + dv, every_v, [], chosen, features=features)
        model.threshold, model.fix_threshold = held_out.threshold, held_out.fix_threshold
        model.meta = {**held_out.meta, "n_train": len(tr) + len(dv), "refit_on_dev": True}
    if out_dir is None:  # the user data folder, under the model's version (known once it is saved)
        staging = Path(tempfile.mkdtemp(prefix=".training-", dir=_ensure(models_dir())))
        try:
            version = _save(model, held_out, staging)
            fast = distill_fast_head(con, model, data, staging, progress, embedder, unlabeled, held_out)
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
        fast = distill_fast_head(con, model, data, out_dir, progress, embedder, unlabeled, held_out)
    return TrainResult(model, version, dev, coverage, model.meta["n_train"], len(dv), fast, n_corrections)


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


def refresh_fast_head(con: duckdb.DuckDBPyConnection | None, labels_dir: Path = LABELS_DIR,
                      model_dir: Path | None = None, progress: Callable[[int], None] | None = None,
                      embedder=None, unlabeled: list[Views] | None = None):
    """Distil the fast head again for the model already in `model_dir` (the heads stay as they are). The
    shipped model is rewritten only when `model_dir` names it."""
    if model_dir is None:
        raise UserError("give the model folder whose fast head to distil again (--output DIR or --model DIR)")
    model_dir = Path(model_dir)
    model = IssueClassifier.load(model_dir)
    data = labeled_split(con, labels_dir, progress, embedder)
    return model, distill_fast_head(con, model, data, model_dir, progress, embedder, unlabeled, model.held_out())


def distill_fast_head(con, model: IssueClassifier, data: LabeledSplit, out_dir: Path, progress=None,
                      embedder=None, unlabeled: list[Views] | None = None, gate_model: IssueClassifier | None = None):
    """Distil the fast head from `model` over its training split and unlabeled issues; save it in `out_dir`;
    return the classify path's agreement with the full model on the dev split. `gate_model`: the held-out fit of
    a model refitted on the dev split, whose margins on the dev split (which it never saw) become the gate."""
    from retriage.classifier.distill import agreement, answers, choose_gate, fit_fast_head, unlabeled_snapshot_views
    from retriage.classifier.static_embed import StaticMiniLM, ensure_table

    report_v: list[Views] = []  # unlabeled issues used neither for the maps nor the gate: the agreement on them
    if unlabeled is None:
        if con is not None:  # the snapshot's shipped embeddings spare embedding its issues again
            from retriage.classifier.snapshot_cache import load_into

            load_into(con)
        labeled = {e.key for e in data.examples}
        unlabeled, report_v = (unlabeled_snapshot_views(labeled, p) for p in ("fit", "report"))

    def embedded(v):
        return embed_views(con, v, progress, embedder) if v else [np.zeros((0, DIM), np.float32)] * len(VIEW_FIELDS)

    un_emb, report_emb = embedded(unlabeled), embedded(report_v)
    static = StaticMiniLM(ensure_table())
    all_emb = [np.vstack([a, b]).astype(np.float32) for a, b in zip(data.train_embeddings, un_emb)]
    head = fit_fast_head(model, static, data.train_views + list(unlabeled), all_emb)
    check, result, held_out = {}, None, {}
    if data.dev_views:
        # the gate is chosen on issues the teacher never saw: for a model refitted on the dev split, on the
        # dev split with its held-out fit and a fast head distilled from that fit the same way
        judge, judge_head = model, head
        if gate_model is not None and gate_model is not model:
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


def evaluate_predictions(gold: list[Example], preds) -> dict[str, Scores]:
    return {
        "re_class": score([e.re_class for e in gold], [p.re_class for p in preds], re_class_ids()),
        "component": score([e.component for e in gold], [p.component for p in preds], component_ids()),
    }
