"""The lexical (BM25) indexes of a database's issues, kept as files beside it and keyed by its content.

Two kinds, one per use:
- `search`: title (twice), body and every comment — what `retriage search` matches;
- `similar`: title (twice) and the body cleaned of templates, checklists, log prefixes and environment dumps
  (textprep.clean_lines) — what similar issues are matched on (db/similar.py).

An index lives in `<cache>/lexical/<kind>-<fingerprint>/` (core/paths.cache_dir). The fingerprint is one
DuckDB aggregate over the issues (and comments) — key, `updated_at`, text lengths — a few milliseconds, so a
reader opens the index that matches the file as it is now, or builds it. A build reuses the term counts of
every issue whose text is unchanged from the newest index of the same kind (any database) and tokenises only
the others; the BM25 arrays are recomputed from counts (numpy, well under a second). Pull requests are left
out. Nothing is written into the database: readers with a read-only connection can build an index too.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retriage.core.bm25 import Bm25, term_hashes
from retriage.core.paths import cache_dir
from retriage.core.textprep import clean_lines
from retriage.core.tokens import token_counts, tokenize

TOKENS_VERSION = "t5"  # bump when tokenize() or a kind's text changes: old indexes are then not reused
KINDS = ("search", "similar")
MAX_TEXT = 60000  # characters of an issue's text that are indexed (a pasted 1 MB log adds nothing after this)
KEEP = 4  # indexes of each kind kept in the cache (other databases, earlier states)

_FINGERPRINT = {
    "issues": "SELECT count(*), coalesce(bit_xor(hash(repo, number, updated_at, length(title), length(body))), 0) "
              "FROM issues WHERE NOT is_pull_request",
    "comments": "SELECT count(*), coalesce(bit_xor(hash(repo, issue_number, id, updated_at, length(body))), 0) "
                "FROM comments",
}
_DOCS = {
    "search": """
        SELECT i.repo, i.number, i.title, i.body, c.text AS comments,
               hash(i.title, i.body, c.text) AS stamp
        FROM issues i LEFT JOIN (
            SELECT repo, issue_number, string_agg(body, chr(10) ORDER BY created_at, id) AS text
            FROM comments GROUP BY ALL) c ON c.repo = i.repo AND c.issue_number = i.number
        WHERE NOT i.is_pull_request ORDER BY i.repo, i.number""",
    "similar": """
        SELECT repo, number, title, body, NULL AS comments, hash(title, body) AS stamp
        FROM issues WHERE NOT is_pull_request ORDER BY repo, number""",
}


def similar_text(title: str | None, body: str | None) -> str:
    """What similar issues are matched on: the title twice and the cleaned body (BM25 reads a bag of words, so
    the order of the lines does not matter)."""
    return "\n".join([title or "", title or "", *clean_lines((body or "")[:MAX_TEXT])])


def doc_text(kind: str, title: str | None, body: str | None, comments: str | None = None) -> str:
    if kind == "similar":
        return similar_text(title, body)
    return "\n".join([title or "", title or "", (body or "")[:MAX_TEXT], (comments or "")[:MAX_TEXT]])


def _file_state(con) -> str | None:
    """The database file's path, size and modification time (and its WAL's): any write changes them."""
    try:
        path = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()[0]
    except Exception:  # noqa: BLE001 - an older DuckDB: no shortcut
        return None
    if not path or not os.path.isfile(path):
        return None  # in memory
    parts = [os.path.realpath(path)]
    for p in (path, path + ".wal"):
        try:
            st = os.stat(p)
            parts += [str(st.st_size), str(st.st_mtime_ns)]
        except OSError:
            parts += ["-", "-"]
    return "|".join(parts)


def fingerprint(con, kind: str) -> str:
    """`<kind>-<tokens version>-<issues>-<hash>[-<comments>-<hash>]`: changes whenever an indexed text may have.

    The aggregate reads every body's length (about 0.1 s on the snapshot under load), so its answer is kept
    beside the indexes, keyed by the file's size and modification time (and its WAL's): a file that was not
    written since is not read again."""
    import hashlib
    import json

    state = _file_state(con)
    memo = cache_dir() / "lexical" / "fingerprints" / (
        hashlib.sha1(f"{kind}|{TOKENS_VERSION}|{state}".encode()).hexdigest() + ".json") if state else None
    if memo is not None and memo.exists():
        try:
            return json.loads(memo.read_text(encoding="utf-8"))["fingerprint"]
        except (OSError, ValueError, KeyError):
            pass
    fp = _fingerprint(con, kind)
    if memo is not None:
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            tmp = memo.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"fingerprint": fp, "file": state}), encoding="utf-8")
            os.replace(tmp, memo)
        except OSError:
            pass  # a read-only cache: the aggregate each time
    return fp


def _fingerprint(con, kind: str) -> str:
    parts = [kind, TOKENS_VERSION]
    for table in ("issues", "comments") if kind == "search" else ("issues",):
        n, h = con.execute(_FINGERPRINT[table]).fetchone()
        parts += [str(n), format(int(h) & (2**64 - 1), "016x")]
    return "-".join(parts)


def _folder(fp: str) -> Path:
    return cache_dir() / "lexical" / fp


@dataclass
class LexicalIndex:
    kind: str
    bm25: Bm25
    repos: np.ndarray
    numbers: np.ndarray
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

    def coverage(self, text: str) -> np.ndarray:
        """The share of the question's terms (idf-weighted) each issue contains (1: all of them)."""
        return self.bm25.coverage(tokenize(text))

    def __len__(self) -> int:
        return len(self.numbers)


