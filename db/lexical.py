"""The lexical (BM25) index of `retriage search`, kept as files in the cache folder and keyed by the database's
content: what the reporter and commenters wrote, cleaned as `show` displays it (core/textprep.for_reading:
no environment dumps, template checklists or instructions), the title twice and the failure lines (exceptions,
machine error lines: core/textprep.failure_lines) twice, so that a query an error line answers
ranks that issue above one whose prose only mentions the words. Pull requests are left out.

An index lives in `<cache>/lexical/search-<fingerprint>/` (core/paths.cache_dir). The fingerprint is one DuckDB
aggregate over the issues and comments (key, `updated_at`, text lengths; about 0.1 s on the snapshot), so a reader
opens the index that matches the file as it is now, or builds it. A build reuses the term counts of every issue
whose text is unchanged from the newest index (any database) and tokenises only the others; the BM25 arrays are
recomputed from counts (numpy, well under a second). Nothing is written into the database: readers with a
read-only connection can build an index too. What the kept index buys `search` (cold, against building it in
the process) is printed by `bench/duplicates --cost-only`.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retriage.core.bm25 import Bm25, term_hashes
from retriage.core.paths import cache_dir
from retriage.core.textprep import failure_lines, for_reading
from retriage.core.tokens import token_counts, tokenize

TOKENS_VERSION = "t10"  # bump when tokenize() or the indexed text changes: old indexes are then not reused
KIND = "search"  # the folders' prefix (the cost of a build says it too)
MAX_TEXT = 60000  # characters of an issue's text that are indexed (a pasted 1 MB log adds nothing after this)
KEEP = 4  # indexes kept in the cache (other databases, earlier states)
SETTINGS_DUMP = 8  # `name=value` pairs that make a line a settings dump (left out of the index)
_SETTING = re.compile(r"\b[A-Za-z_]\w*=")

_FINGERPRINT = {
    "issues": "SELECT count(*), coalesce(bit_xor(hash(repo, number, updated_at, length(title), length(body))), 0) "
              "FROM issues WHERE NOT is_pull_request",
    "comments": "SELECT count(*), coalesce(bit_xor(hash(repo, issue_number, id, updated_at, length(body))), 0) "
                "FROM comments",
}
_DOCS = """
    SELECT i.repo, i.number, i.title, i.body, c.text AS comments, hash(i.title, i.body, c.text) AS stamp
    FROM issues i LEFT JOIN (
        SELECT repo, issue_number, string_agg(body, chr(10) ORDER BY created_at, id) AS text
        FROM comments GROUP BY ALL) c ON c.repo = i.repo AND c.issue_number = i.number
    WHERE NOT i.is_pull_request ORDER BY i.repo, i.number"""


def doc_text(title: str | None, body: str | None, comments: str | None = None) -> str:
    """What an issue is matched on (`indexed`'s text)."""
    return indexed(title, body, comments)[0]


def indexed(title: str | None, body: str | None, comments: str | None = None) -> tuple[str, int]:
    """(text, failure lines): the title twice, the failure lines of the body and comments (machine lines that carry
    a failure: core/textprep.failure_lines) twice (once among the text), then the body and the comments as `show`
    reads them (each cleaned from at most 2 * MAX_TEXT characters and cut to MAX_TEXT), without settings dumps (a line of SETTINGS_DUMP or more `name=value` pairs: vLLM's
    `Namespace(...)`, its engine config and `SamplingParams(...)` name every option, `speculative_config=None`
    included, so they would match every query about any option)."""
    texts = []
    for t in (body, comments):
        lines = for_reading((t or "")[:2 * MAX_TEXT], MAX_TEXT).splitlines()
        texts.append("\n".join(ln for ln in lines if len(_SETTING.findall(ln)) < SETTINGS_DUMP))
    failures = failure_lines("\n".join(texts).splitlines())
    return "\n".join([title or "", title or "", *failures, *texts]), len(failures)


def fingerprint(con) -> str:
    """`search-<tokens version>-<issues>-<hash>-<comments>-<hash>`: changes whenever an indexed text may have."""
    parts = [KIND, TOKENS_VERSION]
    for table in ("issues", "comments"):
        n, h = con.execute(_FINGERPRINT[table]).fetchone()
        parts += [str(n), format(int(h) & (2**64 - 1), "016x")]
    return "-".join(parts)


def _folder(fp: str) -> Path:
    return cache_dir() / "lexical" / fp


@dataclass
class LexicalIndex:
    bm25: Bm25
    repos: np.ndarray
    numbers: np.ndarray
    failures: np.ndarray | None = None  # failure lines per issue (core/textprep.failure_lines of its text)
    _rows: dict = field(default_factory=dict, repr=False)

    def row(self, repo: str, number: int) -> int | None:
        return self._row_map().get((repo, number))

    def rows_of(self, repos, numbers) -> np.ndarray:
        """The row of each (repo, number), -1 for an issue the index does not hold."""
        rows = self._row_map()
        keys = zip(np.asarray(repos).tolist(), np.asarray(numbers).tolist())
        return np.fromiter((rows.get(k, -1) for k in keys), dtype=np.int64, count=len(numbers))

    def _row_map(self) -> dict:
        if not self._rows:
            self._rows = {k: i for i, k in enumerate(zip(self.repos.tolist(), self.numbers.tolist()))}
        return self._rows

    def score(self, text: str) -> tuple[np.ndarray, float]:
        """BM25 of every issue (in index order) for a question, and the question's ceiling (core/bm25)."""
        return self.bm25.score(tokenize(text))

    def coverage(self, text: str, known_only: bool = False) -> np.ndarray:
        """The share of the question's terms (idf-weighted) each issue contains (1: all of them; 0 everywhere
        when a term is in no issue, unless `known_only`: then the share of the terms some issue holds)."""
        terms = tokenize(text)
        if known_only and len(self.bm25.term_hash):
            h = term_hashes(terms)
            pos = np.minimum(np.searchsorted(self.bm25.term_hash, h), len(self.bm25.term_hash) - 1)
            terms = [t for t, ok in zip(terms, self.bm25.term_hash[pos] == h) if ok]
        return self.bm25.coverage(terms)

    def __len__(self) -> int:
        return len(self.numbers)


def _newest() -> Path | None:
    root = cache_dir() / "lexical"
    if not root.is_dir():
        return None
    found = [p for p in root.iterdir() if p.is_dir() and p.name.startswith(f"{KIND}-{TOKENS_VERSION}-")
             and (p / "stamp.npy").exists()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def _old_counts() -> dict:
    """(repo, number, stamp) -> (term hashes, counts) from the newest index, for reuse."""
    folder = _newest()
    if folder is None:
        return {}
    try:
        a = {n: np.load(folder / f"{n}.npy", allow_pickle=False)
             for n in ("repo", "number", "stamp", "count_doc", "count_term", "count_n", "failures")}
    except (OSError, ValueError, EOFError):
        return {}  # a damaged index: every issue is tokenised
    bounds = np.searchsorted(a["count_doc"], np.arange(len(a["number"]) + 1))
    return {(r, int(n), int(s)): (a["count_term"][bounds[i]:bounds[i + 1]], a["count_n"][bounds[i]:bounds[i + 1]],
                                  int(a["failures"][i]))
            for i, (r, n, s) in enumerate(zip(a["repo"].tolist(), a["number"].tolist(), a["stamp"].tolist()))}


def build(con, fp: str | None = None) -> tuple[LexicalIndex, dict]:
    """Build (or rebuild) the index for the database as it is; returns it and what it cost."""
    import time

    t0 = time.perf_counter()
    fp = fp or fingerprint(con)
    cols = con.execute(_DOCS).fetchall()
    old = _old_counts()
    docs, terms, counts, stamps, failures = [], [], [], [], []
    tokenised = 0
    for i, (repo, number, title, body, comments, stamp) in enumerate(cols):
        stamp = int(stamp) & (2**63 - 1)
        stamps.append(stamp)
        hit = old.get((repo, number, stamp))
        if hit is None:
            text, n_failures = indexed(title, body, comments)
            c = token_counts(text)
            hit = (term_hashes(c.keys()), np.fromiter(c.values(), dtype=np.int32, count=len(c)), n_failures)
            tokenised += 1
        docs.append(np.full(len(hit[0]), i, dtype=np.int32))
        terms.append(hit[0])
        counts.append(hit[1])
        failures.append(hit[2])
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dtype=dt))
    count_doc, count_term, count_n = cat(docs, np.int32), cat(terms, np.uint64), cat(counts, np.int32)
    bm25 = Bm25.from_counts(len(cols), count_doc, count_term, count_n)
    repos = np.array([c[0] for c in cols], dtype=str)
    numbers = np.array([c[1] for c in cols], dtype=np.int64)
    fails = np.array(failures, dtype=np.int32)
    bm25.save(_folder(fp), {"repo": repos, "number": numbers, "stamp": np.array(stamps, dtype=np.int64),
                            "count_doc": count_doc, "count_term": count_term, "count_n": count_n, "failures": fails})
    _prune()
    cost = {"kind": KIND, "issues": len(cols), "tokenised": tokenised, "reused": len(cols) - tokenised,
            "postings": int(len(count_doc)), "seconds": round(time.perf_counter() - t0, 2)}
    return LexicalIndex(bm25, repos, numbers, fails), cost


