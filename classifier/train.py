"""`retriage train`, in scikit-learn's shape: settings in the constructor, `fit(X, y)` returns the estimator, what it
learned ends in an underscore. X is `Issues`, y `labels_of` the labeled issues. `ClassifierFit` fits one
IssueClassifier with given settings (`model_settings` reads them from a model's meta.json); `Trainer` fits the
held-out model (scored on the dev split) and the model on every label, with the shipped model's settings or those
`--search` chooses (classifier/settings_search.py); `train` embeds the labeled set, runs the Trainer, saves both
fits and distils the fast head of `retriage classify` from them (classifier/distill.py).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
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
from retriage.classifier.head import LinearHead
from retriage.classifier.metrics import score
from retriage.classifier.model import HELD_OUT, META, IssueClassifier, shipped_model_dir
from retriage.classifier.nearest_labels import SETTING_KEYS as NEAREST_KEYS
from retriage.classifier.nearest_labels import NearestLabels, views_of_dense
from retriage.core.errors import UserError
from retriage.core.paths import models_dir
from retriage.taxonomy import LABELS_DIR, component_ids, fix_tag_ids, re_class_ids

FIX_THRESHOLD = 0.5  # the fix head's threshold when the settings name none
TARGETS = ("re_class", "component", "known_fix")  # y's columns, a head each
CLASSES = {"re_class": re_class_ids, "component": component_ids, "known_fix": fix_tag_ids}
HEAD_KEYS = {"re_class": ("C", "sparse_weight", "lexical_C", "lexical_blend", "none_weight"),
             "component": ("C", "sparse_weight", "lexical_C", "lexical_blend"),
             "known_fix": ("C", "sparse_weight", "threshold")}


@contextmanager
def rare_tags_quiet():
    """Without scikit-learn's UserWarning that a class has fewer issues than the calibration's 5 stratified folds:
    the rarest fix tags have a handful, and a fold without one is expected. Around whole fits (not thread-safe)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The least populated class", category=UserWarning)
        yield


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
    with rare_tags_quiet():
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


# ---- retriage train ------------------------------------------------------------------------------------------------
class Trainer(BaseEstimator):
    """The held-out model (`held_out_`) fitted on the training side (the issues of folds other than 0) and scored on
    the dev split (`dev_`: target -> Scores, `coverage_`); with `refit`, the model (`model_`) fitted with the same
    settings on every issue. `settings`: ClassifierFit's (model_settings); `search`: choose them on the blocked
    folds instead (settings_search.search_settings). `log` is told each phase."""

    def __init__(self, settings: dict | None = None, search: bool = False, refit: bool = True,
                 log: Callable[[str], None] | None = None):
        self.settings, self.search, self.refit, self.log = settings, search, refit, log

    def fit(self, X: Issues, y: np.ndarray) -> "Trainer":
        with rare_tags_quiet():
            return self._fit(X, y, self.log or (lambda s: None))

    def _fit(self, X: Issues, y: np.ndarray, log: Callable[[str], None]) -> "Trainer":
        if self.search:
            from retriage.classifier.settings_search import search_settings

            settings = search_settings(X, y, X.folds(), log)
        elif self.settings is None:
            raise ValueError("Trainer needs settings, or search=True")
        else:
            settings = dict(self.settings)
        abstain_folds = settings.pop("abstain_folds", None)
        fit_settings = {k: settings[k] for k in (*TARGETS, "nearest_labels", "abstain_threshold")}
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
            "hyperparameters": {k: fit_settings[k] for k in (*TARGETS, "nearest_labels")},
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
                  log: Callable[[str], None] = lambda s: None, shipped_vectors: bool = False) -> LabeledSplit:
    """The dev split of the labeled set (`examples`, else `labels_dir`'s), embedded through the cache (with
    `shipped_vectors`, the snapshot's shipped vectors loaded into it first, which spare embedding its issues)."""
    examples = load_gold(labels_dir) if examples is None else examples
    if shipped_vectors and con is not None:
        from retriage.classifier.snapshot_cache import load_into

        log("loading the shipped embedding cache into the database's")
        load_into(con)
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
    data = labeled_split(con, labels_dir, progress, embedder, examples, log, shipped_vectors=unlabeled is None)
    if settings is None and not search:
        settings = settings_of()
    trainer = Trainer(settings, search, refit, log).fit(*data.issues())
    model, held_out = trainer.model_, trainer.held_out_
    held_out.meta["corrections"] = model.meta["corrections"] = n_corrections
    log("saving the model" + (" and its held-out fit" if model is not held_out else ""))
    # the user data folder: a staging folder renamed to the model's version, known once it is saved
    if out_dir is None:
        try:
            models_dir().mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create the model folder {models_dir()}: {e.strerror}") from None
    folder = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix=".training-", dir=models_dir()))
    try:
        if model is not held_out:  # beside a refit on the dev split, its held-out fit, which the dev figures measure
            model.meta["held_out_version"] = held_out.save(folder / HELD_OUT)
        elif (folder / HELD_OUT).exists():  # a model fitted without the dev split is its own held-out model
            shutil.rmtree(folder / HELD_OUT)
        version = model.save(folder)
        fast = distill_fast_head(con, model, data, folder, progress, embedder, unlabeled, held_out, log)
        if out_dir is None:
            final = folder.parent / version
            if final.exists():
                shutil.rmtree(final)
            folder.rename(final)
            model.folder = final
    finally:
        if out_dir is None and folder.exists():
            shutil.rmtree(folder)
    return TrainResult(model, version, trainer.dev_, trainer.coverage_, model.meta["n_train"], len(data.dev), fast,
                       n_corrections)


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
    data = labeled_split(con, labels_dir, progress, embedder, shipped_vectors=unlabeled is None)
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
        # the gate is chosen on issues the teacher never saw: for a model refitted on the dev split, on the dev split
        # with its held-out fit and a fast head distilled from that fit the same way (one at a time: side by side,
        # the two fits held 0.5 GB more)
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
