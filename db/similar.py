"""Similar issues by hybrid retrieval: BM25 over the issues' cleaned text (db/lexical, kind `similar`) and the
MiniLM cosine of the stored issue vectors, fused as a weighted sum, with a floor below which nothing is shown.

    score = (1 - W_LEX) * cosine + W_LEX * bm25 / (bm25 + LEX_SCALE)

The lexical part is absolute (a saturating map of the raw BM25, not a share of this question's best), so the
floor means the same for every question: a question that names no failure ("hello world") matches a few
common words at best (BM25 under 10 on the snapshot), the original of a real duplicate usually 20-80.

`W_LEX`, `LEX_SCALE` and `FLOOR` were chosen on half of the duplicate pairs of bench/duplicates (README,
"Similar issues"); the other half is reported. Each answer row also says whether a pull request that fixes the
issue is linked (`issue_links`: "closed" is not "fixed", trackers close stale issues) and the recorded fix (the
team's `gold_labels.known_fix`, else the current model's `predictions.known_fixes`).
"""

from __future__ import annotations

import numpy as np

SHOWN = ("repo", "number", "title", "state", "score", "html_url", "known_fix", "fix_source", "fixed", "fixed_by")
W_LEX = 0.5
LEX_SCALE = 30.0
FLOOR = 0.45


def fuse(cos: np.ndarray, bm25: np.ndarray, w_lex: float = W_LEX, lex_scale: float = LEX_SCALE) -> np.ndarray:
    """The fused score of every candidate (arrays aligned by candidate)."""
    return (1 - w_lex) * cos + w_lex * bm25 / (bm25 + lex_scale)


def rank(cos: np.ndarray, bm25: np.ndarray, limit: int, exclude: int | None = None, floor: float = FLOOR,
         w_lex: float = W_LEX, lex_scale: float = LEX_SCALE) -> list[tuple[int, float]]:
    """(candidate index, fused score) of the best `limit` candidates at or above `floor`, best first."""
    s = fuse(cos, bm25, w_lex, lex_scale)
    if exclude is not None:
        s[exclude] = -np.inf
    k = min(len(s), limit)
    if k <= 0:
        return []
    top = np.argpartition(-s, k - 1)[:k]
    top = top[np.lexsort((top, -s[top]))]
    return [(int(i), float(s[i])) for i in top if s[i] >= floor]


def cosines_by_row(con, lex, vector, model: str, index=None) -> np.ndarray:
    """The cosine of `vector` with every issue of the lexical index `lex`, in its row order (0 for an issue
    without a stored vector). `index`: a NeighbourIndex holding the vectors (a long-lived process); without
    one, DuckDB computes them (one query)."""
    if index is not None:
        keys, scores = index.all_scores(con, vector, model)

        def rows_of_keys() -> np.ndarray:
            if not keys:
                return np.zeros(0, dtype=np.int64)
            return lex.rows_of(np.array([k[0] for k in keys], dtype=str), np.array([k[1] for k in keys]))

        out = np.zeros(len(lex), dtype=np.float32)
        rows = index.memo(con, model, "lexical-rows", rows_of_keys, owner=lex)  # the same rows every question
        ok = rows >= 0
        out[rows[ok]] = np.asarray(scores, dtype=np.float32)[ok]
        return out
    else:
        cols = con.execute("""
            SELECT ie.repo, ie.number, array_cosine_similarity(e.vector, $vec::FLOAT[384]) AS score
            FROM issue_embeddings ie JOIN embeddings e ON e.text_hash = ie.text_hash AND e.model = ie.model
            WHERE ie.model = $model""", {"vec": [float(x) for x in vector], "model": model}).fetchnumpy()
        repos, numbers, scores = cols["repo"].astype(str), cols["number"].astype(np.int64), cols["score"]
    out = np.zeros(len(lex), dtype=np.float32)
    if len(numbers):
        rows = lex.rows_of(repos, numbers)
        ok = rows >= 0
        out[rows[ok]] = np.asarray(scores, dtype=np.float32)[ok]
    return out


