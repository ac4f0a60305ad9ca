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
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from retriage.core.folded import compile_folded, fold
from retriage.core.textprep import clean_lines, key_lines, prepare
from retriage.taxonomy import HERE as TAXONOMY_DIR

VIEW_FIELDS = ("full", "keys", "title")  # the views that are embedded, in feature order
_TOKEN_RE = re.compile(r"[a-z_][a-z0-9_]+")
KEYWORD_WEIGHT = 0.3
RULE_WEIGHT = 1.0


@dataclass(frozen=True)
class Views:
    """The texts derived from one issue (or log) that the features are computed from."""

    full: str  # what MiniLM reads first: title, key lines, prose
    keys: str  # title and key lines only
    title: str  # the title alone (for a pasted log: its last error line)
    lexical: str  # the whole cleaned text, for keywords and TF-IDF


def views(title: str | None, body: str | None) -> Views:
    title = (title or "").strip()
    lines = clean_lines(body or "")
    keys = key_lines(lines)
    return Views(
        full=prepare(title, body),
        keys=("\n".join([title] + keys))[:1500],
        title=title or (keys[-1] if keys else (lines[0] if lines else ""))[:300],
        lexical=(title + "\n" + "\n".join(lines))[:60000],
    )


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


def tokens(text: str) -> list[str]:
    words = _TOKEN_RE.findall(text.lower())
    return words + [a + " " + b for a, b in zip(words, words[1:])]


class Tfidf:
    """Sublinear TF-IDF with L2 normalisation over a fixed vocabulary (min document frequency, top-N by df)."""

    def __init__(self, vocab: list[str] | None = None, idf: np.ndarray | None = None):
        self.vocab = list(vocab or [])
        self.index = {t: i for i, t in enumerate(self.vocab)}
        self.idf = idf if idf is not None else np.zeros(0, dtype=np.float32)

    def fit(self, texts: list[str], min_df: int = 2, max_features: int = 20000) -> "Tfidf":
        df: Counter = Counter()
        for t in texts:
            df.update(set(tokens(t)))
        items = [(c, t) for t, c in df.items() if c >= min_df]
        items.sort(key=lambda x: (-x[0], x[1]))
        items = items[:max_features]
        self.vocab = sorted(t for _, t in items)
        self.index = {t: i for i, t in enumerate(self.vocab)}
        n = len(texts)
        self.idf = np.array([math.log((1 + n) / (1 + df[t])) + 1.0 for t in self.vocab], dtype=np.float32)
        return self

    def transform_one(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(indices, values) of one document's sparse row."""
        counts = Counter(i for i in (self.index.get(t) for t in tokens(text)) if i is not None)
        if not counts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        idx = np.fromiter(counts.keys(), dtype=np.int64)
        tf = np.fromiter(counts.values(), dtype=np.float32)
        vals = (1.0 + np.log(tf)) * self.idf[idx]
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
        return csr_matrix((dat, ind, np.array(indptr)), shape=(len(texts), len(self.vocab)), dtype=np.float32)


def rule_vector(text: str) -> np.ndarray:
    """Which known-fix rules (taxonomy/rules.toml) match: one-hot over their fix tags and their RE classes."""
    from retriage.taxonomy import fix_tag_ids, re_class_ids
    from retriage.core.rules import match_rules

    tags, classes = fix_tag_ids(), re_class_ids()
    v = np.zeros(len(tags) + len(classes), dtype=np.float32)
    for m in match_rules(text.split("\n")):
        v[tags.index(m.rule.tag)] = 1.0
        v[len(tags) + classes.index(m.rule.re_class)] = 1.0
    return v


def dense_features(embeddings: list[np.ndarray], lexical_texts: list[str]) -> np.ndarray:
    """Embeddings (one matrix per view), keyword signals and rule matches side by side."""
    n = len(lexical_texts)
    kw = np.array([keyword_vector(t) for t in lexical_texts], dtype=np.float32).reshape(n, -1)
    rules = np.array([rule_vector(t) for t in lexical_texts], dtype=np.float32).reshape(n, -1)
    return np.hstack([*embeddings, kw * KEYWORD_WEIGHT, rules * RULE_WEIGHT]).astype(np.float32)
