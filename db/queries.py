"""Read queries: one issue with everything known about it, store statistics, nearest neighbours."""

from __future__ import annotations

import math

import duckdb


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params=None) -> list[dict]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def get_issue(con: duckdb.DuckDBPyConnection, repo: str, number: int) -> dict | None:
    rows = _rows(con, "SELECT * FROM issues WHERE repo = ? AND number = ?", [repo, number])
    return rows[0] if rows else None


def latest_prediction(con, repo: str, number: int, model_version: str | None = None) -> dict | None:
    """The newest prediction of the issue (of `model_version`, if given), with `made_by` and `note`: how it was
    made (None when not recorded: stored before schema version 4, or by a script)."""
    sql = f"""SELECT p.*, v.made_by, v.note FROM predictions p LEFT JOIN {provenance(con)} v
              ON v.repo = p.repo AND v.number = p.number AND v.model_version = p.model_version
                 AND v.labeled_at = p.labeled_at
              WHERE p.repo = ? AND p.number = ?"""
    params: list = [repo, number]
    if model_version:
        sql += " AND p.model_version = ?"
        params.append(model_version)
    rows = _rows(con, sql + " ORDER BY p.labeled_at DESC LIMIT 1", params)
    return rows[0] if rows else None


def provenance(con) -> str:
    """The prediction_provenance table (db/migrations/004_prediction_provenance.sql), or an empty stand-in on a
    database of an older schema opened read-only (readers do not migrate)."""
    if con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'prediction_provenance'"
                   ).fetchone()[0]:
        return "prediction_provenance"
    return ("(SELECT NULL::TEXT AS repo, NULL::INTEGER AS number, NULL::TEXT AS model_version, "
            "NULL::TIMESTAMP AS labeled_at, NULL::TEXT AS made_by, NULL::TEXT AS note WHERE false)")


def gold_label(con, repo: str, number: int) -> dict | None:
    rows = _rows(con, "SELECT re_class, component, known_fix, reason, labeler FROM gold_labels "
                      "WHERE repo = ? AND number = ?", [repo, number])
    return rows[0] if rows else None


def _has_corrections(con) -> bool:
    """A database of schema version 1, opened read-only (not migrated), has no corrections table."""
    return con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'corrections'"
                       ).fetchone()[0] > 0


def latest_corrections(con) -> str:
    """A subquery: the correction in force per issue (none on a database from before corrections)."""
    if not _has_corrections(con):
        return ("(SELECT NULL::TEXT AS repo, NULL::INTEGER AS number, NULL::TEXT AS re_class, NULL::TEXT AS component, "
                "NULL::TEXT AS known_fix WHERE false)")
    return """(SELECT * FROM corrections
               QUALIFY row_number() OVER (PARTITION BY repo, number ORDER BY corrected_at DESC) = 1)"""


def correction(con, repo: str, number: int) -> dict | None:
    """The correction in force for this issue (`retriage relabel`), with how many were recorded."""
    if not _has_corrections(con):
        return None
    rows = _rows(con, "SELECT *, count(*) OVER () AS corrections FROM corrections WHERE repo = ? AND number = ? "
                      "ORDER BY corrected_at DESC LIMIT 1", [repo, number])
    return rows[0] if rows else None


def corrections(con) -> list[dict]:
    """Every issue's correction in force, with the issue's text when the database has it (for `train`)."""
    if not _has_corrections(con):
        return []
    return _rows(con, f"""SELECT c.*, i.title, i.body, i.html_url, i.state, i.created_at
                          FROM {latest_corrections(con)} c LEFT JOIN issues i USING (repo, number)
                          ORDER BY c.repo, c.number""")


def links(con, repo: str, number: int) -> dict:
    """Pull requests that fix this issue, and issues this pull request fixes."""
    fixed_by = [r["pr_number"] for r in _rows(
        con, "SELECT pr_number FROM issue_links WHERE issue_repo = ? AND issue_number = ? ORDER BY 1",
        [repo, number])]
    fixes = [r["issue_number"] for r in _rows(
        con, "SELECT issue_number FROM issue_links WHERE repo = ? AND pr_number = ? ORDER BY 1", [repo, number])]
    return {"fixed_by": fixed_by, "fixes": fixes}


def stats(con: duckdb.DuckDBPyConnection, model_version: str | None = None) -> dict:
    per_repo = _rows(con, """
        SELECT i.repo,
               count(*) FILTER (WHERE NOT i.is_pull_request) AS issues,
               count(*) FILTER (WHERE i.is_pull_request) AS pull_requests,
               min(i.created_at) AS first_created, max(i.created_at) AS last_created,
               count(DISTINCT p.number) FILTER (WHERE NOT i.is_pull_request) AS labeled
        FROM issues i
        LEFT JOIN predictions p ON p.repo = i.repo AND p.number = i.number
             AND (p.model_version = $mv OR $mv IS NULL)
        GROUP BY i.repo ORDER BY i.repo""", {"mv": model_version})
    total = sum(r["issues"] for r in per_repo)
    labeled = sum(r["labeled"] for r in per_repo)
    for r in per_repo:
        r["share_labeled"] = round(r["labeled"] / r["issues"], 4) if r["issues"] else 0.0
    comments = con.execute("SELECT count(*) FROM comments").fetchone()[0]
    gold = con.execute("SELECT count(*) FROM gold_labels").fetchone()[0]
    return {
        "repos": per_repo,
        "issues": total,
        "pull_requests": sum(r["pull_requests"] for r in per_repo),
        "comments": comments,
        "labeled": labeled,
        "share_labeled": round(labeled / total, 4) if total else 0.0,
        "gold_labels": gold,
        "model_version": model_version,
    }


