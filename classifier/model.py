"""The issue classifier: features -> two calibrated heads (RE class, component), with the votes of the nearest
labeled issues mixed in (classifier/nearest_labels.py) -> predictions with abstention.

The trained model lives in classifier/model/ as `weights.npz` (arrays only, loaded with allow_pickle=False) and
`meta.json`; `model_version` is a hash of their content. Embeddings are passed in, not computed here: callers
choose the embedder and the cache (see classifier/embedding_cache.py).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from retriage.classifier import model_dir, shipped_model_dir  # noqa: F401 - shipped_model_dir re-exported
from retriage.classifier.embed import DIM
from retriage.classifier.features import VIEW_FIELDS, Tfidf, Views, dense_features
from retriage.classifier.head import LinearHead, softmax
from retriage.classifier.nearest_labels import NearestLabels
from retriage.core.errors import UserError
from retriage.taxonomy import fix_tag_for_engine

WEIGHTS = "weights.npz"
VOCAB = "vocab.txt"
HELD_OUT = "held_out"  # beside a model refitted on the dev split too: the model fitted without it
META = "meta.json"




@dataclass
class Prediction:
    re_class: str
    re_confidence: float
    component: str
    component_confidence: float
    abstained: bool
    re_probs: dict = field(default_factory=dict)
    component_probs: dict = field(default_factory=dict)
    known_fix: str = "none"  # the fix head's likeliest tag when it is confident enough that one applies, else "none"
    known_fix_confidence: float = 0.0  # the head's probability that some known fix applies (1 - P("none"))
    fix_probs: dict = field(default_factory=dict)  # the fix head's probability per tag (empty: no fix head)
    fix_threshold: float = 0.0  # the model's threshold on that probability for the fix head's tag

    def to_dict(self) -> dict:
        return asdict(self)

    def fix_for(self, engine: str | None) -> tuple[str, float]:
        """The fix head's tag for an issue of `engine`, and its confidence. The confidence is the head's
        probability that some known fix applies (1 - P("none")); when it reaches the threshold, the likeliest tag
        other than "none" stands, each engine-bound tag's probability pooled into the tag it is on this engine
        (taxonomy.fix_tag_for_engine: device memory exhausted is one phenomenon, `llamacpp_offload` on llama.cpp
        and `oom_four_step` elsewhere); ("none", 0.0) otherwise."""
        if not self.fix_probs:  # made without the head's probabilities: its tag, in the engine's terms
            if self.known_fix == "none":
                return "none", 0.0
            return fix_tag_for_engine(self.known_fix, engine), self.known_fix_confidence
        best, p = likeliest_fix(self.fix_probs, engine)
        if best == "none" or p < self.fix_threshold:
            return "none", 0.0
        return best, round(p, 4)


def likeliest_fix(fix_probs: dict, engine: str | None) -> tuple[str, float]:
    """The likeliest tag other than "none" for an issue of `engine` (engine-bound tags pooled; "none" when the
    head names no other) and the probability that some known fix applies, 1 - P("none"). Which fix is a
    separate question from whether one applies: a "none" that beats each tag alone may not beat them together."""
    tags = {t: p for t, p in fix_probs.items() if t != "none"}
    if not tags:
        return "none", 0.0
    best, _ = engine_fix(tags, engine)
    return best, max(0.0, 1.0 - fix_probs.get("none", 0.0))


def engine_fix(fix_probs: dict, engine: str | None) -> tuple[str, float]:
    """The best fix tag for an issue of `engine` and its probability, each engine-bound tag's probability given
    to the tag it is on this engine (ties go to "none")."""
    pooled: dict[str, float] = {}
    for tag, p in fix_probs.items():
        key = fix_tag_for_engine(tag, engine)
        pooled[key] = pooled.get(key, 0.0) + p
    best = max(pooled, key=lambda t: (pooled[t], t == "none"))
    return best, pooled[best]


class IssueClassifier:
    def __init__(self, tfidf: Tfidf, re_head: LinearHead, component_head: LinearHead, threshold: float,
                 meta: dict | None = None, fix_head: LinearHead | None = None, fix_threshold: float = 1.0,
                 nearest_labels: NearestLabels | None = None):
        self.tfidf = tfidf
        self.re_head = re_head
        self.component_head = component_head
        self.threshold = threshold
        self.fix_head = fix_head  # known-fix tag from the same features (optional: older models have none)
        self.fix_threshold = fix_threshold
        self.nearest_labels = nearest_labels  # the labeled issues' votes (optional: older models and the fast path have none)
        self.meta = dict(meta or {})
        self.folder: Path | None = None  # where it was loaded from or saved to

    # ---- features and prediction -------------------------------------------------------------------------
    @property
    def embedding_width(self) -> int:
        """How many leading dense features are the concatenated view embeddings."""
        return len(VIEW_FIELDS) * DIM

    def lexical_logits(self, v: list[Views], with_fix: bool = False) -> tuple[np.ndarray, ...]:
        """Each head's logits without the embedding part: keyword and rule signals, TF-IDF and the bias (RE,
        component, and with `with_fix` the fix head's too, or None for a model without one)."""
        dense = dense_features([], v)  # the signals that follow the embeddings
        rows = [self.tfidf.transform_one(x.lexical) for x in v]
        w = self.embedding_width
        out = (self.re_head.logits(dense, rows, first=w), self.component_head.logits(dense, rows, first=w))
        if with_fix:
            out += (self.fix_head.logits(dense, rows, first=w) if self.fix_head is not None else None,)
        return out

    def embedding_logits(self, embeddings: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The embedding part of each head's logits (add to `lexical_logits` for the whole)."""
        e = np.hstack(embeddings).astype(np.float32)
        w = self.embedding_width
        return e @ self.re_head.w_dense_[:w], e @ self.component_head.w_dense_[:w]

    def predict(self, v: list[Views], embeddings: list[np.ndarray]) -> list[Prediction]:
        """Predictions for issues given their views and the embeddings of each view (VIEW_FIELDS order)."""
        lr, lc = self.lexical_logits(v)
        er, ec = self.embedding_logits(embeddings)
        preds = self.predictions(lr + er, lc + ec, embeddings)
        if self.fix_head is not None and preds:
            dense = dense_features(embeddings, v)
            self.add_known_fixes(preds, self.fix_head.logits(dense, [self.tfidf.transform_one(x.lexical) for x in v]))
        return preds

    def add_known_fixes(self, preds: list[Prediction], z_fix: np.ndarray) -> None:
        """Set each prediction's fix-head probabilities and, where the head is confident enough that some known
        fix applies, its likeliest tag (in no engine's terms: `Prediction.fix_for` gives the engine's)."""
        p = softmax(z_fix / self.fix_head.temperature_)
        for pred, row in zip(preds, p):
            pred.fix_probs = {t: float(x) for t, x in zip(self.fix_head.classes_, row)}
            pred.fix_threshold = self.fix_threshold
            tag, confidence = likeliest_fix(pred.fix_probs, None)
            if tag != "none" and confidence >= self.fix_threshold:
                pred.known_fix, pred.known_fix_confidence = tag, round(confidence, 4)

    def probabilities(self, z_re: np.ndarray, z_comp: np.ndarray, embeddings: list[np.ndarray] | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
        """Calibrated probabilities from each head's logits; given the issues' view embeddings, with the nearest
        labeled issues' votes mixed in (a model without neighbours, or no embeddings, gives the heads' alone; the
        fast path passes its estimated vote vector, `FastHead.vote_embeddings`)."""
        pr, pc = softmax(z_re / self.re_head.temperature_), softmax(z_comp / self.component_head.temperature_)
        if self.nearest_labels is not None and embeddings is not None and len(embeddings):
            pr, pc = self.nearest_labels.mix(pr, pc, embeddings)
        return pr, pc

    def predictions(self, z_re: np.ndarray, z_comp: np.ndarray, embeddings: list[np.ndarray] | None = None
                    ) -> list[Prediction]:
        """Predictions from each head's logits (and the view embeddings, for the neighbours' votes)."""
        return self.predictions_from(*self.probabilities(z_re, z_comp, embeddings))

    def predictions_from(self, pr: np.ndarray, pc: np.ndarray) -> list[Prediction]:
        """Predictions from calibrated probabilities (`probabilities`)."""
        out = []
        for i in range(len(pr)):
            r, c = int(pr[i].argmax()), int(pc[i].argmax())
            out.append(Prediction(
                re_class=self.re_head.classes_[r], re_confidence=round(float(pr[i, r]), 4),
                component=self.component_head.classes_[c], component_confidence=round(float(pc[i, c]), 4),
                abstained=bool(pr[i, r] < self.threshold),
                re_probs={k: round(float(p), 4) for k, p in zip(self.re_head.classes_, pr[i])},
                component_probs={k: round(float(p), 4) for k, p in zip(self.component_head.classes_, pc[i])},
            ))
        return out

    # ---- persistence ------------------------------------------------------------------------------------
    @property
    def version(self) -> str | None:
        return self.meta.get("model_version")

    def save(self, folder: Path) -> str:
        """Write the model into `folder`; a model refitted on the dev split takes its held-out fit along."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        source = self.folder / HELD_OUT if self.folder and self.meta.get("refit_on_dev") else None
        if source is not None and source.is_dir() and source.resolve() != (folder / HELD_OUT).resolve():
            shutil.copytree(source, folder / HELD_OUT, dirs_exist_ok=True)
        arrays = {"tfidf_idf": self.tfidf.idf_}
        arrays.update(self.re_head.to_arrays("re"))
        arrays.update(self.component_head.to_arrays("component"))
        if self.fix_head is not None:
            arrays.update(self.fix_head.to_arrays("fix"))
        if self.nearest_labels is not None:
            arrays.update(self.nearest_labels.to_arrays())
        tmp = folder / (WEIGHTS + ".tmp.npz")
        np.savez(tmp, **arrays)  # uncompressed: loads in a few ms
        vocab_text = "\n".join(self.tfidf.vocab_) + "\n"
        meta = dict(self.meta, re_classes=self.re_head.classes_, components=self.component_head.classes_,
                    threshold=self.threshold)
        if self.fix_head is not None:
            meta.update(fix_tags=self.fix_head.classes_, fix_threshold=self.fix_threshold)
        if self.nearest_labels is not None:
            meta["nearest_labels"] = self.nearest_labels.settings
        else:
            meta.pop("nearest_labels", None)
        meta.pop("model_version", None)
        h = hashlib.sha256(tmp.read_bytes())
        h.update(vocab_text.encode())
        h.update(json.dumps(meta, sort_keys=True).encode())
        meta["model_version"] = "m-" + h.hexdigest()[:12]
        tmp.replace(folder / WEIGHTS)
        (folder / VOCAB).write_text(vocab_text, encoding="utf-8")
        (folder / META).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        self.meta = meta
        self.folder = folder
        return meta["model_version"]

    def held_out(self) -> "IssueClassifier":
        """The model with this one's hyperparameters and thresholds fitted without the dev split, which the dev
        figures (`retriage eval`, the bot's thresholds) measure: saved in `held_out/` beside a model refitted on
        the dev split too (`retriage train`); a model fitted without the dev split is its own."""
        if not self.meta.get("refit_on_dev"):
            return self
        folder = self.folder / HELD_OUT if self.folder else None
        if folder is None or not (folder / WEIGHTS).is_file():
            raise UserError(f"model {self.version} was refitted on the dev split, and its held-out model is "
                            f"missing ({folder or 'not saved'}): run `retriage train`")
        return IssueClassifier.load(folder)

    @classmethod
    def load(cls, folder: Path | None = None) -> "IssueClassifier":
        """The model in `folder`, else the one `classifier.model_dir` chooses ($RETRIAGE_MODEL or the shipped
        one). A missing or damaged folder is a one-line UserError."""
        folder = Path(folder) if folder else model_dir()
        if not (folder / WEIGHTS).is_file() or not (folder / META).is_file():
            raise UserError(f"no trained model in {folder} (no {META} and {WEIGHTS}): run `retriage train`")
        try:
            meta = json.loads((folder / META).read_text())
            with np.load(folder / WEIGHTS, allow_pickle=False) as a:
                arrays = {k: a[k] for k in a.files}
            vocab = (folder / VOCAB).read_text(encoding="utf-8").split("\n")[:-1]
            tfidf = Tfidf.from_vocabulary(vocab, arrays["tfidf_idf"])
            re_head = LinearHead.from_arrays(arrays, "re", meta["re_classes"])
            comp_head = LinearHead.from_arrays(arrays, "component", meta["components"])
            fix_head = LinearHead.from_arrays(arrays, "fix", meta["fix_tags"]) if "fix_tags" in meta else None
            nearest_labels = (NearestLabels.from_arrays(arrays, meta["nearest_labels"], len(meta["re_classes"]),
                                                 len(meta["components"])) if "nearest_labels" in meta else None)
            model = cls(tfidf, re_head, comp_head, float(meta["threshold"]), meta, fix_head,
                        float(meta.get("fix_threshold", 1.0)), nearest_labels)
        except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as e:
            raise UserError(f"damaged model in {folder}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                            ) from None
        model.folder = folder
        return model
