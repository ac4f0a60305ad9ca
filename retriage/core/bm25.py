"""BM25 (Lucene's variant, as bm25s computes it) over term counts, in numpy, stored as .npy files.

An index is built from (document, term, count) triples, so a rebuild can reuse the counts of documents that did
not change and tokenise only the others (db/lexical.py). Each posting holds its precomputed score
`idf(t) * tf / (tf + k1 * (1 - b + b * dl / avgdl))`, laid out by term (CSC), so a question sums the postings
of its terms: no scipy, no model, a few milliseconds. Terms are looked up by a stable 64-bit hash (sorted, with
`searchsorted`), so answering never reads the vocabulary's strings; they are kept for rebuilds.

`score()` also returns the query's ceiling, the sum of the idf of its terms found in the index (each posting's
score is below its term's idf), so `scores / ceiling` is an absolute share in [0, 1]: a floor on it means the
same for every question. tests/test_lexical.py checks the scores against bm25s.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

K1, B = 1.5, 0.75
_ARRAYS = ("term_hash", "idf", "indptr", "post_doc", "post_score", "doc_len")


@lru_cache(maxsize=1_000_000)
def _hash(term: str) -> int:
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")


def term_hashes(terms) -> np.ndarray:
    """Stable 64-bit hashes of terms (the same in every process)."""
    return np.fromiter((_hash(t) for t in terms), dtype=np.uint64)


@dataclass
class Bm25:
    term_hash: np.ndarray  # uint64, sorted
    idf: np.ndarray  # float32 per term
    indptr: np.ndarray  # int64, len(terms) + 1: postings of term i are indptr[i]:indptr[i+1]
    post_doc: np.ndarray  # int32 document index per posting
    post_score: np.ndarray  # float32 precomputed BM25 per posting
    doc_len: np.ndarray  # float32 tokens per document

    @property
    def n_docs(self) -> int:
        return len(self.doc_len)

    @classmethod
    def from_counts(cls, n_docs: int, doc: np.ndarray, term_hash: np.ndarray, count: np.ndarray,
                    k1: float = K1, b: float = B) -> "Bm25":
        """`doc`, `term_hash`, `count`: one row per (document, distinct term) of each document."""
        doc = np.asarray(doc, dtype=np.int64)
        count = np.asarray(count, dtype=np.float32)
        terms, term = np.unique(np.asarray(term_hash, dtype=np.uint64), return_inverse=True)
        doc_len = np.bincount(doc, weights=count, minlength=n_docs).astype(np.float32)
        avgdl = float(doc_len.mean()) if n_docs and doc_len.sum() else 1.0
        df = np.bincount(term, minlength=len(terms))
        idf = np.log1p((n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
        norm = k1 * (1 - b + b * doc_len[doc] / avgdl)
        score = (idf[term] * count / (count + norm)).astype(np.float32)
        order = np.lexsort((doc, term))
        indptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        return cls(terms, idf, indptr, doc[order].astype(np.int32), score[order], doc_len)

    def score(self, query_terms) -> tuple[np.ndarray, float]:
        """(BM25 score of every document, the query's ceiling). A term the query repeats weighs
        1 + ln(repeats) (a log that names `/dev/shm` five times is about `/dev/shm`); with every term once,
        this is the plain BM25 sum that bm25s computes."""
        out = np.zeros(self.n_docs, dtype=np.float32)
        if not len(self.term_hash) or not self.n_docs:
            return out, 0.0
        counts = Counter(query_terms)
        h = term_hashes(counts.keys())
        weight = 1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
        pos = np.searchsorted(self.term_hash, h)
        inside = pos < len(self.term_hash)
        found = np.zeros(len(h), dtype=bool)
        found[inside] = self.term_hash[pos[inside]] == h[inside]
        pos, weight = pos[found], weight[found]
        if not len(pos):
            return out, 0.0
        at = np.concatenate([np.arange(self.indptr[p], self.indptr[p + 1]) for p in pos])
        w = np.repeat(weight, [int(self.indptr[p + 1] - self.indptr[p]) for p in pos])
        out = np.bincount(self.post_doc[at], weights=self.post_score[at] * w, minlength=self.n_docs)
        ceiling = float((np.asarray(self.idf)[pos] * weight).sum())
        return out.astype(np.float32), ceiling

    def coverage(self, query_terms) -> np.ndarray:
        """For every document, the share of the query's distinct terms (weighted by idf) that it contains."""
        h = term_hashes(set(query_terms))
        out = np.zeros(self.n_docs, dtype=np.float32)
        if not len(h) or not len(self.term_hash) or not self.n_docs:
            return out
        pos = np.searchsorted(self.term_hash, h)
        inside = pos < len(self.term_hash)
        found = np.zeros(len(h), dtype=bool)
        found[inside] = self.term_hash[pos[inside]] == h[inside]
        if not found.all():
            return out  # a term no document has: none contains them all, and shares of the rest would mislead
        idf = np.asarray(self.idf)[pos]
        at = np.concatenate([np.arange(self.indptr[p], self.indptr[p + 1]) for p in pos])
        w = np.repeat(idf, [int(self.indptr[p + 1] - self.indptr[p]) for p in pos])
        return (np.bincount(self.post_doc[at], weights=w, minlength=self.n_docs) / idf.sum()).astype(np.float32)

    def save(self, folder: Path, extra: dict[str, np.ndarray]) -> None:
        """All arrays (and `extra`) as .npy files in `folder`, written whole: a temporary folder renamed at
        the end (a reader sees the old index or the new one, never half of one)."""
        folder = Path(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
        try:
            for name in _ARRAYS:
                np.save(tmp / f"{name}.npy", getattr(self, name), allow_pickle=False)
            for name, arr in extra.items():
                np.save(tmp / f"{name}.npy", arr, allow_pickle=False)
            try:
                os.replace(tmp, folder)
            except OSError:  # another process saved the same index first: keep theirs
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @classmethod
    def load(cls, folder: Path) -> "Bm25":
        """Memory-mapped: loading costs a few file opens; a question reads only its terms' postings."""
        return cls(*(np.load(Path(folder) / f"{n}.npy", mmap_mode="r", allow_pickle=False) for n in _ARRAYS))
