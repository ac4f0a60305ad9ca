"""The engine version of each stored issue (issue_versions, db/migrations/005): parsed from the body by
taxonomy/versions.py and stored whenever issues are written (`writes.upsert_issues`: import, demo, mine, show's
fetch), filled in for issues stored before migration 005 (`fill_missing`, at the start of `label`), and read by
`list --version`, `show` and the bot.

The rows depend only on the issue's text: re-labeling never touches them; an edited body replaces them.
"""

from __future__ import annotations

from typing import Iterable

import duckdb

from retriage import taxonomy
from retriage.taxonomy import versions as tv

COLUMNS = ("repo", "number", "engine", "version", "release", "sort_key", "role", "source")
_TYPES = ("TEXT", "INTEGER", "TEXT", "TEXT", "TEXT", "DOUBLE", "TEXT", "TEXT")
FILL_CHUNK = 2000
MATCHED_ROLES = ("reported", "bad")  # the versions an issue is "on" for `--version`; `good` is where it worked


def has_table(con) -> bool:
    """False on a database made before migration 005 and opened read-only (readers do not migrate)."""
    return con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'issue_versions'"
                       ).fetchone()[0] > 0


def rows_for(issues: Iterable[dict]) -> list[tuple]:
    """The issue_versions rows of issue records (dicts with repo, number, body; pull requests skipped)."""
    out = []
    for r in issues:
        if r.get("is_pull_request"):
            continue
        for v in tv.parse_issue(r["repo"], r.get("body")):
            out.append((r["repo"], r["number"], v.engine, v.version, v.release, v.sort_key, v.role, v.source))
    return out


def store(con: duckdb.DuckDBPyConnection, issues: list[dict]) -> int:
    """Replace the version rows of these issues (inside the caller's transaction). Returns the rows written."""
    if not issues or not has_table(con):
        return 0
    keys = sorted({(r["repo"], r["number"]) for r in issues})
    con.execute("DELETE FROM issue_versions WHERE (repo, number) IN "
                "(SELECT (unnest($1::TEXT[]), unnest($2::INTEGER[])))",
                [[k[0] for k in keys], [k[1] for k in keys]])
    rows = list({(r[0], r[1], r[6], r[3]): r for r in rows_for(issues)}.values())  # the primary key, once
    if rows:
        select = ", ".join(f"unnest(${i + 1}::{t}[])" for i, t in enumerate(_TYPES))
        con.execute(f"INSERT INTO issue_versions ({', '.join(COLUMNS)}) SELECT {select}",
                    [[r[i] for r in rows] for i in range(len(COLUMNS))])
        mark_counted(con, keys)
    return len(rows)


PICK = "CASE WHEN release IN ('main', 'unknown') THEN -1e300 ELSE sort_key END"  # numbered first, then newest


def mark_counted(con, keys: list[tuple[str, int]] | None = None) -> None:
    """Set `counted` on the one row per issue that per-release counts use (of these issues, or of all): a
    regression report's (good and bad rows) newest bad version, else its newest reported version, a numbered
    release over main/unknown. Chosen once at write time, so `report --releases` reads one row per issue."""
    scope = ("WHERE (repo, number) IN (SELECT (unnest($1::TEXT[]), unnest($2::INTEGER[])))" if keys is not None
             else "")
    args = [[k[0] for k in keys], [k[1] for k in keys]] if keys is not None else []
    con.execute(f"""
        UPDATE issue_versions v SET counted = (v.role = s.role AND v.version = s.version) FROM (
            SELECT repo, number, CASE WHEN regression THEN 'bad' ELSE 'reported' END AS role,
                   CASE WHEN regression THEN bad ELSE reported END AS version
            FROM (SELECT repo, number, bool_or(role = 'good') AND bool_or(role = 'bad') AS regression,
                         arg_max(version, {PICK}) FILTER (WHERE role = 'bad') AS bad,
                         arg_max(version, {PICK}) FILTER (WHERE role = 'reported') AS reported
                  FROM issue_versions {scope} GROUP BY repo, number)) s
        WHERE v.repo = s.repo AND v.number = s.number""", args)


