"""How the classifier holds on issues it has never seen: the future and new-engine splits (classifier/splits.py).

For each split, the model is fitted anew on the split's training side with the shipped model's
hyperparameters (nothing is chosen on the scored side), and scored beside the baselines, each fitted on the
same training side: RE macro-F1 with a bootstrap 95 % interval, per-class F1, resource-bug detection,
component macro-F1, and (for the model) known-fix recall.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from retriage.classifier import metrics
from retriage.classifier.dataset import Example
from retriage.classifier.features import Views, views
from retriage.classifier.predict import fixes_for
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

    def to_dict(self) -> dict:
        d = {"re_macro_f1": self.re_macro_f1, "re_macro_f1_95ci": list(self.re_interval),
             "re_per_class_f1": self.re_per_class_f1, "detection": self.detection,
             "component_macro_f1": self.component_macro_f1}
        if self.fix_recall is not None:
            d["known_fix_recall"] = self.fix_recall
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
                  fixes: list[list[str]] | None = None) -> SystemScores:
    y = [e.re_class for e in gold]
    s = metrics.score(y, re_pred, re_class_ids())
    return SystemScores(
        s.macro_f1, metrics.bootstrap_interval(y, re_pred, re_class_ids()),
        {c: v["f1"] for c, v in s.per_class.items()}, metrics.detection(y, re_pred),
        metrics.macro_f1([e.component for e in gold], comp_pred, component_ids()),
        metrics.fix_recall([e.known_fix for e in gold], fixes) if fixes is not None else None)


def cached_baseline(fn: Callable[..., list[str]], *inputs) -> list[str]:
    """`fn(*inputs)`, remembered on disk by a hash of its name and inputs (the TF-IDF baseline refits in seconds
    per split and target, always to the same answer). A cache that cannot be read or written is skipped."""
    import hashlib
    import json

    from retriage.core.paths import cache_dir

    h = hashlib.sha256(fn.__name__.encode())
    h.update(json.dumps(inputs, ensure_ascii=False).encode("utf-8", "replace"))
    path = cache_dir() / "baselines" / f"{h.hexdigest()[:32]}.json"
    try:
        out = json.loads(path.read_text())
        if isinstance(out, list) and all(isinstance(x, str) for x in out):
            return out
    except (OSError, ValueError):
        pass
    out = fn(*inputs)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(list(out)))
        tmp.replace(path)
    except OSError:
        pass
    return list(out)


def evaluate_split(split: Split, embed: Callable[[list[Views]], list[np.ndarray]], hyperparameters: dict,
                   step: Callable[[str], None] | None = None,
                   view_of: Callable[[Example], Views] | None = None) -> SplitReport:
    """`embed`: view embeddings (VIEW_FIELDS order) of a list of views (through a cache); `view_of`: an
    example's views (default: computed here; pass a memo when evaluating several splits)."""
    from retriage.classifier.train import fit_classifier

    step = step or (lambda _: None)
    view_of = view_of or (lambda e: views(e.title, e.body))
    tr, te = split.train, split.test
    tr_v = [view_of(e) for e in tr]
    te_v = [view_of(e) for e in te]
    step(f"{split.name}: embeddings")
    tr_emb, te_emb = embed(tr_v), embed(te_v)
    step(f"{split.name}: fitting the model on {len(tr)} issues")
    model = fit_classifier(tr, tr_v, tr_emb, hyperparameters, calibrate=False)
    preds = model.predict(te_v, te_emb)
    fixes = [fixes_for(x, e.engine, p) for e, x, p in zip(te, te_v, preds)]
    report = SplitReport(split.name, split.description, len(tr), len(te))
    for e in te:
        report.test_sources[e.source] = report.test_sources.get(e.source, 0) + 1
    report.systems["model"] = system_scores(te, [p.re_class for p in preds], [p.component for p in preds], fixes)
    step(f"{split.name}: baselines")
    tr_text, te_text = [x.lexical for x in tr_v], [x.lexical for x in te_v]
    report.systems["tfidf_logreg"] = system_scores(
        te, cached_baseline(metrics.tfidf_logreg, tr_text, [e.re_class for e in tr], te_text),
        cached_baseline(metrics.tfidf_logreg, tr_text, [e.component for e in tr], te_text))
    report.systems["keyword_rules"] = system_scores(
        te, metrics.keyword_rules(te_text, "re_class"), metrics.keyword_rules(te_text, "component"))
    report.systems["majority"] = system_scores(
        te, metrics.majority([e.re_class for e in tr], len(te)), metrics.majority([e.component for e in tr], len(te)))
    for engine in sorted({e.engine for e in te}):
        idx = [i for i, e in enumerate(te) if e.engine == engine]
        y = [te[i].re_class for i in idx]
        p = [preds[i].re_class for i in idx]
        report.per_engine[engine] = {"n": len(idx), "re_macro_f1": metrics.macro_f1(y, p, re_class_ids()),
                                     "re_macro_f1_95ci": list(metrics.bootstrap_interval(y, p, re_class_ids())),
                                     "detection": metrics.detection(y, p)}
    return report
