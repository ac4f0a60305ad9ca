"""`retriage search QUERY`: full-text BM25 over what reporters and commenters wrote (db/lexical: cleaned as `show`
reads it, failure lines weighed twice) combined with the MiniLM cosine of the query and each issue's stored vector,
ranked, with the filters of `retriage list`.

    score = W_TEXT * share + (1 - W_TEXT) * cosine,   share = min(1, bm25 / ceiling)

`share` is how much of the query's term weight an issue matches (core/bm25: the ceiling is the sum of the idf
of the query's terms), so an issue that contains the query's words ranks above one that is only about the same
thing. For the order, an issue that contains every term of the query (`all_terms`) gains ALL_TERMS_BONUS, so
`/dev/shm` lists the issues that mention it before those that only say `shm` at a like score, while an issue that
misses one word of the query ("K cache" for "KV cache") but matches much better still comes first. A query that
names a failure (FAILURE_QUERY: crash, error, OOM...) adds FAILURE_BONUS to issues with failure lines (an
exception, a machine error line: `failure_lines`), so a feature request that only mentions the words comes after
the bug reports that show the failure; not when the query names a hang (HANG_QUERY: hangs, stuck, does not exit...),
since a hang prints no error line. Neither bonus changes `score` itself.
An issue is listed when it holds every term; or at least MIN_COVERAGE of the query's term weight (idf-weighted,
among the terms some issue holds) and is loosely about it (cosine at least MIN_PARTIAL_COSINE: two rare words of the
query in an unrelated text are not a match); or, short of both, when its meaning is close (cosine at least
MIN_COSINE).
"""

from __future__ import annotations

import re

import numpy as np

from retriage.core.errors import UserError
from retriage.db import lexical
from retriage.lister import ListFilter, list_issues

W_TEXT = 0.7
MIN_COSINE = 0.5
MIN_COVERAGE = 0.5  # most of the query: half its term weight, at least
MIN_PARTIAL_COSINE = 0.2  # ... and, without every term, loosely about it (unrelated issues sit near 0.1)
FAILURE_BONUS = 0.1  # added (for the order only) to an issue with failure lines when the query names a failure
ALL_TERMS_BONUS = 0.1  # added (for the order only) to an issue that holds every term of the query
FAILURE_QUERY = re.compile(r"(?i)crash|error|fail|exception|traceback|\boom\b|out of memory|segfault|segmentation|"
                           r"core dump|abort|panic|timed? ?out|killed|assert|illegal|\bnan\b|leak")
# A query about a process that stops making progress or will not end: its reports show no error line.
HANG_QUERY = re.compile(r"(?i)\bhang(?:s|ing)?\b|\bhung\b|\bstuck\b|\bfreez(?:e|es|ing)\b|\bfroze\b|deadlock|"
                        r"unresponsive|\b(?:not|n't|never)\s+(?:exit|terminate|return|respond|finish|stop)")
MAX_QUERY = 2000  # characters of the query that are read
COLUMNS = ("repo", "number", "title", "state", "created_at", "updated_at", "re_class", "component", "confidence",
           "abstained", "known_fixes", "html_url", "score", "text_match", "cosine", "all_terms", "failure_lines")


def query_vector(text: str):
    """The query's MiniLM vector (the numpy port: no torch import, about a tenth of a second)."""
    from retriage.classifier.embed import get_embedder

    return get_embedder("numpy").encode([text])[0]


def cosines_by_row(con, lex: lexical.LexicalIndex, vector, model: str) -> np.ndarray:
    """The cosine of `vector` with every issue of the index `lex`, in its row order (0 for an issue without a
    stored vector), computed by DuckDB in one query."""
    cols = con.execute("""
        SELECT ie.repo, ie.number, array_cosine_similarity(e.vector, $vec::FLOAT[384]) AS score
        FROM issue_embeddings ie JOIN embeddings e ON e.text_hash = ie.text_hash AND e.model = ie.model
        WHERE ie.model = $model""", {"vec": [float(x) for x in vector], "model": model}).fetchnumpy()
    out = np.zeros(len(lex), dtype=np.float32)
    if len(cols["number"]):
        rows = lex.rows_of(cols["repo"].astype(str), cols["number"].astype(np.int64))
        ok = rows >= 0
        out[rows[ok]] = np.nan_to_num(np.asarray(cols["score"], dtype=np.float32)[ok])
    return out


def search(con, query: str, f: ListFilter, model_version: str | None, vector=None) -> list[dict]:
    """The issues that match `query` and the filters, best first, at most `f.limit`: the `list` columns and
    `score` (0-1), `text_match` (the BM25 share) and `cosine`."""
    from retriage.classifier import current_model_name

    if not 1 <= f.limit <= 100000:
        raise UserError(f"--limit must be between 1 and 100000, not {f.limit}", exit_code=2)
    query = (query or "").strip()[:MAX_QUERY]
    if not query:
        raise UserError('give a query, e.g. retriage search "/dev/shm"', exit_code=2)
    rows = list_issues(con, ListFilter(**{**f.__dict__, "limit": 100000, "sort": "number"}), model_version)
    if not rows:  # (the filters were checked by list_issues, with the limit the caller gave)
        return []
    lex = lexical.load(con)
    bm, ceiling = lex.score(query)
    share = np.minimum(1.0, bm / ceiling) if ceiling > 0 else np.zeros(len(lex), dtype=np.float32)
    vec = query_vector(query) if vector is None else vector
    cos = cosines_by_row(con, lex, vec, current_model_name())
    score = W_TEXT * share + (1 - W_TEXT) * cos
    every_term = lex.coverage(query) >= 0.999
    most = lex.coverage(query, known_only=True) >= MIN_COVERAGE
    failures = lex.failures if lex.failures is not None else np.zeros(len(lex), dtype=np.int32)
    out = []
    for r in rows:
        i = lex.row(r["repo"], r["number"])
        if i is None or not (every_term[i] or (most[i] and cos[i] >= MIN_PARTIAL_COSINE) or cos[i] >= MIN_COSINE):
            continue
        out.append({**r, "score": round(float(score[i]), 4), "text_match": round(float(share[i]), 4),
                    "cosine": round(float(cos[i]), 4), "all_terms": bool(every_term[i]),
                    "failure_lines": int(failures[i])})
    bonus = failure_bonus(query)
    out.sort(key=lambda r: (-order_score(r, bonus), r["repo"], r["number"]))
    return out[:f.limit]


def failure_bonus(query: str) -> float:
    """What an issue with failure lines gains in the order for `query`: FAILURE_BONUS when the query names a
    failure, not a hang; else 0."""
    return FAILURE_BONUS if FAILURE_QUERY.search(query) and not HANG_QUERY.search(query) else 0.0


def order_score(row: dict, bonus: float) -> float:
    """What a result is ranked by: its score, ALL_TERMS_BONUS when it holds every term of the query, `bonus`
    (failure_bonus) when it has failure lines."""
    return (row["score"] + (ALL_TERMS_BONUS if row["all_terms"] else 0.0)
            + (bonus if row["failure_lines"] else 0.0))