def fill_missing(con) -> int:
    """Parse and store the versions of stored issues that have none (a database made before migration 005, or
    written by an older retriage). `con` is a connection or a store.Database; each chunk in its own transaction.
    Returns how many issues were filled."""
    from retriage.db.store import transaction

    with transaction(con) as c:
        if not has_table(c):
            return 0
        todo = c.execute("""SELECT i.repo, i.number, i.body, i.is_pull_request FROM issues i
                              WHERE NOT i.is_pull_request AND NOT EXISTS (SELECT 1 FROM issue_versions v
                                    WHERE v.repo = i.repo AND v.number = i.number)
                              ORDER BY i.repo, i.number""").fetchall()
    for start in range(0, len(todo), FILL_CHUNK):
        part = [{"repo": r, "number": n, "body": b, "is_pull_request": pr} for r, n, b, pr in
                todo[start:start + FILL_CHUNK]]
        with transaction(con) as c:
            store(c, part)
    return len(todo)


def of_issue(con, repo: str, number: int) -> list[dict]:
    """The issue's version rows: reported first, then good and bad."""
    if not has_table(con):
        return []
    cur = con.execute(f"""SELECT {', '.join(COLUMNS)} FROM issue_versions WHERE repo = ? AND number = ?
                          ORDER BY CASE role WHEN 'reported' THEN 0 WHEN 'good' THEN 1 ELSE 2 END""",
                      [repo, number])
    return [dict(zip(COLUMNS, row)) for row in cur.fetchall()]


def matching(con, f: tv.VersionFilter) -> set[tuple[str, int]]:
    """The issues whose reported (or broken-on) version matches `--version`: a release, an exact version, or a
    range of one scheme's sort keys (every engine of that scheme)."""
    if not has_table(con):
        return set()
    roles = list(MATCHED_ROLES)
    if f.value is not None:
        rows = con.execute("""SELECT DISTINCT repo, number FROM issue_versions
                              WHERE (version = $v OR release = $v) AND list_contains($roles, role)""",
                           {"v": f.value, "roles": roles}).fetchall()
    else:
        rows = con.execute("""SELECT DISTINCT repo, number FROM issue_versions
                              WHERE list_contains($engines, engine) AND sort_key BETWEEN $lo AND $hi
                                AND list_contains($roles, role)""",
                           {"engines": f.engines(), "lo": f.lo, "hi": f.hi, "roles": roles}).fetchall()
    return {(r, n) for r, n in rows}


def same_release_count(con, engine: str, release: str, re_class: str, model_version: str | None,
                       exclude: tuple[str, int]) -> int:
    """How many other issues reported on this engine's release carry this class (a correction, else the
    prediction of `model_version`)."""
    from retriage.db.queries import latest_corrections

    return con.execute(f"""
        WITH cls AS (SELECT p.repo, p.number, coalesce(c.re_class, p.re_class) AS re_class
                     FROM predictions p LEFT JOIN {latest_corrections(con)} c
                          ON c.repo = p.repo AND c.number = p.number
                     WHERE p.model_version = $mv OR $mv IS NULL)
        SELECT count(DISTINCT (v.repo, v.number)) FROM issue_versions v JOIN cls
               ON cls.repo = v.repo AND cls.number = v.number
        WHERE v.engine = $engine AND v.release = $release AND v.role = 'reported' AND cls.re_class = $cls
          AND NOT (v.repo = $repo AND v.number = $number)""",
        {"mv": model_version, "engine": engine, "release": release, "cls": re_class, "repo": exclude[0],
         "number": exclude[1]}).fetchone()[0]


def _engine_name(stored: str) -> str:
    eid = tv.engine_id(stored)
    return next((e.name for e in taxonomy.engines() if e.id == eid), stored)


def reported_on(con, repo: str, number: int, re_class: str | None, model_version: str | None) -> str | None:
    """One sentence for `show` and the bot: "reported on vLLM 0.26.0 — 4 other RE.3 reports on 0.26", or for a
    regression report "regression: worked on vLLM 0.8.4, broken on 0.8.5 — ..."; None when the version is
    unknown (or the database has no versions)."""
    rows = {r["role"]: r for r in of_issue(con, repo, number)}
    rep = rows.get("reported")
    if rep is None or (rep["version"] == tv.UNKNOWN and "bad" not in rows):
        return None
    name = _engine_name(rep["engine"])
    if "good" in rows and "bad" in rows:
        text = f"regression: worked on {name} {rows['good']['version']}, broken on {rows['bad']['version']}"
    else:
        text = f"reported on {name} {rep['version']}"
    if rep["release"] in (tv.MAIN, tv.UNKNOWN) or not re_class:
        return text
    n = same_release_count(con, rep["engine"], rep["release"], re_class, model_version, (repo, number))
    what = f"{re_class} reports" if re_class != "none" else "reports of no resource class"
    return f"{text} — {n} other {what} on {rep['release']}"