def _prune() -> None:
    """Keep the KEEP most recently used indexes; remove what older versions kept here (the similar-issues
    indexes, the fingerprint memo)."""
    root = cache_dir() / "lexical"
    found = sorted((p for p in root.iterdir() if p.is_dir() and p.name.startswith(f"{KIND}-")),
                   key=lambda p: p.stat().st_mtime, reverse=True)
    gone = [p for p in root.iterdir() if p.is_dir() and (p.name.startswith("similar-") or p.name == "fingerprints")]
    for p in found[KEEP:] + gone:
        shutil.rmtree(p, ignore_errors=True)


def load(con, build_missing: bool = True) -> LexicalIndex | None:
    """The index matching the database now: loaded (memory-mapped) when built before, else built (when
    `build_missing`; else None). A file that cannot be read is built again."""
    fp = fingerprint(con)
    folder = _folder(fp)
    if (folder / "number.npy").exists():
        try:
            os.utime(folder)  # most recently used: pruned last
        except OSError:
            pass
        try:
            return LexicalIndex(Bm25.load(folder), *(np.load(folder / f"{n}.npy", allow_pickle=False)
                                                     for n in ("repo", "number", "failures")))
        except (OSError, ValueError, EOFError):
            shutil.rmtree(folder, ignore_errors=True)  # a damaged file: built again below, in its place
    if not build_missing:
        return None
    return build(con, fp)[0]


def ensure_all(con) -> list[dict]:
    """Build the index when it is not current for the database (after `label`, `demo`); what it cost, in a list
    (empty when the index was current)."""
    fp = fingerprint(con)
    return [] if (_folder(fp) / "number.npy").exists() else [build(con, fp)[1]]
