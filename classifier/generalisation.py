"""How the classifier holds on issues it has never seen: the future and new-engine splits (classifier/splits.py),
and the figures of any set of gold issues the model answered.

For each split, the model is fitted anew on the split's training side with the shipped model's hyperparameters and
abstain threshold (nothing is chosen on the scored side), and scored beside the baselines, each fitted on the same
training side. The model's answers are its decisions (classifier/decision.py), as `label` stores them and `show`,
`predict` and the bot say them. Figures: RE macro-F1 with a bootstrap 95 % interval, per-class F1, resource-bug
detection, component macro-F1, and (for the model) known-fix precision and recall, and resource-bug detection as
the weekly report and the bot count it: with the issues the decision left unsure set aside (`detection_counted`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from retriage.classifier import metrics
from retriage.classifier.dataset import Example
from retriage.classifier.decision import decide_issue
from retriage.classifier.features import Views, views
from retriage.classifier.result_cache import examples_material, is_answers, is_str_list, remember
from retriage.classifier.splits import Split
from retriage.taxonomy import component_ids, re_class_ids

ANSWERS = ("re_class", "component", "abstained", "fixes")  # the model's answers per gold issue


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


def decided_answers(model, gold: list[Example], gold_views: list[Views], embeddings: list[np.ndarray]) -> dict:
    """The model's answers on `gold` (given their views and view embeddings) through the one decision
    (decision.decide_issue, on each issue's text and engine): class, component, abstained, known fixes."""
    preds = model.predict(gold_views, embeddings)
    decided = [decide_issue(x, e.body, e.engine, p, model.version) for e, x, p in zip(gold, gold_views, preds)]
    return {"re_class": [d.re_class for d in decided], "component": [p.component for p in preds],
            "abstained": [bool(d.abstained) for d in decided], "fixes": [d.known_fixes for d in decided]}


def remembered_answers(kind: str, material: dict, compute: Callable[[], dict], n: int) -> dict:
    """`compute()`'s answers on n issues, or those remembered for the same material (classifier/result_cache.py)."""
    return remember(kind, material, compute,
                    lambda x: is_answers(x, n, ANSWERS) and all(isinstance(a, bool) for a in x["abstained"]))


def refit_answers(split: Split, embed: Callable[[list[Views]], list[np.ndarray]], hyperparameters: dict,
                  threshold: float, step: Callable[[str], None], view_of: Callable[[Example], Views]) -> dict:
    """The model fitted anew on the split's training side, abstaining under `threshold`: its decisions on the test
    side (remembered by a hash of both sides, the settings and the threshold)."""
    tr, te = split.train, split.test

    def compute() -> dict:
        from retriage.classifier.train import fit_classifier

        step(f"{split.name}: embeddings")
        tr_v, te_v = [view_of(e) for e in tr], [view_of(e) for e in te]
        tr_emb, te_emb = embed(tr_v), embed(te_v)
        step(f"{split.name}: fitting the model on {len(tr)} issues")
        # the heads' argmax does not depend on their calibration, but abstaining and the neighbours' votes (mixed
        # into calibrated probabilities) do: then the model is calibrated as the shipped one is
        calibrate = threshold > 0 or (hyperparameters.get("nearest_labels") or {}).get("weight", 0) > 0
        model = fit_classifier(tr, tr_v, tr_emb, hyperparameters, calibrate=calibrate)
        model.threshold = threshold
        return decided_answers(model, te, te_v, te_emb)

    material = {"train": examples_material(tr), "test": examples_material(te), "settings": hyperparameters,
                "threshold": threshold}
    return remembered_answers(f"refit-{split.name}", material, compute, len(te))


def evaluate_split(split: Split, embed: Callable[[list[Views]], list[np.ndarray]], hyperparameters: dict,
                   step: Callable[[str], None] | None = None, view_of: Callable[[Example], Views] | None = None,
                   threshold: float = 0.0) -> SplitReport:
    """`embed`: view embeddings (VIEW_FIELDS order) of a list of views (through a cache); `view_of`: an example's
    views (default: computed here; pass a memo when evaluating several splits); `threshold`: the abstain threshold
    (the shipped model's; 0: never abstain). Answers already computed for the same issues, labels, settings and
    code are read back (classifier/result_cache.py)."""
    step = step or (lambda _: None)
    view_of = view_of or (lambda e: views(e.title, e.body))
    answers = refit_answers(split, embed, hyperparameters, threshold, step, view_of)
    step(f"{split.name}: baselines")
    return answered_split(split.name, split.description, len(split.train), split.test, answers,
                          {"model": answers, **baseline_answers(split.train, split.test, view_of)})


def answered_split(name: str, description: str, n_train: int, gold: list[Example], answers: dict,
                   predicted: dict) -> SplitReport:
    """The figures of one set of gold issues, from answers already given: `answers` the model's (with its fixes
    and abstentions, counted as unsure), `predicted` every system's class and component, the model's included."""
    report = SplitReport(name, description, n_train, len(gold))
    for e in gold:
        report.test_sources[e.source] = report.test_sources.get(e.source, 0) + 1
    for system, a in predicted.items():
        model_row = system == "model"
        report.systems[system] = system_scores(gold, a["re_class"], a["component"],
                                               answers["fixes"] if model_row else None,
                                               answers["abstained"] if model_row else None)
    report.per_engine = per_engine(gold, answers["re_class"])
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
    """system -> target -> answers on `test`, for the three baselines fitted on `train` (remembered by a hash of
    the raw issues and their labels)."""
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

    def cached(name: str, on: list[Example], compute: Callable[[], list[str]], target: str) -> list[str]:
        material = {"train": examples_material(on), "test": examples_material(test), "target": target}
        return remember(f"baseline-{name}", material, compute, lambda x: is_str_list(x, len(test)))

    out: dict[str, dict[str, list[str]]] = {"tfidf_logreg": {}, "keyword_rules": {}, "majority": {}}
    for target in ("re_class", "component"):
        y = [getattr(e, target) for e in train]
        out["tfidf_logreg"][target] = cached("tfidf_logreg", train, lambda: tfidf_logreg(y), target)
        out["keyword_rules"][target] = cached("keyword_rules", [], lambda: metrics.keyword_rules(texts("test"), target),
                                              target)
        out["majority"][target] = metrics.majority(y, len(test))
    return out
