"""Similar issues: the stored issues whose MiniLM vector is nearest a question's, best first, none under FLOOR.

One path for `show` (the issue's own stored vector) and `classify` (the log's first view); the cosines come
from DuckDB (one query) or, in a process that asks many times, from the vectors held in numpy
(`db/neighbours.NeighbourIndex`, the same rows and order). BM25 fused with the cosine was tried
and dropped: on the duplicate pairs of bench/duplicates it found the original no more often than the cosine
alone (R@5 0.581 each on 43 pairs, in one run), so it did not pay for its index.

`FLOOR` is above the best cosine of questions that name no failure ("hello world", "good morning, nice project",
...: at most 0.593 over the snapshot, printed by bench/duplicates), so they list no similar issue. Each row also
says whether a pull request that fixes the issue is linked (`issue_links`: "closed" is not "fixed", trackers
close stale issues) and the recorded fix (the team's `gold_labels.known_fix`, else the current model's
`predictions.known_fixes`).
"""

from __future__ import annotations

import numpy as np

SHOWN = ("repo", "number", "title", "state", "score", "html_url", "known_fix", "fix_source", "fixed", "fixed_by")
FLOOR = 0.6

_DETAILS = """
    SELECT i.repo, i.number, i.title, i.state, i.html_url, i.closed_at, g.known_fix AS team_fix,
           (SELECT list(l.pr_number ORDER BY l.pr_number) FROM issue_links l
            WHERE l.issue_repo = i.repo AND l.issue_number = i.number) AS fixed_by,
           (SELECT p.known_fixes FROM predictions p WHERE p.repo = i.repo AND p.number = i.number
            ORDER BY p.labeled_at DESC LIMIT 1) AS model_fixes
    FROM issues i JOIN (SELECT unnest($repos) AS repo, unnest($numbers) AS number) k
         ON k.repo = i.repo AND k.number = i.number
    LEFT JOIN gold_labels g ON g.repo = i.repo AND g.number = i.number"""


def details(con, keys: list[tuple[str, int]]) -> dict[tuple[str, int], dict]:
    """What a similar issue is shown with: title, state, URL, the PRs linked as fixing it, the recorded fix."""
    if not keys:
        return {}
    cur = con.execute(_DETAILS, {"repos": [k[0] for k in keys], "numbers": [int(k[1]) for k in keys]})
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


_NEAREST = """
    SELECT * FROM (
        SELECT ie.repo, ie.number, array_cosine_similarity(e.vector, $vec::FLOAT[384]) AS score
        FROM issue_embeddings ie
        JOIN embeddings e ON e.text_hash = ie.text_hash AND e.model = ie.model
        JOIN issues i ON i.repo = ie.repo AND i.number = ie.number
        WHERE ie.model = $model AND NOT i.is_pull_request
          AND ($exr IS NULL OR NOT (ie.repo = $exr AND ie.number = $exn)))
    WHERE isfinite(score) AND score >= $floor
    ORDER BY score DESC, repo, number LIMIT $limit"""


def similar_issues(con, vector, model: str, limit: int = 5, exclude: tuple[str, int] | None = None,
                   index=None, floor: float = FLOOR) -> list[dict]:
    """Up to `limit` issues whose stored vector is nearest `vector` (cosine), best first, none below `floor`:
    repo, number, title, state, html_url, closed_at, score and cosine (the same number), bm25 (None: there is no
    lexical part), fixed_by, fixed, known_fix, fix_source. `index`: a NeighbourIndex holding the vectors (a process
    that asks many times); without one DuckDB computes the cosines (one query; a stored vector holding NaN or
    infinity is left out either way)."""
    if limit <= 0 or not np.isfinite(np.asarray(vector, dtype=np.float32)).all():
        return []
    if index is not None:
        nearest = [(n["repo"], n["number"], n["score"])
                   for n in index.search(con, vector, model, limit=limit, exclude=exclude) if n["score"] >= floor]
    else:
        exr, exn = exclude if exclude else (None, None)
        nearest = con.execute(_NEAREST, {"vec": [float(x) for x in vector], "model": model, "exr": exr,
                                         "exn": exn, "floor": float(floor), "limit": limit}).fetchall()
    info = details(con, [(repo, number) for repo, number, _ in nearest])
    out = []
    for repo, number, score in nearest:
        if (repo, number) in info:
            score = round(float(score), 4)
            out.append({**info[(repo, number)], "score": score, "cosine": score, "bm25": None})
    return out