_DETAILS_SELECT = """
    SELECT i.repo, i.number, i.title, i.state, i.html_url, i.closed_at, g.known_fix AS team_fix,
           (SELECT list(l.pr_number ORDER BY l.pr_number) FROM issue_links l
            WHERE l.issue_repo = i.repo AND l.issue_number = i.number) AS fixed_by,
           (SELECT p.known_fixes FROM predictions p WHERE p.repo = i.repo AND p.number = i.number
            ORDER BY p.labeled_at DESC LIMIT 1) AS model_fixes
    FROM issues i"""
_GOLD_JOIN = """
    LEFT JOIN gold_labels g ON g.repo = i.repo AND g.number = i.number"""
_DETAILS = _DETAILS_SELECT + """ JOIN (SELECT unnest($repos) AS repo, unnest($numbers) AS number) k
         ON k.repo = i.repo AND k.number = i.number""" + _GOLD_JOIN
_ALL_DETAILS = _DETAILS_SELECT + _GOLD_JOIN  # every issue: read once by a long-lived process


def details(con, keys: list[tuple[str, int]], index=None, model: str = "") -> dict[tuple[str, int], dict]:
    """What a similar issue is shown with: title, state, URL, the PRs linked as fixing it, the recorded fix.
    `index` (a NeighbourIndex of a long-lived process, with the `model` of its vectors): the details of every
    issue are read once and kept while nothing can change, so a question costs no query."""
    if not keys:
        return {}
    if index is not None and index.stable(con, model):
        every = index.memo(con, model, "similar-details", lambda: _details_rows(con.execute(_ALL_DETAILS)))
        return {k: every[k] for k in keys if k in every}
    return _details_rows(con.execute(_DETAILS, {"repos": [k[0] for k in keys], "numbers": [int(k[1]) for k in keys]}))


def _details_rows(cur) -> dict[tuple[str, int], dict]:
    names = [d[0] for d in cur.description]
    out = {}
    for row in cur.fetchall():
        r = dict(zip(names, row))
        model_fixes = [f for f in (r.pop("model_fixes") or []) if f != "none"]
        team = r.pop("team_fix")
        r["fixed_by"] = list(r["fixed_by"] or [])
        r["fixed"] = bool(r["fixed_by"])  # a linked fixing PR; "closed" alone is not "fixed"
        r["known_fix"] = team if team and team != "none" else (model_fixes[0] if model_fixes else None)
        r["fix_source"] = ("team" if team and team != "none" else "model") if r["known_fix"] else None
        out[(r["repo"], r["number"])] = r
    return out


def similar_issues(con, vector, model: str, text: str, limit: int = 5, exclude: tuple[str, int] | None = None,
                   index=None, lex=None, build_missing: bool = True, floor: float = FLOOR) -> list[dict]:
    """Up to `limit` issues similar to a question (its MiniLM `vector` and its `text`), best first, none below
    `floor`: repo, number, title, state, html_url, score, cosine, bm25, fixed_by, fixed, known_fix, fix_source.
    Without a lexical index (none built and `build_missing` False) the lexical part is 0."""
    from retriage.db import lexical

    if limit <= 0:
        return []
    if lex is None and index is not None:  # a long-lived process: the database cannot change under a read-only one
        lex = index.memo(con, model, "lexical-index", lambda: lexical.load(con, "similar", build_missing=build_missing))
    elif lex is None:
        lex = lexical.load(con, "similar", build_missing=build_missing)
    if lex is None or not len(lex):
        return []
    cos = cosines_by_row(con, lex, vector, model, index)
    bm = lex.score(text)[0] if text and text.strip() else np.zeros(len(lex), dtype=np.float32)
    ex = lex.row(*exclude) if exclude else None
    top = rank(cos, bm, limit, ex, floor)
    keys = [(str(lex.repos[i]), int(lex.numbers[i])) for i, _ in top]
    info = details(con, keys, index, model)
    out = []
    for (i, score), k in zip(top, keys):
        if k in info:
            out.append({**info[k], "score": round(score, 4), "cosine": round(float(cos[i]), 4),
                        "bm25": round(float(bm[i]), 2)})
    return out