def _newest_of_kind(kind: str) -> Path | None:
    root = cache_dir() / "lexical"
    if not root.is_dir():
        return None
    found = [p for p in root.iterdir() if p.is_dir() and p.name.startswith(f"{kind}-{TOKENS_VERSION}-")
             and (p / "stamp.npy").exists()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def _old_counts(kind: str) -> dict:
    """(repo, number, stamp) -> (term hashes, counts) from the newest index of this kind, for reuse."""
    folder = _newest_of_kind(kind)
    if folder is None:
        return {}
    try:
        a = {n: np.load(folder / f"{n}.npy", allow_pickle=False)
             for n in ("repo", "number", "stamp", "count_doc", "count_term", "count_n")}
    except (OSError, ValueError):
        return {}
    bounds = np.searchsorted(a["count_doc"], np.arange(len(a["number"]) + 1))
    return {(r, int(n), int(s)): (a["count_term"][bounds[i]:bounds[i + 1]], a["count_n"][bounds[i]:bounds[i + 1]])
            for i, (r, n, s) in enumerate(zip(a["repo"].tolist(), a["number"].tolist(), a["stamp"].tolist()))}


def build(con, kind: str, fp: str | None = None) -> tuple[LexicalIndex, dict]:
    """Build (or rebuild) the index of `kind` for the database as it is; returns it and what it cost."""
    import time

    if kind not in KINDS:
        raise ValueError(kind)
    t0 = time.perf_counter()
    fp = fp or fingerprint(con, kind)
    cols = con.execute(_DOCS[kind]).fetchall()
    old = _old_counts(kind)
    docs, terms, counts, stamps = [], [], [], []
    tokenised = 0
    for i, (repo, number, title, body, comments, stamp) in enumerate(cols):
        stamp = int(stamp) & (2**63 - 1)
        stamps.append(stamp)
        hit = old.get((repo, number, stamp))
        if hit is None:
            c = token_counts(doc_text(kind, title, body, comments))
            hit = (term_hashes(c.keys()), np.fromiter(c.values(), dtype=np.int32, count=len(c)))
            tokenised += 1
        docs.append(np.full(len(hit[0]), i, dtype=np.int32))
        terms.append(hit[0])
        counts.append(hit[1])
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dtype=dt))
    count_doc, count_term, count_n = cat(docs, np.int32), cat(terms, np.uint64), cat(counts, np.int32)
    bm25 = Bm25.from_counts(len(cols), count_doc, count_term, count_n)
    repos = np.array([c[0] for c in cols], dtype=str)
    numbers = np.array([c[1] for c in cols], dtype=np.int64)
    bm25.save(_folder(fp), {"repo": repos, "number": numbers, "stamp": np.array(stamps, dtype=np.int64),
                                  "count_doc": count_doc, "count_term": count_term, "count_n": count_n})
    _prune(kind)
    cost = {"kind": kind, "issues": len(cols), "tokenised": tokenised, "reused": len(cols) - tokenised,
            "postings": int(len(count_doc)), "seconds": round(time.perf_counter() - t0, 2)}
    return LexicalIndex(kind, bm25, repos, numbers), cost


def _prune(kind: str) -> None:
    root = cache_dir() / "lexical"
    found = sorted((p for p in root.iterdir() if p.is_dir() and p.name.startswith(f"{kind}-")),
                   key=lambda p: p.stat().st_mtime, reverse=True)
    for p in found[KEEP:]:
        shutil.rmtree(p, ignore_errors=True)
    memos = root / "fingerprints"
    if memos.is_dir():
        old = sorted(memos.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)[200:]
        for p in old:
            p.unlink(missing_ok=True)


_LOADED: dict[str, LexicalIndex] = {}  # folder -> the index loaded from it, for a process that asks again


def load(con, kind: str, build_missing: bool = True) -> LexicalIndex | None:
    """The index of `kind` matching the database now: loaded (memory-mapped) when built before, else built
    (when `build_missing`; else None)."""
    fp = fingerprint(con, kind)
    folder = _folder(fp)
    known = _LOADED.get(str(folder))
    if known is not None and (folder / "number.npy").exists():
        return known  # a long-lived process asks again: the same files, already mapped
    if (folder / "number.npy").exists():
        try:
            os.utime(folder)  # most recently used: pruned last
        except OSError:
            pass
        try:
            index = LexicalIndex(kind, Bm25.load(folder), np.load(folder / "repo.npy", allow_pickle=False),
                                 np.load(folder / "number.npy", allow_pickle=False))
            _LOADED.clear()  # only the latest: a changed database gets a new folder
            _LOADED[str(folder)] = index
            return index
        except (OSError, ValueError):
            pass  # a damaged file: build again
    if not build_missing:
        return None
    return build(con, kind, fp)[0]


def ensure_all(con) -> list[dict]:
    """Build every kind of index that is not current for the database (after `label`, `demo`); what each cost
    (an index already current costs nothing and is not listed)."""
    costs = []
    for kind in KINDS:
        fp = fingerprint(con, kind)
        if not (_folder(fp) / "number.npy").exists():
            costs.append(build(con, kind, fp)[1])
    return costs