def similar_to_vector(con, vector, model: str, limit: int = 5, exclude: tuple[str, int] | None = None,
                      include_prs: bool = False) -> list[dict]:
    """Nearest issues by cosine similarity of stored embeddings (DuckDB's array_cosine_similarity); stored
    vectors holding NaN or infinity (a NaN score) are left out, and so is everything for such a `vector`."""
    ex_repo, ex_num = exclude if exclude else (None, None)
    if not all(math.isfinite(float(x)) for x in vector):
        return []
    return _rows(con, """
        SELECT * FROM (SELECT i.repo, i.number, i.title, i.state, i.labels, i.html_url,
               array_cosine_similarity(e.vector, $vec::FLOAT[384]) AS score,
               g.known_fix AS known_fix
        FROM issue_embeddings ie
        JOIN embeddings e ON e.text_hash = ie.text_hash AND e.model = ie.model
        JOIN issues i ON i.repo = ie.repo AND i.number = ie.number
        LEFT JOIN gold_labels g ON g.repo = i.repo AND g.number = i.number
        WHERE ie.model = $model AND ($inc OR NOT i.is_pull_request)
          AND NOT (i.repo IS NOT DISTINCT FROM $exr AND i.number IS NOT DISTINCT FROM $exn)
        ) WHERE isfinite(score) ORDER BY score DESC LIMIT $lim""",
        {"vec": [float(x) for x in vector], "model": model, "lim": limit, "exr": ex_repo, "exn": ex_num,
         "inc": include_prs})


def issue_vector(con, repo: str, number: int, model: str):
    row = con.execute("""SELECT e.vector FROM issue_embeddings ie JOIN embeddings e
                         ON e.text_hash = ie.text_hash AND e.model = ie.model
                         WHERE ie.repo = ? AND ie.number = ? AND ie.model = ?""", [repo, number, model]).fetchone()
    return row[0] if row else None


LIST_SORTS = {"created": "i.created_at DESC", "updated": "i.updated_at DESC", "oldest": "i.created_at ASC",
              "confidence": "p.confidence DESC", "number": "i.repo, i.number"}
LIST_COLUMNS = ("repo", "number", "title", "state", "created_at", "updated_at", "re_class", "component",
                "confidence", "abstained", "known_fixes", "html_url", "corrected", "made_by", "note")


def list_issues(con: duckdb.DuckDBPyConnection, model_version: str | None, repos: list[str] | None = None,
                re_class: str | None = None, component: str | None = None, fix: str | None = None,
                state: str | None = None, since=None, until=None, unsure: bool | None = None,
                sort: str = "created", limit: int = 20) -> list[dict]:
    """Issues (not pull requests) with this model's prediction, filtered; `until` is an inclusive day,
    `unsure` True keeps only abstentions, False only confident answers. Newest first by default. A correction
    (`retriage relabel`) replaces the prediction's class, component and fixes (`corrected` true; never unsure, no
    `note`). `made_by` and `note`: how the prediction was made, and why a resource fix is missing or to be checked
    beside the class none (prediction_provenance; NULL where not recorded)."""
    conditions = {  # parameter -> (condition, value); a condition counts when its value is not None
        "cls": ("p.re_class = $cls", re_class), "comp": ("p.component = $comp", component),
        "state": ("i.state = $state", state), "repos": ("list_contains($repos, i.repo)", repos or None),
        "fix": ("list_contains(p.known_fixes, $fix)", fix), "since": ("i.created_at >= $since", since),
        "until": ("i.created_at < $until + INTERVAL 1 DAY", until), "unsure": ("p.abstained = $unsure", unsure),
    }
    corrected = f"""(SELECT p.repo, p.number, coalesce(c.re_class, p.re_class) AS re_class,
                        coalesce(c.component, p.component) AS component, p.confidence,
                        p.abstained AND c.repo IS NULL AS abstained,
                        CASE WHEN c.repo IS NULL THEN p.known_fixes WHEN c.known_fix = 'none' THEN []::TEXT[]
                             ELSE [c.known_fix] END AS known_fixes,
                        c.repo IS NOT NULL AS corrected, v.made_by, CASE WHEN c.repo IS NULL THEN v.note END AS note
                     FROM predictions p LEFT JOIN {latest_corrections(con)} c ON c.repo = p.repo AND c.number = p.number
                     LEFT JOIN {provenance(con)} v ON v.repo = p.repo AND v.number = p.number
                          AND v.model_version = p.model_version AND v.labeled_at = p.labeled_at
                     WHERE p.model_version = $mv)"""
    where = ["NOT i.is_pull_request"] + [c for c, v in conditions.values() if v is not None]
    params = {"mv": model_version, "limit": limit} | {k: v for k, (_, v) in conditions.items() if v is not None}
    return _rows(con, f"""
        SELECT i.repo, i.number, i.title, i.state, i.created_at, i.updated_at, p.re_class, p.component,
               p.confidence, p.abstained, p.known_fixes, i.html_url, p.corrected, p.made_by, p.note
        FROM issues i JOIN {corrected} p ON p.repo = i.repo AND p.number = i.number
        WHERE {' AND '.join(where)}
        ORDER BY {LIST_SORTS[sort]}, i.repo, i.number
        LIMIT $limit""", params)
