"""How the classifier holds on issues it has never seen: the future and new-engine splits (classifier/splits.py).

For each split, the model is fitted anew on the split's training side with the shipped model's
hyperparameters (nothing is chosen on the scored side), and scored beside the baselines, each fitted on the
same training side: RE macro-F1 with a bootstrap 95 % interval, per-class F1, resource-bug detection,
component macro-F1, and (for the model) known-fix precision and recall, and resource-bug detection as the
weekly report and the bot count it: with the issues under the shipped model's abstain threshold set aside as
`unsure` (`detection_counted`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from retriage.classifier import metrics
from retriage.classifier.dataset import Example
from retriage.classifier.features import Views, views
from retriage.classifier.predict import fixes_for
from retriage.classifier.result_cache import examples_material, is_answers, is_str_list, remember
from retriage.classifier.splits import Split
from retriage.taxonomy import component_ids, re_class_ids

@dataclass
class SystemScores:
    re_macro_f1: float
    re_interval: tuple[float, float]
    re_per_class_f1: dict
    detection: dict
    component_macro_f1: float
    fix_recall: dict | None = None
    counted: dict | None = None  # detection with the unsure issues set aside (metrics.counted_detection)

    def to_dict(self) -> dict:
        d = {"re_macro_f1": self.re_macro_f1, "re_macro_f1_95ci": list(self.re_interval),
             "re_per_class_f1": self.re_per_class_f1, "detection": self.detection,
             "component_macro_f1": self.component_macro_f1}
        if self.fix_recall is not None:
            d["known_fix_recall"] = self.fix_recall
        if self.counted is not None:
            d["detection_counted"] = self.counted
        return d


@dataclass
class SplitReport:
    name: str
    description: str
    n_train: int
    n_test: int
    systems: dict = field(default_factory=dict)  # system -> SystemScores
    per_engine: dict = field(default_factory=dict)  # engine -> {"n", "re_macro_f1", "detection"} (the model's)
    test_sources: dict = field(default_factory=dict)  # form of record -> count

    def to_dict(self) -> dict:
        return {"split": self.name, "description": self.description, "n_train": self.n_train,
                "n_test": self.n_test, "test_sources": self.test_sources,
                "systems": {k: v.to_dict() for k, v in self.systems.items()}, "model_per_engine": self.per_engine}


def system_scores(gold: list[Example], re_pred: list[str], comp_pred: list[str],
                  fixes: list[list[str]] | None = None, unsure: list[bool] | None = None) -> SystemScores:
    y = [e.re_class for e in gold]
    s = metrics.score(y, re_pred, re_class_ids())
    return SystemScores(
        s.macro_f1, metrics.bootstrap_interval(y, re_pred, re_class_ids()),
        {c: v["f1"] for c, v in s.per_class.items()}, metrics.detection(y, re_pred),
        metrics.macro_f1([e.component for e in gold], comp_pred, component_ids()),
        metrics.fix_recall([e.known_fix for e in gold], fixes) if fixes is not None else None,
        metrics.counted_detection(y, re_pred, unsure) if unsure is not None else None)


def cached_baseline(name: str, train: list[Example], test: list[Example], compute: Callable[[], list[str]],
                    target: str = "") -> list[str]:
    """A baseline's answers on `test`, remembered by a hash of the raw issues and their labels
    (classifier/result_cache.py); `compute` runs only when nothing is remembered."""
    material = {"train": examples_material(train), "test": examples_material(test), "target": target}
    return remember(f"baseline-{name}", material, compute, lambda x: is_str_list(x, len(test)))


def refit_answers(split: Split, tr_emb: list[np.ndarray], te_emb: list[np.ndarray], hyperparameters: dict,
                  view_of: Callable[[Example], Views]) -> dict:
    """The model fitted on the split's training side (given its view embeddings) and its class, component and
    known fixes per test issue. Not remembered: the caller chooses the embeddings."""
    from retriage.classifier.train import fit_classifier

    tr_v, te_v = [view_of(e) for e in split.train], [view_of(e) for e in split.test]
    # the heads' argmax does not depend on their calibration, but the neighbours' votes are mixed into calibrated
    # probabilities, so a model with them is calibrated as the shipped one is
    calibrate = (hyperparameters.get("nearest_labels") or {}).get("weight", 0) > 0
    model = fit_classifier(split.train, tr_v, tr_emb, hyperparameters, calibrate=calibrate)
    preds = model.predict(te_v, te_emb)
    return {"re_class": [p.re_class for p in preds], "component": [p.component for p in preds],
            "fixes": [fixes_for(x, e.engine, p) for e, x, p in zip(split.test, te_v, preds)],
            "re_confidence": [p.re_confidence for p in preds]}


def model_answers(split: Split, embed: Callable[[list[Views]], list[np.ndarray]], hyperparameters: dict,
                  step: Callable[[str], None], view_of: Callable[[Example], Views]) -> dict:
    """The model fitted anew on the split's training side: its class, component and known fixes per test issue
    (remembered by a hash of both sides and the settings)."""
    tr, te = split.train, split.test

    def compute() -> dict:
        step(f"{split.name}: embeddings")
        tr_emb, te_emb = embed([view_of(e) for e in tr]), embed([view_of(e) for e in te])
        step(f"{split.name}: fitting the model on {len(tr)} issues")
        return refit_answers(split, tr_emb, te_emb, hyperparameters, view_of)

    material = {"train": examples_material(tr), "test": examples_material(te), "settings": hyperparameters}
    return remember(f"refit-{split.name}", material, compute,
                    lambda x: is_answers(x, len(te), ("re_class", "component", "fixes", "re_confidence")))


def evaluate_split(split: Split, embed: Callable[[list[Views]], list[np.ndarray]], hyperparameters: dict,
                   step: Callable[[str], None] | None = None,
                   view_of: Callable[[Example], Views] | None = None, threshold: float | None = None) -> SplitReport:
    """`embed`: view embeddings (VIEW_FIELDS order) of a list of views (through a cache); `view_of`: an
    example's views (default: computed here; pass a memo when evaluating several splits); `threshold`: the
    abstain threshold under which the model's answers count as unsure (the shipped model's; the refit, fitted
    without one, abstains on nothing itself). Answers already computed for the same issues, labels, settings
    and code are read back (classifier/result_cache.py)."""
    step = step or (lambda _: None)
    view_of = view_of or (lambda e: views(e.title, e.body))
    tr, te = split.train, split.test
    answers = model_answers(split, embed, hyperparameters, step, view_of)
    report = SplitReport(split.name, split.description, len(tr), len(te))
    for e in te:
        report.test_sources[e.source] = report.test_sources.get(e.source, 0) + 1
    unsure = [c < threshold for c in answers["re_confidence"]] if threshold is not None else None
    report.systems["model"] = system_scores(te, answers["re_class"], answers["component"], answers["fixes"], unsure)
    step(f"{split.name}: baselines")
    for name, systems in baseline_answers(tr, te, view_of).items():
        report.systems[name] = system_scores(te, systems["re_class"], systems["component"])
    report.per_engine = per_engine(te, answers["re_class"])
    return report


def per_engine(gold: list[Example], re_pred: list[str]) -> dict:
    """engine -> the model's RE macro-F1 (with its 95 % interval) and resource-bug detection on its issues."""
    out = {}
    for engine in sorted({e.engine for e in gold}):
        idx = [i for i, e in enumerate(gold) if e.engine == engine]
        y = [gold[i].re_class for i in idx]
        p = [re_pred[i] for i in idx]
        out[engine] = {"n": len(idx), "re_macro_f1": metrics.macro_f1(y, p, re_class_ids()),
                       "re_macro_f1_95ci": list(metrics.bootstrap_interval(y, p, re_class_ids())),
                       "detection": metrics.detection(y, p)}
    return out


