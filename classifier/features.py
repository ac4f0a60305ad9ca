"""Features of an issue or a pasted log for the classifier heads.

- three MiniLM embeddings: the prepared text (title, key lines, prose), the key lines alone, and the title;
- keyword signals from taxonomy/keywords.toml (binary, one per pattern);
- a small TF-IDF over words and word pairs of the whole cleaned text (MiniLM reads only 256 word pieces;
  the lexical part sees everything). Written in numpy so prediction needs no scikit-learn import.

Everything here is a pure function of text and the fitted vocabulary: no I/O, no database.
"""

from __future__ import annotations

import math
import re
import tomllib
import weakref
from collections import Counter
from functools import lru_cache

import numpy as np

from retriage.core.folded import compile_folded, fold
from retriage.core.document import Document, document
from retriage.taxonomy import HERE as TAXONOMY_DIR

VIEW_FIELDS = ("full", "keys", "title")  # the views that are embedded, in feature order
_TOKEN_RE = re.compile(r"[a-z_][a-z0-9_]+")
KEYWORD_WEIGHT = 0.3
RULE_WEIGHT = 1.0


# An issue's views are its Document (retriage/core/document.py): prepared once, read by every feature.
Views = Document


def views(title: str | None, body: str | None) -> Document:
    return document(title, body)


@lru_cache(maxsize=1)
def keyword_patterns() -> list[tuple[str, str, re.Pattern]]:
    """(section, name, pattern) per keyword signal; each pattern is searched case-insensitively in `fold(text)`."""
    with open(TAXONOMY_DIR / "keywords.toml", "rb") as f:
        data = tomllib.load(f)
    out = []
    for section in ("re_class", "component"):
        for name, pats in data[section].items():
            out += [(section, name, compile_folded(p)) for p in pats]
    return out


def keyword_vector(text: str) -> np.ndarray:
    folded = fold(text)
    return np.array([1.0 if p.search(folded) else 0.0 for _, _, p in keyword_patterns()], dtype=np.float32)


_SIGNALS: "weakref.WeakKeyDictionary[Document, np.ndarray]" = weakref.WeakKeyDictionary()


def keyword_signals(doc: Document) -> np.ndarray:
    """keyword_vector of a document's whole text, remembered while the document lives: a refit and its predictions
    meet the same documents several times, and `eval` keeps them for its run (a read-only array)."""
    v = _SIGNALS.get(doc)
    if v is None:
        v = keyword_vector(doc.lexical)
        v.flags.writeable = False
        _SIGNALS[doc] = v
    return v


def tokens(text: str) -> list[str]:
    words = _TOKEN_RE.findall(text.lower())
    return words + [a + " " + b for a, b in zip(words, words[1:])]


class Tfidf:
    """Sublinear TF-IDF with L2 normalisation over a fixed vocabulary (min document frequency, top-N by df).
    Hyperparameters in the constructor, `fit` returns it, learned attributes end in an underscore."""

    def __init__(self, min_df: int = 2, max_features: int = 20000):
        self.min_df, self.max_features = min_df, max_features
        self.vocab_: list[str] = []
        self.index_: dict[str, int] = {}
        self.idf_ = np.zeros(0, dtype=np.float32)

    @classmethod
    def from_vocabulary(cls, vocab: list[str], idf: np.ndarray) -> "Tfidf":
        """A fitted Tfidf from a stored vocabulary and its idf weights."""
        t = cls()
        t.vocab_, t.index_, t.idf_ = list(vocab), {w: i for i, w in enumerate(vocab)}, idf
        return t

    def fit(self, texts: list[str]) -> "Tfidf":
        df: Counter = Counter()
        for t in texts:
            df.update(set(tokens(t)))
        items = [(c, t) for t, c in df.items() if c >= self.min_df]
        items.sort(key=lambda x: (-x[0], x[1]))
        items = items[:self.max_features]
        self.vocab_ = sorted(t for _, t in items)
        self.index_ = {t: i for i, t in enumerate(self.vocab_)}
        n = len(texts)
        self.idf_ = np.array([math.log((1 + n) / (1 + df[t])) + 1.0 for t in self.vocab_], dtype=np.float32)
        return self

    def transform_one(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(indices, values) of one document's sparse row."""
        counts = Counter(i for i in (self.index_.get(t) for t in tokens(text)) if i is not None)
        if not counts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        idx = np.fromiter(counts.keys(), dtype=np.int64)
        tf = np.fromiter(counts.values(), dtype=np.float32)
        vals = (1.0 + np.log(tf)) * self.idf_[idx]
        vals /= max(float(np.linalg.norm(vals)), 1e-12)
        return idx, vals.astype(np.float32)

    def transform(self, texts: list[str]):
        from scipy.sparse import csr_matrix

        indptr, indices, data = [0], [], []
        for t in texts:
            i, v = self.transform_one(t)
            indices.append(i)
            data.append(v)
            indptr.append(indptr[-1] + len(i))
        ind = np.concatenate(indices) if indices else np.zeros(0, dtype=np.int64)
        dat = np.concatenate(data) if data else np.zeros(0, dtype=np.float32)
        return csr_matrix((dat, ind, np.array(indptr)), shape=(len(texts), len(self.vocab_)), dtype=np.float32)


def rule_vector(doc: Document) -> np.ndarray:
    """Which known-fix rules (taxonomy/rules.toml) match: one-hot over their fix tags and their RE classes."""
    from retriage.taxonomy import fix_tag_ids, re_class_ids

    tags, classes = fix_tag_ids(), re_class_ids()
    v = np.zeros(len(tags) + len(classes), dtype=np.float32)
    for m in doc.matches:
        v[tags.index(m.rule.tag)] = 1.0
        v[len(tags) + classes.index(m.rule.re_class)] = 1.0
    return v


def dense_features(embeddings: list[np.ndarray], docs: list[Document]) -> np.ndarray:
    """Embeddings (one matrix per view), keyword signals and rule matches side by side."""
    n = len(docs)
    kw = np.array([keyword_signals(d) for d in docs], dtype=np.float32).reshape(n, -1)
    rules = np.array([rule_vector(d) for d in docs], dtype=np.float32).reshape(n, -1)
    return np.hstack([*embeddings, kw * KEYWORD_WEIGHT, rules * RULE_WEIGHT]).astype(np.float32)