def baseline_answers(train: list[Example], test: list[Example], view_of: Callable[[Example], Views]) -> dict:
    """system -> target -> answers on `test`, for the three baselines fitted on `train`."""
    lexical: dict[str, list[str]] = {}

    def texts(side: str) -> list[str]:  # computed only when a baseline is not remembered
        if side not in lexical:
            lexical[side] = [view_of(e).lexical for e in (train if side == "train" else test)]
        return lexical[side]

    matrices: list[tuple] = []  # the TF-IDF features of both sides, fitted once for both targets

    def tfidf_logreg(y: list[str]) -> list[str]:
        if not matrices:
            matrices.append(metrics.tfidf_matrices(texts("train"), texts("test")))
        return metrics.tfidf_logreg(texts("train"), y, texts("test"), matrices[0])

    out: dict[str, dict[str, list[str]]] = {"tfidf_logreg": {}, "keyword_rules": {}, "majority": {}}
    for target in ("re_class", "component"):
        y = [getattr(e, target) for e in train]
        out["tfidf_logreg"][target] = cached_baseline("tfidf_logreg", train, test, lambda: tfidf_logreg(y), target)
        out["keyword_rules"][target] = cached_baseline(
            "keyword_rules", [], test, lambda: metrics.keyword_rules(texts("test"), target), target)
        out["majority"][target] = metrics.majority(y, len(test))
    return out
